"""sampled-matmul (TensorFlow's sparse.sampled_addmm, SDDMM) against NumPy's dense product."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import WatchedFolder, column_major, random_tensor, tiny_budget
from conftest import save_npy as _npy
from conftest import write_tensor as _write
from references import linalg as linalg_reference

import sptool
from sptool import _linalg
from sptool.cli import cli
from sptool.errors import ShapeMismatch, UsageError
from sptool.tensor import SparseTensor


def _oracle(t: SparseTensor, a, b, alpha, beta, dtype):
    """NumPy: the whole dense product A @ B (batched), gathered at the coordinates of the mask
    with its repeated coordinates summed first (the format's rule)."""
    idx, inverse = np.unique(t.indices, axis=0, return_inverse=True)
    summed = np.zeros(len(idx), dtype=np.float64)
    np.add.at(summed, inverse.ravel(), t.values.astype(np.float64))
    product = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return idx, (alpha * product[tuple(idx.T)] + beta * summed).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [0, 1, 3, 4, 17, 64])
def test_kernel_against_reference(rng, dtype, k):
    a = rng.standard_normal((30, k)).astype(dtype)
    bt = rng.standard_normal((20, k)).astype(dtype)
    rows, cols = rng.integers(0, 30, 500), rng.integers(0, 20, 500)
    got, want = np.empty(500, dtype), np.empty(500, dtype)
    _linalg.sampled_dot(rows, cols, a, bt, got)
    linalg_reference.sampled_dot(rows, cols, a, bt, want)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("b_order", ["C", "F"])
@pytest.mark.parametrize("duplicates", [False, True])
def test_matches_dense_product(tmp_path, rng, tiny_batches, b_order, duplicates):
    m, k, n = 23, 9, 31
    t = random_tensor(rng, (m, n), 150, duplicates=duplicates)  # unsorted
    if not duplicates:  # unique in an order one pass checks, out of row-major order
        t = column_major(t)
    a = rng.standard_normal((m, k))
    b = np.asarray(rng.standard_normal((k, n)), order=b_order)
    out = str(tmp_path / "o.parquet")
    r = sptool.sampled_matmul(_write(tmp_path, "m.parquet", t), _npy(tmp_path, "a.npy", a),
                              _npy(tmp_path, "b.npy", b), out, alpha=0.5, beta=-2.0)
    s = sptool.read(out)
    idx, want = _oracle(t, a, b, 0.5, -2.0, np.float64)
    if duplicates:  # summed first: canonical output
        np.testing.assert_array_equal(s.indices, idx)
        np.testing.assert_allclose(s.values, want, rtol=1e-12)
    else:  # indices and order kept
        np.testing.assert_array_equal(s.indices, t.indices)
        order = np.lexsort(t.indices.T[::-1])
        np.testing.assert_allclose(s.values[order], want, rtol=1e-12)
    assert r["rows"] == len(idx) and s.unique and sptool.validate(out).valid


def test_batched_and_spilled_transpose(tmp_path, rng, tiny_batches):
    """A 3-D mask with batch dimension 3; B C-ordered and larger than a third of the budget,
    so its transpose is written to --tmp-dir (and removed afterwards)."""
    shape = (3, 40, 50)
    t = random_tensor(rng, shape, 400, dtype="float32")
    a = rng.standard_normal((3, 40, 64)).astype(np.float32)
    b = rng.standard_normal((3, 64, 50)).astype(np.float32)
    spill = WatchedFolder(tmp_path / "spill")
    budget = tiny_budget(60_000)  # B is 38 kB: more than a third of this
    s = sptool.sampled_matmul(_write(tmp_path, "m.parquet", t), _npy(tmp_path, "a.npy", a),
                              _npy(tmp_path, "b.npy", b), memory=budget, tmp_dir=spill.path)
    idx, want = _oracle(t, a, b, 1.0, 1.0, np.float32)
    got = dict(zip(map(tuple, s.indices), s.values))
    np.testing.assert_allclose([got[tuple(i)] for i in idx], want, rtol=2e-5, atol=2e-5)
    assert s.values.dtype == np.float32 and spill.touched and os.listdir(spill.path) == []


