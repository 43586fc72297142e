"""Plain-Python versions of the kernels in sptool/_tfrecord.pyx, with the same signatures.

Used only as the test oracle (tests/test_tfrecord_kernels.py): byte by byte, written from the
protobuf wire-format rules, with a bitwise CRC-32C, so that they share no code or table with the
compiled kernels.
"""

from __future__ import annotations

import struct

import numpy as np

OK, ERR_LENGTH_CRC, ERR_DATA_CRC, ERR_WIRE, ERR_KIND = 0, 1, 2, 3, 4
K_NONE, K_BYTES, K_FLOAT, K_INT64 = 0, 1, 2, 3
HEADER, FOOTER = 12, 4


class _Bad(Exception):
    def __init__(self, status):
        self.status = status


def crc32c(buf, crc=0):
    crc ^= 0xFFFFFFFF
    for byte in bytes(buf):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(buf):
    crc = crc32c(buf)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _pieces(ids, width, start, piece):
    """Each row's pieces as (row, j, lo, hi) byte ranges within the row."""
    for i, row in enumerate(ids):
        first = start + int(row) * width
        cuts = [first] + [c for c in range((first // piece + 1) * piece, first + width, piece)] + [first + width]
        for j, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            if b > a:
                yield i, j, a - first, b - first


def crc32c_pieces(rows, ids, start, piece, pieces):
    rows = np.asarray(rows, dtype=np.uint8)
    out = np.zeros((len(rows), pieces), dtype=np.uint32)
    for i, j, a, b in _pieces(ids, rows.shape[1], start, piece):
        out[i, j] = crc32c(rows[i, a:b].tobytes())
    return out


def first_unmatched_row(cur, new, old, ids, start, piece):
    cur, new = np.asarray(cur, dtype=np.uint8), np.asarray(new, dtype=np.uint8)
    for i, j, a, b in _pieces(ids, cur.shape[1], start, piece):
        if cur[i, a:b].tobytes() != new[i, a:b].tobytes() and crc32c(cur[i, a:b].tobytes()) != old[i][j]:
            return i
    return -1


def scan_records(buf):
    buf = bytes(buf)
    n, pos = len(buf), 0
    offsets, lengths = [], []
    status, next_length = OK, -1
    while pos + HEADER <= n:
        (length,) = struct.unpack_from("<Q", buf, pos)
        if masked_crc32c(buf[pos : pos + 8]) != struct.unpack_from("<I", buf, pos + 8)[0]:
            status = ERR_LENGTH_CRC
            break
        if pos + HEADER + length + FOOTER > n:
            next_length = min(length, 1 << 62)
            break
        data = buf[pos + HEADER : pos + HEADER + length]
        if masked_crc32c(data) != struct.unpack_from("<I", buf, pos + HEADER + length)[0]:
            status = ERR_DATA_CRC
            break
        offsets.append(pos + HEADER)
        lengths.append(length)
        pos += HEADER + length + FOOTER
    return (np.array(offsets, dtype=np.int64), np.array(lengths, dtype=np.int64), pos, status, next_length)


def _varint(buf, p, e):
    value, shift = 0, 0
    while p < e and shift < 70:
        b = buf[p]
        value |= (b & 0x7F) << shift
        p += 1
        if not b & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, p
        shift += 7
    raise _Bad(ERR_WIRE)


def _fields(buf, p, e):
    """(tag, value start, value end) of each field in [p, e); varints' values as (int, end)."""
    while p < e:
        tag, p = _varint(buf, p, e)
        wt = tag & 7
        if wt == 0:
            value, q = _varint(buf, p, e)
            yield tag, value, p, q
            p = q
            continue
        if wt == 1 or wt == 5:
            size = 8 if wt == 1 else 4
        elif wt == 2:
            size, p = _varint(buf, p, e)
        else:
            raise _Bad(ERR_WIRE)
        if size > e - p:
            raise _Bad(ERR_WIRE)
        yield tag, None, p, p + size
        p += size


def _feature_spans(buf, start, end, names):
    spans = {}
    for tag, _, p, q in _fields(buf, start, end):
        if tag != 0x0A:
            continue
        for tag2, _, p2, q2 in _fields(buf, p, q):
            if tag2 != 0x0A:
                continue
            key, value = b"", None
            for tag3, _, p3, q3 in _fields(buf, p2, q2):
                if tag3 == 0x0A:
                    key = buf[p3:q3]
                elif tag3 == 0x12:
                    value = (p3, q3)
            for f, name in enumerate(names):
                if key == name:
                    spans[f] = value
    return spans


def _feature(buf, span):
    if span is None or span[0] == span[1]:
        return K_NONE, 0, 0, 0
    p, e = span
    tag, p = _varint(buf, p, e)
    if tag not in (0x0A, 0x12, 0x1A):
        raise _Bad(ERR_KIND)
    kind = tag >> 3
    size, p = _varint(buf, p, e)
    if size > e - p:
        raise _Bad(ERR_WIRE)
    first, last = p, p + size
    count = 0
    for tag, _, a, b in _fields(buf, first, last):
        if tag == 0x0A:
            if kind == K_BYTES:
                count += 1
            elif kind == K_FLOAT:
                if (b - a) % 4:
                    raise _Bad(ERR_WIRE)
                count += (b - a) // 4
            else:
                while a < b:
                    _, a = _varint(buf, a, b)
                    count += 1
        elif (tag == 0x0D and kind == K_FLOAT) or (tag == 0x08 and kind == K_INT64):
            count += 1
    return kind, first, last, count


def locate_features(buf, offsets, lengths, names, name_ends):
    buf = bytes(buf)
    names = bytes(names)
    bounds = [0, *[int(e) for e in name_ends]]
    wanted = [names[bounds[f] : bounds[f + 1]] for f in range(len(bounds) - 1)]
    n, F = len(offsets), len(wanted)
    kinds = np.zeros((n, F), dtype=np.int8)
    firsts, lasts, counts = (np.zeros((n, F), dtype=np.int64) for _ in range(3))
    for i in range(n):
        start = int(offsets[i])
        try:
            spans = _feature_spans(buf, start, start + int(lengths[i]), wanted)
            for f in range(F):
                kinds[i, f], firsts[i, f], lasts[i, f], counts[i, f] = _feature(buf, spans.get(f))
        except _Bad as bad:
            kinds[i], firsts[i], lasts[i], counts[i] = 0, 0, 0, 0
            return kinds, firsts, lasts, counts, bad.status, i
    return kinds, firsts, lasts, counts, OK, -1


def _list_values(buf, firsts, lasts):
    for first, last in zip(firsts, lasts):
        yield from _fields(buf, int(first), int(last))


def read_numbers(buf, firsts, lasts, total, kind):
    buf = bytes(buf)
    out = []
    for tag, value, a, b in _list_values(buf, firsts, lasts):
        if kind == K_INT64 and tag == 0x0A:
            while a < b:
                v, a = _varint(buf, a, b)
                out.append(v)
        elif kind == K_INT64 and tag == 0x08:
            out.append(value)
        elif kind == K_FLOAT and tag in (0x0A, 0x0D):
            out.extend(struct.unpack(f"<{(b - a) // 4}f", buf[a:b]))
    assert len(out) == total
    if kind == K_INT64:
        return np.array(out, dtype=np.uint64).view(np.int64)
    return np.array(out, dtype=np.float32)


def read_bytes(buf, firsts, lasts, total):
    buf = bytes(buf)
    items = [buf[a:b] for tag, _, a, b in _list_values(buf, firsts, lasts) if tag == 0x0A]
    assert len(items) == total
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in items], dtype=np.int64)]).astype(np.int64)
    return offsets, np.frombuffer(b"".join(items), dtype=np.uint8)


