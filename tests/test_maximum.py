"""maximum and minimum: TensorFlow's union semantics (a missing side counts as 0), against dense NumPy."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor
from conftest import write_tensor as _write

import sptool
from sptool.cli import cli
from sptool.errors import ShapeMismatch, UsageError
from sptool.ops.maximum import maximum, minimum

OPS = {"maximum": (maximum, np.maximum), "minimum": (minimum, np.minimum)}


def _oracle(t, ufunc, other):
    """Entry-wise over the union of coordinates, a missing side counting as its fill."""
    da, db = dense_oracle(t), dense_oracle(other)
    present_a = np.zeros(t.shape[: t.sparse_ndim], bool)
    present_b = np.zeros(t.shape[: t.sparse_ndim], bool)
    present_a[tuple(t.indices.T)] = True
    present_b[tuple(other.indices.T)] = True
    return ufunc(da, db), present_a | present_b


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int8", "uint16", "bool"])
def test_matches_dense(tmp_path, rng, tiny_batches, op, dtype):
    fn, ufunc = OPS[op]
    ta = random_tensor(rng, (8, 6, 4), 80, dtype=dtype, duplicates=True)  # unsorted, duplicates summed first
    tb = random_tensor(rng, (8, 6, 4), 70, dtype=dtype, sort=True)
    out = str(tmp_path / "o.parquet")
    r = fn(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out)
    s = sptool.read(out)
    assert s.canonical and sptool.validate(out).valid and s.dtype == np.dtype(dtype)
    with np.errstate(over="ignore"):
        want, present = _oracle(ta, ufunc, tb)
    np.testing.assert_allclose(s.to_dense(), want, rtol=1e-6)
    got_present = np.zeros(present.shape, bool)
    got_present[tuple(s.indices.T)] = True
    np.testing.assert_array_equal(got_present, present)  # union of coordinates, no pruning
    assert r["rows_out"] == present.sum()


def test_missing_side_counts_as_zero_and_is_stored(tmp_path):
    ta = sptool.SparseTensor([[0, 0], [1, 1]], [-3.0, 2.0], (2, 3))
    tb = sptool.SparseTensor([[0, 2], [1, 1]], [4.0, -1.0], (2, 3))
    a, b, out = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), str(tmp_path / "o.parquet")
    maximum(a, b, out)
    s = sptool.read(out)
    assert s.indices.tolist() == [[0, 0], [0, 2], [1, 1]] and s.values.tolist() == [0.0, 4.0, 2.0]
    minimum(a, b, out)
    s = sptool.read(out)
    assert s.indices.tolist() == [[0, 0], [0, 2], [1, 1]] and s.values.tolist() == [-3.0, 0.0, -1.0]


def test_promotion_nan_fill_and_empty(tmp_path):
    ta = sptool.SparseTensor([[0], [2]], np.array([5, -7], np.int32), (4,))
    tb = sptool.SparseTensor([[0], [3]], np.array([np.nan, 1.5], np.float32), (4,))
    out = str(tmp_path / "o.parquet")
    maximum(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out)
    s = sptool.read(out)
    assert s.dtype == np.float64 and s.indices[:, 0].tolist() == [0, 2, 3]
    assert np.isnan(s.values[0]) and s.values[1:].tolist() == [0.0, 1.5]
    # non-zero fills: a one-sided coordinate meets the other side's fill
    fa = sptool.SparseTensor([[1]], [-2.0], (3,), fill_value=-5.0)
    fb = sptool.SparseTensor([[2]], [-9.0], (3,), fill_value=-1.0)
    minimum(_write(tmp_path, "fa.parquet", fa), _write(tmp_path, "fb.parquet", fb), out)
    s = sptool.read(out)
    assert s.fill_value == -5.0 and s.to_dense().tolist() == [-5.0, -2.0, -9.0]
    e = sptool.SparseTensor(np.empty((0, 1), np.int64), np.empty(0), (3,))
    maximum(_write(tmp_path, "e.parquet", e), _write(tmp_path, "e2.parquet", e), out)
    assert sptool.read(out).nnz == 0 and sptool.validate(out).valid


def test_errors(tmp_path, rng):
    c = _write(tmp_path, "c.parquet", random_tensor(rng, (4, 5), 5, dtype="complex64"))
    a = _write(tmp_path, "a.parquet", random_tensor(rng, (4, 5), 5))
    b = _write(tmp_path, "b.parquet", random_tensor(rng, (4, 6), 5))
    out = str(tmp_path / "o.parquet")
    with pytest.raises(UsageError, match="real values"):
        maximum(a, c, out)
    with pytest.raises(ShapeMismatch, match="got 5 and 6 for dimension 1"):
        minimum(a, b, out)
    assert not os.path.exists(out)
    runner = CliRunner()
    r = runner.invoke(cli, ["minimum", c, c, "-o", out])
    assert r.exit_code == 2 and r.output.startswith("Error:") and r.output.count("\n") == 1
    r = runner.invoke(cli, ["maximum", a, b, "-o", out])
    assert r.exit_code == 1 and "Operands' shapes do not match" in r.output
    r = runner.invoke(cli, ["-q", "maximum", a, a, "-o", out])
    assert r.exit_code == 0 and sptool.read(out).canonical
