"""sampled-matmul: alpha * (A @ B) at a sparse mask's coordinates, plus beta * the mask's values
(TensorFlow's sparse.sampled_addmm, SDDMM), without forming the dense product."""

from __future__ import annotations

import math
from contextlib import ExitStack

import numpy as np
import pyarrow as pa

from .. import _linalg
from .._memory import budget_of
from ..errors import ShapeMismatch, UsageError
from ..format import value_type_of_dtype
from ..io import batch_columns, batch_values, check_inputs, known_shape, open_input, schema_of, values_array
from ..stream.binary import is_dense_path, numeric_dtype, open_dense, require_zero_fill, scalar
from ..stream.engine import Plan, StreamOp, run
from ..stream.matrices import Scratch, prepare_dense
from ..stream.matrices import pool as second_thread
from ..tensor import SparseTensor

# Batches smaller than this run on one thread: splitting costs more than it saves.
PARALLEL_MIN = 1 << 14


def _result_dtype(mask: np.dtype, a: np.dtype, b: np.dtype, path: str) -> np.dtype:
    dtype = np.result_type(mask.newbyteorder("="), a.newbyteorder("="), b.newbyteorder("="))
    if dtype.kind != "f":
        raise UsageError(f"sampled-matmul computes in floating point (TensorFlow's float16/32/64); these operands "
                         f"promote to {dtype}", path=path)
    return dtype


def _check_shapes(mask_shape: tuple, a_shape: tuple, b_shape: tuple):
    """TensorFlow's rule: [..., m, n] = [..., m, k] @ [..., k, n], the batch dimensions equal."""
    def text(s):
        return "[" + ", ".join(map(str, s)) + "]"
    if len(mask_shape) < 2 or len(a_shape) != len(mask_shape) or len(b_shape) != len(mask_shape):
        raise ShapeMismatch(f"sampled-matmul needs the mask, A and B of one rank >= 2; got {text(mask_shape)}, "
                            f"{text(a_shape)} and {text(b_shape)}")
    ok = (a_shape[:-2] == b_shape[:-2] == tuple(mask_shape[:-2]) and a_shape[-1] == b_shape[-2]
          and a_shape[-2] == mask_shape[-2] and b_shape[-1] == mask_shape[-1])
    if not ok:
        raise ShapeMismatch(f"sampled-matmul needs mask [..., m, n], A [..., m, k], B [..., k, n]; got "
                            f"{text(mask_shape)}, {text(a_shape)} and {text(b_shape)}")


class SampledMatmul(StreamOp):
    """Each mask entry's value becomes alpha * (row of A . column of B) + beta * value."""

    def __init__(self, a2: np.ndarray, bt2: np.ndarray, dtype: np.dtype, alpha: float, beta: float, pool,
                 parallel_rows: int):
        self.a2, self.bt2, self.dtype, self.alpha, self.beta, self.pool = a2, bt2, dtype, alpha, beta, pool
        self.parallel_rows = parallel_rows
        self.compute = np.dtype(np.float32) if dtype.itemsize <= 4 else np.dtype(np.float64)

    def plan(self, meta) -> Plan:
        self.meta, self.K = meta, meta.sparse_ndim
        self.out_meta = meta.with_(value_type=value_type_of_dtype(self.dtype), fill_value=scalar(0, self.dtype),
                                   nnz=None, iso=False, created_by=None)
        self.schema = schema_of(self.out_meta)
        batch_dims = np.asarray(meta.shape[: self.K - 2], dtype=np.int64)
        self.batch_strides = np.cumprod(np.r_[batch_dims[1:][::-1], 1])[::-1].astype(np.int64)
        if meta.unique:
            return Plan(self.out_meta, bounds_checked=True, unique_claim=True)
        # Rows sharing a coordinate mean their sum, so the mask is summed first: the result is
        # alpha * (A @ B) + beta * that sum once, not once per stored row as TensorFlow gives.
        return Plan(self.out_meta, order=tuple(range(self.K)), duplicates="sum", unique_claim=True)

    def map(self, batch, keys):
        K, m, n = self.K, self.meta.shape[-2], self.meta.shape[-1]
        idx = batch_columns(batch, K)
        flat = np.zeros(batch.num_rows, dtype=np.int64)
        for d in range(K - 2):
            flat += idx[d] * self.batch_strides[d]
        rows = np.ascontiguousarray(flat * m + idx[K - 2])
        cols = np.ascontiguousarray(flat * n + idx[K - 1])
        dots = np.empty(batch.num_rows, dtype=self.compute)
        self._dots(rows, cols, dots)
        vals = batch_values(batch, self.meta).astype(self.compute, copy=False)
        with np.errstate(all="ignore"):
            res = (self.compute.type(self.alpha) * dots + self.compute.type(self.beta) * vals).astype(self.dtype)
        arrays = list(batch.columns[:K]) + [values_array(res, self.out_meta)]
        yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _dots(self, rows, cols, out):
        n = len(rows)
        if self.pool is None or n < self.parallel_rows:
            _linalg.sampled_dot(rows, cols, self.a2, self.bt2, out)
            return
        half = n // 2
        parts = [slice(0, half), slice(half, n)]
        done = [self.pool.submit(_linalg.sampled_dot, rows[s], cols[s], self.a2, self.bt2, out[s]) for s in parts]
        for f in done:
            f.result()


