"""Dense .npy arrays on disk: opened as read-only memory maps (``open_npy``), written as an
output (``DenseSink``: sparse rows scattered into a memory map of the output's temporary, or
written block by block with pwrite when they come in row-major order; ``GrowingNpy``: a 1-D array
whose length is known only at the end), checked against the free disk first, and their pages
given back to the OS as they pass (``release``)."""

from __future__ import annotations

import math
import mmap
import os
import shutil
from tokenize import TokenError
from typing import NamedTuple

import numpy as np

from .. import _kernels
from .._memory import Budget, format_size
from .._messages import out_of_bounds
from ..errors import DataError, InputError, ResourceError, UsageError
from ..format import INT64_MAX, TensorMeta
from ._arrays import batch_keys, batch_values
from ._atomic import AtomicTarget
from ._scratch import scratch_dir
from ._url import is_remote, local_only

_COMPILED = {np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64, np.complex64, np.complex128,
)}


def is_zero(value) -> bool:
    try:
        return value == 0 and not (isinstance(value, float) and math.copysign(1.0, value) < 0)
    except TypeError:
        return False


def cell_offsets(keys: np.ndarray, meta: TensorMeta, seen: int, path: str | None = None) -> np.ndarray:
    """The row-major cell of each row's sparse coordinate; an index outside the shape is an
    error naming the row (``seen`` rows came before this batch) and the input ``path``."""
    shape = np.asarray(meta.shape[: meta.sparse_ndim], dtype=np.int64)
    offsets = np.empty(keys.shape[1], dtype=np.int64)
    try:
        _kernels.linear_offsets(keys, shape, offsets)  # checks the bounds as it goes
    except IndexError:
        row, _ = _kernels.first_out_of_bounds(keys, shape)  # the first row outside, for the message
        raise DataError(out_of_bounds(seen + row, keys, row, meta.shape[: meta.sparse_ndim]), path=path) from None
    return offsets


class DenseScatter:
    """Accumulates batches of rows into ``out`` (shaped like the tensor), by the format's rules.

    Duplicates sum (OR for bool); cells no row touches end up as ``fill``.  ``out`` must be
    zero-filled on entry (a fresh np.zeros or .npy memory map).  For a non-zero fill the touched
    cells are tracked in ``touched`` (one byte a cell) and the rest are filled at ``finish``.
    """

    def __init__(self, out: np.ndarray, meta: TensorMeta, fill, touched: np.ndarray | None = None,
                 release_bytes: int | None = None, path: str | None = None):
        self.meta = meta
        self.path = path  # the input the rows come from, named by a bounds error
        self.out = out
        m = max(meta.block_size, 1)
        self.flat = out.reshape(-1, m) if out.size else out.reshape(0, m)
        self.fill = fill
        self.needs_fill = not is_zero(fill)
        self.touched = touched
        if self.needs_fill and self.touched is None:
            self.touched = np.zeros(self.flat.shape[0], dtype=bool)
        self.rows = 0
        # For outputs bigger than the memory budget: write dirty pages back and drop them
        # from RSS every so often, so a memory-mapped output does not count against --memory.
        self.release_bytes = release_bytes
        self._since_release = 0

    def add(self, keys: np.ndarray, values: np.ndarray):
        n = keys.shape[1]
        if n == 0:
            return
        offsets = cell_offsets(keys, self.meta, self.rows, self.path)
        vals = np.ascontiguousarray(values).reshape(n, -1)
        if self.touched is not None:
            self.touched[offsets] = True
        dt = self.flat.dtype
        if dt == np.bool_:
            _kernels.scatter_or(offsets, vals.view(np.uint8), self.flat.view(np.uint8))
        elif dt in _COMPILED:
            _kernels.scatter_add(offsets, vals.astype(dt, copy=False), self.flat)
        elif dt.kind in "USO":
            self.flat[offsets] = vals
        else:  # float16 has no C type; NumPy's unbuffered add handles it
            np.add.at(self.flat, offsets, vals.astype(dt, copy=False))
        self.rows += n
        if self.release_bytes:
            self._since_release += n * mmap.PAGESIZE  # at worst one page per row
            if self._since_release > self.release_bytes:
                release(self.out)
                self._since_release = 0

    def finish(self, chunk: int = 1 << 22):
        if self.needs_fill:
            for start in range(0, self.flat.shape[0], chunk):
                block = self.flat[start : start + chunk]
                block[~self.touched[start : start + chunk]] = self.fill
        if self.release_bytes:
            release(self.out)
        return self.out


