"""fill_empty_rows against a hand-written oracle; the indicator; value parsing; TensorFlow's errors."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import WatchedFolder, column_major, dense_oracle, random_tensor, small_runs

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.format import METADATA_KEY, TensorMeta, scalar_of_value_type
from sptool.ops.fill_empty_rows import fill_empty_rows


def parse_value(value, meta):
    return scalar_of_value_type(value, meta.value_type, "--default-value")


@pytest.fixture
def tiny_runs(monkeypatch):
    small_runs(monkeypatch, 64, 13)


def oracle(t, value):
    """(indices, values, indicator): rows stably sorted row-major, a fill at [r, 0, ...] per empty row."""
    K = t.sparse_ndim
    rows = t.shape[0]
    empty = np.ones(rows, bool)
    empty[t.indices[:, 0]] = False
    fill_idx = np.zeros((int(empty.sum()), K), dtype=np.int64)
    fill_idx[:, 0] = np.flatnonzero(empty)
    fill_vals = np.empty((len(fill_idx),) + t.values.shape[1:], dtype=t.values.dtype)
    fill_vals[...] = value
    idx = np.concatenate([t.indices, fill_idx])
    vals = np.concatenate([t.values, fill_vals])
    order = np.lexsort(idx.T[::-1])
    return idx[order], vals[order], empty


def _run(tmp_path, t, value, *, indicator=True, out="out.parquet"):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    dst = os.path.join(str(tmp_path), out)
    ind = str(tmp_path / "ind.npy") if indicator else None
    r = fill_empty_rows(src, dst, default_value=value, indicator=ind)
    assert sptool.validate(dst).valid
    s = sptool.read(dst)
    idx, vals, empty = oracle(t, parse_value(value, t.meta))
    np.testing.assert_array_equal(s.indices, idx)
    np.testing.assert_array_equal(s.values, vals)
    if indicator:
        got = np.load(ind)
        assert got.dtype == bool and got.shape == (t.shape[0],)
        np.testing.assert_array_equal(got, empty)
    assert r["empty_rows"] == empty.sum() and r["rows_out"] == t.nnz + empty.sum()
    assert s.sort_order == tuple(range(t.sparse_ndim))
    assert s.unique == (t.unique or s.nnz <= 1) or (not t.unique and s.unique)
    if t.unique:
        assert s.canonical
    return s, empty


@pytest.mark.parametrize("shape,nnz", [((40, 5, 3), 30), ((12, 4), 200), ((300, 2), 5), ((6, 3), 0),
                                       ((1, 1), 0), ((1, 4), 1), ((0, 3), 0), ((25,), 9)])
@pytest.mark.parametrize("layout", ["unsorted-dups", "sorted-unique"])
def test_matches_oracle(tmp_path, rng, tiny_batches, tiny_runs, shape, nnz, layout):
    t = random_tensor(rng, shape, nnz, duplicates=layout == "unsorted-dups", sort=layout == "sorted-unique")
    s, empty = _run(tmp_path, t, "2.5")
    want = dense_oracle(t)
    for r in np.flatnonzero(empty):
        want[(r,) + (0,) * (t.sparse_ndim - 1)] = 2.5
    np.testing.assert_array_equal(s.to_dense(), want)


def test_long_gaps_are_chunked(tmp_path, rng, tiny_batches):
    # Gaps longer than a batch (7 rows here), at the start, inside and after the last entry.
    t = sptool.SparseTensor([[50, 1], [50, 0], [51, 2], [130, 0], [131, 1]], [1.0, 2.0, 3.0, 4.0, 5.0], (400, 3))
    s, empty = _run(tmp_path, t, "-1")
    assert empty.sum() == 396 and s.nnz == 401


@pytest.mark.parametrize("out", ["o.arrows", "odir/"])
def test_outputs(tmp_path, rng, out):
    t = random_tensor(rng, (30, 4), 20, duplicates=True)
    _run(tmp_path, t, 0, out=out, indicator=False)


def test_hybrid_block_of_value(tmp_path, rng, tiny_batches, tiny_runs):
    t = random_tensor(rng, (30, 4, 2, 3), 25, sparse_ndim=2, dtype="int32", duplicates=True)
    s, empty = _run(tmp_path, t, "9")
    want = dense_oracle(t)
    want[np.flatnonzero(empty), 0] = 9
    np.testing.assert_array_equal(s.to_dense(), want)


@pytest.mark.parametrize("dtype,text,expect", [("bool", "true", True), ("bool", "0", False),
                                               ("complex64", "1+2j", 1 + 2j), ("uint8", "255", 255),
                                               ("int64", str(2**63 - 1), 2**63 - 1), ("float32", "nan", np.nan),
                                               ("float16", "-inf", -np.inf)])
def test_value_types(tmp_path, rng, dtype, text, expect):
    t = random_tensor(rng, (15, 3), 6, dtype=dtype)
    s, empty = _run(tmp_path, t, text)
    filled = s.values[np.isin(s.indices[:, 0], np.flatnonzero(empty))]
    np.testing.assert_array_equal(filled, np.full(empty.sum(), expect, dtype=t.values.dtype))


def test_strings(tmp_path):
    t = sptool.SparseTensor([[2, 1], [0, 0]], np.array(["b", "a"], dtype=object), (4, 2))
    s, _ = _run(tmp_path, t, "none")
    assert s.indices.tolist() == [[0, 0], [1, 0], [2, 1], [3, 0]]
    assert s.values.tolist() == ["a", "none", "b", "none"] and s.canonical


@pytest.mark.parametrize("dtype,text,message", [
    ("float64", "abc", "'abc' is not a valid float64"), ("int32", "1.5", "not a valid int32"),
    ("uint8", "256", "outside 0..255"), ("uint8", "-1", "outside"), ("bool", "yes", "use true or false"),
    ("float16", "1e10", "overflows"), ("complex64", "1+", "not a valid complex64"),
])
def test_bad_values(tmp_path, rng, dtype, text, message):
    t = random_tensor(rng, (5, 3), 3, dtype=dtype)
    with pytest.raises(UsageError, match=message):
        _run(tmp_path, t, text)
    assert not os.path.exists(tmp_path / "out.parquet") and not os.path.exists(tmp_path / "ind.npy")


def test_python_values():
    meta = TensorMeta(shape=(3,), sparse_ndim=1, value_type="int16")
    assert parse_value(7, meta) == 7 and parse_value(7.0, meta) == 7
    with pytest.raises(UsageError):
        parse_value(7.5, meta)
    with pytest.raises(UsageError, match="give a string"):
        parse_value(3, TensorMeta(shape=(3,), sparse_ndim=1, value_type="string"))
    assert parse_value("x", TensorMeta(shape=(3,), sparse_ndim=1, value_type="binary")) == b"x"


def _write_raw(path, shape, idx, vals):
    """A file that breaks the rules (sptool's own writer refuses to make one)."""
    meta = TensorMeta(shape=shape, sparse_ndim=len(shape), value_type="float64", nnz=len(vals))
    cols = {f"indices_{k}": pa.array(np.asarray(idx)[:, k], pa.int64()) for k in range(len(shape))}
    cols["values"] = pa.array(vals, pa.float64())
    table = pa.table(cols, schema=meta.arrow_schema()).replace_schema_metadata({METADATA_KEY: meta.to_json()})
    pq.write_table(table, path)


def test_tensorflow_errors(tmp_path):
    _write_raw(str(tmp_path / "zero.parquet"), (0, 3), [[0, 1], [0, 2]], [1.0, 2.0])
    with pytest.raises(DataError, match=r"dense_shape\[0\] = 0 but indices.shape\[0\] = 2"):
        fill_empty_rows(str(tmp_path / "zero.parquet"), str(tmp_path / "o.parquet"), default_value=0,
                        indicator=str(tmp_path / "i.npy"))
    _write_raw(str(tmp_path / "oob.parquet"), (4, 3), [[0, 1], [9, 2], [1, 0]], [1.0, 2.0, 3.0])
    with pytest.raises(DataError, match=r"indices\[1\] = \[9,2\] is out of bounds"):
        fill_empty_rows(str(tmp_path / "oob.parquet"), str(tmp_path / "o.parquet"), default_value=0,
                        indicator=str(tmp_path / "i.npy"))
    t = random_tensor(np.random.default_rng(0), (3, 0), 0)
    sptool.write(t, str(tmp_path / "z.parquet"))
    with pytest.raises(DataError, match="dimension 1 has size 0"):
        fill_empty_rows(str(tmp_path / "z.parquet"), str(tmp_path / "o.parquet"), default_value=0)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(("o.", "i.", ".o.", ".i."))]