def test_two_threads(tmp_path, rng, monkeypatch):
    """Batches split between two threads (each writes its own half of the output)."""
    monkeypatch.setenv("SPTOOL_PARALLEL_ROWS", "64")
    monkeypatch.setenv("SPTOOL_THREADS", "2")
    t = column_major(random_tensor(rng, (300, 200), 5000))
    a, b = rng.standard_normal((300, 16)), rng.standard_normal((16, 200))
    s = sptool.sampled_matmul(_write(tmp_path, "m.parquet", t), _npy(tmp_path, "a.npy", a), _npy(tmp_path, "b.npy", b))
    want = (a @ b)[tuple(t.indices.T)] + t.values
    np.testing.assert_allclose(s.values, want, rtol=1e-12)


def test_types_promote_and_float16_rounds_back(tmp_path, rng):
    t = random_tensor(rng, (8, 6), 20, dtype="float16")
    a = rng.standard_normal((8, 5)).astype(np.float16)
    b = rng.standard_normal((5, 6)).astype(np.float16)
    s = sptool.sampled_matmul(_write(tmp_path, "m.parquet", t), _npy(tmp_path, "a.npy", a), _npy(tmp_path, "b.npy", b))
    assert s.values.dtype == np.float16
    idx, want = _oracle(t, a, b, 1.0, 1.0, np.float16)
    got = dict(zip(map(tuple, s.indices), s.values))
    np.testing.assert_allclose([got[tuple(i)] for i in idx], want.astype(np.float64), rtol=2e-3, atol=2e-3)
    s64 = sptool.sampled_matmul(_write(tmp_path, "m.parquet", t), _npy(tmp_path, "a64.npy", a.astype(np.float64)),
                                _npy(tmp_path, "b.npy", b))
    assert s64.values.dtype == np.float64  # NumPy's promotion of float16 and float64


@pytest.mark.parametrize("a_shape, b_shape", [((8, 5), (4, 6)), ((9, 5), (5, 6)), ((8, 5), (5, 7)),
                                              ((2, 8, 5), (2, 5, 6)), ((5,), (5, 6))])
def test_shape_mismatch(tmp_path, rng, a_shape, b_shape):
    t = random_tensor(rng, (8, 6), 10)
    with pytest.raises(ShapeMismatch):
        sptool.sampled_matmul(_write(tmp_path, "m.parquet", t), _npy(tmp_path, "a.npy", np.ones(a_shape)),
                              _npy(tmp_path, "b.npy", np.ones(b_shape)))


def test_refusals(tmp_path, rng):
    t = random_tensor(rng, (8, 6), 10, dtype="int32")
    m = _write(tmp_path, "m.parquet", t)
    a, b = _npy(tmp_path, "a.npy", np.ones((8, 5), np.int64)), _npy(tmp_path, "b.npy", np.ones((5, 6), np.int64))
    with pytest.raises(UsageError, match="floating point"):
        sptool.sampled_matmul(m, a, b)
    with pytest.raises(UsageError, match="dense .npy"):
        sptool.sampled_matmul(m, m, b)
    with pytest.raises(UsageError, match="finite"):
        sptool.sampled_matmul(m, _npy(tmp_path, "af.npy", np.ones((8, 5))), b, alpha=float("nan"))


def test_cli_leaves_nothing_on_error(tmp_path, rng):
    t = random_tensor(rng, (8, 6), 10)
    m = _write(tmp_path, "m.parquet", t)
    a, b = _npy(tmp_path, "a.npy", np.ones((8, 5))), _npy(tmp_path, "b.npy", np.ones((4, 6)))
    before = sorted(os.listdir(tmp_path))
    res = CliRunner().invoke(cli, ["sampled-matmul", m, a, b, "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 1 and "[8, 6]" in res.output and "Traceback" not in res.output
    assert sorted(os.listdir(tmp_path)) == before
    b = _npy(tmp_path, "b.npy", np.full((5, 6), 2.0))
    res = CliRunner().invoke(cli, ["sampled-matmul", m, a, b, "--alpha", "3", "--beta", "0", "-o",
                                   str(tmp_path / "o.parquet")])
    assert res.exit_code == 0, res.output
    np.testing.assert_allclose(sptool.read(str(tmp_path / "o.parquet")).values, np.full(len(t.values), 30.0))
