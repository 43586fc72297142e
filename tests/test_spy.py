"""spy: the density grid against NumPy's histogram2d, the image read back with Pillow, the text
picture in a pipe and under a pseudo-terminal."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from command_examples import env_with_sptool
from conftest import random_tensor, write_tensor
from PIL import Image
from pty_terminal import BAR_GLYPH, cursor_restored, run_in_terminal

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError


def _histogram(t, axes, extent, cells) -> np.ndarray:
    """NumPy's count of stored entries in (rows, cols) equal bins over [0, extent)."""
    r, c = axes
    counts, _, _ = np.histogram2d(t.indices[:, r], t.indices[:, c], bins=cells,
                                  range=[[0, extent[0]], [0, extent[1]]])
    return counts.astype(np.int64)


@pytest.mark.parametrize("shape,axes,size", [
    ((97, 83), None, (10, 7)),  # extents coprime with the cell counts: no index on a float bin edge
    ((97, 5, 61), (0, 2), (11, 13)),
    ((61, 5, 97), (2, 0), (7, 9)),  # rows of the picture from the last axis
    ((1000, 3), (0, 1), (64, 16)),  # an axis shorter than the picture: one cell per index
])
def test_counts_match_histogram2d(tmp_path, rng, tiny_batches, shape, axes, size):
    t = random_tensor(rng, shape, 400, duplicates=True)  # duplicates count as stored entries
    path = write_tensor(tmp_path, "t.parquet", t)
    r = sptool.spy(path, image_size=size, axis=axes)
    a = axes or (0, 1)
    extent = (shape[a[0]], shape[a[1]])
    cells = (min(size[1], extent[0]), min(size[0], extent[1]))
    assert r["grid"].shape == cells and r["nnz"] == t.nnz
    np.testing.assert_array_equal(r["grid"], _histogram(t, a, extent, cells))


def test_image_size_and_log_scale(tmp_path, rng):
    t = random_tensor(rng, (89, 71), 600, duplicates=True)
    path = write_tensor(tmp_path, "t.parquet", t)
    out = tmp_path / "pattern.png"
    r = sptool.spy(path, str(out), image_size="30x20")
    with Image.open(out) as im:
        assert im.size == (30, 20) and im.mode == "L" and im.format == "PNG"
        pixels = np.asarray(im)
    counts = _histogram(t, (0, 1), (89, 71), (20, 30))
    np.testing.assert_array_equal(r["grid"], counts)
    assert ((pixels == 255) == (counts == 0)).all(), "white exactly where nothing is stored"
    assert (pixels[counts == counts.max()] == 0).all(), "black where the most entries are"
    # Darker for more entries: the grey levels sort the cells as their counts do.
    full = counts > 0
    order = np.argsort(counts[full], kind="stable")
    assert (np.diff(pixels[full][order].astype(int)) <= 0).all()


