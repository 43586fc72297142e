"""A redo (write-ahead) journal for updating rows of memory-mapped .npy arrays in place, all or
nothing, without waiting for the arrays' own writeback.

A transaction appends the NEW contents of the rows it changes (in every array it touches), block by
block, to the journal (their writeback started as each block is written, not waited for).
``commit()`` appends a commit record (which vouches for the blocks by a CRC of their CRCs) and
fdatasyncs the journal; the record also holds the new text of the small files the transaction
replaces (a state JSON): from then on the transaction has happened.  Only then are the rows written
into the arrays (``apply()``), and the files replaced, neither waited for: the journal says it all.
The arrays are never touched before the commit record is durable, so a transaction without one (or
with one that does not vouch for every block before it: a power loss during the sync) is simply
discarded.  An "applied" record then says that this boot of the system wrote the rows (a page cache
that has not been through an OS crash or power loss holds them, written back or not), with each
array's identity (inode, size, mtime, ctime) as the transaction left it.

Transactions accumulate in one journal (a database's WAL): the next one is appended when the
journal ends with an "applied" record of this boot, holds the same arrays, and none of them was
changed since (their identity).  A checkpoint (``recover_journal``) ends the journal: committed
transactions not applied in this boot (an OS crash since, or a process killed while it wrote
them) are written again, in order (idempotent: each block holds disjoint rows' final contents
for its transaction), the arrays are fdatasynced, and the journal goes.  The caller decides
when (``reusable``: a size bound, or an age by which the OS has written the pages back).  Each
block and record ends with a CRC-32, so a torn tail is told from a whole one, and the commit
record carries the number of blocks and a CRC of their CRCs, so it vouches for all of them.

A block also holds, per row and array, the CRC-32C of the row's OLD contents, piece by piece
(a row cut at the file's page boundaries, ``PIECE``: pages are written back whole, so a crash
tears a row only there).  Before a replay every journaled row must be, piece by piece, its
contents before the first transaction that touched it or after one of them; a row that is none
of these means the array is no longer the one the journal was written against (replaced by
``cp`` or ``np.save`` since: same name, same shape), and the replay is refused, touching
nothing, rather than writing an old update into a new array.  One such row per array is let
through when other journaled rows of that array match (the row a killed process was copying
when it died, torn anywhere), and one more for each replay a "replay began" record (written
durably before a recovery's replay touches an array) says was started and may have been cut
short the same way.

Layout: ``MAGIC``, u64 header length, the header JSON (the arrays, the piece, the files' paths),
u32 CRC; then, per transaction, blocks of ``BLOCK``, u64 rows n, u64 payload length, the payload
(rows as int64 [n], then the new rows of each array in header order, [n, m] in its dtype, then
the old rows' CRC-32Cs of each array, uint32 [n, pieces] with the array's ``pieces`` from the
header), u32 CRC; then ``COMMIT``, u64 blocks, u64 rows, u32 CRC of the blocks' CRCs, u64 length
of the files' JSON (path -> new text), that JSON, u32 CRC of the record; then, maybe,
``APPLIED``, the boot id (36 bytes), u32 arrays k, k x (u64 inode, size, mtime_ns, ctime_ns),
u32 CRC of all that, u32 length of the whole record (so that it is found from the end); after
the last transaction, maybe, "replay began" records: ``REPLAY`` and its u32 CRC each.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from .._journal import gather_rows, scatter_rows
from .._tfrecord import crc32c_pieces, first_unmatched_row
from ..errors import DataError
from ..io import file_map, sibling_name

MAGIC = b"SPTREDO3"
OLD_MAGICS = (b"SPTREDO1", b"SPTREDO2")  # one transaction a journal (2: with the old rows' CRCs)
BLOCK = b"BLK3"
COMMIT = b"CMT3"
APPLIED = b"APL3"
REPLAY = b"RPL3"  # a recovery's replay began (see _check_unchanged): the magic and its CRC
_REPLAY_RECORD = REPLAY + struct.pack("<I", zlib.crc32(REPLAY))
PIECE = 4096  # where rows are cut for their CRCs: a page, the unit the OS writes back
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_COMMIT = struct.Struct("<4sQQIQ")
_STAT = struct.Struct("<QQQQ")
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Linux writes a dirty page back once it is dirty_expire old, checking every dirty_writeback.
WRITEBACK_KNOBS = ("/proc/sys/vm/dirty_expire_centisecs", "/proc/sys/vm/dirty_writeback_centisecs")


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
    tmp = sibling_name(path, "tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(path)


def _sync_file(path: str):
    # fdatasync alone: a shared map's dirty pages are the file's own (Linux's msync(MS_SYNC) is
    # the same data sync), and the size and mtime need no sync.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def boot_id() -> str:
    """This boot of the system (a page cache that outlived a process but not an OS crash)."""
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            return f.read().strip()[:36].ljust(36)
    except OSError:
        return "?" * 36  # never matches: every checkpoint then writes the rows again


def as_rows(arr: np.ndarray) -> np.ndarray:
    """An (N, m) view of an array of N rows (m = 1 for a vector)."""
    return arr.reshape(arr.shape[0], -1) if arr.ndim != 1 else arr.reshape(-1, 1)


# A page fault on a file map also maps the neighbouring cached pages (Linux's fault-around,
# 64 KiB by default), so a row read through a map holds up to this much of it in RSS.
FAULT_AROUND = 64 << 10


def release_rows(arrays, rows: np.ndarray):
    """Give back the pages of the (N, m) memory maps ``arrays`` that hold rows rows[0] ..
    rows[-1] (sorted): only that range of each map.  Dirty pages of a shared file map stay
    dirty in the page cache when dropped (the kernel moves the dirty bit to the page)."""
    if not len(rows):
        return
    for arr in arrays:
        found = file_map(arr)
        if found is None:
            continue
        width = arr.shape[1] * arr.dtype.itemsize
        lo = found.start + int(rows[0]) * width
        hi = found.start + (int(rows[-1]) + 1) * width
        lo -= lo % mmap.PAGESIZE
        hi = min(-(-hi // mmap.PAGESIZE) * mmap.PAGESIZE, len(found.map))
        try:
            found.map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (AttributeError, OSError, ValueError):
            pass


# The compiled copies give a map's pages back every this many bytes they pass (RSS holds about
# this much of each map a thread copies, plus a fault-around): not much less, since each madvise
# also flushes the TLBs of the cores the process's other threads run on.
RELEASE = 1 << 20


def _release_of(arr: np.ndarray) -> int:
    # Only a shared file map: MADV_DONTNEED on anonymous or private memory would discard data.
    found = file_map(arr)
    return RELEASE if found is not None and found.mode != "c" else 0


def gather(arrays, rows: np.ndarray, outs):
    """outs[k][i] = arrays[k][rows[i]] for (N, m) arrays (memory maps: their pages given back as
    the copy passes them) and (n, m) buffers, rows sorted."""
    for a, out in zip(arrays, outs):
        gather_rows(_bytes_view(a), rows, _bytes_view(out), _release_of(a))


class Workers:
    """Threads for an update's copies and checksums: ``ways`` of them (none below 2), shut
    down on exit."""

    def __init__(self, ways: int):
        self.ways = max(1, ways)
        self.pool = ThreadPoolExecutor(self.ways, thread_name_prefix="sptool-apply") if self.ways > 1 else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown()
        return False

    def cuts(self, n: int) -> list[tuple[int, int]]:
        """[lo, hi) runs of n rows, one a thread (one run when n is small)."""
        ways = self.ways if self.pool is not None and n >= PARALLEL_ROWS else 1
        edges = [n * w // ways for w in range(ways + 1)]
        return list(zip(edges[:-1], edges[1:]))

    def map(self, fn, items) -> list:
        items = list(items)
        if self.pool is None or len(items) < 2:
            return [fn(x) for x in items]
        return list(self.pool.map(fn, items))


def scatter(arrays, rows: np.ndarray, news, workers: Workers | None = None):
    """arrays[k][rows[i]] = news[k][i], as ``gather`` the other way; on the ``workers`` (each
    array's rows cut into a run a thread), but each array written by one copy loop at a time (a
    lock per array): a process killed meanwhile leaves at most one row per array torn, the row
    its one loop was copying (what the recovery's check allows)."""
    runs = workers.cuts(len(rows)) if workers is not None else [(0, len(rows))]
    if len(runs) < 2:
        for a, new in zip(arrays, news):
            scatter_rows(_bytes_view(a), rows, _bytes_view(new), _release_of(a))
        return
    locks = [threading.Lock() for _ in arrays]

    def run(w: int):
        lo, hi = runs[w]
        for step in range(len(arrays)):
            k = (step + w) % len(arrays)  # staggered: the threads start on different arrays
            with locks[k]:
                scatter_rows(_bytes_view(arrays[k]), rows[lo:hi], _bytes_view(news[k][lo:hi]), _release_of(arrays[k]))

    workers.map(run, range(len(runs)))


# Fewer rows than this are copied on one thread (a thread's hand-off costs about as much).
PARALLEL_ROWS = 2048


def _bytes_view(a: np.ndarray) -> np.ndarray:
    """A C-contiguous (n, m) array as its (n, m * itemsize) bytes, without a copy."""
    return a.view(np.uint8).reshape(a.shape[0], a.shape[1] * a.dtype.itemsize)


class HeldSignals:
    """SIGINT and SIGTERM held off (recorded, not acted on) between ``hold()`` and
    ``release()``: a committed transaction's rows are written whole, then the caller says so
    and stops.  ``signum`` is the first signal that arrived, or None.  Only the main thread
    can set handlers; elsewhere nothing is held (the caller's handlers act as before)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.signum = None
        self.saved = None

    def hold(self):
        if self.saved is None and threading.current_thread() is threading.main_thread():
            self.saved = {s: signal.signal(s, self._record) for s in self.SIGNALS}

    def _record(self, signum, frame):
        if self.signum is None:
            self.signum = signum

    def release(self):
        if self.saved is not None:
            for s, handler in self.saved.items():
                signal.signal(s, handler)
            self.saved = None


def _write_all(fd: int, data):
    data = memoryview(data).cast("B")
    while len(data):
        data = data[os.write(fd, data):]


class RowJournal:
    """One transaction over ``arrays`` (name -> (path, memory map opened r+)) and ``files`` (path
    -> the new text), begun in a new journal at ``path`` or, ``append``, at the end of the one
    there (see ``reusable``).  ``append(rows, new)`` for each block of rows (their new contents,
    nothing written to the arrays yet); ``commit()``; then ``apply()`` writes them.  A failure
    before the commit: ``discard()``."""

    def __init__(self, path: str, arrays: dict, files: dict, *, durable: bool = True, append: bool = False,
                 background: bool = False):
        self.path = path
        self.durable = durable
        self.arrays = {name: (os.path.abspath(p), as_rows(a)) for name, (p, a) in arrays.items()}
        self.files = {os.path.abspath(p): text for p, text in files.items()}
        self.header = _header_of(arrays, files)
        self.specs = self.header["arrays"]
        self.new = not append
        if append:
            self.fd = os.open(path, os.O_RDWR)
            self.size = os.lseek(self.fd, 0, os.SEEK_END)
        else:
            # O_EXCL: a second apply on the same table while one runs (the caller holds a lock too).
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            data = _header_bytes(self.header)
            _write_all(self.fd, data)
            self.size = len(data)
        self.start = self.size  # where this transaction begins
        self.flushed = self.size  # how far the journal's writeback has been started
        self.blocks = []  # (payload offset, rows)
        self.chain = 0  # CRC of the blocks' CRCs
        self.rows = 0
        self.committed = False
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="sptool-journal") if background else None
        self.pending = None  # the block being written by the writer thread

    def checksums(self, rows: np.ndarray, old: list[np.ndarray]) -> list[np.ndarray]:
        """The CRC-32Cs, piece by piece, of the OLD contents ``old`` ((n, m) per array, in
        order) of ``rows``, to append with their new contents."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        return [crc32c_pieces(_bytes(a), rows, spec["offset"], PIECE, spec["pieces"])
                for a, spec in zip(old, self.specs)]

    def append(self, rows: np.ndarray, new: list[np.ndarray], old_crcs: list[np.ndarray] | None = None):
        """Append the new contents ``new`` ((n, m) per array, in order) of ``rows`` (int64,
        sorted, unique, and disjoint from every other block's of this transaction) and the
        ``checksums`` of their old contents (by default of the rows the arrays hold now).  With
        a writer thread (``background``) the block is written there while the caller goes on,
        so the arrays given must stay as they are until the next ``append`` or ``commit``
        returns (the caller alternates two sets of buffers)."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if old_crcs is None:
            old_crcs = self.checksums(rows, [np.take(a, rows, axis=0) for _, a in self.arrays.values()])
        parts = [rows, *(np.ascontiguousarray(a) for a in new), *(np.ascontiguousarray(c) for c in old_crcs)]
        self.wait()
        if self.writer is None:
            self._write_block(parts)
        else:
            self.pending = self.writer.submit(self._write_block, parts)

    def wait(self):
        """Until the block handed to the writer thread is written (its error raised here)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def _stop_writer(self):
        if self.writer is not None:
            self.writer.shutdown()
            self.writer = None

    def _write_block(self, parts: list[np.ndarray]):
        rows = parts[0]
        size = sum(p.nbytes for p in parts)
        head = BLOCK + _U64.pack(len(rows)) + _U64.pack(size)
        _write_all(self.fd, head)
        crc = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
            _write_all(self.fd, part)
        os.write(self.fd, _U32.pack(crc))
        self.blocks.append((self.size + len(head), len(rows)))
        self.size += len(head) + size + _U32.size
        self.chain = zlib.crc32(_U32.pack(crc), self.chain)
        self.rows += len(rows)
        if self.durable and self.size - self.flushed >= WRITEBACK_START:
            # The commit's fdatasync then waits only for the last few blocks.
            start_writeback(self.fd, self.flushed, self.size - self.flushed)
            self.flushed = self.size

    def commit(self, pause=None, before_record=None):
        """Make the transaction happen: the commit record written after the blocks, then all of
        them made durable by one fdatasync (``before_record()`` called just before the record
        is written: from then on the transaction is to be finished).  One sync, not one for
        the blocks and another for the record: a power loss that kept the record but not every
        block leaves a record that does not vouch for what precedes it (each block's CRC, and
        the record's CRC of their CRCs), so the transaction is discarded as uncommitted, and the
        arrays are only touched once the sync has returned."""
        self.wait()
        self._stop_writer()
        if pause:
            pause("journaled")
        if before_record:
            before_record()
        _write_all(self.fd, _commit_record(len(self.blocks), self.rows, self.chain, self.files))
        if self.durable:
            os.fdatasync(self.fd)
            if self.new:
                fsync_dir(self.path)
        self.committed = True

    def apply(self, budget_bytes: int, pause=None, workers: Workers | None = None):
        """After the commit: write the rows into the arrays and the files, waiting for no disk.
        Durable: the journal stays (with an "applied" record) for the transactions that follow
        and the checkpoint that ends it; otherwise it is removed (nothing was promised beyond a
        killed process, and the page cache has it all)."""
        arrays = [a for _, a in self.arrays.values()]
        _replay(self.fd, self.blocks, arrays, self.specs, budget_bytes, pause, workers)
        for p, text in self.files.items():
            write_durably(p, text.encode(), durable=False)
        if self.durable:
            # Not waited for: the kernel writes the dirty pages back in its own time (within
            # dirty_expire, 30 s by default); the checkpoint waits for what is left.
            # (Starting that writeback here with sync_file_range(WRITE) blocked for 1.3 s on
            # the apply-adam benchmark and saved the next apply as much: no gain, measured.)
            _write_all(self.fd, _applied_record([p for p, _ in self.arrays.values()]))
        os.close(self.fd)
        self.fd = None
        if not self.durable:
            os.remove(self.path)

    def discard(self):
        """Before the commit: the arrays were never touched; the transaction goes (the
        journal too, when it began it)."""
        try:
            self.wait()
        except Exception:  # noqa: BLE001 - the block is dropped with its transaction
            pass
        self._stop_writer()
        if self.fd is not None:
            if not self.committed and not self.new:
                os.ftruncate(self.fd, self.start)
            os.close(self.fd)
            self.fd = None
        if not self.committed and self.new and os.path.exists(self.path):
            os.remove(self.path)


