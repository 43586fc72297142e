"""SparseTensor: a COO tensor held in memory, with TensorFlow's SparseTensor layout."""

from __future__ import annotations

import numpy as np

from . import _kernels
from ._args import shape_of
from ._messages import out_of_bounds, repeated
from .errors import DataError, UsageError
from .format import VALUE_TYPES, TensorMeta, default_fill, value_type_of_dtype
from .io import DenseScatter, MemorySource, check_shape
from .stream.sort import KeyCodec


def _value_type(values: np.ndarray, value_type: str | None) -> str:
    if value_type is not None:
        if value_type not in VALUE_TYPES:
            raise UsageError(f"unknown value type {value_type!r}")
        return value_type
    if values.dtype == object:
        sample = next((v for v in values.flat), "")
        return "binary" if isinstance(sample, (bytes, bytearray)) else "string"
    return value_type_of_dtype(values.dtype)


def detect_order(keys: np.ndarray, claimed: tuple | None = None) -> tuple[tuple, bool | None]:
    """(sort_order, unique) that (K, n) keys (any strides) satisfy, in one O(n) pass of the
    compiled adjacent-row check: the ``claimed`` full order (else row-major) when the rows
    follow it, with uniqueness exact; otherwise no order () and uniqueness unknown (None),
    which only a sort can tell (``first_repeat``)."""
    K, n = keys.shape
    target = tuple(claimed) if claimed is not None and len(claimed) == K else tuple(range(K))
    if n <= 1:
        return target, True
    order = np.asarray(target, dtype=np.int64)
    row, kind = _kernels.first_order_violation(keys, order, True)
    if row < 0:
        return target, True
    if kind == _kernels.REPEATED:
        # The rows before ``row`` are strictly increasing: only the rest needs a second look.
        later, _ = _kernels.first_order_violation(keys[:, row - 1:], order, False)
        if later < 0:
            return target, False
    return (), None


def first_repeat(keys: np.ndarray, shape) -> int:
    """The first of the (K, n) keys equal to an earlier one, or -1: their sort keys (the external
    sort's codec: packed integers, or byte strings when the shape is too wide) sorted, then
    neighbours compared; which row repeats is found (a stable argsort) only when one does."""
    K, n = keys.shape
    if n <= 1:
        return -1
    codes = KeyCodec(tuple(shape[:K]), tuple(range(K)), K).encode(np.ascontiguousarray(keys))
    ordered = np.sort(codes)
    if not (ordered[1:] == ordered[:-1]).any():
        return -1
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    return int(order[np.flatnonzero(ordered[1:] == ordered[:-1]) + 1].min())


def refuse_repeats(keys: np.ndarray, shape, *, path: str, says: str) -> None:
    """A claim of unique rows in no full sort order (which no streaming pass checks:
    TensorMeta.trusted) checked where every row is in memory: the first repeated row of the
    (K, n) keys is an error; ``says`` names who claims it."""
    row = first_repeat(keys, shape)
    if row >= 0:
        raise DataError(f"{repeated(row, keys, row)}, although {says} unique true", path=path)


