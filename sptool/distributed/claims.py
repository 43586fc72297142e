"""An operand's order claim verified on a cluster as one machine verifies it while the rows
pass (stream.order.ClaimCheck): each task checks its piece's rows, counted from the operand's
first, and returns its first and last coordinates; the driver checks the seams between
non-empty pieces and raises the first violation in row order, the single machine's error.

Two ways in: a round of its own reading the index columns only (``verify_claim``, todense's),
or inside the tasks of a job that trusts the claim (``ClaimedRows`` under the op, and
``claimed_task``: a reduce's partials trust that no coordinate has rows on two pieces)."""

from __future__ import annotations

from .._memory import Budget, peak_rss
from ..errors import DataError
from ..format import TensorMeta
from ..io import TensorSource, batch_keys, open_source
from ..stream.order import ClaimCheck
from .cluster import worker_count
from .pieces import Piece, PieceSource, pieces_of
from .progress import Outcome, follow


class ClaimedRows(TensorSource):
    """A piece's rows (``src``, a PieceSource) checked against ``meta``'s claimed order and
    uniqueness (or ``order`` and ``unique`` when given) as they pass on to the op reading them,
    counted from the operand's first row; ``edges``: the first and last coordinates read ((K, 1)
    arrays; the last None after a failure), or None.  Rows with a null index are left to the
    op's reading, which refuses them."""

    def __init__(self, src, meta: TensorMeta, *, order=None, unique: bool | None = None, note: str = ""):
        super().__init__(src.path, src.meta, src.schema)
        self.src, self.start = src, src.start
        self.check = ClaimCheck(meta, meta.sort_order if order is None else order,
                                meta.unique if unique is None else unique, path=src.path, note=note)
        self.check.tracker.offset = src.start
        self.edges = None

    def iter_batches(self, batch_rows=None, *, budget=None):
        return self.watched(self.src.iter_batches(batch_rows, budget=budget))

    def watched(self, batches):
        """``batches`` (of the piece, in order, beginning with its index columns), checked."""
        K = self.meta.sparse_ndim
        for batch in batches:
            if batch.num_rows and not any(batch.column(k).null_count for k in range(K)):
                keys = batch_keys(batch, K)
                # The first row before the check: a piece that fails still meets the one before.
                self.edges = (keys[:, :1] if self.edges is None else self.edges[0], None)
                self.check.check(keys)
                self.edges = (self.edges[0], keys[:, -1:])
            yield batch


def claimed_task(fn, piece: Piece, output: str, *, meta: TensorMeta, note: str = "") -> tuple:
    """``fn(piece source, output)`` (a task) with the piece's rows checked against ``meta``'s
    claims on their way to it (ClaimedRows): (the piece's edges, the failure (the DataError and
    its row) or None, the written part's metadata or None, the worker's peak memory)."""
    rows = ClaimedRows(PieceSource(piece), meta, note=note)
    try:
        fn(rows, output)
    except DataError as e:
        if rows.check.failed_at < 0:  # not the claim's: the op's own error
            raise
        return rows.edges, (e, rows.check.failed_at), None, peak_rss()
    with open_source(output) as written:
        return rows.edges, None, written.meta, peak_rss()


def claim_piece(piece: Piece, meta: TensorMeta, order, unique: bool, note: str, budget: Budget) -> tuple:
    """One piece's rows checked against the claim (a task): ((first, last) coordinates or None
    for no row, the failure (the DataError and its row) or None, the worker's peak memory).  A
    piece holding nulls in an index column is left to the job's reading, which refuses it."""
    src = PieceSource(piece)
    rows = ClaimedRows(src, meta, order=order, unique=unique, note=note)
    names = [f"indices_{d}" for d in range(meta.sparse_ndim)]
    try:
        for _ in rows.watched(src.part_batches(src.parts[0], src.batch_rows(budget), columns=names)):
            pass
    except DataError as e:
        return rows.edges, (e, rows.check.failed_at), peak_rss()
    return rows.edges, None, peak_rss()


def raise_first_failure(pieces: list[Piece], found: list[tuple], meta: TensorMeta, order, unique: bool, *,
                        note: str, name: str) -> None:
    """The first violation in row order of the claim, if any, from each piece's (edges, failure)
    (``found``, in piece order; a failed piece's edges hold its first row only) and the seams
    between non-empty pieces, raised as one machine raises it of the operand named ``name``."""
    failures, last = [], None
    for piece, (edges, failure) in zip(pieces, found):
        if failure is not None:
            failures.append((failure[1], failure[0]))
        if edges is None:
            continue
        if last is not None:  # the seam: the previous non-empty piece's last row, then this one's first
            seam = ClaimCheck(meta, order, unique, path=name, note=note)
            seam.tracker.offset = piece.start - 1
            seam.check(last)
            try:
                seam.check(edges[0])
            except DataError as e:
                failures.append((piece.start, e))
        last = edges[1]  # None past a failure: the rows after it are not compared
    if failures:
        raise min(failures, key=lambda f: f[0])[1]


def verify_claim(client, path: str, meta: TensorMeta, order, unique: bool, *, note: str, budget: Budget,
                 name: str | None = None) -> None:
    """Raise what ClaimCheck(meta, order, unique) raises on the rows of the Parquet tensor at
    ``path`` (named ``name`` in errors, default ``path``) read in stored order, if anything."""
    pieces = [Piece(p.path, p.groups, p.rows, p.start, name or path) for p in pieces_of(path, worker_count(client))]
    done = follow(client, [client.submit(claim_piece, p, meta, order, unique, note, budget, pure=False)
                           for p in pieces], Outcome())
    raise_first_failure(pieces, [(edges, failure) for edges, failure, _ in done], meta, order, unique, note=note,
                        name=name or path)
