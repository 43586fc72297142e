"""Plain Python versions of the kernels in sptool/_checks.pyx, with the same signatures.

Used only as the test oracle (tests/test_checks_kernels.py); the library always runs the
compiled kernels.  footer_chunks is the Thrift walker sptool ran before it was compiled, and
read_struct the field-tree reader of its stitched writer before that was compiled.
"""

from __future__ import annotations

import numpy as np
from sptool._kernels import OUT_OF_ORDER, REPEATED

ABSENT = -(1 << 63)


class _Refused(ValueError):
    pass


class EndsEarly(ValueError):
    """The bytes end in the middle of a field (the kernel's EndsEarly)."""


_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 70:
            raise _Refused("a varint in the footer is too long")


def _list_header(buf: bytes, pos: int) -> tuple[int, int, int]:
    head = buf[pos]
    n, elem = head >> 4, head & 0x0F
    if n == 15:
        n, pos = _varint(buf, pos + 1)
        return n, elem, pos
    return n, elem, pos + 1


def _field(buf: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """(field id, type, pos after the header) of the next field of a struct; type 0 at its end."""
    head = buf[pos]
    if head == 0:
        return 0, 0, pos + 1
    delta, ftype = head >> 4, head & 0x0F
    if delta:
        return last + delta, ftype, pos + 1
    z, pos = _varint(buf, pos + 1)
    return (z >> 1) ^ -(z & 1), ftype, pos


def _skip(buf: bytes, pos: int, kind: int, depth: int = 0) -> int:
    # Written with local state and few calls: a footer has thousands of fields (statistics,
    # encodings, offsets) and every sptool command reads one.
    if kind in (_I16, _I32, _I64):
        while buf[pos] & 0x80:
            pos += 1
        return pos + 1
    if kind == _BINARY:
        if buf[pos] < 0x80:
            return pos + 1 + buf[pos]
        n, pos = _varint(buf, pos)
        return pos + n
    if kind in (_BOOL_TRUE, _BOOL_FALSE):
        return pos
    if kind == _BYTE:
        return pos + 1
    if kind == _DOUBLE:
        return pos + 8
    if depth > 64:
        raise _Refused("the footer nests too deeply")
    if kind == _STRUCT:
        last = 0
        while True:
            last, ftype, pos = _field(buf, pos, last)
            if not ftype:
                return pos
            pos = _skip(buf, pos, ftype, depth + 1)
    if kind in (_LIST, _SET):
        n, elem, pos = _list_header(buf, pos)
        if elem in (_BOOL_TRUE, _BOOL_FALSE):
            return pos + n
        for _ in range(n):
            pos = _skip(buf, pos, elem, depth + 1)
        return pos
    if kind == _MAP:
        n, pos = _varint(buf, pos)
        if n:
            kv = buf[pos]
            pos += 1
            for _ in range(n):
                pos = _skip(buf, _skip(buf, pos, kv >> 4, depth + 1), kv & 0x0F, depth + 1)
        return pos
    raise _Refused(f"unknown Thrift type {kind} in the footer")


def codes_order_violation(codes, check_repeats, has_prev=False, prev=0):
    codes = np.asarray(codes, dtype=np.uint64)
    if not len(codes):
        return -1, 0
    before = np.concatenate([[np.uint64(prev)], codes[:-1]]) if has_prev else codes[:-1]
    after = codes if has_prev else codes[1:]
    bad = np.flatnonzero(after <= before if check_repeats else after < before)
    if not len(bad):
        return -1, 0
    row = int(bad[0]) + (0 if has_prev else 1)
    return row, REPEATED if after[bad[0]] == before[bad[0]] else OUT_OF_ORDER


def _column_meta(buf: bytes, pos: int, found: list) -> int:
    last = 0
    while True:
        last, ftype, pos = _field(buf, pos, last)
        if not ftype:
            return pos
        if last == 1 and ftype == _I32:
            z, pos = _varint(buf, pos)
            found[1] = (z >> 1) ^ -(z & 1)
        elif last == 16 and ftype == _STRUCT:
            slast = 0
            while True:
                slast, stype, pos = _field(buf, pos, slast)
                if not stype:
                    break
                if slast in (2, 3) and stype == _LIST:
                    found[slast] = _list_header(buf, pos)[0]
                pos = _skip(buf, pos, stype)
        else:
            pos = _skip(buf, pos, ftype)


def _struct_fields(buf: bytes, pos: int, want: int, on_list) -> int:
    last = 0
    while True:
        last, ftype, pos = _field(buf, pos, last)
        if not ftype:
            return pos
        if last == want and ftype == _LIST:
            pos = on_list(pos)
        else:
            pos = _skip(buf, pos, ftype)


def footer_chunks(footer):
    footer = bytes(footer)
    rows: list[list] = []
    groups = 0

    def chunk_list(pos):
        n, _elem, pos = _list_header(footer, pos)
        for _ in range(n):
            found = [groups - 1, ABSENT, ABSENT, ABSENT]
            last = 0
            while True:
                last, ftype, pos = _field(footer, pos, last)
                if not ftype:
                    break
                if last == 3 and ftype == _STRUCT:
                    pos = _column_meta(footer, pos, found)
                else:
                    pos = _skip(footer, pos, ftype)
            rows.append(found)
        return pos

    def group_list(pos):
        nonlocal groups
        n, _elem, pos = _list_header(footer, pos)
        for _ in range(n):
            groups += 1
            pos = _struct_fields(footer, pos, 1, chunk_list)
        return pos

    try:
        pos = _struct_fields(footer, 0, 4, group_list)
    except IndexError:
        raise ValueError("the footer ends in the middle of a field") from None
    if pos > len(footer):
        raise ValueError("the footer ends in the middle of a field")
    # Numbers beyond int64 (a damaged varint) are kept exactly here; the kernel keeps a stand-in.
    return groups, rows  # the kernel returns these rows as an (n, 4) int64 array


def read_struct(buf, pos: int = 0):
    if not 0 <= pos <= len(buf):
        raise IndexError(f"position {pos} is outside the {len(buf)} bytes")
    buf = bytes(buf)
    try:
        fields, pos = _read_struct(buf, pos, 0)
    except IndexError:
        raise EndsEarly("the footer ends in the middle of a field") from None
    if pos > len(buf):
        raise EndsEarly("the footer ends in the middle of a field")
    return fields, pos


def _read_struct(buf: bytes, pos: int, depth: int) -> tuple[list, int]:
    if depth > 64:
        raise _Refused("the footer nests too deeply")
    fields = []
    last = 0
    while True:
        last, ftype, pos = _field(buf, pos, last)
        if not ftype:
            return fields, pos
        value, pos = _read_value(buf, pos, ftype, depth)
        fields.append([last, ftype, value])


def _read_value(buf: bytes, pos: int, kind: int, depth: int):
    if kind in (_I16, _I32, _I64):
        z, pos = _varint(buf, pos)
        if z >= 1 << 64:
            raise _Refused("a number in the footer is wider than 64 bits")
        return (z >> 1) ^ -(z & 1), pos
    if kind in (_BOOL_TRUE, _BOOL_FALSE):
        return None, pos  # a field's boolean is its type
    if kind == _BYTE:
        return buf[pos], pos + 1
    if kind in (_DOUBLE, _BINARY):
        n, pos = (8, pos) if kind == _DOUBLE else _varint(buf, pos)
        if pos + n > len(buf):
            raise IndexError
        return buf[pos:pos + n], pos + n
    if kind == _STRUCT:
        return _read_struct(buf, pos, depth + 1)
    if kind in (_LIST, _SET):
        n, elem, pos = _list_header(buf, pos)
        items = []
        for _ in range(n):
            if elem in (_BOOL_TRUE, _BOOL_FALSE):
                items.append(buf[pos])  # an element's boolean is a byte (1 or 2)
                pos += 1
            else:
                item, pos = _read_value(buf, pos, elem, depth + 1)
                items.append(item)
        return (elem, items), pos
    raise _Refused(f"unsupported Thrift type {kind} in the footer")
