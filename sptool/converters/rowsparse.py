"""Row-sparse tensors (Paddle's SelectedRows, TensorFlow's IndexedSlices, a PyTorch hybrid COO
tensor): row ids, a dense block per row, and the height of the table they index.

Read from a pair of .npy files (``--rows R.npy --values V.npy --height H``), from an .npz
archive holding ``rows`` / ``values`` / ``height`` (what ``--to rows`` writes) or TensorFlow's
``indices`` / ``values`` / ``dense_shape`` (an IndexedSlices saved with NumPy), and from a
``torch.save``d sparse COO tensor when torch is installed.  Written as an .npz archive of
``rows`` (int64 [n]), ``values`` ([n, d1, ...]) and ``height``.  The result is the format's
hybrid case with K = 1 (formats/SPEC.md section 3.3); repeated rows are kept as stored rows
(the format sums them), and the sink detects the order and uniqueness as they pass.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

import numpy as np

from .._memory import format_size
from ..errors import DataError, InputError, ResourceError, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import NPY_HEADER_ERRORS, open_npy
from .common import Options, Reader, cast_or_fail, coerce_fill, integer_array
from .npz import NpzReader, NpzWriter, member_headers

# The key sets an .npz of row-sparse data holds: sptool's own, then TensorFlow's IndexedSlices.
ROWS_KEYS = ("rows", "values", "height")
SLICES_KEYS = ("indices", "values", "dense_shape")


@dataclass(frozen=True)
class RowsOptions:
    """``--rows R.npy --values V.npy --height H``: a row-sparse input from two .npy files."""

    rows: str
    values: str
    height: int


class RowSparseReader(Reader):
    """Rows of ids ``ids`` (n,) and blocks ``blocks`` (n, d1, ...), a memory map or an array, in
    slices of about 1/32 of --memory; ids are checked against [0, height) as they pass."""

    complete = True
    unique_claim = None  # the sink finds out

    def __init__(self, name: str, ids: np.ndarray, blocks: np.ndarray, height, opts: Options):
        self.name = name
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise DataError(f"row ids must be a 1-D integer array, not {ids.dtype} of shape {list(ids.shape)}",
                            path=name)
        if blocks.ndim < 1 or blocks.shape[0] != ids.shape[0]:
            raise DataError(f"{ids.shape[0]} row ids but values of shape {list(blocks.shape)}; the values need one "
                            "block per row id", path=name)
        if blocks.dtype.kind not in "biufc":
            raise DataError(f"values of dtype {blocks.dtype} are not numeric", path=name)
        height = int(height)
        if height < 0:
            raise UsageError(f"the height must be >= 0, not {height}", path=name)
        self.ids, self.blocks, self.height = ids, blocks, height
        vt = opts.value_type or value_type_of_dtype(blocks.dtype.newbyteorder("="))
        shape = (height,) + tuple(int(d) for d in blocks.shape[1:])
        if opts.shape is not None and tuple(opts.shape) != shape:
            raise UsageError(f"--shape {list(opts.shape)} contradicts the row-sparse shape {list(shape)}", path=name)
        self.meta = TensorMeta(shape=shape, sparse_ndim=1, value_type=vt,
                               fill_value=coerce_fill(opts.fill_value, vt), nnz=int(ids.shape[0]))
        block = max(1, int(np.prod(blocks.shape[1:], dtype=np.int64))) * blocks.dtype.itemsize + 8
        self.step = opts.budget.batch_rows or max(1, opts.budget.total // 32 // block)

    def batches(self):
        dtype = self.meta.dtype
        for lo in range(0, self.ids.shape[0], self.step):
            ids = np.asarray(self.ids[lo:lo + self.step], dtype=np.int64)
            bad = np.flatnonzero((ids < 0) | (ids >= self.height))
            if len(bad):
                k = int(bad[0])
                raise DataError(f"row id {int(ids[k])} (entry {lo + k}) is outside the height [0, {self.height})",
                                path=self.name)
            vals = cast_or_fail(np.asarray(self.blocks[lo:lo + self.step]), dtype,
                                lambda r, s=lo: f"entry {s + r}", self.name)
            self.rows_in += len(ids)
            yield ids[None, :], vals

    def close(self):
        self.ids = self.blocks = None


def rows_reader(src, opts: Options) -> Reader:
    """``--from rows``: the .npy pair of ``opts.rows``, or an .npz of row-sparse keys."""
    if opts.rows is not None:
        r = opts.rows
        return RowSparseReader(r.values, open_npy(r.rows), open_npy(r.values), r.height, opts)
    return _npz_rows(src, opts)


def npz_reader(src: str, opts: Options) -> Reader:
    """An .npz: scipy.sparse's unless it holds the row-sparse keys instead of ``format``."""
    if src != "-" and os.path.exists(src):
        keys = member_headers(src)
        if "format" not in keys and (set(ROWS_KEYS) <= keys.keys() or set(SLICES_KEYS) <= keys.keys()):
            return _npz_rows(src, opts)
    return NpzReader(src, opts)


