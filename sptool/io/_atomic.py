"""Outputs appear whole or not at all: write to a hidden sibling, rename on success."""

from __future__ import annotations

import os
import shutil

from ..errors import UsageError
from ._scratch import sibling_name, sweep
from .source import is_part_name


def check_replaceable_dir(path: str):
    """Refuse to replace a directory that is not an sptool dataset: it may be anything."""
    for name in os.listdir(path):
        if not (is_part_name(name) or name.startswith((".", "_"))):
            raise UsageError(
                f"refusing to replace directory: it holds {name!r}, which is not a tensor part",
                path=path,
            )


class ClosesOrAborts:
    """A ``with`` block for a writer: ``close()`` when the block ends normally, ``abort()`` (which
    removes what was written) when it raises."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self.close()
            except BaseException:  # Ctrl-C or an error while closing: nothing half-written stays
                self.abort()
                raise
        else:
            self.abort()
        return False


# The temporaries of the targets not yet committed or aborted: what an interrupted command has
# to remove on its way out, even if the signal landed before a sink's own cleanup was in place.
_LIVE: dict[int, AtomicTarget] = {}


def abort_live_targets() -> None:
    """Abort every target neither committed nor aborted yet (the command line's last step when
    a command is interrupted or fails)."""
    for target in list(_LIVE.values()):
        try:
            target.abort()
        except OSError:
            pass


class AtomicTarget:
    """A temporary path to write; ``commit`` moves it over the final path, ``abort`` removes it.

    Missing parent directories are made, as ``-o dir/`` makes its directory, and removed again by
    ``abort``: a failed command leaves nothing behind."""

    def __init__(self, final: str, *, is_dir: bool):
        self.final = final
        self.is_dir = is_dir
        self.made: list[str] = []  # parent directories this target created, deepest last
        parent = os.path.dirname(os.path.abspath(final))
        missing = []
        while parent and not os.path.exists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise UsageError(f"{parent} is not a directory", path=final)
        if is_dir and os.path.isdir(final):
            check_replaceable_dir(final)
        if not is_dir and os.path.isdir(final):
            raise UsageError("is a directory; give a file name ending in .parquet", path=final)
        if os.path.exists(final) and not (os.path.isfile(final) or os.path.isdir(final)):
            # Renaming over a device or a pipe (e.g. /dev/null) would replace it with a file.
            raise UsageError("is not a regular file; name a file, or use -o - for stdout", path=final)
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except OSError as e:
                self._remove_made()
                raise UsageError(f"cannot create the directory {d}: {e.strerror}", path=final) from None
            self.made.append(d)
        sweep(os.path.dirname(os.path.abspath(final)))  # a SIGKILLed run's .NAME.tmp-PID-... files
        self.tmp = sibling_name(final, "tmp")
        _LIVE[id(self)] = self
        if is_dir:
            os.mkdir(self.tmp)

    def commit(self):
        _LIVE.pop(id(self), None)
        if self.is_dir and os.path.exists(self.final):
            old = sibling_name(self.final, "old")
            os.rename(self.final, old)
            os.rename(self.tmp, self.final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.final)

    def abort(self):
        if os.path.isdir(self.tmp):
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif os.path.exists(self.tmp):
            os.remove(self.tmp)
        self._remove_made()
        _LIVE.pop(id(self), None)  # last: an abort cut short by a second signal is done again

    def _remove_made(self):
        for d in reversed(self.made):
            try:
                os.rmdir(d)  # only if still empty: something else may have written there meanwhile
            except OSError:
                break
        self.made = []


def commit_all(targets: list[AtomicTarget]) -> None:
    """Commit several targets all or none, as far as renames allow: every existing final moved
    aside first, then every temporary renamed into place; a failure on the way renames back what
    was done (the targets stay uncommitted, for ``abort``), and only once all are in place are
    the previous outputs removed.  A process killed between the renames leaves some outputs new
    and the others' previous contents in hidden ``.NAME.old-*`` siblings (swept later as a dead
    process's temporaries)."""
    done: list[tuple[str, str]] = []  # (from, to) renames made, in order
    try:
        for t in targets:
            if os.path.lexists(t.final):
                old = sibling_name(t.final, "old")
                os.rename(t.final, old)
                done.append((t.final, old))
        for t in targets:
            os.rename(t.tmp, t.final)
            done.append((t.tmp, t.final))
    except BaseException:
        for src, dst in reversed(done):
            os.rename(dst, src)
        raise
    for t in targets:
        _LIVE.pop(id(t), None)
    moved_aside = {t.final for t in targets}
    for src, old in done:
        if src in moved_aside:
            if os.path.isdir(old):
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.remove(old)


class SideOutputs:
    """Files written beside an output (a converter's labels and query ids): each moved into place
    by ``commit`` once the output itself is, and removed by ``abort`` otherwise.  ``add`` takes
    the writer and, when committing it is more than its ``commit()``, the callable that does it."""

    def __init__(self):
        self.pending: list = []

    def add(self, out, commit=None):
        self.pending.append((out, commit or out.commit))
        return out

    def commit(self):
        while self.pending:
            _, commit = self.pending.pop(0)
            commit()

    def abort(self):
        pending, self.pending = self.pending, []
        for out, _ in pending:
            out.abort()
