"""concat: join tensors along one dimension (TensorFlow's sparse.concat), streaming.

The output is row-major sorted, as TensorFlow's is.  The offsets put every input in its own
range of the concat axis, so no two inputs share a coordinate and their sorted streams can be
merged without comparing values:

- along axis 0, input i's rows all sort before input i+1's: each input is sorted on its own
  (passed through when it already is) and appended;
- along any other axis the inputs interleave: the row-major-sorted inputs stream straight into
  a k-way merge, and the others are shifted and sorted together by one external sort whose
  output is one more stream of that merge.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import _kernels
from .._args import whole_number
from .._memory import Budget, budget_of
from .._messages import out_of_bounds
from ..errors import DataError, UsageError
from ..format import TensorMeta
from ..io import arrow_of, batch_keys, open_operands, row_bytes
from ..stream import sort as _sort
from ..stream.axes import normalize_axes
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import already_sorted, claim_check
from ..tensor import SparseTensor


def _same_fill(a, b) -> bool:
    if a == b:
        return True
    try:
        return bool(np.isnan(a) and np.isnan(b))  # NaN fills (complex NaN too) are the same fill
    except TypeError:
        return False


def plan_concat(metas: list[TensorMeta], axis: int, expand_nonconcat: bool = False) -> tuple[TensorMeta, int, list]:
    """Check the inputs as TensorFlow does; return (output meta, axis >= 0, offsets along the axis)."""
    first = metas[0]
    rank = len(first.shape)
    for i, m in enumerate(metas[1:], 1):
        if len(m.shape) != rank:
            raise UsageError(f"Ranks of all input tensors must match: expected {rank} but got {len(m.shape)} "
                             f"at position {i}")
    (axis,) = normalize_axes([axis], rank)
    K = first.sparse_ndim
    for i, m in enumerate(metas):
        if m.sparse_ndim != K:
            raise UsageError(f"Sparse ranks of all input tensors must match: expected {K} sparse dimensions but "
                             f"got {m.sparse_ndim} at position {i}")
        if m.value_type != first.value_type:
            raise UsageError(f"Value types of all input tensors must match: expected {first.value_type} but got "
                             f"{m.value_type} at position {i}")
        if not _same_fill(m.fill_value, first.fill_value):
            raise UsageError(f"Fill values of all input tensors must match: expected {first.fill_value!r} but got "
                             f"{m.fill_value!r} at position {i}")
    if axis >= K:
        raise UsageError(f"axis {axis} is a dense dimension (the inputs have sparse_ndim {K}); concat works "
                         "along a sparse dimension only")
    shape = list(first.shape)
    for j in range(rank):
        if j == axis:
            shape[j] = sum(m.shape[j] for m in metas)
            continue
        if expand_nonconcat and j < K:
            shape[j] = max(m.shape[j] for m in metas)
            continue
        for i, m in enumerate(metas[1:], 1):
            if m.shape[j] != first.shape[j]:
                note = " (dense dimensions are never expanded)" if expand_nonconcat else ""
                raise UsageError(f"Input shapes must match: expected {first.shape[j]} for dimension {j} but got "
                                 f"{m.shape[j]} at position {i}{note}")
    offsets = [0]
    for m in metas[:-1]:
        offsets.append(offsets[-1] + m.shape[axis])
    names = first.dimension_names if all(m.dimension_names == first.dimension_names for m in metas) else None
    if shape[axis] > 2**63 - 1:
        raise UsageError(f"the output's dimension {axis} would span {shape[axis]} indices, past an int64 index")
    out = first.with_(shape=tuple(shape), nnz=None, sort_order=tuple(range(K)),
                      unique=all(m.unique for m in metas), iso=False, dimension_names=names, created_by=None)
    return out, axis, offsets


class _Shifter:
    """Checks an input's rows against its own shape (and its claims: ``claim``, a
    stream.order.ClaimCheck: an input sorted row-major is merged as it stands, and a claim of
    unique rows carries into the output's) and moves them to its range of the axis."""

    def __init__(self, meta: TensorMeta, axis: int, offset: int, path: str, claim=None):
        self.K = meta.sparse_ndim
        self.bounds = np.asarray(meta.shape[: self.K], dtype=np.int64)
        self.shape = meta.shape[: self.K]
        self.axis = axis
        self.offset = offset
        self.path = path
        self.claim = claim
        self.rows = 0

    def __call__(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, np.ndarray]:
        keys = batch_keys(batch, self.K)
        row, _ = _kernels.first_out_of_bounds(keys, self.bounds)
        if row >= 0:
            raise DataError(out_of_bounds(self.rows + row, keys, row, self.shape), path=self.path)
        if self.claim is not None:
            self.claim.check(keys)
        self.rows += batch.num_rows
        if self.offset:
            keys[self.axis] += self.offset
            cols = list(batch.columns)
            cols[self.axis] = arrow_of(keys[self.axis])
            batch = pa.RecordBatch.from_arrays(cols, schema=batch.schema)
        return batch, keys


def _shifted(src, shifter: _Shifter, rows: int, progress, codec=None):
    """(batch, keys) of a source in its own order, shifted; keys encoded by ``codec`` when given."""
    for batch in src.iter_batches(rows):
        if progress:
            progress.advance(batch.num_rows)
        batch, keys = shifter(batch)
        yield batch, (codec.encode(keys) if codec is not None else keys)