def _varint_bytes(v):
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _delimited(tag, payload):
    return bytes([tag]) + _varint_bytes(len(payload)) + payload


def encode_examples(rows, columns):
    out = bytearray()
    for r in range(rows):
        entries = b""
        for kind, name, starts, ints, floats, boffsets, bdata in columns:
            a, b = int(starts[r]), int(starts[r + 1])
            if kind == K_INT64:
                packed = b"".join(_varint_bytes(int(v)) for v in ints[a:b])
                lst = _delimited(0x0A, packed) if packed else b""
            elif kind == K_FLOAT:
                lst = _delimited(0x0A, np.asarray(floats[a:b], dtype="<f4").tobytes()) if b > a else b""
            else:
                data = bytes(bdata)
                lst = b"".join(_delimited(0x0A, data[int(boffsets[i]) : int(boffsets[i + 1])]) for i in range(a, b))
            feature = _delimited((kind << 3) | 2, lst)
            entries += _delimited(0x0A, _delimited(0x0A, bytes(name)) + _delimited(0x12, feature))
        data = _delimited(0x0A, entries) if entries else b""
        head = struct.pack("<Q", len(data))
        out += head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))
    return out


def order_within_rows(counts, ids):
    ids = np.asarray(ids)
    order = np.arange(len(ids), dtype=np.int64)
    a = 0
    for c in np.asarray(counts).tolist():
        order[a : a + c] = a + np.argsort(ids[a : a + c], kind="stable")
        a += c
    return None if np.array_equal(order, np.arange(len(ids))) else order
