"""Key ranges across a cluster: every operand's rows shuffled into ranges of a key on some
dimensions, and each range handed whole to a single-machine op.  The distributed reorder, add
and reduce are this with different keys and ops.

Three rounds of tasks, each a plain function of paths (tasks move no data through Dask):

1. ``sample``: every piece returns evenly spaced packed keys (``KeyCodec``, the external sort's
   keys, on the dimensions ``order`` names); the driver takes the splitters from their union, so
   range r holds the keys in [splitter r-1, splitter r).  Equal keys never straddle a splitter,
   and repeated splitters (a key holding much of the data) collapse into one range.
2. ``partition``: every piece of operand j writes its rows of range r to
   ``operand-j/range-r/piece-p.arrows`` in the scratch directory (bounds-checked on the way,
   naming the piece and row), keeping their order.
3. ``range_task``: range r's pieces of each operand are read as one tensor each
   (``ShuffledSource``, pieces in input order) and given to the op, which writes output part i.

Every row sharing a key, in every operand, lands in one range, in input order; an op whose
result at a key depends only on the rows at that key (a sort, a duplicates policy, a join, a
reduction over the other dimensions) therefore computes in range r exactly what it computes on
one machine there, sums of floats included (same rows, same order), and the parts, ranges in key
order, concatenate to the single-machine output.

An op that wants its ranges sorted on the key (reorder: range_map's ``sort``) gets the sorted
shuffle instead, in two rounds: ``partition_sorted`` sorts each piece in runs as it writes it (one
Arrow IPC file per piece, the packed key and the values) and samples the sorted runs, the
splitters follow from those samples, and range r's task cuts every run at its range by binary
search and merges the slices (``SortedRange``), stably: each row is sorted once in its piece and
merged once, and no round reads the pieces only to sample them.

Operands whose claims (their own, and their seams': seams.py) say they are sorted on the key
already hold each range as a run of their rows: round 2 is skipped, and range r's task reads
its keys where they stand (``KeyRangeSource``: the row groups whose statistics allow them,
filtered by key), in input order, as the shuffle would have handed them over.

The driver submits the three rounds at once, each task depending on the futures of the round
before (the splitters are one small task over the samples; a range task takes the partition
tasks' row counts), so the scheduler starts each round as soon as its inputs are in, with no
round trip to the client between rounds; the client only watches.  The number of ranges is
fixed before the splitters are known: a range that the splitters collapse, or that receives no
rows, writes no part, and the driver renumbers the parts written, in range order, at the end.

A task lost with its worker is run again; each writes its files whole (the io sinks rename a
hidden sibling), so a rerun replaces what it may have left.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from pyarrow import ipc

from .._memory import Budget, budget_of, peak_rss
from ..errors import ShapeMismatch
from ..format import TensorMeta
from ..io import (
    TensorSource,
    batch_columns,
    check_inputs,
    files_in,
    is_remote,
    join_path,
    kind_of,
    make_dir,
    move,
    open_sink,
    open_source,
    remove_path,
    row_bytes,
    sibling_name,
)
from ..stream.bounds import checked
from ..stream.order import already_sorted, claim_check
from ..stream.sort import KeyCodec, merge_rows, merge_sorted, run_rows, sort_run
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .pieces import KeyRangeSource, Piece, PieceSource, ShuffledSource, pieces_of, refuse_stdin, shared_copy
from .progress import Outcome, follow, settle
from .seams import part_edges

# Sampled keys per output range: enough that ranges come out within a few per cent of even
# (256 left the largest of 8 ranges of 20M rows 8-12% above the mean).
SAMPLE_PER_RANGE = 2048
# Row groups of a piece the sample reads at most.
SAMPLE_GROUPS = 8


def _codec(meta: TensorMeta, order) -> KeyCodec:
    return KeyCodec(meta.shape, order, meta.sparse_ndim)


# -- tasks (run on workers) ------------------------------------------------------------------

def sample(piece: Piece, order, count: int, budget: Budget) -> tuple[np.ndarray, int]:
    """About ``count`` keys of a piece's rows, evenly spaced in stored order within up to
    SAMPLE_GROUPS of its row groups, themselves evenly spaced (decoding the whole piece's index
    columns cost more than the partition that reads them again)."""
    src = PieceSource(piece)
    K = src.meta.sparse_ndim
    codec = _codec(src.meta, order)
    footer = src.parts[0].file.metadata
    groups = list(piece.groups if piece.groups is not None else range(footer.num_row_groups))
    if len(groups) > SAMPLE_GROUPS:
        groups = [groups[(2 * i + 1) * len(groups) // (2 * SAMPLE_GROUPS)] for i in range(SAMPLE_GROUPS)]
    rows = sum(footer.row_group(g).num_rows for g in groups)
    stride = max(1, rows // max(count, 1))
    names = [f"indices_{d}" for d in order]
    taken, seen = [], 0
    for batch in src.part_batches(src.parts[0], src.batch_rows(budget), groups=groups, columns=names):
        n = batch.num_rows
        first = (-seen) % stride
        if first < n and not any(c.null_count for c in batch.columns):
            rows = np.arange(first, n, stride)
            keys = np.zeros((K, len(rows)), dtype=np.int64)
            for j, d in enumerate(order):
                keys[d] = np.asarray(batch.column(j).to_numpy(), dtype=np.int64)[rows]
            # An index outside the shape would pack into a wrong key: left to partition to refuse.
            inside = np.all((keys >= 0) & (keys < np.asarray(src.meta.shape[:K])[:, None]), axis=0)
            taken.append(codec.encode(np.ascontiguousarray(keys[:, inside])))
        seen += n
    return (np.concatenate(taken) if taken else codec.encode(np.empty((K, 0), dtype=np.int64))), peak_rss()


def partition(piece: Piece, index: int, splitters: np.ndarray, order, root: str, budget: Budget,
              claims: TensorMeta) -> tuple:
    """Write the piece's rows of each key range to ``root/range-r/piece-index.arrows``; the rows
    per range."""
    src = PieceSource(piece)
    meta = src.meta
    codec = _codec(meta, order)
    counts = np.zeros(len(splitters) + 1, dtype=np.int64)
    shuffled = meta.with_(sort_order=(), unique=False, nnz=None)
    sinks = {}
    try:
        # An error names the operand and the row from its start, as on one machine; so does a
        # row breaking the operand's claims (``claims``: as one machine opens it, which may claim
        # less than a part), which its ranges carry on.
        for batch, cols in checked(src.iter_batches(budget=budget), meta, path=piece.operand or piece.path,
                                   start=piece.start, claim=claim_check(src, claims)):
            ranges = np.searchsorted(splitters, codec.encode(np.stack(cols)), side="right")
            if len(splitters) < 2**16 - 1:  # NumPy's stable sort of 16-bit integers is a radix sort
                ranges = ranges.astype(np.uint16)
            perm = np.argsort(ranges, kind="stable")
            ranges = ranges[perm]
            batch = batch.take(perm)
            edges = np.flatnonzero(np.diff(ranges)) + 1
            for a, b in zip(np.r_[0, edges], np.r_[edges, len(ranges)]):
                r = int(ranges[a])
                if r not in sinks:
                    make_dir(join_path(root, range_dir(r)), parents=False)
                    sinks[r] = open_sink(join_path(root, range_dir(r), shuffled_name(index)), shuffled,
                                         unique_claim=False, budget=budget)
                sinks[r].write_batch(batch.slice(a, b - a))
                counts[r] += b - a
    except BaseException:
        for sink in sinks.values():
            sink.abort()
        raise
    for sink in sinks.values():
        sink.close()
    return counts, peak_rss()


def partition_sorted(piece: Piece, index: int, order, root: str, count: int, budget: Budget,
                     claims: TensorMeta) -> tuple:
    """The piece's rows sorted by key, in runs of the sort's size within ``budget``, written to
    ``root/piece-index.arrows`` (an Arrow IPC file, a record batch per run: the packed key, then
    the columns the key does not rebuild, values only for a full dimension order), so that a
    range's task merges its slices of the runs (SortedRange) instead of sorting its rows again.
    The sample comes from the sorted runs (``count`` keys evenly spaced in each run's order,
    exact quantiles of the piece), so no task reads the piece for it first.  (The sample, the
    runs, the rows, peak memory.)  Local storage only (the runs are memory-mapped): range_map
    shuffles unsorted on other filesystems."""
    src = PieceSource(piece)
    meta = src.meta
    K = meta.sparse_ndim
    codec = _codec(meta, order)
    per_run = run_rows(budget, row_bytes(meta) + 8)
    stride = max(1, piece.rows // max(count, 1))
    path = os.path.join(root, shuffled_name(index))
    tmp = sibling_name(path, "part")  # a rerun of the task replaces the file whole
    writer, schema, runs, rows, taken, pending, keys, held = None, None, 0, 0, [], [], [], 0

    def flush():
        nonlocal writer, schema, runs
        payload, sorted_keys = sort_run(pa.Table.from_batches(pending), codec, K, np.concatenate(keys))
        if writer is None:
            schema = _shuffle_schema(payload.schema, codec)
            writer = ipc.new_file(tmp, schema)
        columns = [c.combine_chunks() for c in payload.columns]
        writer.write_batch(pa.RecordBatch.from_arrays([codec.to_arrow(sorted_keys), *columns], schema=schema))
        taken.append(sorted_keys[stride // 2::stride])
        runs += 1

    try:
        # An error names the operand and the row from its start, as on one machine; so does a
        # row breaking the operand's claims (``claims``: as one machine opens it, which may claim
        # less than a part), which its ranges carry on.
        for batch, cols in checked(src.iter_batches(budget=budget), meta, path=piece.operand or piece.path,
                                   start=piece.start, claim=claim_check(src, claims)):
            pending.append(batch)
            keys.append(codec.encode(np.stack(cols)))
            held += batch.num_rows
            rows += batch.num_rows
            if held >= per_run:
                flush()
                pending, keys, held = [], [], 0
        if held:
            flush()
        if writer is not None:
            writer.close()
            os.replace(tmp, path)
    except BaseException:
        if writer is not None:
            writer.close()
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    empty = codec.encode(np.empty((K, 0), dtype=np.int64))
    return (np.concatenate(taken) if taken else empty), runs, rows, peak_rss()


def _shuffle_schema(payload: pa.Schema, codec: KeyCodec) -> pa.Schema:
    return pa.schema([pa.field(SHUFFLE_KEY, codec.key_type()), *payload])


SHUFFLE_KEY = "key"


class SortedRange(TensorSource):
    """The rows with keys in [lo, hi) (one-key arrays; None: unbounded) of one operand as partition_sorted left
    it: each run of each piece (files of (path, runs), in input order) cut at the bounds by a
    binary search of its keys, and the slices merged by key, stably, so equal keys keep input
    order as the single machine's stable sort keeps them.  The files are memory-mapped: the
    search touches a few pages, each slice is read once, in order, and its pages are the page
    cache's (dropped under memory pressure), not this process's heap; the merge holds a slice
    of each run at a time."""

    kind = "shuffled"

    def __init__(self, files: list[tuple[str, int]], lo, hi, meta: TensorMeta, order):
        super().__init__(files[0][0] if files else "<empty>", meta, meta.arrow_schema())
        self.files, self.lo, self.hi, self.order = files, lo, hi, tuple(order)

    def with_meta(self, meta: TensorMeta) -> SortedRange:
        return SortedRange(self.files, self.lo, self.hi, meta, self.order)

    def slices(self) -> list:
        """(payload, keys) of every run's rows in the range, in input order."""
        codec = _codec(self.meta, self.order)
        found = []
        for path, count in self.files:
            reader = ipc.open_file(pa.memory_map(path))
            for k in range(count):
                b = reader.get_batch(k)
                keys = codec.from_arrow(b.column(0))
                a = 0 if self.lo is None else int(np.searchsorted(keys, self.lo, side="left")[0])
                z = len(keys) if self.hi is None else int(np.searchsorted(keys, self.hi, side="left")[0])
                if z > a:
                    found.append((b.slice(a, z - a).drop_columns([SHUFFLE_KEY]), keys[a:z]))
        return found

    def iter_batches(self, batch_rows=None, *, budget=None):
        budget = budget_of(budget)
        runs = [[pair] for pair in self.slices()]
        if not runs:
            return
        # One merge of every run (a cluster's ranges meet thousands of pieces): the slices it
        # holds at once share the budget, whatever their number.
        rows = merge_rows(budget, row_bytes(self.meta) + 8, ways=len(runs) + 1)
        codec = _codec(self.meta, self.order)
        for payload, keys in merge_sorted(runs, codec, rows=rows, budget=budget):
            for batch, _ in codec.batches(payload, keys, self.schema):
                yield batch


