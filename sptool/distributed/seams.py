"""The dataset view of formats/SPEC.md (section 7) for a part directory: its parts' order claims
hold for the whole only if, at every seam, the last key of a part is not above the first key of
the next (below it, for uniqueness).  A task per part reads those two keys (the index columns of
its first and last non-empty row groups); the driver compares them.

Knowing the whole is sorted lets each key range keep the claim (its pieces, concatenated in
input order, are then in order), so the op inside a range need not sort again; knowing it is
unique lets order-free reductions run on partials (reduce.py)."""

from __future__ import annotations

from .._memory import peak_rss
from ..format import dataset_claims as claims_of
from ..io import ParquetSource
from ..io import edge_keys as edges_of
from .progress import Outcome, follow


def edge_keys(path: str, K: int) -> tuple:
    """A part's first and last coordinates (None, None when it is empty), and the worker's peak
    memory (a task)."""
    return (*edges_of(path, K), peak_rss())


def part_edges(client, sources: list) -> list:
    """The (first, last) coordinates of every part of each of ``sources`` (edge_keys tasks, one
    round for all of them), or None for a source whose parts' claims decide its whole alone (one
    part, or no sort order common to its parts: format.dataset_claims)."""
    asks = []
    for src in sources:
        metas = [p.meta for p in src.parts]
        seamed = len(metas) > 1 and metas[0].sort_order and all(m.sort_order == metas[0].sort_order for m in metas)
        asks.append([client.submit(edge_keys, p.path, metas[0].sparse_ndim, pure=False) for p in src.parts]
                    if seamed else None)
    done = iter(follow(client, [f for a in asks if a for f in a], Outcome()))
    return [None if a is None else [(first, last) for first, last, _ in (next(done) for _ in a)] for a in asks]


def dataset_claims(client, src: ParquetSource) -> tuple[tuple, bool]:
    """(sort_order, unique) that the whole of ``src`` (a file or part directory) holds, from its
    parts' claims and, for several parts, their seams (read on the cluster of ``client``)."""
    return claims_of([p.meta for p in src.parts], part_edges(client, [src])[0] or [])
