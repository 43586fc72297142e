"""AnnData files: .h5ad (HDF5, through h5py: ``pip install 'sptool[anndata]'``) and AnnData .zarr
stores (through zarr), as anndata's on-disk specification lays them out; anndata itself is never
imported.

Reading goes through sptool.io's AnnData source, which every command uses too: X, or the matrix
``--key`` names (``layers/counts``, ``raw/X``, ``obsp/distances``, ``obsm/X_pca``), streamed in
blocks within --memory.  A .zarr input is AnnData when its root says ``encoding-type: anndata``
(and binsparse otherwise), and so is an HDF5 file of another name whose root says so.

Writing gives a file ``anndata.read_h5ad`` (or ``read_zarr``) reads back as the input: X as a CSR
matrix from row-major input with repeats summed (convert sorts it first within --memory when it is
not), its data and indices appended batch by batch and indptr as the rows complete; obs and var
as data frames with no columns and the index anndata gives by default ("0", "1", ...); and the
empty groups anndata writes (layers, obsm, obsp, varm, varp, uns).  Only a 2-D tensor of numbers
with fill value 0 is written.  A .zarr store is written with ``--to anndata`` (a bare .zarr output
stays binsparse), in Zarr format 2, as anndata writes by default.
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from ..format import TensorMeta
from ..io import AnnDataSource, AtomicTarget, anndata_h5py, anndata_zarr, check_dense_rows
from .common import Options, Reader, cast_or_fail, check_zero_fill, coerce_fill

# The spec's versions of what sptool writes, as anndata 0.8 to 0.12 write them.
ANNDATA_VERSION = ("anndata", "0.1.0")
CSR_VERSION = ("csr_matrix", "0.1.0")
DATAFRAME_VERSION = ("dataframe", "0.2.0")
STRINGS_VERSION = ("string-array", "0.2.0")
DICT_VERSION = ("dict", "0.1.0")
EMPTY_GROUPS = ("layers", "obsm", "obsp", "varm", "varp", "uns")
CHUNK = 1 << 16  # items per chunk of the datasets written (and names per write of an index)


def _encoding(kind: tuple[str, str]) -> dict:
    return {"encoding-type": kind[0], "encoding-version": kind[1]}


class AnnDataReader(Reader):
    """One matrix of an AnnData file as a converter's input: the source every command reads,
    its values cast when --value-type asks."""

    def __init__(self, path: str, opts: Options):
        if path == "-":
            raise UsageError("an AnnData file cannot be read from stdin (it needs random access); name it")
        self.name = path
        self.src = AnnDataSource(path, opts.key or "X")
        # Blocks as large as --memory allows: convert spends about a tenth less CPU on blocks of
        # a million entries than on the reader's default (docs/performance.md).
        self.src.reader.block_entries = None
        self.budget = opts.budget
        m = self.src.meta
        vt = opts.value_type or m.value_type
        if vt in ("string", "binary"):
            raise UsageError(f"{m.value_type} values cannot be converted to {vt}", path=path)
        if opts.shape is not None and tuple(opts.shape) != m.shape:
            raise UsageError(f"--shape {list(opts.shape)} contradicts the shape {list(m.shape)} of "
                             f"{self.src.reader.key}", path=path)
        fill = coerce_fill(0 if opts.fill_value is None else opts.fill_value, vt)
        self.cast = vt != m.value_type
        self.meta = m.with_(value_type=vt, fill_value=fill)
        self.unique_claim = True  # claimed and verified: the sink checks the order and repeats

    def batches(self):
        for keys, values in self.src.iter_arrays(budget=self.budget):
            if self.cast:
                values = cast_or_fail(values, self.meta.dtype, lambda r, o=self.rows_in: f"entry {o + r}", self.name)
            self.rows_in += keys.shape[1]
            yield keys, values
        self.meta = self.meta.with_(nnz=self.src.meta.nnz)

    @property
    def notes(self) -> list[str]:
        reader = self.src.reader
        line = "column" if reader.matrix.layout == "csc" else "row"
        notes = [f"{reader.key} ({reader.matrix.layout}) read"]
        if reader.unsorted:
            notes.append(f"indices of {reader.unsorted} {line}s sorted as read")
        if reader.summed:
            notes.append(f"{reader.summed} repeated entries summed")
        return notes

    def close(self):
        self.src.close()


class _HDF5Tree:
    """The groups and datasets of an .h5ad file being written, through h5py."""

    def __init__(self, path: str):
        self.h5py = anndata_h5py(path)
        self.file = self.h5py.File(path, "w")

    def group(self, name: str, attrs: dict):
        g = self.file if name == "/" else self.file.require_group(name)
        g.attrs.update(attrs)
        return g

    def growing(self, name: str, dtype) -> _Growing:
        return _Growing(self.file.create_dataset(name, shape=(0,), maxshape=(None,), dtype=dtype, chunks=(CHUNK,)))

    def strings(self, name: str, n: int, attrs: dict):
        ds = self.file.create_dataset(name, shape=(n,), dtype=self.h5py.string_dtype("utf-8"),
                                      chunks=(min(n, CHUNK),) if n else None)
        ds.attrs.update(attrs)
        return ds

    def set_attrs(self, name: str, attrs: dict):
        self.file[name].attrs.update(attrs)

    def close(self):
        self.file.close()


class _ZarrTree(_HDF5Tree):
    """The same through zarr: an AnnData .zarr store in Zarr format 2 (anndata's default)."""

    def __init__(self, path: str):
        self.zarr = anndata_zarr(path)
        self.file = self.zarr.open_group(path, mode="w", zarr_format=2)

    def group(self, name: str, attrs: dict):
        g = self.file if name == "/" else self.file.require_group(name)
        g.attrs.update({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in attrs.items()})
        return g

    def growing(self, name: str, dtype) -> _Growing:
        return _Growing(self.file.create_array(name, shape=(0,), chunks=(CHUNK,), dtype=dtype))

    def strings(self, name: str, n: int, attrs: dict):
        arr = self.file.create_array(name, shape=(n,), chunks=(min(max(n, 1), CHUNK),), dtype=str)
        arr.attrs.update(attrs)
        return arr

    def close(self):
        pass  # every write is on disk when it returns


class _Growing:
    """A one-dimensional dataset appended to (h5py's resizable, or zarr's)."""

    def __init__(self, ds):
        self.ds, self.n = ds, 0

    def append(self, arr: np.ndarray):
        if len(arr):
            self.ds.resize((self.n + len(arr),))
            self.ds[self.n:] = arr
            self.n += len(arr)


class AnnDataWriter:
    """A 2-D tensor as an AnnData file whose X is a CSR matrix: rows come sorted row-major with
    repeats summed (``needs_row_major``: convert's RowMajorReader), data and indices are appended
    as they come, indptr as rows complete; obs, var and the empty groups at the end, when the
    shape is final."""

    needs_row_major = True

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        if dst == "-":
            raise UsageError("an AnnData file cannot be written to stdout; name the output")
        if meta.ndim != 2 or meta.hybrid:
            raise UsageError(f"AnnData holds 2-D matrices (observations x variables); this tensor has shape "
                             f"{list(meta.shape)}" + (f" with {meta.sparse_ndim} sparse dimensions" if meta.hybrid
                                                      else "") + ": reshape or slice it to two dimensions first",
                             path=dst)
        if meta.value_type in ("string", "binary"):
            raise UsageError(f"AnnData's X holds numbers, not {meta.value_type} values", path=dst)
        check_zero_fill(meta, "h5ad")
        if meta.shape[0] is not None:
            check_dense_rows(meta.shape[0], 8, dst, "an AnnData file's X")  # a CSR pointer a row
        self.meta = meta
        self.zarr = dst.rstrip("/").lower().endswith(".zarr")
        (anndata_zarr if self.zarr else anndata_h5py)(dst)  # installed, before anything is made
        self.target = AtomicTarget(dst, is_dir=self.zarr)
        self.notes = []
        if not (unique_claim is True and meta.row_major):
            self.notes.append("input not marked canonical: sorted row-major and repeated coordinates summed first")
        try:
            self.tree = (_ZarrTree if self.zarr else _HDF5Tree)(self.target.tmp)
            self.tree.group("X", _encoding(CSR_VERSION))
            wide = meta.shape[1] is None or meta.shape[1] > np.iinfo(np.int32).max
            self.data = self.tree.growing("X/data", meta.dtype)
            self.indices = self.tree.growing("X/indices", np.int64 if wide else np.int32)
            many = meta.nnz is None or meta.nnz > np.iinfo(np.int32).max
            self.indptr = self.tree.growing("X/indptr", np.int64 if many else np.int32)
        except BaseException:
            self.abort()
            raise
        self.indptr.append(np.zeros(1, dtype=np.int64))
        self.rows_done = 0  # rows whose end pointer is written: indptr holds rows_done + 1 pointers

    def write(self, keys, values):
        rows = keys[0]
        if not len(rows):
            return
        self._pointers(rows)
        self.data.append(np.asarray(values, dtype=self.meta.dtype))
        self.indices.append(keys[1])

    def _pointers(self, rows: np.ndarray):
        """indptr of the rows this batch completes: each row up to its last row ends where the
        next row's entries begin."""
        last = int(rows[-1])
        for lo in range(self.rows_done, last, CHUNK):
            hi = min(lo + CHUNK, last)
            ends = np.searchsorted(rows, np.arange(lo, hi, dtype=np.int64), side="right") + self.data.n
            self.indptr.append(ends)
            self.rows_done = hi

    def _end_rows(self, upto: int, at: int):
        """Rows below ``upto`` not yet ended end at entry ``at`` (they hold no more entries)."""
        for lo in range(self.rows_done, upto, CHUNK):
            hi = min(lo + CHUNK, upto)
            self.indptr.append(np.full(hi - lo, at, dtype=np.int64))
            self.rows_done = hi

    def resolve_shape(self, shape):
        self.meta = self.meta.with_(shape=tuple(shape))

    def close(self):
        n_obs, n_vars = self.meta.shape
        self._end_rows(n_obs, self.data.n)
        tree = self.tree
        tree.set_attrs("X", {"shape": [n_obs, n_vars]})
        tree.group("/", _encoding(ANNDATA_VERSION))
        for axis, n in (("obs", n_obs), ("var", n_vars)):
            tree.group(axis, {"_index": "_index", "column-order": np.array([], dtype=np.float64),
                              **_encoding(DATAFRAME_VERSION)})
            names = tree.strings(f"{axis}/_index", n, _encoding(STRINGS_VERSION))
            for lo in range(0, n, CHUNK):
                names[lo:min(lo + CHUNK, n)] = np.arange(lo, min(lo + CHUNK, n)).astype(str).astype(object)
        for name in EMPTY_GROUPS:
            tree.group(name, _encoding(DICT_VERSION))
        tree.close()
        self.target.commit()
        self.shape = [n_obs, n_vars]

    def abort(self):
        tree = getattr(self, "tree", None)
        if tree is not None:
            tree.close()
        self.target.abort()
