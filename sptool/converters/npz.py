"""scipy.sparse .npz files (what scipy.sparse.save_npz writes, and pydata/sparse's COO).

Keys: ``format`` (b'coo', b'csr', b'csc', b'bsr' or b'dia'), ``shape``, ``data``, then
``row``/``col`` (2-D coo), ``coords`` (n-D coo, ndim x nnz), ``indices``/``indptr`` (csr, csc,
and bsr, whose ``data`` is [blocks, R, C]) or ``offsets`` (dia, ``data`` [diagonals, length]).
The entries are those of scipy's ``load_npz(path).tocoo()``: a bsr block's explicit zeros are
kept, a dia matrix's stored zeros (its padding) and cells outside the shape are not.  A
pydata/sparse file may add ``fill_value``.  The arrays are loaded whole (a .npz member
cannot be read in pieces), so the file's decompressed size is checked against --memory
first.  Order claims: csr rows come in row order ([0], or [0, 1] when every row's column
indices are sorted); csc in column order ([1] or [1, 0]); dia entries are sorted row-major;
coo and bsr are checked in one pass and claim row-major order only if it holds.  The sink
verifies every claim.

Output is a coo file that scipy.sparse.load_npz reads as a ``coo_array`` (``row``/``col``
for 2-D, ``coords`` otherwise), compressed as save_npz does by default.  scipy has no
float16, so float16 values are written as float32 (exactly).
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from .. import _kernels
from .._memory import format_size
from ..errors import DataError, InputError, ResourceError, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import NPY_HEADER_ERRORS, AtomicTarget
from .common import Options, Reader, cast_or_fail, check_not_hybrid, check_zero_fill, coerce_fill, integer_array
from .gather import GatheringWriter

BATCH_ROWS = 1 << 20
REQUIRED = {"coo": ("shape", "data"), "csr": ("shape", "data", "indices", "indptr"),
            "csc": ("shape", "data", "indices", "indptr"), "bsr": ("shape", "data", "indices", "indptr"),
            "dia": ("shape", "data", "offsets")}


def member_headers(path: str) -> dict:
    """{key: (shape, dtype)} of every array in the archive, read from the .npy headers only."""
    out = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                if not name.endswith(".npy"):
                    continue
                with zf.open(name) as f:
                    version = np.lib.format.read_magic(f)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                out[name[:-4]] = (shape, dtype)
    except (zipfile.BadZipFile, *NPY_HEADER_ERRORS) as e:
        raise InputError(f"not a readable .npz archive ({e})", path=path) from None
    return out


def _text(value) -> str:
    value = value.item() if isinstance(value, np.ndarray) else value
    return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)


def _load_arrays(path: str, budget) -> dict:
    """Every array of the .npz archive at ``path``, refused when loading them would go over the
    budget."""
    if not os.path.exists(path):
        raise InputError("no such file or directory", path=path)
    headers = member_headers(path)
    if "format" not in headers:
        hint = "; it is a binsparse file: give --from binsparse" if "binsparse" in headers else ""
        raise DataError(f"missing key 'format': not a scipy.sparse .npz file{hint}", path=path)
    nbytes = sum(int(np.prod(s)) * d.itemsize for s, d in headers.values())
    data_shape, _ = headers.get("data", ((0,), np.dtype(np.float64)))
    nnz = int(np.prod(data_shape))  # bsr's blocks and dia's diagonals hold one value a cell
    ndim = int(np.prod(headers["shape"][0])) if "shape" in headers else 2
    need = nbytes + nnz * 8 * ndim * 2
    if need > budget.usable:
        raise ResourceError(
            f"a .npz archive is loaded whole; this one ({nnz} entries) needs about {format_size(need)}, "
            f"more than the {format_size(budget.usable)} that --memory {format_size(budget.total)} leaves for "
            "data; raise --memory", path=path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, *NPY_HEADER_ERRORS) as e:
        raise DataError(f"cannot load the arrays ({e})", path=path) from None
    return arrays


def _scipy_format(arrays: dict, path: str) -> str:
    """The archive's scipy.sparse format, once the arrays it needs are there."""
    fmt = _text(arrays["format"])
    if fmt not in REQUIRED:
        raise InputError(f"scipy format {fmt!r} is not supported; save it as {', '.join(REQUIRED)} "
                         "(e.g. scipy.sparse.save_npz(path, m.tocoo()))", path=path)
    missing = [k for k in REQUIRED[fmt] if k not in arrays]
    if fmt == "coo" and not ({"row", "col"} <= arrays.keys() or "coords" in arrays):
        missing.append("row/col or coords")
    if missing:
        raise DataError(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)} for format "
                        f"{fmt!r}", path=path)
    return fmt


