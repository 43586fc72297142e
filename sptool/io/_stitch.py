"""One Parquet file encoded on several cores: row groups encoded apart, their bytes stitched.

pyarrow 26 encodes a file's column chunks on one thread (ArrowWriterProperties' use_threads is
not reachable from Python), which bounds every file-to-file command.  Here each row group is
encoded by its own ``pq.ParquetWriter`` into an in-memory file on a pool thread (the encoder
releases the GIL), with the output's schema and writer options.  The appender copies each
buffer's column chunks into the output in row-group order; at the end it writes the column and
offset indexes in the order pyarrow's writer uses (all column indexes by row group and column,
then all offset indexes) and one footer: the buffers' row groups with every file offset moved to
where their bytes now are, under the metadata of an empty file written with the same schema,
options and key-value entries.  The result is byte for byte what one ``pq.ParquetWriter``
writes for the same row groups (tests/test_stitch.py compares them).

TensorSink uses it with three workers or more (TensorSink._parquet_writer): on two cores
its one writer thread already keeps the second core busy, and per-thread CPU times of
reorder, add and concat at 20M entries show the stitched writer adding 0.1-0.3 CPU s (a writer
per row group, the footers read in Python, the appends on the caller's thread) for no shorter
path; interleaved runs at load 10-13 were 5-20% slower.  On two cores it is used where the
caller's work is lighter than the writing (``light_producer``: add's merge join), whose one
writer thread was the critical path: 1.62 -> 1.30 s at load 2.6-2.9, the same CPU seconds.

The byte layout moved here is pyarrow's, not a published contract: before the first row group,
each file checks that two small slices of it stitch to the bytes pyarrow's writer gives them
(``stitches``), and writes through pyarrow's writer alone if not (a new pyarrow, an option such
as bloom filters or encryption).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from .._checks import read_struct
from .._threads import stop_pool
from . import _thrift as t
from ._url import open_output

_MAGIC = b"PAR1"

# Field ids of parquet.thrift's structs touched here.
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_GROUP_COLUMNS, _GROUP_FILE_OFFSET, _GROUP_ORDINAL = 1, 5, 7
_CHUNK_FILE_OFFSET, _CHUNK_META = 2, 3
_CHUNK_OFFSET_INDEX, _CHUNK_OFFSET_INDEX_LENGTH, _CHUNK_COLUMN_INDEX, _CHUNK_COLUMN_INDEX_LENGTH = 4, 5, 6, 7
_META_COMPRESSED, _META_DATA_PAGE, _META_INDEX_PAGE, _META_DICTIONARY_PAGE = 7, 9, 10, 11
_META_BLOOM_FILTER = 14
_OFFSET_INDEX_PAGES, _PAGE_OFFSET = 1, 1


class StitchError(RuntimeError):
    """An encoded row group laid out in a way the stitcher does not know how to move."""


def encode_file(table: pa.Table, schema: pa.Schema, options: dict, entries: dict | None = None) -> pa.Buffer:
    """``table`` as a whole Parquet file in memory, one row group (none for an empty table)."""
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, schema, **options)
    if table is not None:
        writer.write_table(table, row_group_size=max(table.num_rows, 1))
    if entries:
        writer.add_key_value_metadata(entries)
    writer.close()
    return sink.getvalue()


# Rows of each of the two slices a file's first table is probed with.
PROBE_ROWS = 64


def stitches(table: pa.Table, schema: pa.Schema, options: dict) -> bool:
    """Whether row groups of ``table`` stitch into the bytes pyarrow's own writer gives for the
    same calls, tried on two slices of its first rows."""
    parts = [table.slice(0, PROBE_ROWS), table.slice(PROBE_ROWS, PROBE_ROWS)]
    plain = pa.BufferOutputStream()
    writer = pq.ParquetWriter(plain, schema, **options)
    for part in parts:
        writer.write_table(part, row_group_size=max(part.num_rows, 1))
    writer.close()
    out = pa.BufferOutputStream()
    try:
        _stitch_into(out, [_Encoded(part, schema, options) for part in parts], schema, options, {})
    except StitchError:
        return False
    return out.getvalue() == plain.getvalue()


def _bytes_of(encoded: pa.Buffer) -> memoryview:
    # pa.Buffer exports signed chars: read as such, a byte of 0x80 or more would be negative.
    return memoryview(encoded).cast("B")


def _footer(buf: memoryview) -> tuple[list, int]:
    """A Parquet file's FileMetaData as a field tree, and where the footer starts."""
    length = int.from_bytes(buf[-8:-4], "little")
    start = len(buf) - 8 - length
    fields, _ = read_struct(buf[start:len(buf) - 8])
    return fields, start


