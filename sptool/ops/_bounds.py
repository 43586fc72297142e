"""The bounds check every op makes before indices become sort keys, cells or offsets."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from .. import _kernels
from .._messages import out_of_bounds
from ..errors import DataError
from ..format import TensorMeta


def checked(batches: Iterable[pa.RecordBatch], meta: TensorMeta, *, path: str | None = None,
            progress=None) -> Iterator[tuple[pa.RecordBatch, list]]:
    """(batch, index columns) for each non-empty batch; an index outside the shape is an error
    naming the row, counted over the whole stream.  The columns are the batch's own buffers."""
    K = meta.sparse_ndim
    bounds = np.asarray(meta.shape[:K], dtype=np.int64)
    seen = 0
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        if progress:
            progress.advance(n)
        cols = [batch.column(k).to_numpy() for k in range(K)]
        row, _ = _kernels.columns_out_of_bounds(cols, bounds)
        if row >= 0:
            raise DataError(out_of_bounds(seen + row, cols, row, meta.shape[:K]), path=path)
        seen += n
        yield batch, cols
