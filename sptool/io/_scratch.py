"""Temporary files and directories named after the process that owns them, and the sweep that
removes those of a process that is provably gone.

A catchable signal or an error removes a command's temporaries on the way out; SIGKILL (or a
power cut) leaves them.  Each name carries its owner as HOST-PID-START: HOST names the running
kernel and the PID and time namespaces the owner ran in (a short hash of /proc's boot id and the
namespaces' inodes), START the owner's start time (clock ticks since boot: a PID is reused, the
pair is not).  The next command that makes a temporary in the same directory removes, with a
one-line note on stderr, those whose HOST is its own and whose process no longer runs.  Storage
that other machines or containers see (NFS, a shared volume) holds temporaries of processes this
one cannot see: their PIDs say nothing here, so they stay, as does any name whose owner cannot
be told, whatever its age (an old modification time proves no process dead: a suspended one, a
merge reading runs spilled hours ago, an NFS server's clock).  formats/SPEC.md §2.6.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import uuid

from ._url import absolute, is_remote, join_path, local_only, split

# HOST where this process cannot prove which host and namespaces it runs in (no /proc, or a /proc
# of another PID namespace): a sweep removes only its own HOST's temporaries, so never these.
_NO_HOST = "0" * 12


def _start_ticks(pid: int) -> str | None:
    """The start time of process ``pid`` in hex clock ticks, or None if /proc shows no such
    process (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) is in parentheses and may itself hold spaces.
    fields = stat[stat.rfind(b")") + 2:].split()
    return format(int(fields[19]), "x")


def _host_tag() -> str | None:
    """HOST of this process: the first 12 hex digits of the SHA-256 of 'BOOT_ID:PID_NS:TIME_NS'
    (the kernel's boot id, the inodes of this process's PID and time namespaces, 0 for a kernel
    without time namespaces); None unless /proc is this PID namespace's, whose PIDs and start
    times a sweep then reads."""
    try:
        if os.readlink("/proc/self") != str(os.getpid()):
            return None
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
    except (OSError, ValueError):
        return None
    try:
        time_ns = os.stat("/proc/self/ns/time").st_ino  # start times are read in its clock
    except OSError:
        time_ns = 0
    return hashlib.sha256(f"{boot}:{pid_ns}:{time_ns}".encode()).hexdigest()[:12] if boot else None


# (PID, HOST or None, the owner tag HOST-PID-START) of this process, made on first use and again
# after a fork: a child owns its own temporaries.
_ME: tuple[int, str | None, str] | None = None


def _identity() -> tuple[int, str | None, str]:
    global _ME
    pid = os.getpid()
    if _ME is None or _ME[0] != pid:
        host = _host_tag()
        start = _start_ticks(pid) if host else None
        if start is None:  # no start time to prove it by: a random one, and a HOST no sweep owns
            host, start = None, uuid.uuid4().hex[:8]
        _ME = (pid, host, f"{host or _NO_HOST}-{pid}-{start}")
    return _ME


def owner() -> str:
    """HOST-PID-START of this process."""
    return _identity()[2]


_OWNER = r"([0-9a-f]{12})-(\d+)-([0-9a-f]+)"
# A hidden sibling of an output: .NAME.TAG-HOST-PID-START-RAND[.parquet], TAG one of sibling_name's.
_SIBLING = re.compile(rf"^\..+\.(?:tmp|old|spool|stdin|part)-{_OWNER}-[0-9a-f]{{8}}(?:\.parquet)?$")
# A scratch directory: sptool-KIND-HOST-PID-START-RAND (RAND from tempfile).
_SCRATCH = re.compile(rf"^sptool-[a-z]+-{_OWNER}-[a-z0-9_]+$")


def _alive(pid: int, start: str) -> bool:
    """Whether process ``pid`` started at ``start`` runs, asked of a /proc that _host_tag proved
    to be this PID namespace's.  One that exists but /proc hides (mounted with hidepid: another
    user's) counts as running: its start time cannot be compared."""
    ticks = _start_ticks(pid)
    if ticks is not None:
        return ticks == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def sibling_name(path: str, tag: str, suffix: str = "") -> str:
    """A hidden temporary next to ``path``: .NAME.TAG-HOST-PID-START-RAND[suffix]."""
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
    """A TemporaryDirectory sptool-KIND-HOST-PID-START-RAND in ``tmp_dir`` (default: the system's),
    made after sweeping that directory of this host's dead processes' scratch directories."""
    tmp_dir = local_only(tmp_dir, "--tmp-dir", directory=True)  # spilled runs are read back by memory maps
    _PARENTS.add(os.path.abspath(tmp_dir or tempfile.gettempdir()))
    sweep(tmp_dir or tempfile.gettempdir())
    made = tempfile.TemporaryDirectory(prefix=f"sptool-{kind}-{owner()}-", dir=tmp_dir)
    _registered(made.name)
    return made


def make_scratch_dir(kind: str, tmp_dir: str | None = None) -> str:
    """As scratch_dir, for a caller that removes the directory itself."""
    tmp_dir = local_only(tmp_dir, "--tmp-dir", directory=True)  # spilled runs are read back by memory maps
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
    """Whether ``name`` is an sptool temporary provably left by a process that is gone: its
    HOST is this process's (same kernel boot, same namespaces) and no process of its PID and
    start time runs.  Any other (another machine's or container's, one named where the owner
    could not be told, an older sptool's name) is not."""
    m = _SIBLING.match(name) or _SCRATCH.match(name)
    if not m:
        return False
    host = _identity()[1]
    return host is not None and m.group(1) == host and not _alive(int(m.group(2)), m.group(3))


def sweep(folder: str) -> list[str]:
    """Remove the temporaries in ``folder`` left by processes of this host that are gone
    (SIGKILLed); say so on stderr, one line each.  Returns the names removed.  Never fails the
    command: a leftover that cannot be removed (another user's, a race with a second sweeper)
    stays."""
    if is_remote(folder):
        # Not listed at all: a listing per output (each part of a cluster's job) would cost a
        # request each, and the temporaries there are mostly other machines' (workers').
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
