"""Where each field of a Parquet footer lies, read with a small Thrift compact-protocol walker of
our own (an oracle independent of pyarrow's parser), so that tests and the fuzzer can damage one
chosen field (a column chunk's type, a row count, the key-value metadata) and nothing else."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from references.checks import _varint

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


@dataclass
class Field:
    path: tuple  # field ids from the root struct; list elements add their position
    kind: int  # the compact type
    start: int  # first byte of the value (after the field header)
    end: int


def _value(buf, pos, kind, path, out):
    start = pos
    if kind in (TRUE, FALSE):
        pass  # a boolean field's value sits in its header
    elif kind == BYTE:
        pos += 1
    elif kind in (I16, I32, I64):
        _, pos = _varint(buf, pos)
    elif kind == DOUBLE:
        pos += 8
    elif kind == BINARY:
        n, pos = _varint(buf, pos)
        pos += n
    elif kind in (LIST, SET):
        head = buf[pos]
        pos += 1
        n, elem = head >> 4, head & 0x0F
        if n == 15:
            n, pos = _varint(buf, pos)
        for i in range(n):
            if elem in (TRUE, FALSE):
                out.append(Field(path + (i,), elem, pos, pos + 1))
                pos += 1
            else:
                pos = _value(buf, pos, elem, path + (i,), out)
    elif kind == MAP:
        n, pos = _varint(buf, pos)
        if n:
            kv = buf[pos]
            pos += 1
            for i in range(n):
                pos = _value(buf, pos, kv >> 4, path + (i, "k"), out)
                pos = _value(buf, pos, kv & 0x0F, path + (i, "v"), out)
    elif kind == STRUCT:
        last = 0
        while True:
            head = buf[pos]
            pos += 1
            if head == STOP:
                break
            delta, ftype = head >> 4, head & 0x0F
            if delta:
                fid = last + delta
            else:
                z, pos = _varint(buf, pos)
                fid = (z >> 1) ^ -(z & 1)
            last = fid
            pos = _value(buf, pos, ftype, path + (fid,), out)
    else:
        raise ValueError(f"unknown compact type {kind} at byte {pos}")
    out.append(Field(path, kind, start, pos))
    return pos


def footer_fields(data: bytes) -> tuple[int, list[Field]]:
    """(offset of the footer in ``data``, every field of its FileMetaData with absolute byte
    ranges).  Paths follow parquet.thrift: (4, r, 1, c, 3, 1) is row group r, column chunk c,
    ColumnMetaData.type."""
    (length,) = struct.unpack("<I", data[-8:-4])
    base = len(data) - 8 - length
    fields: list[Field] = []
    _value(data[base:len(data) - 8], 0, STRUCT, (), fields)
    for f in fields:
        f.start += base
        f.end += base
    return base, fields


def varint(n: int) -> bytes:
    """An unsigned LEB128 varint (a binary field's length)."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag_varint(value: int) -> bytes:
    """An i16/i32/i64 field's value."""
    return varint(((value << 1) ^ (value >> 63)) & (2**64 - 1))


def replace_field(data: bytes, field: Field, value: bytes) -> bytes:
    """``data`` with ``field``'s value bytes replaced by ``value`` and the footer length fixed."""
    out = data[:field.start] + value + data[field.end:]
    (length,) = struct.unpack("<I", data[-8:-4])
    length += len(value) - (field.end - field.start)
    return out[:-8] + struct.pack("<I", length) + out[-4:]


def column_type_fields(data: bytes) -> list[Field]:
    """The ColumnMetaData.type field of every column chunk of every row group."""
    _, fields = footer_fields(data)
    return [f for f in fields if len(f.path) == 6 and f.path[0] == 4 and f.path[2] == 1 and f.path[4:] == (3, 1)]
