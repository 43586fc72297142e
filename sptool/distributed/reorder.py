"""reorder on a cluster: rows shuffled into key ranges of the sort order, each range sorted by the
engine's external sort on its worker (ranges.py)."""

from __future__ import annotations

from functools import partial

from .._memory import Budget, budget_of
from .._vocabulary import renamed_keywords
from ..stream.axes import normalize_order
from ..stream.engine import run
from ..stream.reorder import Reorder
from .ranges import on_ranges, operand_meta


def sort_range(src, output: str, *, order, duplicates: str, budget: Budget, tmp_dir) -> None:
    """One key range sorted with the duplicates policy (a task's op)."""
    run(Reorder(order, duplicates), src, output, budget=budget, tmp_dir=tmp_dir)


@renamed_keywords("perm")
def reorder(path: str, output: str, *, client, perm=None, duplicates: str = "keep", memory=None,
            tmp_dir: str | None = None, progress=None, ranges: int | None = None) -> dict:
    """``sptool.reorder`` on the Dask cluster of ``client``: the same rows in the same order,
    written as a part directory whose part i holds key range i (``ranges`` of them, default one
    per input piece and at least one per worker; empty ranges are left out).  ``memory`` is the
    budget of each task on its worker; ``tmp_dir`` is where workers spill sorted runs."""
    budget = budget_of(memory)
    meta = operand_meta(path)
    order = normalize_order(perm, meta.sparse_ndim)
    Reorder(order, duplicates).check(meta)  # a bad order or policy fails before any task runs
    fn = partial(sort_range, order=order, duplicates=duplicates, budget=budget, tmp_dir=tmp_dir)
    # Each range's rows reach the sort already sorted in runs (range_map's ``sort``): the sort
    # merges them, stably, as one machine's external sort merges its runs.
    r = on_ranges(client, fn, [path], output, order=order, memory=budget, progress=progress, ranges=ranges,
                  sort=True)
    del r["results"]
    unique = duplicates != "keep" or r.pop("unique")
    return {**r, "canonical": unique and order == tuple(range(meta.sparse_ndim)), "unique": unique,
            "sort_order": list(order)}
