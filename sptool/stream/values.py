"""Values as the reduce kernels take them (sptool/_reduce.pyx): kernel dtypes, (n, m) blocks,
segment reductions over runs of equal coordinates."""

from __future__ import annotations

import numpy as np

from .. import _reduce
from ..io import batch_values

_SEGMENT = {"sum": _reduce.segment_sum, "prod": _reduce.segment_prod, "max": _reduce.segment_max,
            "min": _reduce.segment_min}


_UFUNC = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def kernel_dtype(dtype: np.dtype, op: str = "sum") -> np.dtype:
    """The dtype the kernels reduce in: bool as uint8, float16 as float32, means of integers in
    float64 (as np.mean does)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.dtype(np.uint8)
    if dtype == np.float16:
        return np.dtype(np.float32)
    if op == "mean" and dtype.kind in "iu":
        return np.dtype(np.float64)
    return dtype


def as_kernel(values: np.ndarray, n: int, kdtype: np.dtype) -> np.ndarray:
    """(n, m) C-contiguous values in ``kdtype`` (bool is viewed as uint8, not copied)."""
    v = values.reshape(n, -1)
    if v.dtype == np.bool_ and kdtype == np.uint8:
        v = v.view(np.uint8)
    else:
        v = v.astype(kdtype, copy=False)
    return np.ascontiguousarray(v)


def from_kernel(values: np.ndarray, dtype: np.dtype, dense_shape) -> np.ndarray:
    """Kernel (g, m) values back to (g, *dense_shape) in ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        values = values.astype(bool)
    else:
        with np.errstate(all="ignore"):
            values = values.astype(dtype, copy=False)
    return values.reshape((len(values),) + tuple(dense_shape))


def segment(op: str, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """One reduced row per segment (``starts`` holds g + 1 offsets)."""
    out = np.empty((len(starts) - 1, values.shape[1]), dtype=values.dtype)
    if len(starts) > 1:
        _SEGMENT[op](values, starts, out)
    return out


def runs(keys: np.ndarray, dims) -> np.ndarray:
    """Start offsets (plus n) of the runs of equal indices on ``dims``."""
    out = np.empty(keys.shape[1] + 1, dtype=np.int64)
    g = _reduce.run_starts(keys, np.asarray(dims, dtype=np.int64), out)
    return out[: g + 1]


def values_of_array(arr, meta) -> np.ndarray:
    """The values of an Arrow values column as batch_values gives them: (n,) or (n, *dense)."""
    import pyarrow as pa

    batch = pa.RecordBatch.from_arrays([arr], names=["values"])
    return batch_values(batch, meta.with_(sparse_ndim=0, shape=tuple(meta.dense_shape)))


