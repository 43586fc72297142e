"""slice on a cluster: the parts and row groups that can hold rows of the box found by their
Parquet statistics (the footers of a directory read in parallel, footers.py), and every part
that has one sliced by its own task with the single-machine slice, which reads only those row
groups; the parts concatenated are the single-machine output, in input order."""

from __future__ import annotations

from functools import partial

from ..io import locate, open_source
from ..ops.slice import overlapping_row_groups, slice_box
from ..ops.slice import slice_ as slice_one
from .footers import open_directory
from .maps import per_piece
from .pieces import Piece

NOT_PRUNED = {"row_groups_read": None, "row_groups_total": None, "bytes_read": None, "bytes_total": None}


def _rows(part) -> int:
    return part.file.metadata.num_rows


def box_pieces(client, start, size, pruning: dict):
    """A ``pieces(path, workers)`` for per_piece: the whole files among the Parquet tensor's parts
    whose row groups' statistics can overlap the box (at least one, so that an empty result still
    has its part), the row groups read and skipped noted in ``pruning``."""

    def pieces(path: str, workers: int) -> list[Piece]:
        with (open_directory(client, path) if locate(path) == "dir" else open_source(path)) as src:
            lo, hi = slice_box(src.meta.shape, start, size, src.meta.sparse_ndim)
            plan, found = overlapping_row_groups(src, lo, hi)
            pruning.update(found)
            kept = [part for part, _ in plan] or src.parts[:1]
            return [Piece(part.path, None, _rows(part)) for part in kept]

    return pieces


def slice_(path: str, output: str, *, client, start, size, memory=None, progress=None) -> dict:
    """``sptool.slice_`` on the cluster of ``client``: parts pruned by their statistics, each
    other part sliced by its own task into the matching part of the directory ``output`` (a bad
    box is refused once the footers are read, before any slicing task)."""
    pruning = dict(NOT_PRUNED)
    r = per_piece(client, partial(slice_one, start=start, size=size, memory=memory), path, output, memory=memory,
                  progress=progress, pieces=box_pieces(client, start, size, pruning))
    results = r.pop("results")
    return {**r, "rows_in": sum(p["rows_in"] for p in results), "canonical": all(p["canonical"] for p in results),
            **pruning}
