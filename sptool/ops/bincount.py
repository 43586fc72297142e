"""bincount: how often each integer id occurs, per row of a [batch, ids] tensor or over all of it
(TensorFlow's sparse bincount), as a sparse tensor."""

from __future__ import annotations

import contextlib

import numpy as np

from .. import _kernels
from .._args import whole_number
from .._memory import Budget, budget_of
from .._messages import row_text
from ..errors import DataError, ShapeMismatch, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import batch_values, check_inputs, known_shape, make_batch, open_input, schema_of
from ..stream.bounds import checked
from ..stream.duplicates import combine_runs, deduplicated
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import SummedSource, claim_check
from ..stream.rows import aligned_rows, feature_rows
from ..stream.sort import sorted_stream
from ..stream.values import runs
from ..tensor import SparseTensor

INT64_MAX = (1 << 63) - 1


def bincount(path, output: str | None = None, *, weights=None, minlength: int | None = None,
             maxlength: int | None = None, binary_output: bool = False, axis: int = 0, memory=None,
             tmp_dir: str | None = None, progress=None):
    """TensorFlow's sparse bincount: the number of times each integer value j occurs, as a
    sparse tensor.  ``axis`` 0 counts over all stored values (a 1-D result of shape [N]);
    ``axis`` -1 counts per row of a 2-D [batch, ids] tensor (a result of shape [batch, N]).

    N is ``maxlength`` if given (values >= maxlength are skipped), else max(largest value + 1,
    ``minlength``), as TensorFlow's kernel computes it (an input with no value gives 1, or
    minlength).  ``maxlength`` 0 gives N = 0 with nothing counted, as tf.sparse.bincount does;
    None or -1 (TensorFlow's attribute default) means not given.  A ``minlength`` of None, 0
    or -1 has no effect.
    With ``weights`` (a tensor with the same shape and coordinates) each occurrence adds its
    weight instead of 1, and the result has the weights' value type; ``binary_output`` gives 1
    for every value that occurs (exclusive with weights).  Otherwise the counts have the
    values' type (int32 or int64, as TensorFlow), int64 for other integer types.

    Values must be integers >= 0: a negative value is an error naming its entry.  Rows sharing
    a coordinate are summed first, as the format defines (the sum is the id).  The result is
    canonical; implicit zeros are not counted.

    Memory: the input (and weights) stream in row-major order (sorted first when they are not,
    spilling to ``tmp_dir``); axis -1 works one piece of whole rows at a time; axis 0 counts
    the ids into a dense array of at most a quarter of ``memory`` and sorts the (value, count)
    pairs of larger ids with the external sort.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "b.parquet")
    >>> bincount("sample_data/ids_numbers.parquet", out, axis=-1)["shape"]
    [100, 50]
    """
    budget = budget_of(memory)
    minlength, maxlength = _length(minlength, "minlength"), _length(maxlength, "maxlength")
    axis = whole_number(axis, "--axis")
    if axis not in (0, -1):
        raise UsageError(f"Unsupported axis value {axis}. Only 0 and -1 are currently supported.")
    if weights is not None and binary_output:
        raise UsageError("binary_output and weights are mutually exclusive.")
    check_inputs([p for p in (path, weights) if isinstance(p, str)])
    with contextlib.ExitStack() as stack:
        srcs = [stack.enter_context(known_shape(stack.enter_context(open_input(p)), tmp_dir))
                for p in ([path] if weights is None else [path, weights])]
        op = Bincount(axis, minlength, maxlength, binary_output, [s.path for s in srcs])
        sink = run(op, srcs, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows_in": srcs[0].meta.nnz, "rows_out": final.nnz, "shape": list(final.shape),
            "value_type": final.value_type, "output": output}


