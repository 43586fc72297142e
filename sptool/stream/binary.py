"""Elementwise ops of two operands: checking and promoting the operands, and the streaming merge
join of two sparse tensors sorted the same way (add, maximum, minimum; matmul's dense paths
borrow the dense-operand helpers)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import _linalg
from .._memory import Budget
from ..errors import ShapeMismatch, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import batch_keys, batch_values, is_npy, is_zero, open_npy, open_sink, row_bytes
from .bounds import vouched_maxes
from .order import sorted_batches
from .sort import KeyCodec


def is_dense_path(path) -> bool:
    """A .npy file is a dense operand; anything else (a tensor, a directory, '-') is sparse."""
    return is_npy(path)


def open_dense(path: str) -> np.ndarray:
    """A dense operand as a read-only memory map (never loaded whole)."""
    arr = open_npy(path)
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biufc":
        raise UsageError(f"a dense operand must hold numbers; this .npy holds {arr.dtype}", path=path)
    value_type_of_dtype(arr.dtype.newbyteorder("="))
    return arr


def numeric_dtype(meta: TensorMeta, path: str, what: str) -> np.dtype:
    if meta.value_type in ("string", "binary"):
        raise UsageError(f"{what} needs numeric values; this tensor holds {meta.value_type}", path=path)
    return meta.dtype


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """NumPy's promotion of two value types, in native byte order."""
    return np.result_type(np.dtype(a).newbyteorder("="), np.dtype(b).newbyteorder("="))


def check_same_shape(a: tuple, b: tuple):
    """TensorFlow's sparse-sparse checks (sparse_add_op.cc)."""
    if len(a) != len(b):
        raise ShapeMismatch(f"Operands do not have the same ranks; got shapes: {list(a)} and {list(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            raise ShapeMismatch(f"Operands' shapes do not match: got {x} and {y} for dimension {i}")


def check_dense_shape(sparse: tuple, dense: tuple):
    """TensorFlow's sparse-dense add checks (sparse_tensor_dense_add_op.cc): no broadcasting."""
    if len(sparse) != len(dense):
        raise ShapeMismatch(f"Two operands have different ranks; received: {len(sparse)} and {len(dense)}")
    for i, (x, y) in enumerate(zip(sparse, dense)):
        if x != y:
            raise ShapeMismatch(f"Dimension {i} does not equal (no broadcasting is supported): sparse side {x} "
                                f"vs dense side {y}")


def scalar(value, dtype: np.dtype):
    """A fill value as a Python scalar of ``dtype`` (what TensorMeta stores)."""
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dtype).item()


def require_zero_fill(meta: TensorMeta, path: str, what: str):
    if not is_zero(meta.fill_value):
        raise UsageError(f"{what} needs a tensor whose fill value is 0; this one's is {meta.fill_value!r}",
                         path=path)


class _Chunk:
    """Rows of one operand in row-major order, unique: sort codes, (K, n) keys and values."""

    __slots__ = ("codes", "keys", "values")

    def __init__(self, codes, keys, values):
        self.codes, self.keys, self.values = codes, keys, values

    def __len__(self):
        return len(self.codes)

    def empty(self):
        """A chunk of no rows, of this one's types."""
        return _Chunk(self.codes[:0], None if self.keys is None else self.keys[:, :0], self.values[:0])

    def split(self, n: int):
        keys = self.keys
        head = _Chunk(self.codes[:n], None if keys is None else keys[:, :n], self.values[:n])
        rest = _Chunk(self.codes[n:], None if keys is None else keys[:, n:], self.values[n:]) \
            if n < len(self) else None
        return head, rest


# Rows a batch of each operand of a join.  Each batch is passed through once, and at 2^18 rows
# both sides' batches and the output's stay in memory the process has already touched; batches
# of 2^20 took fresh pages: a third more peak memory, for no speed (docs/performance.md).
JOIN_BATCH_ROWS = 1 << 18