def input_paths(paths) -> list:
    """concat's operands as a list (one path alone is a list of one); none is refused."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    if not paths:
        raise UsageError("concat needs at least one input tensor")
    return paths


def concat(paths, output: str | None = None, *, axis: int, expand_nonconcat: bool = False, memory=None,
           tmp_dir: str | None = None, progress=None) -> dict:
    """Concatenate tensors along ``axis`` (TensorFlow's sparse.concat, incl. expand_nonconcat_dims).

    Indices along the axis are offset by the preceding inputs' sizes; with
    ``expand_nonconcat`` the other dimensions become the maximum over the inputs, otherwise
    they must be equal.  The output is row-major sorted; it is unique when every input is.
    Inputs may be unsorted and hold duplicates (kept, not merged); at most one may be '-'.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "ab.parquet")
    >>> concat(["sample_data/matrix_a.parquet", "sample_data/matrix_b.parquet"], out, axis=1)["shape"]
    [200, 300]

    ``sptool.distributed.concat`` runs it on a Dask cluster, writing a part directory.
    """
    paths = input_paths(paths)
    axis = whole_number(axis, "--axis")
    budget = budget_of(memory)
    with open_operands(paths, tmp_dir) as srcs:
        op = Concat(axis, expand_nonconcat)
        sink = run(op, srcs, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"inputs": len(paths), "rows_in": sum(s.rows for s in op.shifters), "rows_out": final.nnz,
            "shape": list(final.shape), "strategy": op.strategy, "sorted_inputs": sum(op.sorted_in),
            "sort_order": list(final.sort_order), "unique": final.unique, "canonical": final.canonical}


class Concat(StreamOp):
    """The inputs, shifted to their ranges of the axis, in one row-major stream: appended along
    axis 0 (or for one input), merged along any other."""

    def __init__(self, axis: int, expand_nonconcat: bool = False):
        self.axis, self.expand_nonconcat = axis, expand_nonconcat

    def plan(self, *metas: TensorMeta) -> Plan:
        self.out_meta, self.axis, self.offsets = plan_concat(list(metas), self.axis, self.expand_nonconcat)
        order = tuple(range(self.out_meta.sparse_ndim))
        self.sorted_in = [already_sorted(m, order) for m in metas]
        return Plan(self.out_meta, unique_claim=True if self.out_meta.unique else None)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        out_meta = self.out_meta
        self.shifters = [_Shifter(s.meta, self.axis, off, s.path, claim_check(s)) for off, s in zip(self.offsets, srcs)]
        if len(srcs) == 1 or self.axis == 0:
            self.strategy = "append"
            stream = _append(srcs, self.shifters, self.sorted_in, out_meta, budget, tmp_dir, progress)
        else:
            self.strategy = "merge"
            codec = _sort.KeyCodec(out_meta.shape, tuple(range(out_meta.sparse_ndim)), out_meta.sparse_ndim)
            stream = _merge(srcs, self.shifters, self.sorted_in, out_meta, codec, budget, row_bytes(out_meta),
                            tmp_dir, progress)
        for batch in stream:
            yield batch, None

    def map(self, batch, keys):
        yield batch


def _append(srcs, shifters, sorted_in, out_meta, budget, tmp_dir, progress):
    """Axis 0 (or one input): each input sorted on its own, one after the other, so one sort
    at a time holds the whole budget."""
    order = tuple(range(out_meta.sparse_ndim))
    rows = budget.rows(row_bytes(out_meta))
    for src, shifter, is_sorted in zip(srcs, shifters, sorted_in):
        if is_sorted:
            for batch, _ in _shifted(src, shifter, rows, progress):
                yield batch
        else:
            pairs = (b for b, _ in _shifted(src, shifter, rows, None))
            for batch, _ in _sort.sorted_stream(pairs, out_meta, order, budget=budget, tmp_dir=tmp_dir,
                                                progress=progress):
                yield batch


def _merge(srcs, shifters, sorted_in, out_meta, codec, budget, rb, tmp_dir, progress):
    """Any other axis: a k-way merge of the sorted inputs and one external sort of the rest.

    When there are both, the budget is halved between the external sort and the merge; the
    merge's share is split over its streams: each holds one read batch, one prefetched batch
    and a merge cursor.
    """
    order = tuple(range(out_meta.sparse_ndim))
    unsorted = [i for i, s in enumerate(sorted_in) if not s]
    streams = []
    n_streams = sum(sorted_in) + (1 if unsorted else 0)
    merge_budget = budget.total // 2 if unsorted and any(sorted_in) else budget.total
    share = budget.with_total(max(merge_budget // (2 * n_streams), 1))
    rows = share.rows(rb)
    for i, is_sorted in enumerate(sorted_in):
        if is_sorted:
            streams.append(_shifted(srcs[i], shifters[i], rows, progress, codec))
    if unsorted:
        def shifted_unsorted():
            for i in unsorted:
                for batch, _ in _shifted(srcs[i], shifters[i], rows, None):
                    yield batch

        sort_budget = budget.with_total(budget.total - merge_budget) if any(sorted_in) else budget
        sorted_rest = _sort.sorted_stream(shifted_unsorted(), out_meta, order, budget=sort_budget, tmp_dir=tmp_dir,
                                          progress=progress)
        if n_streams == 1:
            yield from (b for b, _ in sorted_rest)
            return
        streams.append(sorted_rest)
    cursor_rows = share.merge_rows or _sort.chunk_rows(share, rb + 8 * out_meta.sparse_ndim)
    for merged, _ in _sort.merge_sorted(streams, codec, rows=cursor_rows, budget=budget):
        # merge_sorted hands back tables (slices of its cursors, or their merge)
        if isinstance(merged, pa.Table):
            yield from merged.to_batches()
        else:
            yield merged

