# cython: language_level=3
# Compiler directives are set in setup.py (see sptool/_kernels.pyx).
"""Compiled read checks: the order of packed sort codes, and sptool's one reader of Thrift's
compact protocol (Parquet's footers, page headers and offset indexes): the walk of a footer for
what pyarrow would abort on, and a struct read into a field tree.

Arrays (or bytes) in, arrays (or field trees) out, the GIL released in the loops that make no
Python objects.  Their plain Python equivalents, the test oracles, are tests/references/checks.py.
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, realloc

import numpy as np

from ._kernels import OUT_OF_ORDER, REPEATED


def codes_order_violation(const uint64_t[::1] codes, bint check_repeats, bint has_prev=False,
                          uint64_t prev=0):
    """(row, kind) of the first of ``codes`` (packed sort codes, increasing with the order) not
    after its predecessor (``prev`` before the first, when ``has_prev``): kind OUT_OF_ORDER when
    it is smaller, REPEATED when equal and ``check_repeats``; (-1, 0) when none.  One comparison
    per row and no temporary array."""
    cdef Py_ssize_t n = codes.shape[0], i, bad = -1
    cdef uint64_t last = prev
    if n == 0:
        return -1, 0
    if has_prev and (codes[0] < prev or (check_repeats and codes[0] == prev)):
        bad = 0
    else:
        with nogil:
            last = codes[0]
            if check_repeats:
                for i in range(1, n):
                    if codes[i] <= last:
                        bad = i
                        break
                    last = codes[i]
            else:
                for i in range(1, n):
                    if codes[i] < last:
                        bad = i
                        break
                    last = codes[i]
    if bad < 0:
        return -1, 0
    before = prev if bad == 0 else codes[bad - 1]
    return bad, REPEATED if codes[bad] == before else OUT_OF_ORDER


# -- the footer walk (formats: Parquet's parquet.thrift, Thrift compact protocol) ---------------

cdef enum:
    _BOOL_TRUE = 1
    _BOOL_FALSE = 2
    _BYTE = 3
    _I16 = 4
    _I32 = 5
    _I64 = 6
    _DOUBLE = 7
    _BINARY = 8
    _LIST = 9
    _SET = 10
    _MAP = 11
    _STRUCT = 12

# Why a walk stopped (the reference's FooterError messages, in the same order of precedence).
cdef enum:
    _OK = 0
    _ENDS = 1        # "the footer ends in the middle of a field"
    _VARINT = 2      # "a varint in the footer is too long"
    _DEPTH = 3       # "the footer nests too deeply"
    _TYPE = 4        # "unknown Thrift type N in the footer"
    _MEMORY = 5
    _UNSUPPORTED = 6  # "unsupported Thrift type N in the footer" (read_struct: a map, or unknown)
    _WIDE = 7        # "a number in the footer is wider than 64 bits" (read_struct)

# A field the footer does not hold, and a number too large for int64 (the reference keeps it
# exactly, as a Python int: it can equal no type, field id or level count that means anything).
ABSENT = -(1 << 63)
cdef int64_t _ABSENT = -0x7FFFFFFFFFFFFFFF - 1
cdef int64_t _HUGE = 0x7FFFFFFFFFFFFFFF


cdef struct _Walk:
    const uint8_t* buf
    Py_ssize_t n
    Py_ssize_t pos
    int err
    int bad_type
    # per column chunk: its row group, type, repetition and definition histogram lengths
    Py_ssize_t chunks
    Py_ssize_t cap
    int64_t* out  # 4 values per chunk
    Py_ssize_t groups


cdef inline int _byte(_Walk* w) noexcept nogil:
    """The byte at pos (advancing past it), or -1 (err set) past the end."""
    if w.pos >= w.n or w.pos < 0:
        w.err = _ENDS
        return -1
    w.pos += 1
    return w.buf[w.pos - 1]


cdef uint64_t _uvarint(_Walk* w, bint* wide) noexcept nogil:
    """A varint's low 64 bits; ``wide`` set when it has more."""
    cdef uint64_t value = 0
    cdef int shift = 0, b
    wide[0] = False
    while True:
        b = _byte(w)
        if b < 0:
            return 0
        if shift < 64:
            if shift > 57 and (b & 0x7F) >> (64 - shift):
                wide[0] = True
            value |= (<uint64_t>(b & 0x7F)) << shift
        elif b & 0x7F:
            wide[0] = True
        if not b & 0x80:
            return value
        shift += 7
        if shift > 70:
            w.err = _VARINT
            return 0


