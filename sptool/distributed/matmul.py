"""matmul of a sparse A by a dense B (.npy on storage every worker sees) on a cluster, into a
.npy on that storage (npyfile.py).  A's entries are shuffled into key ranges of the output's row
dimension (A's rows, its columns with --adjoint-a), so each task owns a run of output rows: it
takes its entries in row order (stably: a row's entries keep their input order, so every sum
comes out as on one machine), accumulates a block of rows at a time with the single-machine
kernel against B (memory-mapped by each worker, never sent), and writes each block with pwrite.
Dense x sparse and sparse x sparse stay on one machine."""

from __future__ import annotations

import os
from contextlib import ExitStack
from functools import partial

import numpy as np

from .. import _linalg
from .._memory import Budget, budget_of
from ..errors import UsageError
from ..io import batch_keys, batch_values
from ..ops.matmul import _check_dense, _check_sparse, _inner_mismatch, compute_dtype
from ..stream.binary import is_dense_path, open_dense, promote
from ..stream.dense import check_dense_size
from ..stream.matrices import Scratch, prepare_dense
from ..stream.order import sorted_batches, summed_if_promoted
from .npyfile import by_regions, pwrite_all, shared_npy
from .ranges import operand_meta


def product_range(src, _part: str, *, b_path: str, adjoint_a: bool, adjoint_b: bool, npy: str, offset: int,
                  out_dtype, budget: Budget, tmp_dir) -> int:
    """One key range of A's entries times B, its output rows written into the .npy (a task's op):
    the entries taken."""
    out_dtype = np.dtype(out_dtype)
    cdt = compute_dtype(out_dtype)
    src = summed_if_promoted(src, cdt, tmp_dir=tmp_dir)  # duplicates sum in the value type first
    r_dim, k_dim = (1, 0) if adjoint_a else (0, 1)
    conj = adjoint_a and src.meta.dtype.kind == "c"
    with ExitStack() as stack:
        b = prepare_dense(open_dense(b_path), adjoint_b, adjoint_b, cdt, Scratch(stack, budget.total, tmp_dir, npy))
        n = b.shape[1]
        row_bytes = n * out_dtype.itemsize
        block = np.zeros((max(1, min(b.shape[0] or 1, budget.total // 4 // max(n * cdt.itemsize, 1))), n), cdt)
        fd = os.open(npy, os.O_RDWR)
        stack.callback(os.close, fd)
        start, last, taken = 0, -1, 0  # block's first row, the last row reached (-1: none)

        def flush():
            if last >= start:
                pwrite_all(fd, block[:last - start + 1].astype(out_dtype, copy=False), offset + start * row_bytes)
                block[:last - start + 1] = 0

        for batch, _ in sorted_batches(src, (r_dim,), budget=budget, tmp_dir=tmp_dir, keys=False):
            keys = batch_keys(batch, 2)
            rows, cols = np.ascontiguousarray(keys[r_dim]), np.ascontiguousarray(keys[k_dim])
            vals = batch_values(batch, src.meta).astype(cdt, copy=False)
            vals = np.ascontiguousarray(np.conj(vals) if conj else vals)
            lo = 0
            while lo < len(rows):
                if last < start or rows[lo] >= start + len(block):
                    flush()
                    start, last = int(rows[lo]), -1
                hi = int(np.searchsorted(rows, start + len(block), side="left"))
                _linalg.spmm_coo(rows[lo:hi] - start, cols[lo:hi], vals[lo:hi], b, block)
                last, lo = int(rows[hi - 1]), hi
            taken += len(rows)
        flush()
    return taken


def matmul(a: str, b: str, output: str, *, client, adjoint_a: bool = False, adjoint_b: bool = False, memory=None,
           tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.matmul`` of a sparse ``a`` by a dense .npy ``b`` on the cluster of ``client``, into
    the .npy ``output`` on shared storage (see the module docstring)."""
    if is_dense_path(a) or not is_dense_path(b):
        raise UsageError("on a cluster matmul multiplies a sparse A by a dense B (.npy on storage every worker "
                         "sees); run dense x sparse and sparse x sparse without --scheduler")
    if not isinstance(output, str) or not output.lower().endswith(".npy"):
        raise UsageError("a product with a dense operand is dense: name the output *.npy with -o", path=output)
    meta, dense = operand_meta(a), open_dense(b)
    _check_sparse(meta, a, "a")
    _check_dense(dense, b, "b")
    m, ka = (meta.shape[1], meta.shape[0]) if adjoint_a else meta.shape
    kb, n = (dense.shape[1], dense.shape[0]) if adjoint_b else dense.shape
    if ka != kb:
        raise _inner_mismatch(ka, kb, meta.shape, dense.shape)
    out_dtype = promote(meta.dtype, dense.dtype)
    nbytes = check_dense_size((m, n), out_dtype, output)
    budget = budget_of(memory)
    with shared_npy(output, (m, n), out_dtype) as (npy, offset, scratch):
        fn = partial(product_range, b_path=os.path.abspath(b), adjoint_a=adjoint_a, adjoint_b=adjoint_b, npy=npy,
                     offset=offset, out_dtype=out_dtype, budget=budget, tmp_dir=tmp_dir)
        outcome = by_regions(client, a, meta, (1 if adjoint_a else 0,), fn, scratch, budget=budget, progress=progress)
    return {"rows": outcome.rows_out, "shape": [m, n], "dtype": str(out_dtype), "bytes": nbytes, "output": "dense",
            "parts": outcome.parts, "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}
