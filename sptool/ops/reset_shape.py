"""reset_shape: a new shape for the same rows (TensorFlow's sparse reset_shape)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from .. import _kernels
from .._memory import budget_of
from ..errors import DataError, UsageError
from ..format import INT64_MAX, index_column
from ..io import ParquetSource, batch_keys, open_sink, open_source


def check_new_shape(new_shape, meta) -> tuple:
    """The new shape as ints: same rank, non-negative, dense dimensions unchanged."""
    new_shape = tuple(int(s) for s in new_shape)
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
    if math.prod(new_shape) > INT64_MAX:
        raise UsageError(f"the new shape {list(new_shape)} has more than 2^63-1 elements")
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


def reset_shape(path: str, output: str | None, *, shape=None, memory=None, progress=None) -> dict:
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
    budget = budget_of(memory)
    with open_source(path) as src:
        meta = src.meta
        K = meta.sparse_ndim
        if shape is None:
            new_shape = (None,) * K + tuple(meta.dense_shape)
        else:
            new_shape = check_new_shape(shape, meta)
            for k, largest in enumerate(footer_maxima(src)):
                if largest is not None and largest >= new_shape[k]:
                    raise _too_small(k, new_shape[k], largest, "a row group (by its statistics)")
        out_meta = meta.with_(shape=new_shape, nnz=None, created_by=None)
        if progress:
            progress.set_total(meta.nnz)
        bounds = np.asarray([INT64_MAX if s is None else s for s in new_shape[:K]], dtype=np.int64)
        rows = 0
        with open_sink(output, out_meta, unique_claim=True if meta.unique else None, budget=budget) as sink:
            for batch in src.iter_batches(budget=budget):
                n = batch.num_rows
                keys = batch_keys(batch, K)
                row, dim = _kernels.first_out_of_bounds(keys, bounds)
                if row >= 0:
                    v = int(keys[dim, row])
                    if v < 0:
                        raise DataError(f"indices[{rows + row}] has {index_column(dim)} = {v}, a negative index",
                                        path=path)
                    raise _too_small(dim, new_shape[dim], v, f"row {rows + row}")
                sink.write_batch(pa.RecordBatch.from_arrays(batch.columns[: K + 1], schema=sink.schema))
                rows += n
                if progress:
                    progress.advance(n)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "old_shape": list(src.meta.shape)}