def range_task(fn, sources: list, output: str) -> tuple:
    """``fn(*sources, output)``: one key range of every operand through the op into output part
    ``output``; (what fn returned, the part's metadata, peak memory)."""
    result = fn(*sources, output)
    with open_source(output) as written:
        return result, written.meta, peak_rss()


def range_slot(task, fn, r: int, metas: list, roots: list[str], counts: list, output: str):
    """Range ``r`` (a task, after every partition task): ``task(fn, its sources, output)`` when it
    holds rows, or when the whole input is empty and it is range 0 (one empty part); else None.
    ``counts[j]`` are operand j's partition results, its pieces' rows per range."""
    held = _held(r, counts)
    if held is None:
        return None
    # An operand's order and uniqueness claims (for its whole, see seams.py) hold for a range of
    # it: its pieces' rows, concatenated in input order.
    sources = [ShuffledSource(files_in(join_path(root, range_dir(r)), ".arrows"), meta.with_(nnz=n))
               for meta, root, n in zip(metas, roots, held)]
    return task(fn, sources, output)


def sorted_slot(task, fn, r: int, metas: list, roots: list[str], parts: list, order, splitters: np.ndarray,
                output: str):
    """Range ``r`` (a task, after the splitters) of operands partitioned by partition_sorted
    (``parts[j]``: operand j's partition results): ``task(fn, its sources, output)``, each source
    the operand's rows in the range merged from its pieces' sorted runs (SortedRange), claiming
    ``order``; None for a range the splitters left out or that holds no rows (unless the whole
    input is empty and it is range 0: one empty part)."""
    if r > len(splitters):
        return None
    lo = splitters[r - 1:r] if r else None
    hi = splitters[r:r + 1] if r < len(splitters) else None
    sources = []
    for meta, root, operand in zip(metas, roots, parts):
        files = [(os.path.join(root, shuffled_name(i)), runs) for i, (_, runs, _, _) in enumerate(operand) if runs]
        src = SortedRange(files, lo, hi, meta, order)
        slices = src.slices()
        sources.append(src.with_meta(meta.with_(nnz=sum(len(k) for _, k in slices), sort_order=tuple(order))))
    if not any(s.meta.nnz for s in sources) and (r or any(rows for operand in parts for _, _, rows, _ in operand)):
        return None
    return task(fn, sources, output)