class _Side:
    """One operand of a merge join: its rows row-major sorted (the external sort when the file
    does not say it is), bounds-checked, with duplicates summed."""

    def __init__(self, src, codec: KeyCodec, *, budget: Budget, tmp_dir, progress):
        self.meta = meta = src.meta
        self.path = src.path
        self.codec = codec
        self.K = meta.sparse_ndim
        order = tuple(range(self.K))
        budget = budget.with_batch_rows_at_most(JOIN_BATCH_ROWS, row_bytes(meta))
        # A unique operand is trusted, and its claim verified as the join reads it.
        self._stream = sorted_batches(src, order, budget=budget, tmp_dir=tmp_dir, progress=progress,
                                      duplicates="keep" if meta.unique else "sum")
        self._chunks = self._generate()

    def _generate(self):
        for batch, codes in self._stream:
            yield self._chunk(batch, codes)

    def _chunk(self, batch, codes) -> _Chunk:
        # With packed codes the (K, n) index array is not needed (the codes decode to it where
        # an output needs it), which saves a copy of every index column.
        if codes is None or len(codes) != batch.num_rows:
            codes = self.codec.encode_table(pa.Table.from_batches([batch]))
        keys = None if self.codec.unpackable else batch_keys(batch, self.K)
        return _Chunk(codes, keys, batch_values(batch, self.meta))

    def next(self) -> _Chunk | None:
        for chunk in self._chunks:
            if len(chunk):
                return chunk
        return None


def _bound(a, b, packed: bool):
    """The smaller of two keys (void keys compare as their big-endian bytes)."""
    if packed:
        return min(a, b)
    return a if a.tobytes() <= b.tobytes() else b


# The value types of the fused join kernels (sptool/_linalg.pyx value_t).
FUSED_TYPES = {np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64, np.complex64, np.complex128)}


def join_chunks(a: _Chunk | None, b: _Chunk | None, packed: bool):
    """(ia, ib, union keys or None) of the union of two chunks' keys (the compiled merge join)."""
    na, nb = len(a) if a is not None else 0, len(b) if b is not None else 0
    if not na or not nb:
        one = np.arange(max(na, nb), dtype=np.int64)
        none = np.full(max(na, nb), -1, dtype=np.int64)
        return (one, none, None) if na else (none, one, None)
    ia = np.empty(na + nb, dtype=np.int64)
    ib = np.empty(na + nb, dtype=np.int64)
    if packed:
        union = np.empty(na + nb, dtype=np.uint64)
        n = _linalg.merge_join(a.codes, b.codes, ia, ib, union)
        return ia[:n], ib[:n], union[:n]
    w = a.codes.dtype.itemsize
    n = _linalg.merge_join_bytes(a.codes.view(np.uint8).reshape(na, w), b.codes.view(np.uint8).reshape(nb, w),
                                 ia, ib)
    return ia[:n], ib[:n], None


def join_rounds(left: _Side, right: _Side, packed: bool):
    """Yield (a chunk or None, b chunk or None) rounds covering both operands in row-major order.
    Each round holds the rows up to the smaller of the two chunks' last keys, so every coordinate
    is decided in one round, in memory bounded by two chunks."""
    a, b = left.next(), right.next()
    while a is not None or b is not None:
        if a is None or b is None:
            yield a, b
            a = left.next() if a is not None else None
            b = right.next() if b is not None else None
            continue
        bound = _bound(a.codes[-1], b.codes[-1], packed)
        ha, a = a.split(int(np.searchsorted(a.codes, bound, side="right")))
        hb, b = b.split(int(np.searchsorted(b.codes, bound, side="right")))
        yield (ha if len(ha) else None), (hb if len(hb) else None)
        if a is None:
            a = left.next()
        if b is None:
            b = right.next()


