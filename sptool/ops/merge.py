"""merge: TensorFlow's sparse_merge of an ids tensor and a values tensor of the same pattern."""

from __future__ import annotations

import numpy as np

from .._args import whole_number
from .._memory import Budget, budget_of
from ..errors import DataError, ShapeMismatch, UsageError
from ..format import TensorMeta
from ..io import batch_keys, batch_values, open_operands
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import sorted_batches
from ..stream.runs import whole_runs
from ..tensor import SparseTensor


def _entries(src, budget, tmp_dir):
    """(keys (K, n), values) of a source in row-major order."""
    meta = src.meta
    order = tuple(range(meta.sparse_ndim))
    for batch, _ in sorted_batches(src, order, budget=budget, tmp_dir=tmp_dir, keys=False):
        yield batch_keys(batch, meta.sparse_ndim), batch_values(batch, meta)


def _paired(a, b):
    """Chunks (keys_a, values_a, keys_b, values_b) of equal length from two entry streams; the
    generator returns the entry counts of both (unequal when one runs out first)."""
    sides, bufs, counts, done = (a, b), [None, None], [0, 0], [False, False]
    while True:
        for s in (0, 1):
            while not done[s] and (bufs[s] is None or bufs[s][0].shape[1] == 0):
                got = next(sides[s], None)
                if got is None:
                    done[s] = True
                else:
                    bufs[s] = got
                    counts[s] += got[0].shape[1]
        if not all(buf is not None and buf[0].shape[1] for buf in bufs):
            for s in (0, 1):
                counts[s] += sum(keys.shape[1] for keys, _ in sides[s])
            return counts
        n = min(buf[0].shape[1] for buf in bufs)
        yield bufs[0][0][:, :n], bufs[0][1][:n], bufs[1][0][:, :n], bufs[1][1][:n]
        bufs = [(keys[:, n:], vals[n:]) for keys, vals in bufs]


