"""An op run where the input stands, for a dataset sorted on a dimension ``d`` the op keeps: the
rows of one value of ``d`` are consecutive in the whole, so every output coordinate's rows lie
in one piece, except those of the values of ``d`` met at a seam between pieces.  Each piece is
run through the single-machine op as it stands (its Parquet row groups, columns the op does not
need left undecoded), less the rows of its seam values; each seam value's rows, from every
piece that holds them, in input order, go through the op in a task of their own.  No row is
shuffled.

Each output coordinate's rows thus reach the op whole and in input order, as in the key ranges
of ranges.py, so the results are the single machine's (float sums included), and the parts,
in input order with each seam's part between the pieces it joins, concatenate to the
single-machine output (when the op's result at a coordinate does not depend on where the
batches of its rows begin: see by_seams).  The first and last values of ``d`` in a piece are its first and last
row groups' statistics (the dataset is sorted on ``d`` first); without statistics the caller
takes another path.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from .._memory import peak_rss
from ..io import ParquetSource, TensorSource, open_source
from .partdir import PartDirectory
from .pieces import Piece, PieceSource
from .progress import Outcome, follow


def _where(batch, name: str, values, keep: bool):
    """The rows of ``batch`` whose column ``name`` is (``keep``) or is not in ``values``."""
    column = batch.column(batch.schema.get_field_index(name))
    hit = pc.is_in(column, value_set=_value_set(values))
    return batch.filter(hit if keep else pc.invert(hit))


def _value_set(values):
    return pa.array(sorted(values), type=pa.int64())


class TrimmedPiece(PieceSource):
    """A piece without the rows whose index on dimension ``dim`` is one of ``seams`` (its seam
    values, run elsewhere), as a tensor of ``meta`` (the count of the rows left is not known
    before they are read)."""

    def __init__(self, piece: Piece, dim: int, seams, meta):
        super().__init__(piece)
        self.meta = meta.with_(nnz=None)
        self.name, self.seams = f"indices_{dim}", tuple(seams)

    def part_batches(self, part, batch_rows, *, groups=None, columns=None, prepare=None):
        for batch in super().part_batches(part, batch_rows, groups=groups, columns=columns):
            if self.seams:
                batch = _where(batch, self.name, self.seams, keep=False)
                if not batch.num_rows:  # all seam rows: nothing for the op (nor its prepare) to see
                    continue
            yield batch if prepare is None else (batch, prepare(batch))


class SeamSource(TensorSource):
    """The rows whose index on dimension ``dim`` is ``value``, from ``pieces`` in order (only the
    row groups whose statistics allow the value are read), as one tensor of ``meta``."""

    kind = "seam"

    def __init__(self, pieces: list[Piece], dim: int, value: int, meta):
        super().__init__(pieces[0].path, meta.with_(nnz=None), meta.arrow_schema())
        self.pieces, self.dim, self.value = pieces, dim, value

    def iter_batches(self, batch_rows=None, *, budget=None):
        for piece in self.pieces:
            src = PieceSource(piece)
            footer = src.parts[0].file.metadata
            groups = [g for g in _groups(piece, footer) if _may_hold(footer.row_group(g).column(self.dim), self.value)]
            whole = PieceSource(Piece(piece.path, tuple(groups), piece.rows))
            for batch in whole.iter_batches(batch_rows, budget=budget):
                batch = _where(batch, f"indices_{self.dim}", [self.value], keep=True)
                if batch.num_rows:
                    yield batch


def _groups(piece: Piece, footer) -> list[int]:
    return list(range(footer.num_row_groups) if piece.groups is None else piece.groups)


def _may_hold(column, value: int) -> bool:
    st = column.statistics
    return st is None or not st.has_min_max or st.min <= value <= st.max


def edge_values(piece: Piece, dim: int, footer) -> tuple[int, int] | None:
    """The first and last index on ``dim`` of a piece of a dataset sorted on ``dim`` first: its
    first non-empty row group's minimum, its last one's maximum; None without statistics."""
    groups = [g for g in _groups(piece, footer) if footer.row_group(g).num_rows]
    stats = [footer.row_group(g).column(dim).statistics for g in (groups[0], groups[-1])]
    if any(st is None or not st.has_min_max for st in stats):
        return None
    return int(stats[0].min), int(stats[1].max)


def seam_plan(edges: list[tuple[int, int] | None]) -> list[tuple]:
    """The tasks for pieces with ``edges`` (first and last value of the sorted dimension, None
    for an empty piece), in output order: ("piece", i, seam values to leave out) and ("seam",
    value, indices of the pieces holding it)."""
    held = [i for i, e in enumerate(edges) if e is not None]
    seams: dict[int, list[int]] = {}
    for i, j in zip(held, held[1:]):
        if edges[i][1] == edges[j][0]:
            chain = seams.setdefault(edges[i][1], [])
            chain += [k for k in (i, j) if k not in chain]
    plan = []
    for i in held:
        first, last = edges[i]
        if not (first == last and first in seams):  # a piece of one seam value is all in that seam's task
            plan.append(("piece", i, tuple(v for v in {first, last} if v in seams)))
        if last in seams and seams[last][0] == i:
            plan.append(("seam", last, tuple(seams[last])))
    return plan


# -- tasks ----------------------------------------------------------------------------------

def piece_task(fn, piece: Piece, dim: int, seams, meta, output: str) -> tuple:
    """``fn`` on a piece less its seam values' rows, into ``output``: (what fn returned, the
    part's metadata, the worker's peak memory)."""
    result = fn(TrimmedPiece(piece, dim, seams, meta), output)
    with open_source(output) as written:
        return result, written.meta, peak_rss()


def seam_task(fn, pieces: list[Piece], dim: int, value: int, meta, output: str) -> tuple:
    """``fn`` on one seam value's rows, into ``output``: as piece_task."""
    result = fn(SeamSource(pieces, dim, value, meta), output)
    with open_source(output) as written:
        return result, written.meta, peak_rss()