cdef int64_t _varint(_Walk* w) noexcept nogil:
    """A varint as an int64, _HUGE when it is larger."""
    cdef bint wide
    cdef uint64_t value = _uvarint(w, &wide)
    if wide or value > <uint64_t>_HUGE:
        return _HUGE
    return <int64_t>value


cdef inline int64_t _zigzag(int64_t z) noexcept nogil:
    if z == _HUGE:
        return _ABSENT + 1  # beyond int64 either way: equal to no meaningful number
    return (z >> 1) ^ -(z & 1)


cdef int64_t _list_header(_Walk* w, int* elem) noexcept nogil:
    cdef int head = _byte(w)
    if head < 0:
        return 0
    elem[0] = head & 0x0F
    if head >> 4 == 15:
        return _varint(w)
    return head >> 4


cdef int64_t _field(_Walk* w, int64_t last, int* ftype) noexcept nogil:
    """The next field's id (ftype 0 at the struct's end)."""
    cdef int head = _byte(w)
    ftype[0] = 0
    if head <= 0:
        return 0
    ftype[0] = head & 0x0F
    if head >> 4:
        return last + (head >> 4)
    return _zigzag(_varint(w))


cdef inline void _advance(_Walk* w, int64_t k) noexcept nogil:
    # Past the end is found by the next read, or by the walk's final check.
    if k > w.n - w.pos:
        w.pos = w.n + 1
    else:
        w.pos += k


cdef inline bint _is_bool(int kind) noexcept nogil:
    return kind == _BOOL_TRUE or kind == _BOOL_FALSE


cdef void _skip(_Walk* w, int kind, int depth) noexcept nogil:
    cdef int64_t n, i, last = 0
    cdef int ftype, elem, b, kv
    if kind == _I16 or kind == _I32 or kind == _I64:
        while True:
            b = _byte(w)
            if b < 0 or not b & 0x80:
                return
    elif kind == _BINARY:
        n = _varint(w)
        if not w.err:
            _advance(w, n)
    elif kind == _BOOL_TRUE or kind == _BOOL_FALSE:
        return
    elif kind == _BYTE:
        _advance(w, 1)
    elif kind == _DOUBLE:
        _advance(w, 8)
    elif depth > 64:
        w.err = _DEPTH
    elif kind == _STRUCT:
        while not w.err:
            last = _field(w, last, &ftype)
            if not ftype or w.err:
                return
            _skip(w, ftype, depth + 1)
    elif kind == _LIST or kind == _SET:
        n = _list_header(w, &elem)
        if w.err:
            return
        if elem == _BOOL_TRUE or elem == _BOOL_FALSE:
            _advance(w, n)
            return
        i = 0
        while i < n and not w.err:
            if w.pos > w.n:  # the reference reads on to the end here too; it stops there
                w.err = _ENDS
                return
            _skip(w, elem, depth + 1)
            i += 1
    elif kind == _MAP:
        n = _varint(w)
        if w.err or not n:
            return
        kv = _byte(w)
        if _is_bool(kv >> 4) and _is_bool(kv & 0x0F):
            # Entries that take no bytes (as the reference reads them): a count of 2**62 of them
            # would spin for ever, to the same end as none.
            return
        i = 0
        while i < n and not w.err:
            if w.pos > w.n:
                w.err = _ENDS
                return
            _skip(w, kv >> 4, depth + 1)
            if not w.err:
                _skip(w, kv & 0x0F, depth + 1)
            i += 1
    else:
        w.err = _TYPE
        w.bad_type = kind


