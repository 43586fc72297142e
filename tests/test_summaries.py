"""One summary for every command: the --json-summary object of every registered command, run on
its own --help examples, validates against docs/json-summary.schema.json and agrees with what
pyarrow and NumPy read back; the summary line on stderr has one shape everywhere."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import jsonschema
import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from command_examples import ROOT, env_with_sptool, help_examples, in_workdir

from sptool.cli import COMMANDS, cli

SCHEMA = json.loads((ROOT / "docs" / "json-summary.schema.json").read_text())
EXAMPLES = help_examples()

# name: read A, B (N rows), wrote P (shape [..], nnz N), S s (R rows/s), peak memory M; extra
LINE = re.compile(
    r"^(?P<name>[\w-]+): (?:read (?P<read>.+?)(?: \((?P<rows>[\d,]+) rows\))?, )?"
    r"(?:wrote (?P<wrote>.+?), )?(?P<secs><0\.01|\d+\.\d\d) s(?: \((?P<rate>[\d.]+[kMG]?) rows/s\))?, "
    r"peak memory [\d.]+ [KMGT]?i?B(?:; .+)?$")


def _summaries(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _run_line(line: str, workdir, runs: list):
    """Each ' && '-joined command of an example line, every sptool stage with --json-summary
    (its own file); a pipe through bash, the rest in this process.  ``runs``: (stage args,
    its summary file, its stderr)."""
    for command in in_workdir(line, workdir).split(" && "):
        stages = [shlex.split(stage) for stage in command.split(" | ")]
        files = [workdir / f"summary-{len(runs) + i}.jsonl" for i in range(len(stages))]
        if len(stages) == 1:
            r = CliRunner().invoke(cli, ["--json-summary", str(files[0]), *stages[0][1:]], catch_exceptions=False)
            assert r.exit_code == 0, (line, r.output)
            runs.append((stages[0], files[0], r.stderr))
            continue
        piped = " | ".join(shlex.join(["sptool", "--json-summary", str(f), *s[1:]]) for s, f in zip(stages, files))
        p = subprocess.run(["bash", "-o", "pipefail", "-c", piped], cwd=workdir, env=env_with_sptool(),
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (line, p.stderr)
        runs += [(s, f, p.stderr) for s, f in zip(stages, files)]


def _parquet_shape(path) -> list[int] | None:
    """The shape a Parquet output declares, read with pyarrow from its key-value metadata (None
    for a plain table, which declares none)."""
    raw = (pq.read_metadata(path).metadata or {}).get(b"sptool")
    return None if raw is None else json.loads(raw)["shape"]


@pytest.mark.parametrize("lines", [pytest.param(lines, id=name) for name, lines in EXAMPLES])
def test_every_command_writes_one_complete_summary(lines, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = []
    for line in lines:
        _run_line(line, tmp_path, runs)
    for args, summary, stderr in runs:
        docs = _summaries(summary)
        assert docs, (args, "no summary written")
        for doc in docs:
            jsonschema.validate(doc, SCHEMA)
            assert doc["command"] == args[1] and doc["ok"] and doc["exit_code"] == 0 and doc["error"] is None
            for out in doc["outputs"]:
                if out["path"].endswith(".parquet") and out["nnz"] is not None:
                    assert out["nnz"] == pq.read_metadata(out["path"]).num_rows, (args, out)
                    assert _parquet_shape(out["path"]) in (out["shape"], None), (args, out)
                elif out["path"].endswith(".npy"):
                    assert out["shape"] == list(np.load(out["path"], mmap_mode="r").shape), (args, out)
        lines_shown = [ln for ln in stderr.splitlines() if ln.startswith(f"{args[1]}:")]
        for shown in lines_shown:
            m = LINE.match(shown)
            assert m, (args, shown)
            if not docs[0]["inputs"]:
                assert m["read"] is None and "rows in" not in shown, shown
            if docs[0]["seconds"] < 0.5:
                assert m["rate"] is None, shown  # no rate of a tiny input


def test_every_registered_command_has_an_example_run_above():
    assert {name for name, lines in EXAMPLES if lines} == set(COMMANDS) | {"help"}


def test_info_and_a_scalar_reduce_give_the_whole_object(tmp_path):
    t = "sample_data/tensor3d.parquet"
    path = tmp_path / "s.jsonl"
    table = pq.read_table(ROOT / t)
    r = CliRunner().invoke(cli, ["--json-summary", str(path), "info", str(ROOT / t)])
    assert r.exit_code == 0, r.output
    (doc,) = _summaries(path)
    jsonschema.validate(doc, SCHEMA)
    assert doc["inputs"] == [str(ROOT / t)] and doc["result"]["nnz"] == table.num_rows
    assert doc["result"]["shape"] == _parquet_shape(ROOT / t) and doc["seconds"] > 0

    r = CliRunner().invoke(cli, ["--json-summary", str(path), "reduce", str(ROOT / t), "--op", "sum"])
    assert r.exit_code == 0, r.output
    (doc,) = _summaries(path)
    jsonschema.validate(doc, SCHEMA)
    values = table.column("values").to_numpy()
    assert doc["rows_in"] == len(values) and doc["outputs"] == [] and doc["peak_memory_bytes"] > 0
    assert doc["result"]["value"] == pytest.approx(float(np.sum(values)), rel=1e-12)
    assert float(r.stdout) == pytest.approx(doc["result"]["value"], rel=1e-12)


@pytest.mark.parametrize("args", [
    ["reorder", "missing.parquet", "-o", "x.parquet"], ["info", "missing.parquet"],
    ["eye", "-3"], ["validate", "missing.parquet"], ["help"],
], ids=lambda a: a[0] + ("" if a[0] == "help" else "-fails"))
def test_failures_and_commands_without_a_job_give_the_whole_object(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "s.jsonl"
    r = CliRunner().invoke(cli, ["--json-summary", str(path), *args])
    (doc,) = _summaries(path)
    jsonschema.validate(doc, SCHEMA)
    assert doc["command"] == args[0] and doc["exit_code"] == r.exit_code and doc["ok"] == (r.exit_code == 0)
    if r.exit_code:
        assert doc["error"] and doc["error"] in r.output.replace("\n", " ")


def test_rate_shown_past_the_threshold_only(tmp_path):
    import io
    import time

    import sptool

    sample = str(ROOT / "sample_data/tensor3d.parquet")
    sptool.convert(sample, str(tmp_path / "t.arrows"))
    data = (tmp_path / "t.arrows").read_bytes()

    class SlowPipe(io.BytesIO):
        """stdin from a writer that pauses past the threshold halfway through its stream."""

        def read(self, n=-1):
            if self.tell() <= len(data) // 2 < self.tell() + max(n, 1):
                time.sleep(0.6)
            return super().read(n)

    out = str(tmp_path / "o.parquet")
    r = CliRunner().invoke(cli, ["transpose", "-", "-o", out], input=SlowPipe(data))
    m = LINE.match(r.stderr.strip().splitlines()[-1])
    assert m and m["rate"] and m["rows"] == f"{pq.read_metadata(out).num_rows:,}", r.stderr
    r = CliRunner().invoke(cli, ["transpose", sample, "-o", out])
    assert r.exit_code == 0, r.output
    assert "rows/s" not in r.stderr  # a run of a few milliseconds
