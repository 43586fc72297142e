"""The dataset view of formats/SPEC.md (section 7) for a part directory: its parts' order claims
hold for the whole only if, at every seam, the last key of a part is not above the first key of
the next (below it, for uniqueness).  A task per part reads those two keys (the index columns of
its first and last non-empty row groups); the driver compares them.

Knowing the whole is sorted lets each key range keep the claim (its pieces, concatenated in
input order, are then in order), so the op inside a range need not sort again; knowing it is
unique lets order-free reductions run on partials (reduce.py)."""

from __future__ import annotations

from .._memory import peak_rss
from ..format import index_column
from ..io import ParquetSource, open_parquet
from .progress import Outcome, follow


def edge_keys(path: str, K: int) -> tuple:
    """A part's first and last coordinates (None, None when it is empty), and the worker's peak
    memory (a task)."""
    pf = open_parquet(path)
    md = pf.metadata
    filled = [g for g in range(md.num_row_groups) if md.row_group(g).num_rows]
    if not filled:
        return None, None, peak_rss()
    columns = [index_column(k) for k in range(K)]
    head = pf.read_row_group(filled[0], columns=columns)
    tail = pf.read_row_group(filled[-1], columns=columns)
    first = tuple(int(head.column(c)[0].as_py()) for c in columns)
    last = tuple(int(tail.column(c)[tail.num_rows - 1].as_py()) for c in columns)
    return first, last, peak_rss()


def dataset_claims(client, src: ParquetSource) -> tuple[tuple, bool]:
    """(sort_order, unique) that the whole of ``src`` (a file or part directory) holds, from its
    parts' claims and, for several parts, their seams (read on the cluster of ``client``)."""
    metas = [p.meta for p in src.parts]
    if len(metas) == 1:
        return tuple(metas[0].sort_order), metas[0].unique
    order = tuple(metas[0].sort_order)
    if not order or any(tuple(m.sort_order) != order for m in metas):
        return (), False
    K = metas[0].sparse_ndim
    edges = follow(client, [client.submit(edge_keys, p.path, K, pure=False) for p in src.parts], Outcome())
    bounds = [(first, last) for first, last, _ in edges if first is not None]
    seams = [(tuple(a[d] for d in order), tuple(b[d] for d in order)) for (_, a), (b, _) in zip(bounds, bounds[1:])]
    if not all(a <= b for a, b in seams):
        return (), False
    return order, all(m.unique for m in metas) and all(a < b for a, b in seams)
