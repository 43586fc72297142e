"""The README's two commands and every --help example stay true."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sptool.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [b.strip() for b in blocks[:2]]


def _env():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def test_readme_opens_with_two_commands_and_ci_runs_the_second():
    first, second = readme_commands()
    assert first.startswith("pip install . && ") and "sample_data/" in first
    assert second.startswith('pip install ".[test]"') and "pytest" in second
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert second in ci_lines, ".ci/run must run the README's test command verbatim"


def test_readme_first_command_runs(tmp_path):
    first = readme_commands()[0]
    job = first.removeprefix("pip install . && ")
    p = subprocess.run(["bash", "-o", "pipefail", "-c", job], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr


def help_examples():
    for name in cli.list_commands(None):
        text = CliRunner().invoke(cli, [name, "--help"]).output
        example = text.split("Example:")[1]
        for line in example.splitlines():
            line = line.strip()
            if line.startswith("sptool "):
                yield pytest.param(line, id=f"{name}: {line}")


@pytest.mark.parametrize("line", list(help_examples()))
def test_help_examples_work_on_sample_data(line):
    p = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, (line, p.stderr)
    assert shlex.split(line)[0] == "sptool"


def tour_lines():
    text = (ROOT / "README.md").read_text()
    tour = re.findall(r"```bash\n(.*?)```", text, flags=re.S)[2]
    return [ln.split("  #")[0].strip() for ln in tour.strip().splitlines()]


@pytest.mark.parametrize("line", tour_lines())
def test_readme_tour_runs(line):
    p = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    expected = 1 if "invalid.parquet" in line else 0  # the tour shows validate failing on purpose
    assert p.returncode == expected, (line, p.stderr)
