"""An undo journal for updating rows of memory-mapped .npy arrays in place, all or nothing.

Before a block of rows is changed, their old contents (in every array the update touches) are
appended to the journal and fsynced; only then are the arrays written.  Small files replaced
in the same transaction (a state JSON) have their old text in the journal's header.  The
transaction commits when the journal is deleted, after every array and file is flushed and
fsynced.  A journal found later (the process was killed, the machine stopped) is rolled back:
its complete blocks are written back newest first, which restores every row's contents from
before the first block, then the old files, then the journal goes.  A block cut short by a
crash was never applied (the arrays are touched only after its fsync), so it is skipped; each
block ends with a CRC-32 of its bytes, so a torn block is told from a whole one.

Layout: ``MAGIC``, u64 header length, the header JSON, u32 CRC; then blocks of ``BLOCK``, u64
rows n, u64 payload length, the payload (rows as int64 [n], then the old rows of each array in
header order, [n, m] in its dtype), u32 CRC.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib

import numpy as np

from ..errors import DataError
from .dense import release

MAGIC = b"SPTJRNL1"
BLOCK = b"BLK1"
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def journal_path(table: str) -> str:
    """Where the journal of updates to ``table`` lives: a hidden sibling."""
    head, tail = os.path.split(os.path.abspath(table))
    return os.path.join(head, f".{tail}.journal")


def fsync_dir(path: str):
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: str, data: bytes, *, durable: bool = True):
    """Replace ``path`` with ``data``: a temporary sibling, fsynced, renamed over it, the
    directory fsynced (without the fsyncs when not ``durable``: still atomic for readers)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(path)


