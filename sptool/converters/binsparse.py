"""Binsparse files (the GraphBLAS binary sparse format), through its reference package.

A binsparse file is a JSON descriptor plus named arrays in a container: HDF5 (``.h5``,
``.hdf5``), Zarr (``.zarr``, a directory; needs the ``zarr`` package) or NumPy ``.npz`` (only
with --from/--to binsparse, since a plain ``.npz`` is scipy's).  The ``binsparse`` package
(the optional extra ``sptool[binsparse]``) parses and writes the arrays; sptool reads the raw
descriptor itself first, because the package ignores two keys that change the meaning of the
arrays: ``structure`` (only one triangle stored) is refused, and ``index_base`` 1 is honoured
(stored indices less one).

Reading: every format the package parses (COOR/COOC, CSR/CSC, DCSR/DCSC, CVEC, DVEC, DMATR/DMATC,
custom levels) is walked as its level tree (dense, sparse, element) into coordinates, so a
dense level gives one entry per position.  Writing: 1-D as CVEC, 2-D as COOR, n-D as the custom
root sparse level of rank n, always with the fill value, from row-major input with repeats
summed (the predefined formats hold sorted unique coordinates only).  HDF5 output streams: its
arrays are resizable datasets appended batch by batch, and the descriptor is the package's for
the same tensor.  Zarr and .npz output, and every input, go through the package, which holds
every array in memory: their size is checked against --memory first.
binsparse has no float16: float16 values are written as float32 (exactly).
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile

import numpy as np

from .. import _kernels
from .._memory import format_size
from .._messages import out_of_order, repeated
from ..errors import DataError, InputError, ResourceError, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import AtomicTarget
from .common import Options, Reader, cast_or_fail, check_not_hybrid, coerce_fill
from .gather import GatheringWriter

BATCH_ROWS = 1 << 20
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
INSTALL = "binsparse files need the binsparse package: pip install 'sptool[binsparse]'"


def _package():
    try:
        import binsparse
        import h5py  # noqa: F401  (the package's HDF5 containers use it)
    except ImportError:
        raise UsageError(INSTALL) from None
    return binsparse


def _zarr():
    try:
        import zarr
    except ImportError:
        raise UsageError("a .zarr binsparse container needs the zarr package: pip install zarr") from None
    return zarr


def _kind_by_name(path: str) -> str | None:
    ext = os.path.splitext(path.rstrip("/" + os.sep))[1].lower()
    return {".h5": "hdf5", ".hdf5": "hdf5", ".zarr": "zarr", ".npz": "npz"}.get(ext)


def container_kind(path: str) -> str:
    """'hdf5', 'zarr' or 'npz': by extension, else by content (a directory is Zarr)."""
    named = _kind_by_name(path)
    if named:
        return named
    if os.path.isdir(path):
        return "zarr"
    try:
        with open(path, "rb") as f:
            head = f.read(len(HDF5_MAGIC))
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=path) from None
    if head.startswith(HDF5_MAGIC):
        return "hdf5"
    if head.startswith(b"PK"):
        return "npz"
    raise InputError("not a binsparse container (HDF5, Zarr or .npz)", path=path)


def _raw_descriptor(container, kind: str, path: str) -> dict:
    """The descriptor's ``binsparse`` object as stored, read without the package's parser (which
    drops the keys it does not know).  Accepts the older unwrapped form too."""
    try:
        if kind == "npz":
            raw = container.file["binsparse"]
            raw = json.loads(str(np.asarray(raw).item()))
        else:
            raw = container.group.attrs["binsparse"]
            raw = json.loads(raw) if isinstance(raw, (str, bytes)) else dict(raw)
    except KeyError:
        raise DataError("no 'binsparse' descriptor: not a binsparse file", path=path) from None
    except (ValueError, TypeError) as e:
        raise DataError(f"the binsparse descriptor is not JSON ({e})", path=path) from None
    inner = raw.get("binsparse", raw) if isinstance(raw, dict) else None
    if not isinstance(inner, dict):
        raise DataError("the binsparse descriptor is not a JSON object", path=path)
    return inner


def _check_descriptor(desc: dict, path: str) -> int:
    """Refuse what the package would misread; returns the index base (0 or 1)."""
    if desc.get("structure") not in (None, "general"):
        raise DataError(f"structure {desc['structure']!r} (one triangle stored) is not supported; only general "
                        "matrices are read", path=path)
    base = desc.get("index_base", 0)
    if base not in (0, 1) or isinstance(base, bool):
        raise DataError(f"index_base {base!r} is not 0 or 1", path=path)
    shape = desc.get("shape")
    nsv = desc.get("number_of_stored_values")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape) or \
            not isinstance(nsv, int) or nsv < 0:
        raise DataError("the descriptor needs a shape (non-negative integers) and number_of_stored_values",
                        path=path)
    return base


def _coordinates(level, shape_of_level: list[int], path: str):
    """(keys (n, nnz) in level order, values) of a parsed custom level tree: each level maps its
    parent positions to child positions, starting from the one root position."""
    from binsparse import DenseLevel, ElementLevel, SparseLevel

    coords = np.empty((0, 1), dtype=np.int64)
    depth = 0
    while not isinstance(level, ElementLevel):
        rank = level.rank
        dims = shape_of_level[depth : depth + rank]
        npos = coords.shape[1]
        if isinstance(level, DenseLevel):
            block = math.prod(dims)
            local = np.stack(np.unravel_index(np.arange(block, dtype=np.int64), dims)).astype(np.int64) \
                if block else np.empty((rank, 0), dtype=np.int64)
            coords = np.concatenate([np.repeat(coords, block, axis=1), np.tile(local, npos)])
        elif isinstance(level, SparseLevel):
            indices = np.stack([np.asarray(ix, dtype=np.int64).reshape(-1) for ix in level.indices])
            if level.pointers_to_next is None:
                parent = np.zeros(indices.shape[1], dtype=np.int64)
                if npos != 1:
                    raise DataError(f"sparse level at dimension {depth} has no pointers", path=path)
            else:
                ptr = np.asarray(level.pointers_to_next, dtype=np.int64).reshape(-1)
                n = indices.shape[1]
                if len(ptr) != npos + 1 or ptr[0] != 0 or ptr[-1] != n or np.any(np.diff(ptr) < 0):
                    raise DataError(f"pointers_to_{depth} is not a valid pointer array for {npos} positions and "
                                    f"{n} indices", path=path)
                parent = np.repeat(np.arange(npos, dtype=np.int64), np.diff(ptr))
            coords = np.concatenate([coords[:, parent], indices])
        else:
            raise DataError(f"level {type(level).__name__} is not supported", path=path)
        depth += rank
        level = level.level
    values = np.asarray(level.values).reshape(-1)
    if len(values) != coords.shape[1]:
        raise DataError(f"{len(values)} values for {coords.shape[1]} stored positions", path=path)
    return coords, values


class BinsparseReader(Reader):
    complete = True

    def __init__(self, path: str, opts: Options):
        if path == "-":
            raise UsageError("a binsparse container cannot be read from stdin (it needs random access); name it")
        self.name = path
        if not os.path.exists(path):
            raise InputError("no such file or directory", path=path)
        bsp = _package()
        kind = container_kind(path)
        with _open_container(bsp, kind, path, "r") as container:
            desc = _raw_descriptor(container, kind, path)
            base = _check_descriptor(desc, path)
            if re.fullmatch(r"\d+\.\d+", str(desc.get("version", ""))):
                # The spec writes "0.1"; the package accepts only SemVer ("0.1.0").
                desc = {**desc, "version": f"{desc['version']}.0"}
            container._read_header = lambda: desc  # the package parses the descriptor sptool checked
            shape = tuple(int(s) for s in desc["shape"])
            nsv = desc["number_of_stored_values"]
            # Raw arrays, the parsed copies and the int64 coordinates, about.
            need = nsv * (24 * max(len(shape), 1) + 32)
            budget = opts.budget
            if need > budget.usable:
                raise ResourceError(
                    f"a binsparse file is loaded whole; this one ({nsv} stored values) needs about "
                    f"{format_size(need)}, more than the {format_size(budget.usable)} that --memory "
                    f"{format_size(budget.total)} leaves for data; raise --memory", path=path)
            try:
                tensor = bsp.BinsparseTensor.parse(container, alias=False)
            except (bsp.BinsparseParseError, ValueError, TypeError, KeyError) as e:
                raise DataError(f"not a valid binsparse file: {e}", path=path) from None
        transpose = list(tensor.transpose) if tensor.transpose is not None else list(range(len(shape)))
        level_keys, values = _coordinates(tensor.level, [shape[t] for t in transpose], path)
        if base:
            level_keys = self._rebased(tensor.level, level_keys, path)
        keys = np.empty_like(level_keys)
        keys[transpose] = level_keys  # level dimension k is dimension transpose[k] of the tensor
        self.keys = np.ascontiguousarray(keys)
        # The format's levels hold unique tuples sorted within each parent, so the entries come
        # in lexicographic order of the level dimensions: checked here, then claimed.
        order = np.asarray(transpose, dtype=np.int64)
        if self.keys.shape[1]:
            at, kind = _kernels.first_order_violation(self.keys, order, True)
            if at >= 0:
                say = repeated if kind == _kernels.REPEATED else out_of_order
                raise DataError(f"{say(at, self.keys, at)} (a binsparse {desc.get('format')} holds sorted, "
                                "unique coordinates)", path=path)
        if values.dtype.kind not in "biufc":
            raise DataError(f"values of dtype {values.dtype} are not numeric", path=path)
        self.values = values
        vt = opts.value_type or value_type_of_dtype(values.dtype)
        fill = opts.fill_value
        if fill is None and tensor.fill:
            fill = np.asarray(tensor.fill_value).item()
        self.meta = TensorMeta(shape=shape, sparse_ndim=len(shape), value_type=vt, fill_value=coerce_fill(fill, vt),
                               nnz=len(values), sort_order=tuple(transpose))
        self.unique_claim = True
        self.notes = [f"{desc.get('format')} read, indices one-based"] if base else []
        if opts.shape is not None and tuple(opts.shape) != shape:
            raise UsageError(f"--shape {list(opts.shape)} contradicts the shape {list(shape)} in the file", path=path)

    @staticmethod
    def _rebased(level, keys: np.ndarray, path: str) -> np.ndarray:
        """index_base 1: stored indices less one (dense levels store none)."""
        from binsparse import SparseLevel

        stored = []
        depth = 0
        while hasattr(level, "rank") and level.rank:
            if isinstance(level, SparseLevel):
                stored.extend(range(depth, depth + level.rank))
            depth += level.rank
            level = level.level
        if stored and keys.shape[1] and keys[stored].min() < 1:
            raise DataError("index_base is 1 but an index is 0", path=path)
        keys = keys.copy()
        keys[stored] -= 1
        return keys

    def batches(self):
        dtype = self.meta.dtype
        for start in range(0, len(self.values), BATCH_ROWS):
            vals = cast_or_fail(self.values[start : start + BATCH_ROWS], dtype,
                                lambda r, s=start: f"entry {s + r}", self.name)
            keys = self.keys[:, start : start + BATCH_ROWS]
            self.rows_in += keys.shape[1]
            yield keys, vals


class _open_container:
    """The package's container adapter over an open HDF5 file, Zarr group or .npz archive."""

    def __init__(self, bsp, kind: str, path: str, mode: str):
        self.bsp, self.kind, self.path, self.mode = bsp, kind, path, mode
        self.handle = None

    def __enter__(self):
        bsp, path = self.bsp, self.path
        try:
            if self.kind == "hdf5":
                import h5py

                self.handle = h5py.File(path, self.mode)
                return bsp.HDF5BinsparseContainer(self.handle)
            if self.kind == "zarr":
                return bsp.ZarrBinsparseContainer(_zarr().open_group(path, mode=self.mode))
            if self.mode == "r":
                self.handle = np.load(path, allow_pickle=False)
                return bsp.NPZBinsparseContainer(self.handle)
            return bsp.NPZBinsparseContainer({})
        except (OSError, zipfile.BadZipFile, ValueError) as e:
            raise InputError(f"cannot open as a binsparse {self.kind} container ({e})", path=path) from None

    def __exit__(self, *exc):
        if self.handle is not None:
            self.handle.close()


