"""AnnData files as tensor sources: one matrix of an .h5ad file (HDF5, through h5py) or of an
AnnData .zarr store (through zarr), read in blocks as anndata's on-disk specification lays it out.

A matrix is an element whose ``encoding-type`` is ``csr_matrix`` or ``csc_matrix`` (a group with a
``shape`` attribute and the datasets ``data``, ``indices`` and ``indptr``) or ``array`` (a
dataset).  Files anndata wrote before 0.7 carry no encoding-type: their sparse groups say
``h5sparse_format`` / ``h5sparse_shape``, their raw matrix is ``raw.X``, and the neighbour graphs
lie under ``uns/neighbors``, which anndata moves to ``obsp`` as it reads them: such matrices are
found under the keys anndata gives them today (``raw/X``, ``obsp/distances``).

CSR streams by blocks of whole rows, found through windows of indptr; CSC by blocks of columns;
a dense array by blocks of rows, its zeros dropped.  What is held at once is one block and one
window of pointers, whatever the file's size.  Entries come in the order the layout gives
(row-major for CSR and arrays, column-major for CSC), each block checked as it is read: indptr
never decreasing and within the data, indices within the shape.  Indices unsorted within a row
(files scanpy writes have them) are sorted row by row, and an index repeated within a row is
summed into one entry (scipy's ``sum_duplicates``, what anndata's matrix means), so the order and
uniqueness claimed hold.  h5py and zarr are imported only when a file is opened."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, InputError, ResourceError, UsageError
from ..format import TensorMeta, value_type_of_dtype
from ._pointers import pointer_problem
from ._url import is_remote

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
INSTALL = "AnnData files need h5py: pip install 'sptool[anndata]'"
ZARR_INSTALL = "an AnnData .zarr store needs the zarr package: pip install zarr"
ENCODING, ENCODING_VERSION = "encoding-type", "encoding-version"
SPARSE_ENCODINGS = {"csr_matrix": "csr", "csc_matrix": "csc"}
# The groups of an AnnData object that hold matrices, one per key; raw holds X and varm.
MAPPINGS = ("layers", "obsm", "varm", "obsp", "varp")
# Before 0.7: the key anndata reads a matrix under today -> where the old file keeps it.
LEGACY_KEYS = {"raw/X": "raw.X", "obsp/distances": "uns/neighbors/distances",
               "obsp/connectivities": "uns/neighbors/connectivities"}
# Pointers read at once while blocks are cut: the most a window holds, in bytes.
POINTER_WINDOW_BYTES = 8 << 20
# The most entries a block holds by default, whatever --memory allows: HDF5 slices of more read
# no faster, and a command holds about 100 bytes an entry of a block in its copies, so larger
# blocks mostly raise the peak (docs/performance.md).  A reader may lift it (MatrixReader.block_entries).
BLOCK_ENTRIES = 1 << 17
# HDF5's chunk cache for each dataset of an .h5ad file.
CHUNK_CACHE_BYTES = 1 << 20


def anndata_h5py(path: str | None = None):
    """The h5py module, or a UsageError (naming ``path``) that says how to install it."""
    try:
        import h5py
    except ImportError:
        raise UsageError(INSTALL, path=path) from None
    return h5py


def anndata_zarr(path: str | None = None):
    """The zarr module, or a UsageError (naming ``path``) that says how to install it."""
    try:
        import zarr
    except ImportError:
        raise UsageError(ZARR_INSTALL, path=path) from None
    return zarr


def _text(value) -> str | None:
    """An attribute as text (h5py gives str, bytes or a 0-d array), None when it is not one."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value) if isinstance(value, str) else None


def store_root_attrs(path: str) -> dict | None:
    """The root attributes of a Zarr store (format 2's .zattrs or format 3's zarr.json), read as
    JSON without zarr; None when ``path`` is no Zarr store."""
    v2, v3 = os.path.join(path, ".zattrs"), os.path.join(path, "zarr.json")
    try:
        if os.path.isfile(v3):
            with open(v3, "rb") as f:
                doc = json.load(f)
            return doc.get("attributes") or {} if isinstance(doc, dict) else None
        if os.path.isfile(v2) or os.path.isfile(os.path.join(path, ".zgroup")):
            if not os.path.isfile(v2):
                return {}
            with open(v2, "rb") as f:
                doc = json.load(f)
            return doc if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None
    return None


