"""TFRecord files of tf.train.Example records, read and written without TensorFlow.

Reading gives what TensorFlow computes from such a file:

- ``ids`` (and ``values``): ``tf.compat.v1.sparse_merge(parse_example(VarLenFeature ids),
  parse_example(VarLenFeature values), vocab_size)``, the [n_examples, vocab_size] tensor.
  An example's repeated ids stay separate entries, as TensorFlow keeps them (the format
  reads them as a sum); without ``values`` every id gets the value 1 (float32).
- ``feature``: ``parse_example`` with ``VarLenFeature``, the [n_examples, max_len] tensor of
  one feature's values by position (int64, float32, or bytes as binary).
- ``labels`` with ``label_feature``: one scalar per example, written to a .npy beside it.

The records are read in blocks of whole records sized from --memory, their framing and both
CRCs checked and their Examples decoded by the compiled kernels in sptool/_tfrecord.pyx, so a
file of any size converts in bounded memory.  A second thread reads, frames and decodes the
next block while the current one is checked and written (``_Prefetch``); every check that
depends on earlier blocks, and so every error, happens in order, as a plain loop would.  Records
are numbered from 0, like the rows of the output; an error names the record and its byte offset
(in the decompressed stream).

Writing makes one Example per row of a 2-D tensor (rows in order, empty rows as Examples
with empty lists), holding the ids (column numbers) and values of the row.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from .. import _tfrecord as tfr
from ..errors import DataError, InputError, UsageError
from ..format import TensorMeta, default_fill
from ..io import AtomicTarget, GrowingNpy, SideOutputs, check_dense_rows, open_npy, open_output
from . import text
from .common import Options, Reader, cast_or_fail, check_not_hybrid, check_zero_fill
from .compression import open_binary
from .rows import row_blocks

COMPRESSIONS = ("none", "gzip", "zlib")
KIND_NAMES = {tfr.K_BYTES: "bytes_list", tfr.K_FLOAT: "float_list", tfr.K_INT64: "int64_list"}
KIND_TYPES = {tfr.K_BYTES: "binary", tfr.K_FLOAT: "float32", tfr.K_INT64: "int64"}
_STATUS = {
    tfr.ERR_LENGTH_CRC: "the CRC-32C of its length does not match (corrupt, or not a TFRecord file)",
    tfr.ERR_DATA_CRC: "the CRC-32C of its data does not match (corrupt record)",
    tfr.ERR_WIRE: "is not a tf.train.Example (bad protobuf encoding)",
    tfr.ERR_KIND: "is not a tf.train.Example (a Feature that is no bytes_list, float_list or int64_list)",
}
# A record must fit in a block, and a block holds a small share of --memory.
_RECORD_SHARE = 8


@dataclass(frozen=True)
class TFRecordOptions:
    """The options of TFRecord input and output (``Options.tfrecord``)."""

    ids: str | None = None
    values: str | None = None
    vocab_size: int | None = None
    feature: str | None = None
    labels: str | None = None
    label_feature: str = "label"
    compression: str | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.ids, self.values, self.vocab_size, self.feature, self.labels,
                                           self.compression)) or self.label_feature != "label"


def tfrecord_options(src_fmt: str, dst_fmt: str, **given) -> TFRecordOptions | None:
    """The checked TFRecord options of a conversion (None when it involves no TFRecord file)."""
    t = TFRecordOptions(**{k: v for k, v in given.items() if v is not None})
    if "tfrecord" not in (src_fmt, dst_fmt):
        if t.given:
            # Name only the options given: --ids and --values also name JSON lines keys.
            named = [f"--{k.replace('_', '-')}" for k, v in given.items()
                     if v not in (None, getattr(TFRecordOptions, k))]
            raise UsageError(f"{', '.join(named)}: only for TFRecord (.tfrecord) input or output here")
        return None
    if t.compression is not None and t.compression.lower() not in COMPRESSIONS:
        raise UsageError(f"--compression {t.compression!r} is not one of {', '.join(COMPRESSIONS)}")
    if src_fmt == "tfrecord":
        if (t.ids is None) == (t.feature is None):
            raise UsageError("a TFRecord input needs --ids FEATURE (with --vocab-size) or --feature FEATURE")
        if t.ids is not None and (t.vocab_size is None or t.vocab_size < 0):
            raise UsageError("--ids needs --vocab-size V (ids must lie in [0, V))")
        if t.feature is not None and (t.values is not None or t.vocab_size is not None):
            raise UsageError("--feature gives one feature's values by position; --values and --vocab-size go "
                             "with --ids")
    else:
        if t.ids is None:
            raise UsageError("a TFRecord output needs --ids NAME (the feature of each row's column numbers)")
        if t.feature is not None or t.vocab_size is not None:
            raise UsageError("--feature and --vocab-size apply to TFRecord input")
    if t.labels is not None and not t.labels.endswith(".npy"):
        raise UsageError("--labels must name a .npy file", path=t.labels)
    return t


# -- reading ------------------------------------------------------------------------------

def _codec(path: str, head: bytes, given: str | None) -> str:
    """The compression of a TFRecord input: --compression, else its name (.gz), else its first bytes.

    A plain file starts with a length whose masked CRC follows it, which no GZIP or ZLIB
    stream does by chance (4 bytes must match), so that check comes first."""
    if given:
        return given.lower()
    if path.lower().endswith((".gz", ".gzip")):
        return "gzip"
    if len(head) >= 12 and tfr.masked_crc32c(np.frombuffer(head[:8], np.uint8)) == int.from_bytes(head[8:12],
                                                                                                 "little"):
        return "none"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return "none"  # an empty or corrupt file: the framing check names the problem


class _Records:
    """The decompressed bytes of a TFRecord input, cut into blocks of whole, verified records."""

    def __init__(self, path: str, compression: str | None, block: int, max_record: int):
        self.raw, self._owned, self.name = open_binary(path, "a TFRecord file")
        self.block, self.max_record = block, max_record
        self.head = self._raw_read(12)
        self.codec = _codec(path, self.head, compression)
        self._wbits = 31 if self.codec == "gzip" else 15
        self._inflater = zlib.decompressobj(self._wbits)
        self._between_members = not self.head  # an empty file is an empty stream
        self._ended = False
        self.record = 0  # number of the first record not yet returned
        self.offset = 0  # its byte offset in the decompressed stream

    def _raw_read(self, n: int) -> bytes:
        try:
            return self.raw.read(n)
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror}", path=self.name) from None

    def _read(self, n: int) -> bytes:
        """Up to n more decompressed bytes (fewer only at the end of the input)."""
        if self.codec == "none":
            data, self.head = self.head + self._raw_read(max(n - len(self.head), 0)), b""
            return data
        out, got = [], 0
        while got < n and not self._ended:
            source = self._inflater.unconsumed_tail
            if not source:
                source, self.head = self.head or self._raw_read(self.block), b""
                if not source:
                    if not self._between_members:
                        raise DataError(f"record {self.record}: the {self.codec} stream is cut short", path=self.name)
                    self._ended = True
                    break
            self._between_members = False
            try:
                piece = self._inflater.decompress(source, n - got)
            except zlib.error as e:
                raise DataError(f"record {self.record}: cannot decompress ({self.codec}): {e}",
                                path=self.name) from None
            out.append(piece)
            got += len(piece)
            if self._inflater.eof:  # another member may follow (concatenated gzip files)
                self.head = self._inflater.unused_data
                self._inflater = zlib.decompressobj(self._wbits)
                self._between_members = True
        return b"".join(out)

    def blocks(self):
        """Yield (buf, offsets, lengths, first record number, byte offset of the block) for each
        block of whole records."""
        carry = b""
        want = self.block
        while True:
            data = self._read(max(want - len(carry), 1))
            buf = carry + data if carry else data
            offsets, lengths, end, status, next_length = tfr.scan_records(np.frombuffer(buf, dtype=np.uint8))
            if status:
                self._fail(self.record + len(offsets), self.offset + end, _STATUS[status])
            if len(offsets):
                yield buf, offsets, lengths, self.record, self.offset
                self.record += len(offsets)
                self.offset += end
            carry = buf[end:]
            if not data:
                if carry:
                    self._truncated(carry, next_length)
                return
            if next_length > self.max_record:
                self._fail(self.record, self.offset, f"its length {next_length} is more than --memory allows "
                                                      f"for one record ({self.max_record} bytes); give more --memory")
            want = max(self.block, next_length + tfr.HEADER + tfr.FOOTER) if next_length >= 0 else self.block

    def _truncated(self, carry: bytes, next_length: int):
        if len(carry) < tfr.HEADER:
            why = f"the file ends inside its header ({len(carry)} of {tfr.HEADER} bytes)"
        elif next_length >= 0:
            have = len(carry) - tfr.HEADER
            why = (f"its length {next_length} runs past the end of the file ({have} bytes of data and CRC "
                   f"follow, {next_length + tfr.FOOTER} needed)")
        else:
            why = "truncated"
        self._fail(self.record, self.offset, why)

    def _fail(self, record: int, offset: int, why: str):
        raise DataError(f"record {record} (byte {offset}): {why}", path=self.name)

    def close(self):
        if self._owned:
            self.raw.close()


@dataclass
class _Column:
    """One requested feature: its name and, once a record shows it, its kind."""

    name: str
    kind: int = tfr.K_NONE
    first_record: int = -1


class TFRecordReader(Reader):
    fmt = "tfrecord"

    def __init__(self, src: str, opts: Options):
        t: TFRecordOptions = opts.tfrecord
        budget = opts.budget
        block = text.chunk_bytes(budget)
        self.records = _Records(src, t.compression, block, max(budget.total // _RECORD_SHARE, block))
        self.name = self.records.name
        self.opts, self.t = opts, t
        self.varlen = t.feature is not None
        self.columns = [_Column(t.feature if self.varlen else t.ids)]
        if t.values is not None:
            self.columns.append(_Column(t.values))
        self.label = None
        if t.labels is not None:
            self.label = _Column(t.label_feature)
            self.columns.append(self.label)
        names = [c.name.encode() for c in self.columns]
        self._names = np.frombuffer(b"".join(names), dtype=np.uint8)
        self._name_ends = np.cumsum([len(n) for n in names]).astype(np.int64)
        self.max_len = 0
        self.n_records = 0
        self._labels_out: GrowingNpy | None = None
        self._sides = SideOutputs()
        self._labels_path = t.labels
        self._blocks = self.records.blocks()
        self._scans = _Prefetch(self._scan, self._blocks)
        self._base = 0  # byte offset of the block being decoded (its errors count from it)
        # The value type must be known before the first row is written: decode ahead until a
        # record shows the kind of the values (records before it hold no entries).
        self._ahead = []
        try:
            while self._kind_open():
                item = self._next_decoded()
                if item is None:
                    break
                self._ahead.append(item)
        except BaseException:
            self.close()
            raise
        value_col = self.columns[0] if self.varlen else (self.columns[1] if t.values is not None else None)
        kind = value_col.kind if value_col is not None else tfr.K_NONE
        if self.varlen and kind == tfr.K_NONE and not self._ahead_has_entries():
            self.close()
            raise DataError(f"no record has a feature named {t.feature!r} (its type is unknown)", path=self.name)
        vt = KIND_TYPES.get(kind, "float32")
        self.cast = opts.value_type is not None and opts.value_type != vt
        vt = opts.value_type or vt
        width = None if self.varlen else t.vocab_size
        self.meta = TensorMeta(shape=(None, width), sparse_ndim=2, value_type=vt, fill_value=default_fill(vt),
                               sort_order=(0, 1), unique=False)
        # Positions within an example are distinct; ids may repeat (TensorFlow keeps them).
        self.unique_claim = True if self.varlen else None

    def _ahead_has_entries(self) -> bool:
        return any(len(item[0][0]) for item in self._ahead)

    def _kind_open(self) -> bool:
        cols = self.columns if self.varlen else self.columns[1:]
        return any(c.kind == tfr.K_NONE for c in cols)

    def _next_decoded(self):
        """The next block's (keys, values, labels, records), or None at the end."""
        scanned = self._scans.next()
        return None if scanned is None else self._decode(scanned)

    def batches(self):
        try:
            for item in self._ahead:
                yield from self._emit(item)
            self._ahead = []
            while True:
                item = self._next_decoded()
                if item is None:
                    break
                yield from self._emit(item)
            width = self.max_len if self.varlen else self.t.vocab_size
            self.meta = self.meta.with_(shape=(self.n_records, width))
            if self.label is not None and self._labels_out is None:
                self._open_labels(tfr.K_INT64)  # no records: an empty int64 label array
        except BaseException:
            self._sides.abort()
            raise

    def _emit(self, item):
        keys, values, labels, n = item
        self.n_records += n
        if labels is not None:
            self._labels_out.append(labels)
        if self.cast:
            values = cast_or_fail(_plain(values), self.meta.dtype, lambda r, k=keys: f"record {int(k[0, r])}",
                                  self.name)
        self.rows_in += keys.shape[1]
        if keys.shape[1]:
            yield keys, values

    # -- decoding one block ---------------------------------------------------------------
    def _scan(self, block) -> _Scanned:
        """The kernels' work on a block, on the decoding thread: it reads no state that the
        blocks before it change, so it runs ahead of them.  Where a column has one kind in every
        record of the block, its numbers are read (and the ids' order within rows found); what
        is checked against earlier blocks, and every error, waits for ``_decode``, in order."""
        buf, offsets, lengths, first, base = block
        data = np.frombuffer(buf, dtype=np.uint8)
        located = tfr.locate_features(data, offsets, lengths, self._names, self._name_ends)
        scanned = _Scanned(data, offsets, first, base, located)
        kinds, firsts, lasts, counts, status, _ = located
        if status:
            return scanned
        try:
            for f in range(len(self.columns)):
                present = kinds[:, f][kinds[:, f] != tfr.K_NONE]
                if len(present) and present[0] in (tfr.K_INT64, tfr.K_FLOAT) and (present == present[0]).all():
                    kind, total = int(present[0]), int(counts[:, f].sum())
                    scanned.numbers[f, kind, total] = tfr.read_numbers(data, firsts[:, f], lasts[:, f], total, kind)
            ids = scanned.numbers.get((0, tfr.K_INT64, int(counts[:, 0].sum())))
            if ids is not None and not self.varlen:
                scanned.order = (tfr.order_within_rows(np.ascontiguousarray(counts[:, 0]), ids),)
        except Exception:  # noqa: BLE001 (the same call in _decode raises it in its turn)
            scanned.numbers, scanned.order = {}, None
        return scanned

    def _decode(self, scanned: _Scanned):
        data, offsets, first = scanned.data, scanned.offsets, scanned.first
        self._base = scanned.base
        self._scanned = scanned
        kinds, firsts, lasts, counts, status, bad = scanned.located
        if status:
            self._fail(first + bad, offsets[bad], _STATUS[status])
        n = len(offsets)
        for f, col in enumerate(self.columns):
            self._check_kind(col, kinds[:, f], first, offsets)
        head = self.columns[0]
        if not self.varlen and head.kind not in (tfr.K_NONE, tfr.K_INT64):
            self._fail(head.first_record, None, f"feature {head.name!r} is a {KIND_NAMES[head.kind]}; ids must be "
                       "an int64_list")
        count = counts[:, 0]
        total = int(count.sum())
        rows = np.repeat(np.arange(first, first + n, dtype=np.int64), count)
        if self.varlen:
            self.max_len = max(self.max_len, int(count.max(initial=0)))
            starts = np.cumsum(count) - count
            cols = np.arange(total, dtype=np.int64) - np.repeat(starts, count)
            values = self._read(data, head.kind, firsts[:, 0], lasts[:, 0], total, 0)
            keys = np.stack([rows, cols])
        else:
            ids = self._read(data, tfr.K_INT64, firsts[:, 0], lasts[:, 0], total, 0)
            outside = (ids < 0) | (ids >= self.t.vocab_size)
            if outside.any():
                at = int(np.argmax(outside))
                record = int(rows[at])
                self._fail(record, offsets[record - first], f"id {int(ids[at])} in feature {head.name!r} is outside "
                           f"[0, {self.t.vocab_size}) (--vocab-size)")
            if self.t.values is not None:
                vcount = counts[:, 1]
                if (vcount != count).any():
                    i = int(np.argmax(vcount != count))
                    self._fail(first + i, offsets[i], f"{int(count[i])} ids ({head.name!r}) but {int(vcount[i])} "
                               f"values ({self.t.values!r}); sparse_merge needs one value per id")
                values = self._read(data, self.columns[1].kind, firsts[:, 1], lasts[:, 1], total, 1)
            else:
                values = np.ones(total, dtype=np.float32)
            keys, values = _row_major(rows, np.ascontiguousarray(count), ids, values, scanned.order)
        labels = self._labels(data, kinds, firsts, lasts, counts, first, offsets) if self.label else None
        return keys, values, labels, n

    def _check_kind(self, col: _Column, kinds: np.ndarray, first: int, offsets):
        present = kinds != tfr.K_NONE
        if not present.any():
            return
        if col.kind == tfr.K_NONE:
            at = int(np.argmax(present))
            col.kind, col.first_record = int(kinds[at]), first + at
        wrong = present & (kinds != col.kind)
        if wrong.any():
            at = int(np.argmax(wrong))
            self._fail(first + at, offsets[at], f"feature {col.name!r} is a {KIND_NAMES[int(kinds[at])]}, but a "
                       f"{KIND_NAMES[col.kind]} in record {col.first_record}")

    def _read(self, data, kind: int, firsts, lasts, total: int, column: int):
        if kind == tfr.K_BYTES:
            offsets, raw = tfr.read_bytes(data, firsts, lasts, total)
            return pa.Array.from_buffers(pa.large_binary(), total, [None, pa.py_buffer(offsets), pa.py_buffer(raw)])
        kind = tfr.K_INT64 if kind == tfr.K_INT64 else tfr.K_FLOAT
        ready = self._scanned.numbers.get((column, kind, total))  # read ahead by _scan
        return ready if ready is not None else tfr.read_numbers(data, firsts, lasts, total, kind)

    def _labels(self, data, kinds, firsts, lasts, counts, first: int, offsets) -> np.ndarray:
        f = len(self.columns) - 1
        col = self.label
        count = counts[:, f]
        if (count != 1).any():
            i = int(np.argmax(count != 1))
            what = "has no feature" if kinds[i, f] == tfr.K_NONE else f"holds {int(count[i])} values in feature"
            self._fail(first + i, offsets[i], f"{what} {col.name!r}; a label is one value per example")
        if col.kind == tfr.K_BYTES:
            self._fail(col.first_record, None, f"feature {col.name!r} is a bytes_list; labels must be numbers")
        if self._labels_out is None:
            self._open_labels(col.kind)
        return self._read(data, col.kind, firsts[:, f], lasts[:, f], len(count), f)

    def _open_labels(self, kind: int):
        self._labels_out = self._sides.add(GrowingNpy(self._labels_path,
                                                      np.int64 if kind == tfr.K_INT64 else np.float32))

    def _fail(self, record: int, offset, why: str):
        # ``offset`` is where the record's data starts in its block; the block starts at _base.
        at = "" if offset is None else f" (byte {self._base + int(offset) - tfr.HEADER})"
        where = f"record {record}{at}"
        raise DataError(f"{where}: {why}", path=self.name)

    def commit(self):
        """Move the labels file into place, once the tensor is."""
        self._sides.commit()

    def close(self):
        self._sides.abort()
        self._scans.close()  # the decoding thread stops before the file it reads is closed
        self.records.close()