class NpzReader(Reader):
    complete = True

    def __init__(self, path: str, opts: Options):
        if path == "-":
            raise UsageError("a .npz archive cannot be read from stdin (it needs random access); name the file")
        self.name = path
        arrays = _load_arrays(path, opts.budget)
        fmt = _scipy_format(arrays, path)
        shape = tuple(int(s) for s in integer_array(arrays["shape"], "shape", path).reshape(-1))
        data = np.asarray(arrays["data"])
        if data.dtype.kind not in "biufc":
            raise DataError(f"data of dtype {data.dtype} is not numeric", path=path)
        if fmt in ("csr", "csc"):
            data = data.reshape(-1)
            keys, order = _compressed(arrays, fmt, shape, len(data), path)
        else:
            keys, data = {"coo": _coo, "bsr": _bsr, "dia": _dia}[fmt](arrays, shape, data, path)
            order = _row_major_if_so(keys, len(shape))
        self.keys = np.ascontiguousarray(keys)
        self.data = data
        vt_in = value_type_of_dtype(data.dtype)
        vt = opts.value_type or vt_in
        fill = opts.fill_value
        if "fill_value" in arrays and fill is None:
            fill = np.asarray(arrays["fill_value"]).item()
        self.meta = TensorMeta(shape=shape, sparse_ndim=len(shape), value_type=vt,
                               fill_value=coerce_fill(fill, vt), nnz=len(data), sort_order=order)
        self.unique_claim = None if len(order) == len(shape) else False
        if opts.shape is not None and tuple(opts.shape) != shape:
            raise UsageError(f"--shape {list(opts.shape)} contradicts the shape {list(shape)} in the file",
                             path=path)

    def batches(self):
        dtype = self.meta.dtype
        n = self.data.shape[0]
        for start in range(0, n, BATCH_ROWS):
            vals = cast_or_fail(self.data[start : start + BATCH_ROWS], dtype,
                                lambda r, s=start: f"entry {s + r}", self.name)
            keys = self.keys[:, start : start + BATCH_ROWS]
            self.rows_in += keys.shape[1]
            yield keys, vals


def _row_major_if_so(keys: np.ndarray, ndim: int) -> tuple:
    """The row-major order claim, checked in one pass: made only if the keys hold it."""
    rowmajor = np.arange(ndim, dtype=np.int64)
    if keys.shape[1] and _kernels.first_order_violation(keys, rowmajor, False)[0] < 0:
        return tuple(range(ndim))
    return ()


def _coo(arrays: dict, shape: tuple, data: np.ndarray, path: str):
    """(keys, values) of a coo matrix or n-D array."""
    data = data.reshape(-1)
    if "coords" in arrays:
        keys = integer_array(arrays["coords"], "coords", path)
        if keys.ndim != 2:
            keys = keys.reshape(len(shape), -1)
    else:
        keys = np.stack([integer_array(arrays["row"], "row", path).reshape(-1),
                         integer_array(arrays["col"], "col", path).reshape(-1)])
    if keys.shape[0] != len(shape) or keys.shape[1] != len(data):
        raise DataError(f"coordinates of shape {keys.shape} do not match shape {list(shape)} and "
                        f"{len(data)} values", path=path)
    return keys, data


