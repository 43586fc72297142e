"""expand_dims: insert a dimension of size 1 (TensorFlow's sparse expand_dims)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._args import whole_number
from .._memory import budget_of
from ..errors import UsageError
from ..format import TensorMeta
from ..io import arrow_of, open_input, schema_of
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor


def normalize_axis(axis: int, ndim: int) -> int:
    """TensorFlow's rule: axis in [-ndim-1, ndim]; a negative axis counts from the end of the result."""
    axis = whole_number(axis, "--axis")
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


def expand_dims(path: str, output: str | None = None, *, axis: int = -1, memory=None, progress=None) -> dict:
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
    with open_input(path) as src:
        op = ExpandDims(axis)
        sink = run(op, src, output, budget=budget_of(memory), progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "sparse_ndim": final.sparse_ndim,
            "sort_order": list(final.sort_order)}


class ExpandDims(StreamOp):
    """A constant index column (0) inserted at a sparse axis, or a 1 in the dense block's shape."""

    def __init__(self, axis: int):
        self.axis = axis
        self.zeros = arrow_of(np.zeros(0, dtype=np.int64))

    def plan(self, meta: TensorMeta) -> Plan:
        K = meta.sparse_ndim
        self.a = a = normalize_axis(self.axis, meta.ndim)
        self.K, self.sparse = K, a <= K
        names = meta.dimension_names
        if names is not None:
            names = tuple(names[:a]) + (None,) + tuple(names[a:])
        out_meta = meta.with_(
            shape=self.output_shape(meta.shape), sparse_ndim=K + 1 if self.sparse else K, nnz=None,
            dimension_names=names, created_by=None,
            sort_order=insert_in_order(meta.sort_order, a) if self.sparse else meta.sort_order,
        )
        self.schema = schema_of(out_meta)
        # Row for row: the sink's errors (bounds included) name the input and its row.
        return Plan(out_meta, unique_claim=True if meta.unique else None, row_for_row=True)

    def map(self, batch, keys):
        n = batch.num_rows
        cols = list(batch.columns[: self.K + 1])
        if self.sparse:
            if len(self.zeros) < n:
                self.zeros = arrow_of(np.zeros(n, dtype=np.int64))
            cols.insert(self.a, self.zeros.slice(0, n))
        yield pa.RecordBatch.from_arrays(cols, schema=self.schema)

    def output_shape(self, input_shape: tuple) -> tuple:
        return input_shape[: self.a] + (1,) + input_shape[self.a:]
