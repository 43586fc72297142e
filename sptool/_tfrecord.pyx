# cython: language_level=3
# Compiler directives (boundscheck, wraparound, ...) are set in setup.py so that a debug
# build can turn the checks back on; do not add them here.
"""TFRecord framing and tf.train.Example records: bytes in, arrays out, the GIL released.

A TFRecord file is a sequence of records, each ``uint64 length``, ``uint32 masked CRC-32C
of those 8 bytes``, ``length`` bytes of data, ``uint32 masked CRC-32C of the data`` (all
little-endian).  The data of each record is a serialized ``tf.train.Example``:

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }       (entries: key = 1, value = 2)
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                             Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1; }
    Int64List { repeated int64 value = 1; }

This is a hand-written reader of just that much of the protobuf wire format, following
TensorFlow's own fast parser (tensorflow/core/util/example_proto_fast_parsing.cc): the
last map entry of a key wins (protobuf's map rule, which TensorFlow's parser reproduces),
a Feature's kind is its first field, an empty Feature has no kind (a missing value),
repeated scalars are read packed or not, and unknown fields are skipped.

CRC-32C is computed here (slicing-by-8 tables): record by record inside these loops, and as
the fallback of the stream digest's (sptool/_crc32c.py) where google-crc32c is not installed;
sptool's runtime dependencies are click, numpy, pyarrow and rich only, and neither the
standard library nor pyarrow exposes CRC-32C.  The tests check it against google-crc32c.
tests/references/tfrecord.py holds the plain-Python equivalent of every function here, used
as the test oracle.
"""

from libc.stdint cimport INT64_MAX, int8_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import numpy as np

from ._guards cimport outside

cdef enum:
    _OK = 0
    _ERR_LENGTH_CRC = 1    # the masked CRC-32C of a record's length bytes is wrong
    _ERR_DATA_CRC = 2      # the masked CRC-32C of a record's data is wrong
    _ERR_WIRE = 3          # the data is not a valid protobuf message of the Example shape
    _ERR_KIND = 4          # a Feature's first field is not bytes_list, float_list or int64_list
    _TOO_MANY = 5          # read_*: more values than the caller counted

cdef enum:
    _HEADER = 12   # length and its CRC
    _FOOTER = 4    # the data's CRC

cdef enum:
    _K_NONE = 0
    _K_BYTES = 1
    _K_FLOAT = 2
    _K_INT64 = 3

OK = _OK
ERR_LENGTH_CRC = _ERR_LENGTH_CRC
ERR_DATA_CRC = _ERR_DATA_CRC
ERR_WIRE = _ERR_WIRE
ERR_KIND = _ERR_KIND
K_NONE = _K_NONE
K_BYTES = _K_BYTES
K_FLOAT = _K_FLOAT
K_INT64 = _K_INT64
HEADER = _HEADER
FOOTER = _FOOTER

cdef uint32_t _CRC[8][256]
cdef uint32_t _MASK_DELTA = 0xa282ead8u


def _crc_tables():
    cdef uint32_t c
    cdef int i, k, _bit
    for i in range(256):
        c = i
        for _bit in range(8):
            c = (c >> 1) ^ (0x82f63b78u if c & 1 else 0)   # the Castagnoli polynomial, reflected
        _CRC[0][i] = c
    for i in range(256):
        for k in range(1, 8):
            _CRC[k][i] = (_CRC[k - 1][i] >> 8) ^ _CRC[0][_CRC[k - 1][i] & 0xff]


_crc_tables()