def _held(r: int, counts: list) -> list[int] | None:
    """Each operand's rows in range ``r`` from its partition tasks' results (rows per range
    first); None when the range holds none and is not the one part of an empty input."""
    per_operand = [np.sum([c[0] for c in operand], axis=0) for operand in counts]
    held = [int(n[r]) if r < len(n) else 0 for n in per_operand]
    if not sum(held) and (r or any(n.sum() for n in per_operand)):
        return None
    return held


def direct_slot(task, fn, r: int, metas: list, pieces: list, order, splitters: np.ndarray, output: str):
    """Range ``r`` of operands sorted on the key (a task, after the splitters): ``task(fn, its
    sources, output)``, each source the operand's rows in the range read where they stand
    (KeyRangeSource); None for a range the splitters left out."""
    if r > len(splitters):
        return None
    lo = splitters[r - 1] if r else None
    hi = splitters[r] if r < len(splitters) else None
    sources = [SortedKeyRange(p, meta, _codec(meta, order), lo, hi) for meta, p in zip(metas, pieces)]
    return task(fn, sources, output)


class SortedKeyRange(KeyRangeSource):
    """KeyRangeSource keying only the batches at the range's edges: the operand is sorted on
    the key, so a batch whose first and last keys lie in [lo, hi) lies there whole, and the
    range cuts an edge batch once (keying every batch cost a fifth of an add's range tasks,
    profiled).  A batch out of order is filtered row by row, as KeyRangeSource does, and the op's
    check of the order claim reports it; so is a batch of keys wider than 64 bits."""

    def iter_batches(self, batch_rows=None, *, budget=None):
        if not self.codec.packed:
            yield from super().iter_batches(batch_rows, budget=budget)
            return
        lo, hi = self.lo, self.hi
        for piece in filter(None, map(self.narrowed, self.pieces)):
            for batch in PieceSource(piece).iter_batches(batch_rows, budget=budget):
                n = batch.num_rows
                if not n:
                    continue
                first, last = self._keys(batch, [0, n - 1])
                if (lo is None or first >= lo) and (hi is None or last < hi):
                    yield batch
                    continue
                if (lo is not None and last < lo) or (hi is not None and first >= hi):
                    continue
                keys = self._keys(batch)
                if np.any(keys[1:] < keys[:-1]):
                    inside = (keys >= lo if lo is not None else True) & (keys < hi if hi is not None else True)
                    if inside.any():
                        yield batch.filter(inside)
                    continue
                a = 0 if lo is None else int(np.searchsorted(keys, lo, side="left"))
                z = n if hi is None else int(np.searchsorted(keys, hi, side="left"))
                if z > a:
                    yield batch.slice(a, z - a)

    def _keys(self, batch, rows=None) -> np.ndarray:
        K = self.meta.sparse_ndim
        cols = batch_columns(batch, K)
        return self.codec.encode(np.stack([c if rows is None else c[rows] for c in cols]).astype(np.int64, copy=False))


