"""matmul with inf and nan: implicit zeros of a sparse operand take no part, stored values and
dense elements do (the rule matmul --help states), for every kind of operand pair."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import save_npy as _npy

import sptool
from sptool.tensor import SparseTensor


def _rule(a_idx, a_vals, b, shape):
    """The stated rule, in plain Python: out[i, j] = sum over A's stored (i, k) of A[i, k] * B[k, j]
    for a dense B; for a sparse B (given as {(k, j): value}) only over B's stored (k, j)."""
    out = np.zeros(shape)
    with np.errstate(all="ignore"):
        for (i, k), v in zip(map(tuple, a_idx), a_vals):
            if isinstance(b, dict):
                for (kk, j), w in b.items():
                    if kk == k:
                        out[i, j] += v * w
            else:
                for j in range(shape[1]):
                    out[i, j] += v * b[k, j]
    return out


A_IDX = np.array([[0, 0], [1, 1], [2, 2]])
A_VALS = np.array([4.0, np.inf, np.nan])
B_DENSE = np.array([[0.0, 1.0, 0.0], [3.0, 0.0, np.inf], [0.0, 0.0, 0.0]])


def test_sparse_times_dense(tmp_path):
    a = SparseTensor(A_IDX, A_VALS, (3, 3))
    out = str(tmp_path / "o.npy")
    with np.errstate(all="ignore"):
        sptool.matmul(a, _npy(tmp_path, "b.npy", B_DENSE), out)
    want = _rule(A_IDX, A_VALS, B_DENSE, (3, 3))
    np.testing.assert_array_equal(np.load(out), want)
    # The stored inf at A[1, 1] meets a dense 0 at B[1, 1] (nan, as NumPy), and the dense inf at
    # B[1, 2] meets A's stored inf (inf) but never A's implicit zero at A[0, 1].
    assert np.isnan(want[1, 1]) and want[1, 2] == np.inf and want[0, 2] == 0
    with np.errstate(all="ignore"):
        dense_product = a.to_dense() @ B_DENSE
    assert np.isnan(dense_product[0, 2])  # where a fully dense product differs from the rule


def test_sparse_times_sparse_agrees_with_the_rule(tmp_path):
    a = SparseTensor(A_IDX, A_VALS, (3, 3))
    b_stored = {(1, 0): 3.0, (1, 2): np.inf, (0, 1): 1.0}
    b = SparseTensor(np.array(list(b_stored)), np.array(list(b_stored.values())), (3, 3))
    with np.errstate(all="ignore"):
        got = sptool.matmul(a, b, None).to_dense()
    np.testing.assert_array_equal(got, _rule(A_IDX, A_VALS, b_stored, (3, 3)))


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_dense_times_sparse(tmp_path, value):
    """D @ S: S's implicit zeros take no part, D's elements all do."""
    d = np.array([[value, 0.0], [1.0, 2.0]])
    s_idx, s_vals = np.array([[0, 1]]), np.array([5.0])
    out = str(tmp_path / "o.npy")
    with np.errstate(all="ignore"):
        sptool.matmul(_npy(tmp_path, "d.npy", d), SparseTensor(s_idx, s_vals, (2, 2)), out)
        # (D S)^T = S^T D^T: the rule applied with S^T as the sparse operand.
        want = _rule(s_idx[:, ::-1], s_vals, d.T, (2, 2)).T
    np.testing.assert_array_equal(np.load(out), want)
