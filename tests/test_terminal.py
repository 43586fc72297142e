"""sptool in a person's terminal: progress bars drawn and taken down, the cursor always shown
again, Ctrl-C and errors handled, under a real pseudo-terminal (tests/pty_terminal.py)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time

import numpy as np
import pytest
from command_examples import help_examples, in_workdir, readme_job
from pty_terminal import BAR_GLYPH, Terminal, cursor_restored, run_in_terminal, screen

import sptool


def _bash(line, workdir):
    return ["bash", "-o", "pipefail", "-c", in_workdir(line, workdir)]


def test_readme_first_command_in_a_terminal(tmp_path):
    code, output = run_in_terminal(_bash(readme_job(), tmp_path),
                                   cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0, text
    assert BAR_GLYPH in output, "validate draws a progress bar in a terminal"
    assert cursor_restored(output), text
    assert "Error" not in text and "Traceback" not in text
    assert "valid" in text and "digits.parquet" in text
    dense = np.load(tmp_path / "tensor3d.npy")
    assert np.array_equal(dense, sptool.read(in_workdir("sample_data/tensor3d.parquet", tmp_path)).to_dense())


@pytest.mark.parametrize("lines", [pytest.param(lines, id=name) for name, lines in help_examples()])
def test_every_help_example_in_a_terminal(lines, tmp_path):
    for line in lines:
        code, output = run_in_terminal(_bash(line, tmp_path), cwd=tmp_path)
        text = output.decode("utf-8", "replace")
        assert code == 0, (line, text)
        assert cursor_restored(output), (line, text)
        assert "internal error" not in text and "Traceback" not in text


def _stream_bytes(tmp_path, rows: int) -> tuple[bytes, sptool.SparseTensor]:
    rng = np.random.default_rng(7)
    idx = np.stack([rng.integers(0, 500, rows), rng.integers(0, 400, rows)], axis=1)
    t = sptool.SparseTensor(idx, rng.standard_normal(rows), (500, 400))
    path = tmp_path / "input.arrows"
    sptool.write(t, str(path))
    return path.read_bytes(), t


def _feed(term: Terminal, data: bytes, pieces: int, pause: float, stop_after: int | None = None):
    """Write ``data`` to the child's stdin in ``pieces``, pausing between them (as a slow pipe)."""
    def run():
        step = -(-len(data) // pieces)
        try:
            for i, start in enumerate(range(0, len(data), step)):
                if stop_after is not None and i == stop_after:
                    return  # keep the pipe open: the command waits for more
                term.proc.stdin.write(data[start:start + step])
                term.proc.stdin.flush()
                time.sleep(pause)
            term.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_long_command_draws_its_bar_and_finishes(tmp_path):
    data, t = _stream_bytes(tmp_path, 200_000)
    out = tmp_path / "sorted.parquet"
    term = Terminal(["sptool", "reorder", "-", "-o", str(out)], cwd=tmp_path, stdin_pipe=True)
    feeder = _feed(term, data, pieces=8, pause=0.15)
    code = term.finish()
    feeder.join(5)
    assert code == 0, term.text
    assert BAR_GLYPH in term.output and b"reorder" in term.output
    assert cursor_restored(term.output), term.text
    assert "reorder: read stdin (200,000 rows), wrote " in term.text and "nnz 200,000)" in term.text
    got = sptool.read(str(out))
    order = np.lexsort(t.indices.T[::-1], axis=0)
    assert np.array_equal(got.indices, t.indices[order])
    assert np.array_equal(got.values, t.values[order])


def test_ctrl_c_during_a_command(tmp_path):
    data, _ = _stream_bytes(tmp_path, 200_000)
    out = tmp_path / "sorted.parquet"
    term = Terminal(["sptool", "reorder", "-", "-o", str(out)], cwd=tmp_path, stdin_pipe=True)
    feeder = _feed(term, data, pieces=8, pause=0.05, stop_after=3)
    assert term.wait_for(BAR_GLYPH), term.text
    feeder.join(5)
    term.send_interrupt()
    code = term.finish(timeout=30)
    assert code == 130, term.text
    assert "interrupted" in term.text and "Traceback" not in term.text
    assert cursor_restored(term.output), term.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.arrows"], "nothing is left behind"


def test_failing_commands_in_a_terminal(tmp_path):
    code, output = run_in_terminal(_bash("sptool validate sample_data/invalid.parquet", tmp_path), cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 1 and "INVALID" in text, text
    assert cursor_restored(output), text

    code, output = run_in_terminal(["sptool", "reorder", str(tmp_path / "missing.parquet"), "-o",
                                    str(tmp_path / "x.parquet")], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 2, text
    errors = [ln for ln in text.splitlines() if "Error:" in ln]
    assert len(errors) == 1 and "missing.parquet" in errors[0], text
    assert "internal error" not in text and "Traceback" not in text
    assert cursor_restored(output), text
    assert not (tmp_path / "x.parquet").exists()


def test_bad_data_in_the_middle_of_a_stream(tmp_path):
    """An error raised while the bar is live: one message on a clean line, the cursor back."""
    good, _ = _stream_bytes(tmp_path, 50_000)
    term = Terminal(["sptool", "reorder", "-", "-o", str(tmp_path / "x.parquet")], cwd=tmp_path, stdin_pipe=True)
    feeder = _feed(term, good[: len(good) // 2] + b"\x00garbage" * 100, pieces=2, pause=0.2)
    code = term.finish()
    feeder.join(5)
    assert code in (1, 2), term.text
    assert "Error:" in term.text and "Traceback" not in term.text
    assert cursor_restored(term.output), term.text


# -- a clean terminal: nothing glued to a bar, no padding, the digits a value holds ----------------

def _big_tensor(tmp_path, rows=300_000, name="T.parquet"):
    rng = np.random.default_rng(3)
    idx = np.stack([rng.integers(0, 1000, rows), rng.integers(0, 1000, rows)], axis=1)
    t = sptool.SparseTensor(idx, rng.random(rows).astype(np.float32), (1000, 1000))
    sptool.write(t, str(tmp_path / name))
    return t


def _plain(output: bytes) -> str:
    """A terminal's bytes without their styles."""
    return re.sub(r"\x1b\[[0-9;]*m", "", output.decode("utf-8", "replace"))


def _unwrapped(lines: list[str]) -> str:
    """Screen lines as one, spaces left out (the terminal wrapped long ones at its width)."""
    return "".join(lines).replace(" ", "")


def _pipe(line, workdir) -> subprocess.CompletedProcess:
    from command_examples import env_with_sptool

    return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=workdir, env=env_with_sptool(),
                          capture_output=True, text=True, timeout=300)


def test_an_unreadable_input_is_reported_on_a_line_of_its_own(tmp_path):
    code, output = run_in_terminal(["sptool", "validate", "nope.parquet"], cwd=tmp_path)
    shown = screen(output)
    assert code == 2 and BAR_GLYPH in output, output  # a bar was drawn, then taken down
    assert shown == ["nope.parquet: UNREADABLE (no such file or directory)"], shown
    assert cursor_restored(output)


def test_text_to_a_pipe_whose_reader_prints_on_the_terminal(tmp_path):
    _big_tensor(tmp_path)
    want = _pipe("sptool -q convert T.parquet --to tns | head -3", tmp_path).stdout.splitlines()
    assert len(want) == 3
    code, output = run_in_terminal(["bash", "-o", "pipefail", "-c", "sptool convert T.parquet --to tns | head -3"],
                                   cwd=tmp_path)
    assert code == 0 and BAR_GLYPH in output, output
    assert screen(output) == want, output
    assert cursor_restored(output)


def test_a_parquet_inputs_rows_are_the_bars_total(tmp_path):
    t = _big_tensor(tmp_path)
    code, output = run_in_terminal(["sptool", "convert", "T.parquet", "-o", "o.tns"], cwd=tmp_path)
    assert code == 0 and f"/{t.nnz} rows" in _plain(output), output
    assert sum(1 for _ in open(tmp_path / "o.tns")) == t.nnz


def test_an_external_sort_shows_its_merge(tmp_path):
    t = _big_tensor(tmp_path, rows=1_000_000)
    code, output = run_in_terminal(["sptool", "--memory", "16MiB", "reorder", "T.parquet", "-o", "s.parquet"],
                                   cwd=tmp_path)
    text = _plain(output)
    assert code == 0, text
    assert "reorder (merging" in text and f"/{t.nnz} rows" in text.split("reorder (merging")[-1], text
    assert _unwrapped(screen(output)).startswith(_unwrapped(["reorder: read T.parquet (1,000,000 rows), wrote s"]))
    order = np.lexsort(t.indices.T[::-1])
    assert np.array_equal(sptool.read(str(tmp_path / "s.parquet")).indices, t.indices[order])


@pytest.mark.parametrize("command", [["info", "sample_data/tensor3d.parquet"],
                                     ["head", "-n", "4", "sample_data/tensor3d.parquet"],
                                     ["validate", "sample_data/invalid.parquet"]], ids=lambda c: c[0])
def test_piped_reports_have_no_trailing_padding(command, tmp_path):
    p = _pipe(in_workdir(" ".join(["sptool", *command]), tmp_path), tmp_path)
    assert p.stdout and not [ln for ln in p.stdout.splitlines() if ln != ln.rstrip()], p.stdout
    code, output = run_in_terminal(["bash", "-c", in_workdir(" ".join(["sptool", *command]), tmp_path)], cwd=tmp_path)
    assert screen(output)[0] == p.stdout.splitlines()[0] and not re.search(r" +\r\n", _plain(output)), output


def test_two_stages_of_a_pipeline_draw_one_bar_and_two_whole_lines(tmp_path):
    """Two sptool stages on one terminal: one draws its bar (two would write over each other),
    and each stage's summary (or error) stands on a line of its own, whole."""
    t = _big_tensor(tmp_path)
    line = "sptool convert T.parquet -o - | sptool todense - -o d.npy"
    code, output = run_in_terminal(["bash", "-o", "pipefail", "-c", line], cwd=tmp_path)
    drawn = {name for name in ("convert", "todense") if re.search(rf"{name} +━", _plain(output))}
    shown = _unwrapped(screen(output))
    assert code == 0 and len(drawn) == 1, _plain(output)
    assert shown.startswith(_unwrapped([f"convert: read T.parquet ({t.nnz:,} rows), wrote stdout"])), shown
    assert _unwrapped([f"todense: read stdin ({t.nnz:,} rows), wrote d.npy"]) in shown, shown
    want = np.zeros(t.shape, np.float32)
    np.add.at(want, tuple(t.indices.T), t.values)  # repeated indices add up
    np.testing.assert_allclose(np.load(tmp_path / "d.npy"), want, rtol=1e-6)
    failing = line.replace("-o d.npy", "--default-value x -o e.npy")
    code, output = run_in_terminal(["bash", "-o", "pipefail", "-c", failing], cwd=tmp_path)
    shown = screen(output)
    assert code == 2 and shown[-1].startswith("Error: --default-value"), shown
    assert not [ln for ln in shown if "━" in ln], shown


def test_a_piped_reports_rows_are_not_wrapped(tmp_path):
    """validate's table in a pipe: each problem on one line, whole (grep finds it), as the
    Python API reports it; at a terminal (or with $COLUMNS) the table fits that width instead."""
    from command_examples import env_with_sptool

    problems = sptool.validate("sample_data/ids_numbers.parquet").problems
    assert problems
    env = {k: v for k, v in env_with_sptool().items() if k != "COLUMNS"}  # no width asked for
    p = subprocess.run(["bash", "-c", in_workdir("sptool validate sample_data/ids_numbers.parquet", tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines = p.stdout.splitlines()
    for problem in problems:
        assert any(problem.code in ln and ln.endswith(problem.message) for ln in lines), (problem, p.stdout)


def test_head_prints_float32_values_with_float32_digits(tmp_path):
    t = _big_tensor(tmp_path, rows=50)
    want = [str(np.float32(v)) for v in t.values[:5]]  # NumPy's own text of a float32
    p = _pipe("sptool head -n 5 T.parquet", tmp_path)
    assert [ln.split()[-1] for ln in p.stdout.splitlines()[1:]] == want, p.stdout
    code, output = run_in_terminal(["sptool", "head", "-n", "5", "T.parquet"], cwd=tmp_path)
    assert [ln.split()[-1] for ln in screen(output)[1:]] == want
    p = _pipe("sptool head -n 5 --json T.parquet", tmp_path)
    assert [repr(json.loads(ln)["value"]) for ln in p.stdout.splitlines()] == [repr(float(w)) for w in want]


def test_a_stage_after_a_failed_one_says_its_input_is_empty(tmp_path):
    line = "sptool reorder missing.parquet | sptool info -"
    p = _pipe(line, tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[-1] == "Error: no input on stdin: did the command before it fail?", p.stderr
    code, output = run_in_terminal(["bash", "-c", line], cwd=tmp_path)
    assert screen(output)[-1] == "Error: no input on stdin: did the command before it fail?"
    p = _pipe("true | sptool validate -", tmp_path)
    assert p.returncode == 2 and "no input on stdin: did the command before it fail?" in " ".join(p.stdout.split())


def test_a_directory_of_unrelated_parquet_files_is_not_a_part_directory(tmp_path):
    from command_examples import ROOT

    d = tmp_path / "mixed"
    d.mkdir()
    for name in ("tensor3d.parquet", "digits.parquet"):
        (d / name).write_bytes((ROOT / "sample_data" / name).read_bytes())
    p = _pipe("sptool info mixed", tmp_path)
    (line,) = p.stderr.splitlines()
    assert p.returncode == 1 and "mixed: not a part directory" in line and "part-000000.parquet" in line, line
    code, output = run_in_terminal(["sptool", "info", "mixed"], cwd=tmp_path)
    assert _unwrapped(screen(output)) == _unwrapped([line])
    # sptool's own parts that disagree are a damaged part directory, and said so
    for i, name in enumerate(sorted(p.name for p in d.iterdir())):
        (d / name).rename(d / f"part-{i:06d}.parquet")
    p = _pipe("sptool info mixed", tmp_path)
    assert p.returncode == 1 and "E_PART_METADATA_MISMATCH" in p.stderr and "not a part directory" not in p.stderr
