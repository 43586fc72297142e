"""matmul: sparse x dense and dense x sparse (a dense .npy out, TensorFlow's sparse_dense_matmul)
and sparse x sparse (a sparse tensor out, SpGEMM), streaming the sparse operand.

Sparse x dense streams A's entries in batches through a compiled kernel (out[row] += value *
B[col]) with the GIL released, split over two threads by output rows: a row-sorted batch is
cut at a row boundary near its middle, any other batch is partitioned (stably) around a sampled
median row, so the two threads never write the same output row.  Dense x sparse is computed as
(B'^T A'^T)^T, as TensorFlow does; its .npy is written in Fortran (column-major) order, which is
the row-major layout of the transposed product, so no transpose pass is needed (np.load reads it
as the same array).

Sparse x sparse sorts A by rows (passed through when already so), holds B (with B' = B or B^H)
in memory as CSR, and multiplies blocks of complete A rows with a dense accumulator per thread,
emitting rows in order: the output is canonical.  An output entry exists wherever some product
A[i,k] * B[k,j] exists (cancellation leaves an explicit zero, as the format keeps explicit
entries).  When B does not fit in half of ``memory`` it is multiplied in slabs of rows that
do: A (sorted once) is read once per slab, and the slabs' products are summed by the external
sort, so memory stays bounded for any B.  When two dense accumulators of B's column count do
not fit in a quarter of ``memory`` (10^10 columns would want 480 GB), a block's products are
accumulated by sorting them instead: sparse, its memory bounded by the block.  B's rows are
indexed densely (CSR) while that index fits in a sixteenth of ``memory``, else by the rows it
has, found by binary search.

Kernel value types are float32/64, int32/64 and complex64/128; other types are computed in a
wider one and cast back at the end (integer results then wrap exactly as in their own type;
float16 accumulates in float32; bool is OR of ANDs).

Both are StreamOps that ``engine.run`` drives.  A dense product's ``map`` turns a batch of
the sparse operand into the kernel's (row, column, value) entries, and its output is a sink of
its own that adds them into the dense result (_DenseOut).  A sparse product's ``read`` gives
blocks of whole rows of A' (after reading B' into memory) and ``map`` multiplies one block;
when B' must be taken in slabs, ``read`` gives the products summed over the slabs.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import numpy as np

from .. import _checks, _kernels, _linalg
from .._memory import Budget, budget_of
from .._messages import out_of_bounds
from ..errors import DataError, ShapeMismatch, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import (
    AtomicTarget,
    ClosesOrAborts,
    batch_keys,
    batch_values,
    check_dense_size,
    check_inputs,
    copy_slabs,
    is_npy,
    open_operands,
    open_sink,
    open_source,
    release,
    scratch_dir,
)
from ..stream.binary import (
    is_dense_path,
    numeric_dtype,
    open_dense,
    promote,
    require_zero_fill,
)
from ..stream.duplicates import deduplicated
from ..stream.engine import Plan, StreamOp, run
from ..stream.matrices import Scratch, prepare_dense
from ..stream.matrices import pool as second_thread
from ..stream.order import sorted_batches, summed_if_promoted
from ..stream.runs import whole_runs
from ..tensor import SparseTensor

KERNEL_TYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128)}
# Batches smaller than this run on one thread: splitting costs more than it saves.
PARALLEL_MIN = 1 << 15


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The kernel type a product of this value type is accumulated in."""
    dtype = np.dtype(dtype)
    if dtype in KERNEL_TYPES:
        return dtype
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize < 4 else np.dtype(np.float64)
    return np.dtype(np.int64)  # bool and the other integers: exact modulo 2^64, cast back at the end


def _check_sparse(meta: TensorMeta, path: str, name: str):
    numeric_dtype(meta, path, "matmul")
    require_zero_fill(meta, path, "matmul")
    if meta.ndim != 2 or meta.sparse_ndim != 2:
        raise ShapeMismatch(f"Tensor '{name}_shape' must have 2 elements: matmul needs a sparse matrix (2 sparse "
                            f"dimensions), got shape {list(meta.shape)} with {meta.sparse_ndim} sparse "
                            "dimension(s)", path=path)


def _check_dense(arr: np.ndarray, path: str, name: str):
    if arr.ndim != 2:
        raise ShapeMismatch(f"Tensor '{name}' is not a matrix: shape {list(arr.shape)}", path=path)


def _inner_mismatch(k1, k2, sa, sb):
    return ShapeMismatch(f"cannot multiply A and B: the inner dimensions do not match ({k1} vs. {k2}); A is "
                         f"[{sa[0]}, {sa[1]}] and B is [{sb[0]}, {sb[1]}] (missing --adjoint-a or --adjoint-b?)")


