"""Per-part maps on a cluster: an op whose output rows at an input row depend on that row alone
(transpose's and reshape's index arithmetic, retain's condition, map's function, mul and div)
applied to every input piece on its own, by a task that runs the single-machine op on the piece,
each writing one part of the output directory.  Pieces are in input order, so the parts
concatenated are the single-machine output row for row, and each part carries the metadata the
single machine writes for those rows (the op's own plan, from the piece's metadata).

An op that sorts its output (transpose), or sums an operand's duplicates first (map of a
non-additive function, mul and div when the type widens), does not map piece by piece: it runs
on key ranges of the order it sorts by (ranges.py), each range handed whole, in input order, to
the single-machine op, so the sort and the sums come out as on one machine."""

from __future__ import annotations

from .._memory import Budget, budget_of, peak_rss
from ..io import join_path, open_source
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .pieces import Piece, PieceSource, pieces_of, refuse_stdin, shared_copy
from .progress import Outcome, follow


def mapped_piece(fn, piece: Piece, output: str) -> tuple:
    """``fn(source, output)`` on one piece (a task): (what fn returned, the written part's
    metadata, the worker's peak memory)."""
    result = fn(PieceSource(piece), output)
    with open_source(output) as written:
        return result, written.meta, peak_rss()


def each_piece(client, fn, path: str, out: PartDirectory, target, *, budget: Budget, progress=None,
               pieces=None, task=mapped_piece) -> tuple:
    """``fn(piece source, target(i))`` for every piece i of the operand at ``path`` (an Arrow
    stream file copied first to the job's shared scratch), in parallel, each by ``task(fn, piece,
    target(i))``: (the tasks' results in piece order, the Outcome so far, the pieces).  ``pieces(path,
    workers)`` cuts the operand (default ``pieces_of``; an op that skips what it cannot need
    gives its own)."""
    path = shared_copy(path, join_path(out.scratch("inputs"), "operand-0.parquet"), budget)
    cut = (pieces or pieces_of)(path, worker_count(client))
    outcome = Outcome(rows_in=sum(p.rows for p in cut))
    if progress:
        progress.set_total(outcome.rows_in)
    futures = [client.submit(task, fn, p, target(i), pure=False) for i, p in enumerate(cut)]
    return follow(client, futures, outcome, progress=progress, rows=[p.rows for p in cut]), outcome, cut


def per_piece(client, fn, path: str, output: str, *, memory=None, progress=None, pieces=None) -> dict:
    """The part directory ``output`` whose part i is ``fn(piece i of path, part path)``; the summary
    (rows, shape, parts, workers, peak worker memory; ``results``: what fn returned per part).
    ``pieces``: as each_piece takes it."""
    check_output(output)
    refuse_stdin(path)
    budget = budget_of(memory)
    with PartDirectory(output) as out:
        done, outcome, _ = each_piece(client, fn, path, out, out.part, budget=budget, progress=progress,
                                      pieces=pieces)
        outcome.results = [r for r, _, _ in done]
        outcome.part_metas = [m for _, m, _ in done]
        outcome.rows_out = sum(m.nnz for m in outcome.part_metas)
        outcome.parts = len(done)
    return {**outcome.summary(), "output": output, "sort_order": list(outcome.part_metas[0].sort_order)}
