"""sptool's own format as a converter's input and output: a Parquet file, a directory of
parts or an Arrow IPC stream (stdin and stdout), read and written through sptool.io."""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from ..format import VARIABLE_WIDTH
from ..io import TensorSink, batch_keys, batch_values, open_sink, open_source
from ..stream.bounds import checked
from ..stream.order import claim_check, sorted_batches
from ..stream.runs import whole_runs
from .common import Options, Reader, cast_or_fail, coerce_fill


class SptoolReader(Reader):
    def __init__(self, path: str, opts: Options):
        self.src = open_source(path)
        self.name = self.src.path
        self.budget = opts.budget
        m = self.src.meta
        vt = opts.value_type or m.value_type
        if vt != m.value_type and (vt in VARIABLE_WIDTH or m.value_type in VARIABLE_WIDTH):
            raise UsageError(f"{m.value_type} values cannot be converted to {vt}", path=self.name)
        if opts.fill_value is not None:
            fill = coerce_fill(opts.fill_value, vt)
        elif vt != m.value_type:
            fill = coerce_fill(m.fill_value, vt)
        else:
            fill = m.fill_value
        if opts.shape is not None and (len(opts.shape) != m.ndim or any(
                s is not None and s != o for s, o in zip(m.shape, opts.shape))):
            raise UsageError(f"--shape {list(opts.shape)} contradicts the tensor's shape {list(m.shape)}",
                             path=self.name)
        self.cast = vt != m.value_type
        self.meta = m.with_(value_type=vt, fill_value=fill, unique=False)
        self.unique_claim = True if m.unique else None
        self.complete = m.nnz is not None and all(s is not None for s in m.shape)

    def batches(self):
        dtype = self.meta.dtype
        meta = self.src.meta
        # Bounds checked here, not only by the sink: a text writer would print any index it got;
        # and the input's claims, which the output takes on.
        for batch, cols in checked(self.src.iter_batches(budget=self.budget), meta, path=self.name,
                                   claim=claim_check(self.src)):
            keys, values = np.stack(cols), batch_values(batch, meta)
            if self.cast:
                values = cast_or_fail(values, dtype, lambda r, o=self.rows_in: f"row {o + r}", self.name)
            self.rows_in += keys.shape[1]
            yield keys, values
        # A stream's unknown extents and nnz are resolved by its trailer.
        self.meta = self.meta.with_(shape=self.src.meta.shape, nnz=self.src.meta.nnz)

    def close(self):
        self.src.close()


class RowMajorReader(SptoolReader):
    """An sptool input in row-major order (through the external sort when its metadata does not
    promise that), each row whole within one batch, for the writers that write row by row
    (``needs_row_major``: svmlight, JSON lines, TFRecord).  Rows sharing a coordinate are summed,
    unless ``keep_duplicates`` (a TFRecord Example keeps a repeated id, as TensorFlow does)."""

    def __init__(self, path: str, opts: Options, *, keep_duplicates: bool = False):
        super().__init__(path, opts)
        self.keep_duplicates = keep_duplicates

    def batches(self):
        yield from whole_runs(self._sorted(), [0])

    def _sorted(self):
        meta = self.src.meta
        order = tuple(range(meta.sparse_ndim))
        # Strings are never summed (a string tensor with repeats is invalid, and its sink says so).
        summed = "keep" if self.keep_duplicates or meta.unique or meta.value_type in ("string", "binary") else "sum"
        for batch, _ in sorted_batches(self.src, order, budget=self.budget, duplicates=summed):
            keys, values = batch_keys(batch, meta.sparse_ndim), batch_values(batch, meta)
            if self.cast:
                values = cast_or_fail(values, self.meta.dtype, lambda r, o=self.rows_in: f"row {o + r}", self.name)
            self.rows_in += keys.shape[1]
            yield keys, values


class SptoolWriter:
    """The one writer that uses the reader's ``unique_claim``: the sink verifies it (or detects
    uniqueness when it is None, and the order too when the reader claims none).  ``opts`` is
    unused: sptool output takes no text options."""

    def __init__(self, dst: str, meta, opts: Options | None = None, unique_claim=None):
        self.sink: TensorSink = open_sink(dst, meta.with_(nnz=None, unique=unique_claim is True),
                                          unique_claim=unique_claim, budget=opts.budget if opts else None,
                                          detect_order=unique_claim is None and not meta.sort_order)

    def write(self, keys, values):
        self.sink.write(keys, values)

    def resolve_shape(self, shape):
        self.sink.resolve_shape(shape)

    def close(self):
        self.final = self.sink.close()
        self.shape = self.final.shape

    def abort(self):
        self.sink.abort()