def gather_keys(a: _Chunk | None, b: _Chunk | None, ia, ib, has_a, union, codec: KeyCodec) -> np.ndarray:
    """(K, n) keys of the joined rows: from A where A has the row, else from B."""
    if a is None or b is None:  # one side's rows, all of them, in order
        one = b if a is None else a
        return codec.decode(one.codes) if one.keys is None else one.keys
    if union is not None:
        return codec.decode(union)
    ia0, ib0 = np.maximum(ia, 0), np.maximum(ib, 0)
    if a.keys is None:  # wide keys, which the index columns are not kept beside
        return codec.decode(np.where(has_a, a.codes[ia0], b.codes[ib0]))
    return np.where(has_a, a.keys.take(ia0, axis=1), b.keys.take(ib0, axis=1))


def gather_values(chunk: _Chunk | None, idx, has, fill, dtype, n: int, tail: tuple) -> np.ndarray:
    """One side's values for the joined rows, its fill value where it has none."""
    if chunk is None:
        return np.full((n,) + tail, fill, dtype=dtype)
    v = chunk.values.astype(dtype, copy=False)
    if len(idx) == len(v) and has.all():
        return v  # every row of the chunk, in order (the join emits a side's rows in order)
    g = v.take(np.maximum(idx, 0), axis=0)
    if not has.all():
        np.copyto(g, np.asarray(fill, dtype=dtype), where=~has.reshape((n,) + (1,) * len(tail)))
    return g


class JoinOp:
    """An element-wise op of two sparse tensors, as the merge join runs it (run_join): its plan
    (``out_dtype(meta_a, meta_b)``, ``out_fill(fill_a, fill_b, dtype)``) and its per-round work
    (``combine``).  ``fused``, a kernel doing the join and ``combine`` in one pass and unpacking
    the union's keys with their maxima (``_linalg.merge_add``), serves every round when it can:
    packed keys, scalar values of a kernel type; ``fused_wide`` does the same on wide keys
    (``_widekeys.merge_add``)."""

    what = ""
    fused = None
    fused_wide = None

    def out_dtype(self, ma: TensorMeta, mb: TensorMeta) -> np.dtype:
        return promote(ma.dtype, mb.dtype)

    def out_fill(self, fa, fb, dtype: np.dtype):
        raise NotImplementedError

    def combine(self, ga, gb, has_a, has_b, fa, fb):
        """(values, keep mask or None) for one round of the join, from each side's values
        gathered per output row (the side's fill where it has no entry) and the masks of rows
        each side has."""
        raise NotImplementedError


class _FusedRows:
    """The fused kernel's output rows, gathered across rounds and written a whole row group of
    the sink's at a time: such a batch goes to the encoders as it is, where a row group split
    between two writes would be copied whole again; and the buffers stay small enough (a few
    MB) to come from heap pages freed by earlier groups rather than pages the kernel zeroes."""

    def __init__(self, sink, codec: KeyCodec, dtype: np.dtype):
        self.sink, self.codec, self.dtype = sink, codec, dtype
        self.K, self.rows = codec.K, sink.row_group_rows
        # _widekeys.merge_add fills whole C-contiguous arrays only: with wide keys a group that
        # a round leaves part-filled is written then, not continued in the next round.
        self.across_rounds = codec.packed
        self.keys = None
        self.n = 0

    def _start(self):
        self.keys = np.empty((self.K, self.rows), dtype=np.int64)
        self.values = np.empty(self.rows, dtype=self.dtype)
        self.maxes = np.full(self.K, -1, dtype=np.int64)
        self.n = 0

    def merge(self, fused, a: _Chunk | None, b: _Chunk | None, fa, fb):
        """Every row of the union of two chunks (or of one), with add's sums (``fused``:
        _linalg.merge_add or its wide-key twin)."""
        codec = self.codec
        a, b = (a if a is not None else b.empty()), (b if b is not None else a.empty())
        va = np.ascontiguousarray(a.values, dtype=self.dtype)
        vb = np.ascontiguousarray(b.values, dtype=self.dtype)
        wa, wb = codec.words(a.codes), codec.words(b.codes)
        za, zb = is_zero(fa), is_zero(fb)
        pos = np.zeros(2, dtype=np.int64)
        maxes = np.empty(self.K, dtype=np.int64)
        while pos[0] < len(a) or pos[1] < len(b):
            if self.keys is None:
                self._start()
            at = self.n
            self.n += fused(wa, wb, va, vb, fa, fb, za, zb, codec.shifts, codec.widths, self.keys[:, at:],
                            self.values[at:], maxes, pos)
            np.maximum(self.maxes, maxes, out=self.maxes)
            if self.n == self.rows:
                self.flush()
        if not self.across_rounds:
            self.flush()

    def flush(self):
        """Write the rows gathered (vouched for as vouched_maxes says)."""
        if self.keys is not None and self.n:
            self.sink.write(self.keys[:, :self.n], self.values[:self.n], self.maxes)
        self.keys = None
        self.n = 0