def flush_array(arr: np.ndarray):
    """Write a memory map's dirty pages to its file and fsync it (``release`` also drops the pages)."""
    release(arr)
    base = arr
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    if isinstance(base, np.memmap) and base.filename:
        fd = os.open(base.filename, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# A page fault on a file map also maps the neighbouring cached pages (Linux's fault-around,
# 64 KiB by default), so a row read through a map holds up to this much of it in RSS.
FAULT_AROUND = 64 << 10


def release_rows(arrays, rows: np.ndarray, *, flush: bool = True):
    """Give back the pages of the (N, m) memory maps ``arrays`` that hold rows rows[0] ..
    rows[-1] (sorted): only that range of each map.  Dirty pages of a shared file map stay
    dirty in the page cache when dropped (the kernel moves the dirty bit to the page), so
    ``flush`` (write them to the file now, and wait) is needed only for durability."""
    if not len(rows):
        return
    for arr in arrays:
        base = arr
        while base is not None and not isinstance(base, np.memmap):
            base = base.base
        if base is None or getattr(base, "_mmap", None) is None:
            continue
        width = arr.shape[1] * arr.dtype.itemsize
        start = base.offset % mmap.ALLOCATIONGRANULARITY  # where the array begins in the map
        lo = start + int(rows[0]) * width
        hi = start + (int(rows[-1]) + 1) * width
        lo -= lo % mmap.PAGESIZE
        hi = min(-(-hi // mmap.PAGESIZE) * mmap.PAGESIZE, len(base._mmap))
        if flush:
            base._mmap.flush(lo, hi - lo)
        try:
            base._mmap.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (AttributeError, OSError, ValueError):
            pass


def as_rows(arr: np.ndarray) -> np.ndarray:
    """An (N, m) view of an array of N rows (m = 1 for a vector)."""
    return arr.reshape(arr.shape[0], -1) if arr.ndim != 1 else arr.reshape(-1, 1)


class RowJournal:
    """The journal of one transaction over ``arrays`` (name -> (path, memory map opened r+)) and
    ``files`` (path -> the new text written at commit).  ``record(rows)`` before changing rows;
    ``commit()`` at the end; ``rollback()`` on any failure."""

    def __init__(self, path: str, arrays: dict, files: dict, *, durable: bool = True):
        self.path = path
        self.durable = durable
        self.arrays = {name: (os.path.abspath(p), as_rows(a)) for name, (p, a) in arrays.items()}
        self.files = {os.path.abspath(p): text for p, text in files.items()}
        old = {p: (open(p, encoding="utf-8").read() if os.path.exists(p) else None) for p in self.files}
        header = json.dumps({"arrays": [{"name": n, "path": p, "dtype": a.dtype.str, "shape": list(a.shape)}
                                        for n, (p, a) in self.arrays.items()], "files": old}).encode()
        # O_EXCL: a second apply on the same table while one runs (the caller holds a lock too).
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(self.fd, MAGIC + _U64.pack(len(header)) + header + _U32.pack(zlib.crc32(header)))
        # Without durability the order still holds for a killed process: the journal's bytes are
        # in the page cache, which outlives it, before any row changes.
        if durable:
            os.fdatasync(self.fd)
            fsync_dir(path)
        self.rows = 0

    def record(self, rows: np.ndarray) -> list[np.ndarray]:
        """Append the current contents of ``rows`` and fsync: the rows may change now."""
        old = self.append(rows)
        self.sync()
        return old

    def sync(self):
        if self.durable:
            os.fdatasync(self.fd)

    def append(self, rows: np.ndarray) -> list[np.ndarray]:
        """Append the current contents of ``rows`` (int64, within every array), not yet fsynced:
        ``sync()`` before any of them changes.  Returns those contents, (n, m) per array."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        size = rows.nbytes + sum(len(rows) * a.shape[1] * a.dtype.itemsize for _, a in self.arrays.values())
        os.write(self.fd, BLOCK + _U64.pack(len(rows)) + _U64.pack(size))
        old = [a[rows] for _, a in self.arrays.values()]
        crc = 0
        for part in (rows, *old):
            crc = zlib.crc32(part, crc)
            _write_all(self.fd, memoryview(part).cast("B"))
        os.write(self.fd, _U32.pack(crc))
        self.rows += len(rows)
        release_rows([a for _, a in self.arrays.values()], rows, flush=False)
        return old

    def written(self, rows: np.ndarray):
        """After ``rows`` (sorted) changed: give their pages back, not synced (a shared map's
        dirty pages stay dirty in the page cache, for the commit's fdatasync)."""
        release_rows([a for _, a in self.arrays.values()], rows, flush=False)

    def commit(self, pause=None):
        """Make the new contents durable, write the new files, then delete the journal."""
        if self.durable:  # else the rows are in the page cache already (a shared map)
            for p, _ in self.arrays.values():
                # fdatasync alone: a shared map's dirty pages are the file's own (Linux's
                # msync(MS_SYNC) is the same data sync), and the size and mtime need no sync.
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
        for p, text in self.files.items():
            write_durably(p, text.encode(), durable=self.durable)
        if pause:
            pause("commit")
        os.close(self.fd)
        self.fd = None
        if self.durable:
            _remove(self.path)
        else:
            os.remove(self.path)

    def rollback(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        recover_journal(self.path)


def _write_all(fd: int, data: memoryview):
    while len(data):
        data = data[os.write(fd, data):]


def _blocks(data: memoryview, start: int, widths: list[int]):
    """(offset, n) of each whole block after the header; a torn last block ends the list."""
    out = []
    pos = start
    head = len(BLOCK) + 2 * _U64.size
    while pos + head <= len(data):
        if bytes(data[pos:pos + len(BLOCK)]) != BLOCK:
            break
        n = _U64.unpack_from(data, pos + len(BLOCK))[0]
        size = _U64.unpack_from(data, pos + len(BLOCK) + _U64.size)[0]
        end = pos + head + size + _U32.size
        if size != n * (8 + sum(widths)) or end > len(data):
            break
        payload = data[pos + head:pos + head + size]
        if zlib.crc32(payload) != _U32.unpack_from(data, pos + head + size)[0]:
            break
        out.append((pos + head, n))
        pos = end
    return out


def recover_journal(path: str) -> int | None:
    """Roll back the transaction ``path`` records; the number of rows written back (0 when the
    journal was cut short before any block), or None when there is no journal."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        # Mapped, not read: a journal can be larger than --memory.
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
    try:
        return _roll_back(path, raw)
    finally:
        if isinstance(raw, mmap.mmap):
            try:
                raw.close()
            except BufferError:  # a view still held by a traceback: the collector unmaps it
                pass


def _roll_back(path: str, raw) -> int:
    data = memoryview(raw)
    if len(raw) < len(MAGIC) + _U64.size or raw[:len(MAGIC)] != MAGIC:
        if len(raw) < len(MAGIC) + _U64.size and MAGIC.startswith(raw[:len(MAGIC)]):
            _remove(path)  # cut short while its header was written: nothing was touched
            return 0
        raise DataError("not an sptool apply journal; move it away if the table is known to be intact", path=path)
    length = _U64.unpack_from(data, len(MAGIC))[0]
    start = len(MAGIC) + _U64.size
    end = start + length + _U32.size
    if end > len(raw) or zlib.crc32(data[start:start + length]) != _U32.unpack_from(data, start + length)[0]:
        _remove(path)  # the header never became whole, so no block followed it
        return 0
    header = json.loads(bytes(data[start:start + length]))
    arrays = []
    for spec in header["arrays"]:
        try:
            a = np.load(spec["path"], mmap_mode="r+")
        except (OSError, ValueError) as e:
            raise DataError(f"cannot reopen {spec['path']} to roll back an interrupted apply ({e})", path=path) \
                from None
        a = as_rows(a)
        if a.dtype.str != spec["dtype"] or list(a.shape) != spec["shape"]:
            raise DataError(f"{spec['path']} changed shape or type since the interrupted apply; cannot roll back",
                            path=path)
        arrays.append(a)
    widths = [a.shape[1] * a.dtype.itemsize for a in arrays]
    blocks = _blocks(data, end, widths)
    restored = 0
    for pos, n in reversed(blocks):
        rows = np.frombuffer(data, np.int64, n, pos)
        pos += 8 * n
        for a, w in zip(arrays, widths):
            a[rows] = np.frombuffer(data, a.dtype, n * a.shape[1], pos).reshape(n, a.shape[1])
            pos += n * w
        restored += n
    for a in arrays:
        flush_array(a)
    rows = None
    del arrays
    for p, text in header["files"].items():
        if text is None:
            if os.path.exists(p):
                os.remove(p)
        else:
            write_durably(p, text.encode())
    _remove(path)
    return restored


def _remove(path: str):
    os.remove(path)
    fsync_dir(path)