def _tensor(bsp, keys, values, shape, fill):
    """The binsparse tensor sptool writes: CVEC (1-D), COOR (2-D) or a root sparse level of rank n."""
    common = dict(shape=shape, number_of_stored_values=len(values), fill=True,
                  fill_value=np.asarray(fill, dtype=values.dtype)[()])
    if len(shape) == 1:
        return bsp.CVECVector(**common, indices_0=keys[0], values=values)
    if len(shape) == 2:
        return bsp.COORMatrix(**common, indices_0=keys[0], indices_1=keys[1], values=values)
    return bsp.CustomTensor(**common, level=bsp.SparseLevel(len(shape), bsp.ElementLevel(values), tuple(keys)))


def _encoded(values: np.ndarray) -> np.ndarray:
    """Values as the package stores them: bool as bint8 bytes, complex as interleaved (re, im)."""
    if values.dtype == np.bool_:
        return values.view(np.uint8)
    if values.dtype.kind == "c":
        return np.ascontiguousarray(values).view(np.float32 if values.dtype == np.complex64 else np.float64)
    return values


class _HDF5Appender:
    """An HDF5 binsparse file written batch by batch: the arrays are resizable datasets appended
    to, and the descriptor (the package's, for the same tensor) is written at the end, so the
    rows held at once are one batch's."""

    CHUNK = 1 << 16

    def __init__(self, path: str, meta: TensorMeta, value_dtype: np.dtype):
        import h5py

        self.file = h5py.File(path, "w")
        self.meta = meta
        self.value_dtype = value_dtype
        self.rows = 0
        K = meta.sparse_ndim
        self.index = [self.file.create_dataset(f"indices_{k}", shape=(0,), maxshape=(None,), dtype=np.int64,
                                               chunks=(self.CHUNK,)) for k in range(K)]
        stored = _encoded(np.empty(0, dtype=value_dtype)).dtype
        self.values = self.file.create_dataset("values", shape=(0,), maxshape=(None,), dtype=stored,
                                               chunks=(self.CHUNK,))
        self.maxes = np.full(K, -1, dtype=np.int64)

    def write(self, keys, values):
        n = keys.shape[1]
        if not n:
            return
        for k, ds in enumerate(self.index):
            ds.resize((self.rows + n,))
            ds[self.rows :] = keys[k]
        encoded = _encoded(np.asarray(values).astype(self.value_dtype, copy=False))
        width = len(encoded) // n
        self.values.resize(((self.rows + n) * width,))
        self.values[self.rows * width :] = encoded
        self.maxes = np.maximum(self.maxes, keys.max(axis=1))
        self.rows += n

    def resolve_shape(self, shape):
        self.meta = self.meta.with_(shape=tuple(shape))

    def close(self, bsp) -> tuple:
        shape = tuple(int(self.maxes[k]) + 1 if s is None else s for k, s in enumerate(self.meta.shape))
        K = len(shape)
        empty = _tensor(bsp, np.empty((K, 0), dtype=np.int64), np.empty(0, dtype=self.value_dtype), shape,
                        self.meta.fill_value)
        template = bsp.InMemoryBinsparseContainer()
        empty.serialize(template)
        header = dict(template.header, number_of_stored_values=self.rows)
        container = bsp.HDF5BinsparseContainer(self.file)
        container.write_buffer("fill_value", np.asarray([empty.fill_value]))  # as the package's serialize does
        container.data_types.update(header.pop("data_types"))
        container.write_header(header)
        self.file.close()
        return shape

    def abort(self):
        self.file.close()


