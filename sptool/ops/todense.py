"""todense: scatter a tensor into a dense .npy, written through a memory map."""

from __future__ import annotations

import math
import os
import shutil

import numpy as np

from .. import _kernels
from .._memory import resolve_budget
from .._messages import out_of_order, repeated
from ..errors import DataError, ResourceError, UsageError
from ..format import INT64_MAX
from ..io import open_source
from ..io._atomic import AtomicTarget
from ..io.sink import OrderTracker
from ..io.source import known_shape
from ._dense import DenseScatter


def dense_dtype(meta, width: int | None = None) -> np.dtype:
    if meta.value_type == "string":
        return np.dtype(f"<U{max(width or 1, 1)}")
    if meta.value_type == "binary":
        return np.dtype(f"S{max(width or 1, 1)}")
    return meta.dtype


def check_dense_size(shape, dtype: np.dtype, where: str) -> int:
    """Bytes of a dense array of this shape, refusing sizes that overflow or exceed the disk."""
    cells = math.prod(shape)
    nbytes = cells * dtype.itemsize
    if cells > INT64_MAX or nbytes > INT64_MAX:
        raise ResourceError(f"a dense array of shape {list(shape)} has more than 2^63-1 elements or bytes")
    parent = os.path.dirname(os.path.abspath(where)) or "."
    if not os.path.isdir(parent):
        raise UsageError(f"the directory {parent} does not exist", path=where)
    free = shutil.disk_usage(parent).free
    if nbytes > free:
        raise ResourceError(
            f"the dense array needs {nbytes} bytes but only {free} are free on the output's disk", path=where
        )
    return nbytes


def _string_width(path, memory) -> int:
    width = 1
    with open_source(path) as src:
        for _, vals in src.iter_arrays(memory=memory):
            if len(vals):
                width = max(width, max(len(v) for v in vals.reshape(-1)))
    return width


def todense(path: str, output: str, *, default_value=None, validate: bool = True, memory=None,
            progress=None) -> dict:
    """Write the dense form of a tensor to ``output`` (.npy): TensorFlow's to_dense, with
    duplicate coordinates summed as the format says.

    Memory: the output is a memory map, so it may be larger than ``memory``; the rows stream
    through in batches.  ``validate`` also checks the file's sort and uniqueness claims (bounds
    are always checked; an out-of-range index is an error naming the entry).

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> out = os.path.join(tempfile.mkdtemp(), "d.npy")
    >>> _ = todense("sample_data/tensor3d.parquet", out)
    >>> np.load(out).shape
    (40, 30, 20)
    """
    if not output.endswith(".npy"):
        raise UsageError("todense writes a .npy file; name the output *.npy", path=output)
    budget = resolve_budget(memory)
    with open_source(path) as opened, known_shape(opened) as src:
        meta = src.meta
        width = None
        if meta.value_type in ("string", "binary"):
            if src.kind == "stream":
                raise UsageError("a string tensor from stdin cannot be densified (two passes are needed); "
                                 "write it to a file first", path=path)
            width = _string_width(path, memory)
        fill = meta.fill_value if default_value is None else default_value
        if width is not None:
            width = max(width, len(fill))
        dtype = dense_dtype(meta, width)
        nbytes = check_dense_size(meta.shape, dtype, output)
        target = AtomicTarget(output, is_dir=False)
        try:
            out = np.lib.format.open_memmap(target.tmp, mode="w+", dtype=dtype, shape=tuple(meta.shape))
            release = nbytes if nbytes > budget // 2 else None
            touched = None
            from ._dense import is_zero

            if not is_zero(fill) and math.prod(meta.shape[: meta.sparse_ndim]) > budget // 4:
                touched = np.lib.format.open_memmap(target.tmp + ".touched", mode="w+", dtype=bool,
                                                    shape=(math.prod(meta.shape[: meta.sparse_ndim]),))
            scatter = DenseScatter(out, meta, fill, touched=touched, release_bytes=release and budget // 4)
            sort = release is not None and not meta.row_major
            # Sorted rows are checked for the uniqueness claim in their new (row-major) order.
            claimed = tuple(range(meta.sparse_ndim)) if sort else meta.sort_order
            tracker = OrderTracker(claimed, meta.sparse_ndim, check_repeats=meta.unique) if validate else None
            if progress:
                progress.set_total(meta.nnz)
            for keys, vals in _rows(src, sort=sort, memory=memory):
                scatter.add(keys, vals)
                if tracker is not None:
                    _check_claims(tracker, keys, meta)
                if progress:
                    progress.advance(keys.shape[1])
            scatter.finish()
            out.flush()
            del out, scatter
            if touched is not None:
                del touched
                os.remove(target.tmp + ".touched")
            target.commit()
        except BaseException:
            if os.path.exists(target.tmp + ".touched"):
                os.remove(target.tmp + ".touched")
            target.abort()
            raise
    return {"rows": meta.nnz, "shape": list(meta.shape), "dtype": str(dtype), "bytes": nbytes}


def _rows(src, *, sort: bool, memory):
    """(keys, values) batches; in row-major order when ``sort``, so that an output bigger than the
    budget is written front to back (random rows would touch, flush and re-read every page of
    the memory map in each batch)."""
    if not sort:
        yield from src.iter_arrays(memory=memory)
        return
    from ..io._arrays import batch_keys, batch_values
    from .reorder import sorted_batches

    K = src.meta.sparse_ndim
    for batch, _ in sorted_batches(src, tuple(range(K)), memory=memory):
        yield batch_keys(batch, K), batch_values(batch, src.meta)


def _check_claims(tracker: OrderTracker, keys: np.ndarray, meta):
    at, kind = tracker.check(keys)
    if at < 0:
        return
    local = at - (tracker.offset - keys.shape[1])
    what = out_of_order if kind == _kernels.OUT_OF_ORDER else repeated
    raise DataError(
        f"{what(at, keys, local)}, although the metadata says sort_order "
        f"{list(meta.sort_order)}, unique {str(meta.unique).lower()} (use --no-validate to densify anyway; "
        "duplicates are summed)"
    )