def range_dir(r: int) -> str:
    return f"range-{r:06d}"


def shuffled_name(piece: int) -> str:
    # Arrow IPC, not Parquet: written once and read once, nearby; encoding would be wasted.
    return f"piece-{piece:06d}.arrows"


# -- the driver ------------------------------------------------------------------------------

def part_keys(operands: list, edges: list, order) -> list | None:
    """For operands sorted on the key ``order`` and the (first, last) coordinates of their parts
    (``edges``: a dict part path -> edges per operand), each operand's parts as (path, first key,
    last key, rows), empty parts left out; None when an operand's edges are unknown, an edge lies
    outside the shape (left to the range tasks to refuse) or the keys do not pack into 64 bits."""
    if not edges or any(e is None for e in edges):
        return None
    codec = _codec(operands[0][1], order)
    if not codec.packed:
        return None
    keyed = []
    for (pieces, meta), found in zip(operands, edges):
        rows: dict[str, int] = {}
        for p in pieces:
            rows[p.path] = rows.get(p.path, 0) + p.rows
        parts = []
        for path, (first, last) in found.items():
            if first is None:
                continue
            coords = np.array([first, last], dtype=np.int64).T
            if np.any(coords < 0) or np.any(coords >= np.asarray(meta.shape[:meta.sparse_ndim])[:, None]):
                return None
            a, z = codec.encode(coords)
            parts.append((path, a, z, rows.get(path, 0)))
        keyed.append(parts)
    return keyed


