"""segment_sum, segment_mean, segment_sqrt_n: rows of a dense array picked by ``indices`` and
combined by sorted ``segment_ids`` (TensorFlow's sparse segment reductions, the embedding lookup
and combine step), streamed over the (index, segment) pairs into a memory-mapped .npy.

A StreamOp of no tensor operand (its operands are dense .npy arrays and id vectors), as eye is:
the engine drives the slices of pairs into the op's own dense output."""

from __future__ import annotations

import numpy as np

from .. import _kernels
from .._args import array_or_path, optional_whole_number
from .._memory import Budget, budget_of
from ..errors import DataError, ShapeMismatch, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import ClosesOrAborts, DenseSink, dense_returned, open_npy, release
from ..stream.engine import Plan, StreamOp, run

# The value types the compiled scatter takes (sptool/_kernels.pyx scatter_add); mean and sqrt_n
# need floats, as in TensorFlow.
SUM_TYPES = "iuf"
FLOAT_TYPES = (np.float32, np.float64)


def segment_sum(data, output: str | None = None, *, indices, segment_ids, num_segments: int | None = None,
                memory=None, progress=None):
    """TensorFlow's sparse segment_sum: output[s] = sum of data[indices[i]] over the i with
    segment_ids[i] == s.  ``data`` is a dense .npy (or array) of shape [n, ...]; ``indices`` and
    ``segment_ids`` are 1-D integer .npy files (or arrays) of the same length, the segment ids
    sorted (non-decreasing) and >= 0.  The output, a dense .npy of shape [num_segments, ...] in
    data's type, has num_segments rows if given (every id must be below it), else the last
    segment id + 1; segments no pair reaches are zero rows.  Rows are added in pair order, as
    np.add.at does.  With no ``output`` the array is returned (a NumPy array, held in memory).

    Memory: data, indices and segment ids are memory maps read in slices of pairs sized by
    ``memory`` (only the rows a slice picks are copied); the output is a memory map whose pages
    are written back as the slices pass, so neither has to fit in ``memory``.

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> out = os.path.join(tempfile.mkdtemp(), "s.npy")
    >>> segment_sum("sample_data/dense_b.npy", out, indices="sample_data/segment_indices.npy",
    ...             segment_ids="sample_data/segment_ids.npy")["shape"]
    [10, 16]
    """
    return _segment("sum", data, output, indices, segment_ids, num_segments, memory, progress)


def segment_mean(data, output: str | None = None, *, indices, segment_ids, num_segments: int | None = None,
                 memory=None, progress=None):
    """TensorFlow's sparse segment_mean: ``segment_sum`` divided by each segment's number of
    pairs (empty segments stay zero).  Data must be float32 or float64.  Memory as segment_sum.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "m.npy")
    >>> segment_mean("sample_data/dense_b.npy", out, indices="sample_data/segment_indices.npy",
    ...              segment_ids="sample_data/segment_ids.npy", num_segments=12)["shape"]
    [12, 16]
    """
    return _segment("mean", data, output, indices, segment_ids, num_segments, memory, progress)


def segment_sqrt_n(data, output: str | None = None, *, indices, segment_ids, num_segments: int | None = None,
                   memory=None, progress=None):
    """TensorFlow's sparse segment_sqrt_n: ``segment_sum`` divided by the square root of each
    segment's number of pairs (empty segments stay zero).  Data must be float32 or float64.
    Memory as segment_sum.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "q.npy")
    >>> segment_sqrt_n("sample_data/dense_b.npy", out, indices="sample_data/segment_indices.npy",
    ...                segment_ids="sample_data/segment_ids.npy")["rows_in"]
    40
    """
    return _segment("sqrt_n", data, output, indices, segment_ids, num_segments, memory, progress)


def _array(item) -> np.ndarray:
    return item if isinstance(item, np.ndarray) else open_npy(item)


def _ids(item, what: str):
    arr = _array(item)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise UsageError(f"{what} must be a 1-D array of integers; this one is {arr.dtype} of shape "
                         f"{list(arr.shape)}", path=item if isinstance(item, str) else None)
    return arr