# -- the driver -----------------------------------------------------------------------------

def piece_edges(src: ParquetSource, pieces: list[Piece], dim: int) -> list | None:
    """edge_values of every piece of ``src`` (None for an empty piece), or None when a piece's
    statistics do not tell them."""
    footers = {p.path: p.file.metadata for p in src.parts}
    edges = []
    for piece in pieces:
        e = edge_values(piece, dim, footers[piece.path]) if piece.rows else None
        if piece.rows and e is None:
            return None
        edges.append(e)
    return edges


def by_seams(client, pieces: list[Piece], edges: list, dim: int, meta, fn, out: PartDirectory, *,
             progress=None) -> Outcome:
    """``fn(source, part path)`` over ``pieces`` (of a directory whose whole is sorted on ``dim``
    first; ``edges`` from piece_edges) as the module docstring says, into ``out``: the Outcome.
    Every source ``fn`` gets claims what the directory's does as one machine opens it (``meta``,
    no order across parts), so the op takes the path it takes on one machine: a reduction sums
    each coordinate's rows one after another, whatever the batches, in that path."""
    outcome = Outcome(rows_in=sum(p.rows for p in pieces))
    if progress:
        progress.set_total(outcome.rows_in)
    plan = seam_plan(edges)
    futures, rows = [], []
    for k, (what, at, which) in enumerate(plan):
        if what == "piece":
            futures.append(client.submit(piece_task, fn, pieces[at], dim, which, meta, out.part(k),
                                         pure=False))
            rows.append(pieces[at].rows)
        else:
            futures.append(client.submit(seam_task, fn, [pieces[i] for i in which], dim, at, meta, out.part(k),
                                         pure=False))
            rows.append(0)
    if not futures:  # an empty input: the op on no rows, one empty part
        futures.append(client.submit(seam_task, fn, pieces[:1], dim, -1, meta, out.part(0), pure=False))
        rows.append(0)
    done = follow(client, futures, outcome, progress=progress, rows=rows)
    # Parts without rows (a piece that was all seams) are left out, the rest renumbered in order.
    kept = [k for k, d in enumerate(done) if d[1].nnz] or [0]
    for k in set(range(len(done))) - set(kept):
        os.remove(out.part(k))
    for n, k in enumerate(kept):
        if n != k:
            os.replace(out.part(k), out.part(n))
    written = [done[k] for k in kept]
    outcome.results = [r for r, _, _ in written]
    outcome.part_metas = [m for _, m, _ in written]
    outcome.rows_out = sum(m.nnz for m in outcome.part_metas)
    outcome.parts = len(written)
    return outcome