# The journal's writeback is started every this many bytes appended (sync_file_range, not waited for).
WRITEBACK_START = 8 << 20
_SYNC_FILE_RANGE_WRITE = 2
_libc = None


def start_writeback(fd: int, offset: int, length: int):
    """Start writing back ``length`` bytes of ``fd`` from ``offset`` without waiting (Linux's
    sync_file_range(SYNC_FILE_RANGE_WRITE)); nothing where that call does not exist."""
    global _libc
    if _libc is None:
        try:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True).sync_file_range
            _libc.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def _header_bytes(header: dict) -> bytes:
    data = json.dumps(header).encode()
    return MAGIC + _U64.pack(len(data)) + data + _U32.pack(zlib.crc32(data))


def _commit_record(blocks: int, rows: int, chain: int, files: dict) -> bytes:
    text = json.dumps(files).encode()
    body = _COMMIT.pack(COMMIT, blocks, rows, chain, len(text)) + text
    return body + _U32.pack(zlib.crc32(body))


def identity(path: str) -> tuple:
    """What changes when a file is written or replaced: (inode, size, mtime_ns, ctime_ns);
    zeros for a file that is gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (0, 0, 0, 0)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _applied_record(paths: list[str]) -> bytes:
    body = APPLIED + boot_id().encode("ascii") + _U32.pack(len(paths))
    body += b"".join(_STAT.pack(*identity(p)) for p in paths)
    body += _U32.pack(zlib.crc32(body))
    return body + _U32.pack(len(body) + _U32.size)


def _applied_at(data, pos: int):
    """(this boot's?, the arrays' identities, the end) of a whole "applied" record at ``pos``,
    or None."""
    fixed = len(APPLIED) + 36 + _U32.size
    if bytes(data[pos:pos + len(APPLIED)]) != APPLIED or pos + fixed > len(data):
        return None
    k = _U32.unpack_from(data, pos + fixed - _U32.size)[0]
    end = pos + fixed + k * _STAT.size + 2 * _U32.size
    if end > len(data) or k > 1 << 16:
        return None
    body = data[pos:end - 2 * _U32.size]
    if zlib.crc32(body) != _U32.unpack_from(data, end - 2 * _U32.size)[0] or \
            _U32.unpack_from(data, end - _U32.size)[0] != end - pos:
        return None
    this_boot = bytes(data[pos + len(APPLIED):pos + len(APPLIED) + 36]) == boot_id().encode("ascii")
    stats = [_STAT.unpack_from(data, pos + fixed + i * _STAT.size) for i in range(k)]
    return this_boot, stats, end


def applied_here(path: str) -> bool:
    """Whether the journal at ``path`` ends with an "applied" record of this boot: every
    transaction in it was written into the arrays by this boot, none is left to finish."""
    return _ends(path) is not None


def _ends(path: str):
    """(the header, the arrays' identities in the last "applied" record, the size, the mtime) of a
    journal that ends with an "applied" record of this boot, or None (read from its two ends)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        header = _read_header(fd)
        tail = _tail_applied(fd, st.st_size) if header is not None else None
    finally:
        os.close(fd)
    if tail is None or not tail[0]:
        return None
    return header, [tuple(s) for s in tail[1]], st.st_size, st.st_mtime


def reusable(path: str, arrays: dict, files: dict, limit: int) -> bool:
    """Whether the next transaction over ``arrays`` and ``files`` (as for ``RowJournal``) may be
    appended to the journal at ``path``: every transaction in it was written by this boot
    (``applied_here``), it is over the same arrays and files, none of the arrays changed since
    (a table replaced by ``cp`` or ``np.save`` between two applies is not continued: its
    journal is checkpointed as the array now stands), it is smaller than ``limit`` bytes, and
    younger than the time in which the OS writes dirty pages back (after that, a checkpoint
    waits for little)."""
    ends = _ends(path)
    if ends is None:
        return False
    header, stats, size, mtime = ends
    if size >= limit or time.time() - mtime > writeback_age() or header != _header_of(arrays, files):
        return False
    return stats == [identity(s["path"]) for s in header["arrays"]]


def _header_of(arrays: dict, files: dict) -> dict:
    """A journal's header for ``arrays`` and ``files`` (as for ``RowJournal``)."""
    specs = []
    for name, (path, a) in arrays.items():
        rows = as_rows(a)
        specs.append({"name": name, "path": os.path.abspath(path), "dtype": rows.dtype.str, "shape": list(rows.shape),
                      "offset": _offset(a), "pieces": _pieces(rows.shape[1] * rows.dtype.itemsize)})
    return {"arrays": specs, "piece": PIECE, "files": sorted(os.path.abspath(p) for p in files)}


def writeback_age() -> float:
    """Seconds after which Linux has written a dirty page back (dirty_expire + dirty_writeback)."""
    total = 0
    for knob in WRITEBACK_KNOBS:
        try:
            with open(knob, encoding="ascii") as f:
                total += int(f.read())
        except (OSError, ValueError):
            return 35.0
    return total / 100


def _read_header(fd: int) -> dict | None:
    head = os.pread(fd, len(MAGIC) + _U64.size, 0)
    if len(head) < len(MAGIC) + _U64.size or head[:len(MAGIC)] != MAGIC:
        return None
    length = _U64.unpack_from(head, len(MAGIC))[0]
    if length > 1 << 30:
        return None
    data = os.pread(fd, length + _U32.size, len(head))
    if len(data) < length + _U32.size or zlib.crc32(data[:length]) != _U32.unpack_from(data, length)[0]:
        return None
    return json.loads(data[:length])


def _tail_applied(fd: int, size: int):
    """The "applied" record that ends the journal, as ``_applied_at`` gives it, or None."""
    if size < _U32.size:
        return None
    length = _U32.unpack(os.pread(fd, _U32.size, size - _U32.size))[0]
    if length > size or length > 1 << 22:
        return None
    found = _applied_at(os.pread(fd, length, size - length), 0)
    # The record must end the file: a commit record's CRC read as a length could point back at
    # an earlier "applied" record and pass an unfinished transaction off as applied.
    return found if found is not None and found[2] == length else None


def _slices(fd: int, blocks, arrays: list[np.ndarray], specs: list[dict], budget_bytes: int, pause=None,
            extra: int = 0, released: bool = False):
    """Each block's (rows, the new rows of each array, the old rows' CRCs of each array), read
    in slices into one reusable buffer, the buffer, the pages written through the (N, m) maps
    ``arrays`` and ``extra`` bytes a row within ``budget_bytes``; the maps' pages given back
    after each slice (``released``: by the caller's copies, ``gather`` and ``scatter``, as
    they pass them)."""
    widths = [a.shape[1] * a.dtype.itemsize for a in arrays]
    sums = [4 * s["pieces"] for s in specs]
    row_bytes = 8 + sum(widths) + sum(sums)
    # A row written through a map holds its whole page in RSS until given back.
    paged = 0 if released else sum(max(w, mmap.PAGESIZE) for w in widths)
    per = max(1, budget_bytes // (row_bytes + extra + paged))
    buf = np.empty(min(per, max((n for _, n in blocks), default=0)) * row_bytes, np.uint8)
    for pos, n in blocks:
        for lo in range(0, n, per):
            k = min(per, n - lo)
            rows = _pread(fd, buf[:8 * k], pos + 8 * lo).view(np.int64)
            at, used, news, olds = pos + 8 * n, 8 * k, [], []
            for a, w in zip(arrays, widths):
                news.append(_pread(fd, buf[used:used + k * w], at + lo * w).view(a.dtype).reshape(k, a.shape[1]))
                at += n * w
                used += k * w
            for spec, c in zip(specs, sums):
                olds.append(_pread(fd, buf[used:used + k * c], at + lo * c).view(np.uint32).reshape(k, spec["pieces"]))
                at += n * c
                used += k * c
            yield rows, news, olds
            if not released:
                release_rows(arrays, rows)
        if pause:
            pause("written")


def _replay(fd: int, blocks, arrays: list[np.ndarray], specs: list[dict], budget_bytes: int, pause=None,
            workers: Workers | None = None):
    """Write each block's rows into the (N, m) memory maps ``arrays``."""
    for rows, news, _ in _slices(fd, blocks, arrays, specs, budget_bytes, pause, released=True):
        scatter(arrays, rows, news, workers)


def _check_unchanged(fd: int, txns: list, arrays: list[np.ndarray], specs: list[dict], piece: int,
                     budget_bytes: int, path: str, interrupted: int = 1):
    """Refuse (DataError) a replay of the transactions ``txns`` into arrays that no longer hold,
    in every journaled row, piece by piece, the row's contents before the first of them that
    touched it or after one of them (by their CRCs): arrays replaced since.  Checked a range of
    row ids at a time, each range's journaled rows (of every transaction) within
    ``budget_bytes``, so that a journal of millions of rows is checked within --memory."""
    # A process killed while it copied the rows into an array leaves the row it was copying torn
    # inside a piece (neither version), but only that one: each array's rows are copied by one
    # loop at a time.  The copies that can have been interrupted (``interrupted``): the apply's
    # own, and each replay a "replay began" record says was started (a replay killed, or cut by
    # a power loss, before it finished).  So that many unmatched rows per array are allowed (the
    # replay rewrites them) when other rows of that array vouch for them (matched): an array
    # replaced since fails in nearly every row, and with no other row to judge by, an unmatched
    # one is refused.
    torn, torn_row, matched = [0] * len(arrays), [0] * len(arrays), [0] * len(arrays)
    widths = [a.shape[1] * a.dtype.itemsize for a in arrays]
    # A journaled row in a range: its id, new rows and CRCs, the current rows gathered, the
    # concatenations, sorts and comparisons made of them (about three times the first).
    row_bytes = 3 * (8 + sum(widths) + sum(4 * s["pieces"] for s in specs)) + sum(widths)
    spans, ranges = _id_ranges(fd, txns, arrays[0].shape[0], max(1, budget_bytes // row_bytes))
    for lo, hi in ranges:
        parts = [p for p in (_range_rows(fd, t, spans[k], lo, hi, arrays, specs) for k, t in enumerate(txns)) if p]
        if not parts:
            continue
        shared = np.empty(0, np.int64)
        if len(parts) > 1:
            ids, counts = np.unique(np.concatenate([p[0] for p in parts]), return_counts=True)
            shared = ids[counts > 1]
        seen = [([], []) for _ in arrays]  # per array: the shared rows met, and which of their pieces matched
        for rows, news, olds in parts:
            many = np.isin(rows, shared, assume_unique=True) if len(shared) else np.zeros(len(rows), bool)
            one = np.flatnonzero(~many)
            for i, (a, spec, new, old, (met, ok)) in enumerate(zip(arrays, specs, news, olds, seen)):
                cur = np.empty_like(new)
                gather([a], rows, [cur])
                left = one
                matched[i] += len(left)
                while len(left):
                    bad = first_unmatched_row(_bytes(cur[left]), _bytes(new[left]), np.ascontiguousarray(old[left]),
                                              np.ascontiguousarray(rows[left]), spec["offset"], piece)
                    if bad < 0:
                        break
                    torn[i] += 1
                    matched[i] -= 1
                    torn_row[i] = int(rows[left[bad]])
                    if torn[i] > interrupted:
                        _refuse(path, spec, torn_row[i])
                    left = left[bad + 1:]
                if many.any():
                    at = np.ascontiguousarray(rows[many])
                    now = crc32c_pieces(_bytes(cur[many]), at, spec["offset"], piece, spec["pieces"])
                    after = crc32c_pieces(_bytes(new[many]), at, spec["offset"], piece, spec["pieces"])
                    met.append(at)
                    ok.append((now == old[many]) | (now == after))
        for i, (met, ok) in enumerate(seen):
            if met:
                rows, ok = np.concatenate(met), np.concatenate(ok)
                order = np.argsort(rows, kind="stable")
                uniq, starts = np.unique(rows[order], return_index=True)
                whole = np.logical_or.reduceat(ok[order], starts, axis=0).all(axis=1)
                matched[i] += int(np.count_nonzero(whole))
                if not whole.all():
                    torn[i] += int(np.count_nonzero(~whole))
                    torn_row[i] = int(uniq[np.argmin(whole)])
    for i, spec in enumerate(specs):
        if torn[i] > interrupted or (torn[i] and not matched[i]):
            _refuse(path, spec, torn_row[i])


# Row ids are counted in this many buckets to cut the check into ranges of about equal rows.
ID_BUCKETS = 4096


def _id_ranges(fd: int, txns: list, height: int, rows_per_range: int):
    """(each transaction's blocks' first and last row ids, [lo, hi) ranges of row ids holding
    about ``rows_per_range`` journaled rows each): the ids read once, a slice at a time, and
    counted in ID_BUCKETS buckets (a bucket of more rows than that is one range: ids packed
    that densely are rare, and the range is then over by that bucket's excess)."""
    counts = np.zeros(ID_BUCKETS, np.int64)
    step = max(1, rows_per_range)
    spans = []
    for t in txns:
        bounds = []
        for pos, n in t.blocks:
            first = last = None
            for lo in range(0, n, step):
                ids = _pread(fd, np.empty(8 * min(step, n - lo), np.uint8), pos + 8 * lo).view(np.int64)
                counts += np.bincount(ids * ID_BUCKETS // max(height, 1), minlength=ID_BUCKETS)[:ID_BUCKETS]
                first = ids[0] if first is None else first
                last = ids[-1]
            bounds.append((first, last))
        spans.append(bounds)
    edges = -(-np.arange(ID_BUCKETS + 1, dtype=np.int64) * height // ID_BUCKETS)  # bucket j: ids [edges[j], edges[j+1])
    ranges, lo, held = [], 0, 0
    for j in range(ID_BUCKETS):
        if held and held + counts[j] > rows_per_range:
            ranges.append((lo, int(edges[j])))
            lo, held = int(edges[j]), 0
        held += int(counts[j])
    ranges.append((lo, height))
    return spans, ranges


def _range_rows(fd: int, txn, bounds: list, lo: int, hi: int, arrays: list[np.ndarray], specs: list[dict]):
    """(row ids in [lo, hi), sorted, the new rows of each array, the old rows' CRCs of each
    array) of one transaction, or None when it has none there."""
    found = []
    for (pos, n), (first, last) in zip(txn.blocks, bounds):
        if n == 0 or last < lo or first >= hi:
            continue
        a, b = 0, n
        if first < lo or last >= hi:  # a block's rows are sorted: the run in range found by its ids
            ids = _pread(fd, np.empty(8 * n, np.uint8), pos).view(np.int64)
            a, b = (int(x) for x in np.searchsorted(ids, (lo, hi)))
        if b > a:
            found.append(_block_rows(fd, pos, n, a, b, arrays, specs))
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    rows = np.concatenate([f[0] for f in found])
    order = np.argsort(rows, kind="stable")  # the blocks of a transaction hold disjoint rows
    news = [np.concatenate(x)[order] for x in zip(*(f[1] for f in found))]
    olds = [np.concatenate(x)[order] for x in zip(*(f[2] for f in found))]
    return rows[order], news, olds


def _block_rows(fd: int, pos: int, n: int, a: int, b: int, arrays: list[np.ndarray], specs: list[dict]):
    """Rows a .. b-1 of the block at ``pos`` of n rows: (their ids, new rows of each array, old
    rows' CRCs of each array), each read into an array of its own."""
    k, at = b - a, pos + 8 * n
    rows = _pread(fd, np.empty(8 * k, np.uint8), pos + 8 * a).view(np.int64)
    news = []
    for arr in arrays:
        w = arr.shape[1] * arr.dtype.itemsize
        news.append(_pread(fd, np.empty(k * w, np.uint8), at + a * w).view(arr.dtype).reshape(k, arr.shape[1]))
        at += n * w
    olds = []
    for spec in specs:
        c = spec["pieces"]
        olds.append(_pread(fd, np.empty(4 * k * c, np.uint8), at + 4 * a * c).view(np.uint32).reshape(k, c))
        at += 4 * n * c
    return rows, news, olds


def _refuse(path: str, spec: dict, row: int):
    raise DataError(
        f"no longer holds what the journal {path} of an interrupted apply was written against (its row {row} is "
        f"neither that row before the apply nor after it): replaced or changed since, so the journal is not replayed "
        f"and nothing was touched; to discard that apply, remove {path}", path=spec["path"])


def _offset(arr: np.ndarray) -> int:
    """Where ``arr``'s data starts in its file (0 when it is not a memory map)."""
    found = file_map(arr)
    return found.offset if found is not None else 0


def _pieces(width: int) -> int:
    """The most pieces a row of ``width`` bytes is cut into at multiples of PIECE (1 when empty)."""
    return (PIECE - 1 + width - 1) // PIECE + 1 if width else 1


def _bytes(rows: np.ndarray) -> np.ndarray:
    """An (n, m) array's rows as bytes, (n, m * itemsize) uint8."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.uint8).reshape(rows.shape[0], rows.shape[1] * rows.dtype.itemsize)


def _pread(fd: int, out: np.ndarray, offset: int) -> np.ndarray:
    view = memoryview(out)
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise DataError("the journal ended early", path=f"/proc/self/fd/{fd}")
        done += got
    return out


class Txn:
    """A committed transaction of a journal: its blocks ((payload offset, rows)), the files it
    replaces (path -> text), and whether this boot wrote it into the arrays."""

    def __init__(self, blocks: list, files: dict, applied: bool):
        self.blocks = blocks
        self.files = files
        self.applied = applied


class Parsed(NamedTuple):
    header: dict | None
    txns: list  # the committed transactions, in order
    cut: bool  # whether bytes follow them (a transaction cut short)
    replays: int = 0  # the "replay began" records after them
    end: int = 0  # where those end


def _parse_header(raw, data) -> tuple[dict, int] | None:
    """The journal's header and where it ends; None for a header cut short."""
    if bytes(raw[:len(MAGIC)]) in OLD_MAGICS:
        raise DataError("a journal of an older sptool: finish it with that version (apply TABLE --recover), or "
                        "remove it if the table is known to be intact")
    if len(raw) < len(MAGIC) + _U64.size or raw[:len(MAGIC)] != MAGIC:
        if len(raw) < len(MAGIC) + _U64.size and MAGIC.startswith(bytes(raw[:len(MAGIC)])):
            return None  # cut short while its header was written
        raise DataError("not an sptool apply journal; move it away if the table is known to be intact")
    length = _U64.unpack_from(data, len(MAGIC))[0]
    start = len(MAGIC) + _U64.size
    end = start + length + _U32.size
    if end > len(raw) or zlib.crc32(data[start:start + length]) != _U32.unpack_from(data, start + length)[0]:
        return None
    return json.loads(bytes(data[start:start + length])), end


class _Blocks(NamedTuple):
    found: list  # (payload offset, rows) of each whole block
    chain: int  # the CRC of their CRCs, which the commit record vouches for
    end: int  # where the last whole block ends
    released: int  # how far the journal's pages have been given back


def _read_blocks(raw, data, at: int, row_bytes: int, released: int) -> _Blocks:
    """The whole blocks from ``at`` on, up to the first that is cut short or damaged."""
    blocks, chain = [], 0
    head = len(BLOCK) + 2 * _U64.size
    while at + head <= len(data) and bytes(data[at:at + len(BLOCK)]) == BLOCK:
        n = _U64.unpack_from(data, at + len(BLOCK))[0]
        size = _U64.unpack_from(data, at + len(BLOCK) + _U64.size)[0]
        stop = at + head + size + _U32.size
        if size != n * row_bytes or stop > len(data):
            break
        crc = zlib.crc32(data[at + head:at + head + size])
        if crc != _U32.unpack_from(data, at + head + size)[0]:
            break
        if isinstance(raw, mmap.mmap) and at + head + size - released >= RELEASE:
            # The journal's pages read so far given back: a journal can be larger than --memory.
            upto = (at + head + size) // mmap.PAGESIZE * mmap.PAGESIZE
            raw.madvise(mmap.MADV_DONTNEED, released, upto - released)
            released = upto
        blocks.append((at + head, n))
        chain = zlib.crc32(_U32.pack(crc), chain)
        at = stop
    return _Blocks(blocks, chain, at, released)


def _read_commit(data, at: int, blocks: _Blocks) -> tuple[dict, int] | None:
    """The files and end of the commit record at ``at`` that vouches for ``blocks``; None if
    there is none whole."""
    if at + _COMMIT.size > len(data):
        return None
    magic, count, rows, crc, text = _COMMIT.unpack_from(data, at)
    stop = at + _COMMIT.size + text + _U32.size
    if (magic != COMMIT or count != len(blocks.found) or rows != sum(n for _, n in blocks.found)
            or crc != blocks.chain or stop > len(data)
            or zlib.crc32(data[at:stop - _U32.size]) != _U32.unpack_from(data, stop - 4)[0]):
        return None
    return json.loads(bytes(data[at + _COMMIT.size:stop - _U32.size])), stop


def _parse(raw) -> Parsed:
    """A journal's bytes parsed; a header cut short gives (None, [], False)."""
    data = memoryview(raw)
    parsed = _parse_header(raw, data)
    if parsed is None:
        return Parsed(None, [], False)
    header, pos = parsed
    row_bytes = 8 + sum(int(np.prod(s["shape"][1:], dtype=np.int64)) * np.dtype(s["dtype"]).itemsize + 4 * s["pieces"]
                        for s in header["arrays"])
    txns, released = [], 0
    while True:
        blocks = _read_blocks(raw, data, pos, row_bytes, released)
        released = blocks.released
        commit = _read_commit(data, blocks.end, blocks)
        if commit is None:
            break
        files, stop = commit
        applied = _applied_at(data, stop)
        txns.append(Txn(blocks.found, files, bool(applied and applied[0])))
        pos = applied[2] if applied else stop
    replays = 0
    while bytes(data[pos:pos + len(_REPLAY_RECORD)]) == _REPLAY_RECORD:
        replays += 1
        pos += len(_REPLAY_RECORD)
    return Parsed(header, txns, pos < len(data), replays, pos)


def _transactions(f, size: int, path: str) -> Parsed:
    """The journal open as ``f`` parsed: from its two ends alone when this boot applied every
    transaction it holds (the usual case), else whole, mapped rather than read (a journal can be
    larger than --memory)."""
    header = _read_header(f.fileno())
    tail = _tail_applied(f.fileno(), size)
    if header is not None and tail is not None and tail[0]:
        return Parsed(header, [Txn([], {}, True)], False, 0, size)
    raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    try:
        return _parse(raw)
    except DataError as e:
        raise DataError(e.message, path=path) from None
    finally:
        if isinstance(raw, mmap.mmap):
            try:
                raw.close()
            except BufferError:  # a view still held by a traceback or a profiler: the collector unmaps it
                pass


def _write_back_files(header: dict, txns: list, durable: bool):
    """The arrays synced and the files the committed transactions replace written, after their
    rows are in the arrays."""
    if durable:
        for spec in header["arrays"]:
            # An array removed since (a state reset) is left alone.
            if os.path.exists(spec["path"]):
                _sync_file(spec["path"])
    files = {}
    for t in txns:
        files.update(t.files)
    for p in header["files"]:
        if p in files and os.path.isdir(os.path.dirname(p)):
            write_durably(p, files[p].encode(), durable=durable)
        elif durable and os.path.exists(p):
            _sync_file(p)  # written by this boot (renamed in place): made durable as it stands
            fsync_dir(p)


def recover_journal(path: str, *, durable: bool = True, budget_bytes: int = 64 << 20, pause=None,
                    workers: Workers | None = None) -> int | None:
    """Checkpoint the journal ``path``: its committed transactions are made durable in their
    arrays and files (the rows written again, in order, of those this boot did not write), a
    transaction cut short before its commit record discarded; the journal goes.  Returns the
    rows replayed (0 when nothing needed writing), -1 when a transaction that had not committed
    was discarded, or None when there is no journal.  Not ``durable``: nothing waits for the
    disk."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        header, txns, cut, replays, end = _transactions(f, os.fstat(f.fileno()).st_size, path)
        if not txns:
            _remove(path, durable)
            return -1
        todo = [t for t in txns if not t.applied]
        replayed = 0
        if todo:
            arrays = [a for _, a in _reopen(header, path)]
            _check_unchanged(f.fileno(), todo, arrays, header["arrays"], header["piece"], budget_bytes, path,
                             interrupted=1 + replays)
            _replay_begins(path, end, durable)
            for t in todo:
                _replay(f.fileno(), t.blocks, arrays, header["arrays"], budget_bytes, pause, workers)
                replayed += sum(n for _, n in t.blocks)
            del arrays
    _write_back_files(header, txns, durable)
    _remove(path, durable)
    return -1 if cut and not replayed else replayed


def _replay_begins(path: str, end: int, durable: bool):
    """Record, durably, that a replay of the journal's transactions begins (a transaction cut
    short after them is dropped first: it never committed).  Each such record lets the check of
    the next recovery allow one more torn row per array: the row this replay's copy loop may be
    writing when a kill or a power loss interrupts it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, end)
        os.pwrite(fd, _REPLAY_RECORD, end)
        if durable:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def _reopen(header: dict, path: str) -> list:
    arrays = []
    for spec in header["arrays"]:
        try:
            a = np.load(spec["path"], mmap_mode="r+")
        except (OSError, ValueError) as e:
            raise DataError(f"cannot reopen {spec['path']} to finish a committed apply ({e})", path=path) from None
        a = as_rows(a)
        if a.dtype.str != spec["dtype"] or list(a.shape) != spec["shape"]:
            raise DataError(f"{spec['path']} changed shape or type since the committed apply; cannot finish it",
                            path=path)
        arrays.append((spec["path"], a))
    return arrays


def _remove(path: str, durable: bool = True):
    os.remove(path)
    if durable:
        fsync_dir(path)
