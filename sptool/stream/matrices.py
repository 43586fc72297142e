"""Dense operands in the layout a kernel reads: rows contiguous in memory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..io import scratch_dir


@contextmanager
def row_major(arr: np.ndarray, dtype, *, max_bytes: int, tmp_dir: str | None = None) -> Iterator[np.ndarray]:
    """``arr`` itself when it is C-ordered in ``dtype``; otherwise a C-ordered copy in ``dtype``:
    in memory when it fits ``max_bytes``, else a temporary .npy in a scratch directory under ``tmp_dir``,
    memory-mapped and removed on leaving, written slab by slab within ``max_bytes``.  (A transposed view, such
    as B^T of a C-ordered B, is copied once instead of read with a stride per value.)"""
    dtype = np.dtype(dtype)
    if arr.flags.c_contiguous and arr.dtype == dtype:
        yield arr
        return
    if arr.size * dtype.itemsize <= max_bytes:
        yield np.ascontiguousarray(arr, dtype=dtype)
        return
    with scratch_dir("rows", tmp_dir) as work:
        path = os.path.join(work, "rows.npy")
        out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=arr.shape)
        flat_in = arr.reshape(-1, *arr.shape[-2:]) if arr.ndim >= 2 else arr.reshape(1, 1, -1)
        flat_out = out.reshape(flat_in.shape)
        row_bytes = max(1, flat_in.shape[-1] * max(dtype.itemsize, arr.dtype.itemsize))
        step = max(1, max_bytes // row_bytes)
        for b in range(flat_in.shape[0]):
            for lo in range(0, flat_in.shape[1], step):
                flat_out[b, lo: lo + step] = flat_in[b, lo: lo + step]
        out.flush()
        del flat_out, out
        yield np.load(path, mmap_mode="r")