class _Encoded:
    """One row group encoded (on a pool thread, where its footer is read too, off the
    appender's path): its column chunks' bytes and their metadata, offsets as in its own file."""

    def __init__(self, table: pa.Table, schema: pa.Schema, options: dict):
        buf = _bytes_of(encode_file(table, schema, options))
        meta, footer_start = _footer(buf)
        self.rows = t.get(meta, _FILE_NUM_ROWS)
        self.groups = t.get(meta, _FILE_ROW_GROUPS, (t.STRUCT, []))[1]
        self.column_indexes: list[tuple[list, bytes]] = []  # (column chunk, its column index)
        self.offset_indexes: list[tuple[list, list]] = []  # (column chunk, its offset index)
        end = len(_MAGIC)
        for group in self.groups:
            for chunk in t.get(group, _GROUP_COLUMNS)[1]:
                cmeta = t.get(chunk, _CHUNK_META)
                if t.get(cmeta, _META_BLOOM_FILTER) is not None:
                    raise StitchError("a bloom filter in an encoded row group")
                first = t.get(cmeta, _META_DICTIONARY_PAGE) or t.get(cmeta, _META_DATA_PAGE)
                end = max(end, first + t.get(cmeta, _META_COMPRESSED))
                at = t.get(chunk, _CHUNK_COLUMN_INDEX)
                if at is not None:
                    self.column_indexes.append((chunk, bytes(buf[at:at + t.get(chunk, _CHUNK_COLUMN_INDEX_LENGTH)])))
                at = t.get(chunk, _CHUNK_OFFSET_INDEX)
                if at is not None:
                    index, _ = read_struct(buf[at:at + t.get(chunk, _CHUNK_OFFSET_INDEX_LENGTH)])
                    self.offset_indexes.append((chunk, index))
        if end > footer_start:
            raise StitchError("column chunks run into the footer")
        self.chunks = buf[len(_MAGIC):end]


class _Stitcher:
    """Appends encoded row groups to ``file`` (after its magic) and ends it with their indexes
    and one footer."""

    def __init__(self, file):
        self._file = file
        self._file.write(_MAGIC)
        self._pos = len(_MAGIC)
        self._groups: list[list] = []
        self._column_indexes: list[tuple[list, bytes]] = []  # (column chunk, its column index)
        self._offset_indexes: list[tuple[list, list]] = []  # (column chunk, its offset index)
        self._rows = 0

    def append(self, encoded: _Encoded) -> None:
        shift = self._pos - len(_MAGIC)
        for group in encoded.groups:
            _shift(group, _GROUP_FILE_OFFSET, shift)
            if t.get(group, _GROUP_ORDINAL) is not None:
                t.put(group, _GROUP_ORDINAL, len(self._groups))
            for chunk in t.get(group, _GROUP_COLUMNS)[1]:
                _shift(chunk, _CHUNK_FILE_OFFSET, shift)
                cmeta = t.get(chunk, _CHUNK_META)
                for fid in (_META_DATA_PAGE, _META_INDEX_PAGE, _META_DICTIONARY_PAGE):
                    _shift(cmeta, fid, shift)
            self._groups.append(group)
        for _chunk, index in encoded.offset_indexes:
            for page in t.get(index, _OFFSET_INDEX_PAGES)[1]:
                _shift(page, _PAGE_OFFSET, shift)
        self._column_indexes += encoded.column_indexes
        self._offset_indexes += encoded.offset_indexes
        self._file.write(encoded.chunks)
        self._pos += len(encoded.chunks)
        self._rows += encoded.rows

    def finish(self, schema: pa.Schema, options: dict, entries: dict) -> None:
        out = bytearray()
        for chunk, index in self._column_indexes:
            t.put(chunk, _CHUNK_COLUMN_INDEX, self._pos + len(out))
            out += index
        for chunk, index in self._offset_indexes:
            start = len(out)
            t.write_struct(index, out)
            t.put(chunk, _CHUNK_OFFSET_INDEX, self._pos + start)
            t.put(chunk, _CHUNK_OFFSET_INDEX_LENGTH, len(out) - start)
        # The file-level fields (schema, key-value entries, writer, column orders) as pyarrow
        # writes them for this schema, options and entries.
        meta, _ = _footer(_bytes_of(encode_file(None, schema, options, entries)))
        t.put(meta, _FILE_NUM_ROWS, self._rows)
        t.put(meta, _FILE_ROW_GROUPS, (t.STRUCT, self._groups))
        footer = t.write_struct(meta)
        out += footer
        out += len(footer).to_bytes(4, "little")
        out += _MAGIC
        self._file.write(out)


