"""Plain Python versions of the kernels in sptool/_checks.pyx, with the same signatures.

Used only as the test oracle (tests/test_checks_kernels.py); the library always runs the
compiled kernels.  footer_chunks is the Thrift walker sptool ran before it was compiled.
"""

from __future__ import annotations

import numpy as np
from sptool._kernels import OUT_OF_ORDER, REPEATED

from sptool.io._footer import _I32, _LIST, _STRUCT, FooterError, _field, _list_header, _skip, _varint

ABSENT = -(1 << 63)


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
    except FooterError as e:
        raise ValueError(str(e)) from None
    if pos > len(footer):
        raise ValueError("the footer ends in the middle of a field")
    # Numbers beyond int64 (a damaged varint) are kept exactly here; the kernel keeps a stand-in.
    return groups, rows  # the kernel returns these rows as an (n, 4) int64 array