def is_anndata_store(path: str) -> bool:
    """Whether the directory ``path`` is a Zarr store whose root says encoding-type anndata."""
    attrs = store_root_attrs(path)
    return attrs is not None and attrs.get(ENCODING) == "anndata"


def is_anndata(path: str) -> bool:
    """Whether ``path`` is an AnnData .zarr store or an HDF5 file whose root says encoding-type
    anndata (whatever its name; False when h5py is not installed to tell)."""
    if is_remote(path):
        return False
    if os.path.isdir(path):
        return is_anndata_store(path)
    try:
        with open(path, "rb") as f:
            if f.read(len(HDF5_MAGIC)) != HDF5_MAGIC:
                return False
        import h5py
    except (OSError, ImportError):
        return False
    try:
        with h5py.File(path, "r") as f:
            return _text(f.attrs.get(ENCODING)) == "anndata"
    except OSError:
        return False


def _is_array(node) -> bool:
    return hasattr(node, "dtype") and hasattr(node, "shape")


def _child(group, name: str):
    """``group[name]`` for a path of names, or None when a part is missing (or not a group).  A
    name of a field of a compound dataset (obsm and varm before anndata 0.7 were one such
    dataset, each matrix a field) gives that field."""
    node = group
    for part in name.strip("/").split("/"):
        if _is_array(node) and node.dtype.names is not None and part in node.dtype.names:
            node = _Field(node, part)
            continue
        if _is_array(node) or not part or part not in node:
            return None
        node = node[part]
    return node


class _Field:
    """One field of a compound HDF5 dataset, sliced as a dataset of its own."""

    attrs: dict = {}

    def __init__(self, ds, name: str):
        self.ds, self.name = ds, name
        base = ds.dtype.fields[name][0]
        self.dtype = base.base
        self.shape = tuple(ds.shape) + base.shape
        self.ndim = len(self.shape)

    def __getitem__(self, item):
        return self.ds.fields(self.name)[item]


@dataclass
class Matrix:
    """One matrix of an AnnData file: its key (as anndata names it today), its layout ('csr',
    'csc' or 'dense'), shape, stored entries (a sparse matrix's; None for a dense one), the dtype
    of its values and the element it is stored in (and where, for a file of before 0.7)."""

    key: str
    layout: str
    shape: tuple
    dtype: np.dtype
    nnz: int | None
    node: object
    stored_at: str
    encoding: str

    def describe(self) -> dict:
        try:
            vt = value_type_of_dtype(self.dtype)
        except DataError:
            vt = str(self.dtype)
        return {"key": self.key, "layout": self.layout, "shape": list(self.shape), "nnz": self.nnz,
                "value_type": vt, "encoding": self.encoding,
                **({"stored_at": self.stored_at} if self.stored_at != self.key else {})}


