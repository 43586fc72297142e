"""The command line: exit codes, one-line errors, pipes, summaries."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli

# -P: do not put the working directory (a checkout whose sptool/ has no compiled kernels) first on
# sys.path, so the installed package runs, as a user's `sptool` command would.
SPTOOL = [sys.executable, "-P", "-m", "sptool"]


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def tensor(tmp_path, rng):
    t = random_tensor(rng, (12, 9, 4), 150, duplicates=True)
    path = str(tmp_path / "t.parquet")
    sptool.write(t, path)
    return t, path


def test_version():
    # The format version the spec declares itself to be, read from the spec's own text.
    spec = (Path(__file__).resolve().parents[1] / "formats" / "SPEC.md").read_text()
    spec_version = re.search(r"Format version \*\*([0-9.]+)\*\*", spec).group(1)
    r = run("--version")
    assert r.exit_code == 0
    assert f"sptool {sptool.__version__}" in r.output and f"format {spec_version}" in r.output
    assert "kernels: compiled" in r.output


def test_help_lists_every_command_with_a_summary():
    r = run("--help")
    names = cli.list_commands(None)
    assert len(names) >= 15
    for name in names:
        cmd = cli.get_command(None, name)
        assert name in r.output
        assert cmd.get_short_help_str()


def test_every_command_slot_is_filled():
    from sptool.cli import COMMANDS, load_command

    missing = [name for name in COMMANDS if load_command(name) is None]
    assert not missing, f"commands listed in sptool.cli.COMMANDS but not registered: {missing}"


@pytest.mark.parametrize("name", [n for n in cli.list_commands(None) if n != "help"])
def test_command_help_states_memory_and_example(name):
    text = run(name, "--help").output
    assert "Memory:" in text, f"{name} --help must state its memory cost"
    assert "Example:" in text and "sample_data/" in text.split("Example:")[1]


@pytest.mark.parametrize("name", [n for n in cli.list_commands(None) if n != "help"])
def test_command_help_paragraphs_start_at_the_margin(name):
    """Each prose paragraph of the docstring (inspect.cleandoc's reading of it) starts a line of
    the rendered help at click's two-space margin: an undedented docstring (click 8.5 dedents at
    format time) would indent every paragraph after the first by the source's four spaces."""
    import inspect

    cmd = cli.get_command(None, name)
    doc = inspect.cleandoc(cmd.callback.__doc__ or cmd.help)
    lines = run(name, "--help").output.splitlines()
    for para in doc.split("\n\n")[:4]:
        if para.startswith("\b"):
            continue
        head = " ".join(para.split()[:2])
        found = [ln for ln in lines if " ".join(ln.split()).startswith(head)]
        assert found and all(ln.startswith("  " + para.split()[0]) for ln in found), (name, head, found)


def test_validate_exit_codes_and_json(tmp_path, tensor):
    _, path = tensor
    assert run("validate", path).exit_code == 0
    garbage = tmp_path / "g.parquet"
    garbage.write_bytes(b"not parquet at all")
    r = run("validate", "--json", str(garbage))
    assert r.exit_code == 2 and '"E_NOT_PARQUET"' in r.output and json.loads(r.output)["unreadable"] is True
    bad = tmp_path / "b.parquet"
    sptool.write(sptool.SparseTensor([[0, 1], [0, 1], [2, 3]], [1.0, 2.0, 3.0], shape=(4, 4)), str(bad))
    import pyarrow.parquet as pq

    table = pq.read_table(bad)  # readable, but it claims a uniqueness its rows break
    meta = json.loads(pq.read_metadata(bad).metadata[b"sptool"])
    meta.update(unique=True, canonical=True)
    pq.write_table(table.replace_schema_metadata({b"sptool": json.dumps(meta).encode()}), bad)
    assert run("validate", str(bad)).exit_code == 1
    assert run("validate", str(tmp_path / "missing.parquet")).exit_code == 2


