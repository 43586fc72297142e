"""Scattering sparse rows into a dense array: the shared core of todense and to_dense."""

from __future__ import annotations

import math
import mmap

import numpy as np

from .. import _kernels
from .._messages import out_of_bounds
from ..errors import DataError
from ..format import TensorMeta

_COMPILED = {np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64, np.complex64, np.complex128,
)}


def row_major_strides(dims) -> np.ndarray:
    strides = np.ones(len(dims), dtype=np.int64)
    for k in range(len(dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    return strides


def is_zero(value) -> bool:
    try:
        return value == 0 and not (isinstance(value, float) and math.copysign(1.0, value) < 0)
    except TypeError:
        return False


class DenseScatter:
    """Accumulates batches of rows into ``out`` (shaped like the tensor), by the format's rules.

    Duplicates sum (OR for bool); cells no row touches end up as ``fill``.  ``out`` must be
    zero-filled on entry (a fresh np.zeros or .npy memory map).  For a non-zero fill the touched
    cells are tracked in ``touched`` (one byte a cell) and the rest are filled at ``finish``.
    """

    def __init__(self, out: np.ndarray, meta: TensorMeta, fill, touched: np.ndarray | None = None,
                 release_bytes: int | None = None):
        self.meta = meta
        self.out = out
        m = max(meta.block_size, 1)
        self.flat = out.reshape(-1, m) if out.size else out.reshape(0, m)
        self.fill = fill
        self.needs_fill = not is_zero(fill)
        self.touched = touched
        if self.needs_fill and self.touched is None:
            self.touched = np.zeros(self.flat.shape[0], dtype=bool)
        self.strides = row_major_strides(meta.shape[: meta.sparse_ndim])
        self.shape_arr = np.asarray(meta.shape[: meta.sparse_ndim], dtype=np.int64)
        self.rows = 0
        # For outputs bigger than the memory budget: write dirty pages back and drop them
        # from RSS every so often, so a memory-mapped output does not count against --memory.
        self.release_bytes = release_bytes
        self._since_release = 0

    def add(self, keys: np.ndarray, values: np.ndarray):
        n = keys.shape[1]
        if n == 0:
            return
        row, dim = _kernels.first_out_of_bounds(keys, self.shape_arr)
        if row >= 0:
            raise DataError(out_of_bounds(self.rows + row, keys, row, self.meta.shape[: self.meta.sparse_ndim]))
        offsets = np.empty(n, dtype=np.int64)
        _kernels.linear_offsets(keys, self.strides, offsets)
        vals = np.ascontiguousarray(values).reshape(n, -1)
        if self.touched is not None:
            self.touched[offsets] = True
        dt = self.flat.dtype
        if dt == np.bool_:
            _kernels.scatter_or(offsets, vals.view(np.uint8), self.flat.view(np.uint8))
        elif dt in _COMPILED:
            _kernels.scatter_add(offsets, vals.astype(dt, copy=False), self.flat)
        elif dt.kind in "USO":
            self.flat[offsets] = vals
        else:  # float16 has no C type; NumPy's unbuffered add handles it
            np.add.at(self.flat, offsets, vals.astype(dt, copy=False))
        self.rows += n
        if self.release_bytes:
            self._since_release += n * mmap.PAGESIZE  # at worst one page per row
            if self._since_release > self.release_bytes:
                release(self.out)
                self._since_release = 0

    def finish(self, chunk: int = 1 << 22):
        if self.needs_fill:
            for start in range(0, self.flat.shape[0], chunk):
                block = self.flat[start : start + chunk]
                block[~self.touched[start : start + chunk]] = self.fill
        if self.release_bytes:
            release(self.out)
        return self.out


def release(arr: np.ndarray):
    """Flush a memory-mapped array and drop its pages from this process's RSS."""
    base = arr
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    if isinstance(base, np.memmap) and getattr(base, "_mmap", None) is not None:
        base.flush()
        try:
            base._mmap.madvise(mmap.MADV_DONTNEED)
        except (AttributeError, OSError, ValueError):
            pass