class Bincount(StreamOp):
    """Counts (or weight sums) of the ids: per piece of whole rows for axis -1, written as they
    come; over all values for axis 0, into dense counts (ids below a cap) and the external sort.
    The last extent is known at the end: the largest id counted + 1 (or maxlength)."""

    def __init__(self, axis: int, minlength: int, maxlength: int, binary_output: bool, paths: list):
        self.axis, self.minlength, self.maxlength, self.binary_output = axis, minlength, maxlength, binary_output
        self.paths = paths

    def plan(self, meta: TensorMeta, wmeta: TensorMeta | None = None) -> Plan:
        path = self.paths[0]
        if meta.hybrid or meta.dtype.kind not in "iu" or meta.value_type == "bool":
            raise UsageError(f"bincount counts integer ids; the values are {meta.value_type}"
                             + (f" with dense dimensions {list(meta.dense_shape)}" if meta.hybrid else ""),
                             path=path)
        if self.axis == -1 and meta.ndim != 2:
            raise UsageError(f"axis -1 counts per row of a 2-D tensor; this one has shape {list(meta.shape)}",
                             path=path)
        if wmeta is not None:
            if tuple(wmeta.shape) != tuple(meta.shape):
                raise ShapeMismatch(f"'weights' and 'values' must have the same dense shape: {list(wmeta.shape)} "
                                    f"and {list(meta.shape)}", path=self.paths[1])
            if wmeta.dtype.kind not in "iuf" or wmeta.value_type == "bool":
                raise UsageError(f"weights must be integers or floats, not {wmeta.value_type}", path=self.paths[1])
        self.out_dtype = _output_dtype(meta, wmeta)
        K = 2 if self.axis == -1 else 1
        out_meta = TensorMeta(shape=(meta.shape[0], None) if K == 2 else (None,), sparse_ndim=K,
                              value_type=value_type_of_dtype(self.out_dtype), sort_order=tuple(range(K)), unique=True)
        return Plan(out_meta, unique_claim=True, pieces=self.axis == -1)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        src, wsrc = srcs[0], (srcs[1] if len(srcs) > 1 else None)
        self.counted = _Counted(self.maxlength, src.path)
        pieces = self.counted.filter(_pieces(src, wsrc, self.out_dtype, budget, tmp_dir, progress,
                                             whole_rows=self.axis == -1))
        if self.axis == -1:
            for keys, vals in pieces:
                yield _per_row(keys, vals, self.binary_output), None
        else:
            for batch in _over_all(pieces, plan.meta, self.binary_output, budget, tmp_dir):
                yield batch, None

    def map(self, out, keys):
        yield out  # a (keys, counts) piece for axis -1, a batch of (id, count) for axis 0

    def progress_total(self, metas, plan: Plan):
        return sum(m.nnz or 0 for m in metas)

    def output_shape(self, *shapes):
        n = self.maxlength if self.maxlength >= 0 else max(self.counted.largest + 1, self.minlength)
        return (shapes[0][0], n) if self.axis == -1 else (n,)


def _length(value, name: str) -> int:
    if value is None:
        return -1
    n = whole_number(value, f"--{name}")
    if n < -1:
        raise UsageError(f"--{name} must be >= -1 (TensorFlow's attribute), not {n}")
    return n


def _output_dtype(meta, wmeta) -> np.dtype:
    if wmeta is not None:
        return wmeta.dtype
    # TensorFlow counts in the values' own type (its empty weights take that type).
    return meta.dtype if meta.dtype in (np.dtype(np.int32), np.dtype(np.int64)) else np.dtype(np.int64)


def _pieces(src, wsrc, out_dtype, budget, tmp_dir, progress, whole_rows: bool):
    """(keys (K, n), (ids, weights)) pieces: of whole rows in row-major order when counting per
    row or pairing with weights; otherwise batches in stored order with duplicates summed (no
    sort, no row held whole).  The weights are the weights tensor's values at the same
    coordinates, or ones."""
    def ids(batch):
        return batch_values(batch, src.meta).astype(np.int64, copy=False)

    if wsrc is None and not whole_rows:
        summed = src if src.meta.unique else SummedSource(src, tmp_dir=tmp_dir)
        # The index columns as they are (a list), not stacked: they only name a bad entry.
        # Unique rows trusted are checked as they pass (SummedSource checks what it sorts).
        for batch, cols in checked(summed.iter_batches(budget=budget), summed.meta, path=src.path,
                                   progress=progress, claim=claim_check(src) if summed is src else None):
            yield cols, ids(batch), None
        return
    if wsrc is None:
        for keys, vals in feature_rows(src, ids, budget=budget, tmp_dir=tmp_dir, progress=progress):
            yield keys, vals, None
        return
    share = budget.share(2)

    def weights(batch):
        return batch_values(batch, wsrc.meta).astype(out_dtype)

    streams = [feature_rows(src, ids, budget=share, tmp_dir=tmp_dir, progress=progress),
               feature_rows(wsrc, weights, budget=share, tmp_dir=tmp_dir, progress=progress)]
    for (keys, vals), (wkeys, wvals) in aligned_rows(streams):
        if keys.shape != wkeys.shape or not np.array_equal(keys, wkeys):
            raise DataError(f"'weights' and 'values' must have the same indices: {_first_difference(keys, wkeys)}",
                            path=wsrc.path)
        if keys.shape[1]:
            yield keys, vals, wvals


