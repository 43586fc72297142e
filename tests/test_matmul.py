"""matmul: sparse x dense, dense x sparse and sparse x sparse, against NumPy and scipy.sparse."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs, tiny_budget
from conftest import save_npy as _npy
from conftest import write_tensor as _write

import sptool
from sptool.cli import cli
from sptool.errors import DataError, ShapeMismatch, UsageError
from sptool.ops.matmul import matmul

FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.fixture
def threaded(monkeypatch):
    """Split every batch over the two threads, however small."""
    monkeypatch.setenv("SPTOOL_PARALLEL_ROWS", "1")


def _op(x, adjoint):
    return np.conj(x.T) if adjoint else x


def _tol(dtype):
    return {"float32": 1e-4, "complex64": 1e-4, "float16": 2e-2}.get(np.dtype(dtype).name, 1e-9)


def _dense_values(rng, shape, dtype):
    return random_tensor(rng, shape, int(np.prod(shape)), dtype=dtype).to_dense()


@pytest.mark.parametrize("adjoint_a,adjoint_b", FLAGS)
@pytest.mark.parametrize("dtype", ["float64", "complex128", "complex64"])
def test_sparse_dense_adjoints(tmp_path, rng, tiny_batches, threaded, adjoint_a, adjoint_b, dtype):
    ta = random_tensor(rng, (13, 9), 60, dtype=dtype, duplicates=True)  # unsorted, duplicates accumulate
    a_dense = dense_oracle(ta)
    m, k = (9, 13) if adjoint_a else (13, 9)
    b = _dense_values(rng, (16, k) if adjoint_b else (k, 16), dtype)
    out = str(tmp_path / "o.npy")
    r = matmul(_write(tmp_path, "a.parquet", ta), _npy(tmp_path, "b.npy", b), out, adjoint_a=adjoint_a,
               adjoint_b=adjoint_b)
    got = np.load(out)
    want = _op(a_dense, adjoint_a) @ _op(b, adjoint_b)
    assert got.shape == (m, 16) == tuple(r["shape"]) and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype))
    if not adjoint_a:  # scipy as a second, independent oracle
        sp = ta.to_scipy("csr")
        np.testing.assert_allclose(got, sp @ _op(b, adjoint_b), rtol=_tol(dtype), atol=_tol(dtype))


@pytest.mark.parametrize("dtype,ddtype", [("float32", "float32"), ("int64", "int64"), ("int32", "int32"),
                                          ("int8", "int8"), ("uint64", "uint64"), ("float16", "float16"),
                                          ("bool", "bool"), ("int32", "float32")])
def test_sparse_dense_value_types(tmp_path, rng, threaded, dtype, ddtype):
    ta = random_tensor(rng, (40, 30), 300, dtype=dtype, duplicates=True, sort=True)
    b = _dense_values(rng, (30, 5), ddtype)
    out = str(tmp_path / "o.npy")
    matmul(_write(tmp_path, "a.parquet", ta), _npy(tmp_path, "b.npy", b), out)
    got = np.load(out)
    odt = np.result_type(np.dtype(dtype), np.dtype(ddtype))
    assert got.dtype == odt
    with np.errstate(over="ignore"):
        if odt == np.bool_:
            want = (dense_oracle(ta).astype(np.int64) @ b.astype(np.int64)) != 0
        elif odt.kind in "iu":
            want = (dense_oracle(ta).astype(odt).astype(np.int64) @ b.astype(odt).astype(np.int64)).astype(odt)
        else:
            want = dense_oracle(ta).astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, dtype=np.float64), rtol=_tol(odt),
                               atol=_tol(odt) * 10)


@pytest.mark.parametrize("width", [16, 1, 7])
def test_threads_partition_unsorted_rows(tmp_path, rng, threaded, width):
    ta = random_tensor(rng, (200, 50), 2000, duplicates=True)
    b = rng.standard_normal((50, width))
    out = str(tmp_path / "o.npy")
    matmul(_write(tmp_path, "a.parquet", ta), _npy(tmp_path, "b.npy", b), out)
    np.testing.assert_allclose(np.load(out), ta.to_scipy("csr") @ b)


@pytest.mark.parametrize("adjoint_a,adjoint_b", FLAGS)
def test_dense_sparse_is_flipped(tmp_path, rng, tiny_batches, threaded, adjoint_a, adjoint_b):
    tb = random_tensor(rng, (11, 8), 40, dtype="complex128", duplicates=True)
    k, n = (8, 11) if adjoint_b else (11, 8)
    a = _dense_values(rng, (k, 6) if adjoint_a else (6, k), "complex128")
    out = str(tmp_path / "o.npy")
    matmul(_npy(tmp_path, "a.npy", a), _write(tmp_path, "b.parquet", tb), out, adjoint_a=adjoint_a,
           adjoint_b=adjoint_b)
    got = np.load(out)
    assert got.shape == (6, n)
    np.testing.assert_allclose(got, _op(a, adjoint_a) @ _op(dense_oracle(tb), adjoint_b), atol=1e-9)


def test_big_dense_operand_goes_through_a_temp_file(tmp_path, rng, monkeypatch):
    """A transposed dense operand over a quarter of --memory is copied to a temporary .npy."""
    ta = random_tensor(rng, (300, 200), 900)
    b = rng.standard_normal((64, 200))  # 100 KiB > 16 KiB
    out = str(tmp_path / "o.npy")
    matmul(_write(tmp_path, "a.parquet", ta), _npy(tmp_path, "b.npy", b), out, adjoint_b=True, tmp_dir=str(tmp_path),
           memory=tiny_budget(64 << 10))
    np.testing.assert_allclose(np.load(out), ta.to_scipy("csr") @ b.T)
    assert sorted(os.listdir(tmp_path)) == ["a.parquet", "b.npy", "o.npy"]


# ---------------------------------------------------------------------------------------------
# sparse x sparse

@pytest.mark.parametrize("slab", [None, 7])  # 7: B multiplied in slabs of 7 entries (B over --memory)
@pytest.mark.parametrize("adjoint_a,adjoint_b", FLAGS)
def test_sparse_sparse_matches_scipy(tmp_path, rng, tiny_batches, threaded, monkeypatch, adjoint_a, adjoint_b, slab):
    small_runs(monkeypatch, 15, 9)  # spill runs
    if slab:
        monkeypatch.setenv("SPTOOL_SLAB_ENTRIES", str(slab))
    ta = random_tensor(rng, (17, 12), 80, dtype="complex128", duplicates=True)
    tb = random_tensor(rng, (12, 15) if not adjoint_b else (15, 12), 70, dtype="complex128", duplicates=True)
    if adjoint_a:
        ta = sptool.SparseTensor(ta.indices[:, ::-1], ta.values, (12, 17))
    out = str(tmp_path / "o.parquet")
    r = matmul(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out, adjoint_a=adjoint_a,
               adjoint_b=adjoint_b)
    s = sptool.read(out)
    assert s.canonical and sptool.validate(out).valid and r["shape"] == [17, 15]
    sa, sb = ta.to_scipy("csr"), tb.to_scipy("csr")
    want = (sa.conj().T if adjoint_a else sa) @ (sb.conj().T if adjoint_b else sb)
    np.testing.assert_allclose(s.to_dense(), want.toarray(), atol=1e-9)
    # the structure: every (i, j) reached by some product, explicit zeros included
    pa_ = (np.abs(_op(dense_oracle(ta), adjoint_a)) > 0) | _structure(ta, adjoint_a)
    pb_ = _structure(tb, adjoint_b)
    reach = (pa_.astype(int) @ pb_.astype(int)) > 0
    got = np.zeros_like(reach)
    got[tuple(s.indices.T)] = True
    np.testing.assert_array_equal(got, reach)


def _structure(t, adjoint):
    m = np.zeros(t.shape, bool)
    m[tuple(t.indices.T)] = True
    return m.T if adjoint else m


@pytest.mark.parametrize("slab", [None, 50])
@pytest.mark.parametrize("dtype", ["float32", "int64", "int8", "bool"])
def test_sparse_sparse_value_types_and_rows_split(tmp_path, rng, threaded, monkeypatch, dtype, slab):
    monkeypatch.setenv("SPTOOL_PARALLEL_ROWS", "4")
    if slab:
        monkeypatch.setenv("SPTOOL_SLAB_ENTRIES", str(slab))
    ta = random_tensor(rng, (60, 40), 400, dtype=dtype, duplicates=True)
    tb = random_tensor(rng, (40, 300), 600, dtype=dtype)  # wide: the sort path of the kernel
    out = str(tmp_path / "o.parquet")
    matmul(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out)
    s = sptool.read(out)
    assert s.dtype == np.dtype(dtype) and s.canonical and sptool.validate(out).valid
    with np.errstate(over="ignore"):
        wide = dense_oracle(ta).astype(np.int64 if dtype != "float32" else np.float64) @ dense_oracle(tb).astype(
            np.int64 if dtype != "float32" else np.float64)
    want = (wide != 0) if dtype == "bool" else wide.astype(dtype)
    np.testing.assert_allclose(s.to_dense().astype(np.float64), want.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_sparse_sparse_empty_and_refusals(tmp_path, rng):
    e = sptool.SparseTensor(np.empty((0, 2), np.int64), np.empty(0), (5, 4))
    tb = random_tensor(rng, (4, 3), 6)
    out = str(tmp_path / "o.parquet")
    matmul(_write(tmp_path, "e.parquet", e), _write(tmp_path, "b.parquet", tb), out)
    assert sptool.read(out).nnz == 0 and sptool.read(out).shape == (5, 3)
    # B's 10^10 columns take the sorted (sparse) accumulator, not a refusal (tests/test_wide_shapes.py).
    wide = sptool.SparseTensor([[0, 10**9]], [1.0], (4, 10**10))
    matmul(_write(tmp_path, "e2.parquet", e), _write(tmp_path, "w.parquet", wide), out)
    assert sptool.read(out).nnz == 0 and sptool.read(out).shape == (5, 10**10)


# ---------------------------------------------------------------------------------------------
# errors

def _raw(path, rows, cols, shape):
    """A file whose indices break its shape (sptool's writers refuse to make one)."""
    meta = sptool.TensorMeta(shape=shape, sparse_ndim=2, value_type="float64", nnz=len(rows), sort_order=(),
                             unique=False)
    table = pa.table({"indices_0": pa.array(rows, pa.int64()), "indices_1": pa.array(cols, pa.int64()),
                      "values": pa.array([1.0] * len(rows))})
    w = pq.ParquetWriter(path, table.schema)
    w.write_table(table)
    w.add_key_value_metadata({"sptool": meta.to_json()})
    w.close()
    return str(path)


def test_errors_name_the_entry_and_write_nothing(tmp_path, rng):
    out = str(tmp_path / "o.npy")
    b = _npy(tmp_path, "b.npy", np.ones((3, 2)))
    bad_k = _raw(tmp_path / "k.parquet", [0, 1, 1], [0, 2, 3], (2, 3))
    with pytest.raises(DataError, match=r"k \(3\) from index\[2,1\] out of bounds \(>=3\)"):
        matmul(bad_k, b, out)
    bad_m = _raw(tmp_path / "m.parquet", [0, 4], [0, 1], (2, 3))
    with pytest.raises(DataError, match=r"m \(4\) from index\[1,0\] out of bounds \(>=2\)"):
        matmul(bad_m, b, out)
    with pytest.raises(DataError, match=r"k \(4\) from index\[1,0\] out of bounds \(>=2\)"):
        matmul(bad_m, _npy(tmp_path, "b2.npy", np.ones((2, 2))), out, adjoint_a=True)
    a = _write(tmp_path, "a.parquet", random_tensor(rng, (4, 5), 6))
    with pytest.raises(ShapeMismatch, match=r"inner dimensions do not match \(5 vs\. 3\); A is \[4, 5\] and B is "):
        matmul(a, b, out)
    t3 = _write(tmp_path, "t3.parquet", random_tensor(rng, (4, 5, 2), 6))
    with pytest.raises(ShapeMismatch, match="must have 2 elements"):
        matmul(t3, b, out)
    with pytest.raises(ShapeMismatch, match="not a matrix"):
        matmul(a, _npy(tmp_path, "v.npy", np.ones(5)), out)
    with pytest.raises(UsageError, match="both operands are dense"):
        matmul(b, b, out)
    with pytest.raises(UsageError, match=r"\*\.npy"):
        matmul(a, _npy(tmp_path, "b5.npy", np.ones((5, 2))), str(tmp_path / "o.parquet"))
    assert not os.path.exists(out) and not os.path.exists(tmp_path / "o.parquet")


def test_cli(tmp_path, rng):
    ta = random_tensor(rng, (6, 4), 10, duplicates=True)
    a, b = _write(tmp_path, "a.parquet", ta), _npy(tmp_path, "b.npy", rng.standard_normal((6, 3)))
    out = str(tmp_path / "o.npy")
    runner = CliRunner()
    r = runner.invoke(cli, ["-q", "matmul", a, b, "--adjoint-a", "-o", out])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(out), dense_oracle(ta).T @ np.load(b))
    r = runner.invoke(cli, ["matmul", a, b, "-o", str(tmp_path / "x.npy")])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "inner dimensions do not match (4 vs. 6)" in r.output
    r = runner.invoke(cli, ["matmul", a, a, "--adjoint-b", "-o", "-"])
    assert r.exit_code == 0
    with open(tmp_path / "s.arrows", "wb") as f:
        f.write(r.stdout_bytes)
    s = sptool.read(str(tmp_path / "s.arrows"))
    assert s.canonical
    np.testing.assert_allclose(s.to_dense(), dense_oracle(ta) @ dense_oracle(ta).T)
    assert not os.path.exists(tmp_path / "x.npy")


@pytest.mark.parametrize("nnz_b", [200_000, 400_000])  # B as CSR under / over half of 16 MiB: in memory / slabs
def test_sparse_sparse_at_the_minimum_memory_with_a_on_stdin(tmp_path, rng, nnz_b):
    """The smallest --memory, with A arriving once, as a stream on stdin."""
    import subprocess
    import sys

    ta = random_tensor(rng, (300, 2000), 3000, sort=True)
    idx = np.stack([rng.integers(0, 2000, nnz_b), rng.integers(0, 50, nnz_b)], 1)
    tb = sptool.SparseTensor(idx, rng.standard_normal(nnz_b), (2000, 50))
    a, b = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb)
    stream = tmp_path / "a.arrows"
    sptool.convert(a, str(stream))
    out = str(tmp_path / "o.parquet")
    with open(stream, "rb") as f:
        p = subprocess.run([sys.executable, "-P", "-m", "sptool", "-q", "--memory", "16MiB", "matmul", "-", b,
                            "-o", out], stdin=f, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    want = ta.to_scipy("csr") @ tb.to_scipy("csr")
    np.testing.assert_allclose(sptool.read(out).to_dense(), want.toarray(), atol=1e-9)
