"""Whole rows of 2-D [batch, ids] tensors, one input or several side by side.

TensorFlow's cross and bincount read each row of a [batch, ids] tensor as a list of features.
``feature_rows`` gives one source's rows in row-major order, never split between two pieces;
``aligned_rows`` walks several such streams together, handing out pieces that hold the same
rows of every input, so that an op can work row by row on inputs of any sizes while each stays
within its share of the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from .._memory import Budget
from ..io import batch_keys
from .order import sorted_batches
from .runs import whole_runs


def feature_rows(src, prepare: Callable, *, budget: Budget, tmp_dir=None, progress=None
                 ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(keys (K, n), prepare(batch)) of a source in row-major order, each row (dimension 0) whole in one
    piece.  Rows sharing a coordinate are summed first (the format's rule) unless the metadata
    says they are unique (or they hold strings).  What the metadata claims is checked as the
    rows pass: an order break or a repeat is an error naming the row."""
    meta = src.meta
    # Strings cannot be summed: the format makes their tensors unique (checked here as well).
    unique = bool(meta.unique) or meta.value_type in ("string", "binary")
    K = meta.sparse_ndim

    def pairs():
        for batch, _ in sorted_batches(src, tuple(range(K)), budget=budget, tmp_dir=tmp_dir, progress=progress,
                                       keys=False, duplicates="keep" if unique else "sum",
                                       verify="unique" if unique else None):
            if batch.num_rows:
                yield batch_keys(batch, K), prepare(batch)

    return whole_runs(pairs(), [0])


def aligned_rows(streams: list[Iterable[tuple[np.ndarray, np.ndarray]]]
                 ) -> Iterator[list[tuple[np.ndarray, np.ndarray]]]:
    """Pieces of several row-major streams of whole rows (``feature_rows``), one list per piece
    with each stream's (keys, values) of the same rows: every row up to the lowest last row any
    unfinished stream holds.  Each stream holds at most one of its own pieces at a time."""
    its = [iter(s) for s in streams]
    m = len(its)
    bufs: list = [None] * m
    done = [False] * m
    while True:
        for i in range(m):
            if bufs[i] is None and not done[i]:
                bufs[i] = next(its[i], None)
                done[i] = bufs[i] is None
        held = [b for b in bufs if b is not None]
        if not held:
            return
        open_ends = [int(bufs[i][0][0, -1]) for i in range(m) if not done[i]]
        limit = min(open_ends) if open_ends else max(int(b[0][0, -1]) for b in held)
        piece = []
        for i in range(m):
            if bufs[i] is None:
                piece.append((np.empty((2, 0), np.int64), None))
                continue
            keys, values = bufs[i]
            cut = int(np.searchsorted(keys[0], limit, side="right"))
            piece.append((keys[:, :cut], values[:cut]))
            bufs[i] = (keys[:, cut:], values[cut:]) if cut < keys.shape[1] else None
        yield piece
