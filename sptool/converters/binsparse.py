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
summed (the predefined formats hold sorted unique coordinates only).  HDF5 streams both ways:
output arrays are resizable datasets appended batch by batch (the descriptor is the package's
for the same tensor), and COO, CVEC, the custom root sparse level, CSR/CSC and DCSR/DCSC are
read in slices of the h5py datasets (a CSR's pointers held whole).  Everything else (Zarr,
.npz, other HDF5 layouts) goes through the package, which holds every array in memory: its
size is checked against --memory first.  Order, uniqueness and bounds are checked as the
entries are read.
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
from .._messages import out_of_bounds, out_of_order, repeated
from ..errors import DataError, InputError, ResourceError, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ..io import AtomicTarget, pointer_problem, row_bytes
from .common import Options, Reader, cast_or_fail, check_not_hybrid, coerce_fill
from .gather import GatheringWriter

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
                if len(ptr) != npos + 1:
                    raise DataError(f"pointers_to_{depth} holds {len(ptr)} pointers, not {npos + 1} (one per position "
                                    "and one more)", path=path)
                problem = pointer_problem(ptr, f"pointers_to_{depth}", first=0, last=n)
                if problem:
                    raise DataError(problem, path=path)
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


def _stored_dims(level) -> list[int]:
    """The level dimensions whose indices are stored (sparse levels'; dense levels store none)."""
    from binsparse import SparseLevel

    stored, depth = [], 0
    while getattr(level, "rank", 0):
        if isinstance(level, SparseLevel):
            stored.extend(range(depth, depth + level.rank))
        depth += level.rank
        level = level.level
    return stored


class _Whole:
    """Any format, parsed whole by the package: (level keys, values) in slices."""

    def __init__(self, bsp, container, desc: dict, shape: tuple, budget, path: str):
        nsv = desc["number_of_stored_values"]
        # Raw arrays, the parsed copies and the int64 coordinates, about.
        need = nsv * (24 * max(len(shape), 1) + 32)
        if need > budget.usable:
            raise ResourceError(
                f"this binsparse file is loaded whole; its {nsv} stored values need about {format_size(need)}, "
                f"more than the {format_size(budget.usable)} that --memory {format_size(budget.total)} leaves "
                "for data; raise --memory", path=path)
        try:
            tensor = bsp.BinsparseTensor.parse(container, alias=False)
        except (bsp.BinsparseParseError, ValueError, TypeError, KeyError) as e:
            raise DataError(f"not a valid binsparse file: {e}", path=path) from None
        self.transpose = list(tensor.transpose) if tensor.transpose is not None else list(range(len(shape)))
        self.keys, self.values = _coordinates(tensor.level, [shape[t] for t in self.transpose], path)
        self.stored = _stored_dims(tensor.level)
        self.fill = np.asarray(tensor.fill_value).item() if tensor.fill else None
        self.dtype = self.values.dtype
        self.n = len(self.values)

    def slice(self, a: int, b: int):
        return self.keys[:, a:b], self.values[a:b]

    def close(self):
        pass


_SPARSE_ROOT = {"COO": (2, None), "COOR": (2, None), "COOC": (2, [1, 0]), "CVEC": (1, None)}
_COMPRESSED = {"CSR": ("dense", None), "CSC": ("dense", [1, 0]), "DCSR": ("sparse", None),
               "DCSC": ("sparse", [1, 0])}


def _layout(desc: dict):
    """(outer, transpose) of the formats read in slices: outer None for one root sparse level of
    every dimension (COO, CVEC, custom), 'dense' / 'sparse' for CSR / DCSR (and their columns
    forms); None for the rest."""
    fmt, K = desc.get("format"), len(desc["shape"])
    if fmt in _SPARSE_ROOT and _SPARSE_ROOT[fmt][0] == K:
        return None, _SPARSE_ROOT[fmt][1] or list(range(K))
    if fmt in _COMPRESSED and K == 2:
        outer, transpose = _COMPRESSED[fmt]
        return outer, transpose or [0, 1]
    custom = desc.get("custom")
    if fmt == "custom" and isinstance(custom, dict) and custom.get("level") == {
            "level_desc": "sparse", "rank": K, "level": {"level_desc": "element"}}:
        transpose = custom.get("transpose")
        if transpose is None or sorted(transpose) == list(range(K)):
            return None, list(transpose or range(K))
    return False


