"""reshape: TensorFlow's sparse reshape, on the row-major linear index of the sparse dimensions."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from .. import _kernels, _widekeys
from .._args import whole_numbers
from .._memory import budget_of
from ..errors import UsageError
from ..format import INT64_MAX, TensorMeta
from ..io import arrow_of, known_shape, open_input, schema_of
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor


def resolve_shape(new_shape, old_sparse: tuple, dense: tuple) -> tuple:
    """The new sparse shape: TensorFlow's rules (one -1 inferred, sizes >= 0, same element count).

    For a hybrid tensor the dense dimensions are kept: ``new_shape`` must end with them, and
    only the sparse part before them is reshaped.
    """
    new_shape = list(whole_numbers(new_shape, "--shape"))
    if dense:
        tail = new_shape[len(new_shape) - len(dense):] if len(new_shape) >= len(dense) else None
        if tail != list(dense) or len(new_shape) == len(dense):
            raise UsageError(
                f"the tensor has dense dimensions {list(dense)}, which reshape keeps: the new shape must be the "
                f"new sparse dimensions followed by {','.join(map(str, dense))} (got {list(new_shape)})"
            )
        new_shape = new_shape[: len(new_shape) - len(dense)]
    if not new_shape:
        raise UsageError("the new shape needs at least one dimension")
    unknown = None
    for i, s in enumerate(new_shape):
        if s == -1:
            if unknown is not None:
                raise UsageError(f"only one output dimension may be -1, not both {unknown} and {i}")
            unknown = i
        elif s < 0:
            raise UsageError(f"size {i} must be non-negative, not {s}")
    dense_size = math.prod(old_sparse)
    known = math.prod(s for s in new_shape if s != -1)
    if unknown is not None:
        if known == 0:
            raise UsageError("Reshape cannot infer the missing input size for an empty tensor unless all "
                             "specified input sizes are non-zero")
        if dense_size % known:
            raise UsageError(f"Input to reshape is a tensor with {dense_size} dense values, but the requested "
                             f"shape requires a multiple of {known}")
        new_shape[unknown] = dense_size // known
    elif known != dense_size:
        raise UsageError(f"Input to reshape is a tensor with {dense_size} dense values, but the requested shape "
                         f"has {known}")
    wide = next((i for i, s in enumerate(new_shape) if s > INT64_MAX), None)
    if wide is not None:
        raise UsageError(f"the new shape {new_shape} has {new_shape[wide]} indices along dimension {wide}, past "
                         "2^63-1: an index there would not fit the int64 index columns")
    return tuple(new_shape)


def relinearize(keys: np.ndarray, old_shape, new_shape) -> np.ndarray:
    """(K', n) keys in ``new_shape`` of the rows at (K, n) ``keys`` in ``old_shape`` (same row-major
    linear index).  Indices must be in bounds and the shapes' products equal.  The linear index
    is an int64 while the product fits one, 128 bits in the compiled kernel up to 2^128, and a
    Python integer beyond."""
    n = keys.shape[1]
    out = np.empty((len(new_shape), n), dtype=np.int64)
    if n == 0:
        return out
    size = math.prod(old_shape)
    if size > INT64_MAX:
        if size >> 128:
            return _relinearize_python(keys, old_shape, new_shape, out)
        _widekeys.relinearize(keys, np.asarray(old_shape, dtype=np.int64), np.asarray(new_shape, dtype=np.int64),
                              out)
        return out
    lin = np.empty(n, dtype=np.int64)
    _kernels.linear_offsets(keys, np.asarray(old_shape, dtype=np.int64), lin)
    for k in range(len(new_shape) - 1, 0, -1):
        np.divmod(lin, int(new_shape[k]), out=(lin, out[k]))
    out[0] = lin
    return out


def _relinearize_python(keys: np.ndarray, old_shape, new_shape, out: np.ndarray) -> np.ndarray:
    lin = np.zeros(keys.shape[1], dtype=object)
    for k, extent in enumerate(old_shape):
        lin = lin * int(extent) + keys[k].astype(object)
    for k in range(len(new_shape) - 1, 0, -1):
        out[k] = lin % int(new_shape[k])
        lin = lin // int(new_shape[k])
    out[0] = lin
    return out


def reshape(path: str, output: str | None = None, *, shape, memory=None, progress=None) -> dict:
    """Reshape the sparse dimensions (TensorFlow's sparse reshape): each row's row-major linear
    index is kept and split by the new shape; one size may be -1 (inferred).

    Row order is kept, so a row-major sorted input stays row-major sorted (and canonical stays
    canonical); any other sort order is dropped.  Duplicates stay duplicates.  A hybrid tensor
    keeps its dense dimensions: ``shape`` ends with them.

    Memory: one pass, batch by batch.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "r.parquet")
    >>> reshape("sample_data/tensor3d.parquet", out, shape=(1200, -1))["shape"]
    [1200, 20]
    """
    with open_input(path) as opened, known_shape(opened) as src:
        sink = run(Reshape(shape), src, output, budget=budget_of(memory), progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "sort_order": list(final.sort_order),
            "unique": final.unique}


class Reshape(StreamOp):
    """Each row's linear index in the old sparse shape, re-expressed in the new one."""

    def __init__(self, shape):
        self.shape = shape

    def plan(self, meta: TensorMeta) -> Plan:
        K = self.K = meta.sparse_ndim
        self.old = old_sparse = tuple(meta.shape[:K])
        self.new = new_sparse = resolve_shape(self.shape, old_sparse, meta.dense_shape)
        K2 = len(new_sparse)
        self.same = same = new_sparse == old_sparse
        # A row-major order is the order of the linear index, which reshape keeps.
        order = meta.sort_order if same else tuple(range(K2)) if meta.row_major else ()
        names = None
        if meta.dimension_names is not None:
            names = meta.dimension_names if same else (None,) * K2 + tuple(meta.dimension_names[K:])
            if all(n is None for n in names):
                names = None
        out_meta = meta.with_(shape=new_sparse + meta.dense_shape, sparse_ndim=K2, sort_order=order, nnz=None,
                              dimension_names=names, created_by=None)
        self.schema = schema_of(out_meta)
        return Plan(out_meta, unique_claim=True if meta.unique else None, bounds_checked=True, row_for_row=True)

    def map(self, batch, keys):
        if self.same:
            index = list(batch.columns[: self.K])
        else:
            new_keys = relinearize(keys, self.old, self.new)
            index = [arrow_of(k) for k in new_keys]
        yield pa.RecordBatch.from_arrays(index + [batch.column(self.K)], schema=self.schema)
