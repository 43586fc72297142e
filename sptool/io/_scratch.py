"""Temporary files and directories named after the process that owns them, and the sweep that
removes those of a process that is gone.

A catchable signal or an error removes a command's temporaries on the way out; SIGKILL (or a
power cut) leaves them.  Each name carries the owner's PID and its start time (clock ticks
since boot, from /proc: a PID can be reused, the pair cannot), so the next command that makes
a temporary in the same directory can tell the leftovers of a dead process from those of a
live one, and removes them with a one-line note on stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import uuid

from ._url import absolute, is_remote, join_path, local_only, split


def _start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` in hex clock ticks, or None if there is no such
    process (or no /proc to ask: then only whether the PID exists is known)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) is in parentheses and may itself hold spaces.
    fields = stat[stat.rfind(b")") + 2:].split()
    return format(int(fields[19]), "x")


_OWNER = f"{os.getpid()}-{_start_ticks(os.getpid()) or '0'}"
_OWNER_PID = os.getpid()

# A hidden sibling of an output: .NAME.tmp-PID-START-RAND, .NAME.old-..., .NAME.spool-...
_SIBLING = re.compile(r"^\..+\.(tmp|old|spool)-(\d+)-([0-9a-f]+)-[0-9a-f]{8}(\.parquet)?$")
# A scratch directory: sptool-KIND-PID-START-RAND (RAND from tempfile).
_SCRATCH = re.compile(r"^sptool-[a-z]+-(\d+)-([0-9a-f]+)-[a-z0-9_]+$")


def owner() -> str:
    """PID-START of this process (re-read after a fork: a child owns its own temporaries)."""
    global _OWNER, _OWNER_PID
    if os.getpid() != _OWNER_PID:
        _OWNER_PID = os.getpid()
        _OWNER = f"{_OWNER_PID}-{_start_ticks(_OWNER_PID) or '0'}"
    return _OWNER


def _alive(pid: int, start: str) -> bool:
    ticks = _start_ticks(pid)
    if ticks is not None:
        return start == "0" or ticks == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def sibling_name(path: str, tag: str, suffix: str = "") -> str:
    """A hidden temporary next to ``path``: .NAME.TAG-PID-START-RAND[suffix]."""
    head, tail = split(absolute(path))
    return join_path(head, f".{tail}.{tag}-{owner()}-{uuid.uuid4().hex[:8]}{suffix}")


# Scratch directories made by this process and perhaps not removed yet.  A directory's owner
# removes it in a ``with`` or ``finally``, but an owner suspended in a generator (one operand's
# external sort while a merge join reads the other) is never resumed when an error or Ctrl-C
# unwinds past it, and the command line ends with os._exit, which runs no finalizer: the
# command line removes what is still here on its way out (remove_live_scratch).
_LIVE: dict[str, list] = {}  # path -> what stops its writers (called before it is removed)
# Where this process makes scratch directories, noted before each is made: a signal can land
# between mkdtemp and its registration, and the cleanup still finds the directory by its name.
_PARENTS: set[str] = set()


def _registered(path: str) -> str:
    for old in [p for p in _LIVE if not os.path.exists(p)]:
        del _LIVE[old]
    _LIVE[path] = []
    return path


def before_removal(path: str, stop) -> None:
    """Have ``stop()`` called before remove_live_scratch removes ``path``: a thread that writes
    into it (a sort's spill thread) must be done first, or it could add a file while the
    directory is being removed, and the directory would stay."""
    if path in _LIVE:
        _LIVE[path].append(stop)


def scratch_dir(kind: str, tmp_dir: str | None = None) -> tempfile.TemporaryDirectory:
    """A TemporaryDirectory sptool-KIND-PID-START-RAND in ``tmp_dir`` (default: the system's),
    made after sweeping that directory of a dead process's scratch directories."""
    tmp_dir = local_only(tmp_dir, "--tmp-dir")  # spilled runs are read back by memory maps
    _PARENTS.add(os.path.abspath(tmp_dir or tempfile.gettempdir()))
    sweep(tmp_dir or tempfile.gettempdir())
    made = tempfile.TemporaryDirectory(prefix=f"sptool-{kind}-{owner()}-", dir=tmp_dir)
    _registered(made.name)
    return made


def make_scratch_dir(kind: str, tmp_dir: str | None = None) -> str:
    """As scratch_dir, for a caller that removes the directory itself."""
    tmp_dir = local_only(tmp_dir, "--tmp-dir")  # spilled runs are read back by memory maps
    _PARENTS.add(os.path.abspath(tmp_dir or tempfile.gettempdir()))
    sweep(tmp_dir or tempfile.gettempdir())
    return _registered(tempfile.mkdtemp(prefix=f"sptool-{kind}-{owner()}-", dir=tmp_dir))


def remove_live_scratch() -> None:
    """Remove every scratch directory this process made and has not removed (the command
    line's last step when a command is interrupted or fails; never during one), once the
    threads writing into it have stopped."""
    for path, stops in list(_LIVE.items()):
        for stop in stops:
            try:
                stop()
            except Exception:  # a writer that failed has stopped writing too
                pass
        shutil.rmtree(path, ignore_errors=True)
        _LIVE.pop(path, None)
    mine = f"-{owner()}-"
    for parent in _PARENTS:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if _SCRATCH.match(name) and mine in name:
                shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def stale(name: str) -> bool:
    """Whether ``name`` is an sptool temporary whose owner is no longer running."""
    m = _SIBLING.match(name)
    if m:
        pid, start = int(m.group(2)), m.group(3)
    else:
        m = _SCRATCH.match(name)
        if not m:
            return False
        pid, start = int(m.group(1)), m.group(2)
    return pid != os.getpid() and not _alive(pid, start)


def sweep(folder: str) -> list[str]:
    """Remove the temporaries in ``folder`` left by processes that are gone (SIGKILLed); say so
    on stderr, one line each.  Returns the names removed.  Never fails the command: a
    leftover that cannot be removed (another user's, a race with a second sweeper) stays."""
    if is_remote(folder):
        # Whether the owner of a temporary on remote storage is alive cannot be told from here
        # (its PID may be another machine's): those are left, hidden, for the user to remove.
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        if not (name.startswith(("sptool-", ".")) and stale(name)):
            continue
        path = os.path.join(os.path.abspath(folder), name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except OSError:
            continue
        removed.append(name)
        print(f"sptool: removed {path}, left by an sptool process that is no longer running",
              file=sys.stderr)
    return removed
