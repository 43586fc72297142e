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

A task lost with its worker is run again; each writes its files whole (the io sinks rename a
hidden sibling), so a rerun replaces what it may have left.
"""

from __future__ import annotations

import os

import numpy as np

from .._memory import Budget, budget_of, peak_rss
from ..errors import ShapeMismatch
from ..format import TensorMeta
from ..io import check_inputs, open_sink, open_source
from ..stream.bounds import checked
from ..stream.sort import KeyCodec
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .pieces import Piece, PieceSource, ShuffledSource, pieces_of, refuse_stdin, shared_copy
from .progress import Outcome, follow
from .seams import dataset_claims

# Sampled keys per output range: enough that ranges come out within a few per cent of even.
SAMPLE_PER_RANGE = 256


def _codec(meta: TensorMeta, order) -> KeyCodec:
    return KeyCodec(meta.shape, order, meta.sparse_ndim)


# -- tasks (run on workers) ------------------------------------------------------------------

def sample(piece: Piece, order, count: int, budget: Budget) -> tuple[np.ndarray, int]:
    """About ``count`` keys of a piece's rows, evenly spaced in stored order."""
    src = PieceSource(piece)
    K = src.meta.sparse_ndim
    codec = _codec(src.meta, order)
    stride = max(1, piece.rows // max(count, 1))
    names = [f"indices_{d}" for d in order]
    taken, seen = [], 0
    for batch in src.part_batches(src.parts[0], src.batch_rows(budget), columns=names):
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


def partition(piece: Piece, index: int, splitters: np.ndarray, order, root: str, budget: Budget) -> tuple:
    """Write the piece's rows of each key range to ``root/range-r/piece-index.arrows``; the rows
    per range."""
    src = PieceSource(piece)
    meta = src.meta
    codec = _codec(meta, order)
    counts = np.zeros(len(splitters) + 1, dtype=np.int64)
    shuffled = meta.with_(sort_order=(), unique=False, nnz=None)
    sinks = {}
    try:
        for batch, cols in checked(src.iter_batches(budget=budget), meta, path=piece.path):
            ranges = np.searchsorted(splitters, codec.encode(np.stack(cols)), side="right")
            perm = np.argsort(ranges, kind="stable")
            ranges = ranges[perm]
            batch = batch.take(perm)
            edges = np.flatnonzero(np.diff(ranges)) + 1
            for a, b in zip(np.r_[0, edges], np.r_[edges, len(ranges)]):
                r = int(ranges[a])
                if r not in sinks:
                    sinks[r] = open_sink(os.path.join(root, range_dir(r), shuffled_name(index)), shuffled,
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


def range_task(fn, sources: list, output: str) -> tuple:
    """``fn(*sources, output)``: one key range of every operand through the op into output part
    ``output``; (what fn returned, the part's metadata, peak memory)."""
    result = fn(*sources, output)
    with open_source(output) as written:
        return result, written.meta, peak_rss()


def range_dir(r: int) -> str:
    return f"range-{r:06d}"


def shuffled_name(piece: int) -> str:
    # Arrow IPC, not Parquet: written once and read once, nearby; encoding would be wasted.
    return f"piece-{piece:06d}.arrows"


def _listing(directory: str) -> list[str]:
    return [os.path.join(directory, n) for n in sorted(os.listdir(directory)) if n.endswith(".arrows")]


# -- the driver ------------------------------------------------------------------------------

def splitters_of(samples: list[np.ndarray], ranges: int) -> np.ndarray:
    """Up to ranges - 1 increasing, distinct splitters at the quantiles of the pooled sample."""
    pooled = np.sort(np.concatenate(samples)) if samples else np.empty(0, dtype=np.uint64)
    if ranges <= 1 or not len(pooled):
        return pooled[:0]
    at = (np.arange(1, ranges) * len(pooled)) // ranges
    return np.unique(pooled[at])


def range_map(client, operands: list[tuple[list[Piece], TensorMeta]], order, fn, out: PartDirectory, *,
              ranges: int, budget: Budget, progress=None, task=range_task) -> Outcome:
    """Shuffle the rows of every operand (its pieces, in order, and its metadata, whose
    sort_order and unique claims must hold for the pieces concatenated) into key ranges of the
    dimensions ``order``, and write part i of ``out`` as ``fn(*range i of each operand, path)``
    (run by ``task``, which returns range_task's triple); empty ranges make no part, and an
    empty input one part of empty operands."""
    order = tuple(order)
    # The key's extents must agree (the other dimensions are the op's business: concat's differ).
    shape = [operands[0][1].shape[d] for d in order]
    for _, meta in operands[1:]:
        if meta.sparse_ndim != operands[0][1].sparse_ndim or [meta.shape[d] for d in order] != shape:
            raise ShapeMismatch(f"operand shapes differ: {list(operands[0][1].shape)} and {list(meta.shape)}")
    pieces = [p for op_pieces, _ in operands for p in op_pieces]
    outcome = Outcome(rows_in=sum(p.rows for p in pieces))
    count = -(-SAMPLE_PER_RANGE * ranges // max(len(pieces), 1))
    samples = follow(client, [client.submit(sample, p, order, count, budget, pure=False) for p in pieces], outcome)
    splitters = splitters_of([s for s, _ in samples], ranges)
    roots = [out.scratch(f"operand-{j}") for j in range(len(operands))]
    for root in roots:
        for r in range(len(splitters) + 1):  # made here: two workers making one would race
            os.mkdir(os.path.join(root, range_dir(r)))
    if progress:
        progress.set_total(outcome.rows_in)
    futures = [client.submit(partition, p, i, splitters, order, root, budget, pure=False)
               for (op_pieces, _), root in zip(operands, roots) for i, p in enumerate(op_pieces)]
    counts = follow(client, futures, outcome, progress=progress, rows=[p.rows for p in pieces])
    per_operand, at = [], 0
    for op_pieces, _ in operands:
        per_operand.append(np.sum([c for c, _ in counts[at:at + len(op_pieces)]], axis=0))
        at += len(op_pieces)
    per_range = np.sum(per_operand, axis=0)
    filled = [r for r in range(len(per_range)) if per_range[r]] or [0]  # an empty input: one empty part
    jobs = []
    for r in filled:
        # An operand's order and uniqueness claims (for its whole, see seams.py) hold for a range
        # of it: its pieces' rows, concatenated in input order.
        jobs.append([ShuffledSource(_listing(os.path.join(root, range_dir(r))), meta.with_(nnz=int(n[r])))
                     for (_, meta), root, n in zip(operands, roots, per_operand)])
    if progress:
        progress.restart()
    futures = [client.submit(task, fn, sources, out.part(i), pure=False) for i, sources in enumerate(jobs)]
    done = follow(client, futures, outcome, progress=progress, rows=[int(per_range[r]) for r in filled])
    outcome.results = [r for r, _, _ in done]
    outcome.part_metas = [m for _, m, _ in done]
    outcome.rows_out = sum(m.nnz for m in outcome.part_metas)
    outcome.parts = len(done)
    return outcome


def operand_meta(path: str) -> TensorMeta:
    """The metadata of an operand the driver plans with (stdin refused first: the workers read
    the operands again)."""
    refuse_stdin(path)
    with open_source(path) as src:
        return src.meta


def on_ranges(client, fn, paths: list[str], output: str, *, order, memory=None, progress=None,
              ranges: int | None = None, claims: bool = True) -> dict:
    """An op's whole job on the cluster of ``client``: the operands at ``paths`` shuffled into key
    ranges of the dimensions ``order`` and written, range by range, by ``fn(*sources, path)``
    into the part directory ``output``; the summary (rows, shape, parts, workers, peak worker
    memory).  ``ranges`` defaults to one per input piece, at least one per worker.  ``claims``:
    each range of an operand whose whole is unique keeps its order and uniqueness (seams.py), so
    ``fn`` need not sort it again (with no duplicates to combine, the result is the same); False
    for an op whose float results depend on the path it takes (reduce), which then sorts every
    range as the single machine sorts a directory."""
    check_output(output)
    check_inputs(paths)
    workers = worker_count(client)
    budget = budget_of(memory)
    with PartDirectory(output) as out:
        operands = []
        for j, path in enumerate(paths):
            path = shared_copy(path, os.path.join(out.scratch("inputs"), f"operand-{j}.parquet"), budget)
            with open_source(path) as src:
                sort_order, unique = dataset_claims(client, src) if claims else ((), False)
                if not unique:  # duplicates are combined in a path-dependent way (float sums): sort as one machine
                    sort_order = ()
                operands.append((pieces_of(path, workers), src.meta.with_(sort_order=sort_order, unique=unique)))
        count = ranges or max(max(len(p) for p, _ in operands), workers)
        outcome = range_map(client, operands, order, fn, out, ranges=count, budget=budget, progress=progress)
    return {**outcome.summary(), "output": output}
