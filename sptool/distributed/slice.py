"""slice on a cluster: the row groups that can hold rows of the box found by their Parquet
statistics (the footers of a directory read in parallel, footers.py), as on one machine, and
those row groups, in runs of consecutive groups (several per file, so that a single file spreads
over the workers too), each sliced by its own task with the single-machine slice into a part of
the output; the parts concatenated are the single-machine output, in input order."""

from __future__ import annotations

from functools import partial

import numpy as np

from ..io import locate, open_source
from ..ops.slice import overlapping_row_groups, slice_box
from ..ops.slice import slice_ as slice_one
from .footers import open_directory
from .maps import per_piece
from .pieces import Piece, RowsSource, runs_of

NOT_PRUNED = {"row_groups_read": None, "row_groups_total": None, "bytes_read": None, "bytes_total": None}


def box_pieces(client, start, size, pruning: dict):
    """A ``pieces(path, workers)`` for per_piece: runs of consecutive row groups among those
    whose statistics can overlap the box (at least one piece, so that an empty result still has
    its part), the row groups read and skipped noted in ``pruning``."""

    def pieces(path: str, workers: int) -> list[Piece]:
        with (open_directory(client, path) if locate(path) == "dir" else open_source(path)) as src:
            lo, hi = slice_box(src.meta.shape, start, size, src.meta.sparse_ndim)
            plan, found = overlapping_row_groups(src, lo, hi)
            pruning.update(found)
            first, seen = {}, 0
            for part in src.parts:
                first[part.path], seen = seen, seen + part.file.metadata.num_rows
            stretches = []
            for part, groups in plan:
                md = part.file.metadata
                counts = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
                for run in np.split(np.asarray(groups), np.flatnonzero(np.diff(groups) != 1) + 1):
                    run = [int(g) for g in run]
                    at = first[part.path] + sum(counts[:run[0]])
                    stretches.append((part.path, run, [counts[g] for g in run], at))
            if not stretches:
                return [Piece(src.parts[0].path, (), 0, 0, path)]
            return runs_of(stretches, workers, path)

    return pieces


def slice_piece(src, output: str, **kw) -> dict:
    """One piece (row groups the driver found may overlap the box) sliced into ``output`` (a
    task's op): its rows read as they come, not pruned again from the file's footer."""
    return slice_one(RowsSource(src), output, **kw)


def slice_(path: str, output: str, *, client, start, size, memory=None, progress=None) -> dict:
    """``sptool.slice_`` on the cluster of ``client``: row groups pruned by their statistics, the
    others sliced in runs by tasks into the parts of the directory ``output`` (a bad box is
    refused once the footers are read, before any slicing task)."""
    pruning = dict(NOT_PRUNED)
    r = per_piece(client, partial(slice_piece, start=start, size=size, memory=memory), path, output, memory=memory,
                  progress=progress, pieces=box_pieces(client, start, size, pruning))
    results = r.pop("results")
    return {**r, "rows_in": sum(p["rows_in"] for p in results), "canonical": all(p["canonical"] for p in results),
            **pruning}
