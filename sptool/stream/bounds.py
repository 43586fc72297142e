"""The bounds check every op makes before indices become sort keys, cells or offsets."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from .. import _kernels
from .._messages import out_of_bounds
from ..errors import DataError
from ..format import INT64_MAX, TensorMeta
from ..io import batch_columns


def first_bad_row(batch: pa.RecordBatch, meta: TensorMeta) -> tuple[int, list]:
    """(the first row with an index outside the shape, or -1; the index columns, the batch's
    own buffers).  An extent a stream leaves open until its trailer (None) bounds only below."""
    K = meta.sparse_ndim
    cols = batch_columns(batch, K)
    shape = [INT64_MAX if s is None else s for s in meta.shape[:K]]
    row, _ = _kernels.columns_out_of_bounds(cols, np.asarray(shape, dtype=np.int64))
    return row, cols


def bounds_error(seen: int, row: int, cols, meta: TensorMeta, path: str | None) -> DataError:
    return DataError(out_of_bounds(seen + row, cols, row, meta.shape[:meta.sparse_ndim]), path=path)


def checked(batches: Iterable[pa.RecordBatch], meta: TensorMeta, *, path: str | None = None,
            progress=None, start: int = 0, claim=None) -> Iterator[tuple[pa.RecordBatch, list]]:
    """(batch, index columns) for each non-empty batch; an index outside the shape is an error
    naming the row, counted over the whole stream (after ``start`` rows: the stream is a piece of
    the input ``path`` names), and so is a row breaking ``claim`` (stream.order.ClaimCheck, the
    stream's claimed order, for a caller that relies on it).  The columns are the batch's own
    buffers."""
    seen = start
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        if progress:
            progress.advance(n)
        row, cols = first_bad_row(batch, meta)
        if row >= 0:
            raise bounds_error(seen, row, cols, meta, path)
        if claim is not None:
            claim.check_rows(batch, cols)
        seen += n
        yield batch, cols


def vouched_maxes(keys: np.ndarray) -> np.ndarray:
    """The largest index of each dimension among (K, n) row-major ``keys``, for the sink's
    write() from an op whose rows are row-major, unique and within the shape by construction,
    its inputs' order, uniqueness and bounds having been checked as they were read
    (sorted_batches, ClaimCheck): the merge join's, reduce's.  The sink then need not check
    every row again (its order and bounds passes were about 6% of add's CPU on the issue shape).
    Rows are row-major: dimension 0's is the last."""
    K, n = keys.shape
    if not n:
        return np.full(K, -1, dtype=np.int64)
    out = np.empty(K, dtype=np.int64)
    out[0] = keys[0, n - 1]
    keys[1:].max(axis=1, out=out[1:])
    return out
