"""transpose against np.transpose of the dense oracle and a stable lexsort, through spilled runs."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import WatchedFolder, dense_oracle, random_tensor, small_runs

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.ops.transpose import transpose


@pytest.fixture
def tiny_runs(monkeypatch):
    small_runs(monkeypatch, 64, 13)


def _run(tmp_path, t, perm, out="out.parquet", **kw):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    dst = str(tmp_path / out)
    r = transpose(src, dst, perm=perm, **kw)
    assert sptool.validate(dst).valid
    return sptool.read(dst), r


@pytest.mark.parametrize("perm", [None, (1, 0, 2), (2, 0, 1), (-1, 0, 1), (0, 1, 2)])
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool", "complex64"])
def test_matches_numpy_and_stable_sort(tmp_path, rng, tiny_runs, tiny_batches, perm, dtype):
    t = random_tensor(rng, (13, 11, 7), 600, dtype=dtype, duplicates=True)
    s, r = _run(tmp_path, t, perm)
    p = [d % 3 for d in (perm if perm is not None else (2, 1, 0))]
    assert r["perm"] == p and s.shape == tuple(t.shape[d] for d in p)
    np.testing.assert_array_equal(s.to_dense(), np.transpose(dense_oracle(t), p))
    # Row-major order of the output; rows sharing a coordinate keep their input order.
    moved = t.indices[:, p]
    order = np.lexsort(moved.T[::-1])
    np.testing.assert_array_equal(s.indices, moved[order])
    np.testing.assert_array_equal(s.values, t.values[order])
    assert s.sort_order == (0, 1, 2) and not s.unique


def test_unique_stays_unique_and_canonical(tmp_path, rng, tiny_runs):
    t = random_tensor(rng, (20, 30), 300)
    s, _ = _run(tmp_path, t, None)
    assert s.canonical and s.meta.unique
    np.testing.assert_array_equal(s.to_dense(), dense_oracle(t).T)


@pytest.mark.parametrize("shape,nnz", [((4, 0, 3), 0), ((1, 1, 1), 1), ((5, 1, 3), 0), ((2, 9), 1)])
def test_small_and_empty(tmp_path, rng, shape, nnz):
    t = random_tensor(rng, shape, nnz)
    s, _ = _run(tmp_path, t, None)
    assert s.nnz == t.nnz and s.shape == shape[::-1]
    np.testing.assert_array_equal(s.to_dense(), np.transpose(dense_oracle(t)))


def test_hybrid_moves_only_sparse_dims(tmp_path, rng, tiny_runs, tiny_batches):
    t = random_tensor(rng, (9, 8, 7, 3), 200, sparse_ndim=3, dtype="float32", duplicates=True)
    s, _ = _run(tmp_path, t, (2, 0, 1))
    assert s.shape == (7, 9, 8, 3) and s.sparse_ndim == 3
    np.testing.assert_array_equal(s.to_dense(), np.transpose(dense_oracle(t), (2, 0, 1, 3)))
    s, _ = _run(tmp_path, t, (1, 2, 0, 3), out="full.parquet")  # a full-rank perm fixing the dense dim
    np.testing.assert_array_equal(s.to_dense(), np.transpose(dense_oracle(t), (1, 2, 0, 3)))
    with pytest.raises(UsageError, match="moves a dense dimension"):
        _run(tmp_path, t, (3, 0, 1, 2), out="bad.parquet")


def test_strings_and_names(tmp_path):
    t = sptool.SparseTensor([[0, 2], [1, 0], [0, 1]], np.array(["x", "y", "z"], dtype=object), (2, 3),
                            dimension_names=("row", "col"))
    s, _ = _run(tmp_path, t, None)
    assert s.indices.tolist() == [[0, 1], [1, 0], [2, 0]] and s.values.tolist() == ["y", "z", "x"]
    assert s.meta.dimension_names == ("col", "row") and s.canonical


def test_sorted_input_streams_through(tmp_path, rng, monkeypatch):
    small_runs(monkeypatch, 16, 16)  # a sort would spill its runs
    spill = WatchedFolder(tmp_path / "spill")
    t = random_tensor(rng, (20, 20, 5), 300)
    sptool.write(t, str(tmp_path / "in.parquet"))
    sptool.reorder(str(tmp_path / "in.parquet"), str(tmp_path / "cm.parquet"), perm=(2, 0, 1))
    spill.reset()
    transpose(str(tmp_path / "cm.parquet"), str(tmp_path / "o.parquet"), perm=(2, 0, 1), tmp_dir=spill.path)
    s = sptool.read(str(tmp_path / "o.parquet"))
    assert s.canonical and not spill.touched
    transpose(str(tmp_path / "cm.parquet"), str(tmp_path / "o2.parquet"), perm=(1, 0, 2), tmp_dir=spill.path)
    assert spill.touched  # the same watch sees a sort
    np.testing.assert_array_equal(s.to_dense(), np.transpose(dense_oracle(t), (2, 0, 1)))


@pytest.mark.parametrize("perm,message", [((0, 0, 1), "not a permutation"), ((0, 1), "exactly once"),
                                          ((0, 1, 3), "out of range")])
def test_bad_perm(tmp_path, rng, perm, message):
    t = random_tensor(rng, (3, 4, 5), 10)
    with pytest.raises(UsageError, match=message):
        _run(tmp_path, t, perm)
    assert not os.path.exists(tmp_path / "out.parquet")


def test_cli(tmp_path, rng, tiny_runs):
    t = random_tensor(rng, (6, 5, 4), 80, duplicates=True)
    src = str(tmp_path / "in.arrows")
    sptool.write(t, src)
    with open(src, "rb") as f:
        r = CliRunner().invoke(cli, ["-q", "transpose", "-", "--perm", "1,-1,0", "-o", "-"], input=f.read())
    assert r.exit_code == 0, r.stderr
    (tmp_path / "o.arrows").write_bytes(r.stdout_bytes)
    assert sptool.validate(str(tmp_path / "o.arrows")).valid
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "o.arrows")).to_dense(),
                                  np.transpose(dense_oracle(t), (1, 2, 0)))
    r = CliRunner().invoke(cli, ["transpose", src, "--perm", "1,1,0", "-o", str(tmp_path / "x.parquet")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "not a permutation" in r.stderr
    assert not os.path.exists(tmp_path / "x.parquet")


def test_out_of_bounds_input_is_named_not_missorted(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sptool.errors import DataError
    from sptool.format import METADATA_KEY, TensorMeta

    meta = TensorMeta(shape=(4, 3), sparse_ndim=2, value_type="float64", nnz=3)
    table = pa.table({"indices_0": pa.array([1, 0, 2], pa.int64()), "indices_1": pa.array([0, -5, 1], pa.int64()),
                      "values": pa.array([1.0, 2.0, 3.0])}, schema=meta.arrow_schema())
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: meta.to_json()}), str(tmp_path / "bad.parquet"))
    with pytest.raises(DataError, match=r"indices\[1\] = \[0,-5\] is out of bounds"):
        transpose(str(tmp_path / "bad.parquet"), str(tmp_path / "o.parquet"))
    assert not os.path.exists(tmp_path / "o.parquet")
