"""Dense operands in the layout a kernel reads (rows contiguous, in the kernel's type), the
scratch space their copies live in, and the second thread the products split their rows onto."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import numpy as np

from .._memory import Budget
from ..io import scratch_dir


class Scratch:
    """Temporary arrays: in memory while they fit a quarter of ``budget`` bytes, else memory-mapped
    files in an owner-named scratch directory (under ``tmp_dir``, or beside ``near``)."""

    def __init__(self, stack: ExitStack, budget: int, tmp_dir: str | None, near: str | None = None):
        self.stack = stack
        self.budget = budget
        self.tmp_dir = tmp_dir or (os.path.dirname(os.path.abspath(near)) if near else None)
        self._dir = None
        self.spent = 0

    def array(self, shape, dtype, *, zero=True, order="C") -> np.ndarray:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if self.spent + nbytes <= self.budget // 4:
            self.spent += nbytes
            return (np.zeros if zero else np.empty)(shape, dtype=dtype, order=order)
        if self._dir is None:
            self._dir = self.stack.enter_context(scratch_dir("matmul", self.tmp_dir))
        path = os.path.join(self._dir, f"scratch-{len(os.listdir(self._dir))}.npy")
        return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=tuple(shape),
                                         fortran_order=order == "F")


def prepare_dense(arr: np.ndarray, transpose: bool, conj: bool, dtype: np.dtype, scratch: Scratch) -> np.ndarray:
    """op(arr) (its last two axes transposed and/or conjugated) as a C-contiguous array of
    ``dtype``: the memory map itself when nothing changes, else a copy made a slab of rows at a
    time (in memory when small).  Leading (batch) axes are kept."""
    dtype = np.dtype(dtype)
    conj = conj and arr.dtype.kind == "c"
    src = np.swapaxes(arr, -1, -2) if transpose else arr
    if not conj and src.dtype == dtype and src.flags.c_contiguous:
        return src
    out = scratch.array(src.shape, dtype, zero=False)
    batches = src.reshape(-1, *src.shape[-2:])  # a view: only the leading axes merge
    slabs = out.reshape(batches.shape)
    rows, cols = batches.shape[1:]
    row_bytes = max(cols, 1) * (dtype.itemsize + arr.dtype.itemsize)
    step = max(1, (scratch.budget // 8) // row_bytes)
    with np.errstate(all="ignore"):
        for b in range(batches.shape[0]):
            for start in range(0, rows, step):
                block = batches[b, start:start + step]
                slabs[b, start:start + step] = np.conj(block) if conj else block
    return out


def pool(stack: ExitStack, budget: Budget, name: str) -> ThreadPoolExecutor | None:
    """The second thread a product splits its rows onto; None with one worker."""
    if budget.workers < 2:
        return None
    return stack.enter_context(ThreadPoolExecutor(2, thread_name_prefix=name))
