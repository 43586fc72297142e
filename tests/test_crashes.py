"""Inputs and arguments that once ended as internal errors (exit 3) or bare Python exceptions:
each now a one-line refusal with a documented exit code, or an sptool error from the API."""

from __future__ import annotations

import os
import shlex

import numpy as np
import pytest
from click.testing import CliRunner
from command_examples import help_examples, in_workdir
from conftest import random_tensor

import sptool
from sptool.cli import cli

# Sorted runs of 64 rows, none kept in memory: a sort of the sample data spills.
SPILL_EVERYTHING = {"SPTOOL_RUN_ROWS": "64", "SPTOOL_BATCH_ROWS": "64", "SPTOOL_KEEP_BYTES": "0"}


def _takes_tmp_dir(name: str) -> bool:
    return "--tmp-dir" in CliRunner().invoke(cli, [name, "--help"]).output


def _invoke(line: str):
    return CliRunner().invoke(cli, shlex.split(line)[1:])


TMP_DIR_COMMANDS = [(name, lines) for name, lines in help_examples() if _takes_tmp_dir(name)]


@pytest.mark.parametrize("name, lines", TMP_DIR_COMMANDS, ids=[n for n, _ in TMP_DIR_COMMANDS])
def test_every_command_refuses_a_missing_tmp_dir_before_any_work(name, lines, tmp_path, monkeypatch):
    """A --tmp-dir that does not exist is a usage error (exit 2, one line naming it) when it is
    given, not an internal error once the data is large enough to spill; an existing one takes
    the spilled runs and is left as it was."""
    for key, value in SPILL_EVERYTHING.items():
        monkeypatch.setenv(key, value)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    steps = [step.strip() for line in lines for step in in_workdir(line, work).split("&&")]
    own = next(i for i, step in enumerate(steps) if step.startswith(f"sptool {name} "))
    for step in steps[:own]:  # what the command's own example reads
        assert _invoke(step).exit_code == 0, step
    before = sorted(os.listdir(work))
    missing = tmp_path / "no" / "such"
    r = _invoke(f"{steps[own]} --tmp-dir {missing}")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and str(missing) in r.output, r.output
    assert sorted(os.listdir(work)) == before and not missing.parent.exists()
    spills = tmp_path / "spills"
    spills.mkdir()
    r = _invoke(f"{steps[own]} --tmp-dir {spills}")
    assert r.exit_code == 0, r.output
    assert os.listdir(spills) == []


def test_the_api_refuses_a_missing_tmp_dir_however_small_the_data(tmp_path, rng):
    t = random_tensor(rng, (6, 5), 12)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    with pytest.raises(sptool.UsageError, match="--tmp-dir") as e:
        sptool.reorder(src, str(tmp_path / "r.parquet"), order=(1, 0), tmp_dir=str(tmp_path / "missing"))
    assert e.value.path == str(tmp_path / "missing") and not os.path.exists(tmp_path / "r.parquet")


def test_an_internal_error_under_debug_does_not_ask_for_debug(tmp_path, monkeypatch):
    """No input reaches an internal error any more, so one is made: with --debug the traceback is
    printed and the message does not tell the user to pass --debug; without it, it does."""
    import sptool.cli.reorder as command

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(command, "reorder_op", broken)
    t = random_tensor(np.random.default_rng(0), (4, 4), 5)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    args = ["reorder", src, "-o", str(tmp_path / "r.parquet")]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 3 and "run with --debug" in plain.stderr
    debug = CliRunner().invoke(cli, ["--debug", *args])
    assert debug.exit_code == 3 and "Traceback" in debug.stderr and "RuntimeError: a bug" in debug.stderr
    assert "--debug" not in debug.stderr.strip().splitlines()[-1]
