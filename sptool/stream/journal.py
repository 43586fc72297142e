"""A redo (write-ahead) journal for updating rows of memory-mapped .npy arrays in place, all or
nothing, without waiting for the arrays' own writeback.

A transaction appends the NEW contents of the rows it changes (in every array it touches),
block by block, to the journal; small files replaced in the same transaction (a state JSON)
have their new text in the journal's header.  ``commit()`` fsyncs the journal and then appends
and fsyncs a commit record: from then on the transaction has happened.  Only then are the rows
written into the arrays (``apply()``), and the files replaced, neither waited for: the journal
says it all.  The arrays are never touched before the commit record is durable, so a journal
without one is simply discarded.

The journal stays beside the table until the next transaction (or ``recover_journal``)
checkpoints it: a committed journal's rows are written again (idempotent: the blocks hold
disjoint rows' final contents) unless an "applied" record says that this very boot of the
system already wrote them (a page cache that has not been through an OS crash or power loss
holds them, written back or not), then the arrays are fdatasynced and the journal goes.  Each
block and record ends with a CRC-32, so a torn tail is told from a whole one, and the commit
record carries the number of blocks and a CRC of their CRCs, so it vouches for all of them.

A block also holds, per row and array, the CRC-32C of the row's OLD contents, piece by piece
(a row cut at the file's page boundaries, ``PIECE``: pages are written back whole, so a crash
tears a row only there).  Before a replay every journaled row must be, piece by piece, either
its new contents (written before the crash) or of its old CRC (not yet written); a row that is
neither means the array is no longer the one the journal was written against (replaced by
``cp`` or ``np.save`` since: same name, same shape), and the replay is refused, touching
nothing, rather than writing an old update into a new array.

Layout: ``MAGIC``, u64 header length, the header JSON, u32 CRC; then blocks of ``BLOCK``, u64
rows n, u64 payload length, the payload (rows as int64 [n], then the new rows of each array in
header order, [n, m] in its dtype, then the old rows' CRC-32Cs of each array, uint32 [n, pieces]
with the array's ``pieces`` from the header), u32 CRC; then ``COMMIT``, u64 blocks, u64 rows, u32 CRC of
the blocks' CRCs, u32 CRC of the record; then, maybe, ``APPLIED``, the boot id (36 bytes), u32
CRC of the record.
"""

from __future__ import annotations

import json
import mmap
import os
import signal
import struct
import threading
import zlib

import numpy as np

from .._tfrecord import crc32c_pieces, first_unmatched_row
from ..errors import DataError

MAGIC = b"SPTREDO2"
OLD_MAGICS = (b"SPTREDO1",)  # journals without the old rows' CRCs
BLOCK = b"BLK3"
COMMIT = b"CMT2"
APPLIED = b"APL2"
PIECE = 4096  # where rows are cut for their CRCs: a page, the unit the OS writes back
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_COMMIT = struct.Struct("<4sQQI")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


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