def run_join(op: JoinOp, sa, sb, output, *, budget: Budget, tmp_dir=None, progress=None):
    """Drive ``op`` over two opened sparse operands: both read row-major (sorted first when
    stored otherwise, duplicates summed), joined round by round into a canonical output.  The
    closed sink when ``output`` is None (the result in memory), else the summary."""
    what, out_dtype, out_fill, combine = op.what, op.out_dtype, op.out_fill, op.combine
    half = budget.share(2)
    ma, mb = sa.meta, sb.meta
    numeric_dtype(ma, sa.path, what)
    numeric_dtype(mb, sb.path, what)
    check_same_shape(ma.shape, mb.shape)
    if ma.sparse_ndim != mb.sparse_ndim:
        raise ShapeMismatch(f"Operands do not have the same number of sparse dimensions: {ma.sparse_ndim} "
                            f"and {mb.sparse_ndim}")
    K = ma.sparse_ndim
    dtype = out_dtype(ma, mb)
    fill = out_fill(ma.fill_value, mb.fill_value, dtype)
    names = ma.dimension_names if ma.dimension_names == mb.dimension_names else None
    out_meta = TensorMeta(shape=ma.shape, sparse_ndim=K, value_type=value_type_of_dtype(dtype), fill_value=fill,
                          sort_order=tuple(range(K)), unique=True, dimension_names=names)
    if progress:
        progress.set_total(ma.nnz + mb.nnz if ma.nnz is not None and mb.nnz is not None else None)
    codec = KeyCodec(ma.shape, tuple(range(K)))
    fused = op.fused if codec.packed else op.fused_wide if codec.wide else None
    left = _Side(sa, codec, budget=half, tmp_dir=tmp_dir, progress=progress)
    right = _Side(sb, codec, budget=half, tmp_dir=tmp_dir, progress=progress)
    fa, fb = scalar(ma.fill_value, dtype), scalar(mb.fill_value, dtype)
    dropped = 0
    with open_sink(output, out_meta, unique_claim=True, budget=budget, light_producer=True) as sink:
        tail = tuple(ma.dense_shape)
        fast = fused is not None and not tail and dtype in FUSED_TYPES
        groups = _FusedRows(sink, codec, dtype)
        for a, b in join_rounds(left, right, codec.packed):
            if fast:
                groups.merge(fused, a, b, fa, fb)
                continue
            ia, ib, union = join_chunks(a, b, codec.packed)
            n = len(ia)
            if not n:
                continue
            has_a, has_b = ia >= 0, ib >= 0
            ga = gather_values(a, ia, has_a, fa, dtype, n, tail)
            gb = gather_values(b, ib, has_b, fb, dtype, n, tail)
            with np.errstate(all="ignore"):
                vals, keep = combine(ga, gb, has_a, has_b, fa, fb)
            keys = gather_keys(a, b, ia, ib, has_a, union, codec)
            if keep is not None and not keep.all():
                dropped += int(n - keep.sum())
                keys, vals = keys[:, keep], vals[keep]
            sink.write(keys, vals, vouched_maxes(keys))
        groups.flush()
    if output is None:
        return sink  # the result stays in memory: the caller takes sink.result()
    final = sink.final_meta
    return {"rows_in": (ma.nnz or 0) + (mb.nnz or 0), "rows_out": final.nnz, "dropped": dropped,
            "shape": list(final.shape), "value_type": final.value_type, "canonical": final.canonical}
