"""mul and div: a dense .npy broadcast to the sparse shape, against NumPy on the dense form."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor
from conftest import save_npy as _npy
from conftest import write_tensor as _write

import sptool
from sptool.cli import cli
from sptool.errors import ShapeMismatch, UsageError
from sptool.ops.mul import div, mul, truediv_dtype
from sptool.tensor import SparseTensor


def _expected(t, d, op, dtype):
    """Per stored row: value (op) d broadcast to the full shape, at the row's coordinate."""
    full = np.broadcast_to(d, t.shape)
    gathered = full[tuple(t.indices.T)]
    with np.errstate(all="ignore"):
        v, g = t.values.astype(dtype), gathered.astype(dtype)
        return v * g if op == "mul" else v / g


@pytest.mark.parametrize("op", ["mul", "div"])
@pytest.mark.parametrize("dshape", [(9, 7), (1, 7), (7,), (9, 1), (1, 1), ()])
def test_broadcasting_keeps_rows(tmp_path, rng, tiny_batches, op, dshape):
    t = random_tensor(rng, (9, 7), 40, duplicates=True)  # unsorted, duplicates stay as they are
    d = rng.standard_normal(dshape) + 2.0
    out = str(tmp_path / "o.parquet")
    fn = mul if op == "mul" else div
    r = fn(_write(tmp_path, "t.parquet", t), _npy(tmp_path, "d.npy", d), out)
    s = sptool.read(out)
    np.testing.assert_array_equal(s.indices, t.indices)
    np.testing.assert_allclose(s.values, _expected(t, d, op, np.float64))
    assert s.sort_order == t.sort_order and s.unique == t.unique and sptool.validate(out).valid
    with np.errstate(all="ignore"):
        dense_want = dense_oracle(t) * np.broadcast_to(d, t.shape) if op == "mul" else None
    if op == "mul":
        np.testing.assert_allclose(s.to_dense(), dense_want)  # distributes over duplicates
    assert r["rows"] == t.nnz


@pytest.mark.parametrize("op", ["mul", "div"])
def test_a_changed_type_sums_repeats_first(tmp_path, rng, tiny_batches, op):
    """Where the value type changes (int8 over a dense array, int8 times a float one), rows sharing
    a coordinate are summed in int8 first (wrapping as int8 does), so the output is canonical:
    what div --help and mul --help state."""
    idx = np.array([[2, 1], [0, 3], [2, 1], [1, 0], [0, 3]])
    vals = np.array([100, 7, 100, -5, 9], np.int8)  # 100 + 100 wraps to -56 in int8
    t = SparseTensor(idx, vals, (3, 4))
    d = rng.standard_normal((3, 4)) + 3.0
    out = str(tmp_path / "o.parquet")
    (mul if op == "mul" else div)(_write(tmp_path, "t.parquet", t), _npy(tmp_path, "d.npy", d), out)
    s = sptool.read(out)
    coords, inverse = np.unique(idx, axis=0, return_inverse=True)
    summed = np.zeros(len(coords), np.int8)
    np.add.at(summed, inverse.ravel(), vals)
    with np.errstate(all="ignore"):
        want = summed * d[tuple(coords.T)] if op == "mul" else summed / d[tuple(coords.T)]
    np.testing.assert_array_equal(s.indices, coords)
    np.testing.assert_allclose(s.values, want)
    assert s.canonical and summed[np.flatnonzero((coords == [2, 1]).all(1))[0]] == -56


def test_3d_hybrid_and_sorted(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (6, 5, 4), 50, sort=True)
    d = rng.standard_normal((5, 1)) + 3
    out = str(tmp_path / "o.parquet")
    mul(_write(tmp_path, "t.parquet", t), _npy(tmp_path, "d.npy", d), out)
    s = sptool.read(out)
    assert s.canonical and sptool.validate(out).valid
    np.testing.assert_allclose(s.to_dense(), dense_oracle(t) * d)
    # a hybrid tensor: D broadcasts over the dense dimension too
    h = random_tensor(rng, (10, 3), 6, sparse_ndim=1, dtype="float32")
    w = np.array([1.0, 10.0, 100.0], np.float32)
    mul(_write(tmp_path, "h.parquet", h), _npy(tmp_path, "w.npy", w), out)
    s = sptool.read(out)
    assert s.sparse_ndim == 1 and s.dtype == np.float32
    np.testing.assert_allclose(s.values, h.values * w, rtol=1e-6)


@pytest.mark.parametrize("dtype,want", [("int8", "float32"), ("uint8", "float32"), ("int16", "float32"),
                                        ("uint16", "float32"), ("int32", "float64"), ("uint32", "float64"),
                                        ("int64", "float64"), ("uint64", "float64"), ("float16", "float16"),
                                        ("float32", "float32"), ("float64", "float64"), ("complex64", "complex64"),
                                        ("complex128", "complex128")])
