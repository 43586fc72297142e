"""merge: TensorFlow's sparse_merge of an ids tensor and a values tensor of the same pattern."""

from __future__ import annotations

import numpy as np

from .._args import whole_number, whole_numbers
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


def _aligned(sides):
    """Chunks [(keys, values) of each entry stream], all of equal length; the generator returns
    the entry counts of every stream (unequal when one runs out first)."""
    ways = range(len(sides))
    bufs, counts, done = [None for _ in ways], [0 for _ in ways], [False for _ in ways]
    while True:
        for s in ways:
            while not done[s] and (bufs[s] is None or bufs[s][0].shape[1] == 0):
                got = next(sides[s], None)
                if got is None:
                    done[s] = True
                else:
                    bufs[s] = got
                    counts[s] += got[0].shape[1]
        if not all(buf is not None and buf[0].shape[1] for buf in bufs):
            for s in ways:
                counts[s] += sum(keys.shape[1] for keys, _ in sides[s])
            return counts
        n = min(buf[0].shape[1] for buf in bufs)
        yield [(keys[:, :n], vals[:n]) for keys, vals in bufs]
        bufs = [(keys[:, n:], vals[n:]) for keys, vals in bufs]


def merge(ids, values, output: str | None = None, *, vocab_size, memory=None, tmp_dir: str | None = None,
          progress=None):
    """TensorFlow's ``sparse_merge(sp_ids, sp_values, vocab_size)`` on sptool tensors.

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

    ``ids`` may also be a list of D ids tensors with ``vocab_size`` a list of D extents (as
    TensorFlow's list form): the result has shape [batch..., vocab_size[0], ...,
    vocab_size[D-1]], each entry at its D ids.

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
    ids = list(ids) if isinstance(ids, (list, tuple)) else [ids]
    sizes = _vocab_sizes(vocab_size, len(ids))
    budget = budget_of(memory)
    with open_operands([*ids, values], tmp_dir) as srcs:
        op = Merge(sizes, [s.path for s in srcs[:-1]])
        sink = run(op, srcs, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
        rows_in = sum(s.meta.nnz or 0 for s in srcs)
    return {"rows_in": rows_in, "rows_out": final.nnz, "shape": list(final.shape),
            "value_type": final.value_type, "canonical": final.canonical}


def _vocab_sizes(vocab_size, n_ids: int) -> tuple[int, ...]:
    """One extent >= 0 for each ids tensor: a whole number, or a list (TensorFlow's list form)."""
    if isinstance(vocab_size, (list, tuple, np.ndarray)):
        sizes = whole_numbers(vocab_size, "--vocab-size")
    else:
        sizes = (whole_number(vocab_size, "--vocab-size"),)
    if not n_ids:
        raise UsageError("merge needs at least one ids tensor")
    if len(sizes) != n_ids:
        raise UsageError(f"--vocab-size {list(sizes)} gives {len(sizes)} extents for {n_ids} ids tensor"
                         f"{'s' if n_ids > 1 else ''}: give one for each (TensorFlow: sp_ids and vocab_size have "
                         "to have equal lengths)")
    for size in sizes:
        if size < 0:
            raise UsageError(f"--vocab-size must be >= 0, not {size}")
    return sizes


class Merge(StreamOp):
    """Each (id, value) entry moved to column ``id`` of its row (with D ids tensors, to its D ids);
    the rows of every operand read side by side in row-major order, each output row sorted whole
    (its entries' ids in any order)."""

    def __init__(self, vocab_sizes: tuple[int, ...], ids_paths: list):
        self.vocab_sizes, self.ids_paths = vocab_sizes, ids_paths

    def plan(self, *metas: TensorMeta) -> Plan:
        *mis, mv = metas
        for mi, path in zip(mis, self.ids_paths):
            _check_ids(mi, mv, path)
        mi = mis[0]
        K = mi.sparse_ndim - 1 + len(mis)
        out_meta = TensorMeta(shape=tuple(mi.shape[:-1]) + self.vocab_sizes, sparse_ndim=K,
                              value_type=mv.value_type, fill_value=mv.fill_value, sort_order=tuple(range(K)),
                              unique=False, dimension_names=None)
        return Plan(out_meta, pieces=True)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        share = budget.share(len(srcs))
        chunks = _aligned([_entries(s, share, tmp_dir) for s in srcs])
        moved = _moved(chunks, [s.meta for s in srcs[:-1]], self.vocab_sizes, self.ids_paths, progress)
        for piece in whole_runs(moved, range(srcs[0].meta.sparse_ndim - 1)):
            yield piece, None

    def progress_total(self, metas, plan: Plan):
        return metas[0].nnz  # the ids' entries, each counted as it is moved

    def map(self, piece, keys):
        keys, vals = piece
        order = np.lexsort(keys[::-1])  # stable: repeated ids keep their order
        yield keys[:, order], vals[order]


def _check_ids(mi: TensorMeta, mv: TensorMeta, path):
    """An ids tensor fit to pair with the values: integer ids, rank >= 2, the values' shape and
    (when both are known) entry count."""
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
                            "needs the same sparsity pattern", path=path)
    if mi.nnz is not None and mv.nnz is not None and mi.nnz != mv.nnz:
        # TensorFlow's own error comes first, as there, when both counts are known upfront.
        raise DataError(_counts_differ(mi.nnz, mv.nnz), path=path)


def _counts_differ(na: int, nb: int) -> str:
    return (f"ids has {na} entries but values has {nb} (TensorFlow: Dimensions {na} and {nb} are not compatible); "
            "sparse_merge needs one value per id")


def _moved(chunks, metas: list, vocab_sizes, paths, progress):
    """(keys, values) with each entry's last index replaced by its ids, checked entry by entry."""
    K = metas[0].sparse_ndim
    at = 0
    while True:
        try:
            *ids_chunks, (kv, vals) = next(chunks)
        except StopIteration as stop:
            *nis, nv = stop.value
            for ni, path in zip(nis, paths):
                if ni != nv:
                    raise DataError(_counts_differ(ni, nv), path=path) from None
            return
        columns = [_ids_column(ki, ids_, kv, at, mi, size, path)
                   for (ki, ids_), mi, size, path in zip(ids_chunks, metas, vocab_sizes, paths)]
        keys = np.concatenate([kv[:K - 1], np.stack(columns)])
        at += kv.shape[1]
        if progress:
            progress.advance(kv.shape[1])
        yield keys, vals


def _ids_column(ki, ids_, kv, at: int, mi: TensorMeta, vocab_size: int, path) -> np.ndarray:
    """One ids tensor's chunk as int64 ids, its coordinates checked against the values' and its
    ids against [0, vocab_size)."""
    differ = (ki != kv).any(axis=0)
    if differ.any():
        i = int(np.argmax(differ))
        raise DataError(f"entry {at + i} (row-major): ids is at {ki[:, i].tolist()} but values at "
                        f"{kv[:, i].tolist()}; sparse_merge needs the same sparsity pattern", path=path)
    new = np.asarray(ids_).astype(np.int64, copy=False)
    outside = (new < 0) | (new >= vocab_size)
    if mi.dtype == np.uint64:
        outside |= np.asarray(ids_) > np.iinfo(np.int64).max
    if outside.any():
        i = int(np.argmax(outside))
        raise DataError(f"entry {at + i} at {ki[:, i].tolist()}: id {np.asarray(ids_)[i]} is "
                        f"outside [0, {vocab_size})", path=path)
    return new
