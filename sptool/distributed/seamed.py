"""An op run where the input stands, for a directory whose parts are sorted on a dimension ``d``
the op keeps, each part's values of ``d`` at or above the previous part's: the rows of one value
of ``d`` are then consecutive in the whole, so every output coordinate's rows lie in one piece,
except those of a value of ``d`` met at a seam between pieces.  Each piece is run through the
single-machine op as it stands (its Parquet row groups, columns the op does not need left
undecoded) by a task of its own: less the rows of the value it begins with when an earlier piece
holds that value too, plus, when the value it ends with goes on into the next pieces, those
pieces' rows of that value (read from the row groups whose statistics allow it).  No row is
shuffled, and there is one task and at most one part per piece.

Each output coordinate's rows thus reach the op whole and in input order, as in the key ranges
of ranges.py, so the results are the single machine's (when the op's result at a coordinate does
not depend on where the batches of its rows begin: see by_seams), and the parts, in input order,
concatenate to the single-machine output.  The first and last values of ``d`` in a piece are its
first and last row groups' statistics (each part is sorted on ``d`` first); without statistics
the caller takes another path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._memory import Budget, peak_rss
from ..errors import DataError
from ..io import ParquetSource, filled_groups, index_bounds, move, open_source, remove_path
from .claims import claim_piece
from .partdir import PartDirectory
from .pieces import Piece
from .progress import Outcome, follow


def _where(batch, column: np.ndarray, value: int, keep: bool):
    """(The rows of ``batch`` whose ``column`` is (``keep``) or is not ``value``, that column of
    them), and the positions of the first row that is not ``value`` (n: none) and of the last
    that is (-1: none).  A seam's value is where its pieces begin, so most batches hold none of
    it, or only it: those pass whole (or not at all) after one NumPy comparison (an Arrow filter
    of every batch was a tenth of a reduce's task, profiled)."""
    n = batch.num_rows
    hit = column == value
    hits = np.flatnonzero(hit)
    if not len(hits):
        return (batch.slice(0, 0), column[:0]) if keep else (batch, column), 0, -1
    if len(hits) == n:
        return (batch, column) if keep else (batch.slice(0, 0), column[:0]), n, n - 1
    mask = hit if keep else ~hit
    return (batch.filter(pa.array(mask)), column[mask]), int(np.argmin(hit)), int(hits[-1])


class _Seen:
    """What the main thread checks of a batch read by a span, computed on the decoding threads:
    its index on the seam's dimension at the first and last rows kept, whether the kept rows
    are non-decreasing there, and where the seam's value ends (_where)."""

    __slots__ = ("first", "last", "ordered", "other", "last_hit", "n")

    def __init__(self, kept: np.ndarray, other: int, last_hit: int, n: int):
        self.first = int(kept[0]) if len(kept) else None
        self.last = int(kept[-1]) if len(kept) else None
        self.ordered = len(kept) < 2 or bool((kept[1:] >= kept[:-1]).all())
        self.other, self.last_hit, self.n = other, last_hit, n


class SeamedPiece(ParquetSource):
    """A piece as its task reads it (see the module docstring), as a tensor of ``meta`` whose
    rows are not counted before they are read: ``spans`` are (piece, value, keep) in input
    order, each giving the piece's rows whose index on dimension ``dim`` is (keep) or is not
    (not keep) ``value`` (None: every row).

    The plan trusts each part's claim of an order led by ``dim``; what it relies on is checked
    as the rows pass: the rows read are non-decreasing on ``dim``, and a seam's value is where
    its piece begins (so a span that leaves those rows out, or takes only them, cuts the piece
    there, and a task's rows are consecutive rows of the input, counted from ``start``).  A part
    that breaks its claim is an error naming the first row that breaks it (claims.claim_piece),
    where the plan would have read a coordinate's rows in two tasks, or out of order."""

    def __init__(self, spans: list[tuple[Piece, int | None, bool]], dim: int, meta, budget: Budget):
        parts, self._spans = [], {}
        for piece, value, keep in spans:
            part = open_source(piece.path).parts[0]  # a Part of its own per span, found by identity
            footer = part.file.metadata
            groups = _groups(piece, footer)
            if keep and value is not None:  # the groups up to the last that may hold the value
                may = [k for k, g in enumerate(groups) if _may_hold(footer.row_group(g).column(dim), value)]
                groups = groups[:may[-1] + 1] if may else []
            parts.append(part)
            self._spans[id(part)] = (groups, value, keep, piece)
        first, value, keep = spans[0]
        super().__init__(first.operand or first.path, parts, meta.with_(nnz=None), "dir")
        self.name, self.budget, self.last = f"indices_{dim}", budget, None
        # Rows from the input's first: a piece that begins with an earlier task's value begins
        # here after those rows (a cut the reading checks).
        skipped = 0 if keep or value is None else _leading(parts[0], self._spans[id(parts[0])][0], dim, value)
        self.start = first.start + skipped

    def part_batches(self, part, batch_rows, *, groups=None, columns=None, prepare=None):
        span_groups, value, keep, piece = self._spans[id(part)]
        if part is self.parts[0]:
            self.last = None  # every read from the start begins again (an error's row is read twice)
        name = self.name
        ended = False  # a row other than the seam's value was read

        def cut(batch):  # on the decoding threads, as the op's own prepare (the reduce's kernel) runs there
            n = batch.num_rows
            column = batch.column(batch.schema.get_field_index(name))
            if column.null_count:  # refused once read (E_NULL_INDEX), as on one machine: prepare refuses it
                prepared = prepare(batch) if prepare is not None else None
                return batch, prepared, _Seen(column.to_numpy(zero_copy_only=False)[:0], n, -1, n)
            column = column.to_numpy()
            other, last_hit = n, -1
            if value is not None:
                (batch, column), other, last_hit = _where(batch, column, value, keep)
            seen = _Seen(column, other, last_hit, n)
            return batch, (prepare(batch) if prepare is not None and batch.num_rows else None), seen

        for _, (batch, prepared, seen) in super().part_batches(part, batch_rows, groups=span_groups, columns=columns,
                                                                prepare=cut):
            if value is not None and seen.last_hit >= 0 and (ended or seen.last_hit > seen.other):
                self._refuse(piece)  # the value again after other rows
            if value is not None and not keep and not ended and seen.other < seen.n and seen.first <= value:
                self._refuse(piece)  # below the value the piece begins with
            ended = ended or seen.other < seen.n
            if seen.first is not None:
                if not seen.ordered or (self.last is not None and seen.first < self.last):
                    self._refuse(piece)
                self.last = seen.last
            if batch.num_rows:  # else nothing for the op (nor its prepare) to see
                yield batch if prepare is None else (batch, prepared)

    def _refuse(self, piece: Piece):
        # The claims one machine checks: the directory's where it claims an order, else the part's,
        # which the plan trusted.
        meta = self.meta if self.meta.sort_order else open_source(piece.path).meta
        failure = claim_piece(piece, meta, meta.sort_order, meta.unique, "", self.budget)[1]
        if failure is not None:
            raise failure[0]
        # Rows out of order across the pieces of a task, each piece in its own order: the seams'
        # statistics allow only that where they lie.
        raise DataError(f"the rows are not in the order on dimension {self.name.removeprefix('indices_')} its "
                        "parts claim, although the row-group statistics say so", path=self.path)


def _leading(part, groups: list[int], dim: int, value: int) -> int:
    """The rows at the beginning of ``groups`` of a part whose index on ``dim`` is ``value``:
    whole groups by their statistics, the first other one by its column."""
    footer, count = part.file.metadata, 0
    for g in groups:
        st = footer.row_group(g).column(dim).statistics
        if st is not None and st.has_min_max and st.min == st.max == value:
            count += footer.row_group(g).num_rows
            continue
        column = part.file.read_row_group(g, columns=[f"indices_{dim}"]).column(0).to_numpy()
        return count + int(np.argmin(column == value)) if (column != value).any() else count + len(column)
    return count


def _groups(piece: Piece, footer) -> list[int]:
    return list(range(footer.num_row_groups) if piece.groups is None else piece.groups)


def _may_hold(column, value: int) -> bool:
    st = column.statistics
    return st is None or not st.has_min_max or st.min <= value <= st.max


def piece_edges(src: ParquetSource, pieces: list[Piece], dim: int) -> list | None:
    """The first and last index on ``dim`` of every piece of ``src`` (None for an empty piece):
    its first non-empty row group's minimum and its last one's maximum, when every part claims
    an order led by ``dim`` and each piece begins at or above where the one before ends; else
    None (the caller takes another path)."""
    if any(not p.meta.sort_order or p.meta.sort_order[0] != dim for p in src.parts if p.meta.nnz):
        return None
    footers = {p.path: p.file.metadata for p in src.parts}
    edges, last = [], None
    for piece in pieces:
        footer = footers[piece.path]
        groups = filled_groups(footer, _groups(piece, footer))
        if not groups:
            edges.append(None)
            continue
        head, tail = index_bounds(footer, groups[0], dim), index_bounds(footer, groups[-1], dim)
        if head is None or tail is None:
            return None
        first, end = head[0], tail[1]
        if last is not None and first < last:
            return None
        edges.append((first, end))
        last = end
    return edges


def seam_plan(pieces: list[Piece], edges: list) -> list[list[tuple[Piece, int | None, bool]]]:
    """The spans of each task (SeamedPiece), in output order, for ``pieces`` with ``edges``."""
    held = [i for i, e in enumerate(edges) if e is not None]
    chains: dict[int, list[int]] = {}  # a seam value -> the pieces holding it, in order
    for i, j in zip(held, held[1:]):
        if edges[i][1] == edges[j][0]:
            chain = chains.setdefault(edges[i][1], [i])
            chain.append(j)
    tasks = []
    for i in held:
        first, last = edges[i]
        if first in chains and chains[first][0] != i:
            if first == last:
                continue  # a piece of one value, all of it read by the task that began the value
            spans = [(pieces[i], first, False)]
        else:
            spans = [(pieces[i], None, True)]
        if last in chains and chains[last][0] == i:
            spans += [(pieces[j], last, True) for j in chains[last][1:]]
        tasks.append(spans)
    return tasks


def grouped(plan: list, rows: list[int], tasks: int) -> tuple[list, list[int]]:
    """The consecutive tasks of ``plan`` (seam_plan's, ``rows`` each) joined into at most
    ``tasks`` of about equal rows, and their rows: a task per worker holding several pieces
    reads them with its own decoding threads, and pays a task's fixed costs (its output part,
    the round trip) once, not per piece.  Where a task's last span (a piece's rows of a seam's
    value) meets the next task's first (the same piece's other rows), the piece is read whole
    instead: the value's rows are where it begins, so that is the same rows in the same order."""
    total = sum(rows)
    if tasks >= len(plan) or not total:
        return plan, rows
    mids = np.cumsum(rows) - np.asarray(rows) / 2
    groups = np.minimum((mids * tasks / total).astype(int), tasks - 1)  # non-decreasing
    joined, counts = [], []
    for k, (spans, n) in enumerate(zip(plan, rows)):
        if k and groups[k] == groups[k - 1]:
            joined[-1] = _whole_where_they_meet(joined[-1], spans)
            counts[-1] += n
        else:
            joined.append(list(spans))
            counts.append(n)
    return joined, counts


def _whole_where_they_meet(spans: list, after: list) -> list:
    (piece, value, keep), (other, other_value, other_keep) = spans[-1], after[0]
    if other == piece and value is not None and other_value == value and keep and not other_keep:
        return [*spans[:-1], (piece, None, True), *after[1:]]
    return [*spans, *after]


def seamed_task(fn, spans: list, dim: int, meta, budget: Budget, output: str) -> tuple:
    """``fn`` on one task's spans, into ``output``: (what fn returned, the part's metadata, the
    worker's peak memory)."""
    result = fn(SeamedPiece(spans, dim, meta, budget), output)
    with open_source(output) as written:
        return result, written.meta, peak_rss()


def by_seams(client, pieces: list[Piece], edges: list, dim: int, meta, fn, out: PartDirectory, *, budget: Budget,
             progress=None, tasks: int | None = None) -> Outcome:
    """``fn(source, part path)`` over ``pieces`` (``edges`` from piece_edges) as the module
    docstring says, into ``out``, in at most ``tasks`` tasks of consecutive pieces (grouped;
    None: a task per piece): the Outcome.  Every source ``fn`` gets claims what the directory
    does as one machine opens it (``meta``: order across parts where its seams keep it,
    io.source.derived_claims), so the op takes the path it takes on one machine: a reduction,
    for one, sums each coordinate's rows one after another in that path, wherever its batches
    begin.  ``budget``: what a task reads a lying part's claim with (SeamedPiece)."""
    outcome = Outcome(rows_in=sum(p.rows for p in pieces))
    if progress:
        progress.set_total(outcome.rows_in)
    plan = seam_plan(pieces, edges) or [[(pieces[0], None, True)]]  # an empty input: one empty part
    own = {id(spans[0][0]) for spans in plan}  # progress: a piece's rows to the task that reads its first row
    rows = [sum(p.rows for k, (p, _, _) in enumerate(spans) if not k or id(p) not in own) for spans in plan]
    if tasks is not None:
        plan, rows = grouped(plan, rows, tasks)
    # One message to the scheduler for every task (client.map), not one per task: a second
    # submit waited for the client's next batch, and its task started 20 ms after the first.
    futures = client.map(seamed_task, [fn] * len(plan), plan, [dim] * len(plan), [meta] * len(plan),
                         [budget] * len(plan), [out.part(k) for k in range(len(plan))], pure=False)
    done = follow(client, futures, outcome, progress=progress, rows=rows)
    # Parts without rows (a piece whose rows all went to an earlier task) are left out, the rest
    # renumbered in order.
    kept = [k for k, d in enumerate(done) if d[1].nnz] or [0]
    for k in set(range(len(done))) - set(kept):
        remove_path(out.part(k))
    for n, k in enumerate(kept):
        if n != k:
            move(out.part(k), out.part(n))
    written = [done[k] for k in kept]
    outcome.results = [r for r, _, _ in written]
    outcome.part_metas = [m for _, m, _ in written]
    outcome.rows_out = sum(m.nnz for m in outcome.part_metas)
    outcome.parts = len(written)
    return outcome
