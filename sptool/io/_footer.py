"""A Parquet footer read with our own Thrift compact-protocol reader (the kernels' ``_checks``),
before pyarrow builds any column chunk's metadata from it: a few damaged fields make pyarrow
throw a C++ exception nothing catches (SIGABRT) the moment a chunk's metadata object is made.

Only what is needed is kept: per row group and column chunk, ColumnMetaData.type (field 1) and
the lengths of SizeStatistics' repetition and definition level histograms (field 16: 2 and 3),
which pyarrow checks against the schema's maximum levels by aborting.  The page headers behind
the footer are read with the same reader (``pages_without_crc``).
"""

from __future__ import annotations

import io
import os
import struct

import numpy as np

from .._checks import ABSENT, EndsEarly, footer_chunks, read_struct
from ._url import READ_AHEAD, is_remote, open_read

# pyarrow's names of ColumnMetaData.type values (parquet.thrift Type)
PHYSICAL = {0: "BOOLEAN", 1: "INT32", 2: "INT64", 3: "INT96", 4: "FLOAT", 5: "DOUBLE", 6: "BYTE_ARRAY",
            7: "FIXED_LEN_BYTE_ARRAY"}
_PHYSICAL_CODE = {name: code for code, name in PHYSICAL.items()}


class FooterError(ValueError):
    pass


def read_footer(path: str) -> bytes:
    with open_read(path) as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < 12:
            raise FooterError("too short for a Parquet file")
        f.seek(size - 8)
        (length,) = struct.unpack("<I", f.read(4))
        if length > size - 12:
            raise FooterError("the footer length exceeds the file")
        f.seek(size - 8 - length)
        return f.read(length)


def check_levels(path: str, schema) -> str | None:
    """Why the footer of ``path`` would abort pyarrow (a column chunk's type or level histograms
    contradicting the schema ``schema``, a pq.ParquetSchema), or None."""
    try:
        # Compiled: a footer of 5,000 row groups took 0.33 s to walk in Python, on every command.
        _groups, chunks = footer_chunks(read_footer(path))
    except (FooterError, ValueError):
        return None  # pyarrow's own footer parser has already accepted it; let it decide
    if not len(chunks):
        return None
    columns = [schema.column(c) for c in range(len(schema))]
    # A chunk's position in its row group names its column; chunks beyond the schema's columns
    # are left to pyarrow's own row-group check (check_footer's column count).
    group = chunks[:, 0]
    first = np.flatnonzero(np.diff(group, prepend=group[0] - 1))
    column = np.arange(len(group)) - np.repeat(first, np.diff(first, append=len(group)))
    inside = column < len(columns)
    chunks, column = chunks[inside], column[inside]
    want_type = np.array([_PHYSICAL_CODE.get(c.physical_type, -1) for c in columns], dtype=np.int64)[column]
    levels = [np.array([getattr(c, name) + 1 for c in columns], dtype=np.int64)[column]
              for name in ("max_repetition_level", "max_definition_level")]
    bad_type = (chunks[:, 1] != ABSENT) & (chunks[:, 1] != want_type)
    bad = [(h != ABSENT) & (h != 0) & (h != lv) for h, lv in zip((chunks[:, 2], chunks[:, 3]), levels)]
    wrong = np.flatnonzero(bad_type | bad[0] | bad[1])
    if not len(wrong):
        return None
    i = wrong[0]
    r, t = int(chunks[i, 0]), int(chunks[i, 1])
    col = columns[column[i]]
    if bad_type[i]:
        return (f"row group {r} says column {col.name} holds {PHYSICAL.get(t, 'UNKNOWN')}, the schema says "
                f"{col.physical_type}")
    n = int(chunks[i, 2] if bad[0][i] else chunks[i, 3])
    return (f"row group {r}, column {col.name}: a level histogram has {n} entries, the "
            f"schema allows {(col.max_repetition_level if bad[0][i] else col.max_definition_level) + 1}")


# parquet.thrift PageType values of the pages a checksum covers: DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2.
_CHECKED_PAGES = {0: "data", 2: "dictionary", 3: "data"}
_HEADER_READ = 1 << 12  # bytes read for a page header; more (up to the chunk's end) if it is longer
_I32 = 5  # the compact protocol's type of an i32 field


def _page_header(buf: bytes) -> tuple[int, int, bool, int]:
    """(page type, compressed size, has a CRC, header length) of the PageHeader at buf's start;
    EndsEarly when buf ends inside it."""
    try:
        fields, length = read_struct(buf)
    except EndsEarly:
        raise
    except ValueError as e:
        raise FooterError(str(e)) from None
    found = {fid: value for fid, ftype, value in fields if fid in (1, 3, 4) and ftype == _I32}
    if 1 not in found or found.get(3, -1) < 0:
        raise FooterError("a page header lacks its type or size")
    return found[1], found[3], 4 in found, length


def pages_without_crc(path: str, md) -> tuple[int, int, str | None]:
    """(pages without a CRC-32, pages checked, where the first is) over every column chunk of
    ``md`` (pyarrow's FileMetaData of ``path``): the page headers alone are read, each chunk's
    from its first page to its end, skipping the pages' bodies.  Finds what a footer's record
    that checksums were written cannot prove."""
    missing = checked = 0
    first = None
    with open_read(path) as raw:
        # On another filesystem each read is a request, and a chunk's page headers (a few bytes
        # each, between the pages' bodies) took one each: a 20 MB file with 5 ms added to each
        # read made 496 requests in 2.5 s, where its whole scan makes 68.  Read ahead in blocks,
        # a seek inside the block is served from it (64 more requests, for reading the bytes twice).
        f = io.BufferedReader(raw, READ_AHEAD) if is_remote(path) else raw
        for r in range(md.num_row_groups):
            rg = md.row_group(r)
            for c in range(rg.num_columns):
                col = rg.column(c)
                pos = min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None)
                end = pos + col.total_compressed_size
                while pos < end:
                    want = _HEADER_READ
                    while True:
                        f.seek(pos)
                        buf = f.read(min(want, end - pos))
                        try:
                            kind, size, has_crc, length = _page_header(buf)
                            break
                        except EndsEarly:
                            if want >= end - pos:
                                raise FooterError(f"a page header of column {col.path_in_schema} in row group "
                                                  f"{r} runs past its column chunk") from None
                            want *= 4
                    if kind in _CHECKED_PAGES:
                        checked += 1
                        if not has_crc:
                            missing += 1
                            first = first or (f"the {_CHECKED_PAGES[kind]} page at byte {pos} "
                                              f"({col.path_in_schema}, row group {r})")
                    pos += length + size
    return missing, checked, first