def _bounds_error(keys, i, at, swap, m, k):
    """TensorFlow's per-entry message (sparse_tensor_dense_matmul_op.cc): k is checked first."""
    r_dim, k_dim = (1, 0) if swap else (0, 1)
    kv, mv = int(keys[k_dim, i]), int(keys[r_dim, i])
    if not 0 <= kv < k:
        return DataError(f"k ({kv}) from index[{at},{k_dim}] out of bounds (>={k})")
    return DataError(f"m ({mv}) from index[{at},{r_dim}] out of bounds (>={m})")


class _SpMM:
    """Streams COO entries into out += A' @ dense, two threads on disjoint output rows."""

    def __init__(self, dense: np.ndarray, out: np.ndarray, pool: ThreadPoolExecutor | None, *, parallel_rows: int,
                 release_bytes: int | None = None):
        self.dense = dense
        self.out = out
        self.pool = pool
        self.parallel_rows = parallel_rows
        self.dtype = out.dtype
        # An output bigger than the memory budget: write its dirty pages back and drop them from
        # RSS every so often (as todense does), so the memory map does not count against --memory.
        self.release_bytes = release_bytes
        self._since_release = 0
        self._pending = []

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
        n = len(rows)
        if n == 0:
            return
        self._compute(rows, cols, vals)
        if self.release_bytes:
            self._since_release += n * max(self.out.shape[1] * self.out.itemsize, 1)
            if self._since_release > self.release_bytes:
                self.finish()
                release(self.out)
                self._since_release = 0

    def finish(self):
        """Wait for the batch on the threads (its error, if any, is raised here)."""
        pending, self._pending = self._pending, []
        for f in pending:
            f.result()

    def _compute(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
        """This batch split between the threads, and left to them: the caller reads and checks
        the next one meanwhile.  Two batches' rows may meet, so one batch runs at a time."""
        n = len(rows)
        if self.pool is None or n < self.parallel_rows:
            self.finish()
            _linalg.spmm_coo(rows, cols, vals, self.dense, self.out)
            return
        # Non-decreasing rows (indices are checked non-negative, so unsigned order is theirs).
        if _checks.codes_order_violation(rows.view(np.uint64), False)[0] < 0:
            mid = rows[n // 2]
            s = int(np.searchsorted(rows, mid, side="left"))
            if s == 0:
                s = int(np.searchsorted(rows, mid, side="right"))
        else:
            sample = rows[:: max(1, n // 4096)]
            pivot = int(np.partition(sample, len(sample) // 2)[len(sample) // 2])
            if pivot == int(sample.min()):
                pivot += 1
            r2, c2, v2 = np.empty_like(rows), np.empty_like(cols), np.empty_like(vals)
            s = _linalg.split_rows(rows, cols, vals, pivot, r2, c2, v2)
            rows, cols, vals = r2, c2, v2
        self.finish()
        self._pending = [self.pool.submit(_linalg.spmm_coo, rows[lo:hi], cols[lo:hi], vals[lo:hi], self.dense,
                                          self.out) for lo, hi in ((0, s), (s, n)) if hi > lo]


class _DenseProduct(StreamOp):
    """A product with one dense operand: each batch of the sparse operand's entries (row and
    column swapped for an adjoint, values conjugated) checked against its shape and added into
    the dense output by the kernel.  The output is the op's own sink (_DenseOut)."""

    def __init__(self, dense: np.ndarray, dense_path, sparse_path, output, *, sparse_left: bool, adjoint_a: bool,
                 adjoint_b: bool, tmp_dir):
        self.dense, self.dense_path, self.sparse_path, self.output = dense, dense_path, sparse_path, output
        self.tmp_dir = tmp_dir
        self.sparse_left, self.adjoint_a, self.adjoint_b = sparse_left, adjoint_a, adjoint_b
        self.seen = 0

    def plan(self, meta: TensorMeta) -> Plan:
        dense, dense_path, sparse_path = self.dense, self.dense_path, self.sparse_path
        adjoint_a, adjoint_b = self.adjoint_a, self.adjoint_b
        if self.sparse_left:
            _check_sparse(meta, sparse_path, "a")
            _check_dense(dense, dense_path, "b")
            sa, sb = meta.shape, dense.shape
        else:
            _check_dense(dense, dense_path, "a")
            _check_sparse(meta, sparse_path, "b")
            sa, sb = dense.shape, meta.shape
        m, ka = (sa[1], sa[0]) if adjoint_a else (sa[0], sa[1])
        kb, n = (sb[1], sb[0]) if adjoint_b else (sb[0], sb[1])
        if ka != kb:
            raise _inner_mismatch(ka, kb, sa, sb)
        self.shape = (m, n)
        self.out_dtype = out_dtype = promote(meta.dtype, dense.dtype)
        self.cdt = compute_dtype(out_dtype)
        self.nbytes = check_dense_size((m, n), out_dtype, self.output) if self.output is not None else 0
        if self.sparse_left:
            # out = A' @ B': the sparse entries (transposed and conjugated for adjoint_a) times B'.
            self.swap, self.conj = adjoint_a, adjoint_a
            self.dense_t, self.dense_c = adjoint_b, adjoint_b
            self.rows_out, self.inner = m, ka
        else:
            # out^T = B'^T A'^T: B'^T is B^T, or conj(B) for adjoint_b; A'^T is A^T, or conj(A).
            self.swap, self.conj = not adjoint_b, adjoint_b
            self.dense_t, self.dense_c = not adjoint_a, adjoint_a
            self.rows_out, self.inner = n, kb
        self.bounds = np.asarray(meta.shape, dtype=np.int64)
        out_meta = TensorMeta(shape=(m, n), sparse_ndim=2, value_type=value_type_of_dtype(out_dtype),
                              fill_value=np.zeros((), out_dtype).item())
        return Plan(out_meta, pieces=True)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        self.out = _DenseOut(self, output, budget=budget, tmp_dir=self.tmp_dir)
        return self.out

    def read(self, src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        src = summed_if_promoted(src, self.cdt, tmp_dir=tmp_dir)  # duplicates sum in the value type first
        for cols, vals in src.iter_columns(budget=budget):
            yield vals, cols
            if progress:
                progress.advance(len(vals))

    def map(self, vals, cols):
        """The entries of one batch (its index columns as the batch holds them) as (rows,
        columns, values) of the product's kernel."""
        bad, _ = _kernels.columns_out_of_bounds(cols, self.bounds)
        if bad >= 0:
            keys = np.array([[c[bad]] for c in cols], dtype=np.int64)
            e = _bounds_error(keys, 0, self.seen + bad, self.swap, self.rows_out, self.inner)
            raise DataError(e.message, path=self.sparse_path)
        self.seen += len(vals)
        vals = vals.astype(self.cdt, copy=False)
        if self.conj and vals.dtype.kind == "c":
            vals = np.conj(vals)
        r_dim, k_dim = (1, 0) if self.swap else (0, 1)
        yield np.ascontiguousarray(cols[r_dim]), np.ascontiguousarray(cols[k_dim]), np.ascontiguousarray(vals)


class _DenseOut(ClosesOrAborts):
    """The dense product as an output: a memory map of the .npy's hidden temporary sibling (in
    Fortran order for dense x sparse, the row-major layout of the transposed product), or an
    array when there is no output; entries add into it, or into a compute-type scratch cast back
    on close, and the file is renamed into place on close (removed on abort)."""

    def __init__(self, op: _DenseProduct, output, *, budget: Budget, tmp_dir):
        self.stack = ExitStack()
        self.budget = budget
        self.target = AtomicTarget(output, is_dir=False) if output is not None else None
        try:
            scratch = Scratch(self.stack, budget.total, tmp_dir, output)
            m, n = op.shape
            if self.target is None:
                self.final = np.zeros((m, n), dtype=op.out_dtype, order="C" if op.sparse_left else "F")
            else:
                self.final = np.lib.format.open_memmap(self.target.tmp, mode="w+", dtype=op.out_dtype, shape=(m, n),
                                                       fortran_order=not op.sparse_left)
            self.view = self.final if op.sparse_left else self.final.T  # C-contiguous (rows_out, cols) either way
            self.cast_back = False
            if op.cdt == op.out_dtype:
                acc = self.view
            elif op.out_dtype == np.uint64:
                acc = self.view.view(np.int64)  # same bits, same arithmetic modulo 2^64
            else:
                acc = scratch.array(self.view.shape, op.cdt)
                self.cast_back = True
            b = prepare_dense(op.dense, op.dense_t, op.dense_c, op.cdt, scratch)
            pool = second_thread(self.stack, budget, "sptool-spmm")
            self.spmm = _SpMM(b, acc, pool, parallel_rows=budget.parallel_rows or PARALLEL_MIN,
                              release_bytes=budget.total // 4 if acc.nbytes > budget.total // 2 else None)
        except BaseException:
            self.abort()
            raise

    def write(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
        self.spmm.add(rows, cols, vals)

    def close(self):
        self.spmm.finish()
        if self.cast_back:
            copy_slabs(self.spmm.out, self.view, self.budget)
        if self.target is None:
            self.stack.close()
            return
        # Unmapped before the rename, not synced: the written pages are the file's in the page cache,
        # written back by the kernel as a write() would be (an msync waited for the disk).
        self.final = self.view = self.spmm = None
        self.target.commit()
        self.stack.close()

    def abort(self):
        try:
            if self.target is not None:
                self.target.abort()
        finally:
            self.stack.close()


def _dense_product(sparse_path: str, dense_path, output, *, sparse_left: bool, adjoint_a: bool,
                   adjoint_b: bool, budget: Budget, tmp_dir, progress):
    in_memory = isinstance(dense_path, np.ndarray)
    if in_memory and output is None:
        pass  # an array operand and no output: the product is returned as an array
    elif not is_npy(output):
        raise UsageError("a product with a dense operand is dense: name the output *.npy with -o", path=output)
    dense = dense_path if in_memory else open_dense(dense_path)
    if in_memory:
        dense_path = "the array operand"
        if dense.dtype.kind not in "biufc":
            raise UsageError(f"a dense operand must hold numbers, not {dense.dtype}")
    with open_operands([sparse_path], tmp_dir) as (src,):
        # src.path: a name for messages, also when the operand is an in-memory tensor
        op = _DenseProduct(dense, dense_path, src.path, output, sparse_left=sparse_left, adjoint_a=adjoint_a,
                           adjoint_b=adjoint_b, tmp_dir=tmp_dir)
        run(op, src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
    if output is None:
        return op.out.final
    m, n = op.shape
    return {"rows": op.seen, "shape": [m, n], "dtype": str(op.out_dtype), "bytes": op.nbytes, "output": "dense"}


# ---------------------------------------------------------------------------------------------
# sparse x sparse

class _CSR:
    """B' (k x n) in memory, rows = B' rows, built from any entry order (duplicates accumulate).
    The caller has checked that B fits (else it takes B in slabs, _slabs).  ``row_ids``: None
    when ``indptr`` has a slot for every row; else the rows B' has, sorted, and ``indptr`` one
    slot for each of them (a dense index of 10^10 rows would want 80 GB)."""

    def __init__(self, src, path, transpose: bool, conj: bool, k: int, dtype: np.dtype, budget: Budget):
        meta = src.meta
        bounds = np.asarray(meta.shape, dtype=np.int64)
        r_dim, c_dim = (1, 0) if transpose else (0, 1)
        rows, cols, vals, seen = [], [], [], 0
        for keys, v in src.iter_arrays(budget=budget):
            bad, _ = _kernels.first_out_of_bounds(keys, bounds)
            if bad >= 0:
                raise DataError(out_of_bounds(seen + bad, keys, bad, meta.shape), path=path)
            rows.append(keys[r_dim].copy())
            cols.append(keys[c_dim].copy())
            v = v.astype(dtype, copy=True)
            vals.append(np.conj(v) if conj and v.dtype.kind == "c" else v)
            seen += keys.shape[1]
        r = np.concatenate(rows) if rows else np.empty(0, np.int64)
        c = np.concatenate(cols) if cols else np.empty(0, np.int64)
        x = np.concatenate(vals) if vals else np.empty(0, dtype)
        del rows, cols, vals
        self._build(r, c, x, 0, k, budget)

    @classmethod
    def from_rows(cls, r, c, x, lo: int, hi: int, budget: Budget) -> _CSR:
        """B' rows lo..hi-1 (entries given with their global row numbers); row i - lo here."""
        self = cls.__new__(cls)
        self._build(r - lo, c, x, lo, hi - lo, budget)
        return self

    def _build(self, r, c, x, lo: int, k: int, budget: Budget):
        order = np.argsort(r, kind="stable")
        self.cols = np.ascontiguousarray(c[order])
        self.vals = np.ascontiguousarray(x[order])
        self.nnz = len(r)
        self.lo = lo
        self.rows = k
        if (k + 1) * 8 <= budget.total // 16:
            self.row_ids = None
            self.indptr = np.zeros(k + 1, dtype=np.int64)
            np.cumsum(np.bincount(r, minlength=k), out=self.indptr[1:])
            return
        self.row_ids, counts = np.unique(r[order], return_counts=True)
        self.indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def local(self, rows, cols, vals):
        """A's entries (rows, cols, vals) that meet a row of B', their cols turned into that row's
        slot in ``indptr``."""
        if self.row_ids is None:
            return rows, cols, vals
        at = np.minimum(np.searchsorted(self.row_ids, cols), max(len(self.row_ids) - 1, 0))
        hit = self.row_ids[at] == cols if len(self.row_ids) else np.zeros(len(cols), dtype=bool)
        return rows[hit], np.ascontiguousarray(at[hit]), vals[hit]


class _RowBlocks:
    """A's entries sorted by (output) row, cut into blocks of complete rows."""

    def __init__(self, src, path, row_dim: int, conj: bool, dtype, *, budget: Budget, tmp_dir, progress):
        self.src, self.path, self.row_dim, self.conj, self.dtype = src, path, row_dim, conj, dtype
        # The full order (row, k): a packed sort key drops the index columns outside a partial order
        # (KeyCodec.payload), and k-ordered rows read B's rows in order.
        self.stream = sorted_batches(src, (row_dim, 1 - row_dim), budget=budget, tmp_dir=tmp_dir,
                                     progress=progress)

    def __iter__(self):
        for keys, vals in whole_runs(self._checked(), [self.row_dim]):
            rows = np.ascontiguousarray(keys[self.row_dim])
            cols = np.ascontiguousarray(keys[1 - self.row_dim])
            yield rows, cols, np.ascontiguousarray(vals)

    def _checked(self):
        meta = self.src.meta
        for batch, _ in self.stream:
            keys = batch_keys(batch, 2)
            vals = batch_values(batch, meta).astype(self.dtype, copy=False)
            if self.conj and vals.dtype.kind == "c":
                vals = np.conj(vals)
            yield keys, vals


class _SpGEMM:
    """Products of row blocks of A with B (CSR), on two threads with their own accumulators:
    dense ones over B's n columns, or with ``sparse`` the products of a block sorted and summed
    (_sorted_products), a block then holding at most ``cap_entries`` products."""

    def __init__(self, csr: _CSR, n: int, dtype: np.dtype, pool, cap_entries: int, parallel_rows: int,
                 sparse: bool = False):
        self.csr, self.n, self.dtype, self.pool = csr, n, dtype, pool
        self.cap_entries = cap_entries
        self.parallel_rows = parallel_rows
        self.sparse = sparse
        # A block is split in two halves at most, each with an accumulator of its own.
        self.scratch = [] if sparse else [(np.zeros(n, dtype), np.full(n, -1, np.int64), np.empty(n, np.int64))
                                          for _ in range(1 if pool is None else 2)]

    def _run(self, t, rows, cols, vals, cap):
        if self.sparse:
            return _sorted_products(self.csr, rows, cols, vals)
        acc, mark, touched = self.scratch[t]
        keys, vals_out = np.empty((2, cap), np.int64), np.empty(cap, self.dtype)
        got = _linalg.spgemm_rows(rows, cols, vals, self.csr.indptr, self.csr.cols, self.csr.vals, acc, mark,
                                  touched, keys[0], keys[1], vals_out)
        return keys[:, :got], vals_out[:got]

    def blocks(self, rows, cols, vals):
        """Yield ((2, n) keys, values) of the product for complete rows, in order."""
        rows, cols, vals = self.csr.local(rows, cols, vals)
        indptr = self.csr.indptr
        lens = indptr[cols + 1] - indptr[cols]
        starts = np.concatenate([[0], np.flatnonzero(rows[1:] != rows[:-1]) + 1])
        per_row = np.add.reduceat(lens, starts) if len(rows) else np.empty(0, np.int64)
        if not self.sparse:  # a dense accumulator's row gives at most n entries
            per_row = np.minimum(per_row, self.n)
        bounds = np.append(starts, len(rows))
        cum = np.cumsum(per_row)
        # Blocks of whole rows whose worst-case output fits in cap_entries (a row alone may exceed it).
        r0 = 0
        while r0 < len(starts):
            base = cum[r0 - 1] if r0 else 0
            r1 = max(r0 + 1, int(np.searchsorted(cum, base + self.cap_entries, side="right")))
            r1 = min(r1, len(starts))
            yield from self._block(rows, cols, vals, bounds, per_row, r0, r1)
            r0 = r1

    def _block(self, rows, cols, vals, bounds, per_row, r0, r1):
        lo, hi = int(bounds[r0]), int(bounds[r1])
        total = int(per_row[r0:r1].sum())
        if self.pool is None or r1 - r0 < 2 or hi - lo < self.parallel_rows // 4:
            yield self._run(0, rows[lo:hi], cols[lo:hi], vals[lo:hi], total)
            return
        cum = np.cumsum(per_row[r0:r1])
        rm = r0 + min(max(int(np.searchsorted(cum, total // 2)), 1), r1 - r0 - 1)
        mid = int(bounds[rm])
        caps = (int(per_row[r0:rm].sum()), int(per_row[rm:r1].sum()))
        futures = [self.pool.submit(self._run, t, rows[a:b], cols[a:b], vals[a:b], cap)
                   for t, (a, b, cap) in enumerate(((lo, mid, caps[0]), (mid, hi, caps[1])))]
        for f in futures:
            yield f.result()


def _sorted_products(csr: _CSR, rows, cols, vals):
    """((2, n) keys, values) of A's entries (rows grouped) times B' (cols already B's slots),
    accumulated by sorting: every product A[i,k] * B[k,j] formed, sorted stably by (i, j) (each
    coordinate's products then add in the order a dense accumulator adds them) and summed."""
    lens = csr.indptr[cols + 1] - csr.indptr[cols]
    entry = np.repeat(np.arange(len(rows)), lens)
    at = np.arange(len(entry)) + np.repeat(csr.indptr[cols] - (np.cumsum(lens) - lens), lens)
    i, j = rows[entry], csr.cols[at]
    products = vals[entry] * csr.vals[at]
    order = np.lexsort((j, i))
    i, j, products = i[order], j[order], products[order]
    if not len(i):
        return np.empty((2, 0), np.int64), products
    starts = np.flatnonzero(np.concatenate([[True], (i[1:] != i[:-1]) | (j[1:] != j[:-1])]))
    return np.stack([i[starts], j[starts]]), np.add.reduceat(products, starts)





def _slabs(sb, path_b, adjoint_b: bool, dtype, cap: int, *, budget: Budget, tmp_dir):
    """B' in slabs of at most ``cap`` entries, in the order of its rows (external sort when B is
    not stored so): CSRs of consecutive row ranges.  A row may straddle two slabs; the products
    of its two parts sum like those of any two rows."""
    meta = sb.meta
    r_dim, c_dim = (1, 0) if adjoint_b else (0, 1)
    held, size = [], 0

    def slab():
        r, c, x = (np.concatenate([h[i] for h in held]) for i in range(3))
        return _CSR.from_rows(r, c, x, int(r[0]), int(r[-1]) + 1, budget)

    for batch, _ in sorted_batches(sb, (r_dim, c_dim), budget=budget, tmp_dir=tmp_dir, keys=False):
        keys = batch_keys(batch, 2)
        vals = batch_values(batch, meta).astype(dtype, copy=True)
        if adjoint_b and vals.dtype.kind == "c":
            vals = np.conj(vals)
        r, c = keys[r_dim], keys[c_dim]
        at = 0
        while at < len(r):
            take = min(cap - size, len(r) - at)
            held.append((r[at:at + take], c[at:at + take], vals[at:at + take]))
            size += take
            at += take
            if size == cap:
                yield slab()
                held, size = [], 0
    if size:
        yield slab()


class _SparseProduct(StreamOp):
    """A' @ B' of two sparse operands, canonical.  B' is held in memory as CSR (its entries are
    read first), and A's entries, sorted by output row and cut into blocks of whole rows, are
    what ``map`` multiplies: one block's product rows, in order.  When B' does not fit, it is
    taken in slabs (``_slabbed``)."""

    def __init__(self, paths, *, adjoint_a: bool, adjoint_b: bool, budget: Budget):
        self.path_a, self.path_b = paths
        self.adjoint_a, self.adjoint_b, self.budget = adjoint_a, adjoint_b, budget

    def plan(self, ma: TensorMeta, mb: TensorMeta) -> Plan:
        _check_sparse(ma, self.path_a, "a")
        _check_sparse(mb, self.path_b, "b")
        m, ka = (ma.shape[1], ma.shape[0]) if self.adjoint_a else ma.shape
        kb, n = (mb.shape[1], mb.shape[0]) if self.adjoint_b else mb.shape
        if ka != kb:
            raise _inner_mismatch(ka, kb, ma.shape, mb.shape)
        self.shape, self.k = (m, n), kb
        self.out_dtype = out_dtype = promote(ma.dtype, mb.dtype)
        self.cdt = cdt = compute_dtype(out_dtype)
        scratch_bytes = min(self.budget.workers, 2) * n * (cdt.itemsize + 16)
        # Dense accumulators over B's columns while two fit in a quarter of --memory, else sorted products
        # (about 64 bytes each while a block's are sorted, so a block holds fewer).
        self.sparse = scratch_bytes > self.budget.share(2).total // 2
        self.cap_entries = max(1 << 14, (self.budget.total // 8) // (16 + cdt.itemsize) // (4 if self.sparse else 1))
        # B' in memory as CSR when it fits in half of --memory, else in slabs (_slabbed)
        self.fits = self.budget.slab_entries is None and mb.nnz is not None and \
            mb.nnz * (16 + cdt.itemsize) * 2 <= self.budget.share(2).total
        out_meta = TensorMeta(shape=(m, n), sparse_ndim=2, value_type=value_type_of_dtype(out_dtype),
                              fill_value=np.zeros((), out_dtype).item(), sort_order=(0, 1), unique=True)
        return Plan(out_meta, unique_claim=True, pieces=True)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        if not self.fits:
            return self._slabbed(srcs, plan, budget=budget, tmp_dir=tmp_dir)
        return self._row_blocks(srcs, budget=budget, tmp_dir=tmp_dir, progress=progress)

    def _row_blocks(self, srcs, *, budget: Budget, tmp_dir, progress):
        # duplicates sum in each operand's value type before the products are formed
        sa, sb = (summed_if_promoted(s, self.cdt, tmp_dir=tmp_dir) for s in srcs)
        half = budget.share(2)
        with ExitStack() as stack:
            pool = second_thread(stack, budget, "sptool-spgemm")
            csr = _CSR(sb, self.path_b, self.adjoint_b, self.adjoint_b, self.k, self.cdt, budget=half)
            if progress:
                progress.advance(csr.nnz)
            self.engine = _SpGEMM(csr, self.shape[1], self.cdt, pool, self.cap_entries,
                                  budget.parallel_rows or PARALLEL_MIN, self.sparse)
            yield from ((block, None) for block in _RowBlocks(sa, self.path_a, 1 if self.adjoint_a else 0,
                                                                self.adjoint_a, self.cdt, budget=half.share(2),
                                                                tmp_dir=tmp_dir, progress=progress))

    def map(self, block, _):
        """One block of whole rows of A' times B': the product's rows, in order.  (Slabbed, the
        block is already the summed product, in the compute type.)"""
        if not self.fits:
            keys, vals = block
            yield keys, vals.astype(self.out_dtype, copy=False)
            return
        for keys, v in self.engine.blocks(*block):
            if len(v):
                yield keys, v.astype(self.out_dtype, copy=False)

    def _slabbed(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None):
        """A' @ B' when B' does not fit in half of ``memory``: B' in slabs of rows that do (a
        quarter of the budget each), A' sorted by row once (spilled to a temporary file unless
        stored so) and read once per slab for its entries that meet the slab.  Each slab's
        products are row-major and unique; their sum over the slabs comes out of the external
        sort with duplicates summed, in the compute type, so the result is the in-memory one in
        bounded memory."""
        from ..io import make_batch
        from ..stream.sort import sorted_stream

        sa, sb = (summed_if_promoted(s, self.cdt, tmp_dir=tmp_dir) for s in srcs)
        cdt, n = self.cdt, self.shape[1]
        # A quarter of --memory for each of: B's slab, A's pass, the sort of the products (each step
        # takes its own share of a "memory" like --memory; the slab's entries count on their own).
        quarter = budget.share(4)
        slab_entries = budget.slab_entries or max(1024, budget.usable // 4 // (2 * (16 + cdt.itemsize)))
        row_dim = 1 if self.adjoint_a else 0
        order = (row_dim, 1 - row_dim)
        with ExitStack() as stack:
            pool = second_thread(stack, budget, "sptool-spgemm")
            # A' by rows, written once and read once per slab.  Always written, even when A is stored
            # sorted: ``sa`` may be a stream (read once) or have its duplicates summed in their own type
            # first (summed_if_promoted), neither of which rereading the input would give.
            tmp = stack.enter_context(scratch_dir("spgemm", tmp_dir))
            a_path = os.path.join(tmp, "a-sorted.parquet")
            with open_sink(a_path, sa.meta.with_(sort_order=order, nnz=None), unique_claim=None,
                           budget=budget) as a_sink:
                for batch, _ in sorted_batches(sa, order, budget=quarter, tmp_dir=tmp_dir, keys=False):
                    a_sink.write_batch(batch)
            part_meta = plan.meta.with_(value_type=value_type_of_dtype(cdt), sort_order=(), unique=False,
                                        fill_value=np.zeros((), cdt).item(), nnz=None)
            part_schema = part_meta.arrow_schema()

            def partials():
                for csr in _slabs(sb, self.path_b, self.adjoint_b, cdt, slab_entries, budget=quarter,
                                  tmp_dir=tmp_dir):
                    lo, hi = csr.lo, csr.lo + csr.rows
                    # fresh scratch: rows repeat across slabs
                    engine = _SpGEMM(csr, n, cdt, pool, self.cap_entries, budget.parallel_rows or PARALLEL_MIN,
                                     self.sparse)
                    with open_source(a_path) as src:
                        for rows, cols, vals in _RowBlocks(src, self.path_a, row_dim, self.adjoint_a, cdt,
                                                           budget=quarter, tmp_dir=tmp_dir, progress=None):
                            meet = (cols >= lo) & (cols < hi)
                            if not meet.any():
                                continue
                            for keys, v in engine.blocks(rows[meet], cols[meet] - lo,
                                                         np.ascontiguousarray(vals[meet])):
                                if len(v):
                                    yield make_batch(keys, v, part_meta, part_schema)

            stream = sorted_stream(partials(), part_meta, (0, 1), budget=quarter, tmp_dir=tmp_dir)
            for out in deduplicated(stream, "sum", part_meta.with_(sort_order=(0, 1)), part_schema):
                yield (batch_keys(out, 2), batch_values(out, part_meta)), None


def _sparse_product(path_a: str, path_b: str, output, *, adjoint_a: bool, adjoint_b: bool, budget: Budget, tmp_dir,
                    progress) -> dict:
    with open_operands([path_a, path_b], tmp_dir) as (sa, sb):
        # sa.path, sb.path: names for messages, also for in-memory tensors
        op = _SparseProduct((sa.path, sb.path), adjoint_a=adjoint_a, adjoint_b=adjoint_b, budget=budget)
        sink = run(op, [sa, sb], output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
        ma, mb = sa.meta, sb.meta
    m, n = op.shape
    return {"rows": (ma.nnz or 0) + (mb.nnz or 0), "rows_out": final.nnz, "shape": [m, n],
            "dtype": final.value_type, "output": "sparse", "canonical": final.canonical}


# ---------------------------------------------------------------------------------------------
# the command

def matmul(a: str, b: str, output: str | None = None, *, adjoint_a: bool = False, adjoint_b: bool = False,
           memory=None, tmp_dir: str | None = None, progress=None) -> dict:
    """Matrix product A' @ B', where ' is the conjugate transpose when the adjoint flag is set
    (TensorFlow's sparse_dense_matmul, plus sparse x sparse).

    - A sparse, B a dense .npy → dense .npy at ``output`` (m x n).
    - A a dense .npy, B sparse → dense .npy, computed as (B'^T A'^T)^T like TensorFlow; written
      in Fortran order (np.load reads the same array).
    - both sparse → sparse, canonical (SpGEMM); B is held in memory as CSR, or taken in slabs
      of rows when it does not fit in half of ``memory``.
    - a dense operand given as a NumPy array and no ``output`` → the dense product as a NumPy
      array, in memory (what ``SparseTensor @ ndarray`` returns).

    The sparse operands must be matrices (2 sparse dimensions) with fill value 0, in any row
    order; duplicates accumulate.  An index outside the shape is an error naming the entry
    (TensorFlow's "k (k) from index[i,j] out of bounds (>=n)").  Inner dimensions must match.
    Value types follow NumPy promotion.

    Memory: the sparse operand streams in batches; dense operands are read through memory maps
    (a transposed, conjugated or re-typed dense operand is copied first, to a temporary file
    when over a quarter of ``memory``); the dense output is a memory map, so it may be larger
    than ``memory``.  Two threads share the work.

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> out = os.path.join(tempfile.mkdtemp(), "ab.npy")
    >>> matmul("sample_data/matrix_a.parquet", "sample_data/dense_b.npy", out)["shape"]
    [200, 16]
    """
    check_inputs([a, b])
    dense_a = isinstance(a, np.ndarray) or is_dense_path(a)
    dense_b = isinstance(b, np.ndarray) or is_dense_path(b)
    kw = {"adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b), "budget": budget_of(memory), "tmp_dir": tmp_dir,
          "progress": progress}
    if dense_a and dense_b:
        raise UsageError("both operands are dense (.npy); matmul needs at least one sparse tensor (use NumPy for "
                         "dense x dense)")
    if dense_b:
        return _dense_product(a, b, output, sparse_left=True, **kw)
    if dense_a:
        return _dense_product(b, a, output, sparse_left=False, **kw)
    return _sparse_product(a, b, output, **kw)