def test_div_dtype_rules(tmp_path, rng, dtype, want):
    assert truediv_dtype(np.dtype(dtype)) == np.dtype(want)
    t = random_tensor(rng, (4, 3), 8, dtype=dtype, sort=True)  # unique rows trusted: kept in their order
    d = np.full((3,), 4, dtype=dtype)
    out = str(tmp_path / "o.parquet")
    div(_write(tmp_path, "t.parquet", t), _npy(tmp_path, "d.npy", d), out)
    s = sptool.read(out)
    assert s.dtype == np.dtype(want)
    np.testing.assert_allclose(s.values, t.values.astype(want) / np.asarray(4, dtype=want), rtol=1e-3)


def test_mul_promotes_and_div_by_zero(tmp_path):
    t = sptool.SparseTensor([[0, 0], [0, 1], [1, 1]], np.array([2, 0, -3], np.int32), (2, 2))
    tp = _write(tmp_path, "t.parquet", t)
    out = str(tmp_path / "o.parquet")
    mul(tp, _npy(tmp_path, "f.npy", np.array([0.5, 2.0], np.float32)), out)
    s = sptool.read(out)
    assert s.dtype == np.float64 and s.values.tolist() == [1.0, 0.0, -6.0]
    mul(tp, _npy(tmp_path, "i.npy", np.array([[3], [5]], np.int8)), out)
    assert sptool.read(out).dtype == np.int32 and sptool.read(out).values.tolist() == [6, 0, -15]
    div(tp, _npy(tmp_path, "z.npy", np.zeros(2, np.int32)), out)  # NumPy/IEEE: inf, nan, -inf
    v = sptool.read(out).values
    assert v.dtype == np.float64 and v[0] == np.inf and np.isnan(v[1]) and v[2] == -np.inf


def test_errors_write_nothing(tmp_path, rng):
    t = _write(tmp_path, "t.parquet", random_tensor(rng, (4, 5), 6))
    out = str(tmp_path / "o.parquet")
    for shape in [(4,), (2, 5), (3, 4, 5), (4, 5, 1)]:
        with pytest.raises(ShapeMismatch, match="does not broadcast to the sparse shape"):
            mul(t, _npy(tmp_path, "bad.npy", np.ones(shape)), out)
    with pytest.raises(UsageError, match="dense .npy"):
        mul(t, t, out)
    with pytest.raises(UsageError, match="sparse tensor first"):
        div(_npy(tmp_path, "d.npy", np.ones(5)), t, out)
    fill = _write(tmp_path, "f.parquet", sptool.SparseTensor([[0, 0]], [1.0], (4, 5), fill_value=2.0))
    with pytest.raises(UsageError, match="fill value is 0"):
        mul(fill, str(tmp_path / "d.npy"), out)
    assert not os.path.exists(out)
    runner = CliRunner()
    r = runner.invoke(cli, ["mul", t, _npy(tmp_path, "b.npy", np.ones((3, 5))), "-o", out])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert "the dense operand's shape [3, 5] does not broadcast to the sparse shape [4, 5]" in r.output
    r = runner.invoke(cli, ["div", t, str(tmp_path / "missing.npy"), "-o", out])
    assert r.exit_code == 2 and r.output.startswith("Error:")
    assert not os.path.exists(out)
    r = runner.invoke(cli, ["-q", "div", t, _npy(tmp_path, "two.npy", np.full((1, 5), 2.0)), "-o", out])
    assert r.exit_code == 0 and sptool.validate(out).valid


@pytest.mark.parametrize("dtype,number", [("float32", 2.5), ("int32", 3), ("int32", 0.5), ("float64", "-1e-3")])
def test_by_a_number(tmp_path, rng, dtype, number):
    t = random_tensor(rng, (6, 5), 20, dtype=dtype)
    path = str(tmp_path / "t.parquet")
    sptool.write(t, path)
    value = float(number) if isinstance(number, str) else number
    want = t.values * np.asarray(value) if isinstance(number, str) else t.values * number  # NumPy's promotion
    got = sptool.mul(path, number, None)
    assert got.values.dtype == want.dtype
    np.testing.assert_allclose(got.values, want[np.lexsort(t.indices.T[::-1])] if got.sort_order else want)
    # "--" ends the options, so that a negative number is not read as one.
    r = CliRunner().invoke(cli, ["-q", "div", "-o", str(tmp_path / "d.parquet"), path, "--", str(number)])
    assert r.exit_code == 0, r.output
    quotient = sptool.read(str(tmp_path / "d.parquet"))
    np.testing.assert_allclose(quotient.to_dense(), t.to_dense() / value, rtol=1e-6)
