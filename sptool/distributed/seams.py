"""The parts' first and last keys for the driver of a part directory's shuffle: a task per
worker reads those two keys of its share of the parts (the index columns of their first and last
non-empty row groups).  For operands sorted on the key they give the splitters, with no sample
round (ranges.py).  Whether the whole is sorted and unique is what one machine derives on
opening it (io.source.derived_claims, formats/SPEC.md section 7), the same on the driver."""

from __future__ import annotations

from .._memory import peak_rss
from ..format import shared_order
from ..io import edge_keys as edges_of
from .cluster import worker_count
from .progress import Outcome, follow


def edge_keys(parts: list[tuple[str, int]]) -> tuple:
    """The first and last coordinates of each (path, K) of ``parts`` (None, None for an empty
    part), and the worker's peak memory (a task)."""
    return [edges_of(path, K) for path, K in parts], peak_rss()


def part_edges(client, sources: list, tasks: int | None = None) -> list:
    """The (first, last) coordinates of every part of each of ``sources`` (read by ``tasks``
    edge_keys tasks of consecutive parts, default one per worker, in one round for all of them),
    or None for a source whose parts' claims decide its whole alone (one part, or no sort order
    common to its parts: format.dataset_claims).  A task per part made the round a scheduler
    round trip per part (the scheduler hands a worker one task per thread): 16 parts of a
    2-worker add took 0.2 s under load before the first range task, each read taking 5-15 ms."""
    asks = []
    for src in sources:
        metas = [p.meta for p in src.parts]
        seamed = len(metas) > 1 and shared_order(metas)
        asks.append([(p.path, metas[0].sparse_ndim) for p in src.parts] if seamed else None)
    wanted = [part for a in asks if a for part in a]
    if not wanted:
        return [None] * len(sources)
    count = min(len(wanted), tasks or worker_count(client))
    cuts = [len(wanted) * i // count for i in range(count + 1)]
    # client.map: the tasks reach the scheduler in one message (seamed.by_seams says why).
    done = follow(client, client.map(edge_keys, [wanted[a:z] for a, z in zip(cuts, cuts[1:])], pure=False), Outcome())
    found = iter([edges for chunk, _ in done for edges in chunk])
    return [None if a is None else [next(found) for _ in a] for a in asks]