def sampled_matmul(mask, a: str, b: str, output: str | None = None, *, alpha: float = 1.0, beta: float = 1.0,
                   memory=None, tmp_dir: str | None = None, progress=None):
    """``alpha * (A @ B)`` at the coordinates of the sparse ``mask`` plus ``beta`` times the mask's
    values (TensorFlow's ``sparse.sampled_addmm``, SDDMM): the output has the mask's indices,
    order and shape, and the dense product is never formed.

    ``mask`` is [..., m, n] (a path, source or SparseTensor), ``a`` and ``b`` are .npy files of
    [..., m, k] and [..., k, n], the leading (batch) dimensions equal, as TensorFlow requires.
    Values are floating point: the mask's and the matrices' types promote by NumPy's rules
    (float16 is computed in float32 and rounded back).  Each entry is one dot product of
    length k, accumulated in the result's precision in a fixed order, so results agree with a
    BLAS product to rounding.  A mask with repeated coordinates is summed first (the format's
    rule: rows sharing a coordinate mean their sum); TensorFlow instead adds alpha * (A @ B)
    once per stored row.  The mask's fill value must be 0.

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "a.npy"), np.ones((100, 8)))
    >>> np.save(os.path.join(d, "b.npy"), np.ones((8, 150)))
    >>> r = sampled_matmul("sample_data/matrix_a.parquet", os.path.join(d, "a.npy"), os.path.join(d, "b.npy"),
    ...                    os.path.join(d, "out.parquet"), beta=0.0)
    >>> r["rows"]
    600
    """
    budget = budget_of(memory)
    check_inputs([p for p in (mask, a, b) if isinstance(p, str)])
    for path, name in ((a, "A"), (b, "B")):
        if not is_dense_path(path):
            raise UsageError(f"sampled-matmul takes {name} as a dense .npy file", path=str(path))
    for v, name in ((alpha, "--alpha"), (beta, "--beta")):
        if not math.isfinite(float(v)):
            raise UsageError(f"{name} must be a finite number, not {v!r}")
    da, db = open_dense(a), open_dense(b)
    with open_input(mask) as opened, known_shape(opened) as src:
        meta = src.meta
        numeric_dtype(meta, src.path, "sampled-matmul")
        require_zero_fill(meta, src.path, "sampled-matmul")
        _check_shapes(tuple(meta.shape), da.shape, db.shape)
        dtype = _result_dtype(meta.dtype, da.dtype, db.dtype, src.path)
        compute = np.dtype(np.float32) if dtype.itemsize <= 4 else np.dtype(np.float64)
        k = da.shape[-1]
        # Both operands in the kernel's type with rows contiguous: a C-ordered A of that type is
        # read in place; B is transposed once (copies in memory within a quarter of the budget,
        # else in scratch files under tmp_dir).
        with ExitStack() as stack:
            scratch = Scratch(stack, budget.total, tmp_dir)
            a2 = prepare_dense(da, False, False, compute, scratch).reshape(-1, k)
            bt2 = prepare_dense(db, True, False, compute, scratch).reshape(-1, k)
            op = SampledMatmul(a2, bt2, dtype, float(alpha), float(beta), second_thread(stack, budget, "sddmm"),
                               budget.parallel_rows or PARALLEL_MIN)
            sink = run(op, src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "value_type": final.value_type, "k": int(k)}
