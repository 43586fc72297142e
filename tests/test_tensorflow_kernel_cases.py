"""TensorFlow's own sparse-op kernel tests, re-expressed as sptool calls.

Every case below is taken from a TensorFlow test file (tensorflow/tensorflow, cited beside the
case as FILE::method) with the result TensorFlow's test itself asserts: the literal indices,
values and shapes written in that test, or, where the test computes its expectation with NumPy
from a seeded generator, the same NumPy computation on the same seeded draws.  Invalid inputs
that TensorFlow refuses (InvalidArgumentError / ValueError) must be refused by sptool with its
own error type and a one-line message.

Where sptool deliberately differs from TensorFlow, the case asserts sptool's documented
behaviour and cites the page (docs/tensorflow.md, formats/SPEC.md).  Undocumented differences
are marked xfail(strict=True) with the reason.

A sample of cases also runs through the command line (Click's CliRunner), so both paths are
covered.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sptool
from sptool import SparseTensor, SptoolError
from sptool.cli import cli
from sptool.format import TensorMeta

SP = "tensorflow/python/kernel_tests/sparse_ops/"
REORDER = SP + "sparse_reorder_op_test.py"
ADD = SP + "sparse_add_op_test.py"
CONCAT = SP + "sparse_concat_op_test.py"
SPLIT = SP + "sparse_split_op_test.py"
SLICE = SP + "sparse_slice_op_test.py"
RESHAPE = SP + "sparse_reshape_op_test.py"
OPS = SP + "sparse_ops_test.py"
TODENSE = SP + "sparse_to_dense_op_py_test.py"
MATMUL = SP + "sparse_tensor_dense_matmul_op_test.py"
CROSS = SP + "sparse_cross_op_test.py"
PYOPS = "tensorflow/python/ops/sparse_ops_test.py"
SEGMENT = "tensorflow/python/kernel_tests/math_ops/segment_reduction_ops_test.py"
BINCOUNT_KERNEL = "tensorflow/python/kernel_tests/math_ops/bincount_op_test.py"
BINCOUNT = "tensorflow/python/ops/bincount_ops_test.py"

TF_DOC = "docs/tensorflow.md"
WIDE_DOC = "formats/SPEC.md §4.6 (shapes whose extents multiply past 2^63 - 1)"


# ---------------------------------------------------------------------------------------------
# helpers


def st(indices, values, shape, dtype=None) -> SparseTensor:
    """A SparseTensor of TensorFlow's literal arguments, passed to sptool as they are (an
    ill-formed shape or index array included: refusing it is sptool's job)."""
    idx = np.asarray(indices, dtype=np.int64)
    if idx.size == 0 and idx.ndim < 2:
        idx = idx.reshape(0, len(shape))
    vals = np.asarray(values, dtype=dtype) if dtype is not None else np.asarray(values)
    if vals.dtype.kind == "U":
        vals = vals.astype(object)
    return SparseTensor(idx, vals, tuple(shape))


def assert_sparse(got: SparseTensor, indices, values, shape, *, close=False):
    """got holds exactly TensorFlow's recorded indices (in its order), values and dense shape."""
    want_idx = np.asarray(indices, dtype=np.int64).reshape(-1, len(shape))
    np.testing.assert_array_equal(np.asarray(got.indices), want_idx)
    assert tuple(got.shape) == tuple(int(s) for s in shape)
    got_vals = np.asarray(got.values)
    if got_vals.dtype == object or np.asarray(values).dtype.kind in "USO":
        assert [_text(v) for v in got_vals] == [_text(v) for v in values]
    elif close:
        np.testing.assert_allclose(got_vals, np.asarray(values, dtype=np.float64), rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got_vals, np.asarray(values))


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def dense_of(t: SparseTensor, default=0) -> np.ndarray:
    return np.asarray(sptool.todense(t, default_value=default) if default != 0 else sptool.todense(t))


def assert_refused(call, *words):
    """sptool refuses with its own error type and a one-line message naming the problem."""
    with pytest.raises(SptoolError) as err:
        call()
    message = str(err.value).strip()
    assert message and "\n" not in message, message
    for word in words:
        assert re.search(word, message, re.IGNORECASE), message
    return message


def sparsify(x, thresh=0.5):
    """TensorFlow's tests' _sparsify: zero what is below thresh (in place), keep the rest."""
    x[x < thresh] = 0
    nz = np.where(x)
    return st(np.vstack(nz).T, x[nz], x.shape)


