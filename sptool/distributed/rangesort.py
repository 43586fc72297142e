"""Sorting a tensor across a cluster by key ranges, the distributed ``reorder``.

Three rounds of tasks, each a plain function of paths (tasks move no data through Dask):

1. ``sample``: every piece returns evenly spaced packed sort keys (``KeyCodec``, the keys of the
   external sort); the driver takes the splitters from their union, so range r holds the keys in
   [splitter r-1, splitter r).  Equal keys never straddle a splitter, and repeated splitters (a
   key holding much of the data) collapse into one range.
2. ``partition``: every piece writes its rows of range r to ``range-r/part-p`` in the scratch
   directory (bounds-checked on the way, naming the piece and row), keeping their order.
3. ``sort_range``: range r's directory is read as one dataset, pieces in input order, and
   sorted by the engine's ``Reorder`` (the external sort, within ``--memory`` on that worker,
   with the duplicates policy) into output part i.  The sort is stable and the pieces are read in
   input order, so rows sharing a coordinate keep their input order: part i holds exactly what
   the single-machine sort puts in key range i, and the concatenated parts are that sort's output.

A task that is lost with its worker is run again; each writes its files whole (the io sinks
rename a hidden sibling), so a rerun replaces what it may have left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .._memory import Budget, peak_rss
from ..format import TensorMeta
from ..io import open_sink, open_source, part_name
from ..stream.axes import normalize_order
from ..stream.bounds import checked
from ..stream.engine import run
from ..stream.reorder import Reorder
from ..stream.sort import KeyCodec
from .pieces import Piece, PieceSource
from .progress import follow

# Sampled keys per output range: enough that ranges come out within a few per cent of even.
SAMPLE_PER_RANGE = 256


@dataclass
class Outcome:
    """What a distributed job did, for its summary."""

    rows_in: int = 0
    rows_out: int = 0
    parts: int = 0
    workers: int = 0
    peak_worker_memory: int = 0
    part_metas: list = field(default_factory=list)


def _codec(meta: TensorMeta, order) -> KeyCodec:
    return KeyCodec(meta.shape, order, meta.sparse_ndim)


# -- tasks (run on workers) ------------------------------------------------------------------

def sample(piece: Piece, order, count: int, budget: Budget) -> tuple[np.ndarray, int]:
    """About ``count`` sort keys of a piece's rows, evenly spaced in stored order."""
    src = PieceSource(piece)
    K = src.meta.sparse_ndim
    codec = _codec(src.meta, order)
    stride = max(1, piece.rows // max(count, 1))
    names = [f"indices_{k}" for k in range(K)]
    taken, seen = [], 0
    for batch in src.part_batches(src.parts[0], src.batch_rows(budget), columns=names):
        n = batch.num_rows
        first = (-seen) % stride
        if first < n and not any(c.null_count for c in batch.columns):
            rows = np.arange(first, n, stride)
            keys = np.stack([np.asarray(batch.column(k).to_numpy(), dtype=np.int64)[rows] for k in range(K)])
            # An index outside the shape would pack into a wrong key: left to partition to refuse.
            inside = np.all((keys >= 0) & (keys < np.asarray(src.meta.shape[:K])[:, None]), axis=0)
            taken.append(codec.encode(np.ascontiguousarray(keys[:, inside])))
        seen += n
    return (np.concatenate(taken) if taken else codec.encode(np.empty((K, 0), dtype=np.int64))), peak_rss()


def partition(piece: Piece, index: int, splitters: np.ndarray, order, root: str, budget: Budget) -> tuple:
    """Write the piece's rows of each key range to ``root/range-r/part-index``; the rows per
    range."""
    src = PieceSource(piece)
    meta = src.meta
    codec = _codec(meta, order)
    counts = np.zeros(len(splitters) + 1, dtype=np.int64)
    bucket_meta = meta.with_(sort_order=(), unique=False, nnz=None)
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
                    sinks[r] = open_sink(os.path.join(root, range_dir(r), part_name(index)), bucket_meta,
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


def sort_range(source, output: str, order, duplicates: str, budget: Budget, tmp_dir) -> tuple:
    """Sort one key range (a directory of partitioned pieces, or a Piece) into the part
    ``output``: (rows in, final metadata, peak memory)."""
    with (PieceSource(source) if isinstance(source, Piece) else open_source(source)) as src:
        sink = run(Reorder(order, duplicates), src, output, budget=budget, tmp_dir=tmp_dir)
        return src.meta.nnz, sink.final_meta, peak_rss()


def range_dir(r: int) -> str:
    return f"range-{r:06d}"


# -- the driver ------------------------------------------------------------------------------

def splitters_of(samples: list[np.ndarray], ranges: int) -> np.ndarray:
    """Up to ranges - 1 increasing, distinct splitters at the quantiles of the pooled sample."""
    pooled = np.sort(np.concatenate(samples)) if samples else np.empty(0, dtype=np.uint64)
    if ranges <= 1 or not len(pooled):
        return pooled[:0]
    at = (np.arange(1, ranges) * len(pooled)) // ranges
    return np.unique(pooled[at])


def range_sort(client, pieces: list[Piece], meta: TensorMeta, order, duplicates: str, out, *, ranges: int,
               budget: Budget, tmp_dir=None, progress=None, first_part: int = 0) -> Outcome:
    """Sort the rows of ``pieces`` (one tensor with ``meta``, in piece order) by ``order`` into
    parts ``first_part``, ... of the PartDirectory ``out``, one part per non-empty key range."""
    order = normalize_order(order, meta.sparse_ndim)
    Reorder(order, duplicates).check(meta)  # a bad order or policy fails before any task runs
    outcome = Outcome(rows_in=sum(p.rows for p in pieces))
    count = -(-SAMPLE_PER_RANGE * ranges // max(len(pieces), 1))
    samples = follow(client, [client.submit(sample, p, order, count, budget, pure=False) for p in pieces],
                     outcome, progress=None)
    splitters = splitters_of([s for s, _ in samples], ranges)
    root = out.scratch("ranges")
    for r in range(len(splitters) + 1):  # made here: two workers making one would race
        os.mkdir(os.path.join(root, range_dir(r)))
    if progress:
        progress.set_total(outcome.rows_in)
    futures = [client.submit(partition, p, i, splitters, order, root, budget, pure=False)
               for i, p in enumerate(pieces)]
    counts = follow(client, futures, outcome, progress=progress, rows=[p.rows for p in pieces])
    per_range = np.sum([c for c, _ in counts], axis=0) if counts else np.zeros(1, dtype=np.int64)
    filled = [r for r in range(len(per_range)) if per_range[r]]
    sources = [os.path.join(root, range_dir(r)) for r in filled] or [pieces[0]]  # an empty tensor: one empty part
    if progress:
        progress.restart()
    futures = [client.submit(sort_range, s, out.part(first_part + i), order, duplicates, budget, tmp_dir, pure=False)
               for i, s in enumerate(sources)]
    done = follow(client, futures, outcome, progress=progress, rows=[int(per_range[r]) for r in filled] or [0])
    outcome.part_metas = [m for _, m, _ in done]
    outcome.rows_out = sum(m.nnz for m in outcome.part_metas)
    outcome.parts = len(done)
    return outcome
