"""cross and cross_hashed: per row, the cartesian product of several [batch, ids] inputs' features
(TensorFlow's sparse cross and cross_hashed), as joined strings or as TensorFlow's hashed buckets."""

from __future__ import annotations

import contextlib

import numpy as np
import pyarrow as pa

from .. import _cross
from .._args import optional_whole_number, whole_number
from .._memory import Budget, budget_of
from ..errors import DataError, ShapeMismatch, UsageError
from ..format import TensorMeta
from ..io import batch_values, check_inputs, is_npy, known_shape, open_input, open_npy
from ..stream.engine import Plan, StreamOp, run
from ..stream.rows import aligned_rows, feature_rows
from ..stream.values import runs
from ..tensor import SparseTensor

SEPARATOR = "_X_"
DEFAULT_HASH_KEY = 0xDECAFCAFFE  # tf.sparse.cross_hashed's key when none (or 0) is given
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# Bytes an output entry costs while a piece is built: its two indices and value, the positions
# or hashes it came from, and for strings the joined text (an estimate; strings vary).
ENTRY_BYTES = {"hash": 48, "string": 128}


def cross(inputs, output: str | None = None, *, separator: str = SEPARATOR, memory=None, tmp_dir: str | None = None,
          progress=None):
    """TensorFlow's sparse cross: for each row of the [batch, ids] inputs, every combination of
    one feature from each input, as the features' text joined by ``separator`` ("a_X_d_X_f").

    ``inputs`` are 2-D sparse tensors (paths, sources or SparseTensors) with integer or string
    values, and dense 2-D ``.npy`` arrays (or NumPy arrays) of integers or strings, every one
    with the same number of rows.  As in TensorFlow, the sparse inputs come first in the
    product (in the order given), then the dense ones; the last input varies fastest, a row
    with no feature in some input has no crosses, and integers are written in decimal.  The
    result is a canonical [batch, max crosses in a row] string tensor (binary when an input
    holds binary values).  Sparse inputs are read in row-major order (sorted first when they
    are not: TensorFlow needs them sorted and misreads them otherwise); rows of an integer
    input sharing a coordinate are summed first, as the format defines.

    Memory: each input streams in row-major order within its share of ``memory`` (an unsorted
    one through the external sort, spilling to ``tmp_dir``); the crosses of a piece of rows
    are built and written in slices sized by ``memory``, a row's product cut into slices too.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "x.parquet")
    >>> cross(["sample_data/ids_words.parquet", "sample_data/ids_numbers.parquet"], out)["shape"]
    [100, 16]
    """
    if not isinstance(separator, str):
        raise UsageError(f"--separator must be text, not {type(separator).__name__}")
    return _run(inputs, output, _Strings(separator), memory, tmp_dir, progress)


def cross_hashed(inputs, output: str | None = None, *, num_buckets: int = 0, hash_key: int | None = None,
                 memory=None, tmp_dir: str | None = None, progress=None):
    """TensorFlow's sparse cross_hashed: the crosses of ``cross``, each hashed to an int64 bucket
    equal to TensorFlow's bit for bit.  A string feature's hash is its Fingerprint64 (FarmHash),
    an integer feature is its own value; a cross chains FingerprintCat64 from ``hash_key`` over
    the inputs in order and takes the result modulo ``num_buckets`` (modulo 2**63 - 1 when
    ``num_buckets`` is 0).  ``hash_key`` None or 0 means TensorFlow's default key 0xDECAFCAFFE
    (tf.sparse.cross_hashed passes ``hash_key or default``); a key is an int64 (a negative one
    is taken as its unsigned 64-bit pattern, as TensorFlow does).

    Inputs, order, shape and memory as for ``cross``; the result is a canonical int64 tensor.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "h.parquet")
    >>> cross_hashed(["sample_data/ids_words.parquet", "sample_data/ids_numbers.parquet"], out,
    ...              num_buckets=1000)["value_type"]
    'int64'
    """
    buckets = whole_number(num_buckets, "--num-buckets")
    key = optional_whole_number(hash_key, "--hash-key") or 0
    if buckets < 0 or buckets > INT64_MAX:
        raise UsageError(f"--num-buckets must be in [0, 2**63), not {buckets}")
    if not INT64_MIN <= key <= INT64_MAX:
        raise UsageError(f"--hash-key must be an int64 (TensorFlow's attribute type), not {key}")
    key = (key or DEFAULT_HASH_KEY) & ((1 << 64) - 1)
    return _run(inputs, output, _Hashes(buckets, key), memory, tmp_dir, progress)


# ---------------------------------------------------------------------------------------------
# features: what each input contributes, per entry


def _kind_of_dtype(dtype: np.dtype) -> str | None:
    """'int', 'string' or 'binary' for the value types TensorFlow's cross takes; None otherwise."""
    if dtype.kind in "iub":
        return "int"
    if dtype.kind == "U":
        return "string"
    if dtype.kind == "S":
        return "binary"
    return None


