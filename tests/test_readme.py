"""The README's two commands, its tour and every --help example stay true."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
from command_examples import (
    INSTALL,
    ROOT,
    env_with_sptool,
    help_examples,
    in_workdir,
    readme_blocks,
    readme_commands,
    readme_job,
    readme_tour,
)


def _run(line: str, workdir):
    return subprocess.run(["bash", "-o", "pipefail", "-c", in_workdir(line, workdir)], cwd=workdir,
                          env=env_with_sptool(), capture_output=True, text=True, timeout=300)


def test_readme_opens_with_two_commands_and_ci_runs_the_second():
    first, second = readme_commands()
    assert first.startswith(INSTALL) and "sample_data/" in first
    assert second.startswith('pip install -e ".[test]"') and "pytest" in second
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert second in ci_lines, ".ci/run must run the README's test command verbatim"


def test_readme_first_command_runs(tmp_path):
    p = _run(readme_job(), tmp_path)
    assert p.returncode == 0, p.stderr


def test_examples_write_only_inside_the_working_directory(tmp_path):
    line = in_workdir("sptool todense sample_data/tensor3d.parquet -o /tmp/t.npy", tmp_path)
    assert "/tmp/" not in line.replace(str(tmp_path), "") and (tmp_path / "sample_data").is_symlink()


@pytest.mark.parametrize("lines", [pytest.param(lines, id=name) for name, lines in help_examples()])
def test_help_examples_work_on_sample_data(lines, tmp_path):
    assert lines, "every command's --help shows an example"
    for line in lines:
        assert shlex.split(line)[0] == "sptool"
        p = _run(line, tmp_path)
        assert p.returncode == 0, (line, p.stderr)


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: guides and reference belong in docs/"


def test_readme_tour_names_every_command_once_in_the_help_order():
    from sptool.cli import COMMANDS

    assert readme_tour() == list(COMMANDS)


def test_readme_pipe_runs(tmp_path):
    (pipe,) = readme_blocks()[2:]
    p = _run(pipe.strip(), tmp_path)
    assert p.returncode == 0, p.stderr
    entries = len((ROOT / "sample_data" / "tensor3d.tns").read_text().splitlines())
    assert p.stdout == f"-: valid (full, {entries:,} entries)\n"


def test_readme_links_lead_to_files():
    text = (ROOT / "README.md").read_text()
    targets = {link.split("#")[0] for link in re.findall(r"\]\(([^)]+)\)", text) if "://" not in link}
    assert targets and all((ROOT / target).exists() for target in targets), targets


def test_readme_python_example_runs_from_the_checkout(tmp_path):
    """The Python block, run where the README's commands run (the checkout's root, whose sptool/
    is the package itself after `pip install -e .`), with /tmp paths moved into tmp_path; its
    reorder's output against NumPy's sums of the repeated coordinates."""
    import numpy as np
    import pyarrow.parquet as pq

    (code,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    code = re.sub(r"(?<![\w.])/tmp/", str(tmp_path) + "/", code)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env=env_with_sptool())
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("(40, 30, 20) 1000 ["), p.stdout
    raw = pq.read_table(ROOT / "sample_data" / "unsorted.parquet")
    keys = np.stack([raw[f"indices_{k}"].to_numpy() for k in range(3)], axis=1)
    want_keys, inverse = np.unique(keys, axis=0, return_inverse=True)
    want = np.zeros(len(want_keys))
    np.add.at(want, inverse.ravel(), raw["values"].to_numpy())
    got = pq.read_table(tmp_path / "canonical.parquet")
    got_keys = np.stack([got[f"indices_{k}"].to_numpy() for k in range(3)], axis=1)
    assert np.array_equal(got_keys, want_keys) and np.array_equal(got["values"].to_numpy(), want)


def test_help_points_at_the_spec_where_it_is_installed():
    from click.testing import CliRunner

    from sptool.cli import cli

    text = CliRunner().invoke(cli, ["--help"], terminal_width=400).output
    (path,) = re.findall(r"installed with sptool at\s+(\S+SPEC\.md)", text)
    with open(path, encoding="utf-8") as f:
        assert f.readline().startswith("# sptool COO tensor format")
