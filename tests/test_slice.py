"""slice against dense slicing of the oracle, and row-group pruning by index statistics."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.io import open_sink
from sptool.ops.slice import slice_


def _write(tmp_path, name, t):
    path = str(tmp_path / name)
    sptool.write(t, path)
    return path


def _box(shape, start, size):
    """The oracle's view: NumPy clamps slices exactly as TensorFlow clamps the output shape."""
    size = list(size) + [-1] * (len(shape) - len(size))
    start = list(start) + [0] * (len(shape) - len(start))
    return tuple(slice(a, None if s == -1 else a + s) for a, s in zip(start, size))


def _check(out, want, *, sort_order, unique):
    s = sptool.read(out)
    got = s.to_dense()
    assert s.shape == want.shape
    if want.dtype == object:
        assert got.astype(object).tolist() == want.tolist()
    elif want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)
    assert s.sort_order == sort_order and s.unique == (unique or s.nnz <= 1)
    assert sptool.validate(out).valid
    return s


BOXES = [
    ([2, 1, 0], [5, 4, 7]),      # inside
    ([0, 0, 0], [-1, -1, -1]),   # everything
    ([8, 3, 2], [10, -1, 3]),    # clamped at the end of dimension 0
    ([4, 9, 0], [2, 5, 7]),      # starts past dimension 1: empty, shape 0 there
    ([3, 3, 3], [0, 2, 2]),      # size 0
    ([9, 8, 6], [1, 1, 1]),      # the last element only
]


@pytest.mark.parametrize("start,size", BOXES)
@pytest.mark.parametrize("dtype", ["float64", "uint8", "complex64", "bool"])
def test_unsorted_with_duplicates(tmp_path, rng, tiny_batches, start, size, dtype):
    t = random_tensor(rng, (10, 9, 7), 250, dtype=dtype, duplicates=True)
    out = str(tmp_path / "o.parquet")
    r = slice_(_write(tmp_path, "in.parquet", t), out, start=start, size=size)
    want = dense_oracle(t)[_box(t.shape, start, size)]
    _check(out, want, sort_order=(), unique=False)
    assert r["shape"] == list(want.shape)


@pytest.mark.parametrize("start,size", BOXES[:3])
def test_sorted_stays_canonical(tmp_path, rng, tiny_batches, start, size):
    t = random_tensor(rng, (10, 9, 7), 200, sort=True)
    out = str(tmp_path / "o.arrows")
    slice_(_write(tmp_path, "in.parquet", t), out, start=start, size=size)
    assert _check(out, dense_oracle(t)[_box(t.shape, start, size)], sort_order=(0, 1, 2), unique=True).canonical


def test_empty_one_entry_and_size_zero_dims(tmp_path, rng, tiny_batches):
    for i, (shape, nnz) in enumerate([((5, 0, 3), 0), ((1, 1), 1), ((4, 1, 2), 3), ((6,), 0)]):
        t = random_tensor(rng, shape, nnz, sort=True)  # claims a checked order, which the output keeps
        rank = len(shape)
        for start, size in [([0] * rank, [-1] * rank), ([1] * rank, [1] * rank)]:
            out = str(tmp_path / f"o{i}.parquet")
            slice_(_write(tmp_path, f"in{i}.parquet", t), out, start=start, size=size)
            _check(out, dense_oracle(t)[_box(shape, start, size)], sort_order=t.sort_order, unique=t.unique)


def test_hybrid(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (8, 6, 3, 4), 60, sparse_ndim=2, duplicates=True, dtype="int32")
    path = _write(tmp_path, "h.parquet", t)
    out = str(tmp_path / "o.parquet")
    dense = dense_oracle(t)
    slice_(path, out, start=[2, 1], size=[4, -1])  # sparse dimensions only: blocks kept whole
    _check(out, dense[2:6, 1:], sort_order=(), unique=False)
    slice_(path, out, start=[2, 1, 1, 0], size=[4, -1, 1, 3])  # every dimension: blocks cut too
    _check(out, dense[2:6, 1:, 1:2, 0:3], sort_order=(), unique=False)


def test_strings(tmp_path, rng, tiny_batches):
    base = random_tensor(rng, (7, 8), 30, sort=True)
    t = sptool.SparseTensor(base.indices, np.array([f"w{i}" for i in range(base.nnz)], dtype=object), (7, 8))
    out = str(tmp_path / "o.parquet")
    slice_(_write(tmp_path, "s.parquet", t), out, start=[1, 2], size=[5, 4])
    _check(out, dense_oracle(t)[1:6, 2:6], sort_order=(0, 1), unique=True)