@dataclass
class _Scanned:
    """A block of whole records and what ``TFRecordReader._scan`` found in it: the features
    located, the numbers of the columns of one kind (by column, kind and count), the ids'
    order within rows (a 1-tuple; None when not found ahead)."""

    data: np.ndarray
    offsets: np.ndarray
    first: int
    base: int
    located: tuple
    numbers: dict = field(default_factory=dict)
    order: tuple | None = None


class _Prefetch:
    """``work(item)`` of each item of an iterator on one thread of its own, a block ahead of the
    caller, the results handed out in order (an exception in its turn, as a plain loop would
    raise it).  The thread holds at most one block more than the caller."""

    def __init__(self, work, items):
        self.work, self.items = work, items
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="sptool-tfrecord")
        self._ahead = None
        self._done = False

    def _step(self):
        item = next(self.items, None)
        return None if item is None else self.work(item)

    def next(self):
        if self._done:
            return None
        current = self._ahead if self._ahead is not None else self._pool.submit(self._step)
        self._ahead = None
        result = current.result()
        if result is None:
            self._done = True
        else:
            self._ahead = self._pool.submit(self._step)
        return result

    def close(self):
        self._done = True
        self._pool.shutdown(wait=True, cancel_futures=True)


def _row_major(rows: np.ndarray, counts: np.ndarray, ids: np.ndarray, values, found=None):
    """(keys, values) sorted by (row, id), repeated ids in their Example order (a stable sort;
    TensorFlow's reorder is not stable, so there their values may come in another order: the
    entries, and their sum, are the same).  ``found`` is the order when already found: (order,)."""
    order = found[0] if found is not None else tfr.order_within_rows(counts, ids)
    if order is None:
        return np.stack([rows, ids]), values
    values = values.take(pa.array(order)) if isinstance(values, pa.Array) else values[order]
    return np.stack([rows, ids[order]]), values


