"""fill_empty_rows: give every empty row (dimension 0) one entry (TensorFlow's sparse fill_empty_rows)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._memory import Budget, budget_of, format_size
from .._vocabulary import renamed_keywords
from ..errors import DataError, ResourceError, UsageError
from ..format import scalar_of_value_type
from ..io import (
    AtomicTarget,
    arrow_of,
    batch_keys,
    check_dense_rows,
    check_dense_size,
    known_shape,
    open_input,
    schema_of,
    values_array,
)
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor


class _Filler:
    """Builds output batches: sorted data rows with fill rows inserted for the rows they skip."""

    def __init__(self, meta, value, schema, chunk: int, indicator):
        self.meta = meta
        self.K = meta.sparse_ndim
        self.value = value
        self.schema = schema
        self.chunk = max(int(chunk), 1)
        self.indicator = indicator
        self.next_row = 0  # every row below this one has been seen (or filled)
        self.filled = 0
        self._fill_values: pa.Array | None = None

    def fill_values(self, m: int) -> pa.Array:
        if self._fill_values is None or len(self._fill_values) < m:
            size = max(m, min(self.chunk, 1024))
            dense = tuple(self.meta.dense_shape)
            if self.meta.value_type in ("string", "binary"):
                arr = np.empty((size,) + dense, dtype=object)
                arr.fill(self.value)
            else:
                arr = np.full((size,) + dense, self.value, dtype=self.meta.dtype)
            self._fill_values = values_array(arr, self.meta)
        return self._fill_values.slice(0, m)

    def fills(self, lo: int, hi: int):
        """Batches of fill rows for the empty rows lo..hi-1."""
        for start in range(lo, hi, self.chunk):
            stop = min(hi, start + self.chunk)
            m = stop - start
            keys = np.zeros((self.K, m), dtype=np.int64)
            keys[0] = np.arange(start, stop, dtype=np.int64)
            if self.indicator is not None:
                self.indicator[start:stop] = True
            self.filled += m
            yield self._batch(keys, self.fill_values(m)), keys

    def _batch(self, keys: np.ndarray, values) -> pa.RecordBatch:
        cols = [arrow_of(keys[k]) for k in range(self.K)] + [values]
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)

    def feed(self, batch: pa.RecordBatch):
        """Output batches for one sorted input batch: its rows plus the fills before each new row."""
        n = batch.num_rows
        if n == 0:
            return
        keys = batch_keys(batch, self.K)
        k0 = keys[0]
        starts = np.flatnonzero(np.r_[True, k0[1:] != k0[:-1]])  # first row of each distinct row number
        rows = k0[starts]
        prev = np.r_[self.next_row - 1, rows[:-1]]
        gaps = np.maximum(rows - prev - 1, 0)  # empty rows just before each distinct row
        ends = np.r_[starts[1:], n]
        vals = batch.column(self.K)
        g, G = 0, len(rows)
        while g < G:
            if gaps[g] > self.chunk:
                # A long run of empty rows: fill it on its own, in chunks.
                yield from self.fills(int(rows[g] - gaps[g]), int(rows[g]))
                gaps[g] = 0
            # Groups g..h-1 need at most one chunk of fills between them.
            cum = np.cumsum(gaps[g:])
            h = g + max(int(np.searchsorted(cum, self.chunk, side="right")), 1)
            yield self._merge(keys, vals, starts[g], ends[h - 1], rows[g:h], gaps[g:h], starts[g:h])
            g = h
        self.next_row = int(rows[-1]) + 1

    def _merge(self, keys, vals, lo: int, hi: int, rows, gaps, starts):
        """Data rows lo..hi-1 with gaps[j] fill rows inserted before the group starting at starts[j]."""
        F = int(gaps.sum())
        if F == 0:
            part = keys[:, lo:hi]
            return self._batch(part, vals.slice(lo, hi - lo)), part
        m = hi - lo
        sizes = np.diff(np.r_[starts - lo, m])
        shift = np.cumsum(gaps)  # fills placed before each group, inclusive
        data_pos = np.arange(m, dtype=np.int64) + np.repeat(shift, sizes)
        # Fill j of group g sits just before the group's first data row: row number rows[g] - gaps[g] + j.
        group_of_fill = np.repeat(np.arange(len(rows)), gaps)
        j = np.arange(F, dtype=np.int64) - np.repeat(shift - gaps, gaps)
        fill_rows = rows[group_of_fill] - gaps[group_of_fill] + j
        fill_pos = (starts - lo + shift - gaps)[group_of_fill] + j
        out = np.zeros((self.K, m + F), dtype=np.int64)
        out[:, data_pos] = keys[:, lo:hi]
        out[0, fill_pos] = fill_rows
        take = np.empty(m + F, dtype=np.int64)
        take[data_pos] = np.arange(m, dtype=np.int64)
        take[fill_pos] = m + np.arange(F, dtype=np.int64)
        merged = pa.concat_arrays([vals.slice(lo, m), self.fill_values(F)]).take(arrow_of(take))
        if self.indicator is not None:
            self.indicator[fill_rows] = True
        self.filled += F
        return self._batch(out, merged), out

    def finish(self, rows: int):
        """Fills for the empty rows after the last entry."""
        if self.next_row < rows:
            yield from self.fills(self.next_row, rows)
            self.next_row = rows


@renamed_keywords("default_value")
def fill_empty_rows(path: str, output: str | None = None, *, default_value, indicator: str | None = None,
                    memory=None, tmp_dir: str | None = None, progress=None) -> dict:
    """Insert ``default_value`` at [row, 0, ..., 0] for every row (dimension 0) without entries
    (TensorFlow's sparse fill_empty_rows; for a hybrid tensor the row gets a block of it).

    ``default_value`` is converted to the tensor's value type (a string from the command line is parsed).
    ``indicator``: a .npy path that receives a bool array of length shape[0], True where the row
    was empty.  The output is row-major sorted (TensorFlow only groups by row); rows sharing a
    coordinate are kept; it is unique when the input is.

    Memory: an external merge sort within ``memory`` (an input already row-major sorted streams
    through); fills are produced in batch-sized chunks; the indicator is written through a
    memory map.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "f.parquet")
    >>> fill_empty_rows("sample_data/rowsparse.parquet", out, default_value=0)["empty_rows"]
    63
    """
    budget = budget_of(memory)
    if indicator is not None and not str(indicator).endswith(".npy"):
        raise UsageError("the indicator is a .npy file; name it *.npy", path=str(indicator))
    with open_input(path) as opened, known_shape(opened, tmp_dir) as src:
        rows = src.meta.shape[0]
        _check_dense_rows(src.meta, output, budget)
        target = None
        if indicator is not None:
            check_dense_size((rows,), np.dtype(bool), str(indicator))
            target = AtomicTarget(str(indicator), is_dir=False)
        try:
            ind = None if target is None else np.lib.format.open_memmap(target.tmp, mode="w+", dtype=bool,
                                                                       shape=(rows,))
            op = FillEmptyRows(default_value, ind, src.batch_rows(budget), src.path)
            sink = run(op, src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
            if ind is not None:
                ind.flush()
                del ind
                target.commit()
        except BaseException:
            if target is not None:
                target.abort()
            raise
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
        filled = op.filler.filled
        return {"rows_in": src.meta.nnz if src.meta.nnz is not None else final.nnz - filled, "rows_out": final.nnz,
                "empty_rows": filled}


def _check_dense_rows(meta, output, budget: Budget) -> None:
    """The output holds an entry for every row of dimension 0 (dense along it): refused before
    any work when those entries alone, before compression, outgrow --memory (a result kept in
    memory) or the free space of a local output's disk."""
    rows = meta.shape[0]
    value_bytes = 8 if meta.value_type in ("string", "binary") else meta.dtype.itemsize
    row_bytes = 8 * meta.sparse_ndim + value_bytes * meta.block_size  # an entry
    if output is None and rows * row_bytes > budget.total:
        raise ResourceError(f"the output, dense along dimension 0 (an entry for each of its {rows} rows), needs "
                            f"{format_size(rows * row_bytes)}, over --memory {format_size(budget.total)}; give an "
                            "output path")
    check_dense_rows(rows, row_bytes, output, "the output")