def _segment(kind, data, output, indices, segment_ids, num_segments, memory, progress):
    if output is None:
        return dense_returned(lambda npy: _segment(kind, data, npy, indices, segment_ids, num_segments, memory,
                                                   progress), f"segment-{kind}")
    op = _Segment(kind, data, indices, segment_ids, num_segments, output)
    run(op, [], output, budget=budget_of(memory), progress=progress)
    return {"rows_in": len(op.seg), "shape": list(op.shape), "dtype": str(op.dtype), "output": output}


class _Segment(StreamOp):
    """An op of no tensor operand (as eye): ``read`` gives the (index, segment) pairs in slices,
    checked as TensorFlow checks them, ``map`` picks a slice's rows of data, and the output
    (_SegmentOut) adds them into their segments."""

    def __init__(self, kind, data, indices, segment_ids, num_segments, output):
        self.kind = kind
        self.data = array_or_path(data, "data")
        self.indices = array_or_path(indices, "--indices")
        self.segment_ids = array_or_path(segment_ids, "--segment-ids")
        self.num_segments, self.output = num_segments, output

    def plan(self) -> Plan:
        kind, data, num_segments, output = self.kind, self.data, self.num_segments, self.output
        table = _array(data)
        where = data if isinstance(data, str) else None
        if table.ndim < 1:
            raise UsageError("data must have at least one dimension (its rows are picked)", path=where)
        dtype = table.dtype.newbyteorder("=")
        if kind == "sum" and (dtype.kind not in SUM_TYPES or dtype == np.float16):
            raise UsageError(f"segment-sum needs integer, float32 or float64 data, not {dtype}", path=where)
        if kind != "sum" and dtype not in FLOAT_TYPES:
            raise UsageError(f"segment-{kind.replace('_', '-')} needs float32 or float64 data, not {dtype}",
                             path=where)
        idx, seg = _ids(self.indices, "--indices"), _ids(self.segment_ids, "--segment-ids")
        if len(idx) != len(seg):
            raise ShapeMismatch(f"segment_ids and indices should have same size: {len(seg)} and {len(idx)}")
        num_segments = optional_whole_number(num_segments, "--num-segments")
        if num_segments is not None and num_segments < 0:
            raise UsageError(f"--num-segments must be >= 0, not {num_segments}")
        S = num_segments if num_segments is not None else self._segments_to_the_last_id(seg)
        self.n = table.shape[0]
        self.m = int(np.prod(table.shape[1:], dtype=np.int64))
        self.shape = (S,) + tuple(table.shape[1:])
        if not isinstance(output, str) or not output.lower().endswith(".npy"):
            raise UsageError(f"the output is a dense .npy file, not {output!r}")
        self.table, self.dtype, self.idx, self.seg, self.S = table, dtype, idx, seg, S
        self.rows = table.reshape(self.n, self.m)
        meta = TensorMeta(shape=self.shape, sparse_ndim=len(self.shape), value_type=value_type_of_dtype(dtype),
                          fill_value=np.zeros((), dtype).item(), nnz=len(seg))
        return Plan(meta, pieces=True)

    def _segments_to_the_last_id(self, seg) -> int:
        """The last id + 1, as TensorFlow sizes the output: the ids are sorted (checked as they are
        read), so the last one is the largest, and a negative one is refused before it sizes anything."""
        if not len(seg):
            return 0
        last = int(seg[-1])
        if last < 0:
            raise DataError(f"segment ids must be >= 0: segment_ids[{len(seg) - 1}] = {last}",
                            path=_name(self.segment_ids))
        return last + 1

    def open_output(self, output, plan: Plan, *, budget: Budget):
        return _SegmentOut(self, output, plan.meta, budget=budget)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        step = self.step = budget.rows(self.m * self.dtype.itemsize * 2 + 16)
        prev = 0
        for lo in range(0, len(self.seg), step):
            i, s = self.idx[lo:lo + step], self.seg[lo:lo + step]
            # Checked in the files' own types, so that a uint64 id past int64 is named as it is.
            _check_indices(i, lo, self.n, _name(self.indices))
            _check_segment_ids(s, lo, self.S, prev, _name(self.segment_ids))
            prev = int(s[-1]) if len(s) else prev
            yield (np.asarray(i, dtype=np.int64), np.asarray(s, dtype=np.int64)), None
            if progress:
                progress.advance(len(i))

    def map(self, pairs, _):
        i, s = pairs
        yield s, np.ascontiguousarray(self.rows[i], dtype=self.dtype)


