"""The owner tag sptool writes into a temporary's name (HOST-PID-START, formats/SPEC.md §2.6),
made here from the documented recipe and /proc, independently of sptool/io/_scratch.py."""

from __future__ import annotations

import hashlib
import os
import subprocess


def host_tag(boot_id: str | None = None) -> str:
    """HOST for this process's PID and time namespaces and ``boot_id`` (default: this kernel's):
    the first 12 hex digits of the SHA-256 of 'BOOT_ID:PID_NS_INODE:TIME_NS_INODE'."""
    if boot_id is None:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
    pid_ns = os.stat("/proc/self/ns/pid").st_ino
    time_ns = os.stat("/proc/self/ns/time").st_ino if os.path.exists("/proc/self/ns/time") else 0
    return hashlib.sha256(f"{boot_id}:{pid_ns}:{time_ns}".encode()).hexdigest()[:12]


def start_ticks(pid: int) -> str:
    """Field 22 of /proc/PID/stat (the start time in clock ticks since boot), in hex."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return format(int(stat[stat.rfind(b")") + 2:].split()[19]), "x")


def dead_process() -> tuple[int, str]:
    """(PID, start time) of a process that ran and is gone."""
    proc = subprocess.Popen(["sleep", "60"])
    start = start_ticks(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, start
