"""External merge sort of tensor rows in bounded memory.

Rows are sorted by a key built from the index columns in the requested dimension order:
packed into one uint64 when the dimensions' bit widths add up to 64 or less (sorted by the
compiled radix sort), otherwise the big-endian bytes of the columns (NumPy sorts and searches
those lexicographically).  Both orders are stable, so rows with equal coordinates keep their
input order.

The pieces are per-batch kernels plus a merge step: ``sorted_runs`` turns batches into
sorted runs, ``merge_runs`` merges runs; a distributed engine can run the first per part
and the second as its reduce.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from .. import _kernels
from .._memory import ROW_GROUP_ROWS
from ..format import TensorMeta

KEY = "__sptool_key"


class KeyCodec:
    """Builds sort keys for rows of (K, n) index arrays under a dimension order."""

    def __init__(self, shape, order):
        self.order = np.asarray(order, dtype=np.int64)
        widths = [max(int(shape[d] - 1).bit_length(), 0) if shape[d] else 0 for d in order]
        self.packed = sum(widths) <= 64
        shifts, acc = [], 0
        for w in reversed(widths):
            shifts.append(acc)
            acc += w
        self.shifts = np.asarray(shifts[::-1], dtype=np.int64)

    def encode(self, keys: np.ndarray) -> np.ndarray:
        n = keys.shape[1]
        if self.packed:
            out = np.empty(n, dtype=np.uint64)
            _kernels.pack_keys(keys, self.order, self.shifts, out)
            return out
        # Big-endian bytes compare like the numbers (indices are non-negative).
        cols = np.ascontiguousarray(keys[self.order].T.astype(">u8"))
        return cols.view(f"V{8 * len(self.order)}").reshape(n)

    def argsort(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(permutation, sorted keys), stable."""
        if key.dtype == np.uint64:
            perm = np.empty(len(key), dtype=np.int64)
            out = np.empty(len(key), dtype=np.uint64)
            _kernels.radix_argsort(key, perm, out)
            return perm, out
        perm = np.argsort(key, kind="stable")
        return perm, key[perm]

    def key_type(self) -> pa.DataType:
        return pa.uint64() if self.packed else pa.binary(8 * len(self.order))

    def to_arrow(self, key: np.ndarray) -> pa.Array:
        if self.packed:
            return pa.array(key, type=pa.uint64())
        return pa.FixedSizeBinaryArray.from_buffers(self.key_type(), len(key), [None, pa.py_buffer(key.tobytes())])

    def from_arrow(self, arr) -> np.ndarray:
        if self.packed:
            return arr.to_numpy(zero_copy_only=False)
        width = 8 * len(self.order)
        buf = arr.buffers()[1]
        raw = np.frombuffer(buf, dtype=np.uint8, count=(arr.offset + len(arr)) * width)
        return raw[arr.offset * width:].view(f"V{width}").reshape(len(arr))


def sort_table(table: pa.Table, codec: KeyCodec, K: int) -> tuple[pa.Table, np.ndarray]:
    """The table's rows in key order, and their sorted keys."""
    keys = np.empty((K, table.num_rows), dtype=np.int64)
    for k in range(K):
        keys[k] = table.column(k).to_numpy()
    perm, skeys = codec.argsort(codec.encode(keys))
    return table.take(pa.array(perm)), skeys


def chunk_rows(budget: int, row_bytes: int, ways: int = 1) -> int:
    """Rows per in-memory run (ways=1) or per run cursor in a ways-way merge."""
    per_row = (row_bytes + 8) * 6  # rows, key, permutation, taken copy, writer buffers
    return max(1024, min(budget // (per_row * max(ways, 1)), 1 << 24))


class RunStore:
    """Sorted runs spilled to Arrow IPC files in a temporary directory, removed on close."""

    def __init__(self, tmp_dir: str | None):
        self._dir = tempfile.TemporaryDirectory(prefix="sptool-sort-", dir=tmp_dir)
        self.paths: list[str] = []
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="sptool-spill")
        self._pending = []

    def spill(self, table: pa.Table, key: pa.Array):
        path = os.path.join(self._dir.name, f"run-{len(self.paths):06d}.arrow")
        self.paths.append(path)
        table = table.append_column(KEY, key)
        # Writing overlaps the next run's sort; at most one spill is in flight.
        self.wait()
        self._pending.append(self._pool.submit(_write_ipc, path, table))

    def wait(self):
        for f in self._pending:
            f.result()
        self._pending = []

    def close(self):
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)
            self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _write_ipc(path: str, table: pa.Table):
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=ROW_GROUP_ROWS)