def test_sorted_input_streams_through(tmp_path, rng, monkeypatch):
    small_runs(monkeypatch, 8, 8)  # a sort would spill its runs
    spill = WatchedFolder(tmp_path / "spill")
    t = random_tensor(rng, (50, 6), 40, sort=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    fill_empty_rows(str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"), default_value=1, tmp_dir=spill.path)
    assert sptool.read(str(tmp_path / "o.parquet")).canonical and not spill.touched
    sptool.write(column_major(t), str(tmp_path / "cm.parquet"))
    fill_empty_rows(str(tmp_path / "cm.parquet"), str(tmp_path / "o.parquet"), default_value=1, tmp_dir=spill.path)
    assert spill.touched  # the same watch sees a sort


def test_cli(tmp_path, rng):
    t = random_tensor(rng, (20, 3), 10, duplicates=True)
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    out = str(tmp_path / "o.parquet")
    for args, code, text in [(["--default-value", "x"], 2, "not a valid float64"),
                             (["--default-value", "1", "--indicator", str(tmp_path / "i.txt")], 2, "*.npy"),
                             ([], 2, "Missing option '--default-value'")]:
        r = CliRunner().invoke(cli, ["fill-empty-rows", src, *args, "-o", out])
        assert r.exit_code == code and text in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 or "Usage:" in r.stderr
    assert not os.path.exists(out)
    stream = str(tmp_path / "in.arrows")
    sptool.write(t, stream)
    with open(stream, "rb") as f:
        r = CliRunner().invoke(cli, ["-q", "fill-empty-rows", "-", "--default-value", "3", "--indicator",
                                     str(tmp_path / "i.npy"), "-o", "-"], input=f.read())
    assert r.exit_code == 0, r.stderr
    (tmp_path / "o.arrows").write_bytes(r.stdout_bytes)
    s = sptool.read(str(tmp_path / "o.arrows"))
    idx, vals, empty = oracle(t, 3.0)
    np.testing.assert_array_equal(s.indices, idx)
    np.testing.assert_array_equal(np.load(tmp_path / "i.npy"), empty)
