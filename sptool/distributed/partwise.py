"""A ``Partwise`` op on a cluster: every input piece is mapped to a partial on a worker
(``map_part``), and the partials are combined.  A combine step that is a sort with a duplicates
policy (reduce --op sum, sparse + sparse add) is itself distributed, range by range
(rangesort.py); the parts of the output are then key ranges, as reorder writes them."""

from __future__ import annotations

import os

from .._memory import Budget, budget_of, peak_rss
from ..errors import UsageError
from ..format import value_type_of_dtype
from ..io import open_source, part_name
from ..stream.engine import Partwise
from ..stream.reorder import Reorder
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .pieces import Piece, PieceSource, pieces_of
from .progress import follow
from .rangesort import Outcome, range_sort


def map_piece(op: Partwise, piece: Piece, output: str, budget: Budget, tmp_dir) -> tuple:
    """One piece's partial, written to ``output`` (a task)."""
    with PieceSource(piece) as src:
        op.map_part(src, output, budget=budget, tmp_dir=tmp_dir)
    return (peak_rss(),)


def run_partwise(client, op: Partwise, pieces: list[Piece], metas, out, *, budget: Budget, tmp_dir=None,
                 progress=None) -> Outcome:
    """Map ``pieces`` (of one or more operands whose metadata are ``metas``) through ``op`` and
    combine the partials into the PartDirectory ``out``."""
    for meta in metas:
        op.check(meta)
    partials = out.scratch("partials")
    outcome = Outcome()
    if progress:
        progress.set_total(sum(p.rows for p in pieces))
    futures = [client.submit(map_piece, op, p, os.path.join(partials, part_name(i)), budget, tmp_dir, pure=False)
               for i, p in enumerate(pieces)]
    follow(client, futures, outcome, progress=progress, rows=[p.rows for p in pieces])
    with open_source(partials) as src:
        combine = op.combine(src.meta)
        if not isinstance(combine, Reorder):
            raise UsageError(f"{type(op).__name__} has no distributed combine step")
        partial_pieces = pieces_of(partials, outcome.workers)
        done = range_sort(client, partial_pieces, src.meta, combine.order, combine.duplicates, out,
                          ranges=max(len(pieces), outcome.workers), budget=budget, tmp_dir=tmp_dir)
    done.rows_in = sum(p.rows for p in pieces)
    done.peak_worker_memory = max(done.peak_worker_memory, outcome.peak_worker_memory)
    return done


def on_cluster(client, op: Partwise, paths: list[str], output: str, *, memory=None, tmp_dir=None,
               progress=None) -> dict:
    """An op's whole job on the cluster of ``client``: the pieces of every operand in ``paths``
    mapped through ``op`` and combined into the part directory ``output``.  What the op passes
    through here (its ``client=``): reduce --op sum, sparse + sparse add."""
    check_output(output)
    metas = []
    for path in paths:
        with open_source(path) as src:
            metas.append(src.meta)
    workers = worker_count(client)
    pieces = [piece for path in paths for piece in pieces_of(path, workers)]
    with PartDirectory(output) as out:
        outcome = run_partwise(client, op, pieces, metas, out, budget=budget_of(memory), tmp_dir=tmp_dir,
                               progress=progress)
    first = outcome.part_metas[0]
    return {"rows_in": outcome.rows_in, "rows_out": outcome.rows_out, "shape": list(first.shape),
            "value_type": value_type_of_dtype(first.dtype), "output": output, "parts": outcome.parts,
            "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}