def edge_splitters(keyed: list, ranges: int) -> np.ndarray:
    """Splitters for operands sorted on the key, from their parts' first keys (part_keys), with no
    sample read: up to ranges - 1 of the parts' beginnings, each the one nearest to an equal share
    of the rows below it (a part straddling a beginning counted half below it).  A range then
    begins where a part does, so that part's task reads it from its first row group, not a
    neighbour's too."""
    parts = [p for operand in keyed for p in operand]
    begins = np.unique(np.array([a for _, a, _, _ in parts], dtype=np.uint64))[1:]  # above the lowest key
    total = sum(n for *_, n in parts)
    if ranges <= 1 or not len(begins) or not total:
        return begins[:0]
    below = np.zeros(len(begins))
    for _, a, z, n in parts:
        below += np.where(z < begins, n, np.where(a < begins, n / 2, 0))
    shares = np.arange(1, ranges) * total / ranges
    return np.unique(begins[np.abs(below[None, :] - shares[:, None]).argmin(axis=1)])


def _meeting(pieces: list[Piece], parts: list, lo, hi) -> list[Piece]:
    """The pieces whose part's keys (part_keys) meet [lo, hi) (None: unbounded)."""
    held = {path for path, a, z, _ in parts if (hi is None or a < hi) and (lo is None or z >= lo)}
    return [p for p in pieces if p.path in held]


