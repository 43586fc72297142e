"""segment_sum, segment_mean, segment_sqrt_n: rows of a dense array picked by ``indices`` and
combined by sorted ``segment_ids`` (TensorFlow's sparse segment reductions, the embedding lookup
and combine step), streamed over the (index, segment) pairs into a memory-mapped .npy.

A driver, not a StreamOp: its operands are dense .npy arrays and id vectors, not tensors."""

from __future__ import annotations

import numpy as np

from .. import _kernels
from .._memory import budget_of
from ..errors import DataError, ShapeMismatch, UsageError
from ..stream.dense import dense_output, open_npy, release

# The value types the compiled scatter takes (sptool/_kernels.pyx scatter_add); mean and sqrt_n
# need floats, as in TensorFlow.
SUM_TYPES = "iuf"
FLOAT_TYPES = (np.float32, np.float64)


def segment_sum(data, output: str, *, indices, segment_ids, num_segments: int | None = None, memory=None,
                progress=None) -> dict:
    """TensorFlow's sparse segment_sum: output[s] = sum of data[indices[i]] over the i with
    segment_ids[i] == s.  ``data`` is a dense .npy (or array) of shape [n, ...]; ``indices`` and
    ``segment_ids`` are 1-D integer .npy files (or arrays) of the same length, the segment ids
    sorted (non-decreasing) and >= 0.  The output, a dense .npy of shape [num_segments, ...] in
    data's type, has num_segments rows if given (every id must be below it), else the last
    segment id + 1; segments no pair reaches are zero rows.  Rows are added in pair order, as
    np.add.at does.

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


def segment_mean(data, output: str, *, indices, segment_ids, num_segments: int | None = None, memory=None,
                 progress=None) -> dict:
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


def segment_sqrt_n(data, output: str, *, indices, segment_ids, num_segments: int | None = None, memory=None,
                   progress=None) -> dict:
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
    return item if isinstance(item, np.ndarray) else open_npy(str(item))


def _ids(item, what: str):
    arr = _array(item)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise UsageError(f"{what} must be a 1-D array of integers; this one is {arr.dtype} of shape "
                         f"{list(arr.shape)}", path=item if isinstance(item, str) else None)
    return arr


def _segment(kind, data, output, indices, segment_ids, num_segments, memory, progress):
    budget = budget_of(memory)
    table = _array(data)
    where = data if isinstance(data, str) else None
    if table.ndim < 1:
        raise UsageError("data must have at least one dimension (its rows are picked)", path=where)
    dtype = table.dtype.newbyteorder("=")
    if kind == "sum" and (dtype.kind not in SUM_TYPES or dtype == np.float16):
        raise UsageError(f"segment-sum needs integer, float32 or float64 data, not {dtype}", path=where)
    if kind != "sum" and dtype not in FLOAT_TYPES:
        raise UsageError(f"segment-{kind.replace('_', '-')} needs float32 or float64 data, not {dtype}", path=where)
    idx, seg = _ids(indices, "--indices"), _ids(segment_ids, "--segment-ids")
    if len(idx) != len(seg):
        raise ShapeMismatch(f"segment_ids and indices should have same size: {len(seg)} and {len(idx)}")
    if num_segments is not None and (not isinstance(num_segments, (int, np.integer)) or num_segments < 0):
        raise UsageError(f"--num-segments must be a whole number >= 0, not {num_segments!r}")
    # The ids are sorted (checked as they are read), so the last one is the largest.
    S = num_segments if num_segments is not None else (int(seg[-1]) + 1 if len(seg) else 0)
    n = table.shape[0]
    m = int(np.prod(table.shape[1:], dtype=np.int64))
    shape = (S,) + tuple(table.shape[1:])
    if not isinstance(output, str) or not output.lower().endswith(".npy"):
        raise UsageError(f"the output is a dense .npy file, not {output!r}")
    if progress:
        progress.set_total(len(seg))
    step = budget.rows(m * dtype.itemsize * 2 + 16)
    release_every = max(budget.usable // 2, 1 << 20)
    with dense_output(output, shape, dtype, budget=budget) as out:
        flat = out.reshape(S, m)
        rows = table.reshape(n, m)
        counts = np.zeros(S, np.int64) if kind != "sum" else None
        prev, touched = 0, 0
        for lo in range(0, len(seg), step):
            i = np.asarray(idx[lo:lo + step], dtype=np.int64)
            s = np.asarray(seg[lo:lo + step], dtype=np.int64)
            _check_pairs(i, s, lo, n, S, prev)
            prev = int(s[-1]) if len(s) else prev
            _kernels.scatter_add(s, np.ascontiguousarray(rows[i], dtype=dtype), flat)
            if counts is not None:
                u, c = np.unique(s, return_counts=True)
                counts[u] += c
            touched += len(i) * m * dtype.itemsize * 2
            if touched > release_every:  # pages of the maps would otherwise stay in RSS
                release(out)
                release(table)
                touched = 0
            if progress:
                progress.advance(len(i))
        if counts is not None:
            _divide(flat, counts, kind, step)
        del flat
    return {"rows_in": len(seg), "shape": list(shape), "dtype": str(dtype), "output": output}


def _check_pairs(i, s, lo, n, S, prev):
    """TensorFlow's checks on a slice of pairs starting at pair ``lo``, in its words."""
    bad = np.flatnonzero((i < 0) | (i >= n))
    if len(bad):
        k = int(bad[0])
        raise DataError(f"Bad: indices[{lo + k}] == {int(i[k])} out of range [0, {n})")
    if not len(s):
        return
    if s.min() < 0:
        k = int(np.flatnonzero(s < 0)[0])
        raise DataError(f"segment ids must be >= 0: segment_ids[{lo + k}] = {int(s[k])}")
    down = np.flatnonzero(np.diff(np.concatenate([[prev], s])) < 0)
    if len(down):
        k = int(down[0])
        raise DataError(f"segment ids are not increasing: segment_ids[{lo + k}] = {int(s[k])} after "
                        f"{prev if k == 0 else int(s[k - 1])}")
    if int(s[-1]) >= S:
        k = int(np.flatnonzero(s >= S)[0])
        raise DataError(f"Segment id {int(s[k])} out of range [0, {S}), possibly because 'segment_ids' input is "
                        f"not sorted (segment_ids[{lo + k}])")


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