def test_validate_checks_every_tensor_and_exits_with_the_worst(tmp_path, tensor):
    _, path = tensor
    bad = tmp_path / "g.parquet"
    bad.write_bytes(b"not parquet at all")
    missing = str(tmp_path / "missing.parquet")
    r = run("validate", missing, path, str(bad))
    assert r.exit_code == 2, r.output
    assert "missing.parquet: UNREADABLE (no such file or directory)" in r.output
    assert f"{path}: valid" in r.output and "g.parquet: UNREADABLE" in r.output
    r = run("validate", "--json", path, str(bad), missing)
    docs = json.loads(r.output)
    assert r.exit_code == 2 and [d["valid"] for d in docs] == [True, False, False]
    assert docs[2] == {"target": missing, "valid": False, "error": "no such file or directory", "exit_code": 2}
    assert run("validate", path, str(bad)).exit_code == 2


def test_help_all_prints_every_commands_help():
    text = run("--help-all").output
    for name in cli.list_commands(None):
        assert f"sptool {name}\n" in text
        assert run(name, "--help").output.strip() in text


def test_shell_completion_lists_commands(tmp_path):
    env = dict(os.environ, _SPTOOL_COMPLETE="bash_complete", COMP_WORDS="sptool reor", COMP_CWORD="1")
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable), "sptool")], env=env, capture_output=True,
                       text=True, timeout=60)
    assert "reorder" in p.stdout, (p.stdout, p.stderr)


def test_a_mistyped_command_gets_a_suggestion_and_help_works():
    r = run("reduc")
    assert r.exit_code == 2 and "No such command 'reduc'. Did you mean 'reduce'?" in r.output
    assert run("help", "reorder").output == run("reorder", "--help").output
    assert "Commands:" in run("help").output
    r = run("help", "reorde")
    assert r.exit_code == 2 and "Did you mean 'reorder'?" in r.output


def test_errors_are_one_line_without_traceback(tmp_path):
    garbage = tmp_path / "g.parquet"
    garbage.write_bytes(b"PAR1 nonsense")
    r = run("todense", str(garbage), "-o", str(tmp_path / "o.npy"))
    assert r.exit_code == 2  # not Parquet at all: unreadable, as a missing file is
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and str(garbage) in lines[0]
    assert "Traceback" not in r.output and not os.path.exists(tmp_path / "o.npy")
    r = run("--memory", "lots", "info", str(garbage))
    assert r.exit_code == 2 and "cannot read 'lots' as a size" in r.stderr


def test_debug_shows_traceback(tmp_path):
    garbage = tmp_path / "g.parquet"
    garbage.write_bytes(b"junk")
    r = run("info", "--debug", str(garbage))
    assert r.exit_code == 2 and "Traceback" in r.stderr


def test_summary_line_and_quiet(tensor, tmp_path):
    _, path = tensor
    r = run("todense", path, "-o", str(tmp_path / "d.npy"))
    assert r.exit_code == 0 and "todense:" in r.stderr and "peak memory" in r.stderr
    r = run("-q", "todense", path, "-o", str(tmp_path / "d.npy"))
    assert r.exit_code == 0 and r.stderr == ""
    r = run("todense", "--quiet", path, "-o", str(tmp_path / "d.npy"))
    assert r.stderr == ""


def test_info_and_head(tensor):
    t, path = tensor
    import json

    r = run("info", "--json", path)
    d = json.loads(r.output)
    assert r.exit_code == 0 and d["nnz"] == t.nnz and d["shape"] == list(t.shape)
    r = run("head", "-n", "3", "--json", path)
    rows = [json.loads(line) for line in r.output.strip().splitlines()]
    assert [row["index"] for row in rows] == t.indices[:3].tolist()
    np.testing.assert_allclose([row["value"] for row in rows], t.values[:3])


def test_json_outputs_are_strict_json_with_nan(tmp_path):
    import json

    t = sptool.SparseTensor([[0], [1]], np.array([np.nan, np.inf]), (3,), fill_value=float("nan"))
    sptool.write(t, str(tmp_path / "n.parquet"))
    strict = {"parse_constant": lambda c: pytest.fail(f"non-JSON constant {c}")}
    d = json.loads(run("info", "--json", str(tmp_path / "n.parquet")).output, **strict)
    assert d["fill_value"] == "NaN"
    rows = [json.loads(ln, **strict) for ln in run("head", "--json", str(tmp_path / "n.parquet")).output.splitlines()]
    assert [r["value"] for r in rows] == ["NaN", "Infinity"]


