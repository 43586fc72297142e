"""External merge sort of tensor rows in bounded memory.

Rows are sorted by a key built from the index columns in the requested dimension order:
packed into one uint64 when the dimensions' bit widths add up to 64 or less, into two (a
``wide`` key, sptool/_widekeys.pyx) up to 128 bits, as FROSTT's tensors and any shape whose
extents multiply past 2^63 need, otherwise the big-endian bytes of the columns.  Wide and byte
keys are NumPy ``V`` arrays whose bytes compare like the numbers (NumPy sorts and searches them
lexicographically where speed does not matter); compiled kernels pack, sort and merge wide keys.
Every order is stable, so rows with equal coordinates keep their input order.

With a packed or wide key the index columns are not carried through the sort at all: they are
unpacked from the sorted keys at the end, so only the values are gathered and spilled.

The pieces are per-batch kernels plus a merge step: ``sorted_stream`` turns batches into
sorted runs, ``merge_sorted`` merges key-sorted streams; a distributed engine can run the
first per part and the second as its reduce.  An input whose values and keys fit in the budget
is sorted whole instead (``sort_in_memory``): one sort, no merge.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from .. import _kernels, _widekeys
from .._memory import ROW_GROUP_ROWS, Budget
from .._threads import THREADS, stop_pool
from ..format import VALUE_TYPES, TensorMeta, value_type_of_arrow
from ..io import arrow_of, before_removal, scratch_dir
from .bounds import bounds_error, checked, first_bad_row

KEY = "__sptool_key"
# Merge rounds smaller than this run on one thread: splitting them costs more than it saves.
MERGE_PARALLEL_MIN = 1 << 16
# More sorted arrays than this are merged by sorting (see merge_keys).
MERGE_TREE_MAX_RUNS = 4


# Sorts of at least this many packed keys use the compiled radix sort, smaller ones NumPy's sort
# of position-tagged keys (both give the same permutation; docs/performance.md has the figures).
RADIX_MIN_ROWS = 1 << 18


# Keys of up to this many bits are two uint64 words; wider ones the bytes of every index column.
WIDE_BITS = 128


def _words(keys: np.ndarray) -> np.ndarray:
    """The (n, 2) uint64 words of wide keys (a V16 array), without a copy when contiguous."""
    return np.ascontiguousarray(keys).view(np.uint64).reshape(len(keys), 2)


class KeyCodec:
    """Sort keys for rows of (K, n) index arrays under a dimension order."""

    def __init__(self, shape, order, sparse_ndim: int | None = None):
        self.order = np.asarray(order, dtype=np.int64)
        self.K = len(self.order) if sparse_ndim is None else sparse_ndim
        widths = [max(int(shape[d] - 1).bit_length(), 0) if shape[d] else 0 for d in order]
        self.packed = sum(widths) <= 64
        self.wide = 64 < sum(widths) <= WIDE_BITS
        self.width = 8 if self.packed else 16 if self.wide else 8 * len(self.order)  # bytes a key
        shifts, acc = [], 0
        for w in reversed(widths):
            shifts.append(acc if w else 0)  # a zero-width field holds only 0; never shift by 64
            acc += w
        self.shifts = np.asarray(shifts[::-1], dtype=np.int64)
        self.widths = np.asarray(widths, dtype=np.int64)
        self.bits = acc
        # The index columns can be rebuilt from the key only if it holds every one of them.
        self.unpackable = (self.packed or self.wide) and sorted(int(d) for d in order) == list(range(self.K))
        # Packing checks the bounds too (encode_table's ``checked``) when every dimension is in the
        # key and has a known extent; no int64 index reaches 2^63, and past it a negative one would pass.
        extents = [shape[d] for d in order]
        self.limits = (np.asarray([min(e, 1 << 63) for e in extents], dtype=np.uint64)
                       if self.packed and self.unpackable and None not in extents else None)

    def encode(self, keys: np.ndarray) -> np.ndarray:
        n = keys.shape[1]
        if self.packed:
            out = np.empty(n, dtype=np.uint64)
            _kernels.pack_keys(keys, self.order, self.shifts, self.widths, out)
            return out
        if self.wide:
            out = np.empty(n, dtype="V16")
            _widekeys.pack_keys(keys, self.order, self.shifts, self.widths, _words(out))
            return out
        # Big-endian bytes compare like the numbers (indices are non-negative).
        cols = np.ascontiguousarray(keys[self.order].T.astype(">u8"))
        return cols.view(f"V{8 * len(self.order)}").reshape(n)

    def encode_table(self, table: pa.Table, checked: bool = False) -> np.ndarray | None:
        """Keys of a table's rows, packed chunk by chunk straight from the column buffers.  With
        ``checked`` (a codec with ``limits``), each index is checked against its extent in the
        same pass: None when one lies outside the shape."""
        if not (self.packed or self.wide):
            keys = np.stack([table.column(int(d)).to_numpy() for d in range(self.K)])
            return self.encode(keys)
        out = np.empty(table.num_rows, dtype=np.uint64 if self.packed else "V16")
        words = out if self.packed else _words(out)
        or_shifted = _kernels.or_shifted if self.packed else _widekeys.or_shifted
        first, within = True, True
        for j, d in enumerate(self.order):
            chunks = [c.to_numpy() for c in table.column(int(d)).chunks]
            limit = (int(self.limits[j]),) if checked else ()
            if self.widths[j] == 0:  # an extent of 1 (or 0): nothing to pack, only 0 allowed
                within = within and not (checked and (limit[0] != 1 or any(c.any() for c in chunks)))
                continue
            start = 0
            for col in chunks:
                n = len(col)
                fits = or_shifted(col, int(self.shifts[j]), int(self.widths[j]), words[start:start + n], first, *limit)
                within = within and (fits or not checked)
                start += n
            first = False
        if first:
            words[:] = 0
        return out if within else None

    def words(self, keys: np.ndarray) -> np.ndarray:
        """What the compiled kernels take for ``keys``: packed keys as they are, wide ones as
        (n, 2) uint64 words."""
        return _words(keys) if self.wide else keys

    def decode(self, key: np.ndarray) -> np.ndarray:
        """(K, n) index arrays from packed or wide keys."""
        out = np.empty((self.K, len(key)), dtype=np.int64)
        if self.wide:
            _widekeys.unpack_keys(_words(key), self.order, self.shifts, self.widths, out)
            return out
        _kernels.unpack_keys(np.ascontiguousarray(key), self.order, self.shifts, self.widths, out)
        return out

    def argsort(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(permutation, sorted keys), stable."""
        n = len(key)
        if self.wide:
            perm, out = np.empty(n, dtype=np.int64), np.empty(n, dtype="V16")
            _widekeys.radix_argsort(_words(key), perm, _words(out))
            return perm, out
        pos_bits = max(int(n - 1).bit_length(), 1)
        radix = n >= RADIX_MIN_ROWS
        if key.dtype == np.uint64 and self.bits + pos_bits <= 64 and not radix:
            # Key and row position in one uint64: the position breaks ties in input order, so
            # NumPy's unstable sort is stable here, and one array moves instead of two.
            both = np.empty(n, dtype=np.uint64)
            _kernels.tag_positions(key, pos_bits, both)
            both.sort()
            perm = np.empty(n, dtype=np.int64)
            _kernels.untag_positions(both, pos_bits, perm, both)  # in place: keys replace tagged keys
            return perm, both
        if key.dtype == np.uint64:
            perm = np.empty(n, dtype=np.int64)
            out = np.empty(n, dtype=np.uint64)
            _kernels.radix_argsort(key, perm, out)
            return perm, out
        perm = np.argsort(key, kind="stable")
        return perm, key[perm]

    def key_type(self) -> pa.DataType:
        return pa.uint64() if self.packed else pa.binary(self.width)

    def to_arrow(self, key: np.ndarray) -> pa.Array:
        if self.packed:
            return arrow_of(np.asarray(key, dtype=np.uint64))
        return pa.FixedSizeBinaryArray.from_buffers(self.key_type(), len(key), [None, pa.py_buffer(key.tobytes())])

    def from_arrow(self, arr) -> np.ndarray:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if self.packed:
            return arr.to_numpy(zero_copy_only=False)
        width = self.width
        buf = arr.buffers()[1]
        raw = np.frombuffer(buf, dtype=np.uint8, count=(arr.offset + len(arr)) * width)
        return raw[arr.offset * width:].view(f"V{width}").reshape(len(arr))

    # -- payload: what travels with the keys ------------------------------------------------
    def payload(self, table: pa.Table) -> pa.Table:
        """The columns a sort must carry: only values when the key can be unpacked."""
        return table.select([table.num_columns - 1]) if self.unpackable else table

    def batches(self, payload: pa.Table, keys: np.ndarray, schema: pa.Schema):
        """Record batches in the file schema from a sorted payload and its keys."""
        for start in range(0, payload.num_rows, ROW_GROUP_ROWS):
            part = payload.slice(start, ROW_GROUP_ROWS).combine_chunks()
            k = keys[start:start + part.num_rows]
            if self.unpackable:
                idx = self.decode(k)
                cols = [arrow_of(idx[d]) for d in range(self.K)] + [part.column(0).combine_chunks()]
                yield pa.RecordBatch.from_arrays(cols, schema=schema), k
            else:
                for b in part.to_batches():
                    yield b, k[: b.num_rows]
                    k = k[b.num_rows:]