cdef void _column_meta(_Walk* w, int64_t* found) noexcept nogil:
    cdef int64_t last = 0, slast, n
    cdef int ftype, stype, elem
    cdef Py_ssize_t at
    while not w.err:
        last = _field(w, last, &ftype)
        if not ftype or w.err:
            return
        if last == 1 and ftype == _I32:
            found[1] = _zigzag(_varint(w))
        elif last == 16 and ftype == _STRUCT:
            slast = 0
            while not w.err:
                slast = _field(w, slast, &stype)
                if not stype or w.err:
                    break
                if (slast == 2 or slast == 3) and stype == _LIST:
                    at = w.pos
                    n = _list_header(w, &elem)
                    if w.err:
                        return
                    found[slast] = n  # 2: repetition, 3: definition levels
                    w.pos = at
                _skip(w, stype, 0)
        else:
            _skip(w, ftype, 0)


cdef void _chunk(_Walk* w) noexcept nogil:
    cdef int64_t last = 0
    cdef int ftype
    cdef int64_t* row
    cdef int64_t* grown
    if w.chunks == w.cap:
        w.cap = 2 * w.cap + 64
        grown = <int64_t*>realloc(w.out, w.cap * 4 * sizeof(int64_t))
        if grown == NULL:
            w.err = _MEMORY
            return
        w.out = grown
    row = w.out + 4 * w.chunks
    w.chunks += 1
    row[0] = w.groups - 1
    row[1] = row[2] = row[3] = _ABSENT
    while not w.err:
        last = _field(w, last, &ftype)
        if not ftype or w.err:
            return
        if last == 3 and ftype == _STRUCT:
            _column_meta(w, row)
        else:
            _skip(w, ftype, 0)


cdef void _struct_list(_Walk* w, int64_t want, int what) noexcept nogil:
    """Walk a struct, handing the list in field ``want`` to the walker of ``what`` (1: row groups,
    2: column chunks); skip the rest."""
    cdef int64_t last = 0, n, i
    cdef int ftype, elem
    while not w.err:
        last = _field(w, last, &ftype)
        if not ftype or w.err:
            return
        if last == want and ftype == _LIST:
            n = _list_header(w, &elem)
            i = 0
            while i < n and not w.err:
                if w.pos > w.n:
                    w.err = _ENDS
                    return
                if what == 1:
                    w.groups += 1
                    _struct_list(w, 1, 2)
                else:
                    _chunk(w)
                i += 1
        else:
            _skip(w, ftype, 0)


class EndsEarly(ValueError):
    """The bytes end in the middle of a field."""


cdef void _refuse(_Walk* w):
    """Raise the error a walk stopped on."""
    if w.err == _ENDS or (not w.err and w.pos > w.n):
        raise EndsEarly("the footer ends in the middle of a field")
    if w.err == _VARINT:
        raise ValueError("a varint in the footer is too long")
    if w.err == _DEPTH:
        raise ValueError("the footer nests too deeply")
    if w.err == _TYPE:
        raise ValueError(f"unknown Thrift type {w.bad_type} in the footer")
    if w.err == _UNSUPPORTED:
        raise ValueError(f"unsupported Thrift type {w.bad_type} in the footer")
    if w.err == _WIDE:
        raise ValueError("a number in the footer is wider than 64 bits")
    if w.err == _MEMORY:
        raise MemoryError()


cdef void _start(_Walk* w, const uint8_t[::1] buf, Py_ssize_t pos):
    w.buf = &buf[0] if buf.shape[0] else NULL
    w.n = buf.shape[0]
    w.pos = pos
    w.err = _OK
    w.bad_type = 0
    w.chunks = w.cap = w.groups = 0
    w.out = NULL