def _stitch_into(file, encoded: list, schema: pa.Schema, options: dict, entries: dict) -> None:
    stitcher = _Stitcher(file)
    for part in encoded:
        stitcher.append(part)
    stitcher.finish(schema, options, entries)


class StitchedWriter:
    """Writes a Parquet file at ``path`` from row groups encoded on ``workers`` threads, or
    through pyarrow's writer alone where its first table does not stitch (``stitches``).

    ``write_table`` hands one row group to the pool and returns; at most ``inflight`` wait
    (each holds its table and, once encoded, its bytes), so the memory held stays bounded.
    The methods are those of ``pq.ParquetWriter`` that TensorSink uses."""

    def __init__(self, path: str, schema: pa.Schema, options: dict, *, workers: int, inflight: int):
        self.schema = schema
        self.options = options
        self._inflight_max = max(1, inflight)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="sptool-encode")
        self._pending: deque = deque()
        self._file = open_output(path)  # closed by close or abort; a URL: its filesystem's stream
        self._stitcher: _Stitcher | None = None  # from the first table on, if it stitches
        self._plain: pq.ParquetWriter | None = None  # from the first table on, if it does not
        self._entries: dict = {}

    @property
    def stitching(self) -> bool | None:
        """True once the file is being stitched, False once pyarrow's writer writes it, None before."""
        return True if self._stitcher is not None else False if self._plain is not None else None

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        if self.stitching is None:
            if stitches(table, self.schema, self.options):
                self._stitcher = _Stitcher(self._file)
            else:
                self._plain = pq.ParquetWriter(self._file, self.schema, **self.options)
        if self._plain is not None:
            self._plain.write_table(table, row_group_size=max(table.num_rows, 1))
            return
        while len(self._pending) >= self._inflight_max:
            self._stitcher.append(self._pending.popleft().result())
        self._pending.append(self._pool.submit(_Encoded, table, self.schema, self.options))

    def add_key_value_metadata(self, entries: dict) -> None:
        self._entries.update(entries)

    def close(self) -> None:
        try:
            if self._plain is not None:
                if self._entries:
                    self._plain.add_key_value_metadata(self._entries)
                self._plain.close()
                return
            stitcher = self._stitcher or _Stitcher(self._file)
            while self._pending:
                stitcher.append(self._pending.popleft().result())
            stitcher.finish(self.schema, self.options, self._entries)
        finally:
            stop_pool(self._pool)  # not a join inside a garbage collection (sptool._threads)
            self._file.close()

    def abort(self) -> None:
        """Stop without a footer; encodes under way end in buffers nobody reads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pending.clear()
        try:
            if self._plain is not None:  # else its finalizer writes a footer to a closed file
                self._plain.close()
        finally:
            self._file.close()


def _shift(fields: list, fid: int, shift: int) -> None:
    value = t.get(fields, fid)
    # 0 is no offset (no file has bytes there but its magic): pyarrow leaves the deprecated
    # ColumnChunk.file_offset at 0.
    if value:
        t.put(fields, fid, value + shift)
