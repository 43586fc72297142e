"""sptool in a person's terminal: progress bars drawn and taken down, the cursor always shown
again, Ctrl-C and errors handled, under a real pseudo-terminal (tests/pty_terminal.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from command_examples import help_examples, in_workdir, readme_job
from pty_terminal import BAR_GLYPH, Terminal, cursor_restored, run_in_terminal

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
