"""Outputs appear whole or not at all: write to a hidden sibling, rename on success."""

from __future__ import annotations

import os

from .._commits import committed
from ..errors import UsageError
from ._scratch import sibling_name, sweep
from ._url import is_remote, kind_of, listing, local_only, local_path, make_dir, move, move_dir, remove_path, split
from .source import is_part_name


def check_replaceable_dir(path: str):
    """Refuse to replace a directory that is not an sptool dataset: it may be anything."""
    for name, _ in listing(path):
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
    ``abort``: a failed command leaves nothing behind.

    A URL of another filesystem (s3://...) is written there when the caller writes through the
    filesystem (``remote=True``: it opens ``tmp`` with io/_url.py's open_output); the temporary is
    a hidden sibling object (or a prefix, for a directory), moved into place by the filesystem.
    Other callers write ``tmp`` as a local file (memory maps, np.save) and are refused a URL."""

    def __init__(self, final: str, *, is_dir: bool, remote: bool = False):
        final = local_path(final) if remote else local_only(final, "this output")
        self.final = final
        self.is_dir = is_dir
        self.made: list[str] = []  # parent directories this target created, deepest last
        if is_remote(final):
            self._open_remote()
            return
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
        sweep(os.path.dirname(os.path.abspath(final)))  # this host's SIGKILLed runs' .NAME.tmp-HOST-PID-... files
        self.tmp = sibling_name(final, "tmp")
        _LIVE[id(self)] = self
        if is_dir:
            os.mkdir(self.tmp)

    def _open_remote(self):
        found = kind_of(self.final)
        if found == "dir" and not self.is_dir:
            raise UsageError("is a directory; give a file name ending in .parquet", path=self.final)
        if found == "dir":
            check_replaceable_dir(self.final)
        parent = split(self.final)[0]
        while not parent.endswith("://") and kind_of(parent) is None:
            self.made.insert(0, parent)
            parent = split(parent)[0]
        if self.made:
            make_dir(self.made[-1])
        self.tmp = sibling_name(self.final, "tmp")
        _LIVE[id(self)] = self
        if self.is_dir:
            make_dir(self.tmp)

    def commit(self):
        if self.is_dir:
            commit_all([self])
            return
        _LIVE.pop(id(self), None)
        move(self.tmp, self.final)  # a rename (a copy on an object store) that replaces the file
        committed(self.final)

    def abort(self):
        remove_path(self.tmp)
        self._remove_made()
        _LIVE.pop(id(self), None)  # last: an abort cut short by a second signal is done again

    def _remove_made(self):
        if is_remote(self.final):
            for d in reversed(self.made):
                if listing(d):
                    break  # something else has written there meanwhile
                remove_path(d)
            self.made = []
            return
        for d in reversed(self.made):
            try:
                os.rmdir(d)  # only if still empty: something else may have written there meanwhile
            except OSError:
                break
        self.made = []


def commit_all(targets: list[AtomicTarget]) -> None:
    """Commit several targets all or none, as far as moves allow: every existing final moved
    aside first, then every temporary moved into place; a failure on the way moves back what was
    done (the targets stay uncommitted, for ``abort``), and only once all are in place are the
    previous outputs removed.  Locally (and on HDFS) each move is a rename; on an object store a
    directory moves part by part (io/_url.py move_dir), so a reader listing it during the moves
    sees some of its parts (formats/SPEC.md §2.5), and a failure among them moves the parts
    already moved back.  A process killed between the moves leaves some outputs new and the
    others' previous contents in hidden ``.NAME.old-*`` siblings (swept later as a dead
    process's temporaries by a command on the same host, on local storage: _scratch.py)."""
    done: list[tuple[str, str, bool]] = []  # (from, to, is a directory) moves begun, in order
    try:
        for t in targets:
            if _exists(t.final):
                old = sibling_name(t.final, "old")
                done.append((t.final, old, t.is_dir))
                _move(t.final, old, t.is_dir)
        for t in targets:
            done.append((t.tmp, t.final, t.is_dir))
            _move(t.tmp, t.final, t.is_dir)
    except BaseException:
        for src, dst, is_dir in reversed(done):
            if _exists(dst):  # a move begun: what it took (all, or on an object store some parts) goes back
                _move(dst, src, is_dir)
        raise
    for t in targets:
        _LIVE.pop(id(t), None)
        committed(t.final)
    moved_aside = {t.final for t in targets}
    for src, old, _ in done:
        if src in moved_aside:
            remove_path(old)


def _exists(name: str) -> bool:
    return os.path.lexists(name) if not is_remote(name) else kind_of(name) is not None


def _move(src: str, dst: str, is_dir: bool) -> None:
    """A rename locally; on another filesystem a file moved, or a directory (move_dir: one rename
    where the filesystem has directories, else its files one by one)."""
    (move_dir if is_dir else move)(src, dst)


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