class _SegmentOut(ClosesOrAborts):
    """The segments as the output: a DenseSink's memory map whose rows the picked data rows add
    into (in pair order, as np.add.at does), each segment divided by its count (mean) or the
    count's square root (sqrt_n) on close."""

    def __init__(self, op: _Segment, output: str, meta: TensorMeta, *, budget: Budget):
        self.op = op
        self.sink = DenseSink(output, meta, fill=meta.fill_value, budget=budget)
        self.flat = self.sink.out.reshape(op.S, op.m)
        self.counts = np.zeros(op.S, np.int64) if op.kind != "sum" else None
        self.touched = 0
        self.release_every = max(budget.usable // 2, 1 << 20)

    def write(self, s: np.ndarray, picked: np.ndarray):
        _kernels.scatter_add(s, picked, self.flat)
        if self.counts is not None:
            u, c = np.unique(s, return_counts=True)
            self.counts[u] += c
        self.touched += picked.nbytes * 2
        if self.touched > self.release_every:  # pages of the maps would otherwise stay in RSS
            release(self.sink.out)
            release(self.op.table)
            self.touched = 0

    def close(self):
        if self.counts is not None:
            _divide(self.flat, self.counts, self.op.kind, self.op.step)
        self.flat = None
        self.sink.close()

    def abort(self):
        self.flat = None
        self.sink.abort()


def _name(item) -> str | None:
    """The file an operand was read from, for its errors (None for an array)."""
    return None if isinstance(item, np.ndarray) else str(item)


def _check_indices(i, lo, n, path):
    """TensorFlow's check on a slice of indices starting at pair ``lo``, in its words."""
    bad = np.flatnonzero((i < 0) | (i >= n))
    if len(bad):
        k = int(bad[0])
        raise DataError(f"Bad: indices[{lo + k}] == {int(i[k])} out of range [0, {n})", path=path)


def _check_segment_ids(s, lo, S, prev, path):
    """TensorFlow's checks on a slice of segment ids starting at pair ``lo`` (``prev`` the id
    before it), in its words."""
    if not len(s):
        return
    if s.min() < 0:
        k = int(np.flatnonzero(s < 0)[0])
        raise DataError(f"segment ids must be >= 0: segment_ids[{lo + k}] = {int(s[k])}", path=path)
    down = [0] if int(s[0]) < prev else np.flatnonzero(s[1:] < s[:-1]) + 1
    if len(down):
        k = int(down[0])
        raise DataError(f"segment ids are not increasing: segment_ids[{lo + k}] = {int(s[k])} after "
                        f"{prev if k == 0 else int(s[k - 1])}", path=path)
    if int(s[-1]) >= S:
        k = int(np.flatnonzero(s >= S)[0])
        raise DataError(f"Segment id {int(s[k])} out of range [0, {S}), possibly because 'segment_ids' input is "
                        f"not sorted (segment_ids[{lo + k}])", path=path)


def _divide(flat, counts, kind, step):
    """Each non-empty segment's sum divided by its count (mean) or the count's square root."""
    dtype = flat.dtype
    for lo in range(0, flat.shape[0], step):
        c = counts[lo:lo + step]
        hit = np.flatnonzero(c)
        if not len(hit):
            continue
        d = c[hit].astype(dtype)
        if kind == "sqrt_n":
            d = np.sqrt(d)
        flat[lo + hit] /= d[:, None]