class AnnDataFile:
    """An AnnData file or store opened for reading its matrices (h5py or zarr objects, which read
    only what is sliced)."""

    def __init__(self, path: str):
        if is_remote(path):
            raise UsageError("AnnData files are read through local files only (a local path or a file:// URL)",
                             path=path)
        self.path = path
        self.kind = "zarr" if os.path.isdir(path) else "hdf5"
        if self.kind == "zarr":
            zarr = anndata_zarr(path)
            try:
                self.root = zarr.open_group(path, mode="r")
            except Exception as e:  # zarr raises its own errors for a broken store
                raise InputError(f"cannot open as a Zarr store ({_short(e)})", path=path) from None
            self._handle = None
        else:
            h5py = anndata_h5py(path)
            try:
                # Blocks are read in order, so HDF5's chunk cache only needs the chunk a block
                # ends in: h5py's default of 8 MiB a dataset held 16 MiB of the command's peak.
                self._handle = self.root = h5py.File(path, "r", rdcc_nbytes=CHUNK_CACHE_BYTES)
            except OSError as e:
                raise InputError(f"cannot open as HDF5 ({_short(e)})", path=path) from None
        try:
            self._check_root()
        except BaseException:
            self.close()
            raise

    def _check_root(self):
        encoding = _text(self.root.attrs.get(ENCODING))
        self.legacy = encoding is None
        if encoding == "anndata" or (self.legacy and ("X" in self.root or "obs" in self.root)):
            return
        if "binsparse" in self.root.attrs:
            raise InputError("a binsparse file, not AnnData: convert it first (sptool convert FILE -o FILE.parquet)",
                             path=self.path)
        found = f"encoding-type {encoding!r}" if encoding else "no encoding-type and no X"
        raise InputError(f"not an AnnData file: its root has {found}", path=self.path)

    def close(self):
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    # -- finding matrices ---------------------------------------------------------------------
    def matrix(self, key: str) -> Matrix:
        """The matrix ``key`` names (X, layers/counts, raw/X, obsm/X_pca, ...): a DataError naming
        the file and the key when it is not there or not a matrix."""
        key = key.strip("/")
        if not key:
            raise UsageError("--key names a matrix of the file, such as X or layers/counts", path=self.path)
        where = self._stored_at(key)
        if where is None:
            known = ", ".join(m.key for m in self.matrices()) or "none"
            raise DataError(f"no matrix {key!r} in the file (its matrices: {known})", path=self.path)
        return self._element(key, where)

    def _find(self, where: str):
        return _child(self.root, where)

    def _stored_at(self, key: str) -> str | None:
        """Where the file keeps ``key``: the key itself, or for a file of before 0.7 its old place
        (anndata moves uns/neighbors' graphs to obsp, overriding, as the file is read)."""
        legacy = LEGACY_KEYS.get(key)
        if legacy is not None and self._find(legacy) is not None:
            if key.startswith("obsp/") and len(_shape_of(self._find(legacy))) != 2:
                return key if self._find(key) is not None else None
            return legacy
        return key if self._find(key) is not None else None

    def _element(self, key: str, where: str) -> Matrix:
        node = self._find(where)
        layout, encoding = self._layout(node, key)
        if layout == "dense":
            return Matrix(key, "dense", tuple(int(s) for s in node.shape), node.dtype, None, node, where, encoding)
        shape = self._sparse_shape(node, key)
        for name in ("data", "indices", "indptr"):
            if name not in node or not _is_array(node[name]):
                raise DataError(f"{key}: the {encoding} group has no dataset {name!r}", path=self.path)
        data = node["data"]
        return Matrix(key, layout, shape, data.dtype, int(data.shape[0]) if data.ndim == 1 else -1, node, where,
                      encoding)

    def _layout(self, node, key: str) -> tuple[str, str]:
        """('csr' | 'csc' | 'dense', the encoding as the file names it) of a matrix element."""
        attrs = node.attrs
        encoding = _text(attrs.get(ENCODING))
        if encoding is None and "h5sparse_format" in attrs:
            fmt = _text(attrs["h5sparse_format"])
            if fmt in ("csr", "csc"):
                return fmt, f"h5sparse_format {fmt}"
            raise DataError(f"{key}: h5sparse_format {fmt!r} is not csr or csc", path=self.path)
        if encoding in SPARSE_ENCODINGS:
            return SPARSE_ENCODINGS[encoding], encoding
        if _is_array(node) and (encoding == "array" or (encoding is None and self.legacy)):
            if node.dtype.names is not None or node.dtype.kind not in "biufc":
                raise DataError(f"{key}: a dataset of dtype {node.dtype}, not a numeric matrix", path=self.path)
            if node.ndim < 1:
                raise DataError(f"{key}: a scalar, not a matrix", path=self.path)
            return "dense", encoding or "dataset"
        if encoding is None and not _is_array(node):
            raise DataError(f"{key}: a group with no encoding-type (nor h5sparse_format): not a matrix",
                            path=self.path)
        raise DataError(f"{key}: encoding-type {encoding or 'none'!r} is not a matrix (csr_matrix, csc_matrix "
                        "or array)", path=self.path)

    def _sparse_shape(self, node, key: str) -> tuple:
        attrs = node.attrs
        raw = attrs.get("shape", attrs.get("h5sparse_shape"))
        if raw is None:
            raise DataError(f"{key}: the sparse group has no 'shape' attribute", path=self.path)
        shape = np.asarray(raw).reshape(-1)
        if len(shape) != 2 or shape.dtype.kind not in "iu" or np.any(shape < 0):
            raise DataError(f"{key}: the 'shape' attribute is {shape.tolist()}, not two non-negative integers",
                            path=self.path)
        return int(shape[0]), int(shape[1])

    def matrices(self) -> list[Matrix]:
        """Every matrix of the file, sparse or dense, under the keys anndata gives them: X, layers,
        obsm, varm, obsp, varp, raw/X and raw/varm (elements that are not matrices, such as data
        frames in obsm, are left out)."""
        keys = ["X"]
        for mapping in MAPPINGS:
            group = self._find(mapping)
            if group is not None:
                names = group.dtype.names or () if _is_array(group) else group
                keys += [f"{mapping}/{name}" for name in names]
        if self.legacy:
            neighbours = self._find("uns/neighbors")
            if neighbours is not None and not _is_array(neighbours):
                keys += [k for k in ("obsp/distances", "obsp/connectivities")
                         if k.split("/")[1] in neighbours and k not in keys]
        keys.append("raw/X")
        for raw_varm in ("raw/varm", "raw.varm"):
            group = self._find(raw_varm)
            if group is not None and not _is_array(group):
                keys += [f"raw/varm/{name}" for name in group]
        found = []
        for key in keys:
            where = self._stored_at(key) or (key.replace("raw/varm", "raw.varm") if key.startswith("raw/varm/")
                                             else None)
            if where is None or self._find(where) is None:
                continue
            try:
                found.append(self._element(key, where))
            except DataError:
                continue  # not a matrix (a data frame in obsm, a string array)
        return found


