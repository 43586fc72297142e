"""A Thrift compact-protocol field tree (as the kernels' ``_checks.read_struct`` reads it)
written back byte for byte.

The stitched Parquet writer (``_stitch.py``) edits file offsets in footers and offset indexes
that pyarrow wrote: reading a struct to ``[(field id, type, value), ...]``, changing a few
values and writing it again is less code than a schema for every Parquet struct, and what is
not touched comes back exactly as Thrift's C++ writer made it (short field headers for deltas of
1 to 15, short list headers below 15 elements, booleans in the field header).

Values: integers for i16/i32/i64 (and the byte type), ``bytes`` for binary and double (kept as
its 8 raw bytes), a field list for a struct, ``(element type, [values])`` for a list or set.
"""

from __future__ import annotations

from ._footer import FooterError

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)

_INTS = (I16, I32, I64)


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_struct(fields: list, out: bytearray | None = None) -> bytearray:
    """Append the struct ``fields`` (as read_struct gives them) to ``out``."""
    out = bytearray() if out is None else out
    last = 0
    for fid, ftype, value in fields:
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | ftype)
        else:
            out.append(ftype)
            _put_varint(out, _zigzag(fid) & 0xFFFF)
        last = fid
        _write_value(out, ftype, value)
    out.append(0)
    return out


def _write_value(out: bytearray, kind: int, value) -> None:
    if kind in _INTS:
        _put_varint(out, _zigzag(value) & 0xFFFFFFFFFFFFFFFF)
    elif kind in (BOOL_TRUE, BOOL_FALSE):
        pass
    elif kind == BYTE:
        out.append(value & 0xFF)
    elif kind == DOUBLE:
        out += value
    elif kind == BINARY:
        _put_varint(out, len(value))
        out += value
    elif kind == STRUCT:
        write_struct(value, out)
    elif kind in (LIST, SET):
        elem, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | elem)
        else:
            out.append(0xF0 | elem)
            _put_varint(out, len(items))
        for item in items:
            if elem in (BOOL_TRUE, BOOL_FALSE):
                out.append(item)
            else:
                _write_value(out, elem, item)
    else:
        raise FooterError(f"unsupported Thrift type {kind}")


def get(fields: list, fid: int, default=None):
    """The value of field ``fid``, or ``default`` when the struct leaves it out."""
    for f in fields:
        if f[0] == fid:
            return f[2]
    return default


def put(fields: list, fid: int, value) -> None:
    """Set the value of field ``fid``, which the struct must have."""
    for f in fields:
        if f[0] == fid:
            f[2] = value
            return
    raise KeyError(fid)
