"""A .npy on shared storage written by many tasks: the driver preallocates it (a sparse file:
the header, then holes that read as zeros), each task writes only its own region with pwrite,
and the driver renames it into place when every task is done (removes it otherwise).  The job's
scratch lives in a hidden directory beside it, on the same storage, removed either way."""

from __future__ import annotations

import contextlib
import os

import numpy as np

from .._memory import peak_rss
from ..io import AtomicTarget
from .cluster import worker_count
from .partdir import PartDirectory
from .pieces import pieces_of, shared_copy
from .ranges import range_map


@contextlib.contextmanager
def shared_npy(output: str, shape, dtype, *, fortran: bool = False):
    """(the temporary file's path, the byte offset of its data, a scratch PartDirectory);
    ``fortran``: the array is stored column by column."""
    target = AtomicTarget(output, is_dir=False)
    try:
        offset = np.lib.format.open_memmap(target.tmp, mode="w+", dtype=dtype, shape=tuple(shape),
                                           fortran_order=fortran).offset
        folder, name = os.path.split(os.path.abspath(output))
        scratch = PartDirectory(os.path.join(folder, f".{name}.scratch") + "/")
        try:
            yield target.tmp, offset, scratch
        finally:
            scratch.abort()  # nothing in it is kept
    except BaseException:
        target.abort()
        raise
    target.commit()


def by_regions(client, path: str, meta, order, fn, scratch: PartDirectory, *, budget, progress=None, before=None):
    """The rows of the tensor at ``path`` (of metadata ``meta``) shuffled into key ranges of the
    dimensions ``order`` (runs of the output's rows or cells: regions no other range writes),
    and ``fn(range source, unused part path)`` run on each, writing its region; the Outcome.
    ``before(path workers read)``, if given, runs first (a check of the input's claims)."""
    src = shared_copy(path, os.path.join(scratch.scratch("inputs"), "operand-0.parquet"), budget)
    if before is not None:
        before(src)
    workers = worker_count(client)
    pieces = pieces_of(src, workers)
    return range_map(client, [(pieces, meta.with_(sort_order=(), unique=False))], order, fn, scratch,
                     ranges=max(len(pieces), workers), budget=budget, progress=progress, task=region_task)


def region_task(fn, sources: list, output: str) -> tuple:
    """``fn`` on one key range, writing its region of the .npy, not a part (a task for
    ranges.range_map): range_task's triple, the range's metadata standing for a part's."""
    rows = fn(*sources, output)
    return rows, sources[0].meta.with_(nnz=rows), peak_rss()


def pwrite_all(fd: int, data: np.ndarray, at: int) -> None:
    """All of ``data``'s bytes written at offset ``at``."""
    view = memoryview(np.ascontiguousarray(data)).cast("B")
    while len(view):
        done = os.pwrite(fd, view, at)
        view, at = view[done:], at + done
