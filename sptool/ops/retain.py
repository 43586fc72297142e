"""retain: keep the rows a mask or a condition selects (TensorFlow's sparse retain)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from .._memory import budget_of
from ..errors import UsageError
from ..format import TensorMeta
from ..io import batch_keys, batch_values, open_input, open_npy, schema_of
from ..stream.engine import Plan, StreamOp, run
from ..stream.where import compile_where
from ..tensor import SparseTensor


def load_mask(mask, nnz: int | None):
    """A 1-D bool array (a memory map for a .npy path); wrong dtype or length is a UsageError."""
    name = "--mask"
    if isinstance(mask, (str, os.PathLike)):
        name = f"--mask {os.fspath(mask)}"
        arr = open_npy(os.fspath(mask))
    else:
        arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise UsageError(f"{name} must be a bool array, not {arr.dtype}")
    if arr.ndim != 1:
        raise UsageError(f"{name} must be 1-D (one flag per row), not of shape {list(arr.shape)}")
    if nnz is not None and len(arr) != nnz:
        raise UsageError(f"{name} has {len(arr)} flags but the tensor has {nnz} rows (nnz)")
    return arr


def retain(path: str, output: str | None = None, *, mask=None, where: str | None = None, memory=None,
           progress=None) -> dict:
    """Keep the rows selected by ``mask`` or ``where`` (TensorFlow's sparse retain), in their order.

    ``mask``: a bool array (or a .npy path, read through a memory map) with one flag per row, in
    file order.  ``where``: a condition over ``values`` and ``indices_0``... evaluated per row, e.g.
    ``"values > 0 and indices_1 % 2 == 0"``; the language (comparisons, and/or/not, + - * / %,
    abs, isnan, any/all for hybrid blocks, numbers, nan, inf, quoted strings) is in
    sptool/stream/where.py and is parsed, never evaluated as Python.

    The output keeps the input's shape, sort order and uniqueness (it is a subsequence).

    Memory: one pass, batch by batch; the mask is memory-mapped and read slice by slice.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "k.parquet")
    >>> retain("sample_data/tensor3d.parquet", out, where="indices_0 < 4")["rows_out"] < 1000
    True
    """
    if (mask is None) == (where is None):
        raise UsageError("give exactly one of --mask and --where")
    with open_input(path) as src:
        op = Retain(mask, where)
        sink = run(op, src, output, budget=budget_of(memory), progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows_in": op.rows, "rows_out": final.nnz, "shape": list(final.shape)}


class Retain(StreamOp):
    """The rows a mask or a --where condition keeps, in their order."""

    def __init__(self, mask=None, where: str | None = None):
        self.mask, self.where, self.rows = mask, where, 0

    def plan(self, meta: TensorMeta) -> Plan:
        self.meta, self.K = meta, meta.sparse_ndim
        self.cond = None
        if self.where is not None:
            self.cond = compile_where(self.where, sparse_ndim=self.K, value_type=meta.value_type,
                                      dense_ndim=meta.ndim - self.K)
        else:
            self.mask = load_mask(self.mask, meta.nnz)
        out_meta = meta.with_(nnz=None, created_by=None)
        self.schema = schema_of(out_meta)
        # Bounds checked on the way in: an error names the input and its row, as every per-row op's does.
        return Plan(out_meta, unique_claim=True if meta.unique else None, bounds_checked=True)

    def map(self, batch, keys):
        n = batch.num_rows
        if self.cond is not None:
            keys = batch_keys(batch, self.K) if self.cond.needs_keys else None
            vals = batch_values(batch, self.meta) if self.cond.needs_values else None
            keep = self.cond(keys, vals, n)
        else:
            if self.rows + n > len(self.mask):
                raise UsageError(f"--mask has {len(self.mask)} flags but the tensor has more rows")
            keep = np.asarray(self.mask[self.rows:self.rows + n])
        self.rows += n
        if keep.any():
            out = pa.RecordBatch.from_arrays(batch.columns[: self.K + 1], schema=self.schema)
            yield out if keep.all() else out.filter(pa.array(keep))

    def finish(self):
        if self.cond is None and self.rows != len(self.mask):
            raise UsageError(f"--mask has {len(self.mask)} flags but the tensor has {self.rows} rows (nnz)")
        return ()
