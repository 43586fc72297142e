"""expand_dims: insert a dimension of size 1 (TensorFlow's sparse expand_dims)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._memory import budget_of
from ..errors import UsageError
from ..io import arrow_of, open_sink, open_source


def normalize_axis(axis: int, ndim: int) -> int:
    """TensorFlow's rule: axis in [-ndim-1, ndim]; a negative axis counts from the end of the result."""
    axis = int(axis)
    if not -ndim - 1 <= axis <= ndim:
        raise UsageError(f"axis {axis} is out of range for a tensor of {ndim} dimensions "
                         f"(valid: {-ndim - 1}..{ndim})")
    return axis + ndim + 1 if axis < 0 else axis


def insert_in_order(sort_order: tuple, a: int) -> tuple:
    """The sort order after inserting a constant dimension at position a.

    Old dimensions at or after a move up by one.  A constant column can sit anywhere in a sort
    key without changing which rows are in order, so it goes where the order stays natural:
    an ascending order (row-major) stays ascending, a descending one (column-major) stays
    descending, and any other order gets it appended.
    """
    if not sort_order:
        return ()
    moved = [d + 1 if d >= a else d for d in sort_order]
    if moved == sorted(moved):
        return tuple(sorted(moved + [a]))
    if moved == sorted(moved, reverse=True):
        return tuple(sorted(moved + [a], reverse=True))
    return tuple(moved + [a])


def expand_dims(path: str, output: str | None, *, axis: int = -1, memory=None, progress=None) -> dict:
    """Insert a dimension of size 1 at ``axis`` (TensorFlow's sparse expand_dims: default -1, the
    end; valid range [-ndim-1, ndim]).  Every row gets index 0 in the new dimension.

    For a hybrid tensor an axis inside the dense dimensions inserts into the dense block
    (the values are unchanged: only their shape gains a 1); otherwise the new dimension is a
    sparse one.  The sort order and uniqueness carry over (canonical stays canonical).

    Memory: one pass, batch by batch.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "e.parquet")
    >>> expand_dims("sample_data/matrix_a.parquet", out, axis=0)["shape"]
    [1, 200, 150]
    """
    budget = budget_of(memory)
    with open_source(path) as src:
        meta = src.meta
        K = meta.sparse_ndim
        a = normalize_axis(axis, meta.ndim)
        sparse = a <= K
        shape = meta.shape[:a] + (1,) + meta.shape[a:]
        names = meta.dimension_names
        if names is not None:
            names = tuple(names[:a]) + (None,) + tuple(names[a:])
        out_meta = meta.with_(
            shape=shape, sparse_ndim=K + 1 if sparse else K, nnz=None, dimension_names=names, created_by=None,
            sort_order=insert_in_order(meta.sort_order, a) if sparse else meta.sort_order,
        )
        if progress:
            progress.set_total(meta.nnz)
        zeros = arrow_of(np.zeros(0, dtype=np.int64))
        with open_sink(output, out_meta, unique_claim=True if meta.unique else None, budget=budget) as sink:
            for batch in src.iter_batches(budget=budget):
                n = batch.num_rows
                cols = list(batch.columns[: K + 1])
                if sparse:
                    if len(zeros) < n:
                        zeros = arrow_of(np.zeros(n, dtype=np.int64))
                    cols.insert(a, zeros.slice(0, n))
                sink.write_batch(pa.RecordBatch.from_arrays(cols, schema=sink.schema))
                if progress:
                    progress.advance(n)
            if any(s is None for s in out_meta.shape):
                # A stream whose header left extents open: its trailer has told the source.
                sink.resolve_shape(src.meta.shape[:a] + (1,) + src.meta.shape[a:])
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "sparse_ndim": final.sparse_ndim,
            "sort_order": list(final.sort_order)}