def sorted_stream(batches: Iterable[pa.RecordBatch], meta: TensorMeta, order, *, budget: int,
                  tmp_dir: str | None, progress=None) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """Yield (batch, sorted keys) in key order for all rows of ``batches``.

    Memory: one run in memory at a time, then a merge reading every run in slices.
    """
    from ..io.source import row_bytes

    K = meta.sparse_ndim
    codec = KeyCodec(meta.shape, order)
    rb = row_bytes(meta) + (8 if codec.packed else 8 * K)
    run_rows = chunk_rows(budget, rb)
    with RunStore(tmp_dir) as store:
        pending: list[pa.RecordBatch] = []
        pending_rows = 0
        last_table = None
        for batch in batches:
            if progress:
                progress.advance(batch.num_rows)
            while batch.num_rows:
                take = min(batch.num_rows, run_rows - pending_rows)
                pending.append(batch.slice(0, take))
                pending_rows += take
                batch = batch.slice(take)
                if pending_rows >= run_rows:
                    if last_table is not None:
                        store.spill(*last_table)
                    table, skeys = sort_table(pa.Table.from_batches(pending), codec, K)
                    last_table = (table, codec.to_arrow(skeys))
                    pending, pending_rows = [], 0
        if pending_rows:
            if last_table is not None:
                store.spill(*last_table)
            table, skeys = sort_table(pa.Table.from_batches(pending), codec, K)
            last_table = (table, codec.to_arrow(skeys))
        if last_table is None:
            return
        if not store.paths:
            # Everything fit in one run: no spill, no merge.
            table, key = last_table
            yield from _slices(table, codec.from_arrow(key))
            return
        store.spill(*last_table)
        store.wait()
        yield from merge_runs(store.paths, codec, budget=budget, row_bytes=rb)


def _slices(table: pa.Table, keys: np.ndarray, rows: int = ROW_GROUP_ROWS):
    for start in range(0, table.num_rows, rows):
        part = table.slice(start, rows).combine_chunks()
        for b in part.to_batches():
            yield b, keys[start:start + b.num_rows]


class _Cursor:
    """Reads a key-sorted stream of (batch, keys) in slices of about ``rows`` rows."""

    def __init__(self, pairs: Iterator[tuple[pa.RecordBatch, np.ndarray]], rows: int):
        self.pairs = iter(pairs)
        self.rows = rows
        self.table = None
        self.keys = None
        self.pos = 0
        self._load()

    def _load(self):
        batches, keys, n = [], [], 0
        for batch, k in self.pairs:
            if batch.num_rows:
                batches.append(batch)
                keys.append(k)
                n += batch.num_rows
            if n >= self.rows:
                break
        if not batches:
            self.table = None
            return
        self.table = pa.Table.from_batches(batches)
        self.keys = np.concatenate(keys) if len(keys) > 1 else keys[0]
        self.pos = 0

    @property
    def done(self) -> bool:
        return self.table is None

    def take_upto(self, bound):
        end = int(np.searchsorted(self.keys, bound, side="right"))
        part = self.table.slice(self.pos, end - self.pos) if end > self.pos else None
        keys = self.keys[self.pos:end]
        self.pos = end
        if self.pos >= len(self.keys):
            self._load()
        return part, keys


def read_run(path: str, codec: KeyCodec):
    """The (batch, keys) pairs of a spilled run, read through a memory map."""
    reader = ipc.open_file(pa.memory_map(path))
    for i in range(reader.num_record_batches):
        b = reader.get_batch(i)
        yield b.drop_columns([KEY]), codec.from_arrow(b.column(KEY))


def merge_runs(paths: list[str], codec: KeyCodec, *, budget: int, row_bytes: int):
    rows = chunk_rows(budget, row_bytes, ways=len(paths) + 1)
    return merge_sorted([read_run(p, codec) for p in paths], codec, rows=rows)


def merge_sorted(streams: list, codec: KeyCodec, *, rows: int):
    """Merge key-sorted streams of (batch, keys) into one, stably (ties keep stream order).

    A k-way merge by bounds: each round takes, from every stream, the rows up to the smallest
    'last key in memory' and sorts that (already nearly ordered) union, so the work is done by
    the vectorised sort rather than a per-row heap.  Batches must share one schema.
    """
    cursors = [_Cursor(s, rows) for s in streams]
    while True:
        live = [c for c in cursors if not c.done]
        if not live:
            return
        # The smallest last-key in memory (an argsort, as void keys have no < operator).
        lasts = np.concatenate([c.keys[-1:] for c in live])
        bound = lasts[np.argsort(lasts, kind="stable")[0]]
        parts, keys = [], []
        for c in live:
            part, k = c.take_upto(bound)
            if part is not None and part.num_rows:
                parts.append(part)
                keys.append(k)
        if not parts:
            continue
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        allkeys = np.concatenate(keys) if len(keys) > 1 else keys[0]
        if len(parts) > 1:
            perm, allkeys = codec.argsort(allkeys)
            table = table.take(pa.array(perm))
        yield from _slices(table, allkeys)