def _bsr(arrays: dict, shape: tuple, data: np.ndarray, path: str):
    """(keys, values) of a bsr matrix, block by block as scipy's tocoo gives them (zeros kept)."""
    _check_2d("bsr", shape, path)
    if data.ndim != 3:
        raise DataError(f"bsr data must be [blocks, rows, columns], got shape {list(data.shape)}", path=path)
    blocks, R, C = data.shape
    rows, cols = shape
    if R == 0 or C == 0:
        raise DataError(f"bsr blocks of {R} x {C} hold nothing", path=path)
    # As scipy.sparse: rows // R block rows (load_npz takes a shape that is not a multiple of the blocks).
    block_row, block_col = _pointers(arrays, "bsr", rows // R, blocks, shape, path)
    row = block_row[:, None, None] * R + np.arange(R, dtype=np.int64)[None, :, None]
    col = block_col[:, None, None] * C + np.arange(C, dtype=np.int64)[None, None, :]
    keys = np.stack([np.broadcast_to(row, data.shape).reshape(-1), np.broadcast_to(col, data.shape).reshape(-1)])
    return keys, data.reshape(-1)


def _dia(arrays: dict, shape: tuple, data: np.ndarray, path: str):
    """(keys, values) of a dia matrix in row-major order: data[k, j] is the cell (j - offsets[k], j),
    kept when it lies in the matrix and is not zero (stored zeros are the diagonals' padding)."""
    _check_2d("dia", shape, path)
    offsets = integer_array(arrays["offsets"], "offsets", path).reshape(-1)
    if data.ndim != 2 or data.shape[0] != len(offsets):
        raise DataError(f"dia data of shape {list(data.shape)} does not match {len(offsets)} offsets", path=path)
    if len(np.unique(offsets)) != len(offsets):
        raise DataError(f"offsets repeat ({offsets.tolist()}): scipy.sparse refuses such a dia matrix", path=path)
    rows, cols = shape
    col = np.broadcast_to(np.arange(data.shape[1], dtype=np.int64), data.shape)
    row = col - offsets[:, None]
    keep = (row >= 0) & (row < rows) & (col < cols) & (data != 0)
    row, col, values = row[keep], col[keep], data[keep]
    order = np.lexsort((col, row))
    return np.stack([row[order], col[order]]), values[order]


def _check_2d(fmt: str, shape: tuple, path: str):
    if len(shape) != 2:
        raise DataError(f"a {fmt} matrix must be 2-D, got shape {list(shape)}", path=path)


def _pointers(arrays: dict, fmt: str, major: int, nnz: int, shape: tuple, path: str):
    """(outer, inner) indices of the ``nnz`` stored items of a compressed matrix with ``major``
    pointer rows: csr's rows, csc's columns, bsr's block rows."""
    indptr = integer_array(arrays["indptr"], "indptr", path).reshape(-1)
    indices = integer_array(arrays["indices"], "indices", path).reshape(-1)
    if len(indptr) != major + 1 or indptr[0] != 0 or indptr[-1] != nnz or len(indices) != nnz or \
            (len(indptr) > 1 and np.any(np.diff(indptr) < 0)):
        raise DataError(f"indptr is not a valid {fmt} pointer array for shape {list(shape)} and {nnz} entries",
                        path=path)
    return np.repeat(np.arange(major, dtype=np.int64), np.diff(indptr)), indices


def _compressed(arrays: dict, fmt: str, shape: tuple, nnz: int, path: str):
    """(keys, sort_order) of a csr or csc matrix."""
    _check_2d(fmt, shape, path)
    major = shape[0] if fmt == "csr" else shape[1]
    outer, indices = _pointers(arrays, fmt, major, nnz, shape, path)
    step = np.diff(indices)
    same = outer[1:] == outer[:-1]
    inner_sorted = not np.any(step[same] < 0)
    first = 0 if fmt == "csr" else 1
    order = (first, 1 - first) if inner_sorted else (first,)
    keys = np.stack([outer, indices]) if fmt == "csr" else np.stack([indices, outer])
    return keys, order


class NpzWriter(GatheringWriter):
    """Gathers the rows (checked against --memory as they come) and writes one coo archive."""

    hybrid_ok = False  # scipy.sparse holds one scalar per coordinate
    what = "a .npz archive"

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        if dst == "-":
            raise UsageError("a .npz archive cannot be written to stdout; name the output file")
        if not self.hybrid_ok:
            check_not_hybrid(meta, "npz")
        check_zero_fill(meta, "npz")
        if meta.value_type in ("string", "binary"):
            raise UsageError(f"scipy.sparse cannot hold {meta.value_type} values")
        super().__init__(dst, meta, opts)
        self.target = AtomicTarget(dst, is_dir=False)

    def close(self):
        keys, data, shape = self.gathered()
        arrays = {"format": np.bytes_(b"coo"), "shape": np.asarray(shape, dtype=np.int64), "data": data,
                  "_is_array": np.bool_(True)}
        if self.meta.sparse_ndim == 2:
            arrays.update(row=keys[0], col=keys[1])
        else:
            arrays.update(coords=keys)
        with open(self.target.tmp, "wb") as f:
            np.savez_compressed(f, **arrays)
        self.target.commit()
        self.shape = shape

    def abort(self):
        self.target.abort()