cdef inline uint32_t _le32(const uint8_t* p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint64_t _le64(const uint8_t* p) noexcept nogil:
    return _le32(p) | (<uint64_t>_le32(p + 4) << 32)


cdef uint32_t _crc32c(uint32_t crc, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Slicing-by-8: eight table lookups per 8 bytes instead of one per byte."""
    cdef uint32_t lo, hi
    crc = ~crc
    while n >= 8:
        lo = _le32(p) ^ crc
        hi = _le32(p + 4)
        crc = (_CRC[7][lo & 0xff] ^ _CRC[6][(lo >> 8) & 0xff] ^ _CRC[5][(lo >> 16) & 0xff] ^
               _CRC[4][lo >> 24] ^ _CRC[3][hi & 0xff] ^ _CRC[2][(hi >> 8) & 0xff] ^
               _CRC[1][(hi >> 16) & 0xff] ^ _CRC[0][hi >> 24])
        p += 8
        n -= 8
    while n > 0:
        crc = (crc >> 8) ^ _CRC[0][(crc ^ p[0]) & 0xff]
        p += 1
        n -= 1
    return ~crc


cdef inline uint32_t _masked(uint32_t crc) noexcept nogil:
    # TFRecord stores CRCs "masked" (rotated and offset): a CRC of data that embeds CRCs is weak.
    return ((crc >> 15) | (crc << 17)) + _MASK_DELTA


def crc32c(const uint8_t[::1] buf, uint32_t crc=0):
    """The CRC-32C of ``buf``; pass a previous result as ``crc`` to continue it."""
    with nogil:
        crc = _crc32c(crc, &buf[0] if buf.shape[0] else NULL, buf.shape[0])
    return crc


def masked_crc32c(const uint8_t[::1] buf):
    """The masked CRC-32C that TFRecord stores for ``buf``."""
    cdef uint32_t crc
    with nogil:
        crc = _masked(_crc32c(0, &buf[0] if buf.shape[0] else NULL, buf.shape[0]))
    return crc


cdef bint _walk_pieces(const uint8_t* row, Py_ssize_t w, int64_t first, int64_t piece, uint32_t* out,
                       const uint8_t* new, const uint32_t* old) noexcept nogil:
    """The pieces of a row of ``w`` bytes at file offset ``first``, cut at the multiples of
    ``piece``: with ``out``, each piece's CRC-32C stored there; otherwise whether every piece
    equals that of ``new`` or has the CRC-32C ``old[j]``."""
    cdef int64_t at = first, end = first + w, cut
    cdef Py_ssize_t j = 0
    while at < end:
        cut = min(end, (at // piece + 1) * piece)
        if out != NULL:
            out[j] = _crc32c(0, row + (at - first), cut - at)
        elif (memcmp(row + (at - first), new + (at - first), cut - at) != 0 and
                _crc32c(0, row + (at - first), cut - at) != old[j]):
            return False
        at, j = cut, j + 1
    return True


cdef int _check_places(str kernel, const int64_t[::1] ids, int64_t start, Py_ssize_t w) except -1:
    """Rows at ``start + ids[i] * w`` must lie at non-negative offsets of an int64-sized file."""
    cdef Py_ssize_t i
    if start < 0:
        raise ValueError(f"{kernel}: start {start} is negative")
    for i in range(ids.shape[0]):
        if ids[i] < 0 or (w and ids[i] > (INT64_MAX - start) // w - 1):
            raise outside(kernel, "row id", i, ids[i], (INT64_MAX - start) // w if w else INT64_MAX)
    return 0


def crc32c_pieces(const uint8_t[:, ::1] rows, const int64_t[::1] ids, int64_t start, int64_t piece,
                  Py_ssize_t pieces):
    """The CRC-32C of each piece of each row: row i lies at byte ``start + ids[i] * width`` of
    its file (width = rows.shape[1]) and is cut at the multiples of ``piece``; out[i, j] is the
    CRC of its j-th piece, 0 past its last.  ``pieces`` columns must hold the most pieces a
    row can be cut into.  (The apply journal's check of a table: a file's pages are written back
    whole, so a crash tears a row only at these cuts.)"""
    cdef Py_ssize_t n = rows.shape[0], w = rows.shape[1], i
    if piece <= 0 or ids.shape[0] != n:
        raise ValueError("crc32c_pieces: piece must be > 0 and ids must have a row id per row")
    _check_places("crc32c_pieces", ids, start, w)
    if w and pieces < (piece - 1 + w - 1) // piece + 1:
        raise ValueError(f"crc32c_pieces: {pieces} pieces cannot hold a row of {w} bytes cut every {piece}")
    out = np.zeros((n, pieces), dtype=np.uint32)
    cdef uint32_t[:, ::1] o = out
    if w:
        with nogil:
            for i in range(n):
                _walk_pieces(&rows[i, 0], w, start + ids[i] * w, piece, &o[i, 0], NULL, NULL)
    return out


def first_unmatched_row(const uint8_t[:, ::1] cur, const uint8_t[:, ::1] new, const uint32_t[:, ::1] old,
                        const int64_t[::1] ids, int64_t start, int64_t piece):
    """The first i for which a piece of row cur[i] (cut as crc32c_pieces cuts it) is neither
    the same piece of new[i] nor of CRC-32C old[i, j]; -1 when every row is, piece by piece,
    new or old."""
    cdef Py_ssize_t n = cur.shape[0], w = cur.shape[1], i, bad = -1
    if piece <= 0 or new.shape[0] != n or new.shape[1] != w or old.shape[0] != n or ids.shape[0] != n:
        raise ValueError("first_unmatched_row: cur, new, old and ids must have the same rows")
    if w and old.shape[1] < (piece - 1 + w - 1) // piece + 1:
        raise ValueError("first_unmatched_row: too few pieces in old")
    _check_places("first_unmatched_row", ids, start, w)
    if w:
        with nogil:
            for i in range(n):
                if not _walk_pieces(&cur[i, 0], w, start + ids[i] * w, piece, NULL, &new[i, 0], &old[i, 0]):
                    bad = i
                    break
    return bad


def scan_records(const uint8_t[::1] buf):
    """The whole records at the start of ``buf``, their CRCs verified.

    Returns (offsets, lengths, end, status, next_length): the data of record i is
    ``buf[offsets[i] : offsets[i] + lengths[i]]``; ``end`` is where the first record not
    returned starts.  status OK: the bytes from ``end`` on are not a whole record, and
    ``next_length`` is its data length when its header is whole (else -1).  Otherwise
    ``status`` (ERR_LENGTH_CRC, ERR_DATA_CRC) says what is wrong with the record at ``end``,
    the record after the last one returned.
    """
    cdef Py_ssize_t n = buf.shape[0], pos = 0, count = 0
    cdef uint64_t length
    cdef int status = _OK
    cdef int64_t next_length = -1
    offsets = np.empty(n // (_HEADER + _FOOTER) + 1, dtype=np.int64)
    lengths = np.empty(n // (_HEADER + _FOOTER) + 1, dtype=np.int64)
    cdef int64_t[::1] off = offsets, ln = lengths
    cdef const uint8_t* p = &buf[0] if n else NULL
    with nogil:
        while pos + _HEADER <= n:
            length = _le64(p + pos)
            if _masked(_crc32c(0, p + pos, 8)) != _le32(p + pos + 8):
                status = _ERR_LENGTH_CRC
                break
            if length > <uint64_t>(n - pos - _HEADER - _FOOTER) or pos + _HEADER + _FOOTER > n:
                next_length = <int64_t>length if length < (<uint64_t>1 << 62) else (<int64_t>1 << 62)
                break
            if _masked(_crc32c(0, p + pos + _HEADER, <Py_ssize_t>length)) != _le32(p + pos + _HEADER + length):
                status = _ERR_DATA_CRC
                break
            off[count] = pos + _HEADER
            ln[count] = <int64_t>length
            count += 1
            pos += _HEADER + _FOOTER + <Py_ssize_t>length
    return offsets[:count], lengths[:count], pos, status, next_length


# -- the protobuf wire format -------------------------------------------------------------

cdef inline int _varint(const uint8_t** pp, const uint8_t* e, uint64_t* out) noexcept nogil:
    """Read one varint at *pp (at most 10 bytes, not past e); 0 on success."""
    cdef const uint8_t* p = pp[0]
    cdef uint64_t v = 0
    cdef int shift = 0
    while p < e and shift < 70:
        v |= (<uint64_t>(p[0] & 0x7f)) << shift
        if not (p[0] & 0x80):
            pp[0] = p + 1
            out[0] = v
            return 0
        p += 1
        shift += 7
    return -1


cdef inline int _skip(const uint8_t** pp, const uint8_t* e, uint64_t tag) noexcept nogil:
    """Skip the value of a field with ``tag``; 0 on success (groups are refused)."""
    cdef uint64_t v
    cdef int wt = tag & 7
    if wt == 0:
        return _varint(pp, e, &v)
    if wt == 1 or wt == 5:
        v = 8 if wt == 1 else 4
    elif wt == 2:
        if _varint(pp, e, &v):
            return -1
    else:
        return -1
    if v > <uint64_t>(e - pp[0]):
        return -1
    pp[0] += v
    return 0


cdef inline int _delimited(const uint8_t** pp, const uint8_t* e, const uint8_t** end) noexcept nogil:
    """After a length-delimited tag: the field's bytes are [*pp, *end) and *pp moves past them."""
    cdef uint64_t v
    if _varint(pp, e, &v) or v > <uint64_t>(e - pp[0]):
        return -1
    end[0] = pp[0] + v
    return 0


cdef int _map_entry(const uint8_t* p, const uint8_t* e, const uint8_t** key, Py_ssize_t* key_len,
                    const uint8_t** val, const uint8_t** val_end) noexcept nogil:
    cdef uint64_t tag
    cdef const uint8_t* end
    key[0] = NULL
    key_len[0] = 0
    val[0] = NULL
    val_end[0] = NULL
    while p < e:
        if _varint(&p, e, &tag):
            return -1
        if tag == 0x0a or tag == 0x12:
            if _delimited(&p, e, &end):
                return -1
            if tag == 0x0a:
                key[0] = p
                key_len[0] = end - p
            else:
                val[0] = p
                val_end[0] = end
            p = end
        elif _skip(&p, e, tag):
            return -1
    return 0


cdef int _example(const uint8_t* p, const uint8_t* e, const uint8_t* names, const int64_t* name_ends,
                  Py_ssize_t F, const uint8_t** spans) noexcept nogil:
    """Find the Feature of each name (the last entry of that key); spans[2f], spans[2f+1]
    bound it (NULL, NULL if absent)."""
    cdef uint64_t tag
    cdef const uint8_t* fe
    cdef const uint8_t* ee
    cdef const uint8_t* key
    cdef const uint8_t* val
    cdef const uint8_t* val_end
    cdef Py_ssize_t key_len, f, start
    while p < e:
        if _varint(&p, e, &tag):
            return -1
        if tag != 0x0a:   # Example.features; anything else is skipped
            if _skip(&p, e, tag):
                return -1
            continue
        if _delimited(&p, e, &fe):
            return -1
        while p < fe:   # the Features message: its map entries
            if _varint(&p, fe, &tag):
                return -1
            if tag != 0x0a:
                if _skip(&p, fe, tag):
                    return -1
                continue
            if _delimited(&p, fe, &ee):
                return -1
            if _map_entry(p, ee, &key, &key_len, &val, &val_end):
                return -1
            p = ee
            start = 0
            for f in range(F):
                if name_ends[f] - start == key_len and (key_len == 0 or memcmp(names + start, key, key_len) == 0):
                    spans[2 * f] = val
                    spans[2 * f + 1] = val_end
                start = name_ends[f]
    return 0


cdef int _feature(const uint8_t* p, const uint8_t* e, int8_t* kind, int64_t* first, int64_t* last,
                  int64_t* count, const uint8_t* base) noexcept nogil:
    """A Feature: its kind, the bounds of its list message (as offsets from ``base``) and its
    number of values."""
    cdef uint64_t tag, v
    cdef const uint8_t* le
    cdef const uint8_t* pe = NULL
    cdef int64_t n = 0
    kind[0] = _K_NONE
    first[0] = last[0] = count[0] = 0
    if p == NULL or p == e:
        return 0
    if _varint(&p, e, &tag):
        return _ERR_WIRE
    if tag != 0x0a and tag != 0x12 and tag != 0x1a:
        return _ERR_KIND
    kind[0] = <int8_t>(tag >> 3)
    if _delimited(&p, e, &le):
        return _ERR_WIRE
    first[0] = p - base
    last[0] = le - base
    while p < le:
        if _varint(&p, le, &tag):
            return _ERR_WIRE
        if tag == 0x0a:
            if _delimited(&p, le, &pe):
                return _ERR_WIRE
            if kind[0] == _K_BYTES:
                n += 1
            elif kind[0] == _K_FLOAT:
                if (pe - p) % 4:
                    return _ERR_WIRE
                n += (pe - p) // 4
            else:
                while p < pe:
                    if _varint(&p, pe, &v):
                        return _ERR_WIRE
                    n += 1
            p = pe
        elif (tag == 0x0d and kind[0] == _K_FLOAT) or (tag == 0x08 and kind[0] == _K_INT64):
            if _skip(&p, le, tag):
                return _ERR_WIRE
            n += 1
        elif _skip(&p, le, tag):
            return _ERR_WIRE
    count[0] = n
    return 0


cdef int _check_spans(str kernel, const int64_t[:] starts, const int64_t[:] ends_or_lengths, Py_ssize_t size,
                      bint lengths) except -1:
    """The spans [starts[i], starts[i] + lengths[i]) (or [starts[i], ends[i])) must lie in a buffer
    of ``size`` bytes."""
    cdef Py_ssize_t i
    cdef int64_t a, b
    if ends_or_lengths.shape[0] != starts.shape[0]:
        raise ValueError(f"{kernel}: one end per start")
    for i in range(starts.shape[0]):
        a = starts[i]
        b = ends_or_lengths[i]
        if not (0 <= a <= size and (0 <= b <= size - a if lengths else a <= b <= size)):
            raise ValueError(f"{kernel}: span {i} ({a}, {b}) runs outside the {size} bytes")
    return 0


def locate_features(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] lengths,
                    const uint8_t[::1] names, const int64_t[::1] name_ends):
    """For each record (an Example at ``buf[offsets[i] : offsets[i] + lengths[i]]``) and each
    feature name (the names concatenated in ``names``, name f ending at ``name_ends[f]``):
    the kind (K_NONE when absent or empty), the bounds of its list message in ``buf`` and
    its number of values.

    Returns (kinds (n, F) int8, firsts (n, F), lasts (n, F), counts (n, F), status, record):
    status ERR_WIRE or ERR_KIND names the first bad record (the rows from it on are unset).
    """
    cdef Py_ssize_t n = offsets.shape[0], F = name_ends.shape[0], i, f
    kinds = np.zeros((n, F), dtype=np.int8)
    firsts = np.zeros((n, F), dtype=np.int64)
    lasts = np.zeros((n, F), dtype=np.int64)
    counts = np.zeros((n, F), dtype=np.int64)
    cdef int8_t[:, ::1] k = kinds
    cdef int64_t[:, ::1] fi = firsts, la = lasts, co = counts
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* nm = &names[0] if names.shape[0] else NULL
    cdef const uint8_t* spans[64]
    cdef int status = _OK
    cdef Py_ssize_t bad = -1
    if F > 32:
        raise ValueError("at most 32 feature names")
    _check_spans("locate_features", offsets, lengths, buf.shape[0], True)
    for f in range(F):
        if name_ends[f] < (name_ends[f - 1] if f else 0) or name_ends[f] > names.shape[0]:
            raise ValueError("locate_features: name_ends must rise within names")
    with nogil:
        for i in range(n):
            for f in range(2 * F):
                spans[f] = NULL
            if _example(base + offsets[i], base + offsets[i] + lengths[i], nm, &name_ends[0] if F else NULL,
                        F, spans):
                status = _ERR_WIRE
            else:
                for f in range(F):
                    status = _feature(spans[2 * f], spans[2 * f + 1], &k[i, f], &fi[i, f], &la[i, f],
                                      &co[i, f], base)
                    if status:
                        break
            if status:
                bad = i
                break
    return kinds, firsts, lasts, counts, status, bad


def read_numbers(const uint8_t[::1] buf, const int64_t[:] firsts, const int64_t[:] lasts, int64_t total,
                 int kind):
    """The values of the int64 lists (kind K_INT64: an int64 array) or float lists (K_FLOAT: a
    float32 array) located by locate_features, in order (``total`` of them).  ValueError when a
    list is not well-formed or the lists hold other than ``total`` values."""
    cdef bint ints = kind == _K_INT64
    if kind != _K_INT64 and kind != _K_FLOAT:
        raise ValueError(f"read_numbers: kind {kind} is not K_INT64 or K_FLOAT")
    if total < 0:
        raise ValueError("read_numbers: a negative total")
    _check_spans("read_numbers", firsts, lasts, buf.shape[0], False)
    out = np.empty(total, dtype=np.int64 if ints else np.float32)
    cdef int8_t[::1] raw = out.view(np.int8)
    cdef int64_t* oi = <int64_t*>&raw[0] if total else NULL
    cdef float* of = <float*>&raw[0] if total else NULL
    cdef Py_ssize_t i = 0, j = 0
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* p
    cdef const uint8_t* e
    cdef const uint8_t* pe = NULL
    cdef uint64_t tag, v
    cdef uint64_t single = 0x08 if ints else 0x0d
    cdef int bad = _OK
    with nogil:
        for i in range(firsts.shape[0]):
            p = base + firsts[i]
            e = base + lasts[i]
            while p < e and not bad:
                if _varint(&p, e, &tag):
                    bad = _ERR_WIRE
                elif tag == 0x0a:   # packed
                    if _delimited(&p, e, &pe):
                        bad = _ERR_WIRE
                    elif not ints:
                        if (pe - p) % 4 or (pe - p) // 4 > total - j:
                            bad = _ERR_WIRE if (pe - p) % 4 else _TOO_MANY
                        elif pe > p:   # little-endian IEEE floats, as on every supported CPU
                            memcpy(of + j, p, pe - p)
                            j += (pe - p) // 4
                            p = pe
                    while not bad and p < pe:
                        if j == total:
                            bad = _TOO_MANY
                        elif _varint(&p, pe, &v):
                            bad = _ERR_WIRE
                        else:
                            oi[j] = <int64_t>v
                            j += 1
                elif tag == single:
                    if j == total:
                        bad = _TOO_MANY
                    elif ints:
                        if _varint(&p, e, &v):
                            bad = _ERR_WIRE
                        else:
                            oi[j] = <int64_t>v
                            j += 1
                    elif e - p < 4:
                        bad = _ERR_WIRE
                    else:
                        memcpy(of + j, p, 4)
                        p += 4
                        j += 1
                elif _skip(&p, e, tag):
                    bad = _ERR_WIRE
            if bad:
                break
    _check_read("read_numbers", bad, i, j, total)
    return out


cdef int _check_read(str kernel, int bad, Py_ssize_t i, Py_ssize_t j, int64_t total) except -1:
    if bad == _ERR_WIRE:
        raise ValueError(f"{kernel}: list {i} is not a well-formed protobuf list")
    if bad == _TOO_MANY:
        raise ValueError(f"{kernel}: the lists hold more than {total} values")
    if j != total:
        raise ValueError(f"{kernel}: the lists hold {j} values, not {total}")
    return 0


def read_bytes(const uint8_t[::1] buf, const int64_t[:] firsts, const int64_t[:] lasts, int64_t total):
    """The values of bytes lists located by locate_features, as Arrow binary buffers:
    (offsets int64 (total + 1), data uint8).  ValueError as read_numbers."""
    cdef Py_ssize_t i = 0, j = 0, size = 0, pass_
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* p
    cdef const uint8_t* e
    cdef const uint8_t* pe = NULL
    cdef uint64_t tag
    cdef int bad = _OK
    if total < 0:
        raise ValueError("read_bytes: a negative total")
    _check_spans("read_bytes", firsts, lasts, buf.shape[0], False)
    offsets = np.zeros(total + 1, dtype=np.int64)
    cdef int64_t[::1] o = offsets
    data = None
    cdef uint8_t[::1] d
    cdef uint8_t* dp = NULL
    for pass_ in range(2):   # sizes first, then the bytes
        if pass_ == 1:
            data = np.empty(size, dtype=np.uint8)
            d = data
            dp = &d[0] if size else NULL
        j = 0
        size = 0
        with nogil:
            for i in range(firsts.shape[0]):
                p = base + firsts[i]
                e = base + lasts[i]
                while p < e and not bad:
                    if _varint(&p, e, &tag):
                        bad = _ERR_WIRE
                    elif tag == 0x0a:
                        if _delimited(&p, e, &pe):
                            bad = _ERR_WIRE
                        elif j == total:
                            bad = _TOO_MANY
                        else:
                            if pass_ == 1 and pe > p:
                                memcpy(dp + size, p, pe - p)
                            size += pe - p
                            j += 1
                            o[j] = size
                            p = pe
                    elif _skip(&p, e, tag):
                        bad = _ERR_WIRE
                if bad:
                    break
        _check_read("read_bytes", bad, i, j, total)
    return offsets, data


# -- writing ------------------------------------------------------------------------------

cdef inline Py_ssize_t _varint_size(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline uint8_t* _put_varint(uint8_t* p, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <uint8_t>(v | 0x80)
        v >>= 7
        p += 1
    p[0] = <uint8_t>v
    return p + 1


cdef inline Py_ssize_t _field_size(Py_ssize_t payload) noexcept nogil:
    """A length-delimited field (one-byte tag) holding ``payload`` bytes."""
    return 1 + _varint_size(payload) + payload


cdef struct _Column:
    int kind                 # K_NONE: not written
    const uint8_t* name
    Py_ssize_t name_len
    const int64_t* starts    # value i of row r: starts[r] <= i < starts[r + 1]
    const int64_t* ints
    const float* floats
    const int64_t* boffsets  # bytes value i: data[boffsets[i] : boffsets[i + 1]]
    const uint8_t* bdata


cdef Py_ssize_t _list_payload(const _Column* c, Py_ssize_t r) noexcept nogil:
    """Bytes of the list message (Int64List, FloatList or BytesList) of row r."""
    cdef int64_t a = c.starts[r], b = c.starts[r + 1], i
    cdef Py_ssize_t n = 0
    if c.kind == _K_INT64:
        for i in range(a, b):
            n += _varint_size(<uint64_t>c.ints[i])
        return _field_size(n) if n else 0   # packed; an empty packed field is omitted
    if c.kind == _K_FLOAT:
        return _field_size(4 * (b - a)) if b > a else 0
    for i in range(a, b):
        n += _field_size(c.boffsets[i + 1] - c.boffsets[i])
    return n


cdef Py_ssize_t _entry_payload(const _Column* c, Py_ssize_t r) noexcept nogil:
    """Bytes of the map entry {key, Feature} of row r."""
    return _field_size(c.name_len) + _field_size(_field_size(_list_payload(c, r)))


cdef uint8_t* _put_entry(uint8_t* p, const _Column* c, Py_ssize_t r) noexcept nogil:
    cdef Py_ssize_t lst = _list_payload(c, r), n = 0
    cdef int64_t a = c.starts[r], b = c.starts[r + 1], i
    p[0] = 0x0a   # Features.feature (a map entry)
    p = _put_varint(p + 1, _entry_payload(c, r))
    p[0] = 0x0a   # key
    p = _put_varint(p + 1, c.name_len)
    memcpy(p, c.name, c.name_len)
    p += c.name_len
    p[0] = 0x12   # value: Feature
    p = _put_varint(p + 1, _field_size(lst))
    p[0] = <uint8_t>((c.kind << 3) | 2)   # the oneof: bytes_list, float_list or int64_list
    p = _put_varint(p + 1, lst)
    if c.kind == _K_INT64:
        if b > a:
            for i in range(a, b):
                n += _varint_size(<uint64_t>c.ints[i])
            p[0] = 0x0a
            p = _put_varint(p + 1, n)
            for i in range(a, b):
                p = _put_varint(p, <uint64_t>c.ints[i])
    elif c.kind == _K_FLOAT:
        if b > a:
            p[0] = 0x0a
            p = _put_varint(p + 1, 4 * (b - a))
            memcpy(p, c.floats + a, 4 * (b - a))
            p += 4 * (b - a)
    else:
        for i in range(a, b):
            p[0] = 0x0a
            p = _put_varint(p + 1, c.boffsets[i + 1] - c.boffsets[i])
            memcpy(p, c.bdata + c.boffsets[i], c.boffsets[i + 1] - c.boffsets[i])
            p += c.boffsets[i + 1] - c.boffsets[i]
    return p


cdef _Column _column(int kind, const uint8_t[::1] name, const int64_t[::1] starts, const int64_t[::1] ints,
                     const float[::1] floats, const int64_t[::1] boffsets, const uint8_t[::1] bdata):
    cdef _Column c
    c.kind = kind
    c.name = &name[0] if name.shape[0] else NULL
    c.name_len = name.shape[0]
    c.starts = &starts[0] if starts.shape[0] else NULL
    c.ints = &ints[0] if ints.shape[0] else NULL
    c.floats = &floats[0] if floats.shape[0] else NULL
    c.boffsets = &boffsets[0] if boffsets.shape[0] else NULL
    c.bdata = &bdata[0] if bdata.shape[0] else NULL
    return c


cdef int _check_column(Py_ssize_t f, int kind, Py_ssize_t rows, const int64_t[::1] starts, Py_ssize_t n_ints,
                       Py_ssize_t n_floats, const int64_t[::1] boffsets, Py_ssize_t n_bytes) except -1:
    """Feature f's rows must take consecutive values (starts rising) within its arrays."""
    cdef Py_ssize_t r, i, n
    if kind != _K_BYTES and kind != _K_FLOAT and kind != _K_INT64:
        raise ValueError(f"encode_examples: feature {f} has kind {kind}, not K_BYTES, K_FLOAT or K_INT64")
    if starts.shape[0] != rows + 1:
        raise ValueError("starts must hold rows + 1 offsets")
    n = n_ints if kind == _K_INT64 else n_floats if kind == _K_FLOAT else max(boffsets.shape[0] - 1, 0)
    for r in range(rows):
        if not 0 <= starts[r] <= starts[r + 1] <= n:
            raise ValueError(f"encode_examples: feature {f}'s starts must rise within its {n} values (row {r})")
    if kind == _K_BYTES and rows and starts[rows] > starts[0]:
        for i in range(starts[0], starts[rows]):
            if not 0 <= boffsets[i] <= boffsets[i + 1] <= n_bytes:
                raise ValueError(f"encode_examples: feature {f}'s byte offsets must rise within its {n_bytes} "
                                 f"bytes (value {i})")
    return 0


def encode_examples(Py_ssize_t rows, list columns):
    """TFRecord records of ``rows`` Examples, framed with their masked CRCs, as a bytearray.

    ``columns``: one tuple per feature, written in this order in every Example:
    (kind, name bytes, starts int64 (rows + 1), ints int64, floats float32, boffsets int64,
    bdata uint8): row r's values are items starts[r] to starts[r + 1] of ints (K_INT64),
    floats (K_FLOAT) or the byte strings bdata[boffsets[i] : boffsets[i + 1]] (K_BYTES).
    The arrays a kind does not use may be empty.  Every feature is written, with an empty
    list when a row has no values (as TensorFlow's writers do).
    """
    cdef Py_ssize_t F = len(columns), r, f, total = 0, size
    cdef _Column cols[8]
    cdef const uint8_t[::1] name, bdata
    cdef const int64_t[::1] starts, ints, boffsets
    cdef const float[::1] floats
    if F > 8 or rows < 0:
        raise ValueError("at most 8 features, and rows >= 0")
    for f in range(F):
        kind, name, starts, ints, floats, boffsets, bdata = columns[f]
        _check_column(f, kind, rows, starts, ints.shape[0], floats.shape[0], boffsets, bdata.shape[0])
        cols[f] = _column(kind, name, starts, ints, floats, boffsets, bdata)
    sizes = np.empty(rows, dtype=np.int64)
    cdef int64_t[::1] sz = sizes
    with nogil:
        for r in range(rows):
            size = 0
            for f in range(F):
                size += _field_size(_entry_payload(&cols[f], r))
            sz[r] = size   # the Features message
            total += _HEADER + _FOOTER + (_field_size(size) if size else 0)
    out = bytearray(total)
    cdef uint8_t[::1] o = out
    cdef uint8_t* p = &o[0] if total else NULL
    cdef uint8_t* start
    cdef uint32_t crc
    cdef Py_ssize_t length
    with nogil:
        for r in range(rows):
            length = _field_size(sz[r]) if sz[r] else 0
            for f in range(8):
                p[f] = <uint8_t>((<uint64_t>length) >> (8 * f))
            crc = _masked(_crc32c(0, p, 8))
            for f in range(4):
                p[8 + f] = <uint8_t>(crc >> (8 * f))
            p += _HEADER
            start = p
            if length:
                p[0] = 0x0a   # Example.features
                p = _put_varint(p + 1, sz[r])
                for f in range(F):
                    p = _put_entry(p, &cols[f], r)
            crc = _masked(_crc32c(0, start, length))
            for f in range(4):
                p[f] = <uint8_t>(crc >> (8 * f))
            p += _FOOTER
    return out


cdef bint _insertion(int64_t* o, Py_ssize_t n, const int64_t* ids) noexcept nogil:
    """Stable insertion sort of o[0:n] by ids[o[i]]; True if anything moved."""
    cdef Py_ssize_t i, j
    cdef int64_t t, key
    cdef bint moved = False
    for i in range(1, n):
        t = o[i]
        key = ids[t]
        j = i - 1
        while j >= 0 and ids[o[j]] > key:
            o[j + 1] = o[j]
            j -= 1
            moved = True
        o[j + 1] = t
    return moved


cdef bint _merge_sort(int64_t* o, int64_t* tmp, Py_ssize_t n, const int64_t* ids) noexcept nogil:
    """Stable bottom-up merge sort of o[0:n] by ids[o[i]] (runs of 16 by insertion first)."""
    cdef Py_ssize_t width = 16, a, m, b, i, j, k
    cdef bint moved = False
    cdef int64_t* src = o
    cdef int64_t* dst = tmp
    cdef int64_t* swap
    a = 0
    while a < n:
        moved |= _insertion(o + a, min(width, n - a), ids)
        a += width
    while width < n:
        a = 0
        while a < n:
            m = min(a + width, n)
            b = min(a + 2 * width, n)
            i, j, k = a, m, a
            while i < m and j < b:
                if ids[src[j]] < ids[src[i]]:   # strictly less: ties keep the left (earlier) one first
                    dst[k] = src[j]
                    j += 1
                    moved = True
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < m:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < b:
                dst[k] = src[j]
                j += 1
                k += 1
            a += 2 * width
        swap = src
        src = dst
        dst = swap
        width *= 2
    if src != o:
        memcpy(o, src, n * sizeof(int64_t))
    return moved


def order_within_rows(const int64_t[::1] counts, const int64_t[::1] ids):
    """The permutation that sorts ``ids`` within each row (row i holds the next counts[i] of
    them), stable so that repeated ids keep their order; None when every row is already
    sorted.  Short rows (the usual Example) are sorted by insertion, long ones by merging."""
    cdef Py_ssize_t n = counts.shape[0], r, a = 0, c, longest = 0
    cdef bint moved = False
    for r in range(n):
        if counts[r] < 0 or counts[r] > ids.shape[0] - a:
            raise ValueError(f"order_within_rows: the counts (row {r}) are negative or exceed the {ids.shape[0]} ids")
        a += counts[r]
        longest = max(longest, counts[r])
    if a != ids.shape[0]:
        raise ValueError(f"order_within_rows: the counts add up to {a}, not to the {ids.shape[0]} ids")
    a = 0
    order = np.arange(ids.shape[0], dtype=np.int64)
    tmp = np.empty(longest if longest > 16 else 0, dtype=np.int64)
    cdef int64_t[::1] o = order, t = tmp
    cdef int64_t* tp = &t[0] if t.shape[0] else NULL
    cdef const int64_t* ip = &ids[0] if ids.shape[0] else NULL
    with nogil:
        for r in range(n):
            c = counts[r]
            if c > 16:
                moved |= _merge_sort(&o[a], tp, c, ip)
            elif c > 1:
                moved |= _insertion(&o[a], c, ip)
            a += c
    return order if moved else None
