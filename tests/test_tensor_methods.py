"""SparseTensor's operator methods against NumPy on the dense forms (the oracle), on unsorted
tensors with duplicate coordinates."""

import numpy as np
import pytest
from conftest import dense_oracle, random_tensor

from sptool import SparseTensor
from sptool.errors import ShapeMismatch


@pytest.fixture
def t(rng):
    return random_tensor(rng, (7, 5, 4), 60, duplicates=True)


def test_transpose_and_T(t):
    np.testing.assert_allclose(t.transpose().to_dense(), dense_oracle(t).transpose())
    np.testing.assert_allclose(t.transpose([1, 0, 2]).to_dense(), dense_oracle(t).transpose(1, 0, 2))
    np.testing.assert_allclose(t.T.to_dense(), dense_oracle(t).T)


def test_reorder_canonical(t):
    c = t.reorder(duplicates="sum")
    assert c.canonical
    assert c.nnz == len(np.unique(t.indices, axis=0))
    keys = c.indices
    assert (np.lexsort(keys.T[::-1]) == np.arange(len(keys))).all()
    assert len(np.unique(keys, axis=0)) == len(keys)
    np.testing.assert_allclose(c.to_dense(), dense_oracle(t))


@pytest.mark.parametrize("axis", [0, 1, [0, 2]])
def test_reduce_sum_and_max(t, axis):
    dense = dense_oracle(t)
    present = np.zeros(t.shape, dtype=bool)
    present[tuple(t.indices.T)] = True
    np.testing.assert_allclose(t.reduce_sum(axis).to_dense(), dense.sum(axis=tuple(np.atleast_1d(axis))))
    # max over stored entries only; cells no entry reaches hold the fill (0)
    masked = np.where(present, dense, -np.inf).max(axis=tuple(np.atleast_1d(axis)))
    np.testing.assert_allclose(t.reduce_max(axis).to_dense(), np.where(np.isinf(masked), 0, masked))


def test_reduce_all_axes_is_a_number(t):
    assert t.reduce_sum() == pytest.approx(dense_oracle(t).sum())


def test_add_tensors_and_numbers(rng, t):
    u = random_tensor(rng, t.shape, 40, duplicates=True)
    np.testing.assert_allclose((t + u).to_dense(), dense_oracle(t) + dense_oracle(u))
    present = np.zeros(t.shape, dtype=bool)
    present[tuple(t.indices.T)] = True
    want = np.where(present, dense_oracle(t) + 1.5, 0)  # implicit zeros stay zero
    np.testing.assert_allclose((t + 1.5).to_dense(), want)
    np.testing.assert_allclose((1.5 + t).to_dense(), want)


def test_mul_div_by_numbers(t):
    np.testing.assert_allclose((t * 3).to_dense(), dense_oracle(t) * 3)
    np.testing.assert_allclose((3 * t).to_dense(), dense_oracle(t) * 3)
    np.testing.assert_allclose((np.float32(3) * t).to_dense(), dense_oracle(t) * 3)
    np.testing.assert_allclose((t / 4).to_dense(), dense_oracle(t) / 4)


def test_matmul_sparse(rng):
    a = random_tensor(rng, (6, 9), 20, duplicates=True)
    b = random_tensor(rng, (9, 4), 15)
    np.testing.assert_allclose((a @ b).to_dense(), dense_oracle(a) @ dense_oracle(b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128])
def test_matmul_with_arrays_gives_arrays(rng, dtype):
    """SparseTensor @ ndarray and ndarray @ SparseTensor: dense NumPy products, in memory, as
    TensorFlow's sparse_dense_matmul (duplicates accumulate)."""
    a = random_tensor(rng, (6, 9), 25, duplicates=True)
    d = (rng.standard_normal((9, 4)) * 10).astype(dtype)
    got = a @ d
    want = dense_oracle(a) @ d
    assert isinstance(got, np.ndarray) and got.dtype == np.result_type(a.values.dtype, dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    e = (rng.standard_normal((3, 6)) * 10).astype(dtype)
    got = e @ a
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, e @ dense_oracle(a), rtol=1e-6)
    with pytest.raises(ShapeMismatch):
        a @ np.ones((4, 2))


def test_unsupported_operands_raise_type_error(t):
    with pytest.raises(TypeError):
        t + "x"
    with pytest.raises(TypeError):
        t @ [[1.0, 2.0]]
    with pytest.raises(TypeError):
        t * True


def test_methods_return_tensors_that_chain():
    t = SparseTensor([[0, 1], [2, 0], [2, 0]], [5.0, 7.0, 1.0], shape=(3, 2))
    out = ((t + t) * 2).T.reorder()
    np.testing.assert_allclose(out.to_dense(), (dense_oracle(t) * 4).T)
