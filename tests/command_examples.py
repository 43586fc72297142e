"""The README's, the documentation's and the --help texts' example command lines, run where they
cannot touch /tmp.

The examples write to /tmp/... because that is what a reader can paste; a test runs each one in
its own temporary directory instead (with sample_data/ linked in, read only), so two test runs
never race on a fixed path and a user's files in /tmp are never overwritten.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from click.testing import CliRunner

from sptool.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def fenced_blocks(path: Path, language: str = "bash") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.S)


def readme_blocks() -> list[str]:
    return fenced_blocks(ROOT / "README.md")


def readme_commands() -> list[str]:
    return [b.strip() for b in readme_blocks()[:2]]


INSTALL = "pip install -e . && "


def readme_job() -> str:
    """The README's first command without its install step (the tests run in an installed tree)."""
    first = readme_commands()[0]
    assert first.startswith(INSTALL), first
    return first.removeprefix(INSTALL)


def readme_tour() -> list[str]:
    """The command names of the README's tour, one line a command."""
    section = (ROOT / "README.md").read_text().split("## Commands", 1)[1]
    (block,) = re.findall(r"```text\n(.*?)```", section, flags=re.S)[:1]
    return [line.split()[0] for line in block.splitlines()]


def help_examples() -> list[tuple[str, list[str]]]:
    """(command name, its example lines in order) from every command's --help; a later line may
    read what an earlier one wrote."""
    found = []
    for name in cli.list_commands(None):
        text = CliRunner().invoke(cli, [name, "--help"]).output
        lines = [ln.strip() for ln in text.split("Example:")[1].splitlines()]
        found.append((name, [ln for ln in lines if ln.startswith("sptool ")]))
    return found


def in_workdir(line: str, workdir: Path) -> str:
    """``line`` rewritten to run with ``workdir`` as its working directory: /tmp/X becomes
    workdir/X, and sample_data/ is a link to the checkout's samples."""
    link = workdir / "sample_data"
    if not link.exists():
        link.symlink_to(ROOT / "sample_data", target_is_directory=True)
    return re.sub(r"(?<![\w.])/tmp/", str(workdir) + "/", line)


def env_with_sptool() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env