def merge(ids, values, output: str | None = None, *, vocab_size: int, memory=None, tmp_dir: str | None = None,
          progress=None):
    """TensorFlow's ``sparse_merge(sp_ids, sp_values, vocab_size)`` on two sptool tensors.

    ``ids`` holds integer ids as the values of a [batch..., position] tensor (as
    ``parse_example`` with ``VarLenFeature`` gives, or ``sptool convert --feature``), and
    ``values`` the values of the same coordinates.  The result has shape [batch...,
    vocab_size]: each entry moves to column ``id``, keeping its value; repeated ids in a row
    stay separate entries (the format reads them as a sum), and the output is sorted
    row-major (a stable sort; TensorFlow's reorder is not stable, so the values of a repeated
    id may come in another order there, with the same sum).  Errors, as TensorFlow's: the entry
    counts differ ("Dimensions N and M are not compatible"); beyond TensorFlow, which pairs
    entries by position only, the coordinates must match entry for entry, and ids must lie in
    [0, vocab_size).  Both inputs stream in row-major order (sorted first within ``memory``
    when they are not); one output row is held whole.

    Examples
    --------
    >>> import tempfile, os
    >>> tmp = tempfile.mkdtemp()
    >>> ids, vals = os.path.join(tmp, "ids.parquet"), os.path.join(tmp, "values.parquet")
    >>> import sptool
    >>> _ = sptool.convert("sample_data/examples.tfrecord", ids, feature="ids")
    >>> _ = sptool.convert("sample_data/examples.tfrecord", vals, feature="values")
    >>> merge(ids, vals, os.path.join(tmp, "merged.parquet"), vocab_size=20)["shape"]
    [8, 20]
    """
    vocab_size = whole_number(vocab_size, "--vocab-size")
    if vocab_size < 0:
        raise UsageError(f"--vocab-size must be >= 0, not {vocab_size}")
    budget = budget_of(memory)
    with open_operands([ids, values], tmp_dir) as srcs:
        sink = run(Merge(vocab_size, srcs[0].path), srcs, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
        mi, mv = (s.meta for s in srcs)
    return {"rows_in": (mi.nnz or 0) + (mv.nnz or 0), "rows_out": final.nnz, "shape": list(final.shape),
            "value_type": final.value_type, "canonical": final.canonical}


class Merge(StreamOp):
    """Each (id, value) entry moved to column ``id`` of its row; the rows of both operands read
    side by side in row-major order, each output row sorted whole (its entries' ids in any order)."""

    def __init__(self, vocab_size: int, ids_path: str | None):
        self.vocab_size, self.ids_path = vocab_size, ids_path

    def plan(self, mi: TensorMeta, mv: TensorMeta) -> Plan:
        path = self.ids_path
        if mi.hybrid or mv.hybrid:
            raise UsageError("merge takes tensors with one value per coordinate (no dense dimensions)")
        if mi.dtype.kind not in "iu":
            raise UsageError(f"the ids must be integers (TensorFlow casts them to int64); this tensor holds "
                             f"{mi.value_type}", path=path)
        if mi.ndim < 2:
            raise UsageError(f"the ids tensor must have rank 2 or more ([batch..., position]); its shape is "
                             f"{list(mi.shape)}", path=path)
        if tuple(mi.shape) != tuple(mv.shape):
            raise ShapeMismatch(f"ids has shape {list(mi.shape)} but values has {list(mv.shape)}; sparse_merge "
                                "needs the same sparsity pattern")
        if mi.nnz is not None and mv.nnz is not None and mi.nnz != mv.nnz:
            # TensorFlow's own error comes first, as there, when both counts are known upfront.
            raise DataError(_counts_differ(mi.nnz, mv.nnz))
        K = mi.sparse_ndim
        out_meta = TensorMeta(shape=tuple(mi.shape[:-1]) + (self.vocab_size,), sparse_ndim=K,
                              value_type=mv.value_type, fill_value=mv.fill_value, sort_order=tuple(range(K)),
                              unique=False, dimension_names=None)
        return Plan(out_meta, pieces=True)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        si, sv = srcs
        half = budget.share(2)
        pairs = _paired(_entries(si, half, tmp_dir), _entries(sv, half, tmp_dir))
        moved = _moved(pairs, si.meta, self.vocab_size, si.path, progress)
        for piece in whole_runs(moved, range(plan.meta.sparse_ndim - 1)):
            yield piece, None

    def progress_total(self, metas, plan: Plan):
        return metas[0].nnz  # the ids' entries, each counted as it is moved

    def map(self, piece, keys):
        keys, vals = piece
        order = np.lexsort(keys[::-1])  # stable: repeated ids keep their order
        yield keys[:, order], vals[order]


def _counts_differ(na: int, nb: int) -> str:
    return (f"ids has {na} entries but values has {nb} (TensorFlow: Dimensions {na} and {nb} are not compatible); "
            "sparse_merge needs one value per id")


def _moved(pairs, mi: TensorMeta, vocab_size: int, path, progress):
    """(keys, values) with each entry's last index replaced by its id, checked entry by entry."""
    K = mi.sparse_ndim
    at = 0
    while True:
        try:
            ka, ids_, kb, vals = next(pairs)
        except StopIteration as stop:
            na, nb = stop.value
            if na != nb:
                raise DataError(_counts_differ(na, nb)) from None
            return
        differ = (ka != kb).any(axis=0)
        if differ.any():
            i = int(np.argmax(differ))
            raise DataError(f"entry {at + i} (row-major): ids is at {ka[:, i].tolist()} but values at "
                            f"{kb[:, i].tolist()}; sparse_merge needs the same sparsity pattern")
        new = np.asarray(ids_).astype(np.int64, copy=False)
        outside = (new < 0) | (new >= vocab_size)
        if mi.dtype == np.uint64:
            outside |= np.asarray(ids_) > np.iinfo(np.int64).max
        if outside.any():
            i = int(np.argmax(outside))
            raise DataError(f"entry {at + i} at {ka[:, i].tolist()}: id {np.asarray(ids_)[i]} is "
                            f"outside [0, {vocab_size})", path=path)
        keys = ka.copy()
        keys[K - 1] = new
        at += len(new)
        if progress:
            progress.advance(len(new))
        yield keys, vals