def test_pipe_through_stdin(tmp_path, tensor):
    t, _ = tensor
    stream = str(tmp_path / "t.arrows")
    sptool.write(t, stream)
    with open(stream, "rb") as f:
        p = subprocess.run(SPTOOL + ["todense", "-", "-o", str(tmp_path / "p.npy")], stdin=f,
                           capture_output=True)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), dense_oracle(t))
    with open(stream, "rb") as f:
        p = subprocess.run(SPTOOL + ["validate", "-"], stdin=f, capture_output=True)
    assert p.returncode == 0 and b"valid" in p.stdout


def test_refuses_binary_to_terminal(tmp_path, rng):
    from pty_terminal import run_in_terminal

    sptool.write(random_tensor(rng, (3,), 2), str(tmp_path / "t.parquet"))
    before = sorted(os.listdir(tmp_path))
    code, output = run_in_terminal(SPTOOL + ["reorder", "t.parquet", "-o", "-"], cwd=tmp_path)
    assert code == 2 and b"refusing to write binary Arrow data to a terminal" in output, output
    assert b"\xff\xff\xff\xff" not in output and sorted(os.listdir(tmp_path)) == before  # no stream began


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_leaves_nothing_behind(tmp_path, rng, sig):
    import signal
    import time

    t = random_tensor(rng, (50, 40), 500)
    stream = tmp_path / "in.arrows"
    sptool.write(t, str(stream))
    data = stream.read_bytes()
    out_dir = tmp_path / "out"
    spill = tmp_path / "spill"
    out_dir.mkdir()
    spill.mkdir()
    p = subprocess.Popen(SPTOOL + ["reorder", "-", "-o", str(out_dir / "o.parquet"), "--tmp-dir", str(spill)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(data[: len(data) // 2])  # the stream stays open: sptool is mid-job, waiting
    p.stdin.flush()
    time.sleep(1.5)
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert list(out_dir.iterdir()) == [] and list(spill.iterdir()) == []
    assert b"Traceback" not in err


@pytest.mark.parametrize("command", [
    ["slice", "-", "--start", "5,0,0", "--size", "10,-1,-1"],
    ["split", "-", "--axis", "0", "--num-split", "2"],
    ["concat", "-", "{sample}", "--axis", "1"],
])
def test_stream_of_unknown_shape_is_spooled(tmp_path, command):
    """`convert x.tns -o -` learns the shape only at its end; commands that need it up front spool the
    stream to disk rather than refusing, and give what they give on the file."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tns, sample = os.path.join(root, "sample_data", "tensor3d.tns"), os.path.join(root, "sample_data",
                                                                                   "tensor3d.parquet")
    args = [a.replace("{sample}", sample) for a in command]
    out = str(tmp_path / ("p{i}.parquet" if args[0] == "split" else "o.parquet"))
    stream = subprocess.run(SPTOOL + ["-q", "convert", tns, "-o", "-"], capture_output=True, check=True).stdout
    p = subprocess.run(SPTOOL + ["-q"] + args + ["-o", out], input=stream, capture_output=True)
    assert p.returncode == 0, p.stderr
    q = subprocess.run(SPTOOL + ["-q"] + [sample if a == "-" else a for a in args] + ["-o", out + ".ref.parquet"
                       if args[0] != "split" else str(tmp_path / "r{i}.parquet")], capture_output=True)
    assert q.returncode == 0, q.stderr
    pairs = [(out, out + ".ref.parquet")] if args[0] != "split" else \
        [(str(tmp_path / f"p{i}.parquet"), str(tmp_path / f"r{i}.parquet")) for i in range(2)]
    for got, want in pairs:
        np.testing.assert_allclose(sptool.read(got).to_dense(), sptool.read(want).to_dense())
        assert sptool.validate(got).valid


def _summaries(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_json_summary_on_success_failure_and_every_tensor(tmp_path, tensor):
    t, path = tensor
    out = str(tmp_path / "o.parquet")
    r = run("--json-summary", "-", "reorder", path, "-o", out, "--duplicates", "sum")
    assert r.exit_code == 0, r.output
    (doc,) = _summaries(r.output)
    want = sptool.read(out)
    assert doc["command"] == "reorder" and doc["ok"] is True and doc["rows_in"] == t.nnz
    assert doc["rows_out"] == want.nnz and doc["result"]["output"] == out and doc["peak_memory_bytes"] > 0
    assert doc["result"]["sort_order"] == list(want.sort_order)

    r = run("reorder", str(tmp_path / "missing.parquet"), "-o", out, "--json-summary", "-")
    (doc,) = _summaries(r.output)
    assert r.exit_code == 2 and {k: doc[k] for k in ("command", "ok", "exit_code", "error", "outputs")} == {
        "command": "reorder", "ok": False, "exit_code": 2, "outputs": [],
        "error": f"{tmp_path / 'missing.parquet'}: no such file or directory"}

    summary = tmp_path / "s.jsonl"
    bad = tmp_path / "g.parquet"
    bad.write_bytes(b"not parquet")
    r = run("--json-summary", str(summary), "validate", path, str(bad))
    docs = _summaries(summary.read_text())
    assert r.exit_code == 2 and [d["result"]["target"] for d in docs] == [path, str(bad)]
    assert docs[0]["result"]["valid"] is True and docs[1]["result"]["valid"] is False

    r = run("--json-summary", str(summary), "info", path)
    (doc,) = _summaries(summary.read_text())
    assert r.exit_code == 0 and doc["command"] == "info" and doc["result"]["nnz"] == t.nnz


S = "sample_data/"


@pytest.mark.parametrize("args", [
    ["reorder", S + "unsorted.parquet"], ["transpose", S + "tensor3d.parquet"],
    ["reduce", S + "tensor3d.parquet", "--op", "sum", "--axis", "0"], ["todense", S + "tensor3d.parquet"],
    ["add", S + "matrix_a.parquet", S + "matrix_b.parquet"], ["softmax", S + "tensor3d.parquet"],
    ["convert", S + "digits.svm"], ["bincount", S + "ids_numbers.parquet"], ["mul", S + "tensor3d.parquet", "2"],
    ["cross", S + "ids_words.parquet", S + "ids_numbers.parquet"],
], ids=lambda a: a[0])
def test_every_summary_line_names_what_was_written(args, tmp_path):
    out = str(tmp_path / ("o.npy" if args[0] == "todense" else "o.parquet"))
    r = run(*args, "-o", out)
    assert r.exit_code == 0, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith(args[0] + ":")]
    assert f"wrote {out}" in line and line.startswith(f"{args[0]}: read {args[1]}") and os.path.exists(out)


def test_validate_prints_no_rate_for_a_file_it_could_not_read(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"hello\n")
    r = run("validate", str(bad))
    assert r.exit_code == 2 and "UNREADABLE" in r.stdout
    assert "rows/s" not in r.stderr and "validate:" not in r.stderr
    r = run("validate", "sample_data/tensor3d.parquet")
    assert r.exit_code == 0 and "validate: read sample_data/tensor3d.parquet (1,000 rows)" in r.stderr


def test_command_line_runs_without_importing_pandas(tmp_path):
    """pyarrow imports pandas on its first to_numpy when pandas is installed; the command line
    keeps it out (it has no use for it) and gives the same rows."""
    pytest.importorskip("pandas")
    import pyarrow.parquet as pq

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data", "unsorted.parquet")
    out = str(tmp_path / "sorted.parquet")
    res = subprocess.run([SPTOOL[0], "-X", "importtime", *SPTOOL[1:], "reorder", src, "-o", out, "-q"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")]
    # A refused import is logged too (as "pandas" alone); a real one loads pandas.core and the rest.
    assert "pyarrow.parquet" in imported and not any(m.startswith("pandas.") for m in imported)
    table = pq.read_table(src)
    keys = [table.column(c).to_numpy() for c in table.column_names[:-1]]
    order = np.lexsort(keys[::-1])
    got = pq.read_table(out)
    for c in table.column_names:
        np.testing.assert_array_equal(got.column(c).to_numpy(), table.column(c).to_numpy()[order])
