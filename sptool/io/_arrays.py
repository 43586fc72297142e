"""Conversions between Arrow record batches and the NumPy arrays the kernels take."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import DataError, FormatError
from ..format import TensorMeta, index_column


def batch_keys(batch: pa.RecordBatch, sparse_ndim: int) -> np.ndarray:
    """The index columns as one (K, n) int64 array."""
    n = batch.num_rows
    out = np.empty((sparse_ndim, n), dtype=np.int64)
    for k in range(sparse_ndim):
        col = batch.column(k)
        out[k] = col.to_numpy(zero_copy_only=False) if col.null_count == 0 or n == 0 else _nulls(col)
    return out


def batch_columns(batch: pa.RecordBatch, sparse_ndim: int) -> list[np.ndarray]:
    """The index columns as the batch holds them: K int64 arrays over its buffers, no copy."""
    cols = []
    for k in range(sparse_ndim):
        col = batch.column(k)
        cols.append(col.to_numpy(zero_copy_only=False) if col.null_count == 0 else _nulls(col))
    return cols


def _nulls(col):
    raise FormatError("an index column holds nulls")


def _flat_values(arr: pa.Array, meta: TensorMeta) -> np.ndarray:
    vt = meta.value_type
    if vt.startswith("complex"):
        part = np.float32 if vt == "complex64" else np.float64
        real = arr.field("real").to_numpy(zero_copy_only=False).astype(part, copy=False)
        imag = arr.field("imag").to_numpy(zero_copy_only=False).astype(part, copy=False)
        out = np.empty(len(arr), dtype=meta.dtype)
        out.real = real
        out.imag = imag
        return out
    if vt in ("string", "binary"):
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
    if vt == "bool":
        return arr.to_numpy(zero_copy_only=False).astype(bool, copy=False)
    return arr.to_numpy(zero_copy_only=False)


def batch_values(batch: pa.RecordBatch, meta: TensorMeta) -> np.ndarray:
    """The values column as an (n,) array, or (n, *dense_shape) for hybrid tensors."""
    arr = batch.column(meta.sparse_ndim)
    if meta.hybrid:
        flat = _flat_values(arr.flatten(), meta)
        return flat.reshape((len(arr),) + tuple(meta.dense_shape))
    return _flat_values(arr, meta)


def values_array(values: np.ndarray, meta: TensorMeta) -> pa.Array:
    """An Arrow array of the values column type from an (n,) or (n, *dense) array."""
    vt = meta.value_type
    n = len(values)
    flat = np.ascontiguousarray(values).reshape(-1) if meta.hybrid else values
    if vt.startswith("complex"):
        part = np.float32 if vt == "complex64" else np.float64
        flat = np.asarray(flat, dtype=meta.dtype)
        elem_type = meta.values_type().value_type if meta.hybrid else meta.values_type()
        arr = pa.StructArray.from_arrays(
            [arrow_of(flat.real.astype(part)), arrow_of(flat.imag.astype(part))],
            fields=list(elem_type),
        )
    elif vt in ("string", "binary"):
        # As Python objects: pyarrow cuts NumPy's fixed-width str and bytes at their first NUL,
        # which NumPy keeps inside a value (it drops only the trailing ones).
        arr = pa.array(flat.tolist(), type=pa.string() if vt == "string" else pa.binary())
    else:
        arr = arrow_of(np.asarray(flat, dtype=meta.dtype))
    if meta.hybrid:
        if meta.block_size == 0:
            if n:
                # pyarrow writes such rows but cannot read them back ("Expected all lists to be of
                # size=0"); they hold no values anyway.
                raise DataError(f"a tensor whose dense block {list(meta.dense_shape)} has no elements cannot store "
                                f"entries ({n} given): they hold no values")
            return pa.array([], type=meta.values_type())
        arr = pa.FixedSizeListArray.from_arrays(arr, meta.block_size)
        return arr.cast(meta.values_type()) if n else pa.array([], type=meta.values_type())
    return arr


def arrow_of(arr: np.ndarray) -> pa.Array:
    """A 1-D NumPy array as an Arrow array: zero-copy for fixed-width numbers.  Not pa.array,
    whose first call imports numpy.ma (7-13 ms of a run, measured), except for other types."""
    if arr.ndim == 1 and arr.dtype.kind in "iuf" and arr.dtype.isnative:
        arr = np.ascontiguousarray(arr)
        return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr), [None, pa.py_buffer(arr)])
    return pa.array(arr)


def make_batch(keys: np.ndarray, values, meta: TensorMeta, schema: pa.Schema) -> pa.RecordBatch:
    """A record batch in the file schema from (K, n) keys and values (array or Arrow array)."""
    cols = [arrow_of(np.ascontiguousarray(keys[k], dtype=np.int64)) for k in range(meta.sparse_ndim)]
    vals = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else values_array(values, meta)
    if vals.type != schema.field(meta.sparse_ndim).type:
        vals = vals.cast(schema.field(meta.sparse_ndim).type)
    return pa.RecordBatch.from_arrays(cols + [vals], schema=schema)


def normalize_batch(batch: pa.RecordBatch, meta: TensorMeta, schema: pa.Schema, path: str | None = None
                    ) -> pa.RecordBatch:
    """Bring a batch read from any conforming writer to sptool's own Arrow schema.

    DuckDB writes hybrid values as a plain LIST and declares columns nullable; other writers
    use large_string or the arrow.fixed_shape_tensor extension.  Each is accepted here (after
    the checks the spec requires) so that the ops see one schema.  Errors name ``path``.
    """
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    K = meta.sparse_ndim
    cols = list(batch.columns[: K + 1])
    target = schema.field(K).type
    vals = cols[K]
    if isinstance(vals.type, pa.BaseExtensionType):
        vals = vals.storage
    if meta.hybrid and pa.types.is_list(vals.type) or pa.types.is_large_list(vals.type):
        import pyarrow.compute as pc  # only for list-typed values (files from other writers)

        lengths = pc.list_value_length(vals).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(lengths != meta.block_size)
        if len(bad):
            raise FormatError(
                f"values[{bad[0]}] holds {lengths[bad[0]]} items, expected {meta.block_size} "
                f"(prod of dense shape {list(meta.dense_shape)}) [E_DENSE_BLOCK_LENGTH]", path=path
            )
        vals = pa.FixedSizeListArray.from_arrays(vals.flatten(), meta.block_size)
    if vals.null_count:
        raise FormatError("the values column holds nulls [E_NULL_VALUE]", path=path)
    try:
        cols[K] = vals.cast(target)
        cols[:K] = [c.cast(pa.int64()) for c in cols[:K]]
    except pa.ArrowException as e:
        raise FormatError(f"cannot read the columns as the declared types: {e}", path=path) from None
    for k in range(K):
        if cols[k].null_count:
            raise FormatError(f"index column {index_column(k)} holds nulls [E_NULL_INDEX]", path=path)
    return pa.RecordBatch.from_arrays(cols, schema=schema)