def _first_difference(keys, wkeys) -> str:
    n = min(keys.shape[1], wkeys.shape[1])
    diff = np.flatnonzero((keys[:, :n] != wkeys[:, :n]).any(axis=0))
    i = int(diff[0]) if len(diff) else n
    if i < keys.shape[1] and (i >= wkeys.shape[1] or tuple(keys[:, i]) < tuple(wkeys[:, i])):
        return f"the values have an entry at {row_text(keys, i)} that the weights do not"
    return f"the weights have an entry at {row_text(wkeys, i)} that the values do not"


class _Counted:
    """Refuses negative ids, skips those >= maxlength, and remembers the largest id counted."""

    def __init__(self, maxlength: int, path):
        self.maxlength = maxlength
        self.path = path
        self.largest = 0

    def filter(self, pieces):
        for keys, ids, weights in pieces:
            if not len(ids):
                continue
            ids = np.ascontiguousarray(ids)
            low, high = _kernels.column_minmax(ids)
            if low < 0:
                i = int(np.argmax(ids < 0))
                raise DataError(f"the entry at {row_text(keys, i)} holds {int(ids[i])}: bincount needs values >= 0",
                                path=self.path)
            if self.maxlength >= 0 and high >= self.maxlength:
                keep = ids < self.maxlength
                # Keys are a (K, n) array, or (over all values) the list of index columns.
                keys = keys[:, keep] if isinstance(keys, np.ndarray) else [c[keep] for c in keys]
                ids, weights = ids[keep], (None if weights is None else weights[keep])
                high = int(ids.max()) if len(ids) else -1
            if len(ids):
                self.largest = max(self.largest, int(high))
                yield keys, (ids, weights)


