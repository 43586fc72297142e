"""An operand's order claim verified on a cluster as one machine verifies it while the rows
pass (stream.order.ClaimCheck): a task per piece checks its own rows, counted from the operand's
first, and returns its first and last coordinates; the driver checks the seams between
non-empty pieces and raises the first violation in row order, the single machine's error.
Only the index columns are read."""

from __future__ import annotations

from .._memory import Budget, peak_rss
from ..errors import DataError
from ..format import TensorMeta
from ..io import batch_keys
from ..stream.order import ClaimCheck
from .cluster import worker_count
from .pieces import Piece, PieceSource, pieces_of
from .progress import Outcome, follow


def claim_piece(piece: Piece, meta: TensorMeta, order, unique: bool, note: str, budget: Budget) -> tuple:
    """One piece's rows checked against the claim (a task): ((first, last) coordinates or None
    for no row, the failure (the DataError and its row) or None, the worker's peak memory).  A
    piece holding nulls in an index column is left to the job's reading, which refuses it."""
    src = PieceSource(piece)
    check = ClaimCheck(meta, order, unique, path=src.path, note=note)
    check.tracker.offset = piece.start
    names = [f"indices_{d}" for d in range(meta.sparse_ndim)]
    first = last = None
    try:
        for batch in src.part_batches(src.parts[0], src.batch_rows(budget), columns=names):
            if not batch.num_rows or any(c.null_count for c in batch.columns):
                continue
            keys = batch_keys(batch, meta.sparse_ndim)
            check.check(keys)
            first = keys[:, :1] if first is None else first
            last = keys[:, -1:]
    except DataError as e:
        return None, (e, check.failed_at), peak_rss()
    return (None if first is None else (first, last)), None, peak_rss()


def verify_claim(client, path: str, meta: TensorMeta, order, unique: bool, *, note: str, budget: Budget,
                 name: str | None = None) -> None:
    """Raise what ClaimCheck(meta, order, unique) raises on the rows of the Parquet tensor at
    ``path`` (named ``name`` in errors, default ``path``) read in stored order, if anything."""
    pieces = [Piece(p.path, p.groups, p.rows, p.start, name or path) for p in pieces_of(path, worker_count(client))]
    done = follow(client, [client.submit(claim_piece, p, meta, order, unique, note, budget, pure=False)
                           for p in pieces], Outcome())
    failures, last = [], None
    for piece, (edges, failure, _) in zip(pieces, done):
        if failure is not None:
            failures.append((failure[1], failure[0]))
            last = None  # rows past a failure are not compared
        if edges is None:
            continue
        if last is not None:  # the seam: the previous non-empty piece's last row, then this one's first
            seam = ClaimCheck(meta, order, unique, path=name or path, note=note)
            seam.tracker.offset = piece.start - 1
            seam.check(last)
            try:
                seam.check(edges[0])
            except DataError as e:
                failures.append((piece.start, e))
        last = edges[1]
    if failures:
        raise min(failures, key=lambda f: f[0])[1]