def _kind_of_meta(meta: TensorMeta) -> str | None:
    if meta.value_type in ("string", "binary"):
        return meta.value_type
    return "int" if meta.dtype.kind in "iub" else None


def _arrow_strings(arr: pa.Array):
    """(offsets, data) of an Arrow string or binary array, zero-copy."""
    if arr.type in (pa.large_string(), pa.large_binary()):
        width = np.int64
    elif arr.type in (pa.string(), pa.binary()):
        width = np.int32
    else:
        arr = arr.cast(pa.large_binary())
        width = np.int64
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=width, count=len(arr) + 1, offset=arr.offset * np.dtype(width).itemsize)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return offsets, data


class _Hashes:
    """cross_hashed's features: Fingerprint64 of strings, integers as they are (uint64 bits)."""

    value_type = "int64"
    entry_bytes = ENTRY_BYTES["hash"]

    def __init__(self, num_buckets: int, key: int):
        self.num_buckets = num_buckets
        self.key = key

    def output_type(self, kinds) -> str:
        return "int64"

    def of_arrow(self, arr: pa.Array, kind: str) -> np.ndarray:
        if kind == "int":
            return self.of_numbers(arr.to_numpy(zero_copy_only=False))
        offsets, data = _arrow_strings(arr)
        out = np.empty(len(arr), dtype=np.uint64)
        _cross.fingerprint64(offsets, data, out)
        return out

    def of_numbers(self, values: np.ndarray) -> np.ndarray:
        # TensorFlow casts any integer (and bool) input to int64 and hashes those 64 bits.
        with np.errstate(all="ignore"):
            return np.ascontiguousarray(values, dtype=np.int64).view(np.uint64).reshape(-1)

    def of_dense(self, rows: np.ndarray, kind: str) -> np.ndarray:
        if kind == "int":
            return self.of_numbers(rows)
        return self.of_arrow(pa.array(rows.reshape(-1), type=pa.string() if kind == "string" else pa.binary()), kind)

    def prepare(self, feats: list) -> np.ndarray:
        """Every input's features of a piece in the one array the kernel reads (once a piece,
        not once a slice)."""
        return np.concatenate(feats) if len(feats) > 1 else feats[0]

    def join(self, feats: np.ndarray, ptr, offsets, g0, g1, row_ids):
        n = g1 - g0
        keys, vals = np.empty((2, n), np.int64), np.empty(n, np.int64)
        # The kernel writes the output's rows and columns in place: no gather, no stack.
        _cross.cross_hashed(ptr, feats, offsets, g0, g1, self.key, self.num_buckets, keys[0], keys[1], vals,
                            row_ids=row_ids)
        return keys, vals