def _per_row(keys, vals, binary_output):
    """(row, id) entries of one piece of whole rows and their counts (or weight sums)."""
    ids, weights = vals
    rows = keys[0]
    span = int(ids.max()) + 1
    first = int(rows[0])
    # Rows arrive sorted, so one int64 code per (row, id) sorts them both at once (several times
    # faster than a two-key lexsort) whenever the codes fit.
    if (int(rows[-1]) - first + 1) * span < 1 << 62:
        codes = (rows - first) * span + ids
        order = None if weights is None else np.argsort(codes, kind="stable")
        codes = np.sort(codes) if order is None else codes[order]
        bounds = runs(np.ascontiguousarray(codes).reshape(1, -1), [0])
        starts = bounds[:-1]
        out_keys = np.stack([codes[starts] // span + first, codes[starts] % span])
    else:
        order = np.lexsort((ids, rows))
        rows, ids = rows[order], ids[order]
        bounds = runs(np.stack([rows, ids]), [0, 1])
        starts = bounds[:-1]
        out_keys = np.stack([rows[starts], ids[starts]])
    if binary_output or weights is None:
        counts = np.ones(len(starts), np.int64) if binary_output else np.diff(bounds)
        return out_keys, counts
    return out_keys, combine_runs("sum", weights[order], bounds)


def _over_all(pieces, out_meta, binary_output, budget, tmp_dir):
    """Counts over every value.  Ids below a cap that --memory sets are counted straight into a
    dense array (no sort: np.bincount's way, 2-5x faster than sorting pairs); only the ids at or
    above it, a huge id range, go as (id, count) pairs of each piece through the external sort
    with equal ids summed.  Every dense id is below every sorted one, so the dense counts are
    written first, then the sorted ones."""
    dense = _DenseCounts(out_meta.dtype, binary_output, budget.usable // DENSE_SHARE)
    sort_meta = out_meta.with_(shape=(INT64_MAX,), unique=False)
    schema = sort_meta.arrow_schema()

    def batches():
        for _, (ids, weights) in pieces:
            ids, weights = dense.add(ids, weights)
            if len(ids):
                ids, counts = _per_row(np.zeros((1, len(ids)), np.int64), (ids, weights), binary_output)
                yield make_batch(ids[1:], counts.astype(out_meta.dtype, copy=False), sort_meta, schema)

    rest = budget.with_total(max(budget.total - dense.cap_bytes, budget.total // 2))
    stream = sorted_stream(batches(), sort_meta, (0,), budget=rest, tmp_dir=tmp_dir)
    sorted_part = deduplicated(stream, "first" if binary_output else "sum", sort_meta, schema_of(out_meta))
    first = next(sorted_part, None)  # drives every piece through: the dense counts are then complete
    yield from dense.batches(out_meta, budget.rows(16))
    if first is not None:
        yield first
        yield from sorted_part


# The dense counts of bincount over all values take at most this share of the usable budget.
DENSE_SHARE = 4
# Accumulator types the compiled scatter_add takes (other weight types stay on the sort path).
_DENSE_TYPES = {np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                      np.uint64, np.float32, np.float64)}


class _DenseCounts:
    """Counts (or weight sums) of the ids below a cap, in a dense array that grows (doubling) to
    the largest id seen.  Each id is added in input order, as TensorFlow's kernel and
    np.bincount add them, so weight sums round the same way.  With weights an id whose weights
    sum to zero still occurred and is kept, as the sort path keeps it: a second array marks the
    ids seen."""

    def __init__(self, out_dtype: np.dtype, binary_output: bool, cap_bytes: int):
        self.binary, self.weighted = binary_output, False
        # Counts add up in int64 (the cast to int32 at the end wraps exactly as int32 sums would).
        self.dtype = np.dtype(np.int64) if out_dtype.kind in "iu" else out_dtype
        per_id = self.dtype.itemsize + 1
        self.cap = cap_bytes // per_id if out_dtype in _DENSE_TYPES else 0
        self.cap_bytes = self.cap * per_id
        self.acc = np.zeros((0, 1), self.dtype)
        self.seen = np.zeros((0, 1), np.uint8)
        self._ones = self.acc

    def add(self, ids: np.ndarray, weights):
        """Count the ids below the cap; the (ids, weights) left for the sort path."""
        if not len(ids) or not self.cap:
            return ids, weights
        top = int(_kernels.column_minmax(ids)[1])
        rest = None
        if top >= self.cap:
            below = ids < self.cap
            rest = ids[~below], (None if weights is None else weights[~below])
            ids, weights = ids[below], (None if weights is None else weights[below])
            top = int(ids.max()) if len(ids) else -1
        if len(ids):
            self._grow(top + 1)
            offsets = np.ascontiguousarray(ids)
            if self.binary or weights is not None:
                _kernels.scatter_or(offsets, np.ones((len(ids), 1), np.uint8), self.seen)
            if weights is not None:
                self.weighted = True
                _kernels.scatter_add(offsets, np.ascontiguousarray(weights, self.dtype).reshape(-1, 1), self.acc)
            elif not self.binary:
                if len(self._ones) < len(ids):  # one array of ones, reused by every batch
                    self._ones = np.ones((len(ids), 1), self.dtype)
                _kernels.scatter_add(offsets, self._ones[:len(ids)], self.acc)
        return rest if rest is not None else (ids[:0], None if weights is None else weights[:0])

    def _grow(self, n: int):
        if n <= len(self.acc):
            return
        size = min(max(n, 2 * len(self.acc), 1024), self.cap)
        for name in ("acc", "seen"):
            old = getattr(self, name)
            new = np.zeros((size, 1), old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def batches(self, out_meta: TensorMeta, step: int):
        """Batches of (id, count) of the occurring ids, in id order."""
        schema = schema_of(out_meta)
        marks = self.seen[:, 0] if (self.binary or self.weighted) else self.acc[:, 0]
        for lo in range(0, len(marks), step):
            ids = np.flatnonzero(marks[lo:lo + step]) + lo
            if len(ids):
                values = np.ones(len(ids), out_meta.dtype) if self.binary else \
                    self.acc[ids, 0].astype(out_meta.dtype, copy=False)
                yield make_batch(ids[None, :], values, out_meta, schema)
