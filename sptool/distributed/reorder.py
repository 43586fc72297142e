"""reorder on a cluster: range-partitioned sample sort (rangesort.py) into a part directory."""

from __future__ import annotations

from .._memory import budget_of
from ..io import open_source
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .pieces import pieces_of
from .rangesort import range_sort


def summary(outcome, meta_order, unique: bool) -> dict:
    """The result dict of a job that wrote a sorted part directory, as the single-machine op
    reports it, plus what the cluster did."""
    return {"rows_in": outcome.rows_in, "rows_out": outcome.rows_out,
            "canonical": unique and tuple(meta_order) == tuple(range(len(meta_order))), "unique": unique,
            "sort_order": list(meta_order), "parts": outcome.parts, "workers": outcome.workers,
            "peak_worker_memory": outcome.peak_worker_memory}


def reorder(path: str, output: str, *, client, order=None, duplicates: str = "keep", memory=None,
            tmp_dir: str | None = None, progress=None, ranges: int | None = None) -> dict:
    """``sptool.reorder`` on the Dask cluster of ``client``: the same rows in the same order,
    written as a part directory whose part i holds key range i (``ranges`` of them, default one
    per input piece and at least one per worker; empty ranges are left out).  ``memory`` is the
    budget of each task on its worker; ``tmp_dir`` is where workers spill sorted runs."""
    check_output(output)
    budget = budget_of(memory)
    workers = worker_count(client)
    pieces = pieces_of(path, workers)
    with open_source(path) as src:
        meta = src.meta
    with PartDirectory(output) as out:
        outcome = range_sort(client, pieces, meta, order, duplicates, out, ranges=ranges or max(len(pieces), workers),
                             budget=budget, tmp_dir=tmp_dir, progress=progress)
    first = outcome.part_metas[0]
    return summary(outcome, first.sort_order, all(m.unique for m in outcome.part_metas))
