"""matmul on a cluster, each product split by its output's rows so that every task computes
whole output rows exactly as one machine does (same entries, same order, so float sums agree bit
for bit).

Sparse A x dense B (.npy on storage every worker sees), into a .npy on that storage
(npyfile.py): A's entries are shuffled into key ranges of the output's row dimension (A's rows,
its columns with --adjoint-a), so each task owns a run of output rows: it takes its entries in
row order (stably: a row's entries keep their input order, so every sum comes out as on one
machine), accumulates a block of rows at a time with the single-machine kernel against B
(memory-mapped by each worker, never sent), and writes each block with pwrite.  Dense A x sparse
B is the same on the transposed product (B'^T A'^T, as on one machine): B's entries by ranges of
the output's columns, written into a Fortran-order .npy, where an output column is contiguous.

Sparse A x sparse B, into a part directory: A's entries by key ranges of the output's rows
(ranges.py), and each range multiplied by the whole of B with the single-machine op, which
holds B in memory when it fits in half of the task's --memory and takes it in slabs of rows
otherwise (each task then reads B once per slab); part i holds output rows of range i, so the
parts concatenate to the canonical single-machine product.  Every task reads all of B, so
there is one range per worker (B read as many times; one per input piece doubled the workers'
CPU time on 8 parts): the price of sums identical to one machine's (partitioning on the
contracted dimension would sum the partial products in another order)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from functools import partial

import numpy as np

from .. import _linalg
from .._memory import Budget, budget_of
from ..errors import UsageError
from ..io import absolute, batch_keys, batch_values
from ..ops.matmul import _check_sparse, _DenseProduct, _inner_mismatch, compute_dtype
from ..ops.matmul import matmul as matmul_one
from ..stream.binary import is_dense_path, open_dense
from ..stream.matrices import Scratch, prepare_dense
from ..stream.order import sorted_batches, summed_if_promoted
from .cluster import worker_count
from .npyfile import by_regions, pwrite_all, shared_npy
from .ranges import on_ranges, operand_meta


def product_range(src, _part: str, *, dense_path: str, swap: bool, conj: bool, dense_t: bool, dense_c: bool,
                  npy: str, offset: int, out_dtype, budget: Budget, tmp_dir) -> int:
    """One key range of the sparse operand's entries times the dense one D (the kernel's
    out[row] += value * D'[k], D' = D transposed with ``dense_t``, conjugated with ``dense_c``),
    its output rows written into the .npy (a task's op): the entries taken.  ``swap``: the
    entries' output row is their column; ``conj``: their values are conjugated."""
    out_dtype = np.dtype(out_dtype)
    cdt = compute_dtype(out_dtype)
    src = summed_if_promoted(src, cdt, tmp_dir=tmp_dir)  # duplicates sum in the value type first
    r_dim, k_dim = (1, 0) if swap else (0, 1)
    conj = conj and src.meta.dtype.kind == "c"
    with ExitStack() as stack:
        b = prepare_dense(open_dense(dense_path), dense_t, dense_c, cdt, Scratch(stack, budget.total, tmp_dir, npy))
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


def _dense_product(sparse: str, dense_path: str, output, *, client, sparse_left: bool, adjoint_a: bool,
                   adjoint_b: bool, memory, tmp_dir, progress) -> dict:
    """A sparse x dense product (``sparse_left``) or dense x sparse, as on one machine (ops.matmul:
    the latter as (B'^T A'^T)^T into a Fortran-order .npy), by ranges of the kernel's output rows."""
    if not isinstance(output, str) or not output.lower().endswith(".npy"):
        raise UsageError("a product with a dense operand is dense: name the output *.npy with -o", path=output)
    meta = operand_meta(sparse)
    # The single-machine op's plan checks the operands and chooses the kernel's orientation.
    op = _DenseProduct(open_dense(dense_path), dense_path, sparse, output, sparse_left=sparse_left,
                       adjoint_a=adjoint_a, adjoint_b=adjoint_b, tmp_dir=tmp_dir)
    op.plan(meta)
    (m, n), out_dtype = op.shape, op.out_dtype
    kernel = dict(swap=op.swap, conj=op.conj, dense_t=op.dense_t, dense_c=op.dense_c)
    budget = budget_of(memory)
    with shared_npy(output, (m, n), out_dtype, fortran=not sparse_left) as (npy, offset, scratch):
        fn = partial(product_range, dense_path=absolute(dense_path), npy=npy, offset=offset,
                     out_dtype=out_dtype, budget=budget, tmp_dir=tmp_dir, **kernel)
        outcome = by_regions(client, sparse, meta, (1 if kernel["swap"] else 0,), fn, scratch, budget=budget,
                             progress=progress)
    return {"rows": outcome.rows_out, "shape": [m, n], "dtype": str(out_dtype), "bytes": op.nbytes, "output": "dense",
            "parts": outcome.parts, "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}


def product_rows(src, output: str, *, b: str, adjoint_a: bool, adjoint_b: bool, budget: Budget, tmp_dir) -> dict:
    """One key range of A's output rows times the whole of B, by the single-machine op (a task's op)."""
    return matmul_one(src, b, output, adjoint_a=adjoint_a, adjoint_b=adjoint_b, memory=budget, tmp_dir=tmp_dir)


def _sparse_product(a: str, b: str, output, *, client, adjoint_a: bool, adjoint_b: bool, memory, tmp_dir,
                    progress) -> dict:
    """A sparse x sparse product into the part directory ``output``, by ranges of A's output rows."""
    ma, mb = operand_meta(a), operand_meta(b)
    _check_sparse(ma, a, "a")
    _check_sparse(mb, b, "b")
    ka = ma.shape[0] if adjoint_a else ma.shape[1]
    kb = mb.shape[1] if adjoint_b else mb.shape[0]
    if ka != kb:
        raise _inner_mismatch(ka, kb, ma.shape, mb.shape)
    budget = budget_of(memory)
    fn = partial(product_rows, b=absolute(b), adjoint_a=adjoint_a, adjoint_b=adjoint_b, budget=budget,
                 tmp_dir=tmp_dir)
    # One range per worker: every range reads all of B, so fewer ranges read it fewer times.
    r = on_ranges(client, fn, [a], output, order=(1 if adjoint_a else 0,), memory=budget, progress=progress,
                  ranges=worker_count(client))
    parts = r.pop("results")
    if progress:
        progress.advance(mb.nnz or 0)  # B's entries count in, as on one machine (read by every task)
    rows = (ma.nnz or 0) + (mb.nnz or 0)
    return {**r, "rows": rows, "rows_in": rows, "dtype": r["value_type"], "output": "sparse",
            "canonical": all(p["canonical"] for p in parts)}


def matmul(a: str, b: str, output: str, *, client, adjoint_a: bool = False, adjoint_b: bool = False, memory=None,
           tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.matmul`` on the cluster of ``client`` (see the module docstring): with a dense
    operand, into the .npy ``output`` on shared storage; of two sparse ones, into the part
    directory ``output``.  Each operand is a path every worker reads."""
    dense_a, dense_b = is_dense_path(a), is_dense_path(b)  # a sparse operand's path: operand_meta checks it
    if dense_a and dense_b:
        raise UsageError("both operands are dense (.npy); matmul needs at least one sparse tensor (use NumPy for "
                         "dense x dense)")
    kw = dict(client=client, adjoint_a=bool(adjoint_a), adjoint_b=bool(adjoint_b), memory=memory, tmp_dir=tmp_dir,
              progress=progress)
    if dense_b:
        return _dense_product(a, b, output, sparse_left=True, **kw)
    if dense_a:
        return _dense_product(b, a, output, sparse_left=False, **kw)
    return _sparse_product(a, b, output, **kw)