_PLAIN = {"bint8": np.dtype(np.uint8), **{t: np.dtype(t) for t in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")}}


def _type_of(data_type, path: str, name: str) -> tuple[np.dtype, str]:
    """(stored dtype, wrapper: '', 'iso', 'complex' or 'bool') of a declared binsparse type."""
    if isinstance(data_type, str):
        for wrapper in ("iso", "complex"):
            if data_type.startswith(wrapper + "[") and data_type.endswith("]"):
                inner, sub = _type_of(data_type[len(wrapper) + 1 : -1], path, name)
                if wrapper == "complex" and inner.kind != "f" or sub:
                    break
                return inner, wrapper
        if data_type in _PLAIN:
            return _PLAIN[data_type], "bool" if data_type == "bint8" else ""
    raise DataError(f"{name} has the data type {data_type!r}, which binsparse does not define", path=path)


class _HDF5Slices:
    """COO-like and CSR-like formats in an HDF5 file, read in slices of h5py datasets: the rows
    held at once are one batch's (plus a CSR's pointers)."""

    def __init__(self, file, desc: dict, outer, transpose, budget, path: str):
        self.file, self.path = file, path
        shape = desc["shape"]
        self.transpose = transpose
        n = self.n = desc["number_of_stored_values"]
        types = desc.get("data_types")
        if not isinstance(types, dict):
            raise DataError("the descriptor has no data_types", path=path)
        self.outer = outer
        K = len(shape)
        names = ["indices_1"] if outer else [f"indices_{k}" for k in range(K)]
        self.indices = [self._dataset(name, types, n) for name in names]
        stored, self.wrapper = _type_of(types.get("values"), path, "values")
        self.raw_values = self._dataset("values", types, 1 if self.wrapper == "iso" else
                                        2 * n if self.wrapper == "complex" else n)
        self.dtype = np.dtype(bool) if self.wrapper == "bool" else \
            np.dtype(np.complex64 if stored == np.float32 else np.complex128) if self.wrapper == "complex" else stored
        self.fill = self._fill(types) if desc.get("fill") is True else None
        self.stored = list(range(K)) if not outer else [1] if outer == "dense" else [0, 1]
        if outer:
            major = shape[transpose[0]]
            m = len(self.file["indices_0"]) if outer == "sparse" else major
            if 16 * (m + 1) > budget.usable:
                raise ResourceError(f"the {m + 1} pointers are held whole and need more than --memory allows",
                                    path=path)
            self.pointers = self._dataset("pointers_to_1", types, m + 1)[...].astype(np.int64)
            problem = pointer_problem(self.pointers, "pointers_to_1", first=0, last=n)
            if problem:
                raise DataError(f"{problem} (a pointer array for {m} positions)", path=path)
            self.outer_index = self._dataset("indices_0", types, m)[...].astype(np.int64) \
                if outer == "sparse" else None

    def _dataset(self, name: str, types: dict, length: int):
        if name not in types or name not in self.file:
            raise DataError(f"the array {name} is missing", path=self.path)
        if name not in ("values", "fill_value"):
            dtype, wrapper = _type_of(types[name], self.path, name)
            if wrapper or dtype.kind not in "iu":
                raise DataError(f"{name} has the data type {types[name]!r}; indices are integers", path=self.path)
        ds = self.file[name]
        if ds.ndim != 1 or len(ds) != length:
            raise DataError(f"the array {name} has shape {list(ds.shape)}, expected [{length}]", path=self.path)
        return ds

    def _fill(self, types: dict):
        stored, wrapper = _type_of(types.get("fill_value"), self.path, "fill_value")
        raw = self._dataset("fill_value", types, 2 if wrapper == "complex" else 1)[...]
        return self._decode(np.asarray(raw, dtype=stored), wrapper, 1)[0].item()

    @staticmethod
    def _decode(raw: np.ndarray, wrapper: str, n: int) -> np.ndarray:
        if wrapper == "iso":
            return np.broadcast_to(raw[:1], (n,))
        if wrapper == "complex":
            return np.ascontiguousarray(raw).view(np.complex64 if raw.dtype == np.float32 else np.complex128)
        return raw.astype(bool) if wrapper == "bool" else raw

    def slice(self, a: int, b: int):
        inner = [np.asarray(ds[a:b], dtype=np.int64) for ds in self.indices]
        if self.outer:
            parent = np.searchsorted(self.pointers, np.arange(a, b, dtype=np.int64), side="right") - 1
            outer = parent if self.outer_index is None else self.outer_index[parent]
            keys = np.stack([outer, inner[0]])
        else:
            keys = np.stack(inner) if inner else np.empty((0, b - a), dtype=np.int64)
        if self.wrapper == "iso":
            raw = self.raw_values[0:1]
        elif self.wrapper == "complex":
            raw = self.raw_values[2 * a : 2 * b]
        else:
            raw = self.raw_values[a:b]
        return keys, self._decode(raw, self.wrapper, b - a)

    def close(self):
        self.file.close()


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
        self.budget = opts.budget
        opened = _open_container(bsp, kind, path, "r")
        container = opened.__enter__()
        try:
            desc = _raw_descriptor(container, kind, path)
            self.base = _check_descriptor(desc, path)
            if re.fullmatch(r"\d+\.\d+", str(desc.get("version", ""))):
                # The spec writes "0.1"; the package accepts only SemVer ("0.1.0").
                desc = {**desc, "version": f"{desc['version']}.0"}
            container._read_header = lambda: desc  # the package parses the descriptor sptool checked
            shape = tuple(int(s) for s in desc["shape"])
            layout = _layout(desc) if kind == "hdf5" else False
            if layout is False:
                self.src = _Whole(bsp, container, desc, shape, opts.budget, path)
                opened.__exit__()
            else:
                self.src = _HDF5Slices(opened.handle, desc, *layout, opts.budget, path)
        except BaseException:
            opened.__exit__()
            raise
        self.format = desc.get("format")
        src = self.src
        if src.dtype.kind not in "biufc":
            raise DataError(f"values of dtype {src.dtype} are not numeric", path=path)
        vt = opts.value_type or value_type_of_dtype(src.dtype)
        fill = src.fill if opts.fill_value is None else opts.fill_value
        # The format's levels hold unique tuples sorted within each parent, so the entries come in
        # lexicographic order of the level dimensions: checked as they are read, and claimed.
        self.meta = TensorMeta(shape=shape, sparse_ndim=len(shape), value_type=vt, fill_value=coerce_fill(fill, vt),
                               nnz=src.n, sort_order=tuple(src.transpose))
        self.unique_claim = True
        self.notes = [f"{self.format} read, indices one-based"] if self.base else []
        if opts.shape is not None and tuple(opts.shape) != shape:
            raise UsageError(f"--shape {list(opts.shape)} contradicts the shape {list(shape)} in the file", path=path)

    def batches(self):
        src, meta, path = self.src, self.meta, self.name
        order = np.asarray(src.transpose, dtype=np.int64)
        bounds = np.asarray(meta.shape, dtype=np.int64)
        step = self.budget.rows(row_bytes(meta))
        prev = None
        for a in range(0, src.n, step):
            level_keys, values = src.slice(a, min(a + step, src.n))
            if self.base:
                if src.stored and len(values) and level_keys[src.stored].min() < 1:
                    raise DataError("index_base is 1 but an index is 0", path=path)
                level_keys = level_keys.copy()
                level_keys[src.stored] -= 1
            keys = np.empty_like(level_keys)
            keys[src.transpose] = level_keys  # level dimension k is dimension transpose[k] of the tensor
            at, kind = _kernels.first_order_violation(keys, order, True, prev)
            if at >= 0:
                say = repeated if kind == _kernels.REPEATED else out_of_order
                raise DataError(f"{say(a + at, keys, at)} (a binsparse {self.format} holds sorted, unique "
                                "coordinates)", path=path)
            row, _ = _kernels.columns_out_of_bounds(list(keys), bounds)
            if row >= 0:
                raise DataError(out_of_bounds(a + row, keys, row, meta.shape), path=path)
            prev = keys[:, -1:]
            values = cast_or_fail(values, meta.dtype, lambda r, s=a: f"entry {s + r}", path)
            self.rows_in += keys.shape[1]
            yield keys, values

    def close(self):
        self.src.close()


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