class _Strings:
    """cross's features: text (bytes for binary inputs), integers in decimal as std::to_string."""

    entry_bytes = ENTRY_BYTES["string"]

    def __init__(self, separator: str):
        self.separator = separator
        self.binary = False

    def output_type(self, kinds) -> str:
        self.binary = "binary" in kinds
        return "binary" if self.binary else "string"

    def of_arrow(self, arr: pa.Array, kind: str) -> np.ndarray:
        if kind == "int":
            return self.of_numbers(arr.to_numpy(zero_copy_only=False))
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)

    def of_numbers(self, values: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            ints = np.asarray(values).astype(np.int64).reshape(-1)
        return ints.astype(str).astype(object)

    def of_dense(self, rows: np.ndarray, kind: str) -> np.ndarray:
        if kind == "int":
            return self.of_numbers(rows)
        return rows.reshape(-1).astype(object)

    def prepare(self, feats: list) -> list:
        return feats

    def join(self, feats: list, ptr, offsets, g0, g1, row_ids):
        import pyarrow.compute as pc

        n = g1 - g0
        keys = np.empty((2, n), np.int64)
        pos = np.empty((len(feats), n), np.int64)
        _cross.cross_positions(ptr, offsets, g0, g1, keys[0], keys[1], pos, row_ids=row_ids)
        kind = pa.binary() if self.binary else pa.string()
        parts, base = [], 0
        for i, f in enumerate(feats):
            parts.append(pa.array(f[pos[i] - base], type=kind))
            base += len(f)
        sep = self.separator.encode() if self.binary else self.separator
        return keys, pc.binary_join_element_wise(*parts, pa.scalar(sep, type=kind))


# ---------------------------------------------------------------------------------------------
# inputs


class _Sparse:
    def __init__(self, src, position: int):
        meta = src.meta
        self.src, self.path, self.position = src, src.path, position
        if meta.ndim != 2 or meta.sparse_ndim != 2:
            raise ShapeMismatch(f"input {position} must be a 2-D [batch, ids] tensor (TensorFlow: \"Expected D2 of "
                                f"index to be 2\"); its shape is {list(meta.shape)}", path=src.path)
        self.kind = _kind_of_meta(meta)
        if self.kind is None:
            raise UsageError(f"input {position} holds {meta.value_type} values; cross takes integer or string ids",
                             path=src.path)
        self.batch = meta.shape[0]


class _Dense:
    def __init__(self, array: np.ndarray, path, position: int):
        self.array, self.path, self.position = array, path, position
        if array.ndim != 2:
            raise ShapeMismatch(f"dense input {position} must be a matrix [batch, ids]; its shape is "
                                f"{list(array.shape)}", path=path)
        self.kind = _kind_of_dtype(array.dtype)
        if self.kind is None:
            raise UsageError(f"dense input {position} holds {array.dtype}; cross takes integer or string ids",
                             path=path)
        self.batch = array.shape[0]


def _is_dense(item) -> bool:
    return isinstance(item, np.ndarray) or is_npy(item)


def _run(inputs, output, crosser, memory, tmp_dir, progress):
    budget = budget_of(memory)
    if isinstance(inputs, (str, bytes)) or not hasattr(inputs, "__iter__"):
        raise UsageError("cross takes a list of inputs")
    inputs = list(inputs)
    if not inputs:
        raise UsageError("cross needs at least one input")
    check_inputs([p for p in inputs if isinstance(p, str)])
    with contextlib.ExitStack() as stack:
        sparse, dense = [], []
        for i, item in enumerate(inputs):
            if _is_dense(item):
                arr = item if isinstance(item, np.ndarray) else open_npy(item)
                dense.append(_Dense(arr, item if isinstance(item, str) else None, i))
            else:
                opened = stack.enter_context(open_input(item))
                sparse.append(_Sparse(stack.enter_context(known_shape(opened, tmp_dir)), i))
        op = Cross(crosser, sparse, dense)
        sink = run(op, [c.src for c in sparse], output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows_in": sum(c.src.meta.nnz or 0 for c in sparse), "rows_out": final.nnz, "shape": list(final.shape),
            "value_type": op.value_type, "output": output}


class Cross(StreamOp):
    """The crosses of pieces of rows, every input's features of those rows side by side (the
    sparse inputs read together in row-major order, the dense ones sliced to match)."""

    def __init__(self, crosser, sparse: list, dense: list):
        self.crosser, self.sparse, self.dense = crosser, sparse, dense
        self.columns = sparse + dense  # TensorFlow's order: the sparse inputs, then the dense ones

    def plan(self, *metas: TensorMeta) -> Plan:
        columns = self.columns
        batch = columns[0].batch
        for c in columns[1:]:
            if c.batch != batch:
                raise ShapeMismatch(f"input {c.position} has {c.batch} rows, input {columns[0].position} has {batch}: "
                                    f"TensorFlow's \"Expected batch size {batch} got {c.batch}\"", path=c.path)
        self.value_type = self.crosser.output_type({c.kind for c in columns})
        meta = TensorMeta(shape=(batch, None), sparse_ndim=2, value_type=self.value_type, sort_order=(0, 1),
                          unique=True)
        return Plan(meta, unique_claim=True, pieces=True)

    def progress_total(self, metas, plan: Plan):
        return sum(m.nnz or 0 for m in metas) or self.columns[0].batch

    def output_shape(self, *input_shapes):
        # The width is the most crosses in a row, which the sink takes from the largest column
        # written: never a sparse input's declared width, even when it is the only operand.
        return None

    def open_output(self, output, plan: Plan, *, budget: Budget):
        sink = super().open_output(output, plan, budget=budget)
        self.group_rows = getattr(sink, "row_group_rows", 0)
        return sink

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        self.slice_rows = budget.rows(self.crosser.entry_bytes * max(len(self.columns), 1))
        if self.slice_rows >= self.group_rows > 0:
            # Whole row groups a slice, cut on one grid across pieces: the sink then writes
            # each slice as it comes, never copying a partial group's rows to hold them over.
            self.slice_rows -= self.slice_rows % self.group_rows
        self.crossed = 0
        share = budget.share(len(self.columns))
        for piece in _pieces(self.sparse, self.dense, self.crosser, share, tmp_dir, progress, budget):
            yield piece, None

    def map(self, piece, keys):
        rows, feats, ptr = piece
        for out in _crossed(self.crosser, rows, feats, ptr, self.slice_rows, self.columns, self.crossed):
            self.crossed += len(out[0][0])
            yield out


def _pieces(sparse, dense, crosser, share, tmp_dir, progress, budget):
    """(rows, features per input, ptr) for pieces of rows, every input's features of those rows:
    the rows that have at least one feature in every sparse input (no other row has a cross)."""
    if sparse:
        streams = [feature_rows(c.src, _preparer(c, crosser), budget=share, tmp_dir=tmp_dir, progress=progress)
                   for c in sparse]
        for piece in aligned_rows(streams):
            rows, feats, counts = _common_rows(piece)
            if len(rows):
                yield rows, feats + [crosser.of_dense(np.asarray(d.array[rows]), d.kind) for d in dense], \
                    _ptr(counts, dense, len(rows))
        return
    step = max(1, budget.rows(crosser.entry_bytes * sum(max(d.array.shape[1], 1) for d in dense)))
    for lo in range(0, dense[0].batch, step):
        rows = np.arange(lo, min(lo + step, dense[0].batch), dtype=np.int64)
        if progress:
            progress.advance(len(rows))
        yield rows, [crosser.of_dense(np.asarray(d.array[lo:lo + len(rows)]), d.kind) for d in dense], \
            _ptr([], dense, len(rows))


def _preparer(column: _Sparse, crosser):
    meta = column.src.meta

    def prepare(batch):
        if column.kind == "int":
            return crosser.of_numbers(batch_values(batch, meta))
        return crosser.of_arrow(batch.column(2), column.kind)

    return prepare


def _run_bounds(keys: np.ndarray):
    """(distinct rows, their counts) of (K, n) keys sorted by row."""
    bounds = runs(np.ascontiguousarray(keys[:1]), [0])
    return keys[0, bounds[:-1]], np.diff(bounds)


def _common_rows(piece):
    """The rows every sparse input has features in, each input's features of those rows, and
    their counts per row."""
    bounds = []
    common = None
    for keys, _ in piece:
        rows, counts = _run_bounds(keys)
        bounds.append((rows, counts))
        if common is None or (len(common) == len(rows) and np.array_equal(common, rows)):
            common = rows  # the usual case: every input has the same rows, no intersection needed
        else:
            common = np.intersect1d(common, rows, assume_unique=True)
    feats, counts_out = [], []
    for (rows, counts), (_, values) in zip(bounds, piece):
        if values is None or not len(common):
            return np.empty(0, np.int64), [], []
        if len(rows) != len(common):
            keep = np.isin(rows, common, assume_unique=True)
            values = values[np.repeat(keep, counts)]
            counts = counts[keep]
        feats.append(values)
        counts_out.append(counts)
    return common, feats, counts_out


def _ptr(counts: list, dense, n: int) -> np.ndarray:
    """The (m, n + 1) offsets of every input's features of each row in their concatenation."""
    ptr = np.empty((len(counts) + len(dense), n + 1), dtype=np.int64)
    base = 0
    for i, c in enumerate(counts):
        ptr[i, 0] = base
        np.cumsum(c, out=ptr[i, 1:])
        ptr[i, 1:] += base
        base = int(ptr[i, -1])
    for j, d in enumerate(dense):
        w = d.array.shape[1]
        ptr[len(counts) + j] = base + np.arange(n + 1, dtype=np.int64) * w
        base += n * w
    return ptr


def _crossed(crosser, rows, feats, ptr, slice_rows, columns, before=0):
    """(keys, values, maxes) of the crosses of one piece of rows, in slices of ``slice_rows``
    entries counted from the first piece's first cross (``before`` crosses came in earlier pieces)."""
    counts = np.empty(len(rows), dtype=np.int64)
    bad = _cross.cross_counts(ptr, counts)
    if bad >= 0:
        raise DataError(f"row {int(rows[bad])} crosses into more than 2**63 entries (the product of its inputs' "
                        f"feature counts {[int(ptr[i, bad + 1] - ptr[i, bad]) for i in range(len(columns))]})",
                        path=None)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    feats = crosser.prepare(feats)
    row_ids = np.ascontiguousarray(rows, dtype=np.int64)
    g0 = 0
    for g1 in [*range(slice_rows - before % slice_rows, total, slice_rows), total]:
        if g1 > g0:
            keys, values = crosser.join(feats, ptr, offsets, g0, g1, row_ids)
            yield keys, values, _slice_maxes(row_ids, offsets, g0, g1)
            g0 = g1


def _slice_maxes(row_ids, offsets, g0: int, g1: int) -> np.ndarray:
    """The largest row and column among crosses g0..g1, from the rows' offsets (no pass over the
    crosses).  With them the sink skips its checks: the crosses are in row-major order, unique
    and within the shape by construction (rows ascending as the inputs were verified to be, a
    row's columns 0, 1, ...), so checking them again would only repeat the work."""
    first, last = np.searchsorted(offsets, [g0, g1 - 1], side="right") - 1
    # A row's last column in the slice: its end, or the slice's end within it.
    ends = np.minimum(offsets[first + 1:last + 2], g1) - offsets[first:last + 1]
    return np.array([row_ids[last], ends.max() - 1], dtype=np.int64)