@pytest.mark.parametrize("n,size", [(64, 64), (300, 100), (50, 200)])
def test_diagonal_lands_on_the_diagonal_pixels(tmp_path, n, size):
    eye = sptool.SparseTensor(np.stack([np.arange(n), np.arange(n)], axis=1), np.ones(n), (n, n))
    out = tmp_path / "eye.png"
    sptool.spy(write_tensor(tmp_path, "eye.parquet", eye), str(out), image_size=(size, size))
    with Image.open(out) as im:
        dark = np.asarray(im) < 255
    if n >= size:  # each pixel a block of indices: the diagonal entries fall in the diagonal pixels only
        want = np.eye(size, dtype=bool)
    else:  # each index a band of size/n pixels: squares along the diagonal
        want = np.kron(np.eye(n, dtype=bool), np.ones((size // n, size // n), dtype=bool))
    np.testing.assert_array_equal(dark, want)


def test_ascii_marks_exactly_the_occupied_cells(tmp_path, rng):
    t = random_tensor(rng, (79, 53), 150)
    path = write_tensor(tmp_path, "t.parquet", t)
    r = sptool.spy(path, ascii_=True, image_size=(20, 10))
    lines = r["ascii"]
    assert lines[1] == lines[-1] == "+" + "-" * 20 + "+" and len(lines) == 1 + 10 + 2
    body = np.array([list(ln[1:-1]) for ln in lines[2:-1]])
    counts = _histogram(t, (0, 1), (79, 53), (10, 20))
    assert ((body == " ") == (counts == 0)).all()
    assert ((body == "@") == (counts == counts.max())).all()
    assert f"{t.nnz:,} entries, up to {counts.max()} in a cell" in lines[0]


def _cli_ascii_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("|", "+"))]


def test_ascii_in_a_pipe(tmp_path, rng):
    t = random_tensor(rng, (40, 40), 60)
    path = write_tensor(tmp_path, "t.parquet", t)
    p = subprocess.run(["sptool", "spy", path, "--size", "20x10"], capture_output=True, text=True, cwd=tmp_path,
                       env=env_with_sptool(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "\x1b[" not in p.stdout, "no escape sequences in a pipe"
    lines = _cli_ascii_lines(p.stdout)
    assert len(lines) == 12 and all(len(ln) == 22 for ln in lines)
    assert lines[1:-1] == sptool.spy(path, image_size=(20, 10))["ascii"][2:-1]
    assert p.stdout.splitlines()[0].startswith("indices_0: 0..39 down")
    assert "spy: read " + path + " (60 rows)" in p.stderr  # the summary goes to stderr, apart from the picture


def test_ascii_in_a_terminal(tmp_path, rng):
    t = random_tensor(rng, (40, 40), 60)
    path = write_tensor(tmp_path, "t.parquet", t)
    code, output = run_in_terminal([sys.executable, "-m", "sptool", "spy", path, "--ascii", "--size", "20x10"],
                                   cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0, text
    assert cursor_restored(output), text
    assert "Traceback" not in text and "Error" not in text
    want = sptool.spy(path, image_size=(20, 10))["ascii"]
    got = [ln.rstrip() for ln in text.replace("\r", "").splitlines() if ln.startswith(("|", "+"))]
    assert got == [ln.rstrip() for ln in want[1:]]
    assert "(60 rows)" in text


def test_long_spy_draws_a_bar_in_a_terminal(tmp_path):
    rng = np.random.default_rng(2)
    n = 400_000
    t = sptool.SparseTensor(np.stack([rng.integers(0, 5000, n), rng.integers(0, 4000, n)], axis=1),
                            rng.random(n), (5000, 4000))
    path = write_tensor(tmp_path, "t.arrows", t)  # a stream arrives batch by batch: the bar has time to show
    code, output = run_in_terminal(["bash", "-c", f"cat {path} | SPTOOL_BATCH_ROWS=1000 sptool spy - "
                                    f"-o {tmp_path / 'p.png'}"], cwd=tmp_path)
    assert code == 0, output
    assert BAR_GLYPH in output and cursor_restored(output)
    with Image.open(tmp_path / "p.png") as im:
        assert im.size == (512, 512)


def test_without_pillow(tmp_path, rng, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL now raises ImportError
    path = write_tensor(tmp_path, "t.parquet", random_tensor(rng, (10, 10), 20))
    r = CliRunner().invoke(cli, ["spy", path, "-o", str(tmp_path / "p.png")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "needs Pillow" in r.output and "pip install 'sptool[spy]'" in r.output
    assert not (tmp_path / "p.png").exists()
    r = CliRunner().invoke(cli, ["-q", "spy", path, "--ascii"])
    assert r.exit_code == 0 and "+" + "-" * 64 + "+" in r.output


@pytest.mark.parametrize("args,message", [
    (["--axis", "0,0"], "two different sparse axes"),
    (["--axis", "0,5"], "out of range"),
    (["--image-size", "big"], "WIDTHxHEIGHT"),
    (["--image-size", "0x5"], "each side must be 1 to 65536"),
    (["-o", "p.jpg"], "name the output *.png"),
    (["--memory", "16MiB", "--image-size", "65536x65536", "-o", "p.png"], "over half of --memory"),
])
def test_usage_errors(tmp_path, rng, args, message):
    path = write_tensor(tmp_path, "t.parquet", random_tensor(rng, (10, 10), 20))
    r = CliRunner().invoke(cli, ["spy", path, *[str(tmp_path / a) if a.startswith("p.") else a for a in args]])
    assert r.exit_code == 2 and message in r.output and r.output.count("\n") == 1, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_refuses_a_vector_and_bad_indices(tmp_path):
    vec = sptool.SparseTensor([[1], [3]], [1.0, 2.0], (5,))
    with pytest.raises(UsageError, match="two sparse axes"):
        sptool.spy(write_tensor(tmp_path, "v.parquet", vec))
    bad = sptool.SparseTensor([[1, 1], [3, 4]], [1.0, 2.0], (5, 5))
    src = bad.as_source()
    src.meta = src.meta.with_(shape=(5, 4))  # a source whose rows break its own shape
    with pytest.raises(DataError, match=r"indices\[1\] = \[3,4\] is out of bounds"):
        sptool.spy(src)