class BinsparseWriter:
    """Writes one binsparse tensor from row-major input with repeats summed: HDF5 batch by batch
    (any size within --memory), Zarr and .npz gathered in memory (checked against --memory as
    the rows come) and written through the package."""

    needs_row_major = True

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        if dst == "-":
            raise UsageError("a binsparse container cannot be written to stdout; name the output")
        self.bsp = _package()
        self.kind = _kind_by_name(dst) or "hdf5"  # --to binsparse with another name: HDF5, the spec's own
        if self.kind == "zarr":
            _zarr()
        check_not_hybrid(meta, "binsparse")
        if meta.value_type in ("string", "binary"):
            raise UsageError(f"binsparse cannot hold {meta.value_type} values")
        self.notes = []
        if not (unique_claim is True and meta.sort_order == tuple(range(meta.sparse_ndim))):
            self.notes.append("input not marked canonical: sorted row-major and repeated coordinates summed first")
        if meta.value_type == "float16":
            self.notes.append("binsparse has no float16: values written as float32 (exactly)")
        if self.kind == "hdf5":
            self.target = AtomicTarget(dst, is_dir=False)
            value_dtype = np.dtype(np.float32) if meta.value_type == "float16" else meta.dtype
            self.sink = _HDF5Appender(self.target.tmp, meta, value_dtype)
        else:
            self.sink = GatheringWriter(dst, meta, opts, what=f"a binsparse {self.kind} container")
            self.target = AtomicTarget(dst, is_dir=self.kind == "zarr")

    def write(self, keys, values):
        self.sink.write(keys, values)

    def resolve_shape(self, shape):
        self.sink.resolve_shape(shape)

    def close(self):
        bsp = self.bsp
        if self.kind == "hdf5":
            self.shape = self.sink.close(bsp)
            self.target.commit()
            return
        keys, values, shape = self.sink.gathered()
        tensor = _tensor(bsp, keys, values, shape, self.sink.meta.fill_value)
        with _open_container(bsp, self.kind, self.target.tmp, "w") as container:
            tensor.serialize(container)
            if self.kind == "npz":
                with open(self.target.tmp, "wb") as f:
                    np.savez(f, **container.file)
        self.target.commit()
        self.shape = shape

    def abort(self):
        if self.kind == "hdf5":
            self.sink.abort()
        self.target.abort()