def splitters_of(samples: list[np.ndarray], ranges: int) -> np.ndarray:
    """Up to ranges - 1 increasing, distinct splitters at the quantiles of the pooled sample."""
    pooled = np.sort(np.concatenate(samples)) if samples else np.empty(0, dtype=np.uint64)
    if ranges <= 1 or not len(pooled):
        return pooled[:0]
    at = (np.arange(1, ranges) * len(pooled)) // ranges
    return np.unique(pooled[at])


class _Graph:
    """The futures of one range_map job, by round: samples, the splitters (a future, or none when
    the parts' edges gave them), each operand's partition tasks, and the range tasks."""

    def __init__(self, slots: list, samples: list = (), splitters: list = (), counts: list = ()):
        self.slots, self.samples = list(slots), list(samples)
        self.splitters, self.counts = list(splitters), list(counts)

    def partitions(self) -> list:
        return [f for operand in self.counts for f in operand]

    def everything(self) -> list:
        return [*self.samples, *self.splitters, *self.partitions(), *self.slots]


def _keyed_graph(client, operands: list, keyed: list, order, fn, out: PartDirectory, task, ranges: int) -> _Graph:
    """Operands sorted on the key whose parts' edges are known: the splitters from those edges,
    here (no sample round), and each range task given only the pieces that meet its range."""
    splitters = edge_splitters(keyed, ranges)
    metas = [meta for _, meta in operands]
    bounds = [None, *splitters, None]
    slots = [client.submit(direct_slot, task, fn, r, metas,
                           [_meeting(p, k, bounds[r], bounds[r + 1]) for (p, _), k in zip(operands, keyed)], order,
                           splitters, out.part(r), pure=False) for r in range(len(splitters) + 1)]
    return _Graph(slots)


def _sampled_splitters(client, pieces: list[Piece], order, count: int, budget: Budget, ranges: int) -> tuple:
    """The sample tasks of every piece and the splitters task over them."""
    samples = [client.submit(sample, p, order, count, budget, pure=False) for p in pieces]
    return samples, client.submit(pooled_splitters, samples, ranges, pure=False)


def _direct_graph(client, operands: list, order, fn, out: PartDirectory, task, ranges: int, count: int,
                  budget: Budget) -> _Graph:
    """Operands sorted on the key, their edges unknown: splitters from a sample, and each range
    task reading its keys where they stand (no partition round)."""
    pieces = [p for op_pieces, _ in operands for p in op_pieces]
    samples, splitters = _sampled_splitters(client, pieces, order, count, budget, ranges)
    metas = [meta for _, meta in operands]
    slots = [client.submit(direct_slot, task, fn, r, metas, [p for p, _ in operands], order, splitters,
                           out.part(r), pure=False) for r in range(max(ranges, 1))]
    return _Graph(slots, samples, [splitters])


def _sorted_graph(client, operands: list, roots: list[str], order, fn, out: PartDirectory, task, ranges: int,
                  count: int, budget: Budget) -> _Graph:
    """The sorted shuffle: the partition tasks sort and sample each piece, the splitters come
    after them, and each range task merges its slices of the sorted runs."""
    counts = [[client.submit(partition_sorted, p, i, order, root, count, budget, meta, pure=False)
               for i, p in enumerate(op_pieces)] for (op_pieces, meta), root in zip(operands, roots)]
    splitters = client.submit(pooled_splitters, [f for operand in counts for f in operand], ranges, pure=False)
    metas = [meta for _, meta in operands]
    slots = [client.submit(sorted_slot, task, fn, r, metas, roots, counts, order, splitters, out.part(r),
                           pure=False) for r in range(max(ranges, 1))]
    return _Graph(slots, splitters=[splitters], counts=counts)


def _shuffled_graph(client, operands: list, roots: list[str], order, fn, out: PartDirectory, task, ranges: int,
                    count: int, budget: Budget) -> _Graph:
    """The plain shuffle: splitters from a sample, each piece partitioned into ranges, and each
    range task reading its range's pieces unsorted."""
    pieces = [p for op_pieces, _ in operands for p in op_pieces]
    samples, splitters = _sampled_splitters(client, pieces, order, count, budget, ranges)
    counts = [[client.submit(partition, p, i, splitters, order, root, budget, meta, pure=False)
               for i, p in enumerate(op_pieces)] for (op_pieces, meta), root in zip(operands, roots)]
    metas = [meta for _, meta in operands]
    slots = [client.submit(range_slot, task, fn, r, metas, roots, counts, out.part(r), pure=False)
             for r in range(max(ranges, 1))]
    return _Graph(slots, samples, [splitters], counts)