class SparseTensor:
    """A sparse tensor in COO form.

    Parameters
    ----------
    indices : (N, K) int64 array
        Coordinates of the stored entries (TensorFlow's ``indices``).
    values : (N,) array, or (N, *shape[K:]) for a hybrid tensor
        The stored values; rows sharing a coordinate are summed (OR for bool).
    shape : sequence of int
        The dense shape.
    fill_value : scalar, optional
        Value of every position not stored (default: the zero of the value type).
    sort_order, unique : optional
        Claims about the rows, trusted; when omitted they are measured when first needed, in
        one O(n) pass over adjacent rows: rows in row-major order get that order and an exact
        ``unique``.  Other rows get no order, and ``meta.unique`` False (the format's "no
        promise", so writing them costs no sort); ``t.unique`` itself sorts a copy of the
        keys to answer exactly, once.

    Examples
    --------
    >>> t = SparseTensor([[0, 1], [2, 0]], [5.0, 7.0], shape=(3, 2))
    >>> t.to_dense().tolist()
    [[0.0, 5.0], [0.0, 0.0], [7.0, 0.0]]
    """

    def __init__(self, indices, values, shape, *, fill_value=None, sort_order=None, unique=None,
                 value_type: str | None = None, dimension_names=None, attributes=None, iso=False):
        values = np.asarray(values)
        shape = shape_of(shape, "shape")
        indices = _integer_indices(indices)
        n = len(values)
        if indices.size == 0:
            K = len(shape) - (values.ndim - 1) if values.ndim > 1 else None
            indices = indices.reshape(n, K if K is not None else (indices.shape[1] if indices.ndim == 2 else 0))
        if indices.ndim != 2 or indices.shape[0] != n:
            raise DataError(f"indices must be an (N, K) array with N = {n} rows, got shape {indices.shape}")
        K = indices.shape[1]
        if K == 0 and n == 0:
            K = len(shape) - (values.ndim - 1)
            indices = indices.reshape(0, K)
        if not 1 <= K <= len(shape):
            raise DataError(f"indices have {K} columns but the shape {list(shape)} has {len(shape)} dimensions")
        if tuple(values.shape[1:]) != shape[K:]:
            raise DataError(
                f"values have shape {values.shape}; expected ({n},) + {shape[K:]} for {K} sparse dimensions"
            )
        vt = _value_type(values, value_type)
        if vt not in ("string", "binary"):
            values = values.astype(VALUE_TYPES[vt], copy=False)
        check_shape(shape)
        self.indices = np.ascontiguousarray(indices)
        self.values = values
        self.shape = shape
        keys = self.keys
        bounds = np.asarray(shape[:K], dtype=np.int64)
        row, dim = _kernels.first_out_of_bounds(keys, bounds)
        if row >= 0:
            raise DataError(out_of_bounds(row, keys, row, shape[:K]))
        # Built now, so that a bad fill value or name fails here; the order is settled by
        # ``meta`` when first asked for.
        self._meta = TensorMeta(
            shape=shape, sparse_ndim=K, value_type=vt,
            fill_value=default_fill(vt) if fill_value is None else fill_value,
            nnz=n, sort_order=tuple(sort_order or ()), unique=bool(unique),
            dimension_names=tuple(dimension_names) if dimension_names is not None else None,
            attributes=attributes, iso=iso,
        )
        self._claims = (sort_order, unique)
        self._settled = sort_order is not None and unique is not None
        self._unique_known = unique is not None
        if vt in ("string", "binary") and not self.unique:
            raise DataError(f"a {vt} tensor cannot hold repeated coordinates: they cannot be summed")

    # -- properties ------------------------------------------------------------------------
    @property
    def meta(self) -> TensorMeta:
        if not self._settled:
            claimed_order, claimed_unique = self._claims
            order, unique = detect_order(self.keys, claimed_order)
            if claimed_order is not None:
                order = claimed_order
            if claimed_unique is not None:
                unique = claimed_unique
            self._unique_known = unique is not None
            self._meta = self._meta.with_(sort_order=tuple(order), unique=bool(unique))
            self._settled = True
        return self._meta

    def as_source(self):
        """This tensor as a streaming source, so that every op takes it where it takes a path.  A
        claim of unique rows in no full sort order, which no streaming pass checks
        (TensorMeta.trusted), is checked here first, all the rows being at hand."""
        meta = self.meta
        if meta.trusted() is not meta:
            refuse_repeats(self.keys, self.shape, path="<memory>", says="the tensor says")
        return MemorySource(meta, self.keys, self.values)  # a view: batches copy their slices

    @property
    def keys(self) -> np.ndarray:
        """The indices as a (K, N) view: the layout the kernels and the file columns use."""
        return self.indices.T

    @property
    def nnz(self) -> int:
        return len(self.values)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def sparse_ndim(self) -> int:
        return self.indices.shape[1]

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def fill_value(self):
        return self._meta.fill_value

    @property
    def sort_order(self) -> tuple:
        return self.meta.sort_order

    @property
    def unique(self) -> bool:
        """Whether no coordinate repeats, exactly: for rows in no order, measured by sorting a
        copy of the keys (once; ``meta.unique`` then says so too)."""
        meta = self.meta
        if not self._unique_known:
            self._meta = meta.with_(unique=first_repeat(self.keys, self.shape) < 0)
            self._unique_known = True
        return self._meta.unique

    @property
    def canonical(self) -> bool:
        return self.meta.canonical

    def __repr__(self) -> str:
        m = self.meta
        return (f"SparseTensor(shape={list(self.shape)}, nnz={self.nnz}, value_type={m.value_type!r}, "
                f"sparse_ndim={m.sparse_ndim}, sort_order={list(m.sort_order)}, unique={m.unique})")

    @classmethod
    def from_meta(cls, indices, values, meta: TensorMeta) -> SparseTensor:
        return cls(indices, values, meta.shape, fill_value=meta.fill_value, sort_order=meta.sort_order,
                   unique=meta.unique, value_type=meta.value_type, dimension_names=meta.dimension_names,
                   attributes=meta.attributes, iso=meta.iso)

    @classmethod
    def from_sink(cls, sink) -> SparseTensor:
        """The tensor an op wrote to an in-memory sink (an op called with no output)."""
        return cls.from_meta(*sink.result())

    def group(self, dims, *, sort: bool = False):
        """Iterate over runs of rows sharing their coordinates on ``dims``: yields (group key,
        (m, K) indices, values), as TensorFlow's C++ SparseTensor::group.

        The rows must be sorted with ``dims`` leading the sort order; otherwise a UsageError,
        unless ``sort=True`` (a stable sort of a copy).

        Examples
        --------
        >>> t = SparseTensor([[0, 1], [0, 3], [2, 0]], [1.0, 2.0, 3.0], shape=(3, 4))
        >>> [(key, vals.tolist()) for key, _, vals in t.group([0])]
        [((0,), [1.0, 2.0]), ((2,), [3.0])]
        """
        from .stream.group import group_tensor

        return group_tensor(self, dims, sort=sort)

    # -- dense -----------------------------------------------------------------------------
    @classmethod
    def from_dense(cls, array, *, sparse_ndim: int | None = None, fill_value=None) -> SparseTensor:
        """Entries that differ from ``fill_value`` (default 0), in row-major order (tf.sparse.from_dense).

        With ``sparse_ndim`` < array.ndim, a dense block is stored wherever any of its items differs.
        """
        array = np.asarray(array)
        K = array.ndim if sparse_ndim is None else sparse_ndim
        if array.ndim == 0:
            raise DataError("from_dense needs an array of at least one dimension")
        vt = _value_type(array.reshape(-1)[:1] if array.size else array.reshape(-1), None) \
            if array.dtype == object else value_type_of_dtype(array.dtype)
        fill = default_fill(vt) if fill_value is None else fill_value
        differs = array != fill
        if isinstance(fill, float) and fill != fill:
            differs = ~np.isnan(array)
        if K < array.ndim:
            differs = differs.reshape(array.shape[:K] + (-1,)).any(axis=-1)
        idx = np.argwhere(differs).astype(np.int64)
        values = array[tuple(idx.T)] if len(idx) else np.empty((0,) + array.shape[K:], dtype=array.dtype)
        return cls(idx.reshape(-1, K), values, array.shape, fill_value=fill, sort_order=tuple(range(K)),
                   unique=True, value_type=vt if array.dtype == object else None)

    def to_dense(self, default_value=None) -> np.ndarray:
        """The dense array: ``default_value`` (or the fill value) where nothing is stored,
        duplicates summed (TensorFlow's to_dense, with the format's sum rule)."""
        fill = self.fill_value if default_value is None else default_value
        dtype = self.values.dtype
        if self._meta.value_type in ("string", "binary"):
            width = max([len(v) for v in self.values] + [len(fill)], default=1)
            dtype = np.dtype(("U" if self._meta.value_type == "string" else "S") + str(max(width, 1)))
        out = np.zeros(self.shape, dtype=dtype)
        scatter = DenseScatter(out, self._meta, fill)
        scatter.add(self.keys, self.values)
        return scatter.finish()

    # -- scipy / pydata / torch ------------------------------------------------------------
    @classmethod
    def from_scipy(cls, matrix) -> SparseTensor:
        """From any scipy.sparse matrix or array (COO keeps its row order; CSR is row-major)."""
        import scipy.sparse as sp

        fmt = matrix.format
        coo = matrix.tocoo()
        idx = np.stack([np.asarray(c, dtype=np.int64) for c in coo.coords], axis=1)
        sort_order = None
        if fmt == "csr" and matrix.has_sorted_indices:
            sort_order = tuple(range(idx.shape[1]))
        elif fmt == "csc" and matrix.has_sorted_indices:
            sort_order = (1, 0)
        del sp
        return cls(idx, coo.data, coo.shape, sort_order=sort_order)

    def to_scipy(self, format: str = "coo"):
        """A scipy.sparse array (2-D tensors without dense dimensions); duplicates are summed
        by scipy's own conversions."""
        import scipy.sparse as sp

        if self.ndim != 2 or self.sparse_ndim != 2:
            raise DataError(f"scipy.sparse holds 2-D matrices; this tensor has shape {list(self.shape)}")
        if not _is_zero_fill(self.fill_value):
            raise DataError(f"scipy.sparse has no fill value; this tensor's is {self.fill_value!r}")
        m = sp.coo_array((self.values, (self.indices[:, 0], self.indices[:, 1])), shape=self.shape)
        return m.asformat(format)

    def to_pydata(self):
        """A pydata ``sparse.COO`` (which sums duplicates on construction)."""
        import sparse

        if self.sparse_ndim != self.ndim:
            raise DataError("pydata sparse has no hybrid (dense-dimension) layout")
        return sparse.COO(self.keys, self.values, shape=self.shape, fill_value=self.fill_value,
                          has_duplicates=not self.unique, sorted=self.canonical)

    def to_torch(self):
        """A torch sparse COO tensor (hybrid tensors keep their dense dimensions)."""
        import torch

        if not _is_zero_fill(self.fill_value):
            raise DataError(f"torch sparse tensors have no fill value; this tensor's is {self.fill_value!r}")
        t = torch.sparse_coo_tensor(torch.from_numpy(np.ascontiguousarray(self.keys)),
                                    torch.from_numpy(np.ascontiguousarray(self.values)), self.shape,
                                    is_coalesced=self.canonical)
        return t

    # -- operations ---------------------------------------------------------------------------
    # The ops' semantics, results kept in memory: each method calls the public function of the
    # same name (sptool.transpose, sptool.add, ...) through the package at call time, as a
    # user's call would, so the tensor layer imports no op and the two cannot drift apart.

    # NumPy arrays and scalars defer to these methods instead of treating the tensor as an object.
    __array_ufunc__ = None

    def transpose(self, perm=None, *, memory=None) -> SparseTensor:
        """The sparse dimensions permuted (``sptool.transpose``; default: reversed)."""
        return _api("transpose")(self, None, perm=perm, memory=memory)

    @property
    def T(self) -> SparseTensor:  # noqa: N802 (NumPy's name)
        return self.transpose()

    def reorder(self, order=None, *, duplicates: str = "keep", memory=None) -> SparseTensor:
        """The rows sorted by ``order`` (``sptool.reorder``; default row-major); with
        ``duplicates="sum"`` the canonical form (PyTorch's coalesce)."""
        return _api("reorder")(self, None, perm=order, duplicates=duplicates, memory=memory)

    def reduce(self, op: str, axis=None, *, keepdims: bool = False, memory=None):
        """``sptool.reduce`` with a sparse result (a scalar when every axis goes)."""
        return _api("reduce")(self, None, op=op, axis=axis, keepdims=keepdims, memory=memory)

    def reduce_sum(self, axis=None, *, keepdims: bool = False, memory=None):
        """TensorFlow's ``tf.sparse.reduce_sum`` with ``output_is_sparse``."""
        return self.reduce("sum", axis, keepdims=keepdims, memory=memory)

    def reduce_max(self, axis=None, *, keepdims: bool = False, memory=None):
        """TensorFlow's ``tf.sparse.reduce_max`` with ``output_is_sparse``."""
        return self.reduce("max", axis, keepdims=keepdims, memory=memory)

    def __add__(self, other):
        """Another SparseTensor (``sptool.add``, sparse result) or a number added to every stored
        entry (``add --scalar``)."""
        if isinstance(other, SparseTensor):
            return _api("add")(self, other)
        if _is_number(other):
            return _api("add")(self, scalar=other)
        return NotImplemented

    def __radd__(self, other):
        return self.__add__(other) if _is_number(other) else NotImplemented

    def __mul__(self, other):
        """Every stored value times a number (``sptool.mul``)."""
        return _api("mul")(self, other, None) if _is_number(other) else NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other):
        """Every stored value over a number (``sptool.div``)."""
        return _api("div")(self, other, None) if _is_number(other) else NotImplemented

    def __matmul__(self, other):
        """The matrix product (``sptool.matmul``): with another 2-D SparseTensor a sparse result,
        with a 2-D NumPy array a dense NumPy array (TensorFlow's sparse_dense_matmul)."""
        if isinstance(other, (SparseTensor, np.ndarray)):
            return _api("matmul")(self, other, None)
        return NotImplemented

    def __rmatmul__(self, other):
        """``ndarray @ SparseTensor``: the dense product as a NumPy array."""
        if isinstance(other, np.ndarray):
            return _api("matmul")(other, self, None)
        return NotImplemented


def _api(name: str):
    import sptool

    return getattr(sptool, name)


def _is_number(x) -> bool:
    return isinstance(x, (int, float, complex, np.number)) and not isinstance(x, (bool, np.bool_))


def _integer_indices(indices) -> np.ndarray:
    """The indices as an int64 array: integers, or an empty list; a float is not cut to one."""
    try:
        arr = np.asarray(indices)
    except ValueError:  # ragged rows
        raise UsageError("indices must be an (N, K) array of whole numbers; its rows differ in length") from None
    if arr.size and arr.dtype.kind not in "iu":
        raise UsageError(f"indices must be whole numbers, not {arr.dtype} values")
    return arr.astype(np.int64, copy=False)


def _is_zero_fill(v) -> bool:
    try:
        return v == 0
    except TypeError:
        return False
