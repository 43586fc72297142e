"""mul and div: a sparse tensor times (or over) a dense .npy broadcast to its shape
(TensorFlow's ``sp * dense`` and ``sp / dense``: SparseDenseCwiseMul / SparseDenseCwiseDiv)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import _kernels
from .._memory import budget_of
from .._messages import out_of_bounds
from ..errors import DataError, ShapeMismatch, UsageError
from ..format import number_of, value_type_of_dtype
from ..io import batch_keys, batch_values, check_inputs, known_shape, open_input, schema_of, values_array
from ..stream.binary import is_dense_path, numeric_dtype, open_dense, promote, require_zero_fill, scalar
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import summed_if_promoted
from ..tensor import SparseTensor


def truediv_dtype(dtype: np.dtype) -> np.dtype:
    """TensorFlow's ``__truediv__`` rule: (u)int8/16 → float32, (u)int32/64 → float64, floats and
    complex stay.  bool (which TensorFlow does not divide) counts as an 8-bit integer."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b" or (dtype.kind in "iu" and dtype.itemsize <= 2):
        return np.dtype(np.float32)
    if dtype.kind in "iu":
        return np.dtype(np.float64)
    return dtype


def broadcast_plan(sparse_shape: tuple, dense_shape: tuple) -> tuple:
    """The dense operand's shape with leading 1s up to the sparse rank, checking NumPy's
    broadcasting of the dense side only (the sparse side never broadcasts)."""
    rank = len(sparse_shape)
    ok = len(dense_shape) <= rank and all(
        d == 1 or d == s for d, s in zip(dense_shape[::-1], sparse_shape[::-1]))
    if not ok:
        raise ShapeMismatch(f"the dense operand's shape [{', '.join(map(str, dense_shape))}] does not broadcast to the "
                            f"sparse shape [{', '.join(map(str, sparse_shape))}] (only the dense side broadcasts, "
                            "NumPy-style from the last dimension)")
    return (1,) * (rank - len(dense_shape)) + tuple(dense_shape)


def gather(dense: np.ndarray, keys: np.ndarray, K: int) -> np.ndarray:
    """dense[idx] for each row's coordinate, index 0 where the dense dimension is 1 (broadcast):
    (n, *dense dims after the sparse ones)."""
    index = tuple(keys[k] if dense.shape[k] != 1 else np.zeros(keys.shape[1], dtype=np.int64) for k in range(K))
    return np.asarray(dense[index])


def result_dtype(op: str, dtype: np.dtype, dense_dtype: np.dtype, number=None) -> np.dtype:
    """The value type of ``op`` (mul or div) of values of ``dtype`` by a dense operand of
    ``dense_dtype``, or by ``number``: a number promotes as NumPy's Python scalars do (float32 *
    2.5 stays float32)."""
    dtype = promote(dtype, dense_dtype) if number is None else np.result_type(dtype, number)
    return truediv_dtype(dtype) if op == "div" else dtype


def _cwise(op: str, t: str, d: str, output, *, memory=None, progress=None) -> dict:
    budget = budget_of(memory)
    check_inputs([t, d])
    if is_dense_path(t):
        raise UsageError(f"{op} takes the sparse tensor first and the dense .npy second", path=t)
    number = number_of(d)
    if number is not None:
        dense = np.asarray(number)  # a scalar: a 0-d operand, which broadcasts to every entry
    elif isinstance(d, np.ndarray):
        dense = d
    elif not is_dense_path(d):
        raise UsageError(f"the second operand of {op} must be a number or a dense .npy file (the sparse side "
                         "never broadcasts)", path=str(d))
    else:
        dense = open_dense(d)
    with open_input(t) as opened, known_shape(opened) as src:
        meta = src.meta
        numeric_dtype(meta, t, op)
        require_zero_fill(meta, t, op)
        full = broadcast_plan(meta.shape, dense.shape)
        dview = dense.reshape(full)
        dtype = result_dtype(op, meta.dtype, dense.dtype, number)
        src = summed_if_promoted(src, dtype)  # duplicates sum in the value type, before the cast
        sink = run(Cwise(op, dview, dtype, src.path, rows=src.start), src, output, budget=budget, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "value_type": final.value_type,
            "broadcast_shape": list(full)}