def _follow_graph(client, graph: _Graph, outcome: Outcome, pieces: list[Piece], progress) -> list:
    """Watch the rounds of ``graph`` to the end (cancelling everything on any failure); the range
    tasks' results."""
    try:
        follow(client, graph.samples, outcome)
        if progress:
            progress.set_total(outcome.rows_in)
        follow(client, graph.partitions(), outcome, progress=progress, rows=[p.rows for p in pieces])
        if progress and graph.counts:
            progress.restart()
        # Each range counts its written rows as it finishes, up to the input's, and what they
        # leave out (duplicates summed, coordinates met in both operands) is counted at the end:
        # the job reports the rows it read, as one machine does.
        counted = 0

        def rows_of(d) -> int:
            nonlocal counted
            rows = min(0 if d is None else d[1].nnz, outcome.rows_in - counted)
            counted += rows
            return rows

        done = follow(client, graph.slots, outcome, progress=progress, rows=rows_of)
        if progress and counted < outcome.rows_in:
            progress.advance(outcome.rows_in - counted)
    except BaseException:
        everything = graph.everything()
        client.cancel(everything)
        settle(client, everything)
        raise
    return done


def _drop_empty_ranges(out: PartDirectory, done: list) -> None:
    """A range of a direct read found empty only once read: its part is dropped, unless every
    range is (part 0 stays)."""
    empty = [r for r, d in enumerate(done) if d is not None and not d[1].nnz]
    for r in empty[1:] if len(empty) == sum(d is not None for d in done) else empty:
        remove_path(out.part(r))
        done[r] = None


def _renumber_parts(out: PartDirectory, done: list, outcome: Outcome) -> None:
    """The parts renumbered in range order, skipping ranges that wrote none, and ``outcome``
    told what they hold."""
    written = []
    for r, d in enumerate(done):
        if d is not None:
            if r != len(written) and kind_of(out.part(r)):
                move(out.part(r), out.part(len(written)))
            written.append(d)
    outcome.results = [r for r, _, _ in written]
    outcome.part_metas = [m for _, m, _ in written]
    outcome.rows_out = sum(m.nnz for m in outcome.part_metas)
    outcome.parts = len(written)