def _shape_of(node) -> tuple:
    if _is_array(node):
        return tuple(node.shape)
    raw = node.attrs.get("shape", node.attrs.get("h5sparse_shape"))
    return tuple(np.asarray(raw).reshape(-1)) if raw is not None else ()


def _short(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__




class MatrixReader:
    """One matrix of an AnnData file, read in blocks: ``meta`` up front (a dense array's nnz is
    known only once it has been read, as are fewer entries for a sparse one whose repeated
    indices were summed), then ``blocks`` of (keys (K, n) int64, values).  ``unsorted`` and
    ``summed`` count, once read, the rows (CSC: columns) whose indices came unsorted and the
    entries summed into another at the same index."""

    def __init__(self, path: str, key: str = "X"):
        self.path = path
        self.file = AnnDataFile(path)
        try:
            self.matrix = self.file.matrix(key)
            self.key = self.matrix.key
            self.dtype = self._value_dtype()
            if self.matrix.layout != "dense":
                self._check_sparse()
            self.meta = self._meta()
        except BaseException:
            self.file.close()
            raise
        self.unsorted = self.summed = 0
        self.block_entries: int | None = BLOCK_ENTRIES  # None: blocks as large as the step asked

    def close(self):
        self.file.close()

    def fail(self, message: str, code: str = "E_READ_FAILED"):
        """A DataError naming the file, the key and ``message``; ``code`` is the validate code
        of formats/SPEC.md it reports as."""
        error = DataError(f"{self.key}: {message}", path=self.path)
        error.code = code
        raise error

    def _value_dtype(self) -> np.dtype:
        m = self.matrix
        dtype = m.dtype.newbyteorder("=") if m.dtype.byteorder not in "=|" else m.dtype
        if dtype.names is not None or dtype.kind not in "biufc":
            self.fail(f"values of dtype {m.dtype} are not numbers")
        try:
            value_type_of_dtype(dtype)
        except DataError:
            self.fail(f"values of dtype {m.dtype} have no sptool value type")
        return dtype

    def _meta(self) -> TensorMeta:
        m = self.matrix
        order = (1, 0) if m.layout == "csc" else tuple(range(len(m.shape)))
        return TensorMeta(shape=m.shape, sparse_ndim=len(m.shape), value_type=value_type_of_dtype(self.dtype),
                          nnz=m.nnz, sort_order=order, unique=True)

    def _check_sparse(self):
        """The shapes of the three datasets agree with each other and with the shape attribute,
        and indptr starts at 0 and ends at the data's length (read: its two ends only)."""
        m = self.matrix
        node = m.node
        data, indices, indptr = node["data"], node["indices"], node["indptr"]
        # Looked up once: h5py takes about a millisecond to find a dataset in its group, per block.
        self._datasets = {"data": data, "indices": indices, "indptr": indptr}
        for name, ds in (("data", data), ("indices", indices), ("indptr", indptr)):
            if ds.ndim != 1:
                self.fail(f"{name} has shape {list(ds.shape)}, not one dimension")
        for name, ds in (("indices", indices), ("indptr", indptr)):
            if ds.dtype.kind not in "iu":
                self.fail(f"{name} has dtype {ds.dtype}, not integers")
        nnz = m.nnz
        if indices.shape[0] != nnz:
            self.fail(f"indices holds {indices.shape[0]} entries but data holds {nnz}: one of them is cut short")
        major = m.shape[0] if m.layout == "csr" else m.shape[1]
        if indptr.shape[0] != major + 1:
            self.fail(f"indptr holds {indptr.shape[0]} pointers, but a {m.layout} matrix of shape {list(m.shape)} "
                      f"has {major + 1}")
        first = int(self._read(indptr, 0, 1, "indptr")[0])
        if first != 0:
            self.fail(f"indptr[0] = {first}, not 0")
        last = int(self._read(indptr, major, major + 1, "indptr")[0])
        if last != nnz:
            self.fail(f"indptr[{major}] = {last}, but data holds {nnz} entries: indptr ends at the data's length",
                      "E_NNZ_MISMATCH")

    def _read(self, ds, a: int, b: int, name: str) -> np.ndarray:
        """``ds[a:b]`` in native byte order; a read that fails (a damaged or cut-off file) is an
        error naming the dataset and the slice."""
        try:
            arr = np.asarray(ds[a:b])
        except Exception as e:  # h5py and zarr raise OSError, KeyError, RuntimeError, their own errors
            self.fail(f"cannot read {name}[{a}:{b}] ({_short(e)})")
        if len(arr) != b - a:
            self.fail(f"{name}[{a}:{b}] gave {len(arr)} items: the dataset is cut short")
        return arr if arr.dtype.byteorder in "=|" else arr.astype(arr.dtype.newbyteorder("="))

    # -- blocks --------------------------------------------------------------------------------
    def blocks(self, step: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(keys, values) in blocks of about ``step`` entries (whole rows of a CSR matrix, whole
        columns of a CSC one, rows of a dense array); the meta's nnz is final after the last."""
        emitted = 0
        blocks = self._dense_blocks(self._capped(step)) if self.matrix.layout == "dense" else self._sparse_blocks(step)
        for keys, values in blocks:
            emitted += keys.shape[1]
            yield keys, values
        self.meta = self.meta.with_(nnz=emitted)

    def _capped(self, step: int) -> int:
        return step if self.block_entries is None else min(step, self.block_entries)

    def _dense_blocks(self, step: int):
        ds, shape = self.matrix.node, self.matrix.shape
        per_row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        rows = max(1, step // max(per_row, 1))
        for r0 in range(0, shape[0] if per_row else 0, rows):
            block = self._read(ds, r0, min(r0 + rows, shape[0]), "the array")
            where = np.nonzero(block)
            keys = np.empty((len(shape), len(where[0])), dtype=np.int64)
            for k, idx in enumerate(where):
                keys[k] = idx
            keys[0] += r0
            yield keys, block[where].astype(self.dtype, copy=False)

    def _sparse_blocks(self, step: int):
        """Whole major positions (rows of CSR, columns of CSC) of about ``step`` entries each (at
        most ``block_entries``), cut through windows of indptr; a position of more than four
        steps' entries is read in slices (its indices must then come sorted: sorting them would
        hold it whole)."""
        m = self.matrix
        indptr = self._datasets["indptr"]
        major = m.shape[0] if m.layout == "csr" else m.shape[1]
        whole, step = 4 * step, self._capped(step)
        window = max(step, 4096, 1)
        for w0 in range(0, major, window):
            w1 = min(w0 + window, major)
            ptr = self._read(indptr, w0, w1 + 1, "indptr").astype(np.int64, copy=False)
            problem = pointer_problem(ptr, "indptr", offset=w0)
            if problem:
                self.fail(problem)
            i = 0
            while i < w1 - w0:
                j = int(np.searchsorted(ptr, ptr[i] + step, side="right")) - 1
                j = min(max(j, i + 1), w1 - w0)
                if j == i + 1 and ptr[j] - ptr[i] > whole:
                    yield from self._long_line(w0 + i, int(ptr[i]), int(ptr[j]), step)
                else:
                    yield from self._block(w0 + i, ptr[i:j + 1])
                i = j

    def _entries(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(minor indices as stored, values) of entries [a, b), the indices checked within the shape
        (they become int64 as they are copied into the keys)."""
        m = self.matrix
        minor_extent = m.shape[1] if m.layout == "csr" else m.shape[0]
        minor = self._read(self._datasets["indices"], a, b, "indices")
        values = self._read(self._datasets["data"], a, b, "data")
        if b > a:
            lo, hi = minor.min(), minor.max()
            if lo < 0 or hi >= minor_extent:
                at = int(np.argmax((minor < 0) | (minor >= minor_extent)))
                self.fail(f"indices[{a + at}] = {minor[at]} is outside the shape {list(m.shape)}: a {m.layout} "
                          f"matrix's indices lie in [0, {minor_extent})", "E_INDEX_OUT_OF_BOUNDS")
        return minor, values

    def _keys(self, major: np.ndarray, minor: np.ndarray) -> np.ndarray:
        keys = np.empty((2, len(major)), dtype=np.int64)
        keys[0 if self.matrix.layout == "csr" else 1] = major
        keys[1 if self.matrix.layout == "csr" else 0] = minor
        return keys

    def _block(self, start: int, ptr: np.ndarray):
        """The entries of major positions start, start + 1, ... whose pointers are ``ptr``,
        sorted within each position where they are not, repeats summed."""
        a, b = int(ptr[0]), int(ptr[-1])
        minor, values = self._entries(a, b)
        major = np.repeat(np.arange(start, start + len(ptr) - 1, dtype=np.int64), np.diff(ptr))
        rising = minor[1:] > minor[:-1]
        rising[ptr[1:-1][(ptr[1:-1] > a) & (ptr[1:-1] < b)] - a - 1] = True  # a new position starts
        if not rising.all():
            major, minor, values = self._canonical(major, minor, values, np.flatnonzero(~rising) + 1)
        yield self._keys(major, minor), values

    def _canonical(self, major, minor, values, stalled):
        """Entries sorted by (major, minor) within the positions holding an index at ``stalled``
        not above the one before it (only those are sorted), then an index repeated within a
        position summed into one entry."""
        fallen = stalled[minor[stalled] < minor[stalled - 1]]
        if len(fallen):
            minor = minor if minor.flags.writeable else minor.copy()
            values = values if values.flags.writeable else values.copy()
            lines = np.unique(major[fallen])
            self.unsorted += len(lines)
            at = np.flatnonzero(np.isin(major, lines))  # those positions' entries, each a run
            order = at[np.lexsort((minor[at], major[at]))]
            minor[at], values[at] = minor[order], values[order]
        repeat = (major[1:] == major[:-1]) & (minor[1:] == minor[:-1])
        if repeat.any():
            starts = np.flatnonzero(np.concatenate([[True], ~repeat]))
            self.summed += len(major) - len(starts)
            values = np.add.reduceat(values, starts).astype(values.dtype, copy=False)
            major, minor = major[starts], minor[starts]
        return major, minor, values

    def _long_line(self, position: int, a: int, b: int, step: int):
        """One major position of more entries than a block holds, in slices: its indices must be
        strictly increasing across them."""
        last = -1
        for s in range(a, b, step):
            minor, values = self._entries(s, min(s + step, b))
            rising = np.concatenate([[minor[0] > last], minor[1:] > minor[:-1]])
            if not rising.all():
                at = s + int(np.argmin(rising))
                line = "row" if self.matrix.layout == "csr" else "column"
                raise ResourceError(f"{self.key}: {line} {position} holds {b - a} entries whose indices are not "
                                    f"increasing (indices[{at}]); sorting them would hold more than --memory allows: "
                                    "raise --memory", path=self.path)
            last = int(minor[-1])
            yield self._keys(np.full(len(minor), position, dtype=np.int64), minor), values