class Cwise(StreamOp):
    """Each stored value times (or over) the dense operand's element at its coordinates."""

    def __init__(self, op: str, dense: np.ndarray, dtype: np.dtype, path: str, rows: int = 0):
        self.op, self.dense, self.dtype, self.path, self.rows = op, dense, dtype, path, rows  # rows: before the first

    def plan(self, meta) -> Plan:
        self.meta, self.K = meta, meta.sparse_ndim
        self.out_meta = meta.with_(value_type=value_type_of_dtype(self.dtype), fill_value=scalar(0, self.dtype),
                                   nnz=None, iso=False, created_by=None)
        self.schema = schema_of(self.out_meta)
        self.bounds = np.asarray(meta.shape[: self.K], dtype=np.int64)
        return Plan(self.out_meta, unique_claim=True if meta.unique else None, row_for_row=True)

    def map(self, batch, keys):
        K, dtype = self.K, self.dtype
        keys = batch_keys(batch, K)
        bad, _ = _kernels.first_out_of_bounds(keys, self.bounds)
        if bad >= 0:
            raise DataError(out_of_bounds(self.rows + bad, keys, bad, self.meta.shape[:K]) +
                            " (w.r.t. the dense side broadcast to the sparse shape)", path=self.path)
        vals = batch_values(batch, self.meta).astype(dtype, copy=False)
        other = gather(self.dense, keys, K).astype(dtype, copy=False)
        with np.errstate(all="ignore"):
            res = vals * other if self.op == "mul" else np.true_divide(vals, other, dtype=dtype)
        if res.shape != vals.shape:  # cannot happen after broadcast_plan; kept as a guard
            res = np.broadcast_to(res, vals.shape)
        self.rows += batch.num_rows
        cols = list(batch.columns[:K]) + [values_array(np.ascontiguousarray(res, dtype=dtype), self.out_meta)]
        yield pa.RecordBatch.from_arrays(cols, schema=self.schema)


def mul(t: str, d: str, output: str | None = None, *, memory=None, progress=None) -> dict:
    """A sparse tensor times a dense .npy broadcast to its shape (TensorFlow's ``sp * dense``), or
    times a number (``d`` = 2.5, or its text).

    The dense operand broadcasts by NumPy's rules, to the sparse shape only: D's shape, aligned
    on the right, must have each dimension equal to T's or 1 (so (n,) and (1, n) both scale the
    columns of an (m, n) matrix); T never broadcasts.  The output keeps T's indices, row order
    and uniqueness; only the values change, to ``values * D[index]``, gathered per batch from
    the memory-mapped .npy.  Implicit zeros take no part (0 * inf is not computed).  Rows
    sharing a coordinate stay as they are: the product distributes over their sum.  T's fill
    value must be 0.  The value type is NumPy's promotion of the two (integers wrap).

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "w.npy"), np.arange(150.0))
    >>> mul("sample_data/matrix_a.parquet", os.path.join(d, "w.npy"), os.path.join(d, "out.parquet"))["rows"]
    600
    """
    return _cwise("mul", t, d, output, memory=memory, progress=progress)


def div(t: str, d: str, output: str | None = None, *, memory=None, progress=None) -> dict:
    """A sparse tensor over a dense .npy broadcast to its shape (TensorFlow's ``sp / dense``), or
    over a number.

    As ``mul``, with ``values / D[index]`` and TensorFlow's true-division types: (u)int8/16 (and
    bool) give float32, (u)int32/64 give float64, floating and complex types stay (after NumPy
    promotion of the two operands).  Division by zero follows NumPy/IEEE: x/0 is ±inf, 0/0 is
    NaN, silently.

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "s.npy"), np.full((1, 150), 4, dtype=np.int32))
    >>> div("sample_data/matrix_a.parquet", os.path.join(d, "s.npy"), os.path.join(d, "out.parquet"))["value_type"]
    'float64'
    """
    return _cwise("div", t, d, output, memory=memory, progress=progress)
