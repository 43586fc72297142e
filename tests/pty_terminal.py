"""Running a command as a person does: under a pseudo-terminal that is its controlling terminal.

Everything the process writes to stdout and stderr is captured as raw bytes, escape sequences
included, so tests can see a progress bar being drawn and the cursor being hidden and shown.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

from command_examples import env_with_sptool

HIDE_CURSOR = b"\x1b[?25l"
SHOW_CURSOR = b"\x1b[?25h"
BAR_GLYPH = "━".encode()  # rich's bar segment


def terminal_env() -> dict:
    env = env_with_sptool()
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm-256color"
    env.pop("CI", None)  # rich treats CI=true as "not interactive"; CI itself sets it
    env.pop("TERM_PROGRAM", None)
    env["COLUMNS"], env["LINES"] = "100", "30"
    return env


class Terminal:
    """A child process whose stdout and stderr are a pseudo-terminal (stdin: a pipe or the pty).

    ``send_interrupt()`` types Ctrl-C: the terminal's line discipline turns it into SIGINT for
    the foreground process group, exactly as in a shell.
    """

    def __init__(self, argv, *, cwd, stdin_pipe: bool = False, env=None):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.master = master
        self.output = bytearray()

        def controlling_terminal():
            # start_new_session made this process a session leader; the pty becomes its terminal.
            fcntl.ioctl(1, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env or terminal_env(), stdin=subprocess.PIPE if stdin_pipe else slave,
            stdout=slave, stderr=slave, start_new_session=True, preexec_fn=controlling_terminal,
        )
        os.close(slave)

    def _read_some(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            return False
        if not chunk:
            return False
        self.output += chunk
        return True

    def wait_for(self, needle: bytes, timeout: float = 60) -> bool:
        """Read until ``needle`` has appeared in the output (True) or the time is up (False)."""
        end = time.monotonic() + timeout
        while needle not in self.output and time.monotonic() < end:
            if not self._read_some(0.05) and self.proc.poll() is not None:
                break
        return needle in self.output

    def send_interrupt(self):
        os.write(self.master, b"\x03")

    def finish(self, timeout: float = 120) -> int:
        """Read to the end; the exit code."""
        end = time.monotonic() + timeout
        # Until the terminal's last writer closes it (EIO), or the process is gone and nothing
        # is left to read.
        while time.monotonic() < end and self._read_some(0.05):
            if self.proc.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                break
        code = self.proc.wait(timeout=max(1.0, end - time.monotonic()))
        os.close(self.master)
        return code

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


def run_in_terminal(argv, *, cwd, timeout: float = 120) -> tuple[int, bytes]:
    term = Terminal(argv, cwd=cwd)
    code = term.finish(timeout)
    return code, bytes(term.output)


def cursor_restored(output: bytes) -> bool:
    """Every hide of the cursor is followed, later, by a show."""
    last_hide = output.rfind(HIDE_CURSOR)
    return last_hide == -1 or output.find(SHOW_CURSOR, last_hide) != -1


_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen(output: bytes, width: int = 100) -> list[str]:
    """The lines a terminal shows once ``output`` has been written to it: enough of a terminal
    (carriage return, line feed, cursor up and down, erase in line; styles ignored) to tell a bar
    taken down from a bar left on screen with text glued to it."""
    lines: list[list[str]] = [[]]
    row = col = 0
    text = output.decode("utf-8", "replace")
    i = 0
    while i < len(text):
        ch = text[i]
        m = _CONTROL.match(text, i) if ch == "\x1b" else None
        if m:
            n = int(m[1]) if m[1].isdigit() else 1
            if m[2] == "A":
                row = max(0, row - n)
            elif m[2] == "B":
                row += n
            elif m[2] == "K":
                lines[row] = [] if m[1] == "2" else lines[row][:col]
            i = m.end()
        else:
            if ch == "\r":
                col = 0
            elif ch == "\n":
                row, col = row + 1, 0
            elif ch >= " ":
                if col >= width:
                    row, col = row + 1, 0
                    lines += [[] for _ in range(row + 1 - len(lines))]
                line = lines[row]
                line += [" "] * (col + 1 - len(line))
                line[col] = ch
                col += 1
            i += 1
        lines += [[] for _ in range(row + 1 - len(lines))]
    return ["".join(line).rstrip() for line in lines if "".join(line).strip()]