def footer_chunks(const uint8_t[::1] footer):
    """The Parquet footer (FileMetaData) walked for what pyarrow would abort on: (number of row
    groups, an (n, 4) int64 array: per column chunk its row group, ColumnMetaData.type and the
    lengths of its SizeStatistics' repetition and definition level histograms, ABSENT where the
    footer has none).  ValueError with the reason when the footer cannot be walked."""
    cdef _Walk w
    _start(&w, footer, 0)
    try:
        with nogil:
            _struct_list(&w, 4, 1)
        _refuse(&w)
        out = np.empty((w.chunks, 4), dtype=np.int64)
        if w.chunks:
            out.ravel()[:] = <int64_t[:w.chunks * 4]>w.out
        return w.groups, out
    finally:
        free(w.out)


# -- a struct read into a field tree (the stitched writer's footers and offset indexes, page
# headers): [[field id, type, value], ...], as io/_thrift.py writes it back

cdef object _signed(_Walk* w):
    """An i16/i32/i64 (a zigzag varint) as an int; None (err set) when it is wider than 64 bits."""
    cdef bint wide
    cdef uint64_t value = _uvarint(w, &wide)
    if w.err:
        return None
    if wide:
        w.err = _WIDE
        return None
    return <int64_t>(value >> 1) ^ -<int64_t>(value & 1)


cdef object _read_fields(_Walk* w, int depth):
    """The struct at pos as a field list; None (err set) when it cannot be read."""
    cdef int64_t last = 0
    cdef int ftype
    if depth > 64:
        w.err = _DEPTH
        return None
    fields = []
    while True:
        last = _field(w, last, &ftype)
        if w.err:
            return None
        if not ftype:
            return fields
        value = _read_value(w, ftype, depth)
        if w.err:
            return None
        fields.append([last, ftype, value])


cdef object _read_value(_Walk* w, int kind, int depth):
    """A value of type ``kind`` at pos: an int for i16/i32/i64 and the byte type, bytes for
    binary and double (its 8 raw bytes), a field list for a struct, (element type, [values]) for
    a list or set (a boolean element is its byte), None for a field's boolean (its type)."""
    cdef int64_t n, i
    cdef int elem = 0
    cdef Py_ssize_t at
    if kind == _I16 or kind == _I32 or kind == _I64:
        return _signed(w)
    if _is_bool(kind):
        return None
    if kind == _BYTE:
        return _byte(w)
    if kind == _DOUBLE or kind == _BINARY:
        n = 8 if kind == _DOUBLE else _varint(w)
        if w.err:
            return None
        if n > w.n - w.pos:
            w.err = _ENDS
            return None
        at = w.pos
        w.pos += n
        return (<const char*>w.buf)[at:w.pos]
    if kind == _STRUCT:
        return _read_fields(w, depth + 1)
    if kind == _LIST or kind == _SET:
        n = _list_header(w, &elem)
        items = []
        i = 0
        # Every element takes a byte at least: a count past the end stops at the end.
        while i < n and not w.err:
            items.append(_byte(w) if _is_bool(elem) else _read_value(w, elem, depth + 1))
            i += 1
        return None if w.err else (elem, items)
    w.err = _UNSUPPORTED
    w.bad_type = kind
    return None


def read_struct(const uint8_t[::1] buf, Py_ssize_t pos=0):
    """The Thrift compact-protocol struct at ``pos`` of ``buf`` as a field list (``[field id,
    type, value]`` each, values as ``_read_value`` gives them; what is left out of the struct is
    left out of the list), and the position after it.  EndsEarly (a ValueError) when ``buf``
    ends inside the struct, ValueError when it cannot be read."""
    cdef _Walk w
    if not 0 <= pos <= buf.shape[0]:
        raise IndexError(f"position {pos} is outside the {buf.shape[0]} bytes")
    _start(&w, buf, pos)
    fields = _read_fields(&w, 0)
    _refuse(&w)
    return fields, w.pos
