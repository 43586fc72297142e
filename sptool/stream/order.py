"""A source's rows in a requested order: streamed straight through when the metadata already
promises that order, otherwise through the external sort (stream/sort.py); bounds are checked
either way, since an index outside the shape would pack into a wrong key."""

from __future__ import annotations

import numpy as np

from .._memory import Budget
from ..errors import DataError
from ..io import batch_keys
from .bounds import checked
from .sort import key_preparer, prepared_batches, sorted_stream


def already_sorted(meta, order) -> bool:
    return tuple(meta.sort_order[: len(order)]) == tuple(order) and len(meta.sort_order) >= len(order)


def sorted_batches(src, order, *, budget: Budget, tmp_dir=None, progress=None, keys: bool = True):
    """Yield (batch, sort keys) of a source in ``order``: passed through when the source is
    already sorted that way, otherwise through the external sort.  Bounds are checked either
    way (an index outside the shape would pack into a wrong key).  With ``keys=False`` a
    passed-through batch comes with None instead of keys it would not need."""
    meta = src.meta
    if already_sorted(meta, order):
        yield from prepared_batches(src, order, keys=keys, budget=budget, progress=progress)
        return
    yield from sorted_stream(src.iter_prepared(key_preparer(meta, order), budget=budget), meta, order, keyed=True,
                             path=src.path, budget=budget, tmp_dir=tmp_dir, progress=progress)




def checked_batches(src, *, budget: Budget, progress=None, path=None):
    """(keys (K, n), batch) of a source in stored order; an index outside the shape is an
    error naming the row (the kernels index accumulators with them)."""
    for batch, cols in checked(src.iter_batches(budget=budget), src.meta, path=path, progress=progress):
        yield np.stack(cols), batch


def projected_batches(src, dims, *, budget: Budget, prepare=None):
    """Batches holding only the index columns ``dims`` and the values, read from a Parquet
    source whose footer statistics prove every other index column within its bounds (so it
    need not be decoded at all); None when that does not hold (a stream, a foreign column
    type, missing statistics), and the caller reads whole batches instead.  With ``prepare``,
    (batch, prepare(batch)) pairs, prepared on the decoding threads."""
    import pyarrow as pa

    meta = src.meta
    K = meta.sparse_ndim
    parts = getattr(src, "parts", None)
    if not parts or getattr(src, "kind", None) not in ("file", "dir"):
        return None
    skipped = [d for d in range(K) if d not in dims]
    names = [f"indices_{d}" for d in dims] + ["values"]
    for part in parts:
        schema = part.file.schema_arrow
        if any(schema.field(f"indices_{d}").type != pa.int64() for d in dims):
            return None
        if schema.field("values").type != meta.values_type():
            return None
        md = part.file.metadata
        for rg in range(md.num_row_groups):
            group = md.row_group(rg)
            for d in skipped:
                st = group.column(d).statistics
                if st is None or not st.has_min_max or st.min < 0 or st.max >= meta.shape[d]:
                    return None
    rows = src.batch_rows(budget)

    def read():
        for part in parts:
            for item in src.part_batches(part, rows, columns=names, prepare=prepare):
                batch = item if prepare is None else item[0]
                if any(c.null_count for c in batch.columns):
                    raise DataError("a column holds nulls", path=part.path)
                yield item

    return read()


def ordered_batches(src, order, *, budget: Budget, tmp_dir=None, progress=None, path=None):
    """(keys (K, n), batch) in ``order``: streamed when the source is sorted so, else sorted
    externally (bounds-checked either way: sorted_batches checks the rows it sorts)."""
    from .order import sorted_batches

    K = src.meta.sparse_ndim
    for batch, _ in sorted_batches(src, order, budget=budget, tmp_dir=tmp_dir, progress=progress, keys=False):
        if batch.num_rows:
            yield batch_keys(batch, K), batch