def range_map(client, operands: list[tuple[list[Piece], TensorMeta]], order, fn, out: PartDirectory, *,
              ranges: int, budget: Budget, progress=None, task=range_task, sort: bool = False,
              edges: list | None = None) -> Outcome:
    """Shuffle the rows of every operand (its pieces, in order, and its metadata, whose
    sort_order and unique claims must hold for the pieces concatenated) into key ranges of the
    dimensions ``order``, and write part i of ``out`` as ``fn(*range i of each operand, path)``
    (run by ``task``, which returns range_task's triple); empty ranges make no part, and an
    empty input one part of empty operands.  ``sort``: ``order`` is a full dimension order and
    ``fn`` wants its ranges sorted in it (stably): the pieces are sorted as they are partitioned
    and each range merged from their runs (partition_sorted, SortedRange).  ``edges``: each
    operand's parts' (first, last) coordinates where known (part_edges, a dict by part path); for
    operands sorted on the key they give the splitters (edge_splitters) and each range task only
    the pieces that meet its range.  Operands whose extents on the key differ are the caller's to
    refuse first (check_key_extents, as on_ranges does before the cluster is asked anything)."""
    order = tuple(order)
    pieces = [p for op_pieces, _ in operands for p in op_pieces]
    outcome = Outcome(rows_in=sum(p.rows for p in pieces))
    count = -(-SAMPLE_PER_RANGE * ranges // max(len(pieces), 1))
    # Operands sorted on the key already hold each range as a run of rows: read where they stand.
    direct = bool(order) and all(already_sorted(meta, order) for _, meta in operands)
    roots = [out.scratch(f"operand-{j}") for j in range(len(operands))]
    # The whole graph at once (see the module docstring): nothing comes back to the client
    # between rounds.
    # The sorted runs are memory-mapped by the range tasks; on other storage each task would read
    # every run whole: there the ranges are shuffled unsorted and each sorted by ``fn``, stably.
    sort = sort and not direct and not is_remote(out.root)
    keyed = part_keys(operands, edges, order) if direct else None
    if keyed is not None:
        graph = _keyed_graph(client, operands, keyed, order, fn, out, task, ranges)
    elif direct:
        graph = _direct_graph(client, operands, order, fn, out, task, ranges, count, budget)
    elif sort:
        graph = _sorted_graph(client, operands, roots, order, fn, out, task, ranges, count, budget)
    else:
        graph = _shuffled_graph(client, operands, roots, order, fn, out, task, ranges, count, budget)
    done = _follow_graph(client, graph, outcome, pieces, progress)
    if direct:
        _drop_empty_ranges(out, done)
    _renumber_parts(out, done, outcome)
    return outcome


def check_key_extents(metas: list[TensorMeta], order) -> None:
    """The operands' extents on the key's dimensions must agree (the other dimensions are the
    op's business: concat's differ)."""
    shape = [metas[0].shape[d] for d in order]
    for meta in metas[1:]:
        if meta.sparse_ndim != metas[0].sparse_ndim or [meta.shape[d] for d in order] != shape:
            raise ShapeMismatch(f"operand shapes differ: {list(metas[0].shape)} and {list(meta.shape)}")


def pooled_splitters(samples: list, ranges: int) -> np.ndarray:
    """The splitters of the sample (or partition_sorted) tasks' results, their samples first
    (a task)."""
    return splitters_of([s[0] for s in samples], ranges)


def operand_meta(path: str) -> TensorMeta:
    """The metadata of an operand the driver plans with (stdin refused first: the workers read
    the operands again)."""
    refuse_stdin(path)
    with open_source(path) as src:
        return src.meta


def on_ranges(client, fn, paths: list[str], output: str, *, order=None, memory=None, progress=None,
              ranges: int | None = None, sort: bool = False) -> dict:
    """An op's whole job on the cluster of ``client``: the operands at ``paths`` shuffled into key
    ranges of the dimensions ``order`` (None: every sparse dimension of the first operand, in
    order) and written, range by range, by ``fn(*sources, path)`` into the part directory
    ``output``; the summary (rows, shape, parts, workers, peak worker memory).  ``ranges``
    defaults to one per input piece, at least one per worker.  Each range of an operand claims
    what the whole does as one machine opens it (a directory: its parts' claims and seams,
    io.source.derived_claims): the range holds some of its rows in input order, so the claims
    hold there too, and ``fn`` takes the path the single machine takes.  ``sort``: see
    range_map."""
    check_output(output)
    check_inputs(paths)
    budget = budget_of(memory)
    with PartDirectory(output) as out:
        paths = [shared_copy(path, join_path(out.scratch("inputs"), f"operand-{j}.parquet"), budget)
                 for j, path in enumerate(paths)]
        sources = []
        for path in paths:
            with open_source(path) as src:
                sources.append(src)  # its parts' paths and metadata, for after the files are closed
        if order is None:
            order = range(sources[0].meta.sparse_ndim)
        # The operands are checked before the cluster is first asked anything (the command line
        # connects then).
        check_key_extents([src.meta for src in sources], tuple(order))
        workers = worker_count(client)
        # The parts' edges give the splitters of operands sorted on the key (no sample round).
        keyed = [bool(order) and already_sorted(src.meta, tuple(order)) for src in sources]
        found = iter(part_edges(client, [src for src, k in zip(sources, keyed) if k], workers) if any(keyed) else [])
        edges = [next(found) if k else None for k in keyed]
        edges = [None if e is None else dict(zip((p.path for p in src.parts), e)) for src, e in zip(sources, edges)]
        operands = [(pieces_of(path, workers), src.meta) for path, src in zip(paths, sources)]
        count = ranges or max(max(len(p) for p, _ in operands), workers)
        outcome = range_map(client, operands, order, fn, out, ranges=count, budget=budget, progress=progress,
                            sort=sort, edges=edges)
    return {**outcome.summary(), "output": output}