# -- writing ------------------------------------------------------------------------------

def _kind_of(value_type: str) -> int:
    if value_type in ("binary", "string"):
        return tfr.K_BYTES
    if value_type in ("float32", "float64", "float16"):
        return tfr.K_FLOAT
    if value_type.startswith(("int", "uint")) or value_type == "bool":
        return tfr.K_INT64
    raise UsageError(f"{value_type} values have no Example feature type (int64_list, float_list or bytes_list)")


def _list_arrays(kind: int, values, where) -> tuple:
    """(ints, floats, boffsets, bdata) of a feature of ``kind`` from values; unused ones empty."""
    ints, floats = _EMPTY_I64, _EMPTY_F32
    boffsets, bdata = _EMPTY_I64, _EMPTY_U8
    if kind == tfr.K_BYTES:
        items = [v.encode() if isinstance(v, str) else bytes(v) for v in values]
        boffsets = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum([len(v) for v in items], out=boffsets[1:])
        bdata = np.frombuffer(b"".join(items), dtype=np.uint8)
    elif kind == tfr.K_FLOAT:
        values = np.asarray(values)
        floats = values.astype(np.float32)
        lost = ~((floats == values) | (np.isnan(floats) & np.isnan(values)))
        if lost.any():
            at = int(np.argmax(lost))
            raise DataError(f"{where(at)}: value {values[at]!r} is not exactly a float32, and an Example's float_list "
                            "holds float32; convert with --dtype float32 first to round")
    else:
        values = np.asarray(values)
        if values.dtype == np.uint64 and (values > np.iinfo(np.int64).max).any():
            at = int(np.argmax(values > np.iinfo(np.int64).max))
            raise DataError(f"{where(at)}: value {int(values[at])} does not fit in an int64_list")
        ints = values.astype(np.int64)
    return ints, np.ascontiguousarray(floats, dtype=np.float32), boffsets, bdata


