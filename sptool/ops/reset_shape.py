"""reset_shape: a new shape for the same rows (TensorFlow's sparse reset_shape)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import _kernels
from .._args import whole_numbers
from .._memory import budget_of
from ..errors import DataError, UsageError
from ..format import INT64_MAX, TensorMeta, index_column
from ..io import ParquetSource, batch_keys, open_input, schema_of
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor


def check_new_shape(new_shape, meta) -> tuple:
    """The new shape as ints: same rank, non-negative, dense dimensions unchanged."""
    new_shape = whole_numbers(new_shape, "--shape")
    if len(new_shape) != meta.ndim:
        raise UsageError(f"the new shape {list(new_shape)} has {len(new_shape)} dimensions but the tensor has "
                         f"{meta.ndim}: reset_shape keeps the rank")
    bad = next((k for k, s in enumerate(new_shape) if s < 0), None)
    if bad is not None:
        raise UsageError(f"dimension {bad} of the new shape is negative ({new_shape[bad]})")
    K = meta.sparse_ndim
    if meta.hybrid and new_shape[K:] != tuple(meta.dense_shape):
        raise UsageError(f"the new shape {list(new_shape)} changes the dense dimensions {list(meta.dense_shape)}: "
                         f"reset_shape changes only the {K} sparse dimension(s)")
    if any(s > INT64_MAX for s in new_shape):
        raise UsageError(f"the new shape {list(new_shape)} has an extent past 2^63-1, which no int64 index reaches")
    return new_shape


def footer_maxima(src) -> list:
    """Per sparse dimension, the largest index by the Parquet footer's min/max statistics, or None
    where some row group has none.  (Integer statistics are exact: nothing truncates them.)"""
    K = src.meta.sparse_ndim
    out: list = [-1] * K
    if not isinstance(src, ParquetSource):
        return [None] * K
    for part in src.parts:
        md = part.file.metadata
        for r in range(md.num_row_groups):
            rg = md.row_group(r)
            if rg.num_rows == 0:
                continue
            for k in range(K):
                st = rg.column(k).statistics
                if st is None or not st.has_min_max or out[k] is None:
                    out[k] = None
                else:
                    out[k] = max(out[k], int(st.max))
    return out


def _too_small(k: int, size: int, largest: int, where: str) -> DataError:
    return DataError(f"dimension {k} of the new shape is {size}, but the data needs at least {largest + 1}: "
                     f"{where} holds {index_column(k)} = {largest}")


def reset_shape(path: str, output: str | None = None, *, shape=None, memory=None, progress=None) -> dict:
    """Give the rows a new shape (TensorFlow's sparse reset_shape).

    Without ``shape``: the tight bounding box, max(index) + 1 per sparse dimension (0 for an
    empty tensor).  With ``shape``: the same rank and dense dimensions, and large enough for
    every row; a dimension too small for the data is an error naming it.  (TensorFlow also
    refuses a new shape smaller than the old one; sptool allows any shape that holds the data.)
    Rows, their order and uniqueness are unchanged.

    Memory: one pass, batch by batch; a Parquet footer's statistics reject a too-small shape
    before any row is read.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "s.parquet")
    >>> reset_shape("sample_data/unsorted.parquet", out)["shape"]
    [10, 8, 6]
    """
    with open_input(path) as src:
        old_shape = src.meta.shape
        sink = run(ResetShape(shape, src), src, output, budget=budget_of(memory), progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "old_shape": list(old_shape)}


class ResetShape(StreamOp):
    """The rows unchanged under a new shape (or one inferred from the indices: TensorFlow's
    reset_shape), every index checked against it as the rows pass."""

    def __init__(self, shape, src):
        self.shape, self.src, self.rows = shape, src, 0

    def plan(self, meta: TensorMeta) -> Plan:
        K = self.K = meta.sparse_ndim
        if self.shape is None:
            self.new = (None,) * K + tuple(meta.dense_shape)
        else:
            self.new = check_new_shape(self.shape, meta)
            for k, largest in enumerate(footer_maxima(self.src)):
                if largest is not None and largest >= self.new[k]:
                    raise _too_small(k, self.new[k], largest, "a row group (by its statistics)")
        out_meta = meta.with_(shape=self.new, nnz=None, created_by=None)
        self.schema = schema_of(out_meta)
        self.bounds = np.asarray([INT64_MAX if s is None else s for s in self.new[:K]], dtype=np.int64)
        return Plan(out_meta, unique_claim=True if meta.unique else None)

    def map(self, batch, keys):
        keys = batch_keys(batch, self.K)
        row, dim = _kernels.first_out_of_bounds(keys, self.bounds)
        if row >= 0:
            v = int(keys[dim, row])
            if v < 0:
                raise DataError(f"indices[{self.rows + row}] has {index_column(dim)} = {v}, a negative index",
                                path=self.src.path)
            raise _too_small(dim, self.new[dim], v, f"row {self.rows + row}")
        self.rows += batch.num_rows
        yield pa.RecordBatch.from_arrays(batch.columns[: self.K + 1], schema=self.schema)

    def output_shape(self, input_shape: tuple) -> None:
        return None  # inferred: the largest index + 1 in each sparse dimension
