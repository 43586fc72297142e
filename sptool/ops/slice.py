"""slice: the entries inside a box, rebased (TensorFlow's sparse.slice), reading only the row
groups whose statistics can overlap the box."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._args import whole_numbers
from .._memory import budget_of
from ..errors import DataError, UsageError
from ..format import stats_problem
from ..io import (
    ParquetSource,
    arrow_of,
    batch_values,
    known_shape,
    make_batch,
    normalize_batch,
    open_input,
    schema_of,
)
from ..stream.bounds import bounds_error, first_bad_row
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import claim_check
from ..tensor import SparseTensor


def slice_box(shape, start, size, sparse_ndim: int) -> tuple[list[int], list[int]]:
    """(start, end) per dimension of the box, clamped to the shape as TensorFlow clamps it.

    ``start`` and ``size`` list every dimension, or for a hybrid tensor only the sparse
    ones (the dense dimensions are then kept whole).  A size of -1 means "to the end".
    """
    rank = len(shape)
    start, size = list(whole_numbers(start, "--start")), list(whole_numbers(size, "--size"))
    for name, v in (("start", start), ("size", size)):
        if len(v) != rank and not (len(v) == sparse_ndim < rank):
            also = f" (or {sparse_ndim}, the sparse dimensions only)" if sparse_ndim < rank else ""
            raise UsageError(f"Expected {name} to be a vector of length {rank}{also} but got length {len(v)}")
    if len(start) != len(size):
        raise UsageError(f"start has {len(start)} entries but size has {len(size)}")
    start = start + [0] * (rank - len(start))
    size = size + [-1] * (rank - len(size))
    end = []
    for d in range(rank):
        if start[d] < 0:
            raise UsageError(f"start[{d}] = {start[d]} must be >= 0")
        if size[d] < -1:
            raise UsageError(f"size[{d}] = {size[d]} must be >= 0, or -1 for 'to the end'")
        stop = shape[d] if size[d] == -1 else min(start[d] + size[d], shape[d])
        end.append(max(stop, start[d]))
    return start, end


def overlapping_row_groups(source: ParquetSource, start, end) -> tuple[list[tuple[object, list[int]]], dict]:
    """Per part, the row groups whose index statistics can overlap the box on every sparse
    dimension, and a count of row groups and bytes read versus the total.

    A row group without min/max statistics for some index column is always read.
    """
    K = source.meta.sparse_ndim
    plan = []
    stats = {"row_groups_read": 0, "row_groups_total": 0, "bytes_read": 0, "bytes_total": 0}
    empty = any(end[d] <= start[d] for d in range(len(end)))
    for part in source.parts:
        md = part.file.metadata
        keep = []
        for r in range(md.num_row_groups):
            rg = md.row_group(r)
            nbytes = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
            stats["row_groups_total"] += 1
            stats["bytes_total"] += nbytes
            if empty or rg.num_rows == 0 or not _may_overlap(rg, K, start, end):
                _check_skipped(rg, r, part.path, source.meta.shape[:K])
                continue
            keep.append(r)
            stats["row_groups_read"] += 1
            stats["bytes_read"] += nbytes
        if keep:
            plan.append((part, keep))
    return plan, stats


def _check_skipped(rg, r: int, path: str, shape):
    """A row group left unread must still be valid: its statistics must not put an index
    outside the shape (rows that would be an error when read are not dropped unseen)."""
    for k in range(len(shape)):
        st = rg.column(k).statistics
        if st is not None and st.has_min_max and isinstance(st.min, int) and isinstance(st.max, int) \
                and (bad := stats_problem(k, st.min, st.max, shape[k])):
            raise DataError(f"row group {r}: {bad} [E_STATS_OUT_OF_BOUNDS]", path=path)


def _may_overlap(rg, K: int, start, end) -> bool:
    for k in range(K):
        st = rg.column(k).statistics
        if st is None or not st.has_min_max:
            continue
        lo, hi = st.min, st.max
        if not (isinstance(lo, int) and isinstance(hi, int)):
            continue
        if hi < start[k] or lo >= end[k]:
            return False
    return True


def _pruned_batches(source: ParquetSource, plan, rows: int):
    """(batch, the dataset row of its first row) of the planned row groups, read a run of
    consecutive groups at a time so that the row numbers of errors stay exact."""
    first = {}
    seen = 0
    for part in source.parts:
        first[part.path] = seen
        seen += part.file.metadata.num_rows
    for part, groups in plan:
        md = part.file.metadata
        for stretch in np.split(np.asarray(groups), np.flatnonzero(np.diff(groups) != 1) + 1):
            start = first[part.path] + sum(md.row_group(r).num_rows for r in range(int(stretch[0])))
            for batch in source.part_batches(part, rows, groups=[int(r) for r in stretch]):
                yield normalize_batch(batch, part.meta, source.schema, part.path), start
                start += batch.num_rows


def slice_(path: str, output: str | None = None, *, start, size, memory=None, progress=None) -> dict:
    """The entries with ``start[d] <= index[d] < start[d] + size[d]``, rebased to ``start``
    (TensorFlow's sparse.slice; named ``slice_`` as ``slice`` is a builtin).

    ``size[d] = -1`` means to the end of dimension d; the output shape is clamped to the
    input: ``max(0, min(start + size, shape) - start)``.  For a hybrid tensor ``start`` and
    ``size`` list all dimensions (dense blocks are cut too) or only the sparse ones.  The
    output keeps the input's sort order and uniqueness.  From a Parquet file or directory only
    the row groups whose min/max statistics overlap the box are read.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "box.parquet")
    >>> slice_("sample_data/tensor3d.parquet", out, start=[10, 0, 5], size=[5, -1, 10])["shape"]
    [5, 30, 10]
    """
    with open_input(path) as opened, known_shape(opened) as src:
        op = Slice(start, size)
        sink = run(op, src, output, budget=budget_of(memory), progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    result = {"rows_in": op.rows_in, "rows_out": final.nnz, "shape": list(final.shape),
              "sort_order": list(final.sort_order), "unique": final.unique, "canonical": final.canonical}
    result.update(op.pruning or {"row_groups_read": None, "row_groups_total": None, "bytes_read": None,
                                 "bytes_total": None})
    return result


class Slice(StreamOp):
    """The rows inside a box, shifted to its origin; a Parquet source reads only the row groups
    whose footer statistics can hold rows of the box."""

    def __init__(self, start, size):
        self.start, self.size = start, size
        self.rows_in, self.pruning = 0, None

    def plan(self, meta) -> Plan:
        K = self.K = meta.sparse_ndim
        self.meta = meta
        self.lo, self.hi = lo, hi = slice_box(meta.shape, self.start, self.size, K)
        self.out_meta = meta.with_(shape=tuple(h - s for s, h in zip(lo, hi)), nnz=None, created_by=None)
        self.schema = schema_of(self.out_meta)
        self.dense_cut = any(lo[d] != 0 or hi[d] != meta.shape[d] for d in range(K, len(lo)))
        self.lo_k = np.asarray(lo[:K], dtype=np.int64)[:, None]
        self.hi_k = np.asarray(hi[:K], dtype=np.int64)[:, None]
        # Bounds checked: a row outside the shape is an error, not a row outside the box.
        return Plan(self.out_meta, unique_claim=True if meta.unique else None, bounds_checked=True)

    def read(self, src, plan, *, budget, tmp_dir=None, progress=None):
        if not isinstance(src, ParquetSource):
            yield from super().read(src, plan, budget=budget, tmp_dir=tmp_dir, progress=progress)
            return
        groups, self.pruning = overlapping_row_groups(src, self.lo, self.hi)
        if progress:
            progress.set_total(sum(sum(p.file.metadata.row_group(r).num_rows for r in g) for p, g in groups))
        # The rows read keep their order (the groups left out only take rows away): what the
        # input claims of it, which the output keeps, is checked on them.
        claim = claim_check(src)
        for batch, start in _pruned_batches(src, groups, src.batch_rows(budget)):
            if progress:
                progress.advance(batch.num_rows)
            row, cols = first_bad_row(batch, src.meta)
            if row >= 0:
                raise bounds_error(start, row, cols, src.meta, src.path)
            if claim is not None:
                claim.tracker.offset = start
                claim.check_rows(batch, cols)
            yield batch, np.stack(cols)

    def map(self, batch, keys):
        K, lo, hi = self.K, self.lo, self.hi
        self.rows_in += batch.num_rows
        inside = np.all((keys >= self.lo_k) & (keys < self.hi_k), axis=0)
        if not inside.any():
            return
        if not inside.all():
            batch = batch.filter(pa.array(inside))
            keys = keys[:, inside]
        keys -= self.lo_k
        if self.dense_cut:
            cut = (slice(None),) + tuple(slice(lo[d], hi[d]) for d in range(K, len(lo)))
            values = np.ascontiguousarray(batch_values(batch, self.meta)[cut])
            yield make_batch(keys, values, self.out_meta, self.schema)
        else:
            cols = [arrow_of(keys[k]) for k in range(K)] + [batch.column(K)]
            yield pa.RecordBatch.from_arrays(cols, schema=self.schema)
