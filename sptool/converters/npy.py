"""Dense NumPy .npy arrays.

Import keeps the elements that differ from --fill-value (default: the zero of the dtype;
a NaN fill drops NaNs), read through a read-only memory map in slices of about 1/32 of
--memory, so a file larger than the budget streams.  Every dimension becomes a sparse
dimension; the rows come out in the array's memory order: row-major (canonical) for a C
array, column-major for a Fortran array.  Export is ``sptool todense``
(sptool.ops.todense.todense).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DataError, UsageError
from ..format import TensorMeta, scalar_of_value_type, value_type_of_dtype
from ..io import open_npy, release
from .common import Options, Reader, cast_or_fail, coerce_fill

# Give the pages of the memory map back every this many bytes, so that reading a file
# larger than --memory does not grow the resident set by the file's size.
RELEASE_BYTES = 256 << 20


class NpyReader(Reader):
    def __init__(self, path: str, opts: Options):
        if path == "-":
            raise UsageError("a .npy file cannot be read from stdin (it is memory-mapped); name the file")
        self.name = path
        arr = open_npy(path)
        if arr.ndim == 0:
            raise UsageError("a 0-d array has no dimension to index; reshape it to (1,) first", path=path)
        if arr.dtype.kind not in "biufcUS":
            raise DataError(f"arrays of dtype {arr.dtype} cannot be converted", path=path)
        self.native = arr.dtype.newbyteorder("=")
        try:
            vt_in = value_type_of_dtype(self.native)
        except DataError as e:
            raise DataError(e.message, path=path) from None
        texts = ("string", "binary")
        if opts.value_type not in (None, vt_in) and (vt_in in texts or opts.value_type in texts):
            raise UsageError(f"{vt_in} values cannot be converted to {opts.value_type}", path=path)
        vt = opts.value_type or vt_in
        self.drop = coerce_fill(opts.fill_value, vt_in) if vt_in not in texts else _text_fill(opts.fill_value, vt_in)
        shape = tuple(int(s) for s in arr.shape)
        if opts.shape is not None and tuple(opts.shape) != shape:
            raise UsageError(f"--shape {list(opts.shape)} contradicts the array's shape {list(shape)}", path=path)
        K = len(shape)
        fortran = arr.ndim > 1 and arr.flags.f_contiguous and not arr.flags.c_contiguous
        self.flat = (arr.T if fortran else arr).reshape(-1)
        self.dims = shape[::-1] if fortran else shape
        self.fortran = fortran
        self.arr = arr
        order = tuple(range(K))[::-1] if fortran else tuple(range(K))
        self.meta = TensorMeta(shape=shape, sparse_ndim=K, value_type=vt,
                               fill_value=coerce_fill(opts.fill_value, vt) if vt not in ("string", "binary")
                               else self.drop, sort_order=order, unique=True)
        self.unique_claim = True
        # Cells of the array read at a time; each can become one row of output (batch_rows caps it).
        self.cells = opts.budget.batch_rows or max(1, opts.budget.total // 32 // max(arr.dtype.itemsize + 1, 1))

    def batches(self):
        total = math.prod(self.dims)
        dtype = self.meta.dtype
        drop = self.drop
        nan_fill = isinstance(drop, (float, complex)) and drop != drop
        since_release = 0
        for start in range(0, total, self.cells):
            block = np.asarray(self.flat[start : start + self.cells]).astype(self.native, copy=False)
            if nan_fill:
                keep = ~np.isnan(block)
            else:
                keep = block != drop
            pos = np.flatnonzero(keep)
            values = block[pos]
            keys = np.stack(np.unravel_index(pos + start, self.dims)).astype(np.int64, copy=False)
            if self.fortran:
                keys = np.ascontiguousarray(keys[::-1])
            if self.meta.value_type not in ("string", "binary"):
                values = cast_or_fail(values, dtype, lambda r, k=keys: f"element {k[:, r].tolist()}", self.name)
            elif values.dtype.kind == "U":
                _check_code_points(values, keys, self.name)
            self.rows_in += len(pos)
            since_release += block.nbytes
            if since_release > RELEASE_BYTES:
                release(self.arr)
                since_release = 0
            yield keys, values

    def close(self):
        self.flat = self.arr = None


def _text_fill(fill, value_type: str):
    """The fill value of a string or binary array: text (UTF-8 for binary), or bytes for binary."""
    if fill is None:
        return "" if value_type == "string" else b""
    if not isinstance(fill, (str, bytes)):
        raise UsageError(f"--fill-value {fill!r}: the fill value of {value_type} values is text, and this one was "
                         "read as a number")
    return scalar_of_value_type(fill, value_type, "--fill-value")


def _check_code_points(values: np.ndarray, keys: np.ndarray, path: str):
    """A NumPy str array holds UTF-32 code units as written; one that is no Unicode character (a
    surrogate, or past U+10FFFF) is refused, naming the element, before Python or Arrow decode it."""
    if not values.size or not values.dtype.itemsize:
        return
    units = np.ascontiguousarray(values).view(np.uint32).reshape(len(values), -1)
    bad = (units > 0x10FFFF) | ((units >= 0xD800) & (units <= 0xDFFF))
    rows = np.flatnonzero(bad.any(axis=1))
    if len(rows):
        r = int(rows[0])
        unit = int(units[r][bad[r]][0])
        raise DataError(f"element {keys[:, r].tolist()}: {unit:#x} is not a Unicode code point a string can hold "
                        "(a surrogate, or above 0x10ffff)", path=path)