def run_cli(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def write(tmp_path, name, t) -> str:
    path = str(tmp_path / f"{name}.parquet")
    sptool.write(t, path)
    return path


def assert_cli_refused(result, *words):
    assert result.exit_code in (1, 2), (result.exit_code, result.output)
    message = (result.stderr or result.output).strip()
    assert "Traceback" not in message, message
    assert len(message.splitlines()) == 1, message
    for word in words:
        assert re.search(word, message, re.IGNORECASE), message


# TensorFlow's fixtures, as its test files write them

IND_5x6 = [[0, 0], [1, 0], [1, 3], [1, 4], [3, 2], [3, 3]]
VAL_5x6 = [0, 10, 13, 14, 32, 33]

IND_4x6 = [[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [2, 0], [2, 3], [2, 5], [3, 0], [3, 2],
           [3, 3], [3, 5]]
VAL_4x6 = [0, 2, 4, 5, 11, 13, 14, 20, 23, 25, 30, 32, 33, 35]

IND_5x7 = [[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [1, 6], [2, 0], [2, 3], [2, 5], [3, 0],
           [3, 2], [3, 3], [3, 5], [4, 1], [4, 4], [4, 6]]
VAL_5x7 = [0, 2, 4, 5, 11, 13, 14, 16, 20, 23, 25, 30, 32, 33, 35, 41, 44, 46]

IND_3x4x2 = [[0, 0, 0], [0, 0, 1], [0, 2, 0], [0, 2, 1], [1, 1, 0], [1, 1, 1], [1, 3, 0], [1, 3, 1],
             [2, 2, 0], [2, 2, 1]]
VAL_3x4x2 = ["a0", "a1", "b0", "b1", "c0", "c1", "d0", "d1", "e0", "e1"]

IND_2x3x4 = [[0, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 3], [1, 1, 1], [1, 1, 3], [1, 2, 2]]
VAL_2x3x4 = [1, 10, 12, 103, 111, 113, 122]

FIXTURES = {
    "5x6": lambda: st(IND_5x6, VAL_5x6, [5, 6], np.float64),
    "4x6": lambda: st(IND_4x6, VAL_4x6, [4, 6], np.int64),
    "5x7": lambda: st(IND_5x7, VAL_5x7, [5, 7], np.int64),
    "3x4x2": lambda: st(IND_3x4x2, VAL_3x4x2, [3, 4, 2]),
    "2x3x4": lambda: st(IND_2x3x4, VAL_2x3x4, [2, 3, 4], np.int64),
    "4x6_empty": lambda: st(np.empty((0, 2)), np.array([], np.int64), [4, 6]),
}


# ---------------------------------------------------------------------------------------------
# reorder


def _permutations():
    rng = np.random.RandomState(1618)
    return [rng.permutation(6) for _ in range(5)]


@pytest.mark.parametrize("perm", [np.arange(6)] + _permutations(),
                         ids=["testAlreadyInOrder"] + [f"testOutOfOrder-{i}" for i in range(5)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reorder(perm, dtype):
    # REORDER::testAlreadyInOrder / testOutOfOrder (float32 stands in for bfloat16)
    idx, val = np.array(IND_5x6)[perm], np.array(VAL_5x6, dtype)[perm]
    got = sptool.reorder(st(idx, val, [5, 6]))
    assert_sparse(got, IND_5x6, np.array(VAL_5x6, dtype), [5, 6])


def test_reorder_shape_past_int64():
    # REORDER::testShapeOverflow: a shape of 4096^6 (2^72 cells) keeps its shape through reorder;
    # sptool holds it as format 1.1 (WIDE_DOC).
    shape = [4096] * 6
    got = sptool.reorder(st([[0] * 6], [0.0], shape))
    assert_sparse(got, [[0] * 6], [0.0], shape)


def test_reorder_refuses_values_count_mismatch():
    # REORDER::testInvalidSparseInput: "Number of elements .* do not match"
    assert_refused(lambda: sptool.reorder(st([[0, 0, 0]], [0, 1, 2], [3, 3])))


# ---------------------------------------------------------------------------------------------
# add (sparse + sparse, sparse + dense)

IND_3x3_ADD = [[0, 1], [1, 0], [2, 0], [2, 1]]


def _add_3x3(negate=False):
    vals = -np.array([1, 2, 3, 4]) if negate else np.array([1, 2, 3, 4])
    return st(IND_3x3_ADD, vals.astype(np.float32), [3, 3])


def _add_3x3_v2():
    return st(IND_3x3_ADD, np.array([1, -1.9, 3, -4.2], np.float32), [3, 3])


ADD_CASES = [
    pytest.param(_add_3x3, _add_3x3, 0, IND_3x3_ADD, [2, 4, 6, 8], id="ADD::testAddSelf"),
    pytest.param(_add_3x3, lambda: _add_3x3(negate=True), 0.1, np.empty((0, 2)), [],
                 id="ADD::testAddSelfAndNegation"),
    pytest.param(_add_3x3, _add_3x3_v2, 0.21, [[0, 1], [2, 0]], [2, 6], id="ADD::testSmallValuesShouldVanish-0.21"),
    pytest.param(_add_3x3, _add_3x3_v2, 0.11, [[0, 1], [2, 0], [2, 1]], [2, 6, -0.2],
                 id="ADD::testSmallValuesShouldVanish-0.11"),
    pytest.param(lambda: st([[0]], np.array([1], np.float32), [1]), lambda: st([[0]], np.array([1], np.float32), [1]),
                 0, [[0]], [2], id="OPS::SparseAddTest::testValuesInVariable"),
]


@pytest.mark.parametrize("make_a, make_b, thresh, indices, values", ADD_CASES)
def test_add_sparse_sparse(make_a, make_b, thresh, indices, values):
    got = sptool.add(make_a(), make_b(), thresh=thresh)
    shape = make_a().shape
    assert_sparse(got, indices, values, shape, close=True)


def _add_sparse_dense_draws():
    """ADD::testAddSparseDense's seeded draws, in the test's order."""
    rng = np.random.RandomState(1618)
    n, m = rng.randint(30, size=2)
    draws = []
    for dtype in [np.float32, np.float64, np.int64, np.complex64]:
        for _index_dtype in [np.int32, np.int64]:
            draws.append((dtype, rng.randn(n, m).astype(dtype), rng.randn(n, m).astype(dtype)))
    return draws


@pytest.mark.parametrize("draw", [d for d in _add_sparse_dense_draws() if d[0] is not np.complex64][::2],
                         ids=["float32", "float64", "int64"])
def test_add_sparse_dense(draw, tmp_path):
    # ADD::testAddSparseDense: sparse + dense = dense_np + sparsified values, either order
    _dtype, rand_vals, dense = draw
    sparse = sparsify(rand_vals)
    d = str(tmp_path / "d.npy")
    np.save(d, dense)
    for a, b in ((sparse, d), (d, sparse)):
        out = str(tmp_path / "out.npy")
        sptool.add(a, b, out)
        np.testing.assert_array_equal(np.load(out), dense + rand_vals)


@pytest.mark.parametrize("bad_idx", [[[-1, 0]], [[1, 3]]], ids=["-1", "3"])
def test_add_sparse_dense_refuses_invalid_index(bad_idx, tmp_path):
    # ADD::testInvalidSparseTensor: "invalid index" (sptool refuses the tensor itself)
    d = str(tmp_path / "d.npy")
    np.save(d, np.zeros((2, 2), np.int32))
    assert_refused(lambda: sptool.add(st(bad_idx, [0], [2, 2]), d, str(tmp_path / "o.npy")), "bounds")


# ---------------------------------------------------------------------------------------------
# concat


def _c3x3():
    return st([[0, 2], [1, 0], [2, 0], [2, 2]], np.array([1, 2, 3, 4], np.float32), [3, 3])


def _c3x5():
    return st([[1, 1], [2, 0], [2, 3], [2, 4]], np.array([1, 2, 1, 0], np.float32), [3, 5])


def _c3x2():
    return st([[1, 0], [2, 0]], np.array([1, 2], np.float32), [3, 2])


def _c2x3():
    return st([[0, 1], [1, 0], [1, 2]], np.array([1, 1, 2], np.float32), [2, 3])


def _c2x3x4():
    return st([[0, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 3], [1, 1, 1], [1, 1, 3], [1, 2, 2]],
              np.array([1, 10, 12, 103, 111, 113, 122], np.float32), [2, 3, 4])


def _cempty(shape):
    return st(np.empty((0, len(shape))), np.array([], np.float32), shape)


def _cs3x3():
    return st([[0, 2], [1, 0], [2, 0], [2, 2]], ["a", "b", "c", "d"], [3, 3])


def _cs3x5():
    return st([[1, 1], [2, 0], [2, 3], [2, 4]], ["e", "f", "g", "h"], [3, 5])


CONCAT2 = ([[0, 2], [1, 0], [1, 4], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7]], [1, 2, 1, 3, 4, 2, 1, 0], [3, 8])
CONCAT_DIM0 = ([[0, 2], [1, 0], [2, 0], [2, 2], [3, 1], [4, 0], [4, 2]], [1, 2, 3, 4, 1, 1, 2], [5, 3])
CONCAT3 = ([[0, 2], [1, 0], [1, 4], [1, 8], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7], [2, 8]],
           [1, 2, 1, 1, 3, 4, 2, 1, 0, 2], [3, 10])
EXPAND_DIM0 = ([[0, 2], [1, 0], [2, 0], [2, 2], [4, 1], [5, 0], [5, 3], [5, 4], [7, 0], [8, 0], [9, 1], [10, 0],
                [10, 2]], [1, 2, 3, 4, 1, 2, 1, 0, 1, 2, 1, 1, 2], [11, 5])
EXPAND_DIM1 = ([[0, 2], [0, 11], [1, 0], [1, 4], [1, 8], [1, 10], [1, 12], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7],
                [2, 8]], [1, 1, 2, 1, 1, 1, 2, 3, 4, 2, 1, 0, 2], [3, 13])
SOME_EMPTY = (np.array(IND_2x3x4) + [0, 7, 0], VAL_2x3x4, [2, 15, 4])

CONCAT_CASES = [
    pytest.param([_c3x3], 1, False, ([[0, 2], [1, 0], [2, 0], [2, 2]], [1, 2, 3, 4], [3, 3]), id="testConcat1-axis1"),
    *[pytest.param([_c3x3, _c3x5], a, False, CONCAT2, id=f"testConcat2-axis{a}") for a in (-1, 1)],
    *[pytest.param([_c3x3, _c2x3], a, False, CONCAT_DIM0, id=f"testConcatDim0-axis{a}") for a in (-2, 0)],
    *[pytest.param([_c3x3, _c3x5, _c3x2], a, False, CONCAT3, id=f"testConcat3-axis{a}") for a in (-1, 1)],
    pytest.param([lambda: _cempty([2, 3, 4]), lambda: _cempty([2, 7, 4]), lambda: _cempty([2, 5, 4])], 1, False,
                 (np.empty((0, 3)), [], [2, 15, 4]), id="testConcatNoNonZeros"),
    pytest.param([lambda: _cempty([2, 7, 4]), _c2x3x4, lambda: _cempty([2, 5, 4])], 1, False, SOME_EMPTY,
                 id="testConcatSomeNoNonZeros"),
    *[pytest.param([_cs3x3, _cs3x5], a, False,
                   (CONCAT2[0], ["a", "b", "e", "c", "d", "f", "g", "h"], [3, 8]), id=f"testConcatNonNumeric-axis{a}")
      for a in (-1, 1)],
    *[pytest.param([_c3x3, _c3x5, _c3x2, _c2x3], a, True, EXPAND_DIM0,
                   id=f"testMismatchedShapesExpandNonconcatDim-axis{a}") for a in (-2, 0)],
    *[pytest.param([_c3x3, _c3x5, _c3x2, _c2x3], a, True, EXPAND_DIM1,
                   id=f"testMismatchedShapesExpandNonconcatDim-axis{a}") for a in (-1, 1)],
    pytest.param([lambda: st([[0, 0], [1, 1]], [1, 2], [2, 2])] * 2, -1, False,
                 ([[0, 0], [0, 2], [1, 1], [1, 3]], [1, 1, 2, 2], [2, 4]), id="testConcatShape"),
]


@pytest.mark.parametrize("makers, axis, expand, want", CONCAT_CASES)
def test_concat(makers, axis, expand, want):
    # CONCAT::<id>
    got = sptool.concat([m() for m in makers], axis=axis, expand_nonconcat=expand)
    assert_sparse(got, *want)


CONCAT_REFUSED = [
    # CONCAT::testConcat1 also passes axis -2000 and 2000 with a single input, which TensorFlow
    # returns unchanged whatever the axis; sptool refuses an axis outside the rank (TF_DOC, concat).
    *[pytest.param([_c3x3], a, False, f"axis {a}.*out of range", id=f"testConcat1-axis{a}") for a in (-2000, 2000)],
    *[pytest.param([_c3x3, _c2x3x4], a, False, "rank", id=f"testMismatchedRank-axis{a}") for a in (-1, 1)],
    *[pytest.param([_c3x3, _c2x3x4], a, True, "rank", id=f"testMismatchedRankExpandNonconcatDim-axis{a}")
      for a in (-1, 1)],
    *[pytest.param([_c3x3, _c3x5, _c3x2, _c2x3], a, False, "shape", id=f"testMismatchedShapes-axis{a}")
      for a in (-1, 1)],
    pytest.param([lambda: st([[0, 0]], [1.0], [0, 1]), lambda: st([[0, 0]], [2.0], [0, 1])], 1, False, "bounds",
                 id="testDivisionByZeroMalformedShape-0x1"),
    pytest.param([lambda: st([[0, 0]], [1.0], [1, 1]), lambda: st([[0, 0]], [2.0], [1, 0])], 1, False, "bounds",
                 id="testDivisionByZeroMalformedShape-1x0"),
    pytest.param([lambda: st([[0]], [1.0], [2 ** 62])] * 2, 0, False, "2\\^63|overflow|int64|large",
                 id="testLargeShapeOverflow"),
]


@pytest.mark.parametrize("makers, axis, expand, word", CONCAT_REFUSED)
def test_concat_refused(makers, axis, expand, word):
    # CONCAT::<id>: TensorFlow raises ValueError / InvalidArgumentError
    assert_refused(lambda: sptool.concat([m() for m in makers], axis=axis, expand_nonconcat=expand), word)


@pytest.mark.parametrize("first_shape", [[1, 10, (2 ** 63 - 1) // 11], [1, (2 ** 63 - 1) // 11, (2 ** 63 - 1) // 11],
                                         [1, 1, (2 ** 63 - 1) // 11]],
                         ids=["testSparseConcatOutputVolumeOverflow", "testSparseConcatInputVolumeOverflowCrash-big",
                              "testSparseConcatInputVolumeOverflowCrash-small"])
def test_concat_volume_past_int64(first_shape):
    # CONCAT::testSparseConcat*VolumeOverflow*: TensorFlow refuses volumes past int64 as its own
    # limit; sptool's format 1.1 holds them (WIDE_DOC), so the concatenation is answered.
    dim_x = (2 ** 63 - 1) // 11
    second_shape = [1, 2, dim_x] if first_shape[1] == 10 else [1, dim_x, dim_x]
    a = st([[0, 0, 0]], np.array([1.0], np.float32), first_shape)
    b = st([[0, 0, 0]], np.array([2.0], np.float32), second_shape)
    got = sptool.concat([a, b], axis=1)
    assert_sparse(got, [[0, 0, 0], [0, first_shape[1], 0]], [1.0, 2.0],
                  [1, first_shape[1] + second_shape[1], dim_x])


# ---------------------------------------------------------------------------------------------
# split

SPLIT_CASES = [
    *[pytest.param("4x6", 2, a, [
        ([[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4]], [0, 2, 4, 5, 11, 13, 14], [2, 6]),
        ([[0, 0], [0, 3], [0, 5], [1, 0], [1, 2], [1, 3], [1, 5]], [20, 23, 25, 30, 32, 33, 35], [2, 6]),
    ], id=f"testSplitMatrixRows-axis{a}") for a in (0, -2)],
    *[pytest.param("5x7", 3, a, [
        ([[0, 0], [0, 2], [1, 1], [2, 0], [3, 0], [3, 2], [4, 1]], [0, 2, 11, 20, 30, 32, 41], [5, 3]),
        ([[0, 1], [1, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [4, 13, 14, 23, 33, 44], [5, 2]),
        ([[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [5, 16, 25, 35, 46], [5, 2]),
    ], id=f"testSplitMatrixUnevenCols-3-axis{a}") for a in (1, -1)],
    *[pytest.param("5x7", 4, a, [
        ([[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [0, 11, 20, 30, 41], [5, 2]),
        ([[0, 0], [1, 1], [2, 1], [3, 0], [3, 1]], [2, 13, 23, 32, 33], [5, 2]),
        ([[0, 0], [0, 1], [1, 0], [2, 1], [3, 1], [4, 0]], [4, 5, 14, 25, 35, 44], [5, 2]),
        ([[1, 0], [4, 0]], [16, 46], [5, 1]),
    ], id=f"testSplitMatrixUnevenCols-4-axis{a}") for a in (1, -1)],
    *[pytest.param("5x7", 2, a, [
        ([[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [1, 6], [2, 0], [2, 3], [2, 5]],
         [0, 2, 4, 5, 11, 13, 14, 16, 20, 23, 25], [3, 7]),
        ([[0, 0], [0, 2], [0, 3], [0, 5], [1, 1], [1, 4], [1, 6]], [30, 32, 33, 35, 41, 44, 46], [2, 7]),
    ], id=f"testSplitMatrixUnevenRows-2-axis{a}") for a in (0, -2)],
    *[pytest.param("5x7", 3, a, [
        ([[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [1, 6]], [0, 2, 4, 5, 11, 13, 14, 16], [2, 7]),
        (None, [20, 23, 25, 30, 32, 33, 35], [2, 7]),
        ([[0, 1], [0, 4], [0, 6]], [41, 44, 46], [1, 7]),
    ], id=f"testSplitMatrixUnevenRows-3-axis{a}") for a in (0, -2)],
    *[pytest.param("4x6", 4, a, [
        ([[0, 0], [0, 2], [0, 4], [0, 5]], [0, 2, 4, 5], [1, 6]),
        ([[0, 1], [0, 3], [0, 4]], [11, 13, 14], [1, 6]),
        ([[0, 0], [0, 3], [0, 5]], [20, 23, 25], [1, 6]),
        ([[0, 0], [0, 2], [0, 3], [0, 5]], [30, 32, 33, 35], [1, 6]),
    ], id=f"testSplitAllRows-axis{a}") for a in (0, -2)],
    *[pytest.param("4x6", 3, a, [
        ([[0, 0], [1, 1], [2, 0], [3, 0]], [0, 11, 20, 30], [4, 2]),
        ([[0, 0], [1, 1], [2, 1], [3, 0], [3, 1]], [2, 13, 23, 32, 33], [4, 2]),
        ([[0, 0], [0, 1], [1, 0], [2, 1], [3, 1]], [4, 5, 14, 25, 35], [4, 2]),
    ], id=f"testSplitColumns-axis{a}") for a in (1, -1)],
    *[pytest.param("4x6", 6, a, [
        ([[0, 0], [2, 0], [3, 0]], [0, 20, 30], [4, 1]),
        ([[1, 0]], [11], [4, 1]),
        ([[0, 0], [3, 0]], [2, 32], [4, 1]),
        ([[1, 0], [2, 0], [3, 0]], [13, 23, 33], [4, 1]),
        ([[0, 0], [1, 0]], [4, 14], [4, 1]),
        ([[0, 0], [2, 0], [3, 0]], [5, 25, 35], [4, 1]),
    ], id=f"testSplitAllColumns-axis{a}") for a in (1, -1)],
    pytest.param("4x6_empty", 2, 0, [(np.empty((0, 2)), [], [2, 6])] * 2, id="testSplitEmpty-axis0"),
    pytest.param("4x6_empty", 2, 1, [(np.empty((0, 2)), [], [4, 3])] * 2, id="testSplitEmpty-axis1"),
]


def _assert_pieces(pieces, want):
    assert len(pieces) == len(want)
    for got, (indices, values, shape) in zip(pieces, want):
        if indices is None:  # TensorFlow's test asserts only the values and shape of this piece
            np.testing.assert_array_equal(np.asarray(got.values), values)
            assert tuple(got.shape) == tuple(shape)
        else:
            assert_sparse(got, indices, values, shape)


@pytest.mark.parametrize("fixture, num_split, axis, want", SPLIT_CASES)
def test_split(fixture, num_split, axis, want):
    # SPLIT::<id>
    _assert_pieces(sptool.split(FIXTURES[fixture](), axis=axis, num_split=num_split), want)


@pytest.mark.parametrize("axis", [1, -2])
def test_split_then_concat_is_the_input(axis):
    # SPLIT::testSliceConcat
    t = FIXTURES["3x4x2"]()
    got = sptool.concat(sptool.split(t, axis=axis, num_split=2), axis=1)
    assert_sparse(got, IND_3x4x2, VAL_3x4x2, [3, 4, 2])


@pytest.mark.parametrize("n", [250, 2500, 25000])
def test_split_big(n):
    # SPLIT::testBig
    indices = np.zeros([n, 2], dtype=np.int64)
    indices[:, 0] = np.arange(n)
    values = np.zeros([n], dtype=np.float32)
    pieces = sptool.split(st(indices, values, [n, 3]), axis=0, num_split=2)
    assert_sparse(pieces[0], indices[: n // 2], values[: n // 2], [n // 2, 3])
    assert_sparse(pieces[1], indices[n // 2:] - [n // 2, 0], values[n // 2:], [n // 2, 3])


SPLIT_REFUSED = [
    pytest.param(lambda: sptool.split(FIXTURES["4x6"](), axis=-3, num_split=3), "-3", id="testInvalidAxis--3"),
    pytest.param(lambda: sptool.split(FIXTURES["4x6"](), axis=2, num_split=3), "2", id="testInvalidAxis-2"),
    pytest.param(lambda: sptool.split(FIXTURES["4x6"](), axis=[1, 2], num_split=3), "axis",
                 id="testInvalidArgumentError"),
    pytest.param(lambda: sptool.split(st([[0, 0], [1, 10], [-1, 2]], [1.0, 2.0, 3.0], [3, 5]), axis=1, num_split=2),
                 "bounds", id="testSparseIndexOutOfBounds"),
]


@pytest.mark.parametrize("call, word", SPLIT_REFUSED)
def test_split_refused(call, word):
    # SPLIT::<id>
    assert_refused(call, word)


# ---------------------------------------------------------------------------------------------
# slice

SLICE_CASES = [
    ("testSliceMatrixRows", "4x6", [0, 0], [2, 6],
     ([[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4]], [0, 2, 4, 5, 11, 13, 14], [2, 6])),
    ("testSliceMatrixRows", "4x6", [2, 0], [3, 7],
     ([[0, 0], [0, 3], [0, 5], [1, 0], [1, 2], [1, 3], [1, 5]], [20, 23, 25, 30, 32, 33, 35], [2, 6])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 0], [5, 3],
     ([[0, 0], [0, 2], [1, 1], [2, 0], [3, 0], [3, 2], [4, 1]], [0, 2, 11, 20, 30, 32, 41], [5, 3])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 3], [5, 2],
     ([[0, 1], [1, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [4, 13, 14, 23, 33, 44], [5, 2])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 5], [5, 2],
     ([[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [5, 16, 25, 35, 46], [5, 2])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 0], [5, 2],
     ([[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [0, 11, 20, 30, 41], [5, 2])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 2], [5, 2],
     ([[0, 0], [1, 1], [2, 1], [3, 0], [3, 1]], [2, 13, 23, 32, 33], [5, 2])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 4], [5, 2],
     ([[0, 0], [0, 1], [1, 0], [2, 1], [3, 1], [4, 0]], [4, 5, 14, 25, 35, 44], [5, 2])),
    ("testSliceMatrixUnevenCols", "5x7", [0, 6], [5, 2], ([[1, 0], [4, 0]], [16, 46], [5, 1])),
    ("testSliceMatrixUnevenRows", "5x7", [0, 0], [3, 7],
     ([[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [1, 6], [2, 0], [2, 3], [2, 5]],
      [0, 2, 4, 5, 11, 13, 14, 16, 20, 23, 25], [3, 7])),
    ("testSliceMatrixUnevenRows", "5x7", [3, 0], [3, 7],
     ([[0, 0], [0, 2], [0, 3], [0, 5], [1, 1], [1, 4], [1, 6]], [30, 32, 33, 35, 41, 44, 46], [2, 7])),
    ("testSliceMatrixUnevenRows", "5x7", [0, 0], [2, 7],
     ([[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [1, 6]], [0, 2, 4, 5, 11, 13, 14, 16], [2, 7])),
    ("testSliceMatrixUnevenRows", "5x7", [2, 0], [2, 7], (None, [20, 23, 25, 30, 32, 33, 35], [2, 7])),
    ("testSliceMatrixUnevenRows", "5x7", [4, 0], [2, 7], ([[0, 1], [0, 4], [0, 6]], [41, 44, 46], [1, 7])),
    ("testSliceAllRows", "4x6", [0, 0], [1, 6], ([[0, 0], [0, 2], [0, 4], [0, 5]], [0, 2, 4, 5], [1, 6])),
    ("testSliceAllRows", "4x6", [1, 0], [1, 6], ([[0, 1], [0, 3], [0, 4]], [11, 13, 14], [1, 6])),
    ("testSliceAllRows", "4x6", [2, 0], [1, 7], ([[0, 0], [0, 3], [0, 5]], [20, 23, 25], [1, 6])),
    ("testSliceAllRows", "4x6", [3, 0], [2, 7], ([[0, 0], [0, 2], [0, 3], [0, 5]], [30, 32, 33, 35], [1, 6])),
    ("testSliceColumns", "4x6", [0, 0], [4, 2], ([[0, 0], [1, 1], [2, 0], [3, 0]], [0, 11, 20, 30], [4, 2])),
    ("testSliceColumns", "4x6", [0, 2], [5, 2],
     ([[0, 0], [1, 1], [2, 1], [3, 0], [3, 1]], [2, 13, 23, 32, 33], [4, 2])),
    ("testSliceColumns", "4x6", [0, 4], [5, 3],
     ([[0, 0], [0, 1], [1, 0], [2, 1], [3, 1]], [4, 5, 14, 25, 35], [4, 2])),
    ("testSliceAllColumns", "4x6", [0, 0], [4, 1], ([[0, 0], [2, 0], [3, 0]], [0, 20, 30], [4, 1])),
    ("testSliceAllColumns", "4x6", [0, 1], [4, 1], ([[1, 0]], [11], [4, 1])),
    ("testSliceAllColumns", "4x6", [0, 2], [4, 1], ([[0, 0], [3, 0]], [2, 32], [4, 1])),
    ("testSliceAllColumns", "4x6", [0, 3], [4, 1], ([[1, 0], [2, 0], [3, 0]], [13, 23, 33], [4, 1])),
    ("testSliceAllColumns", "4x6", [0, 4], [5, 1], ([[0, 0], [1, 0]], [4, 14], [4, 1])),
    ("testSliceAllColumns", "4x6", [0, 5], [6, 3], ([[0, 0], [2, 0], [3, 0]], [5, 25, 35], [4, 1])),
    ("testSliceEmpty", "4x6_empty", [0, 0], [4, 1], (np.empty((0, 2)), [], [4, 1])),
    ("testSliceEmpty", "4x6", [1, 1], [0, 0], (np.empty((0, 2)), [], [0, 0])),
    ("testSliceEmpty", "4x6", [2, 1], [2, 1], (np.empty((0, 2)), [], [2, 1])),
]


@pytest.mark.parametrize("method, fixture, start, size, want", SLICE_CASES,
                         ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in SLICE_CASES])
def test_slice(method, fixture, start, size, want):
    # SLICE::<method>
    _assert_pieces([sptool.slice_(FIXTURES[fixture](), start=start, size=size)], [want])


def test_slice_refuses_negative_size():
    # SLICE::testNegativeSize
    assert_refused(lambda: sptool.slice_(st([[0, 0]], [0], [1, 1]), start=[10, 10], size=[-100, 100]))


def test_slice_huge_start_and_size():
    # SLICE::testLargeSize: TensorFlow evaluates a box with start [2^62, -1] whose end overflows
    # int64 (its test asserts only that the op runs).  sptool refuses the negative start
    # (TF_DOC, slice: "a negative start is refused"), and takes the same overflowing box from a
    # start inside the shape: no entry of [[0, 0]] lies at row >= 2^62.
    t = st([[0, 0]], [0], [1, 1])
    assert_refused(lambda: sptool.slice_(t, start=[2 ** 62, -1], size=[2 ** 62, 2 ** 62]), r"start\[1\] = -1")
    got = sptool.slice_(t, start=[2 ** 62, 0], size=[2 ** 62, 2 ** 62])
    assert got.nnz == 0 and got.shape == (0, 1)


def test_slice_refuses_values_count_mismatch():
    # SLICE::testInvalidSparseInput
    assert_refused(lambda: sptool.slice_(st([[0, 0, 0]], [0, 1, 2], [3, 3]), start=[0, 0], size=[1, 1]))


# ---------------------------------------------------------------------------------------------
# reshape

UP_RANK = ([[0, 0, 0], [0, 1, 1], [0, 1, 4], [0, 2, 0], [1, 1, 0], [1, 1, 1]], VAL_5x6, [2, 3, 5])
DOWN_RANK = ([[0, 1], [1, 0], [1, 2], [3, 3], [4, 1], [4, 3], [5, 2]], VAL_2x3x4, [6, 4])
SAME_RANK = ([[0, 0], [0, 6], [0, 9], [1, 0], [2, 0], [2, 1]], VAL_5x6, [3, 10])

RESHAPE_CASES = [
    pytest.param("5x6", [5, 6], (IND_5x6, VAL_5x6, [5, 6]), id="testSameShape"),
    pytest.param("5x6", [-1, 6], (IND_5x6, VAL_5x6, [5, 6]), id="testFeedSameShapeWithInferredDim"),
    pytest.param("5x6", [3, 10], SAME_RANK, id="testFeedNewShapeSameRank"),
    pytest.param("5x6", [3, -1], SAME_RANK, id="testFeedNewShapeSameRankWithInferredDim"),
    pytest.param("5x6", [2, 3, 5], UP_RANK, id="testUpRank"),
    pytest.param("5x6", [2, -1, 5], UP_RANK, id="testFeedUpRankWithInferredDim"),
    pytest.param("2x3x4", [6, 4], DOWN_RANK, id="testFeedDownRank"),
    pytest.param("2x3x4", [6, -1], DOWN_RANK, id="testFeedDownRankWithInferredDim"),
]


@pytest.mark.parametrize("fixture, shape, want", RESHAPE_CASES)
def test_reshape(fixture, shape, want):
    # RESHAPE::<id>
    assert_sparse(sptool.reshape(FIXTURES[fixture](), shape=shape), *want)


@pytest.mark.parametrize("fixture, shape, want_shape", [
    pytest.param("5x6", [1, 5, 2, 3], [1, 5, 2, 3], id="testStaticShapeInfoPreserved"),
    pytest.param("2x3x4", [2, -1], [2, 12], id="testStaticShapeInfoPreservedWithInferredDims"),
])
def test_reshape_shape(fixture, shape, want_shape):
    # RESHAPE::<id>: TensorFlow checks the shape; the entries follow the dense reshape
    t = FIXTURES[fixture]()
    got = sptool.reshape(t, shape=shape)
    assert tuple(got.shape) == tuple(want_shape)
    np.testing.assert_array_equal(dense_of(got), dense_of(t).reshape(want_shape))


@pytest.mark.parametrize("fixture, shape, word", [
    pytest.param("2x3x4", [-1, 2, -1], "-1", id="testRaisesIfMoreThanOneInferredDim"),
    pytest.param("2x3x4", [-1, 7], "", id="testRaisesIfInferredShapeNotPossible"),
    pytest.param("5x6", [4, -1, -1], "-1", id="testFeedMultipleInferredDims"),
    pytest.param("5x6", [4, 7], "30", id="testProvideStaticallyMismatchedSizes"),
    pytest.param("5x6", [4, -1], "", id="testFeedMismatchedSizesWithInferredDim"),
])
def test_reshape_refused(fixture, shape, word):
    # RESHAPE::<id>
    assert_refused(lambda: sptool.reshape(FIXTURES[fixture](), shape=shape), word)


def _dense_reshape_draws(seed):
    """RESHAPE::testFeedDenseReshapeSemantics's draws (the test uses the global generator;
    here it is seeded so that the case is the same each run)."""
    rng = np.random.RandomState(seed)
    factors = np.array([2] * 4 + [3] * 4 + [5] * 4)
    orig_rank = rng.randint(2, 7)
    orig_map = rng.randint(orig_rank, size=factors.shape)
    orig_shape = [int(np.prod(factors[orig_map == d])) for d in range(orig_rank)]
    new_rank = rng.randint(2, 7)
    new_map = rng.randint(new_rank, size=factors.shape)
    new_shape = [int(np.prod(factors[new_map == d])) for d in range(new_rank)]
    orig_dense = rng.uniform(size=orig_shape)
    return orig_dense, orig_shape, new_shape


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reshape_dense_semantics(seed):
    # RESHAPE::testFeedDenseReshapeSemantics (810k cells, about half of them stored)
    orig_dense, orig_shape, new_shape = _dense_reshape_draws(seed)
    orig_indices = np.transpose(np.nonzero(orig_dense < 0.5))
    orig_values = orig_dense[orig_dense < 0.5]
    new_dense = np.reshape(orig_dense, new_shape)
    got = sptool.reshape(st(orig_indices, orig_values, orig_shape), shape=new_shape)
    assert_sparse(got, np.transpose(np.nonzero(new_dense < 0.5)), new_dense[new_dense < 0.5], new_shape)


@pytest.mark.parametrize("original, target, want", [
    pytest.param([0], [-1, 1], [0, 1], id="testImpliedReshapeEmpty1DTensor-a"),
    pytest.param([0], [-1, 1, 2], [0, 1, 2], id="testImpliedReshapeEmpty1DTensor-b"),
    pytest.param([1, 0], [-1, 1], [0, 1], id="testImpliedReshapeEmpty2DTensor-a"),
    pytest.param([1, 0], [-1, 2, 3], [0, 2, 3], id="testImpliedReshapeEmpty2DTensor-b"),
    pytest.param([1, 0, 0], [-1, 2, 3], [0, 2, 3], id="testImpliedReshapeEmpty3DTensor"),
    pytest.param([2, 4, 0, 6], [-1, 4, 6, 2], [0, 4, 6, 2], id="testImpliedReshapeEmpty4DTensor"),
])
def test_reshape_empty(original, target, want):
    # RESHAPE::EmptySparseTensorReshapeTest::<id>
    t = st(np.zeros([0, len(original)]), np.array([], np.float64), original)
    assert tuple(sptool.reshape(t, shape=target).shape) == tuple(want)


@pytest.mark.parametrize("original, target", [([0], [-1, 0]), ([1, 0], [-1, 0]), ([1, 2, 0], [2, -1, 0]),
                                              ([1, 2, 3, 0], [2, 0, -1, 3])])
def test_reshape_refuses_implied_dim_with_zero_dim(original, target):
    # RESHAPE::EmptySparseTensorReshapeTest::testImpliedDimTogetherWithZeroDimCausesError
    t = st(np.zeros([0, len(original)]), np.array([], np.float64), original)
    assert_refused(lambda: sptool.reshape(t, shape=target))


# ---------------------------------------------------------------------------------------------
# sparse_ops_test.py: to_indicator, merge, retain, reset_shape, fill_empty_rows, reduce, softmax,
# maximum / minimum, transpose, sparse * dense


def _indicator_5x6():
    return st(IND_5x6, VAL_5x6, [5, 6], np.int64)


def _indicator_2x3x4():
    return st([[0, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 3], [1, 1, 0], [1, 1, 1], [1, 1, 2], [1, 2, 2]],
              [1, 10, 12, 103, 150, 149, 150, 122], [2, 3, 4], np.int64)


@pytest.mark.parametrize("make, vocab, trues", [
    pytest.param(lambda: st(IND_5x6, VAL_5x6, [5, 6], np.int32), 50,
                 [(0, 0), (1, 10), (1, 13), (1, 14), (3, 32), (3, 33)], id="testInt32"),
    pytest.param(_indicator_5x6, 50, [(0, 0), (1, 10), (1, 13), (1, 14), (3, 32), (3, 33)], id="testInt64"),
    pytest.param(_indicator_2x3x4, 200, [(0, 0, 1), (0, 1, 10), (0, 1, 12), (1, 0, 103), (1, 1, 149), (1, 1, 150),
                                         (1, 2, 122)], id="testHigherRank"),
])
def test_to_indicator(make, vocab, trues):
    # OPS::SparseToIndicatorTest::<id>
    t = make()
    want = np.zeros(tuple(t.shape[:-1]) + (vocab,), dtype=bool)
    for cell in trues:
        want[cell] = True
    got = sptool.to_indicator(t, vocab_size=vocab)
    np.testing.assert_array_equal(dense_of(got), want)


MERGE_IND = [[0, 0], [1, 0], [1, 2], [2, 0], [2, 1], [1, 1]]


@pytest.mark.parametrize("ids_dtype, values_dtype", [(np.int32, np.float32), (np.int64, np.float32),
                                                     (np.int64, np.float64)],
                         ids=["testInt32AndFloat32", "testInt64AndFloat32", "testInt64AndFloat64"])
def test_merge(ids_dtype, values_dtype):
    # OPS::SparseMergeTest::<id> (the unsorted input, sorted result)
    ids = SparseTensor(np.array(MERGE_IND), np.array([0, 13, 10, 33, 32, 14], ids_dtype), (3, 3))
    vals = SparseTensor(np.array(MERGE_IND), np.array([-3, 4, 1, 9, 5, 1], values_dtype), (3, 3))
    got = sptool.merge(ids, vals, vocab_size=50)
    assert_sparse(got, [[0, 0], [1, 10], [1, 13], [1, 14], [2, 32], [2, 33]], [-3, 1, 4, 1, 5, 9], [3, 50])


def test_merge_high_dim():
    # OPS::SparseMergeHighDimTest::testInt64AndFloat64
    ids0 = SparseTensor(np.array(MERGE_IND), np.array([0, 13, 10, 33, 32, 14]), (3, 3))
    ids1 = SparseTensor(np.array(MERGE_IND), np.array([12, 4, 0, 0, 1, 30]), (3, 3))
    vals = SparseTensor(np.array(MERGE_IND), np.array([-3, 4, 1, 9, 5, 1], np.float64), (3, 3))
    got = sptool.merge([ids0, ids1], vals, vocab_size=[50, 31])
    assert_sparse(got, [[0, 0, 12], [1, 10, 0], [1, 13, 4], [1, 14, 30], [2, 32, 1], [2, 33, 0]],
                  [-3, 1, 4, 1, 5, 9], [3, 50, 31])


@pytest.mark.parametrize("mask, want", [
    pytest.param([1, 0, 0, 1, 1, 0], ([[0, 0], [1, 4], [3, 2]], [0, 14, 32], [5, 6]), id="testBasic"),
    pytest.param([0] * 6, (np.empty((0, 2)), [], [5, 6]), id="testRetainNone"),
])
def test_retain(mask, want):
    # OPS::SparseRetainTest::<id>
    t = st(IND_5x6, VAL_5x6, [5, 6], np.int32)
    assert_sparse(sptool.retain(t, mask=np.array(mask, dtype=bool)), *want)


def test_retain_refuses_mask_of_wrong_length():
    # OPS::SparseRetainTest::testMismatchedRetainShape
    t = st(IND_5x6, VAL_5x6, [5, 6], np.int32)
    assert_refused(lambda: sptool.retain(t, mask=np.array([1, 0, 0, 1, 0], dtype=bool)), "5|6")


IND_2x5x6 = [[0, 0, 0], [0, 1, 0], [0, 1, 3], [1, 1, 4], [1, 3, 2], [1, 3, 3]]
VAL_2x5x6 = [0, 10, 13, 14, 32, 33]


@pytest.mark.parametrize("make, shape, want_shape", [
    pytest.param(lambda: st(IND_2x5x6, VAL_2x5x6, [2, 5, 6], np.int32), [3, 6, 7], [3, 6, 7], id="testBasic"),
    pytest.param(lambda: st(IND_2x5x6, VAL_2x5x6, [2, 5, 6], np.int32), None, [2, 4, 5], id="testTightBoundingBox"),
    pytest.param(lambda: st(np.empty((0, 3)), np.array([], np.int32), [2, 5, 6]), None, [0, 0, 0],
                 id="testTightBoundingBoxEmpty"),
])
def test_reset_shape(make, shape, want_shape):
    # OPS::SparseResetShapeTest::<id>
    t = make()
    got = sptool.reset_shape(t, shape=shape)
    assert_sparse(got, np.asarray(t.indices), np.asarray(t.values), want_shape)


def test_reset_shape_refuses_other_rank():
    # OPS::SparseResetShapeTest::testInvalidRank
    t = st(IND_2x5x6, VAL_2x5x6, [2, 5, 6], np.int32)
    assert_refused(lambda: sptool.reset_shape(t, shape=[3, 7]), "rank|dimension")


def test_reset_shape_smaller_than_old_but_holding_the_data():
    # OPS::SparseResetShapeTest::testInvalidDimensionSizeStatic: TensorFlow refuses [3, 7, 5] for a
    # [2, 5, 6] input ("should have dimension sizes"); sptool allows any shape that holds the data
    # (TF_DOC, reset_shape: "a new shape smaller than the old one is accepted when it still holds
    # every index").  Every index here is below 5 in the last dimension.
    t = st(IND_2x5x6, VAL_2x5x6, [2, 5, 6], np.int32)
    assert_sparse(sptool.reset_shape(t, shape=[3, 7, 5]), IND_2x5x6, VAL_2x5x6, [3, 7, 5])


@pytest.mark.parametrize("function, words", [
    ("slice", "a negative start is refused"),
    ("concat", "an axis outside the rank is refused even for a single input"),
    ("reset_shape", "a new shape smaller than the old one is accepted when it still holds every index"),
    ("bincount", "`--maxlength 0` gives N = 0"),
])
def test_the_differences_cited_are_on_the_page(function, words):
    """The cases above that assert a deliberate difference cite TF_DOC: its row says so."""
    page = open(os.path.join(os.path.dirname(__file__), os.pardir, TF_DOC), encoding="utf-8").read()
    rows = [line for line in page.splitlines() if line.startswith(f"| `{function}` |")]
    assert len(rows) == 1 and words in rows[0].split(" | ")[-1], rows


FILLED = [[0, 0], [1, 0], [1, 3], [1, 4], [2, 0], [3, 2], [3, 3], [4, 0]]

FILL_CASES = [
    pytest.param(lambda: st(IND_5x6, VAL_5x6, [5, 6], np.int32), -1,
                 (FILLED, [0, 10, 13, 14, -1, 32, 33, -1], [5, 6]), [0, 0, 1, 0, 1], id="testFillNumber"),
    pytest.param(lambda: st(IND_5x6, VAL_5x6, [5, 6], np.float64), -1.0,
                 (FILLED, [0, 10, 13, 14, -1, 32, 33, -1], [5, 6]), [0, 0, 1, 0, 1], id="testFillFloat"),
    pytest.param(lambda: st(IND_5x6, ["a", "b", "c", "d", "e", "f"], [5, 6]), "",
                 (FILLED, ["a", "b", "c", "d", "", "e", "f", ""], [5, 6]), [0, 0, 1, 0, 1], id="testFillString"),
    pytest.param(lambda: st([[0, 0], [1, 0], [1, 3], [1, 4]], [0, 10, 13, 14], [2, 6], np.int32), -1,
                 ([[0, 0], [1, 0], [1, 3], [1, 4]], [0, 10, 13, 14], [2, 6]), [0, 0], id="testNoEmptyRows"),
    pytest.param(lambda: st([[1, 2], [1, 3], [0, 1], [0, 3]], [1, 3, 2, 4], [2, 5], np.int64), -1,
                 ([[0, 1], [0, 3], [1, 2], [1, 3]], [2, 4, 1, 3], [2, 5]), [0, 0], id="testNoEmptyRowsAndUnordered"),
    # TensorFlow keeps the input's order within a row ([2, 3] before [2, 2]); sptool's output is
    # row-major sorted even from an unsorted input (TF_DOC, fill_empty_rows).
    pytest.param(lambda: st([[2, 3], [2, 2], [0, 1], [0, 3]], [1, 3, 2, 4], [3, 5], np.int64), -1,
                 ([[0, 1], [0, 3], [1, 0], [2, 2], [2, 3]], [2, 4, -1, 3, 1], [3, 5]), [0, 1, 0], id="testUnordered"),
    pytest.param(lambda: st(np.ones([0, 2]), np.ones([0]), [2, 5]), -1,
                 ([[0, 0], [1, 0]], [-1, -1], [2, 5]), [1, 1], id="testEmptyIndicesTensor"),
    pytest.param(lambda: st(np.ones([0, 2]), np.ones([0]), [0, 3]), -1,
                 (np.ones([0, 2]), [], [0, 3]), [], id="testEmptyOutput"),
]


@pytest.mark.parametrize("make, default, want, indicator", FILL_CASES)
def test_fill_empty_rows(make, default, want, indicator, tmp_path):
    # OPS::SparseFillEmptyRowsTest::<id>
    ind_path = str(tmp_path / "ind.npy")
    got = sptool.fill_empty_rows(make(), default_value=default, indicator=ind_path)
    assert_sparse(got, *want)
    np.testing.assert_array_equal(np.load(ind_path), np.array(indicator, dtype=bool))


def test_fill_empty_rows_refuses_row_past_shape():
    # OPS::SparseFillEmptyRowsTest::testInvalidIndices: "indices(2, 0) is invalid"
    assert_refused(lambda: sptool.fill_empty_rows(st([[1, 2], [1, 3], [99, 1], [99, 3]], [1, 3, 2, 4], [2, 5]),
                                                  default_value=-1), "bounds")


REDUCE_AXES = [None, 0, [1], [0, 1], [1, 0], [-1], [1, -2]]


def _numpy_reduce(dense, axes, keepdims, op):
    """SparseReduceTest._compare's NumPy answer on the densified input."""
    if axes is None:
        return op(dense, keepdims=keepdims)
    axes = np.array(axes if isinstance(axes, list) else [axes]).astype(np.int32)
    axes = np.sort((axes + dense.ndim) % dense.ndim)
    for ra in axes.ravel()[::-1]:
        dense = op(dense, axis=ra, keepdims=keepdims)
    return dense


@pytest.mark.parametrize("axes", REDUCE_AXES, ids=[str(a) for a in REDUCE_AXES])
@pytest.mark.parametrize("keepdims", [False, True], ids=["", "keepdims"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce(axes, keepdims, op):
    # OPS::SparseReduceTest::disabledtestSimpleAndRandomInputs (its fixed tensor, with the test's
    # NumPy oracle; the test is disabled in TensorFlow for its random half only)
    t = st([[0, 0], [0, 2], [1, 1]], np.array([1, 1, 1], np.int32), [2, 3])
    want = _numpy_reduce(dense_of(t), axes, keepdims, np.sum if op == "sum" else np.max)
    got = sptool.reduce(t, op=op, axis=axes, keepdims=keepdims)
    got_dense = dense_of(got) if isinstance(got, SparseTensor) else np.asarray(got)
    np.testing.assert_array_equal(np.asarray(got_dense).reshape(np.shape(want)), want)
    if isinstance(got, SparseTensor):
        assert tuple(got.shape) == np.shape(want)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("axis", [-3, 2])
def test_reduce_refuses_invalid_axis(op, axis):
    # OPS::SparseReduceTest::testInvalidAxes: "Invalid reduction dimension"
    t = st([[0, 0], [0, 2], [1, 1]], np.array([1, 1, 1], np.int32), [2, 3])
    assert_refused(lambda: sptool.reduce(t, op=op, axis=axis), str(axis))


@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce_shape_past_int64(op):
    # OPS::SparseReduceTest::testIntegerOverflow: TensorFlow refuses a [2^32, 2^31] input as its
    # own limit; sptool holds such shapes (WIDE_DOC) and reduces axis 0.
    t = st([[1, 2], [3, 4]], [1, 3], [2 ** 32, 2 ** 31])
    assert_sparse(sptool.reduce(t, op=op, axis=0), [[2], [4]], [1, 3], [2 ** 31])


def _softmax_draws():
    """OPS::SparseSoftmaxTest::testEquivalentToDensified's seeded draws, in the test's order."""
    rng = np.random.RandomState(1618)
    n, m = rng.choice(20, size=2)
    return {dtype: rng.rand(n, m).astype(dtype) for dtype in (np.float16, np.float32, np.float64)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_equivalent_to_densified(dtype):
    # OPS::SparseSoftmaxTest::testEquivalentToDensified
    x = _softmax_draws()[dtype]
    n, m = x.shape
    got = sptool.softmax(sparsify(x.reshape((1, n, m)).copy(), thresh=0.0))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(got.values, np.float64).reshape((n, m)), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [[2, 2, 2], [2, 1, 2, 2]])
def test_softmax_higher_ranks(shape):
    # OPS::SparseSoftmaxTest::testHigherRanks
    values = np.asarray([0.0, np.e, 1.0, 0.0, np.e, 0.0, np.e, np.e]).reshape(shape)
    t = sparsify(values, thresh=1e-2)
    got = sptool.softmax(t)
    assert_sparse(got, np.asarray(t.indices), [1.0, 1.0, 1.0, 0.5, 0.5], shape)


def test_softmax_shape_past_int64():
    # OPS::SparseSoftmaxTest::testIntegerOverflow: TensorFlow refuses [2^32, 2^31] as its own
    # limit; sptool holds such shapes (WIDE_DOC).
    assert_sparse(sptool.softmax(st([[1, 1]], [2.0], [2 ** 32, 2 ** 31])), [[1, 1]], [1.0], [2 ** 32, 2 ** 31])


def test_softmax_refuses_negative_shape():
    # OPS::SparseSoftmaxTest::testReshapeNegativeShape
    assert_refused(lambda: sptool.softmax(st([[1, 1]], [2.0], [-1, 1])))


MINMAX_CASES = [
    pytest.param(lambda: st([[0]], [0], [7]), lambda: st([[0]], [1], [7]), ([[0]], [1], [7]), ([[0]], [0], [7]),
                 id="testBasic-same-index"),
    pytest.param(lambda: st([[0]], [0], [7]), lambda: st([[1]], [0], [7]), ([[0], [1]], [0, 0], [7]),
                 ([[0], [1]], [0, 0], [7]), id="testBasic-different-indices"),
]


@pytest.mark.parametrize("make_a, make_b, want_max, want_min", MINMAX_CASES)
def test_maximum_minimum(make_a, make_b, want_max, want_min):
    # OPS::SparseMinimumMaximumTest::testBasic
    assert_sparse(sptool.maximum(make_a(), make_b()), *want_max)
    assert_sparse(sptool.minimum(make_a(), make_b()), *want_min)


def _minmax_random_draws():
    """OPS::SparseMinimumMaximumTest::testRandom's seeded draws, in the test's order."""
    rng = np.random.RandomState(1618)
    draws = []
    for shape in [(13,), (6, 8), (1, 7, 1)]:
        for dtype in [np.int32, np.int64, np.float16, np.float32, np.float64]:
            draws.append((shape, dtype, rng.randn(*shape).astype(dtype), rng.randn(*shape).astype(dtype)))
    return [d for d in draws if d[1] in (np.int64, np.float32, np.float64)]


@pytest.mark.parametrize("draw", _minmax_random_draws(), ids=lambda d: f"{d[0]}-{d[1].__name__}")
def test_maximum_minimum_random(draw):
    # OPS::SparseMinimumMaximumTest::testRandom
    _shape, _dtype, a, b = draw
    sp_a, sp_b = sparsify(a, thresh=-0.5), sparsify(b, thresh=-0.5)
    np.testing.assert_array_equal(dense_of(sptool.maximum(sp_a, sp_b)), np.maximum(a, b))
    np.testing.assert_array_equal(dense_of(sptool.minimum(sp_a, sp_b)), np.minimum(a, b))


@pytest.mark.parametrize("make_a, make_b, word", [
    pytest.param(lambda: st([[0, 0]], [0], [1, 1]), lambda: st([[0]], [1], [2]), "rank",
                 id="testMismatchedShapes-rank"),
    pytest.param(lambda: st([[0]], [0], [1]), lambda: st([[0]], [1], [2]), "shape", id="testMismatchedShapes-shape"),
    pytest.param(lambda: st([[1]], [0], [2]), lambda: SparseTensor(np.empty((1, 0), np.int64), np.array([1]), (2,)),
                 "", id="testInvalidSparseInputs"),
])
@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_maximum_minimum_refused(make_a, make_b, word, fn):
    # OPS::SparseMinimumMaximumTest::<id>
    assert_refused(lambda: getattr(sptool, fn)(make_a(), make_b()), word)


def _transpose_draws():
    """OPS::SparseTransposeTest::testTranspose's seeded draws, in the test's order."""
    rng = np.random.RandomState(1618)
    shapes = [rng.randint(1, 10, size=rank) for rank in range(1, 6)]
    draws = []
    for shape in shapes:
        for dtype in [np.int32, np.int64, np.float32, np.float64]:
            dn_input = rng.randn(*shape).astype(dtype)
            perm = rng.choice(len(shape), len(shape), False)
            draws.append((dn_input, perm))
    return draws


@pytest.mark.parametrize("draw", _transpose_draws(), ids=lambda d: f"{d[0].dtype}-{list(d[0].shape)}")
def test_transpose(draw):
    # OPS::SparseTransposeTest::testTranspose
    dn_input, perm = draw
    dn_input = dn_input.copy()
    sp_input = sparsify(dn_input)
    got = sptool.transpose(sp_input, perm=[int(p) for p in perm])
    want = np.transpose(dn_input, perm)
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(dense_of(got), want)


def _cwise_draws():
    """OPS::SparseMathOpsTest::testCwiseDivAndMul's seeded draws, in the test's order."""
    rng = np.random.RandomState(1618)
    draws = []
    for dtype in [np.float32, np.float64, np.int32, np.int64]:
        for sp_shape, dense_shape in zip([(10, 10, 10), (5, 5), (1618,), (3, 3, 7)],
                                         [(10, 10, 1), (5, 5), (1,), (1, 7)]):
            draws.append((dtype, rng.rand(*sp_shape).astype(dtype) + 1, rng.rand(*dense_shape).astype(dtype) + 1))
    return draws


@pytest.mark.parametrize("draw", [d for d in _cwise_draws() if d[0] in (np.float32, np.float64)],
                         ids=lambda d: f"{d[0].__name__}-{list(d[1].shape)}x{list(d[2].shape)}")
@pytest.mark.parametrize("fn", ["mul", "div"])
def test_sparse_dense_cwise(draw, fn, tmp_path):
    # OPS::SparseMathOpsTest::testCwiseDivAndMul: the values at the sparse indices of
    # densified (op) dense, the indices and shape unchanged
    _dtype, sp_vals, dense_vals = draw
    sp_t = sparsify(sp_vals.copy(), thresh=1.5)
    d = str(tmp_path / "d.npy")
    np.save(d, dense_vals)
    got = getattr(sptool, fn)(sp_t, d)
    densified = dense_of(sp_t)
    want = densified * dense_vals if fn == "mul" else densified / dense_vals
    np.testing.assert_array_equal(np.asarray(got.indices), np.asarray(sp_t.indices))
    assert tuple(got.shape) == tuple(sp_t.shape)
    rtol = 1e-6 if sp_vals.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(got.values), want[tuple(np.asarray(sp_t.indices).T)], rtol=rtol)


def test_sparse_dense_cwise_refuses_dense_wider_than_sparse(tmp_path):
    # OPS::SparseMathOpsTest::testCwiseShapeValidation: "broadcasts dense to sparse only"
    d = str(tmp_path / "d.npy")
    np.save(d, np.ones([3, 4, 1], np.int32))
    t = st([[0, 0, 1, 0], [0, 0, 3, 0]], np.array([10, 20], np.int32), [1, 1, 4, 2])
    assert_refused(lambda: sptool.mul(t, d), "broadcast|shape")


# ---------------------------------------------------------------------------------------------
# tensorflow/python/ops/sparse_ops_test.py: eye, expand_dims, to_dense of strings, dense x sparse
# matmul, map_values


@pytest.mark.parametrize("n", range(2, 10, 2))
@pytest.mark.parametrize("m", range(2, 10, 2))
def test_eye(n, m):
    # PYOPS::testSparseEye
    np.testing.assert_array_equal(dense_of(sptool.eye(n, m)), np.eye(n, m))


def _expand_dims_draws():
    rng = np.random.RandomState(1618)
    draws = []
    for rank in range(1, 4):
        shape = np.arange(1, rank + 1) * 2
        before = np.arange(np.prod(shape)).reshape(shape)
        before *= rng.binomial(1, 0.2, before.shape)
        for axis in range(-rank - 1, rank):
            draws.append((before, axis))
    return draws


@pytest.mark.parametrize("draw", _expand_dims_draws(), ids=lambda d: f"rank{d[0].ndim}-axis{d[1]}")
def test_expand_dims(draw):
    # PYOPS::testSparseExpandDims (its seed is the global generator's; fixed here)
    before, axis = draw
    t = st(np.array(np.where(before)).T, before[before != 0], before.shape)
    got = sptool.expand_dims(t, axis=axis)
    np.testing.assert_array_equal(dense_of(got), np.expand_dims(before, axis))


@pytest.mark.parametrize("dense", [
    pytest.param(np.reshape(np.arange(24, dtype=np.int64), (3, 4, 2)), id="testDenseFromConstantToSparse"),
    pytest.param(np.array(list("ababa")), id="testConstantStringToSparse"),
])
def test_from_dense(dense, tmp_path):
    # PYOPS::<id>: tf.sparse.from_dense keeps the cells that are not zero (or ""), row-major;
    # sptool's counterpart is convert D.npy (TF_DOC, from_dense)
    src, out = str(tmp_path / "d.npy"), str(tmp_path / "t.parquet")
    np.save(src, dense)
    sptool.convert(src, out)
    nz = np.nonzero(dense)
    assert_sparse(sptool.read(out), np.transpose(nz), dense[nz], dense.shape)
    np.testing.assert_array_equal(np.asarray(sptool.todense(sptool.read(out))), dense)


def test_todense_strings():
    # PYOPS::testSparseTensorToDenseString
    got = dense_of(st([[0, 0], [1, 2]], ["a", "b"], [2, 3]))
    assert [[_text(v) for v in row] for row in got] == [["a", "", ""], ["", "", "b"]]


@pytest.mark.parametrize("adjoint_a", [False, True])
@pytest.mark.parametrize("adjoint_b", [False, True])
def test_dense_sparse_matmul(adjoint_a, adjoint_b, tmp_path):
    # PYOPS::testDenseSparseTensorMatMul
    dense = np.random.RandomState(42).rand(3, 3).astype(np.float32)
    sp = st([[0, 0], [1, 2]], np.array([4.0, 8.0], np.float32), [3, 3])
    want = (dense.T if adjoint_a else dense) @ (dense_of(sp).T if adjoint_b else dense_of(sp))
    got = sptool.matmul(dense, sp, adjoint_a=adjoint_a, adjoint_b=adjoint_b)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("fn, tf_fn, values, expected", [
    ("abs", "abs", [1.0, -1.0, 3.0, -4.0], [1.0, 1.0, 3.0, 4.0]),
    ("neg", "negative", [1.0, -1.0, 3.0, -4.0], [-1.0, 1.0, -3.0, 4.0]),
    ("sign", "sign", [3.0, -2.0, 0.0, -4.0], [1.0, -1.0, 0.0, -1.0]),
    ("square", "square", [1.0, -1.0, 3.0, -4.0], [1.0, 1.0, 9.0, 16.0]),
    ("arcsinh", "asinh", [1.0, -1.0, 3.0, -4.0], [0.8813736, -0.8813736, 1.8184465, -2.0947125]),
    ("sin", "sin", [1.0, -1.0, 3.0, -4.0], [0.84147096, -0.84147096, 0.14112, 0.7568025]),
    ("arcsin", "asin", [1.0, -1.0, 0.4, -0.5], [1.5707964, -1.5707964, 0.41151685, -0.5235988]),
    ("tan", "tan", [1.0, -1.0, 0.4, -0.5], [1.5574077, -1.5574077, 0.42279324, -0.5463025]),
    ("arctan", "atan", [0.4, -0.4, 1.0, 0.5], [0.3805064, -0.3805064, 0.7853982, 0.4636476]),
    ("arctanh", "atanh", [0.4, -0.4, -0.5, 0.5], [0.42364895, -0.42364895, -0.54930615, 0.54930615]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_map_values(fn, tf_fn, values, expected):
    # PYOPS::testUnarySparseDispatch (tf.math.<tf_fn> on a SparseTensor)
    t = st([[0, 0], [0, 1], [2, 0], [2, 4]], np.array(values, np.float32), [3, 6])
    got = sptool.map_values(t, fn=fn)
    np.testing.assert_array_equal(np.asarray(got.indices), np.asarray(t.indices))
    assert tuple(got.shape) == (3, 6)
    np.testing.assert_allclose(np.asarray(got.values), expected, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# to_dense (sparse_to_dense_op_py_test.py), through a SparseTensor and todense

TODENSE_CASES = [
    pytest.param([[1], [3]], [1, 1], [5], 0, [0, 1, 0, 1, 0], id="testInt"),
    pytest.param([[1], [3]], [1.0, 1.0], [5], 0.0, [0, 1, 0, 1, 0], id="testFloat"),
    pytest.param(np.empty((0, 1)), np.array([], np.float32), [5], 0.0, [0, 0, 0, 0, 0], id="testEmptyNonZeros"),
    pytest.param([[1], [3]], [1, 2], [5], -1, [-1, 1, -1, 2, -1], id="testSetValue"),
    pytest.param([[1], [3]], [1, 1], [5], -1, [-1, 1, -1, 1, -1], id="testSetSingleValue"),
    pytest.param([[1, 3], [2, 0]], [1, 1], [3, 4], -1, [[-1, -1, -1, -1], [-1, -1, -1, 1], [1, -1, -1, -1]],
                 id="test2d"),
    pytest.param([[2]], [7], [4], 0, [0, 0, 7, 0], id="testZeroDefault"),
    # TensorFlow refuses unsorted indices when validating; sptool takes any order (TF_DOC: "never
    # assumes an order its metadata does not promise").
    pytest.param([[2], [1]], [-1.0, 1.0], [5], 0.0, [0, 1, -1, 0, 0], id="testUnsortedIndicesWithWithoutValidation"),
    # TensorFlow refuses repeated indices when validating and keeps the last write without; sptool
    # sums them (TF_DOC, to_dense: "duplicates are summed").
    pytest.param([[1], [1]], [-1.0, 1.0], [5], 0.0, [0, 0, 0, 0, 0], id="testRepeatingIndicesWithWithoutValidation"),
]


@pytest.mark.parametrize("indices, values, shape, default, want", TODENSE_CASES)
def test_todense(indices, values, shape, default, want):
    # TODENSE::<id>
    t = st(indices, values, shape)
    got = np.asarray(sptool.todense(t, default_value=default))
    np.testing.assert_array_equal(got, np.array(want))


def test_todense_3d():
    # TODENSE::test3d
    want = np.ones((3, 4, 2), dtype=np.int32) * -1
    want[1, 3, 0] = 1
    want[2, 0, 1] = 1
    got = np.asarray(sptool.todense(st([[1, 3, 0], [2, 0, 1]], [1, 1], [3, 4, 2]), default_value=-1))
    np.testing.assert_array_equal(got, want)


def test_todense_string_default():
    # TODENSE::testString
    got = np.asarray(sptool.todense(st([[1], [3]], ["a", "a"], [5]), default_value="b"))
    assert [_text(v) for v in got] == ["b", "a", "b", "a", "b"]


TODENSE_REFUSED = [
    pytest.param(lambda: sptool.todense(st([[1], [3]], [1, 1], [[5], [3]]), default_value=-1), "",
                 id="testBadShape"),
    pytest.param(lambda: sptool.todense(st([[1], [3]], [[5], [3]], [5]), default_value=-1), "",
                 id="testBadValue"),
    pytest.param(lambda: sptool.todense(st([[1], [3]], [1, 2, 3], [5]), default_value=-1), "",
                 id="testBadNumValues"),
    pytest.param(lambda: sptool.todense(st([[1], [3]], [1, 2], [5]), default_value=[0]), "default",
                 id="testBadDefault"),
    pytest.param(lambda: sptool.todense(st([[1], [10]], [1.0, 1.0], [5]), default_value=0.0), "bounds",
                 id="testOutOfBoundsIndicesWithWithoutValidation"),
    pytest.param(lambda: sptool.todense(st([[1], [10]], [-1.0, 1.0], [5]), default_value=0.0, validate=False),
                 "bounds", id="testOutOfBoundsIndicesWithWithoutValidation-no-validate"),
]


@pytest.mark.parametrize("call, word", TODENSE_REFUSED)
def test_todense_refused(call, word):
    # TODENSE::<id>
    assert_refused(call, word)


# ---------------------------------------------------------------------------------------------
# sparse x dense matmul (sparse_tensor_dense_matmul_op_test.py)


def _matmul_basic_draws():
    """MATMUL::testBasic's seeded draws (np.random.seed(127)), in the test's order."""
    rng = np.random.RandomState(127)
    draws = []
    for dtype in [np.int32, np.float16, np.float32, np.float64, np.complex64, np.complex128, np.int32, np.float32]:
        x = rng.rand(10, 10).astype(dtype)
        if np.dtype(dtype).kind == "c":
            x = x + 1j * x
        x[np.abs(x) < 0.5] = 0
        y = rng.randn(10, 20).astype(dtype)
        if np.dtype(dtype).kind == "c":
            y = y + 1j * y
        draws.append((x, y))
    return [draws[i] for i in (0, 2, 3)]


def _matmul_random_draws():
    """MATMUL::testFloatRandom's first pass of seeded draws (np.random.seed(127))."""
    rng = np.random.RandomState(127)
    draws = []
    for adjoint_a in [True, False]:
        for adjoint_b in [True, False]:
            for thresh in [0.0, 0.2, 0.8, 1.0]:
                n, k, m = rng.randint(1, 100, size=3)
                x = rng.rand(n, k).astype(np.float32)
                x[x < thresh] = 0
                y = rng.randn(k, m).astype(np.float32)
                draws.append((x.T if adjoint_a else x, y.T if adjoint_b else y, adjoint_a, adjoint_b))
    return draws


def _check_matmul(x, y, adjoint_a, adjoint_b, rtol):
    """MATMUL::_testMatmul: np_ans = x'.dot(y') from the sparse x's nonzeros."""
    want = (x.T.conj() if adjoint_a else x).dot(y.T.conj() if adjoint_b else y)
    nz = np.where(x)
    sp = st(np.vstack(nz).T, x[nz], x.shape)
    got = sptool.matmul(sp, y, adjoint_a=adjoint_a, adjoint_b=adjoint_b)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("draw", _matmul_basic_draws(), ids=["int32", "float32", "float64"])
def test_matmul_basic(draw):
    # MATMUL::testBasic
    x, y = draw
    _check_matmul(x, y, False, False, 1e-4 if x.dtype == np.float32 else 1e-6)


@pytest.mark.parametrize("draw", _matmul_random_draws(), ids=lambda d: f"{list(d[0].shape)}x{list(d[1].shape)}"
                         f"-adj{int(d[2])}{int(d[3])}")
def test_matmul_float_random(draw):
    # MATMUL::testFloatRandom
    x, y, adjoint_a, adjoint_b = draw
    _check_matmul(x, y, adjoint_a, adjoint_b, 1e-4)


def test_matmul_unordered_indices():
    # MATMUL::testUnorderedIndicesForSparseTensorDenseMatmul
    sp = st([(2, 1), (0, 0)], np.array([10, 11], np.float32), [3, 2])
    dense = np.array([[1] * 500, [2] * 500], dtype=np.float32)
    want = np.array([[11] * 500, [0] * 500, [20] * 500], dtype=np.float32)
    np.testing.assert_allclose(np.asarray(sptool.matmul(sp, dense)), want)


@pytest.mark.parametrize("adjoint_a, rows", [(False, 2), (True, 3)])
def test_matmul_refuses_index_out_of_bounds(adjoint_a, rows):
    # MATMUL::testInvalidIndicesForSparseTensorDenseMatmul: "k (10) from index[0,1] out of bounds"
    dense = np.array([[i + 1] * 5 for i in range(rows)], dtype=np.float32)
    assert_refused(lambda: sptool.matmul(st([[1, 10]], np.array([10], np.float32), [3, 2]), dense,
                                         adjoint_a=adjoint_a), "bounds")


def test_matmul_refuses_inner_dimension_mismatch():
    # MATMUL::testShapeInference: "Dimensions must be equal" ([10, 15] x [10, 20])
    x = np.random.RandomState(0).rand(10, 10)
    x[np.abs(x) < 0.5] = 0
    nz = np.where(x)
    sp = st(np.vstack(nz).T, x[nz], [10, 15])
    assert_refused(lambda: sptool.matmul(sp, np.ones((10, 20))), "15|10")


# ---------------------------------------------------------------------------------------------
# cross and cross_hashed (sparse_cross_op_test.py)


def cross_input(data, batch_size=-1):
    """BaseSparseCrossOpTest._sparse_tensor: one row per batch, features in columns."""
    indices, values, width = [], [], 0
    for b, batch in enumerate(data):
        for c, feature in enumerate(batch):
            indices.append([b, c])
            values.append(feature)
            width = max(width, c + 1)
    shape = [batch_size if batch_size != -1 else len(data), width]
    strings = not values or isinstance(values[0], str)
    vals = np.array(values, dtype=object) if strings else np.array(values, dtype=np.int64)
    return SparseTensor(np.array(indices, dtype=np.int64).reshape(-1, 2), vals, tuple(shape))


def dense_strings(rows):
    return np.array(rows, dtype=str)


B1 = [["batch1-FC1-F1"], ["batch2-FC1-F1", "batch2-FC1-F2"]]
B2 = [["batch1-FC2-F1"], ["batch2-FC2-F1", "batch2-FC2-F2"]]
D1 = [["batch1-FC1-F1", "batch1-FC1-F2"], ["batch2-FC1-F1", "batch2-FC1-F2"]]
D2 = [["batch1-FC2-F1", "batch1-FC2-F2"], ["batch2-FC2-F1", "batch2-FC2-F2"]]
F3 = [["batch1-FC1-F1", "batch1-FC1-F2", "batch1-FC1-F3"]]


def _crossed(*columns, sep="_X_"):
    import itertools
    return [[sep.join(p) for p in itertools.product(*cols)] for cols in zip(*columns)]


CROSS_CASES = [
    pytest.param(lambda: [cross_input(B1), cross_input(B2)], "_X_", _crossed(B1, B2), id="test_simple"),
    pytest.param(lambda: [dense_strings(D1), dense_strings(D2)], "_X_", _crossed(D1, D2), id="test_dense"),
    pytest.param(lambda: [cross_input([[11], [333, 55555]]), cross_input(B2)], "_X_",
                 [["11_X_batch1-FC2-F1"], ["333_X_batch2-FC2-F1", "333_X_batch2-FC2-F2", "55555_X_batch2-FC2-F1",
                                           "55555_X_batch2-FC2-F2"]], id="test_integer_mixed_string_sparse"),
    pytest.param(lambda: [np.array([[11, 333], [55555, 999999]], np.int64), dense_strings(D2)], "_X_",
                 [["11_X_batch1-FC2-F1", "11_X_batch1-FC2-F2", "333_X_batch1-FC2-F1", "333_X_batch1-FC2-F2"],
                  ["55555_X_batch2-FC2-F1", "55555_X_batch2-FC2-F2", "999999_X_batch2-FC2-F1",
                   "999999_X_batch2-FC2-F2"]], id="test_integer_mixed_string_dense"),
    pytest.param(lambda: [cross_input(B1), dense_strings(D2)], "_X_", _crossed(B1, D2), id="test_sparse_cross_dense"),
    pytest.param(lambda: [cross_input([[11], [333, 5555]]), dense_strings(D2)], "_X_",
                 [["11_X_batch1-FC2-F1", "11_X_batch1-FC2-F2"],
                  ["333_X_batch2-FC2-F1", "333_X_batch2-FC2-F2", "5555_X_batch2-FC2-F1", "5555_X_batch2-FC2-F2"]],
                 id="test_integer_sparse_input"),
    pytest.param(lambda: [cross_input(F3), cross_input([["batch1-FC2-F1", "batch1-FC2-F2", "batch1-FC2-F3"]]),
                          cross_input([["batch1-FC3-F1", "batch1-FC3-F2", "batch1-FC3-F3"]])], "_X_",
                 _crossed(F3, [["batch1-FC2-F1", "batch1-FC2-F2", "batch1-FC2-F3"]],
                          [["batch1-FC3-F1", "batch1-FC3-F2", "batch1-FC3-F3"]]), id="test_permutation_3x3x3"),
    pytest.param(lambda: [cross_input(F3), cross_input([["batch1-FC2-F1"]]),
                          cross_input([["batch1-FC3-F1", "batch1-FC3-F2"]])], "_X_",
                 _crossed(F3, [["batch1-FC2-F1"]], [["batch1-FC3-F1", "batch1-FC3-F2"]]), id="test_permutation_3x1x2"),
    pytest.param(lambda: [cross_input([["batch1-FC1-F1", "batch1-FC1-F2"]], 2),
                          cross_input([["batch1-FC2-F1"], ["batch2-FC2-F1"]], 2),
                          cross_input([["batch1-FC3-F1", "batch1-FC3-F2"]], 2)], "_X_",
                 [["batch1-FC1-F1_X_batch1-FC2-F1_X_batch1-FC3-F1", "batch1-FC1-F1_X_batch1-FC2-F1_X_batch1-FC3-F2",
                   "batch1-FC1-F2_X_batch1-FC2-F1_X_batch1-FC3-F1", "batch1-FC1-F2_X_batch1-FC2-F1_X_batch1-FC3-F2"],
                  []], id="test_some_columns_empty"),
    pytest.param(lambda: [cross_input(B1), cross_input(B2)], "_Y_", _crossed(B1, B2, sep="_Y_"),
                 id="SparseCrossV2OpTest::test_sparse_sep"),
    pytest.param(lambda: [dense_strings(D1), dense_strings(D2)], "_", _crossed(D1, D2, sep="_"),
                 id="SparseCrossV2OpTest::test_dense_sep"),
]


def _expected_cross(rows, batch_size=None):
    """_sparse_tensor(expected rows): indices [b, c], its dense shape [batch, widest row]."""
    indices = [[b, c] for b, row in enumerate(rows) for c in range(len(row))]
    values = [v for row in rows for v in row]
    width = max((len(r) for r in rows), default=0)
    return indices, values, [batch_size or len(rows), width]


@pytest.mark.parametrize("make, sep, rows", CROSS_CASES)
def test_cross(make, sep, rows):
    # CROSS::SparseCrossOpTest::<id>
    got = sptool.cross(make(), separator=sep)
    assert_sparse(got, *_expected_cross(rows))


def test_cross_large_batch():
    # CROSS::SparseCrossOpTest::test_large_batch (5000 rows)
    n = 5000
    col1 = [[f"batch{b}-FC1-F1", f"batch{b}-FC1-F2", f"batch{b}-FC1-F3"] for b in range(n)]
    col2 = [[f"batch{b}-FC2-F1"] for b in range(n)]
    col3 = [[f"batch{b}-FC3-F1", f"batch{b}-FC3-F2"] for b in range(n)]
    got = sptool.cross([cross_input(col1), cross_input(col2), cross_input(col3)])
    assert_sparse(got, *_expected_cross(_crossed(col1, col2, col3)))


@pytest.mark.parametrize("make", [
    pytest.param(lambda: [cross_input([["batch1-FC1-F1", "batch1-FC1-F2"]]), cross_input([], 1),
                          cross_input([["batch1-FC3-F1", "batch1-FC3-F2"]])], id="test_one_column_empty"),
    pytest.param(lambda: [cross_input([]), cross_input([]), cross_input([])], id="test_all_columns_empty"),
])
def test_cross_empty(make):
    # CROSS::SparseCrossOpTest::<id>: no entries, and dense_shape[1] == 0
    got = sptool.cross(make())
    assert got.nnz == 0 and np.asarray(got.indices).size == 0
    assert got.shape[1] == 0


HASH3 = [["batch1-FC1-F1"]], [["batch1-FC2-F1"]], [["batch1-FC3-F1"]]
DEFAULT_HASH_KEY = 0xDECAFCAFFE


@pytest.mark.parametrize("num_buckets, hash_key, want", [
    pytest.param(0, None, 1971693436396284976, id="test_hashed_zero_bucket_no_hash_key"),
    pytest.param(0, DEFAULT_HASH_KEY + 1, 4847552627144134031, id="test_hashed_zero_bucket"),
    pytest.param(100, None, 83, id="test_hashed_no_hash_key"),
    pytest.param(100, DEFAULT_HASH_KEY + 1, 31, id="test_hashed_output"),
])
def test_cross_hashed(num_buckets, hash_key, want):
    # CROSS::SparseCrossOpTest::<id>
    got = sptool.cross_hashed([cross_input(h) for h in HASH3], num_buckets=num_buckets, hash_key=hash_key)
    assert_sparse(got, [[0, 0]], np.array([want], np.int64), [1, 1])


def test_cross_hashed_has_no_collision():
    # CROSS::SparseCrossOpTest::test_hashed__has_no_collision
    t1 = np.array([[359], [359 + 1024]], np.int64)
    t2 = np.array([list(range(10)), list(range(10))], np.int64)
    got = dense_of(sptool.cross_hashed([t2, t1], num_buckets=1024, hash_key=DEFAULT_HASH_KEY + 1))
    assert np.not_equal(got[0], got[1]).all()


def test_cross_hashed_3x1x2():
    # CROSS::SparseCrossOpTest::test_hashed_3x1x2
    got = sptool.cross_hashed([cross_input(F3), cross_input([["batch1-FC2-F1"]]),
                               cross_input([["batch1-FC3-F1", "batch1-FC3-F2"]])], num_buckets=1000)
    values = np.asarray(got.values)
    assert len(values) == 6
    np.testing.assert_array_equal(np.asarray(got.indices), [[0, i] for i in range(6)])
    assert all(0 <= v < 1000 for v in values) and len(set(values.tolist())) == 6


CROSS_REFUSED = [
    pytest.param(lambda: [SparseTensor(np.array([[0]]), np.array([0]), (10,))], "2",
                 id="test_bad_tensor_shapes-sparse"),
    pytest.param(lambda: [np.zeros([0], np.int64)], "", id="test_bad_tensor_shapes-dense"),
    pytest.param(lambda: [SparseTensor(np.array([[0, 0]]), np.array([0]), (10, 10)), np.zeros([5, 0], np.int64)],
                 "batch|rows|10|5", id="test_batch_size_mismatch-dense"),
    pytest.param(lambda: [SparseTensor(np.array([[0, 0]]), np.array([0]), (10, 10)),
                          SparseTensor(np.array([[0, 0]]), np.array([0]), (7, 10))], "batch|rows|10|7",
                 id="test_batch_size_mismatch-sparse"),
]


@pytest.mark.parametrize("make, word", CROSS_REFUSED)
def test_cross_refused(make, word):
    # CROSS::SparseCrossOpTest::<id>
    assert_refused(lambda: sptool.cross(make()), word)


# ---------------------------------------------------------------------------------------------
# sparse segment reductions (segment_reduction_ops_test.py, SparseSegmentReductionOpTest)


def segment_data(shape):
    """SegmentReductionHelper._input: 1..n reshaped, as float32."""
    return np.arange(1, int(np.prod(shape)) + 1).reshape(shape).astype(np.float32)


def numpy_segment(x, indices, segment_ids, op, num_segments=None):
    """SparseSegmentReductionHelper._sparseSegmentReduce with the test's sum and mean ops."""
    rows = x[np.asarray(indices, dtype=np.int64)]
    if not rows.size:
        return np.zeros((num_segments or 0,) + x.shape[1:], x.dtype)
    num_segments = num_segments if num_segments is not None else segment_ids[-1] + 1
    out = np.zeros((num_segments,) + x.shape[1:], np.float64)
    counts = np.zeros(num_segments)
    for row, s in zip(rows, segment_ids):
        out[s] += row
        counts[s] += 1
    if op == "mean":
        out[counts > 0] /= counts[counts > 0, None]
    elif op == "sqrt_n":
        out[counts > 0] /= np.sqrt(counts[counts > 0, None])
    return out


SEGMENT_OPS = ["sum", "mean"]


@pytest.mark.parametrize("op", SEGMENT_OPS)
@pytest.mark.parametrize("segment_ids, indices, num_segments", [
    pytest.param([0, 2, 2, 2], [8, 3, 0, 9], None, id="testSegmentIdsHole"),
    pytest.param([0, 2, 2, 2], [8, 3, 0, 9], 5, id="testWithNumSegments"),
    pytest.param([1, 2, 2, 2], [8, 3, 0, 9], None, id="testSegmentIdsGreaterThanZero"),
    pytest.param([0, 1, 2, 2], [8, 3, 0, 9], None, id="testValid"),
    pytest.param([0, 1, 3, 3], [8, 3, 0, 9], 5, id="testSegmentWithNumSegmentsValid"),
])
def test_segment(op, segment_ids, indices, num_segments):
    # SEGMENT::SparseSegmentReductionOpTest::<id>
    x = segment_data([10, 4])
    fn = getattr(sptool, f"segment_{op}")
    got = fn(x, indices=np.array(indices), segment_ids=np.array(segment_ids), num_segments=num_segments)
    np.testing.assert_allclose(np.asarray(got), numpy_segment(x, indices, segment_ids, op, num_segments), rtol=1e-6)


@pytest.mark.parametrize("op", SEGMENT_OPS)
@pytest.mark.parametrize("num_segments, rows", [pytest.param(None, 0, id="testWithEmptySegments"),
                                                pytest.param(5, 5, id="testWithEmptySegmentsWithNumSegments")])
def test_segment_empty(op, num_segments, rows):
    # SEGMENT::SparseSegmentReductionOpTest::<id>
    fn = getattr(sptool, f"segment_{op}")
    got = fn(np.zeros([0, 4], np.float32), indices=np.array([], np.int64), segment_ids=np.array([], np.int64),
             num_segments=num_segments)
    np.testing.assert_array_equal(np.asarray(got), np.zeros([rows, 4]))


@pytest.mark.parametrize("op", SEGMENT_OPS)
@pytest.mark.parametrize("segment_ids, indices, num_segments, word", [
    pytest.param([0, 1, 2, 2], [8, -1, 0, 9], None, "-1", id="testIndicesInvalid1"),
    pytest.param([0, 1, 2, 2], [8, 3, 0, 10], None, "10", id="testIndicesInvalid2"),
    pytest.param([0, 1, 0, 1], [8, 3, 0, 9], None, "increasing|sorted", id="testSegmentsInvalid2"),
    pytest.param([0, 1, 2, 0], [8, 3, 0, 9], None, "increasing|sorted", id="testSegmentsInvalid3"),
    pytest.param([-1, 0, 1, 1], [8, 3, 0, 9], None, "-1|>= 0", id="testSegmentsInvalid4"),
    pytest.param([0, 0, 0, -1], [8, 3, 0, 9], None, "-1|>= 0", id="testSegmentsInvalid6"),
    pytest.param([0, 0, 0, -2], [8, 3, 0, 9], None, "-2|>= 0", id="testSegmentsInvalid7"),
    pytest.param([0, 1, 3, 5], [8, 3, 0, 9], 5, "num_segments|5", id="testSegmentWithNumSegmentsInvalid1"),
    pytest.param([0, 1, 3, 3], [8, 3, 0, 9], -2, "num_segments|negative|-2", id="testSegmentWithNumSegmentsInvalid2"),
])
def test_segment_refused(op, segment_ids, indices, num_segments, word):
    # SEGMENT::SparseSegmentReductionOpTest::<id>
    fn = getattr(sptool, f"segment_{op}")
    assert_refused(lambda: fn(segment_data([10, 4]), indices=np.array(indices), segment_ids=np.array(segment_ids),
                              num_segments=num_segments), word)


@pytest.mark.parametrize("data", [
    pytest.param(np.asarray(1.0, np.float32), id="0-d-array"),
    pytest.param(1.0, id="python-float"),
])
@pytest.mark.parametrize("op", ["sum", "mean", "sqrt_n"])
def test_segment_refuses_scalar_data(op, data):
    # SEGMENT::SparseSegmentReductionOpTest::testSegmentScalarIdiRaisesInvalidArgumentError
    # (data=1.0: "Shape must be at least rank 1")
    fn = getattr(sptool, f"segment_{op}")
    assert_refused(lambda: fn(data, indices=np.array([0]), segment_ids=np.array([3])), "data")


# ---------------------------------------------------------------------------------------------
# bincount (bincount_ops_test.py TestSparseCount::test_sparse_input; bincount_op_test.py)

A = np.array([[3, 0, 1, 0], [0, 0, 0, 0], [5, 0, 4, 4]], dtype=np.int32)
B = np.array([[3, 0, 1, 0], [7, 0, 0, 0], [5, 0, 4, 4]], dtype=np.int32)
C = np.array([[3, 0, 1, 0], [0, 0, 7, 0], [5, 0, 4, 4]], dtype=np.int32)

BINCOUNT_CASES = [
    pytest.param(A, {}, [[0, 1], [0, 3], [2, 4], [2, 5]], [1, 1, 2, 1], [3, 6], id="_no_maxlength"),
    pytest.param(B, {"maxlength": 7}, [[0, 1], [0, 3], [2, 4], [2, 5]], [1, 1, 2, 1], [3, 7], id="_maxlength"),
    pytest.param(B, {"maxlength": 0}, np.empty([0, 2]), [], [3, 0], id="_maxlength_zero"),
    pytest.param(B, {"minlength": 9}, [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]], [1, 1, 1, 2, 1], [3, 9],
                 id="_minlength"),
    pytest.param(B, {"minlength": 3}, [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]], [1, 1, 1, 2, 1], [3, 8],
                 id="_minlength_larger_values"),
    pytest.param(A, {"binary_output": True}, [[0, 1], [0, 3], [2, 4], [2, 5]], [1, 1, 1, 1], [3, 6],
                 id="_no_maxlength_binary"),
    pytest.param(C, {"maxlength": 7, "binary_output": True}, [[0, 1], [0, 3], [2, 4], [2, 5]], [1, 1, 1, 1], [3, 7],
                 id="_maxlength_binary"),
    pytest.param(B, {"minlength": 9, "binary_output": True}, [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]],
                 [1, 1, 1, 1, 1], [3, 9], id="_minlength_binary"),
    pytest.param(B, {"minlength": 3, "binary_output": True}, [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]],
                 [1, 1, 1, 1, 1], [3, 8], id="_minlength_larger_values_binary"),
    pytest.param(A, {"weights": np.array([[6, 0, 2, 0], [0, 0, 0, 0], [10, 0, 3.5, 3.5]])},
                 [[0, 1], [0, 3], [2, 4], [2, 5]], [2, 6, 7, 10], [3, 6], id="_no_maxlength_weights"),
    pytest.param(C, {"maxlength": 7, "weights": np.array([[6, 0, 2, 0], [0, 0, 14, 0], [10, 0, 3.5, 3.5]])},
                 [[0, 1], [0, 3], [2, 4], [2, 5]], [2, 6, 7, 10], [3, 7], id="_maxlength_weights"),
    pytest.param(B, {"minlength": 9, "weights": np.array([[6, 0, 2, 0], [14, 0, 0, 0], [10, 0, 3, 3.5]])},
                 [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]], [2, 6, 14, 6.5, 10], [3, 9], id="_minlength_weights"),
    pytest.param(B, {"minlength": 3, "weights": np.array([[6, 0, 2, 0], [14, 0, 0, 0], [10, 0, 3, 3.5]])},
                 [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]], [2, 6, 14, 6.5, 10], [3, 8],
                 id="_minlength_larger_values_weights"),
    pytest.param(np.array([3, 0, 1, 1], np.int32), {}, [[1], [3]], [2, 1], [4], id="_1d"),
    pytest.param(A, {"axis": 0}, [[1], [3], [4], [5]], [1, 1, 2, 1], [6], id="_all_axes"),
    pytest.param(np.array([[1941591354222760687, 0, 1241591354229760689], [0, 1241591354229760689,
                                                                            1241591354229760687]], np.int64),
                 {"axis": 0}, [[1241591354229760687], [1241591354229760689], [1941591354222760687]], [1, 2, 1],
                 [1941591354222760687 + 1], id="_large_inputs"),
]


def from_dense(x):
    """tf.sparse.from_dense: the nonzero cells, row-major."""
    nz = np.nonzero(x)
    return st(np.transpose(nz), x[nz], x.shape)


@pytest.mark.parametrize("x, kwargs, indices, values, shape", BINCOUNT_CASES)
def test_bincount(x, kwargs, indices, values, shape):
    # BINCOUNT::TestSparseCount::test_sparse_input<id> (axis -1 unless the case says 0, which
    # stands for TensorFlow's axis=None on a 2-D input and its default on a 1-D one)
    kwargs = dict(kwargs)
    axis = kwargs.pop("axis", -1 if x.ndim == 2 else 0)
    if "weights" in kwargs:
        kwargs["weights"] = from_dense(kwargs["weights"])
    got = sptool.bincount(from_dense(x), axis=axis, **kwargs)
    assert_sparse(got, indices, values, shape)


@pytest.mark.parametrize("values, axis, binary, expect", [
    ([0, 1, 2, 2], 0, False, [1, 1, 2]),
    ([2, 1, 2, 2], 0, False, [0, 1, 3]),
    ([0, 1, 2, 2], 0, True, [1, 1, 1]),
    ([2, 1, 2, 2], 0, True, [0, 1, 1]),
    ([0, 1, 2, 2], -1, False, [[0, 0, 0], [1, 1, 0], [0, 0, 2], [0, 0, 0]]),
    ([2, 1, 2, 2], -1, False, [[0, 0, 0], [0, 1, 1], [0, 0, 2], [0, 0, 0]]),
    ([0, 1, 2, 2], -1, True, [[0, 0, 0], [1, 1, 0], [0, 0, 1], [0, 0, 0]]),
    ([2, 1, 2, 2], -1, True, [[0, 0, 0], [0, 1, 1], [0, 0, 1], [0, 0, 0]]),
])
def test_bincount_implicit_zeros(values, axis, binary, expect):
    # BINCOUNT_KERNEL::SparseBincountOpTest::test_sparse_bincount_implicit_zeros (size=3)
    if axis == -1:
        t = st([[1, 2], [1, 4], [2, 2], [2, 4]], values, [4, 5], np.int64)
    else:
        t = st([[7], [9], [12], [14]], values, [20], np.int64)
    got = sptool.bincount(t, axis=axis, minlength=3, maxlength=3, binary_output=binary)
    np.testing.assert_array_equal(dense_of(got), expect)


BINCOUNT_REFUSED = [
    pytest.param(lambda: sptool.bincount(from_dense(A), weights=from_dense(
        np.array([[3, 1, 0, 0], [0, 0, 0, 0], [5, 0, 4, 4]], np.int32)), axis=-1), "indices",
        id="test_sparse_input_wrong_indices_fails"),
    pytest.param(lambda: sptool.bincount(from_dense(A), weights=from_dense(
        np.array([[3, 1, 1, 0], [0, 0, 0, 0], [5, 0, 4, 4]], np.int32)), axis=-1), "",
        id="test_sparse_input_too_many_indices_fails"),
    pytest.param(lambda: sptool.bincount(from_dense(A), weights=from_dense(
        np.array([[3, 0, 1, 0], [0, 0, 0, 0], [5, 0, 4, 4], [0, 0, 0, 0]], np.int32)), axis=-1), "shape",
        id="test_sparse_input_wrong_shape_fails"),
    pytest.param(lambda: sptool.bincount(st([[0, 0], [0, 1], [1, 0], [1, 2]], [1, 1, -1, 10], [2, 3]), axis=-1),
                 "negative|>= 0|non-negative", id="testSparseCountSparseOutputNegativeValue"),
]


@pytest.mark.parametrize("call, word", BINCOUNT_REFUSED)
def test_bincount_refused(call, word):
    # BINCOUNT::TestSparseCountFailureModes::<id> / RawOpsTest::<id>
    assert_refused(call, word)


# ---------------------------------------------------------------------------------------------
# the same cases through the command line


def test_cli_reorder(tmp_path):
    # REORDER::testOutOfOrder
    perm = _permutations()[0]
    src = write(tmp_path, "in", st(np.array(IND_5x6)[perm], np.array(VAL_5x6, np.float64)[perm], [5, 6]))
    out = str(tmp_path / "out.parquet")
    result = run_cli("reorder", src, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert_sparse(sptool.read(out), IND_5x6, VAL_5x6, [5, 6])


def test_cli_split(tmp_path):
    # SPLIT::testSplitMatrixUnevenCols (num_split 4, axis -1)
    src = write(tmp_path, "in", FIXTURES["5x7"]())
    result = run_cli("split", src, "--axis", "-1", "--num-split", "4", "-o", str(tmp_path / "p{i}.parquet"), "-q")
    assert result.exit_code == 0, result.output
    pieces = [sptool.read(str(tmp_path / f"p{i}.parquet")) for i in range(4)]
    _assert_pieces(pieces, SPLIT_CASES[4].values[3])


@pytest.mark.parametrize("case", SLICE_CASES[2:9:3], ids=lambda c: f"{c[0]}-{c[2]}")
def test_cli_slice(case, tmp_path):
    # SLICE::<method>
    _method, fixture, start, size, want = case
    src = write(tmp_path, "in", FIXTURES[fixture]())
    out = str(tmp_path / "out.parquet")
    result = run_cli("slice", src, "--start", ",".join(map(str, start)), "--size", ",".join(map(str, size)),
                     "-o", out, "-q")
    assert result.exit_code == 0, result.output
    _assert_pieces([sptool.read(out)], [want])


def test_cli_reshape(tmp_path):
    # RESHAPE::testFeedUpRankWithInferredDim
    src = write(tmp_path, "in", FIXTURES["5x6"]())
    out = str(tmp_path / "out.parquet")
    result = run_cli("reshape", src, "--shape", "2,-1,5", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert_sparse(sptool.read(out), *UP_RANK)


def test_cli_concat_expand(tmp_path):
    # CONCAT::testMismatchedShapesExpandNonconcatDim (axis 1)
    srcs = [write(tmp_path, f"in{i}", m()) for i, m in enumerate([_c3x3, _c3x5, _c3x2, _c2x3])]
    out = str(tmp_path / "out.parquet")
    result = run_cli("concat", *srcs, "--axis", "1", "--expand-nonconcat", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert_sparse(sptool.read(out), *EXPAND_DIM1)


def test_cli_todense(tmp_path):
    # TODENSE::test2d
    src = write(tmp_path, "in", st([[1, 3], [2, 0]], [1, 1], [3, 4]))
    out = str(tmp_path / "out.npy")
    result = run_cli("todense", src, "-o", out, "--default-value", "-1", "-q")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(out), [[-1, -1, -1, -1], [-1, -1, -1, 1], [1, -1, -1, -1]])


def test_cli_fill_empty_rows(tmp_path):
    # OPS::SparseFillEmptyRowsTest::testFillNumber
    src = write(tmp_path, "in", st(IND_5x6, VAL_5x6, [5, 6], np.int32))
    out, ind = str(tmp_path / "out.parquet"), str(tmp_path / "ind.npy")
    result = run_cli("fill-empty-rows", src, "--default-value", "-1", "--indicator", ind, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert_sparse(sptool.read(out), FILLED, [0, 10, 13, 14, -1, 32, 33, -1], [5, 6])
    np.testing.assert_array_equal(np.load(ind), [False, False, True, False, True])


def test_cli_segment_sum(tmp_path):
    # SEGMENT::SparseSegmentReductionOpTest::testWithNumSegments
    x = segment_data([10, 4])
    paths = {}
    for name, arr in (("data", x), ("ind", np.array([8, 3, 0, 9])), ("seg", np.array([0, 2, 2, 2]))):
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], arr)
    out = str(tmp_path / "out.npy")
    result = run_cli("segment-sum", paths["data"], "--indices", paths["ind"], "--segment-ids", paths["seg"],
                     "--num-segments", "5", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(out), numpy_segment(x, [8, 3, 0, 9], [0, 2, 2, 2], "sum", 5))


def test_cli_cross_hashed(tmp_path):
    # CROSS::SparseCrossOpTest::test_hashed_output
    srcs = [write(tmp_path, f"in{i}", cross_input(h)) for i, h in enumerate(HASH3)]
    out = str(tmp_path / "out.parquet")
    result = run_cli("cross-hashed", *srcs, "--num-buckets", "100", "--hash-key", str(DEFAULT_HASH_KEY + 1),
                     "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert_sparse(sptool.read(out), [[0, 0]], np.array([31], np.int64), [1, 1])


def test_cli_bincount(tmp_path):
    # BINCOUNT::TestSparseCount::test_sparse_input_minlength
    src = write(tmp_path, "in", from_dense(B))
    out = str(tmp_path / "out.parquet")
    result = run_cli("bincount", src, "--axis", "-1", "--minlength", "9", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert_sparse(sptool.read(out), [[0, 1], [0, 3], [1, 7], [2, 4], [2, 5]], [1, 1, 1, 2, 1], [3, 9])


def test_cli_split_refuses_invalid_axis(tmp_path):
    # SPLIT::testInvalidAxis
    src = write(tmp_path, "in", FIXTURES["4x6"]())
    result = run_cli("split", src, "--axis", "2", "--num-split", "3", "-o", str(tmp_path / "p{i}.parquet"))
    assert_cli_refused(result, "2")
    assert not any(name.startswith("p") for name in os.listdir(tmp_path))


def test_cli_reshape_refuses_two_inferred_dims(tmp_path):
    # RESHAPE::testFeedMultipleInferredDims
    src = write(tmp_path, "in", FIXTURES["5x6"]())
    result = run_cli("reshape", src, "--shape", "4,-1,-1", "-o", str(tmp_path / "out.parquet"))
    assert_cli_refused(result, "-1")


def test_cli_concat_refuses_mismatched_shapes(tmp_path):
    # CONCAT::testMismatchedShapes
    srcs = [write(tmp_path, f"in{i}", m()) for i, m in enumerate([_c3x3, _c3x5, _c3x2, _c2x3])]
    result = run_cli("concat", *srcs, "--axis", "1", "-o", str(tmp_path / "out.parquet"))
    assert_cli_refused(result, "shape")


def test_cli_todense_refuses_bad_default(tmp_path):
    # TODENSE::testBadDefault: "default_value should be a scalar"
    src = write(tmp_path, "in", st([[1], [3]], [1, 2], [5]))
    result = run_cli("todense", src, "-o", str(tmp_path / "out.npy"), "--default-value", "[0]")
    assert_cli_refused(result, "default")


def write_unchecked(tmp_path, name, indices, values, shape) -> str:
    """A Parquet file holding TensorFlow's invalid input as it is (no order or uniqueness
    claimed): the file a command must refuse, since the API refuses to build it."""
    indices = np.asarray(indices, np.int64)
    values = np.asarray(values, np.float64)
    columns = {f"indices_{k}": pa.array(indices[:, k]) for k in range(indices.shape[1])}
    columns["values"] = pa.array(values)
    meta = TensorMeta(shape=tuple(shape), sparse_ndim=len(shape), value_type="float64", sort_order=(),
                      unique=False, nnz=len(values))
    path = str(tmp_path / f"{name}.parquet")
    writer = pq.ParquetWriter(path, pa.table(columns).schema)
    writer.write_table(pa.table(columns))
    writer.add_key_value_metadata({"sptool": meta.to_json()})
    writer.close()
    return path


INVALID_FILES = [
    pytest.param([[0, 0], [1, 10], [-1, 2]], [1.0, 2.0, 3.0], [3, 5], r"\[1,10\]|\[-1,2\]",
                 ["split", "--axis", "1", "--num-split", "2", "-o", "{tmp}/p{{i}}.parquet"],
                 id="SPLIT::testSparseIndexOutOfBounds"),
    pytest.param([[1, 2], [1, 3], [99, 1], [99, 3]], [1, 3, 2, 4], [2, 5], r"\[99,1\]",
                 ["fill-empty-rows", "--default-value", "-1", "-o", "{tmp}/out.parquet"],
                 id="OPS::SparseFillEmptyRowsTest::testInvalidIndices"),
    pytest.param([[1], [10]], [1.0, 1.0], [5], r"\[10\]", ["todense", "-o", "{tmp}/out.npy"],
                 id="TODENSE::testOutOfBoundsIndicesWithWithoutValidation"),
    pytest.param([[1, 10]], [10.0], [3, 2], r"\[1,10\]|k \(10\) from index\[0,1\]",
                 ["matmul", "{tmp}/dense.npy", "-o", "{tmp}/out.npy"],
                 id="MATMUL::testInvalidIndicesForSparseTensorDenseMatmul"),
    pytest.param([[1, 3]], [0.0], [2, 2], r"\[1,3\]", ["add", "{tmp}/dense.npy", "-o", "{tmp}/out.npy"],
                 id="ADD::testInvalidSparseTensor"),
]


@pytest.mark.parametrize("indices, values, shape, where, args", INVALID_FILES)
def test_cli_refuses_tensorflows_invalid_indices(indices, values, shape, where, args, tmp_path):
    # <id>: TensorFlow raises InvalidArgumentError ("out of bounds" / "invalid index"); the
    # command exits 1 with one line naming the file and the offending entry, and writes nothing.
    src = write_unchecked(tmp_path, "bad", indices, values, shape)
    np.save(str(tmp_path / "dense.npy"), np.ones((shape[-1], 5) if args[0] == "matmul" else shape))
    before = set(os.listdir(tmp_path))
    result = run_cli(args[0], src, *[a.format(tmp=tmp_path) for a in args[1:]])
    assert result.exit_code == 1, result.output
    assert_cli_refused(result, where, "bad.parquet")
    assert set(os.listdir(tmp_path)) == before