def take(table: pa.Table, perm: np.ndarray) -> pa.Table:
    """Rows of ``table`` in the order ``perm``: NumPy indexing for fixed-width columns, Arrow's
    take for the rest."""
    cols = []
    for col in table.columns:
        t = col.type
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            cols.append(arrow_of(np.take(col.to_numpy(), perm)))
        else:
            cols.append(col.take(arrow_of(perm)))
    return pa.Table.from_arrays(cols, schema=table.schema)


def sort_run(table: pa.Table, codec: KeyCodec, K: int, keys: np.ndarray | None = None) -> tuple[pa.Table, np.ndarray]:
    """(payload in key order, sorted keys) of a table of rows in the file schema (its keys, when
    the caller has them already)."""
    perm, skeys = codec.argsort(codec.encode_table(table) if keys is None else keys)
    return take(codec.payload(table), perm), skeys


def chunk_rows(budget: Budget, row_bytes: int, ways: int = 1) -> int:
    """Rows per in-memory run (ways=1) or per run cursor in a ways-way merge."""
    # Two runs: one filling, one being sorted (its key, permutation and taken copy) and spilled.
    per_row = (row_bytes + 8) * 6
    # The interpreter, the reader's and the writer's buffers take their share of the budget first.
    return max(1024, min(budget.usable // (per_row * max(ways, 1)), 1 << 24))


def run_rows(budget: Budget, row_bytes: int) -> int:
    """Rows per sorted run.  A third of the room goes to kept runs, and runs stay at most
    RUN_ROWS_MAX rows whatever the budget: sorting a run overlaps reading the next, but not the
    last run's sort."""
    return budget.run_rows or max(1, min(chunk_rows(budget, row_bytes) * 2 // 3, RUN_ROWS_MAX))


def merge_rows(budget: Budget, row_bytes: int, ways: int | None = None) -> int:
    """Rows per slice of each run in a ``ways``-way merge (default: a full round of fan_in runs
    and the output)."""
    ways = fan_in(budget) + 1 if ways is None else ways
    return budget.merge_rows or min(chunk_rows(budget, row_bytes, ways=ways), MERGE_SLICE_ROWS)


def keep_bytes(budget: Budget) -> int:
    """Bytes of sorted runs kept in memory instead of spilled (a third of the usable budget;
    sorted_stream makes its runs a third smaller to leave room for them)."""
    return budget.usable // 3 if budget.keep_bytes is None else budget.keep_bytes


class _MemRun:
    """A sorted run kept in memory: its payload table and keys."""

    __slots__ = ("payload", "keys", "nbytes")

    def __init__(self, payload: pa.Table, keys: np.ndarray):
        self.payload, self.keys = payload, keys
        self.nbytes = payload.nbytes + keys.nbytes


class RunStore:
    """Sorted runs: kept in memory while they fit in ``keep`` bytes, the rest spilled to Arrow
    IPC files in a temporary directory (removed on close).  An input a few times the budget is
    then sorted with little or no disk traffic, and any larger input still in bounded memory."""

    def __init__(self, tmp_dir: str | None, keep: int = 0):
        self._dir = scratch_dir("sort", tmp_dir)
        self.runs: list = []  # paths of spilled runs and _MemRuns, in input order
        self.keep, self.kept = keep, 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="sptool-spill")
        self._pending = []
        # Interrupted while suspended (a generator nothing resumes), the store is never closed:
        # the command line's cleanup stops its spill thread before removing the directory.
        pool = self._pool  # not self: the registry must not keep a closed store's runs alive
        before_removal(self._dir.name, lambda: pool.shutdown(wait=True, cancel_futures=True))

    def add_run(self, table: pa.Table, codec: KeyCodec, K: int, keys: np.ndarray | None = None):
        """Sort a run and keep or spill it, on the store's thread: that overlaps reading the next
        run.  At most one run is being sorted, which bounds the memory (chunk_rows counts two runs)."""
        self.wait()
        self.runs.append(None)
        self._pending.append(self._pool.submit(self._sort_run, len(self.runs) - 1, table, codec, K, keys))

    def _sort_run(self, index: int, table: pa.Table, codec: KeyCodec, K: int, keys):
        payload, keys = sort_run(table, codec, K, keys)
        del table
        run = _MemRun(payload, keys)
        if self.kept + run.nbytes <= self.keep:
            self.kept += run.nbytes
            self.runs[index] = run
            return
        path = os.path.join(self._dir.name, f"run-{index:06d}.arrow")
        _write_ipc(path, payload.append_column(KEY, codec.to_arrow(keys)))
        self.runs[index] = path

    def discard(self, run):
        if isinstance(run, _MemRun):
            self.kept -= run.nbytes
        else:
            os.remove(run)

    def spill_merged(self, pairs, codec: KeyCodec) -> str:
        """Write a merged stream of (payload, keys) as one new run (the merge tree's inner node)."""
        path = os.path.join(self._dir.name, f"merged-{len(self.runs):06d}.arrow")
        self.runs.append(path)
        writer = None
        try:
            for payload, keys in pairs:
                for start in range(0, payload.num_rows, SPILL_BATCH_ROWS):
                    part = payload.slice(start, SPILL_BATCH_ROWS)
                    table = part.append_column(KEY, codec.to_arrow(keys[start:start + part.num_rows]))
                    if writer is None:
                        writer = ipc.new_file(path, table.schema)
                    writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
        return path

    def wait(self):
        for f in self._pending:
            f.result()
        self._pending = []

    def close(self):
        try:
            self.wait()
        finally:
            stop_pool(self._pool)  # not a join inside a garbage collection (sptool._threads)
            self._dir.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Rows per sorted run, and per run in a merge round, at most: a bigger budget buys no speed past
# these, only bigger temporaries (docs/performance.md, Sorting).
RUN_ROWS_MAX = 1 << 22
MERGE_SLICE_ROWS = 1 << 18
# sort_in_memory's rows per bucket of its counting sort (or a quarter of a slice), and per slice
# of whole buckets sorted at once and handed on while the next one sorts (or the budget's
# merge_rows: the tests' small slices).
BUCKET_ROWS = 1 << 14
SLICE_ROWS = 1 << 19
# Rows per record batch in a spilled run: the merge reads each run a batch at a time, so small
# batches keep a many-way merge's memory at (ways x SPILL_BATCH_ROWS) rows.
SPILL_BATCH_ROWS = 8192
# Runs merged at once; more runs are merged in a tree (each level reads and writes the data
# once more, but a round's memory stays at FAN_IN slices).
FAN_IN = 16


def fan_in(budget: Budget) -> int:
    return max(2, budget.fan_in or FAN_IN)


def _write_ipc(path: str, table: pa.Table):
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=SPILL_BATCH_ROWS)


def key_preparer(meta: TensorMeta, order, *, keys: bool = True):
    """A prepare function for TensorSource.iter_prepared: a batch's bounds check and sort keys
    (None with ``keys=False``), made on the thread that decoded it.  Gives the first bad row
    instead when an index is outside the shape (such an index would pack into a wrong key)."""
    codec = KeyCodec(meta.shape, order, meta.sparse_ndim)

    def prepare(batch: pa.RecordBatch):
        if keys and codec.limits is not None:
            packed = codec.encode_table(pa.Table.from_batches([batch]), checked=True)
            if packed is not None:
                return packed
        row, _ = first_bad_row(batch, meta)
        if row >= 0:
            return row
        return codec.encode_table(pa.Table.from_batches([batch])) if keys else None

    return prepare


def prepared_batches(src, order, *, keys: bool = True, budget: Budget, progress=None):
    """(batch, its sort keys or None) for a source's non-empty batches, bounds-checked and keyed
    on the decoding threads (key_preparer); an index outside the shape is an error naming the row."""
    return _keyed(src.iter_prepared(key_preparer(src.meta, order, keys=keys), budget=budget), src.meta, True,
                  progress, src.path)


def sorted_stream(batches: Iterable, meta: TensorMeta, order, *, budget: Budget, tmp_dir: str | None,
                  progress=None, keyed: bool = False, path: str | None = None
                  ) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """Yield (batch, sorted keys) in key order for all rows of ``batches``: record batches, or
    with ``keyed`` the (batch, key_preparer's result) pairs of TensorSource.iter_prepared.

    Memory: one run in memory at a time, then a merge reading every run in slices; or, when
    every row's values and packed key fit in memory_rows, all of them (sort_in_memory).
    """
    from ..io import row_bytes

    K = meta.sparse_ndim
    schema = meta.arrow_schema()
    codec = KeyCodec(meta.shape, order, K)
    rb = row_bytes(meta) + codec.width
    rows_per_run = run_rows(budget, rb)
    pairs = _keyed(batches, meta, keyed, progress, path)
    values_type = schema.field(len(schema) - 1).type
    if keyed and codec.unpackable and (pa.types.is_integer(values_type) or pa.types.is_floating(values_type)):
        # Only the values travel with the keys; the rows are held until the input ends or
        # outgrows memory_rows: all of them sorted at once, else the runs below, from the start.
        limit = memory_rows(budget, codec, values_type.bit_width // 8)
        held: deque = deque()
        rows = 0
        for batch, keys in pairs:
            held.append((batch.select([batch.num_columns - 1]), keys))
            rows += batch.num_rows
            if rows > limit:
                break
        else:
            yield from sort_in_memory(held, rows, codec, schema, budget.merge_rows, budget.workers)
            return
        pairs = chain(_drained(held), ((b.select([b.num_columns - 1]), k) for b, k in pairs))
    with RunStore(tmp_dir, keep_bytes(budget)) as store:
        pending: list[pa.RecordBatch] = []
        pending_keys: list[np.ndarray] | None = [] if keyed else None
        pending_rows = 0

        def run_keys():
            return None if pending_keys is None else np.concatenate(pending_keys)

        total_rows = 0
        for batch, keys in pairs:
            total_rows += batch.num_rows
            while batch.num_rows:
                take_rows = min(batch.num_rows, rows_per_run - pending_rows)
                pending.append(batch.slice(0, take_rows))
                if keyed:
                    pending_keys.append(keys[:take_rows])
                    keys = keys[take_rows:]
                pending_rows += take_rows
                batch = batch.slice(take_rows)
                if pending_rows >= rows_per_run:
                    store.add_run(pa.Table.from_batches(pending), codec, K, run_keys())
                    pending, pending_rows = [], 0
                    pending_keys = [] if keyed else None
        if not store.runs:
            if pending_rows:
                # Everything fit in one run: no spill, no merge.  The unsorted rows are let go
                # before the sorted ones are yielded (the last batch read too: a slice of a row
                # group read whole holds all of it), or both copies stay alive downstream.
                table, unsorted_keys = pa.Table.from_batches(pending), run_keys()
                pending, pending_keys, batch, keys = [], None, None, None
                payload, keys = sort_run(table, codec, K, unsorted_keys)
                del table, unsorted_keys
                yield from codec.batches(payload, keys, schema)
            return
        if pending_rows:
            store.add_run(pa.Table.from_batches(pending), codec, K, run_keys())
        store.wait()
        runs = list(store.runs)
        rows = merge_rows(budget, rb)
        ways = fan_in(budget)
        # A merge round holds a slice of every run at once, so many runs are merged in a tree:
        # groups of fan_in runs into bigger runs, until one merge finishes the job.
        while len(runs) > ways:
            bar = _phase(progress, f"merging {len(runs)} runs into {-(-len(runs) // ways)}", total_rows)
            merged_runs = []
            for g in range(0, len(runs), ways):
                group = runs[g:g + ways]
                if len(group) == 1:
                    merged_runs.append(group[0])
                    continue
                merged_runs.append(store.spill_merged(_counted(
                    merge_sorted([read_run(p, codec) for p in group], codec, rows=rows, budget=budget), bar), codec))
                for run in group:
                    store.discard(run)
            runs = merged_runs
        merged = merge_sorted([read_run(p, codec) for p in runs], codec, rows=rows, budget=budget)
        for payload, keys in _counted(merged, _phase(progress, f"merging {len(runs)} sorted runs", total_rows)):
            yield from codec.batches(payload, keys, schema)


def memory_rows(budget: Budget, codec: KeyCodec, value_bytes: int) -> int:
    """Rows that sort_in_memory may sort: their values, keys and position-tagged keys in two
    thirds of the usable budget (the rest for the reads in flight and the output's row groups),
    with room for the positions in the key's spare bits.  None when the budget fixes the runs
    or the bytes kept of them (the external sort asked for).  Wide keys need no spare bits (their
    slices are radix sorted, which keeps ties in order), but twice the room."""
    if budget.run_rows is not None or budget.keep_bytes is not None:
        return 0
    if codec.wide:
        return budget.usable * 2 // 3 // (value_bytes + 32)
    spare = 64 - codec.bits
    return 0 if spare < 1 else min(budget.usable * 2 // 3 // (value_bytes + 16), 1 << spare)


def sort_in_memory(held: deque, n: int, codec: KeyCodec, schema: pa.Schema, slice_rows: int | None = None,
                   workers: int = THREADS) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """(batch, sorted keys) in key order for ``n`` rows held in memory: a deque of (values-only
    batch, packed keys) pairs, emptied as they are used.

    One sort of every row, where sorted runs would be sorted again by their merge: a counting
    sort by the keys' top bits into buckets of BUCKET_ROWS rows or fewer (the rows and their
    values scattered by ``workers`` threads, each over its share of the batches; each key
    tagged with where it went, so ties keep input order and a slice's values are gathered from
    that slice alone), then slices of whole buckets sorted one after another, the next on a
    thread while this one's values are gathered, its keys unpacked and its rows handed on (to
    the writer thread): the sort overlaps the writing.  Memory: the rows once, scattered as the
    batches are let go, and a slice's copies.  Wide keys are scattered as they are, and each
    slice radix sorted (_widekeys), which gives the permutation without tags."""
    if not n:
        return
    slice_rows = slice_rows or SLICE_ROWS
    bucket_rows = max(1, min(BUCKET_ROWS, slice_rows // 4))
    bucket_bits = min(codec.bits, max(n // bucket_rows, 1).bit_length() - 1)
    shift = codec.bits - bucket_bits
    pos_bits = max(int(n - 1).bit_length(), 1)
    batches = list(held)
    held.clear()
    # Each worker's share: consecutive batches, so its rows follow the previous share's in every bucket.
    ends = np.cumsum([len(k) for _, k in batches])
    shares = np.searchsorted(ends, np.arange(1, workers) * n // workers, side="right")
    shares = _distinct(np.concatenate([[0], shares, [len(batches)]]))
    counts = np.zeros((len(shares) - 1, 1 << bucket_bits), dtype=np.int64)

    def count(w):
        for _, keys in batches[shares[w]:shares[w + 1]]:
            if codec.wide:
                _widekeys.bucket_counts(_words(keys), shift, counts[w])
            else:
                _kernels.bucket_counts(keys, shift, counts[w])

    # nxt[w, b]: where share w's next row of bucket b goes (after every earlier share's rows of b).
    words = f"u{schema.field(len(schema) - 1).type.bit_width // 8}"
    tagged = np.empty(n, dtype="V16" if codec.wide else np.uint64)  # wide keys go untagged
    values = np.empty(n, dtype=VALUE_TYPES[value_type_of_arrow(schema.field(len(schema) - 1).type)])

    def scatter(w):
        for i in range(shares[w], shares[w + 1]):
            batch, keys = batches[i]
            batches[i] = None  # let the batch go once its rows are placed
            vals = np.ascontiguousarray(batch.column(0).to_numpy(zero_copy_only=False), dtype=values.dtype)
            if codec.wide:
                _widekeys.scatter_rows(_words(keys), vals.view(words), shift, nxt[w], _words(tagged),
                                       values.view(words))
            else:
                _kernels.scatter_rows(keys, vals.view(words), shift, pos_bits, nxt[w], tagged, values.view(words))

    with ThreadPoolExecutor(workers, thread_name_prefix="sptool-sort") as pool:
        _on_pool(pool, count, len(shares) - 1)
        room = counts.cumsum(axis=0) - counts  # earlier shares' rows, bucket by bucket
        bucket_starts = np.cumsum(counts.sum(axis=0)) - counts.sum(axis=0)
        nxt = bucket_starts + room
        _on_pool(pool, scatter, len(shares) - 1)
        batches.clear()
        bucket_ends = bucket_starts + counts.sum(axis=0)
        cuts = bucket_ends[np.searchsorted(bucket_ends, np.arange(slice_rows, n, slice_rows))]
        bounds = _distinct(np.concatenate([[0], cuts, [n]]))
        name = schema.names[-1]
        perm = np.empty(int(np.diff(bounds).max()), dtype=np.int64)

        def sort_slice(j):
            seg = tagged[bounds[j]:bounds[j + 1]]
            if codec.wide:
                return codec.argsort(seg)  # (the permutation within the slice, the sorted keys)
            seg.sort()  # NumPy's sort lets go of the GIL

        ahead = pool.submit(sort_slice, 0)
        for j in range(len(bounds) - 1):
            sorted_wide = ahead.result()
            if j + 2 < len(bounds):
                ahead = pool.submit(sort_slice, j + 1)
            if codec.wide:
                (where, seg), held_values = sorted_wide, values[bounds[j]:bounds[j + 1]]
            else:
                seg, held_values = tagged[bounds[j]:bounds[j + 1]], values
                where = perm[:len(seg)]
                _kernels.untag_positions(seg, pos_bits, where, seg)  # in place: keys replace tagged keys
            part = pa.table([arrow_of(np.take(held_values, where))], names=[name])
            yield from codec.batches(part, seg, schema)


def _distinct(ascending: np.ndarray) -> np.ndarray:
    """The distinct values of a non-decreasing array.  Not np.unique, which imports numpy.ma
    (some 30 ms of a process) to ask whether its argument is masked."""
    return ascending[np.concatenate([[True], ascending[1:] != ascending[:-1]])]


def _drained(held: deque):
    while held:
        yield held.popleft()


def _phase(progress, label: str, total: int):
    """The progress's own count for a merge pass (Job.phase), which would otherwise sit at 100 %
    once every row has been read; None for a progress without phases."""
    phase = getattr(progress, "phase", None)
    return None if phase is None else phase(label, total)


def _counted(pairs, bar):
    """The (payload, keys) of a merge, passed on and counted on ``bar``."""
    for payload, keys in pairs:
        if bar is not None:
            bar.advance(payload.num_rows)
        yield payload, keys


def _keyed(batches, meta: TensorMeta, keyed: bool, progress, path):
    """(batch, its keys or None) for the non-empty batches, bounds-checked: an index outside the
    shape would pack into a wrong key, so it is an error naming the row."""
    if not keyed:
        for batch, _ in checked(batches, meta, progress=progress, path=path):
            yield batch, None
        return
    seen = 0
    for batch, keys in batches:
        n = batch.num_rows
        if not n:
            continue
        if progress:
            progress.advance(n)
        if isinstance(keys, int):
            raise bounds_error(seen, keys, first_bad_row(batch, meta)[1], meta, path)
        seen += n
        yield batch, keys


class _Cursor:
    """Reads a key-sorted stream of (payload, keys) in slices of about ``rows`` rows."""

    def __init__(self, pairs, rows: int):
        self.pairs = iter(pairs)
        self.rows = rows
        self.table = None
        self.keys = None
        self.pos = 0
        self._load()

    def _load(self):
        parts, keys, n = [], [], 0
        for part, k in self.pairs:
            if part.num_rows:
                parts.append(part)
                keys.append(k)
                n += part.num_rows
            if n >= self.rows:
                break
        if not parts:
            self.table = None
            return
        self.table = pa.concat_tables([p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in parts])
        self.keys = np.concatenate(keys) if len(keys) > 1 else keys[0]
        self.pos = 0

    @property
    def done(self) -> bool:
        return self.table is None

    def take_upto(self, bound, strict: bool = False):
        """The rows with keys up to ``bound`` (below it if ``strict``) not taken yet."""
        end = max(int(np.searchsorted(self.keys, bound, side="left" if strict else "right")), self.pos)
        part = self.table.slice(self.pos, end - self.pos) if end > self.pos else None
        keys = self.keys[self.pos:end]
        self.pos = end
        if self.pos >= len(self.keys):
            self._load()
        return part, keys


def read_run(run, codec: KeyCodec):
    """The (payload, keys) pairs of a run, a slice at a time.  A spilled one is read with plain
    reads, not a memory map: mapped pages would stay in this process's RSS after use and count
    against --memory."""
    if isinstance(run, _MemRun):
        for start in range(0, run.payload.num_rows, SPILL_BATCH_ROWS):
            yield run.payload.slice(start, SPILL_BATCH_ROWS), run.keys[start:start + SPILL_BATCH_ROWS]
        return
    reader = ipc.open_file(pa.OSFile(run))
    for i in range(reader.num_record_batches):
        b = reader.get_batch(i)
        yield b.drop_columns([KEY]), codec.from_arrow(b.column(KEY))


def merge_keys(keys: list[np.ndarray], pool: ThreadPoolExecutor | None = None, bits: int = 64, *,
               parallel_rows: int = MERGE_PARALLEL_MIN, parts: int = THREADS) -> tuple[np.ndarray, np.ndarray]:
    """(gather order into the concatenation of ``keys``, merged keys) for sorted uint64 key
    arrays of at most ``bits`` significant bits, or wide (V16) ones, stably (ties keep array
    order).

    Once there are ``parallel_rows`` keys, the key range is cut at quantiles of the longest
    array into ``parts`` pieces, each handled on the pool: few arrays by the compiled k-way
    merge (merge_runs), more by NumPy's stable sort of the position-tagged keys, a timsort that
    finds the arrays as runs and merges them (faster past a few arrays: docs/performance.md).
    Not the default quicksort, which does not look for runs.  Wide keys always take the compiled
    merge (_widekeys.merge_runs).
    """
    sizes = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    allkeys = np.concatenate(keys)
    n, k = len(allkeys), len(keys)
    wide = allkeys.dtype != np.uint64
    pos_bits = max(int(n - 1).bit_length(), 1)
    sort = not wide and k > MERGE_TREE_MAX_RUNS and bits + pos_bits <= 64
    out = np.empty(n, dtype=allkeys.dtype)
    perm = np.empty(n, dtype=np.int64)

    def merge_runs(lo, hi, start):
        if wide:
            _widekeys.merge_runs(_words(allkeys), lo, hi, _words(out), perm, start)
        else:
            _kernels.merge_runs(allkeys, lo, hi, out, perm, start)

    if pool is None or n < parallel_rows:
        # One piece: no cutting (small rounds are many, and each NumPy call costs).
        if sort:
            _kernels.tag_positions(allkeys, pos_bits, out)
            out.sort(kind="stable")
            _kernels.untag_positions(out, pos_bits, perm, out)
        else:
            merge_runs(starts[:-1], starts[1:], 0)
        return perm, out
    longest = keys[int(np.argmax(sizes))]
    pivots = longest[(np.arange(1, parts) * len(longest)) // parts]
    # cuts[j, r]: where piece j starts in array r (keys <= pivot j - 1 lie before it).
    cuts = np.empty((parts + 1, k), dtype=np.int64)
    cuts[0], cuts[parts] = starts[:-1], starts[1:]
    for r, a in enumerate(keys):
        cuts[1:parts, r] = starts[r] + np.searchsorted(a, pivots, side="right")
    offsets = np.concatenate([[0], np.cumsum((cuts[1:] - cuts[:-1]).sum(axis=1))])
    if sort:
        tagged = np.empty(n, dtype=np.uint64)
        _kernels.tag_positions(allkeys, pos_bits, tagged)

        def piece(j):
            seg = out[offsets[j]:offsets[j + 1]]
            np.concatenate([tagged[cuts[j, r]:cuts[j + 1, r]] for r in range(k)], out=seg)
            seg.sort(kind="stable")

        _on_pool(pool, piece, parts)
        _kernels.untag_positions(out, pos_bits, perm, out)
    else:
        _on_pool(pool, lambda j: merge_runs(cuts[j], cuts[j + 1], int(offsets[j])), parts)
    return perm, out


def _on_pool(pool, fn, parts: int):
    for f in [pool.submit(fn, j) for j in range(parts)]:
        f.result()


def merge_sorted(streams: list, codec: KeyCodec, *, rows: int, budget: Budget):
    """Merge key-sorted streams of (payload, keys) into one, stably (ties keep stream order).

    A k-way merge by bounds: each round takes, from every stream, the rows up to the smallest
    'last key in memory' and merges those slices: packed and wide keys with the compiled merge on
    every core (merge_keys), byte-string keys with a stable sort.  Payloads must share one schema
    (record batches or tables); yields (table, keys).
    """
    split = {"parallel_rows": budget.parallel_rows or MERGE_PARALLEL_MIN, "parts": budget.workers}
    with ThreadPoolExecutor(budget.workers, thread_name_prefix="sptool-merge") as pool:
        yield from _merge_rounds([_Cursor(s, rows) for s in streams], codec, pool, split)


def _merge_rounds(cursors, codec: KeyCodec, pool, split: dict):
    while True:
        live = [c for c in cursors if not c.done]
        if not live:
            return
        # The smallest last-key in memory (an argsort, as void keys have no < operator).
        lasts = np.concatenate([c.keys[-1:] for c in live])
        bound = lasts[np.argsort(lasts, kind="stable")[0]]
        # The first stream whose slice ends at the bound may hold more rows of that key in its
        # next slice, which go before the later streams' rows of that key: those wait.
        tied = int(np.flatnonzero(lasts == bound)[0])
        parts, keys = [], []
        for i, c in enumerate(live):
            part, k = c.take_upto(bound, strict=i > tied)
            if part is not None and part.num_rows:
                parts.append(part)
                keys.append(k)
        if not parts:
            continue
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if len(parts) == 1:
            allkeys = keys[0]
        elif codec.packed or codec.wide:
            perm, allkeys = merge_keys(keys, pool, codec.bits, **split)
            table = take(table, perm)
        else:
            perm, allkeys = codec.argsort(np.concatenate(keys))
            table = take(table, perm)
        yield table, allkeys