def _npz_rows(path: str, opts: Options) -> Reader:
    if path == "-":
        raise UsageError("an .npz archive cannot be read from stdin (it needs random access); name the file")
    if not os.path.exists(path):
        raise InputError("no such file or directory", path=path)
    headers = member_headers(path)
    names = ROWS_KEYS if set(ROWS_KEYS) <= headers.keys() else SLICES_KEYS
    missing = [k for k in names if k not in headers]
    if missing:
        raise DataError(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}: a row-sparse .npz "
                        f"holds {', '.join(ROWS_KEYS)} (or TensorFlow's {', '.join(SLICES_KEYS)})", path=path)
    need = sum(int(np.prod(s)) * d.itemsize for s, d in headers.values()) * 2
    if need > opts.budget.usable:
        raise ResourceError(f"an .npz archive is loaded whole; this one needs about {format_size(need)}, more than "
                            f"the {format_size(opts.budget.usable)} --memory leaves for data; raise --memory, or "
                            "give the arrays as .npy files with --rows and --values", path=path)
    try:
        with np.load(path, allow_pickle=False) as z:
            ids, blocks, extent = (z[k] for k in names)
    except (zipfile.BadZipFile, *NPY_HEADER_ERRORS) as e:
        raise DataError(f"cannot load the arrays ({e})", path=path) from None
    extent = integer_array(extent, names[2], path).reshape(-1)
    if names == SLICES_KEYS and tuple(int(d) for d in extent[1:]) != tuple(blocks.shape[1:]):
        raise DataError(f"dense_shape {extent.tolist()} does not match values of shape {list(blocks.shape)}",
                        path=path)
    if len(extent) < 1:
        raise DataError(f"no height: {names[2]} is empty", path=path)
    return RowSparseReader(path, ids, blocks, extent[0], opts)


def torch_reader(src: str, opts: Options) -> Reader:
    """A sparse COO tensor saved with ``torch.save`` (torch must be installed): its sparse
    dimensions become the index columns, its dense ones the block."""
    try:
        import torch
    except ImportError:
        raise InputError("reading a torch.save file needs PyTorch; pip install torch", path=src) from None
    if src == "-" or not os.path.exists(src):
        raise InputError("no such file (a torch file cannot be read from stdin)", path=src)
    try:
        t = torch.load(src, weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a file it cannot read
        raise InputError(f"torch.load cannot read it ({type(e).__name__}: {e})", path=src) from None
    if not isinstance(t, torch.Tensor) or t.layout != torch.sparse_coo:
        raise DataError(f"holds {type(t).__name__} {getattr(t, 'layout', '')}, not a sparse COO tensor", path=src)
    keys = t._indices().numpy()
    blocks = t._values().numpy()
    if keys.shape[0] != 1:
        raise UsageError(f"a sparse tensor with {keys.shape[0]} sparse dimensions is not row-sparse "
                         "(sparse_dim must be 1)", path=src)
    return RowSparseReader(src, keys[0], blocks, t.shape[0], opts)


class RowsWriter(NpzWriter):
    """``--to rows``: an .npz of ``rows`` (int64 [n]), ``values`` ([n, d1, ...]) and ``height``."""

    hybrid_ok = True

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        if meta.sparse_ndim != 1:
            raise UsageError(f"--to rows needs a row-sparse tensor (one sparse dimension); this one has "
                             f"{meta.sparse_ndim} of shape {list(meta.shape)}")
        super().__init__(dst, meta, opts, unique_claim)

    def close(self):
        meta = self.meta
        rows = np.concatenate(self.keys, axis=1)[0] if self.keys else np.empty(0, np.int64)
        values = np.concatenate(self.values) if self.values else np.empty((0,), meta.dtype)
        values = values.reshape((len(rows),) + tuple(meta.dense_shape))
        height = meta.shape[0] if meta.shape[0] is not None else (int(rows.max()) + 1 if len(rows) else 0)
        with open(self.target.tmp, "wb") as f:
            np.savez(f, rows=rows, values=values, height=np.int64(height))
        self.target.commit()
        self.shape = (height,) + tuple(meta.dense_shape)