class FillEmptyRows(StreamOp):
    """Rows in row-major order, with an entry [r, 0, ...] = value added for every row r that has
    none (and the indicator flag set for it)."""

    def __init__(self, value, indicator, chunk_rows: int, path: str):
        self.value, self.indicator, self.chunk_rows, self.path = value, indicator, chunk_rows, path

    def plan(self, meta) -> Plan:
        K = meta.sparse_ndim
        self.rows = meta.shape[0]
        fill = scalar_of_value_type(self.value, meta.value_type, "--default-value")
        if self.rows == 0 and meta.nnz:
            raise DataError(f"dense_shape[0] = 0 but indices.shape[0] = {meta.nnz}", path=self.path)
        zero = next((k for k in range(1, K) if meta.shape[k] == 0), None)
        if self.rows and zero is not None:
            raise DataError(f"cannot fill empty rows: dimension {zero} has size 0, so [row, 0, ...] is not an "
                            f"index of shape {list(meta.shape)}", path=self.path)
        out_meta = meta.with_(sort_order=tuple(range(K)), nnz=None, iso=False, created_by=None)
        self.filler = _Filler(out_meta, fill, schema_of(out_meta), self.chunk_rows, self.indicator)
        return Plan(out_meta, order=tuple(range(K)), unique_claim=True if meta.unique else None)

    def map(self, batch, keys):
        for out, _ in self.filler.feed(batch):
            yield out

    def finish(self):
        for out, _ in self.filler.finish(self.rows):
            yield out