def test_errors(tmp_path, rng):
    path = _write(tmp_path, "t.parquet", random_tensor(rng, (4, 3, 2), 5))
    out = str(tmp_path / "o.parquet")
    cases = [
        (dict(start=[0, 0], size=[1, 1, 1]), "Expected start to be a vector of length 3 but got length 2"),
        (dict(start=[0, 0, 0], size=[1, 1]), "Expected size to be a vector of length 3 but got length 2"),
        (dict(start=[0, -1, 0], size=[1, 1, 1]), r"start\[1\] = -1 must be >= 0"),
        (dict(start=[0, 0, 0], size=[1, -2, 1]), r"size\[1\] = -2 must be >= 0, or -1"),
    ]
    for kw, msg in cases:
        with pytest.raises(UsageError, match=msg):
            slice_(path, out, **kw)
    assert not os.path.exists(out)


def _many_row_groups(tmp_path, rng, name="big.parquet", shape=(2000, 50), nnz=60_000):
    t = random_tensor(rng, shape, nnz, sort=True)
    path = str(tmp_path / name)
    with open_sink(path, t.meta.with_(nnz=None)) as sink:
        sink.row_group_rows = 1000
        for i in range(0, t.nnz, 4096):
            sink.write(np.ascontiguousarray(t.keys[:, i:i + 4096]), t.values[i:i + 4096])
    assert pq.ParquetFile(path).metadata.num_row_groups == -(-t.nnz // 1000)
    return t, path


def test_small_box_reads_few_row_groups(tmp_path, rng):
    t, path = _many_row_groups(tmp_path, rng)
    out = str(tmp_path / "box.parquet")
    r = slice_(path, out, start=[1200, 10], size=[15, 20])
    _check(out, dense_oracle(t)[1200:1215, 10:30], sort_order=(0, 1), unique=True)
    assert r["row_groups_total"] == pq.ParquetFile(path).metadata.num_row_groups
    assert r["row_groups_read"] <= 2 and r["bytes_read"] * 20 < r["bytes_total"]
    assert r["rows_in"] <= 2000
    # A box along the trailing dimension only cannot be pruned: every row group spans it.
    r = slice_(path, out, start=[0, 10], size=[-1, 1])
    assert r["row_groups_read"] == r["row_groups_total"]
    _check(out, dense_oracle(t)[:, 10:11], sort_order=(0, 1), unique=True)
    # An empty box reads nothing.
    r = slice_(path, out, start=[5000, 0], size=[1, 1])
    assert r["row_groups_read"] == 0 and r["shape"] == [0, 1]


def test_pruning_across_parts_and_streams(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (300, 20), 3000, sort=True)
    d = str(tmp_path / "ds") + "/"
    with open_sink(d, t.meta.with_(nnz=None), part_rows=1000) as sink:
        sink.row_group_rows = 250
        sink.write(np.ascontiguousarray(t.keys), t.values)
    parts = sorted(os.listdir(d))
    assert len(parts) == 3
    total = sum(pq.ParquetFile(os.path.join(d, p)).metadata.num_row_groups for p in parts)
    out = str(tmp_path / "o.parquet")
    r = slice_(d, out, start=[100, 0], size=[10, -1])
    assert r["row_groups_total"] == total >= 9 and r["row_groups_read"] <= 2
    # The parts' claims and seams give the dataset its order (formats/SPEC.md section 7).
    _check(out, dense_oracle(t)[100:110], sort_order=(0, 1), unique=True)
    arrows = str(tmp_path / "t.arrows")
    sptool.write(t, arrows)
    r = slice_(arrows, out, start=[100, 0], size=[10, -1])
    assert r["row_groups_read"] is None
    _check(out, dense_oracle(t)[100:110], sort_order=(0, 1), unique=True)


def test_cli(tmp_path, rng):
    t, path = _many_row_groups(tmp_path, rng, shape=(400, 10), nnz=3000)
    runner = CliRunner()
    out = str(tmp_path / "o.parquet")
    r = runner.invoke(cli, ["slice", path, "--start", "0,0", "--size", "1,1,1", "-o", out])
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0
    assert "Expected size to be a vector of length 2 but got length 3" in r.output
    r = runner.invoke(cli, ["slice", path, "--start", "0,x", "--size", "1,1", "-o", out])
    assert r.exit_code == 2
    r = runner.invoke(cli, ["slice", path, "--start", "100,2", "--size", "5,-1", "-o", out])
    assert r.exit_code == 0 and "row groups" in r.output
    _check(out, dense_oracle(t)[100:105, 2:], sort_order=(0, 1), unique=True)