_EMPTY_I64 = np.zeros(0, dtype=np.int64)
_EMPTY_F32 = np.zeros(0, dtype=np.float32)
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


class TFRecordWriter:
    """One Example per row of a 2-D tensor whose rows arrive in order (the ids of a row, then
    the next row's); the rows no entry reaches are written as Examples with empty lists."""

    needs_row_major = True  # rows whole and in order within each write (convert's RowMajorReader)
    keeps_duplicates = True  # a repeated id stays two entries of the Example, as TensorFlow writes it

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        t: TFRecordOptions = opts.tfrecord
        check_not_hybrid(meta, "tfrecord")
        if meta.fill_value != default_fill(meta.value_type):  # b"" is the zero of bytes, as a missing id is
            check_zero_fill(meta, "tfrecord")
        if meta.ndim != 2:
            raise UsageError(f"a TFRecord file holds one Example per row of a 2-D tensor; this one has shape "
                             f"{list(meta.shape)}")
        if t.compression is None:
            self.codec = "gzip" if dst.lower().endswith((".gz", ".gzip")) else "none"
        else:
            self.codec = t.compression.lower()
        self.t, self.meta = t, meta
        self.rows = meta.shape[0]
        if self.codec == "none" and self.rows is not None:
            check_dense_rows(self.rows, 16, dst, "a TFRecord file")  # a record's framing, an empty Example's
        self.value_kind = _kind_of(meta.value_type) if t.values is not None else tfr.K_NONE
        self.labels = None
        if t.labels is not None:
            self.labels = open_npy(t.labels)
            if self.labels.ndim != 1 or self.labels.dtype.kind not in "iubf":
                raise UsageError(f"labels must be a 1-D array of numbers, not {self.labels.dtype} of shape "
                                 f"{list(self.labels.shape)}", path=t.labels)
            if self.rows is not None and len(self.labels) != self.rows:
                raise UsageError(f"{len(self.labels)} labels for {self.rows} rows", path=t.labels)
            self.label_kind = tfr.K_FLOAT if self.labels.dtype.kind == "f" else tfr.K_INT64
        self.next_row = 0  # the first row not yet written
        self._target = None
        if dst == "-":
            if sys.stdout.isatty():
                raise UsageError("refusing to write a binary TFRecord file to a terminal; "
                                 "give an output file (-o FILE; output=PATH in Python) or a pipe")
            self._raw = sys.stdout.buffer
        else:
            self._target = AtomicTarget(dst, is_dir=False, remote=True)
            self._raw = open_output(self._target.tmp)  # a URL: its filesystem's stream
        if self.codec == "gzip":
            # Level 6, zlib's default, as TensorFlow's GZIP option uses.
            self._out = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6, mtime=0)
        elif self.codec == "zlib":
            self._zlib = zlib.compressobj(6, zlib.DEFLATED, 15)
            self._out = None
        else:
            self._out = self._raw

    def _emit(self, data: bytes):
        if self.codec == "zlib":
            self._raw.write(self._zlib.compress(data))
        else:
            self._out.write(data)

    def write(self, keys, values):
        """Rows in order, each row whole within one call (RowMajorReader cuts batches so)."""
        rows = np.asarray(keys[0])
        if len(rows) == 0:
            return
        if rows[0] < self.next_row or (np.diff(rows) < 0).any():
            raise DataError("internal error: rows reached the TFRecord writer out of order or split")
        self._encode(keys, values, int(rows[-1]) + 1)

    def _encode(self, keys, values, end_row: int):
        """Write the Examples of rows next_row .. end_row - 1 (``keys`` holds their entries), a
        block of rows at a time, so that a run of empty rows is not built at once."""
        for _, hi, a, b in row_blocks(keys[0], self.next_row, end_row):
            self._encode_block(keys[:, a:b], values[a:b], hi)

    def _encode_block(self, keys, values, end_row: int):
        n = end_row - self.next_row
        if n <= 0:
            return
        starts = np.searchsorted(keys[0], np.arange(self.next_row, end_row + 1)).astype(np.int64)
        first = self.next_row

        def where(i):
            return f"row {int(keys[0][i])}"

        columns = [(tfr.K_INT64, self.t.ids.encode(), starts, np.ascontiguousarray(keys[1], dtype=np.int64),
                    _EMPTY_F32, _EMPTY_I64, _EMPTY_U8)]
        if self.value_kind != tfr.K_NONE:
            columns.append((self.value_kind, self.t.values.encode(), starts,
                            *_list_arrays(self.value_kind, _plain(values), where)))
        elif len(values):
            plain = _plain(values)
            not_one = np.asarray(plain != 1)
            if not_one.any():
                at = int(np.argmax(not_one))
                raise DataError(f"{where(at)}: value {plain[at]!r} would be lost: without --values only the ids are "
                                "written, which read back as 1; give --values NAME")
        if self.labels is not None:
            if end_row > len(self.labels):
                raise UsageError(f"{len(self.labels)} labels for more rows", path=self.t.labels)
            label = np.asarray(self.labels[first:end_row])
            columns.append((self.label_kind, self.t.label_feature.encode(), np.arange(n + 1, dtype=np.int64),
                            *_list_arrays(self.label_kind, label, lambda i: f"label {first + i}")))
        self._emit(tfr.encode_examples(n, columns))
        self.next_row = end_row

    def close(self):
        try:
            end = self.rows if self.rows is not None else self.next_row
            self._encode(np.zeros((2, 0), dtype=np.int64), np.zeros(0), end)  # the empty rows at the end
            if self.codec == "gzip":
                self._out.close()
            elif self.codec == "zlib":
                self._raw.write(self._zlib.flush())
            if self._target is not None:
                self._raw.close()
                self._target.commit()
            else:
                self._raw.flush()
        except BaseException:
            self.abort()
            raise
        self.shape = (end, self.meta.shape[1])

    def abort(self):
        if self._target is not None:
            try:
                self._raw.close()
            except OSError:
                pass
            self._target.abort()


def _plain(values):
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.to_numpy(zero_copy_only=False)
    return values