class BlockScatter:
    """DenseScatter for rows that arrive in row-major order into a zero-filled output: the cells
    are gathered in a block buffer and written with one ``pwrite`` a block, front to back, so the
    output is never memory-mapped (no page fault per page, no dirty-page writeback of a mapped
    file); a block no row reaches is never written and stays a hole of the pre-sized file.  A batch
    not in order (possible only when the input's claims are not verified) is added onto the file
    through a memory map, and so is every row after it: its rows may reach cells past the block in
    the buffer, which a block written later would overwrite."""

    def __init__(self, path: str, offset: int, meta: TensorMeta, dtype: np.dtype, budget: Budget,
                 source: str | None = None):
        self.meta, self.path, self.offset, self.source = meta, path, offset, source
        self.m = max(meta.block_size, 1)
        self.cells = math.prod(meta.shape[: meta.sparse_ndim])
        self.dtype = np.dtype(dtype)
        row_bytes = self.m * self.dtype.itemsize
        # A few MiB a write is all the kernel needs to stream; more would only add to RSS.
        block_bytes = min(max(1 << 20, budget.total // 8), 32 << 20)
        self.block = int(max(1, min(self.cells, block_bytes // max(row_bytes, 1))))
        self.buf = np.zeros((self.block, self.m), dtype=self.dtype)
        self.start = 0  # first cell of the buffer
        self.span = None  # [first, last] cell of the buffer that rows reached
        self.reached = []  # the buffer's cells rows reached (arrays), zeroed again after the write
        self.reached_count = 0
        self.map = None  # the output's memory map, once a batch out of order came: the rest go there too
        self.rows = 0
        self.fd = os.open(path, os.O_RDWR)

    def add(self, keys: np.ndarray, values: np.ndarray):
        n = keys.shape[1]
        if n == 0:
            return
        offsets = cell_offsets(keys, self.meta, self.rows, self.source)
        vals = np.ascontiguousarray(values).reshape(n, -1).astype(self.dtype, copy=False)
        self.rows += n
        if self.map is not None or offsets[0] < self.start or (n > 1 and not (offsets[1:] >= offsets[:-1]).all()):
            self._add_behind(offsets, vals)
            return
        lo = 0
        while lo < n:
            if offsets[lo] >= self.start + self.block:
                self._flush()
                self.start = int(offsets[lo]) // self.block * self.block
            end = self.start + self.block
            hi = n if offsets[n - 1] < end else int(np.searchsorted(offsets, end, side="left"))
            cells = offsets[lo:hi] - self.start
            _scatter_into(self.buf, cells, vals[lo:hi])
            self.reached_count += len(cells)
            if self.reached_count * 32 < len(self.buf):  # sparse so far: kept, to zero them alone
                self.reached.append(cells)
            del cells  # let go now: held into the next batch, it made the allocator map fresh pages
            first, last = int(offsets[lo]) - self.start, int(offsets[hi - 1]) - self.start
            self.span = (first, last) if self.span is None else (self.span[0], last)
            lo = hi

    def _flush(self):
        """Write the part of the buffer rows reached (the rest of the file stays as it is: zeros,
        or holes), and zero it for the next block."""
        if self.span is not None:
            first, last = self.span
            view = memoryview(self.buf[first:last + 1]).cast("B")
            at = self.offset + (self.start + first) * self.m * self.dtype.itemsize
            while len(view):
                done = os.pwrite(self.fd, view, at)
                view, at = view[done:], at + done
            # Only the cells rows reached hold anything: zeroing those alone is cheaper than
            # zeroing the span when they are under about 3% of it (one cell costs some 30 of a memset).
            if self.reached_count * 32 < last + 1 - first:
                for cells in self.reached:
                    self.buf[cells] = 0
            else:
                self.buf[first:last + 1] = 0
            self.span = None
        self.reached, self.reached_count = [], 0

    def _add_behind(self, offsets: np.ndarray, vals: np.ndarray):
        if self.map is None:  # mapped once, the block in the buffer written first
            self._flush()
            self.map = np.memmap(self.path, dtype=self.dtype, mode="r+", offset=self.offset, shape=(self.cells, self.m))
        _scatter_into(self.map, offsets, vals)

    def finish(self):
        self._flush()

    def close(self):
        self.map = None  # unmapped: its pages are the file's, written back as pwrite's are
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _scatter_into(flat: np.ndarray, offsets: np.ndarray, vals: np.ndarray):
    """flat[offsets] += vals (OR for bool), duplicates accumulating."""
    dt = flat.dtype
    if dt == np.bool_:
        _kernels.scatter_or(offsets, vals.view(np.uint8), flat.view(np.uint8))
    elif dt in _COMPILED:
        _kernels.scatter_add(offsets, vals, flat)
    else:
        np.add.at(flat, offsets, vals)


class FileMap(NamedTuple):
    """The shared memory map an array lies in: the ``mmap.mmap``, where the array begins in it and
    in the file, and the np.memmap's mode ("c": a private copy, whose pages must not be dropped)."""

    map: mmap.mmap
    start: int
    offset: int
    mode: str


def file_map(arr: np.ndarray) -> FileMap | None:
    """The memory map of a file that ``arr`` (a np.memmap or a view of one) lies in, or None.  A
    np.memmap's ``base`` is the ``mmap.mmap`` it was made on (NumPy's documented alternative to
    the subclass is that same map, made yourself), so its pages can be given back by ``madvise``."""
    base = arr
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    if base is None:
        return None
    mm = base.base
    while isinstance(mm, np.ndarray):
        mm = mm.base
    if not isinstance(mm, mmap.mmap) or mm.closed:
        return None
    return FileMap(mm, base.offset % mmap.ALLOCATIONGRANULARITY, int(base.offset), base.mode)


def release(arr: np.ndarray):
    """Flush a memory-mapped array and drop its pages from this process's RSS."""
    found = file_map(arr)
    if found is not None:
        found.map.flush()
        try:
            found.map.madvise(mmap.MADV_DONTNEED)
        except (AttributeError, OSError, ValueError):
            pass


NPY_MAGIC = b"\x93NUMPY"
# What NumPy's header parser lets through on a damaged header besides ValueError: its
# tokenizer's TokenError, ast's SyntaxError and RecursionError, and the errors of building a
# dtype or shape from a literal of the wrong kind.
NPY_HEADER_ERRORS = (ValueError, OSError, EOFError, SyntaxError, TokenError, RecursionError, MemoryError, TypeError,
                     KeyError, IndexError, OverflowError)


def open_npy(path: str) -> np.ndarray:
    """A .npy file as a read-only memory map (never loaded whole); a missing file, or one that
    is not a .npy array (no NumPy header, an object array, an .npz archive), is an InputError
    in sptool's words."""
    path = local_only(path, "a .npy operand", "it is read through a memory map")
    if not os.path.exists(path):
        raise InputError("no such file or directory", path=path)
    try:
        with open(path, "rb") as f:
            head = f.read(len(NPY_MAGIC))
        if head != NPY_MAGIC:
            what = "an .npz archive" if head.startswith(b"PK") else "it has no NumPy header"
            raise InputError(f"not a .npy file ({what})", path=path)
        try:
            return np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as e:
            if "empty" not in str(e) and "mmap" not in str(e):
                raise
            return np.load(path, allow_pickle=False)  # NumPy before 2 cannot map a zero-length array
    except NPY_HEADER_ERRORS as e:
        text = str(e).strip()
        if "allow_pickle" in text or "Object arrays" in text or "Python objects" in text:
            raise InputError("the .npy holds Python objects, which sptool does not read", path=path) from None
        if isinstance(e, (SyntaxError, TokenError, RecursionError)):
            text = "its header is not the dictionary literal NumPy writes"
        raise InputError(f"not a readable .npy file ({text.splitlines()[0] if text else type(e).__name__})",
                         path=path) from None


def check_dense_size(shape, dtype: np.dtype, where: str) -> int:
    """Bytes of a dense array of this shape, refusing sizes that overflow or exceed the disk."""
    cells = math.prod(shape)
    nbytes = cells * dtype.itemsize
    if cells > INT64_MAX or nbytes > INT64_MAX:
        raise ResourceError(f"a dense array of shape {list(shape)} would hold {cells} elements, more than the 2^63-1 "
                            "elements or bytes an array (and a .npy) can address: a dense output of this tensor cannot "
                            "exist; take a part of it first (sptool slice) or reduce it (sptool reduce)", path=where)
    check_room(nbytes, where, f"the dense array of shape {list(shape)}")
    return nbytes


def check_dense_rows(rows: int, row_bytes: int, where: str | None, what: str) -> None:
    """Refuse an output that holds something for every one of the ``rows`` rows of dimension 0
    (dense along it: a line, a record, a pointer or an entry) when those ``row_bytes`` a row,
    before compression, outgrow the free space of the local disk ``where`` is on (not checked
    for stdout or another filesystem)."""
    if where is None or where == "-" or is_remote(where):
        return
    check_room(rows * row_bytes, where, f"{what}, dense along dimension 0 ({row_bytes} bytes or more for each of "
                                        f"its {rows} rows),")


def check_room(nbytes: int, where: str, what: str) -> None:
    """Refuse an output of at least ``nbytes`` bytes that the free space of the disk ``where`` is
    on could not hold (``what`` names it in the message)."""
    parent = os.path.dirname(os.path.abspath(where)) or "."
    while not os.path.exists(parent):  # the output's directories are made when it is written
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"{parent} is not a directory", path=where)
    free = shutil.disk_usage(parent).free
    if nbytes > free:
        raise ResourceError(
            f"{what} needs {format_size(nbytes)} but only {format_size(free)} "
            "are free on the output's disk; take a part of it first (sptool slice) or reduce it (sptool reduce)",
            path=where,
        )




def copy_slabs(src: np.ndarray, out: np.ndarray, budget: Budget):
    """out[...] = src, a slab of leading-axis rows at a time (casting), so neither is read whole."""
    if out.ndim == 0 or out.size == 0:
        out[...] = src
        return
    row_bytes = max(out[0].nbytes, 1) + max(src[0].nbytes, 1) if out.shape[0] else 1
    step = max(1, (budget.total // 8) // row_bytes)
    with np.errstate(all="ignore"):
        for start in range(0, out.shape[0], step):
            out[start:start + step] = src[start:start + step]
            if out.nbytes > budget.total // 2:
                release(out)


class DenseSink:
    """A dense .npy output as a sink: rows scattered into a memory map of the output's hidden
    temporary sibling (duplicates sum, OR for bool), cells no row reaches set to ``fill``, and
    the file renamed into place on ``close`` (removed on ``abort``).

    ``initial``, an array of the output's shape, is copied in first (slab by slab) and rows add
    onto it; otherwise the output starts zeroed.  An output bigger than half the budget has its
    written pages dropped from RSS as it goes, and a non-zero fill over a large index space keeps
    its touched-cell marks in a temporary file, not in memory."""

    def __init__(self, output: str, meta: TensorMeta, *, fill, budget: Budget, dtype: np.dtype | None = None,
                 initial: np.ndarray | None = None, claims=None, in_order: bool = False,
                 source: str | None = None):
        # ``source``: the input the rows come from, named by an error of an index outside the shape.
        dtype = np.dtype(meta.dtype if dtype is None else dtype)
        self.meta = meta
        # The input's order and uniqueness claims, verified as rows pass (as a tensor sink does):
        # an object whose check(keys) raises on a row that breaks them (the engine's ClaimCheck).
        self.claims = claims
        self.nbytes = check_dense_size(meta.shape, dtype, output)
        self.target = AtomicTarget(output, is_dir=False)
        self.marks = self.target.tmp + ".touched"
        self.rows = 0
        try:
            self.out = np.lib.format.open_memmap(self.target.tmp, mode="w+", dtype=dtype, shape=tuple(meta.shape))
            if in_order and initial is None and is_zero(fill) and (dtype in _COMPILED or dtype == np.bool_):
                # Rows in row-major order into a zeroed output: written block by block instead.
                offset = self.out.offset
                self.out = None
                self.scatter = BlockScatter(self.target.tmp, offset, meta, dtype, budget, source)
                return
            if initial is not None:
                copy_slabs(initial, self.out, budget)
            release_bytes = budget.total // 4 if self.nbytes > budget.total // 2 else None
            cells = math.prod(meta.shape[: meta.sparse_ndim])
            touched = None
            if not is_zero(fill) and cells > budget.total // 4:
                touched = np.lib.format.open_memmap(self.marks, mode="w+", dtype=bool, shape=(cells,))
            self.scatter = DenseScatter(self.out, meta, fill, touched=touched, release_bytes=release_bytes,
                                        path=source)
        except BaseException:
            self.abort()
            raise

    def write(self, keys: np.ndarray, values: np.ndarray):
        self.scatter.add(keys, values)
        if self.claims is not None:
            self.claims.check(keys)
        self.rows += keys.shape[1]

    def write_batch(self, batch):
        self.write(batch_keys(batch, self.meta.sparse_ndim), batch_values(batch, self.meta))

    def close(self):
        self.scatter.finish()
        # Unmapped (or its descriptor closed) before the rename, not synced: the pages are the
        # file's in the page cache, written back by the kernel as a write() would be.
        self._let_go()
        self._drop_marks()
        self.target.commit()

    def abort(self):
        self._let_go()
        self._drop_marks()
        self.target.abort()

    def _let_go(self):
        if isinstance(getattr(self, "scatter", None), BlockScatter):
            self.scatter.close()
        self.out = self.scatter = None

    def _drop_marks(self):
        if os.path.exists(self.marks):
            os.remove(self.marks)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def dense_returned(write, kind: str) -> np.ndarray:
    """The array ``write(path)`` writes to a .npy, in memory: the result of an op given no output
    (written through a memory map as ever, in a scratch directory removed afterwards)."""
    with scratch_dir(kind) as folder:
        path = os.path.join(folder, "result.npy")
        write(path)
        return np.load(path)


class GrowingNpy:
    """A 1-D .npy written as it grows, when its length is known only at the end (labels read
    along with a text file): the header's space is kept at the front and filled in by
    ``commit``, which moves the file into place; ``abort`` removes it."""

    # Magic, version, header length, then the header dict padded with spaces to 128 bytes in
    # all (a multiple of 64, as NumPy aligns it): room for any int64 length.
    _HEADER = 128

    def __init__(self, path: str, dtype):
        self.dtype = np.dtype(dtype)
        self.target = AtomicTarget(path, is_dir=False)
        self.f = open(self.target.tmp, "wb")  # noqa: SIM115 (closed by commit / abort)
        self.f.write(b" " * self._HEADER)
        self.length = 0

    def append(self, values: np.ndarray):
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self.f.write(memoryview(values).cast("B"))
        self.length += len(values)

    def commit(self):
        descr = np.lib.format.dtype_to_descr(self.dtype)
        text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': ({self.length},), }}"
        text = text.ljust(self._HEADER - len(NPY_MAGIC) - 4 - 1) + "\n"
        self.f.seek(0)
        self.f.write(NPY_MAGIC + b"\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1"))
        self.f.close()
        self.target.commit()

    def abort(self):
        self.f.close()
        self.target.abort()