def _memmap_of(arr: np.ndarray):
    base = arr
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    return base if base is not None and getattr(base, "_mmap", None) is not None else None


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
        base = _memmap_of(arr)
        if base is None:
            continue
        width = arr.shape[1] * arr.dtype.itemsize
        start = base.offset % mmap.ALLOCATIONGRANULARITY  # where the array begins in the map
        lo = start + int(rows[0]) * width
        hi = start + (int(rows[-1]) + 1) * width
        lo -= lo % mmap.PAGESIZE
        hi = min(-(-hi // mmap.PAGESIZE) * mmap.PAGESIZE, len(base._mmap))
        try:
            base._mmap.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (AttributeError, OSError, ValueError):
            pass


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
    """The journal of one transaction over ``arrays`` (name -> (path, memory map opened r+)) and
    ``files`` (path -> the new text).  ``append(rows, new)`` for each block of rows (their new
    contents, nothing written to the arrays yet); ``commit()``; then ``apply()`` writes them.
    A failure before the commit: ``discard()``."""

    def __init__(self, path: str, arrays: dict, files: dict, *, durable: bool = True):
        self.path = path
        self.durable = durable
        self.arrays = {name: (os.path.abspath(p), as_rows(a)) for name, (p, a) in arrays.items()}
        self.files = {os.path.abspath(p): text for p, text in files.items()}
        self.specs = [{"name": n, "path": p, "dtype": a.dtype.str, "shape": list(a.shape), "offset": _offset(a),
                       "pieces": _pieces(a.shape[1] * a.dtype.itemsize)} for n, (p, a) in self.arrays.items()]
        header = json.dumps({"arrays": self.specs, "piece": PIECE, "files": self.files}).encode()
        # O_EXCL: a second apply on the same table while one runs (the caller holds a lock too).
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self.size = len(MAGIC) + _U64.size + len(header) + _U32.size
        os.write(self.fd, MAGIC + _U64.pack(len(header)) + header + _U32.pack(zlib.crc32(header)))
        self.blocks = []  # (payload offset, rows)
        self.chain = 0  # CRC of the blocks' CRCs
        self.rows = 0
        self.committed = False

    def checksums(self, rows: np.ndarray, old: list[np.ndarray]) -> list[np.ndarray]:
        """The CRC-32Cs, piece by piece, of the OLD contents ``old`` ((n, m) per array, in
        order) of ``rows``, to append with their new contents."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        return [crc32c_pieces(_bytes(a), rows, spec["offset"], PIECE, spec["pieces"])
                for a, spec in zip(old, self.specs)]

    def append(self, rows: np.ndarray, new: list[np.ndarray], old_crcs: list[np.ndarray] | None = None):
        """Append the new contents ``new`` ((n, m) per array, in order) of ``rows`` (int64,
        sorted, unique, and disjoint from every other block's) and the ``checksums`` of their
        old contents (by default of the rows the arrays hold now)."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if old_crcs is None:
            old_crcs = self.checksums(rows, [np.take(a, rows, axis=0) for _, a in self.arrays.values()])
        parts = [rows, *(np.ascontiguousarray(a) for a in new), *(np.ascontiguousarray(c) for c in old_crcs)]
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

    def commit(self, pause=None, before_record=None):
        """Make the transaction happen: the blocks durable, then a durable commit record
        (``before_record()`` called just before it is written: from then on the transaction
        is to be finished)."""
        if self.durable:
            os.fdatasync(self.fd)
            fsync_dir(self.path)
        if pause:
            pause("journaled")
        if before_record:
            before_record()
        _write_all(self.fd, _commit_record(len(self.blocks), self.rows, self.chain))
        if self.durable:
            os.fdatasync(self.fd)
        self.committed = True

    def apply(self, budget_bytes: int, pause=None):
        """After the commit: write the rows into the arrays and the files, waiting for no disk.
        Durable: the journal stays (with an "applied" record) for the next checkpoint;
        otherwise it is removed (nothing was promised beyond a
        killed process, and the page cache has it all)."""
        arrays = [a for _, a in self.arrays.values()]
        _replay(self.fd, self.blocks, arrays, self.specs, budget_bytes, pause)
        for p, text in self.files.items():
            write_durably(p, text.encode(), durable=False)
        if self.durable:
            # Not waited for: the kernel writes the dirty pages back in its own time (within
            # dirty_expire, 30 s by default); the next checkpoint waits for what is left.
            # (Starting that writeback here with sync_file_range(WRITE) blocked for 1.3 s on
            # the apply-adam benchmark and saved the next apply as much: no gain, measured.)
            _write_all(self.fd, _applied_record())
        os.close(self.fd)
        self.fd = None
        if not self.durable:
            os.remove(self.path)

    def discard(self):
        """Before the commit: the arrays were never touched; the journal goes."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if not self.committed and os.path.exists(self.path):
            os.remove(self.path)


def _commit_record(blocks: int, rows: int, chain: int) -> bytes:
    body = _COMMIT.pack(COMMIT, blocks, rows, chain)
    return body + _U32.pack(zlib.crc32(body))


def _applied_record() -> bytes:
    body = APPLIED + boot_id().encode("ascii")
    return body + _U32.pack(zlib.crc32(body))


def _slices(fd: int, blocks, arrays: list[np.ndarray], specs: list[dict], budget_bytes: int, pause=None,
            extra: int = 0):
    """Each block's (rows, the new rows of each array, the old rows' CRCs of each array), read
    in slices into one reusable buffer, the buffer, the pages written through the (N, m) maps
    ``arrays`` and ``extra`` bytes a row within ``budget_bytes``; the maps' pages given back
    after each slice."""
    widths = [a.shape[1] * a.dtype.itemsize for a in arrays]
    sums = [4 * s["pieces"] for s in specs]
    row_bytes = 8 + sum(widths) + sum(sums)
    # A row written through a map holds its whole page in RSS until given back.
    per = max(1, budget_bytes // (row_bytes + extra + sum(max(w, mmap.PAGESIZE) for w in widths)))
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
            release_rows(arrays, rows)
        if pause:
            pause("written")


def _replay(fd: int, blocks, arrays: list[np.ndarray], specs: list[dict], budget_bytes: int, pause=None):
    """Write each block's rows into the (N, m) memory maps ``arrays``."""
    for rows, news, _ in _slices(fd, blocks, arrays, specs, budget_bytes, pause):
        for a, new in zip(arrays, news):
            a[rows] = new


def _check_unchanged(fd: int, blocks, arrays: list[np.ndarray], specs: list[dict], piece: int, budget_bytes: int,
                     path: str):
    """Refuse (DataError) a replay into arrays that no longer hold, in every journaled row,
    either the row's new contents or its old ones (by their CRCs): arrays replaced since."""
    extra = sum(a.shape[1] * a.dtype.itemsize for a in arrays)  # each slice's current rows, copied
    for rows, news, olds in _slices(fd, blocks, arrays, specs, budget_bytes, extra=extra):
        for a, spec, new, old in zip(arrays, specs, news, olds):
            bad = first_unmatched_row(_bytes(np.take(a, rows, axis=0)), _bytes(new), old, rows, spec["offset"],
                                      piece)
            if bad >= 0:
                raise DataError(
                    f"no longer holds what the journal {path} of an interrupted apply was written against (its "
                    f"row {int(rows[bad])} is neither that row before the apply nor after it): replaced or changed "
                    f"since, so the journal is not replayed and nothing was touched; to discard that apply, "
                    f"remove {path}", path=spec["path"])


def _offset(arr: np.ndarray) -> int:
    """Where ``arr``'s data starts in its file (0 when it is not a memory map)."""
    base = _memmap_of(arr)
    return int(base.offset) if base is not None else 0


def _pieces(width: int) -> int:
    """The most pieces a row of ``width`` bytes is cut into at multiples of PIECE (1 when empty)."""
    return (PIECE - 1 + width - 1) // PIECE + 1 if width else 1


def _bytes(rows: np.ndarray) -> np.ndarray:
    """An (n, m) array's rows as bytes, (n, m * itemsize) uint8."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.uint8).reshape(rows.shape[0], -1)


def _pread(fd: int, out: np.ndarray, offset: int) -> np.ndarray:
    view = memoryview(out)
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise DataError("the journal ended early", path=f"/proc/self/fd/{fd}")
        done += got
    return out


def _parse(raw) -> tuple[dict | None, list, bool, bool]:
    """(header, whole blocks, committed, applied in this boot) of a journal's bytes; a header
    cut short gives (None, [], False, False)."""
    data = memoryview(raw)
    if bytes(raw[:len(MAGIC)]) in OLD_MAGICS:
        raise DataError("a journal of an older sptool, without the checks this one replays with: finish it with "
                        "that version (apply TABLE --recover), or remove it if the table is known to be intact")
    if len(raw) < len(MAGIC) + _U64.size or raw[:len(MAGIC)] != MAGIC:
        if len(raw) < len(MAGIC) + _U64.size and MAGIC.startswith(bytes(raw[:len(MAGIC)])):
            return None, [], False, False  # cut short while its header was written
        raise DataError("not an sptool apply journal; move it away if the table is known to be intact")
    length = _U64.unpack_from(data, len(MAGIC))[0]
    start = len(MAGIC) + _U64.size
    end = start + length + _U32.size
    if end > len(raw) or zlib.crc32(data[start:start + length]) != _U32.unpack_from(data, start + length)[0]:
        return None, [], False, False
    header = json.loads(bytes(data[start:start + length]))
    widths = [int(np.prod(s["shape"][1:], dtype=np.int64)) * np.dtype(s["dtype"]).itemsize + 4 * s["pieces"]
              for s in header["arrays"]]
    blocks, chain, pos = [], 0, end
    head = len(BLOCK) + 2 * _U64.size
    while pos + head <= len(data) and bytes(data[pos:pos + len(BLOCK)]) == BLOCK:
        n = _U64.unpack_from(data, pos + len(BLOCK))[0]
        size = _U64.unpack_from(data, pos + len(BLOCK) + _U64.size)[0]
        stop = pos + head + size + _U32.size
        if size != n * (8 + sum(widths)) or stop > len(data):
            break
        crc = zlib.crc32(data[pos + head:pos + head + size])
        if crc != _U32.unpack_from(data, pos + head + size)[0]:
            break
        blocks.append((pos + head, n))
        chain = zlib.crc32(_U32.pack(crc), chain)
        pos = stop
    rows = sum(n for _, n in blocks)
    record = _commit_record(len(blocks), rows, chain)
    committed = bytes(data[pos:pos + len(record)]) == record
    pos += len(record)
    applied = committed and bytes(data[pos:pos + len(APPLIED) + 40]) == _applied_record()
    return header, blocks, committed, applied


def recover_journal(path: str, *, durable: bool = True, budget_bytes: int = 64 << 20, pause=None) -> int | None:
    """Checkpoint the transaction ``path`` records: a committed one is made durable in its
    arrays and files (its rows written again unless this boot already wrote them), an
    uncommitted one discarded; the journal goes either way.  Returns the rows replayed (0 when
    nothing needed writing), -1 when an uncommitted journal was discarded, or None when there
    is no journal.  Not ``durable``: nothing waits for the disk."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        # Mapped, not read: a journal can be larger than --memory.
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
        try:
            header, blocks, committed, applied = _parse(raw)
        except DataError as e:
            raise DataError(e.message, path=path) from None
        finally:
            if isinstance(raw, mmap.mmap):
                try:
                    raw.close()
                except BufferError:  # a view still held by a traceback or a profiler: the collector unmaps it
                    pass
        if not committed:
            _remove(path, durable)
            return -1
        replayed = 0
        if not applied:
            arrays = [a for _, a in _reopen(header, path)]
            _check_unchanged(f.fileno(), blocks, arrays, header["arrays"], header["piece"], budget_bytes, path)
            _replay(f.fileno(), blocks, arrays, header["arrays"], budget_bytes, pause)
            replayed = sum(n for _, n in blocks)
            del arrays
    if durable:
        for spec in header["arrays"]:
            # Written by this boot: only synced, and an array removed since (a state reset) is
            # left alone.
            if os.path.exists(spec["path"]):
                _sync_file(spec["path"])
    for p, text in header["files"].items():
        write_durably(p, text.encode(), durable=durable)
    _remove(path, durable)
    return replayed


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
