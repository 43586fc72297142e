# cython: language_level=3
# Compiler directives (boundscheck, wraparound, ...) are set in setup.py so that a debug
# build can turn the checks back on; do not add them here.
"""Parsing coordinate text (.tns, .mtx, .csv, .tsv): bytes in, index and value arrays out.

One pass over the bytes with the GIL released and no Python object per line.  A line is K
integer indices followed by 0, 1 (real or integer) or 2 (complex: real and imaginary part)
value fields.  Fields are separated by runs of blanks (``delim == 0``) or by one ``delim``
character with optional blanks around it.  Blank lines and lines whose first non-blank
byte is ``comment`` are skipped.

Floats are parsed exactly (correctly rounded, as Python's float() does): a decimal of up
to 19 significant digits takes Clinger's fast path when both its digits and its power of
ten are exact doubles, else the Eisel-Lemire algorithm; the rare cases those cannot decide
(ties, subnormals, more than 19 digits, inf and nan) go to the C library's strtod.  Digits
are read eight at a time where they can be (an index of up to 7 digits from one 8-byte load,
a fraction's digits past its leading zeros), as fast_float reads them.

pyarrow's CSV reader (fast_float too) is not used instead: it cannot split on runs of blanks
or cut ``#`` comments, its errors name no line, and it spends about twice this kernel's CPU
on .tns and .csv text.
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport strtod
from libc.string cimport memchr, memcpy

ctypedef unsigned char uchar

cdef enum:
    _OK = 0
    _ERR_FIELDS = 1       # too few or too many fields on the line
    _ERR_INDEX = 2        # an index field is not an integer
    _ERR_BASE = 3         # an index is below the index base
    _ERR_RANGE = 4        # an index or integer value does not fit in int64
    _ERR_VALUE = 5        # a value field is not a number
    _ERR_FULL = 6         # more data lines than the output arrays hold (caller bug)

cdef enum:
    _V_NONE = 0
    _V_FLOAT = 1
    _V_COMPLEX = 2
    _V_INT = 3

OK = _OK
ERR_FIELDS = _ERR_FIELDS
ERR_INDEX = _ERR_INDEX
ERR_BASE = _ERR_BASE
ERR_RANGE = _ERR_RANGE
ERR_VALUE = _ERR_VALUE
ERR_FULL = _ERR_FULL
V_NONE = _V_NONE
V_FLOAT = _V_FLOAT
V_COMPLEX = _V_COMPLEX
V_INT = _V_INT

cdef double _POW10[23]
cdef int _i
_POW10[0] = 1.0
for _i in range(1, 23):
    _POW10[_i] = _POW10[_i - 1] * 10.0   # 10^22 is the largest power of ten that is exact

cdef uint64_t _MANTISSA_MAX = (<uint64_t>1) << 53
cdef uint64_t _INT64_MAX = 9223372036854775807ULL


from ._guards cimport sptool_clz64 as _clz64, sptool_ctz64 as _ctz64, sptool_mul128 as _mul128

# 128-bit approximations of 5^q for q in [-325, 308], normalised so the top bit is set
# (high and low 64-bit halves), as fast_float's table_generation.py computes them:
# truncated for q >= 0, and floor(2^b / 5^-q) + 1 for q < 0.
cdef uint64_t _POW5_HI[634]
cdef uint64_t _POW5_LO[634]


def _pow5_table():
    out = []
    for q in range(-325, 309):
        if q >= 0:
            c = 5 ** q
            while c < 1 << 127:
                c <<= 1
            while c >= 1 << 128:
                c >>= 1
        else:
            p5 = 5 ** -q
            z = p5.bit_length()
            c = (1 << (z + 127 if q >= -27 else 2 * z + 128)) // p5 + 1
            while c >= 1 << 128:
                c >>= 1
        out.append(c)
    return out


for _i, _c in enumerate(_pow5_table()):
    _POW5_HI[_i] = _c >> 64
    _POW5_LO[_i] = _c & 0xFFFFFFFFFFFFFFFF


cdef inline bint _blank(uchar c, uchar delim) noexcept nogil:
    """Space, carriage return, and tab unless tab is the delimiter (TSV)."""
    return c == 32 or c == 13 or (c == 9 and delim != 9)


cdef inline bint _digit(uchar c) noexcept nogil:
    return 48 <= c <= 57


cdef inline uint64_t _nondigit_bytes(uint64_t v) noexcept nogil:
    """The top bit of each byte of v (8 ASCII bytes, little-endian) that is not a digit.  A carry
    out of a byte >= 0xFA can only mark the byte after a non-digit, so the first mark is right."""
    cdef uint64_t x = ((v & 0xF0F0F0F0F0F0F0F0ULL) | (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) \
        ^ 0x3333333333333333ULL
    return (((x & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | x) & 0x8080808080808080ULL


cdef inline int _parse_int(const uchar* p, const uchar* e, const uchar** endp,
                           int64_t* out) noexcept nogil:
    """A signed decimal integer at p; _ERR_INDEX if there are no digits, _ERR_RANGE on overflow."""
    cdef bint neg = False
    cdef uint64_t v = 0, d, limit, word, marks
    cdef const uchar* start
    cdef int n
    if p < e and (p[0] == 45 or p[0] == 43):
        neg = p[0] == 45
        p += 1
    if e - p >= 8:
        # Up to 7 digits read from one 8-byte load, with no branch per digit.
        memcpy(&word, p, 8)
        marks = _nondigit_bytes(word)
        if marks:
            n = _ctz64(marks) >> 3
            if n == 0:
                endp[0] = p
                return _ERR_INDEX
            v = _eight_digit_value_of((word & 0x0F0F0F0F0F0F0F0FULL) << (64 - 8 * n))
            endp[0] = p + n
            out[0] = -<int64_t>v if neg else <int64_t>v
            return _OK
    start = p
    limit = _INT64_MAX + (1 if neg else 0)
    # 18 digits cannot overflow: only the digits past them are checked.
    while p < e and p - start < 18 and _digit(p[0]):
        v = v * 10 + (p[0] - 48)
        p += 1
    while p < e and _digit(p[0]):
        d = p[0] - 48
        if v > (limit - d) // 10:
            endp[0] = p
            return _ERR_RANGE
        v = v * 10 + d
        p += 1
    endp[0] = p
    if p == start:
        return _ERR_INDEX
    out[0] = -(<int64_t>(v - 1)) - 1 if neg and v else <int64_t>v
    return _OK


cdef inline const uchar* _token_end(const uchar* p, const uchar* e, uchar delim) noexcept nogil:
    while p < e and not _blank(p[0], delim) and p[0] != delim:
        p += 1
    return p


cdef int _strtod_field(const uchar* s, const uchar* e, uchar delim, const uchar** endp,
                       double* out) noexcept nogil:
    """Fallback: the whole token at s through the C library (inf, nan, long mantissas)."""
    cdef char buf[512]
    cdef char* stop
    cdef const uchar* t = _token_end(s, e, delim)
    cdef Py_ssize_t n = t - s
    if n == 0 or n >= 511:
        endp[0] = s
        return _ERR_VALUE
    memcpy(buf, s, n)
    buf[n] = 0
    out[0] = strtod(buf, &stop)
    if stop - buf != n:
        endp[0] = s
        return _ERR_VALUE
    endp[0] = t
    return _OK


cdef inline bint _eight_digits(const uchar* p) noexcept nogil:
    """The 8 bytes at p are all ASCII digits."""
    cdef uint64_t v
    memcpy(&v, p, 8)
    return ((v & 0xF0F0F0F0F0F0F0F0ULL) | (((v + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) \
        == 0x3333333333333333ULL


cdef inline uint64_t _eight_digit_value(const uchar* p) noexcept nogil:
    """The number spelled by the 8 ASCII digits at p (little-endian loads, as x86 and ARM do)."""
    cdef uint64_t v
    memcpy(&v, p, 8)
    return _eight_digit_value_of(v)


cdef inline uint64_t _eight_digit_value_of(uint64_t v) noexcept nogil:
    """The number spelled by 8 digits loaded little-endian (ASCII, or their values 0-9)."""
    v = (v & 0x0F0F0F0F0F0F0F0FULL) * 2561 >> 8
    v = (v & 0x00FF00FF00FF00FFULL) * 6553601 >> 16
    return ((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32


cdef inline int _parse_double(const uchar* p, const uchar* e, uchar delim, const uchar** endp,
                              double* out) noexcept nogil:
    cdef const uchar* s = p
    cdef const uchar* q
    cdef bint neg = False, any_digit = False, truncated = False, eneg
    cdef uint64_t mant = 0
    cdef int ndig = 0, d
    cdef int64_t exp10 = 0, ev
    cdef double v
    if p < e and (p[0] == 45 or p[0] == 43):
        neg = p[0] == 45
        p += 1
    while p < e and _digit(p[0]):
        any_digit = True
        d = p[0] - 48
        if ndig < 19:
            mant = mant * 10 + d
            if mant:
                ndig += 1
        else:
            exp10 += 1
            if d:
                truncated = True
        p += 1
    if p < e and p[0] == 46:
        p += 1
        if mant == 0:
            # Leading zeros of a fraction (0.0012) only scale: skipped, so the digits after them
            # go eight at a time too.
            while p < e and p[0] == 48:
                any_digit = True
                exp10 -= 1
                p += 1
        # Eight fraction digits at a time (fast_float's SWAR): past the leading zeros, each is significant.
        while ndig <= 11 and e - p >= 8 and _eight_digits(p):
            any_digit = True
            mant = mant * 100000000 + _eight_digit_value(p)
            ndig += 8
            exp10 -= 8
            p += 8
        while p < e and _digit(p[0]):
            any_digit = True
            d = p[0] - 48
            if ndig < 19:
                mant = mant * 10 + d
                if mant:
                    ndig += 1
                exp10 -= 1
            elif d:
                truncated = True
            p += 1
    if not any_digit:
        return _strtod_field(s, e, delim, endp, out)
    if p < e and (p[0] == 101 or p[0] == 69):
        q = p + 1
        eneg = False
        if q < e and (q[0] == 45 or q[0] == 43):
            eneg = q[0] == 45
            q += 1
        if q < e and _digit(q[0]):
            ev = 0
            while q < e and _digit(q[0]):
                if ev < 100000:
                    ev = ev * 10 + (q[0] - 48)
                q += 1
            exp10 += -ev if eneg else ev
            p = q
    endp[0] = p
    if truncated:
        return _strtod_field(s, e, delim, endp, out)
    if mant == 0:
        out[0] = -0.0 if neg else 0.0
        return _OK
    if mant <= _MANTISSA_MAX and -22 <= exp10 <= 22:
        # Clinger's fast path: mant and 10^|exp10| are exact doubles, so one IEEE
        # multiplication or division rounds the exact decimal value correctly.
        v = <double>mant
        if exp10 >= 0:
            v = v * _POW10[exp10]
        else:
            v = v / _POW10[-exp10]
        out[0] = -v if neg else v
        return _OK
    if -325 <= exp10 <= 308 and _eisel_lemire(mant, exp10, neg, out):
        return _OK
    return _strtod_field(s, e, delim, endp, out)


cdef inline bint _eisel_lemire(uint64_t w, int64_t q, bint neg, double* out) noexcept nogil:
    """w * 10^q correctly rounded, or False when unsure (the caller falls back to strtod).

    The Eisel-Lemire algorithm (Lemire, "Number parsing at a gigabyte per second", 2021) as in
    simdjson 0.4: multiply by a 128-bit approximation of 5^q and bail out in the rare cases
    where the truncated product cannot decide the rounding, and for subnormal results.
    """
    cdef uint64_t lower, upper, lo2, hi2, middle, mantissa, bits
    cdef int64_t exponent = (((152170 + 65536) * q) >> 16) + 1024 + 63, real_exponent
    cdef int lz = _clz64(w)
    cdef Py_ssize_t t = q + 325
    w <<= lz
    upper = _mul128(w, _POW5_HI[t], &lower)
    if (upper & 0x1FF) == 0x1FF and lower + w < lower:
        hi2 = _mul128(w, _POW5_LO[t], &lo2)
        middle = lower + hi2
        if middle < lower:
            upper += 1
        if middle + 1 == 0 and (upper & 0x1FF) == 0x1FF and lo2 + w < lo2:
            return False
        lower = middle
    mantissa = upper >> ((upper >> 63) + 9)
    lz += <int>(1 ^ (upper >> 63))
    if lower == 0 and (upper & 0x1FF) == 0 and (mantissa & 3) == 1:
        return False   # exactly halfway between two doubles: strtod breaks the tie
    mantissa += mantissa & 1
    mantissa >>= 1
    if mantissa >= (<uint64_t>1) << 53:
        mantissa = (<uint64_t>1) << 52
        lz -= 1
    mantissa &= ~((<uint64_t>1) << 52)
    real_exponent = exponent - lz
    if real_exponent < 1 or real_exponent > 2046:
        return False
    bits = mantissa | (<uint64_t>real_exponent << 52) | ((<uint64_t>neg) << 63)
    memcpy(out, &bits, 8)
    return True


cdef inline int _parse_int_value(const uchar* p, const uchar* e, uchar delim, const uchar** endp,
                                 int64_t* out) noexcept nogil:
    """An integer value; a float spelling of an integer (3.0, 1e3) is accepted below 2^53."""
    cdef int err = _parse_int(p, e, endp, out)
    cdef double v
    if err == _OK and (endp[0] == e or _blank(endp[0][0], delim) or endp[0][0] == delim):
        return _OK
    if err == _ERR_RANGE:
        return _ERR_RANGE
    if _parse_double(p, e, delim, endp, &v) != _OK:
        return _ERR_VALUE
    if v != v or v > 9007199254740992.0 or v < -9007199254740992.0 or v != <double>(<int64_t>v):
        endp[0] = p
        return _ERR_VALUE
    out[0] = <int64_t>v
    return _OK


cdef int _parse_line(const uchar* p, const uchar* e, int nidx, int vkind, int64_t base, uchar delim,
                     int64_t* idx, Py_ssize_t stride, double* fv, int64_t* iv,
                     int* bad_field) noexcept nogil:
    """Parse one data line [p, e) (no newline) into idx[k * stride], fv / iv."""
    cdef int nvals = 2 if vkind == _V_COMPLEX else (0 if vkind == _V_NONE else 1)
    cdef int nfields = nidx + nvals, f, err
    cdef const uchar* t
    cdef int64_t x
    for f in range(nfields):
        bad_field[0] = f
        if f > 0:
            if delim:
                while p < e and _blank(p[0], delim):
                    p += 1
                if p == e:
                    return _ERR_FIELDS
                p += 1   # the delimiter (checked when the previous field ended)
            while p < e and _blank(p[0], delim):
                p += 1
        if p == e and not delim:
            return _ERR_FIELDS
        if f < nidx:
            err = _parse_int(p, e, &t, &x)
            if err == _OK and t < e and not _blank(t[0], delim) and t[0] != delim:
                err = _ERR_INDEX
            if err != _OK:
                return err
            if x < base:
                return _ERR_BASE
            idx[f * stride] = x - base
        elif vkind == _V_INT:
            err = _parse_int_value(p, e, delim, &t, iv)
            if err != _OK:
                return err
        else:
            if _parse_double(p, e, delim, &t, fv + (f - nidx)) != _OK:
                return _ERR_VALUE
            if t < e and not _blank(t[0], delim) and t[0] != delim:
                return _ERR_VALUE
        p = t
        if delim:
            while p < e and _blank(p[0], delim):
                p += 1
            if p < e and p[0] != delim:
                return _ERR_INDEX if f < nidx else _ERR_VALUE
    while p < e and _blank(p[0], delim):
        p += 1
    if p != e:
        bad_field[0] = nfields
        return _ERR_FIELDS
    return _OK


def count_newlines(const uchar[::1] buf):
    """Number of newline bytes in buf (an upper bound on its data lines, minus one)."""
    cdef Py_ssize_t n = buf.shape[0], i, count = 0
    cdef const uchar* p
    if n == 0:
        return 0
    with nogil:
        p = &buf[0]
        for i in range(n):   # a plain loop the compiler vectorises (memchr per line is slower)
            count += p[i] == 10
    return count


def parse_lines(const uchar[::1] buf, bint final, int nidx, int vkind, int64_t base, int delim,
                int comment, int64_t[:, ::1] idx, double[::1] fval, int64_t[::1] ival):
    """Parse the complete lines of ``buf`` into the output arrays.

    ``idx`` is (nidx, cap); ``fval`` holds cap values (2 * cap interleaved real/imaginary for
    complex) and ``ival`` cap integers; only the one ``vkind`` selects is written.  Indices
    are stored minus ``base``.  Unless ``final``, a last line without its newline is left
    for the next call.

    Returns ``(rows, consumed, lines, err, err_line, err_offset, err_field)``: rows parsed,
    bytes consumed (up to and including the last complete line), newlines consumed, and on
    error (err != OK) the 0-based number and byte offset of the bad line and the 0-based
    field that failed (the field count, for a line with too many fields).
    """
    cdef Py_ssize_t n = buf.shape[0], cap = idx.shape[1], rows = 0, lines = 0
    cdef Py_ssize_t consumed = 0, line_start, err_offset = 0, err_line = 0
    cdef const uchar* base_p
    cdef const uchar* p
    cdef const uchar* e
    cdef const uchar* line_end
    cdef const void* hit
    cdef int err = _OK, field = 0
    cdef uchar dl = <uchar>delim, cm = <uchar>comment
    cdef int64_t* ip
    cdef double* fp
    cdef int64_t* vp
    cdef int64_t dummy_i = 0
    cdef double dummy_f[2]
    cdef Py_ssize_t nv = 2 if vkind == _V_COMPLEX else 1
    if idx.shape[0] != nidx:
        raise ValueError("idx must have one row per index field")
    if vkind not in (_V_NONE, _V_FLOAT, _V_COMPLEX, _V_INT):
        raise ValueError(f"unknown value kind {vkind}")
    if not (0 <= delim < 256 and 0 <= comment < 256) or base < 0:
        raise ValueError("delim and comment must be bytes, base not negative")
    if vkind in (_V_FLOAT, _V_COMPLEX) and fval.shape[0] < nv * cap:
        raise ValueError("fval is too short")
    if vkind == _V_INT and ival.shape[0] < cap:
        raise ValueError("ival is too short")
    if n == 0:
        return 0, 0, 0, _OK, 0, 0, 0
    with nogil:
        base_p = &buf[0]
        e = base_p + n
        p = base_p
        while p < e:
            line_start = p - base_p
            hit = memchr(p, 10, e - p)
            if hit == NULL:
                if not final:
                    break
                line_end = e
            else:
                line_end = <const uchar*>hit
            while p < line_end and _blank(p[0], dl):
                p += 1
            if p < line_end and p[0] != cm:
                if rows == cap:
                    err = _ERR_FULL
                    err_offset = line_start
                    err_line = lines
                    break
                ip = &idx[0, rows] if nidx else &dummy_i
                fp = &fval[nv * rows] if vkind == _V_FLOAT or vkind == _V_COMPLEX else dummy_f
                vp = &ival[rows] if vkind == _V_INT else &dummy_i
                err = _parse_line(p, line_end, nidx, vkind, base, dl, ip, cap, fp, vp, &field)
                if err != _OK:
                    err_offset = line_start
                    err_line = lines
                    break
                rows += 1
            if line_end < e:
                lines += 1
                p = line_end + 1
            else:
                lines += 1   # a final line without its newline
                p = e
            consumed = p - base_p
    return rows, consumed, lines, err, err_line, err_offset, field


# ---------------------------------------------------------------------------------------------
# svmlight / libsvm: ``label[,label...] [qid:Q] id:value id:value ... [# comment]`` per line

cdef enum:
    _SV_LABEL = 11        # a label is not a number (or an empty label in a multilabel list)
    _SV_COLON = 12        # a feature has no colon
    _SV_ID = 13           # a feature id is not an integer
    _SV_NEGATIVE = 14     # a feature id is negative
    _SV_VALUE = 15        # a feature value is not a number
    _SV_QID = 16          # a qid is not an integer
    _SV_RANGE = 17        # a feature id or qid does not fit in int64

SV_LABEL = _SV_LABEL
SV_COLON = _SV_COLON
SV_ID = _SV_ID
SV_NEGATIVE = _SV_NEGATIVE
SV_VALUE = _SV_VALUE
SV_QID = _SV_QID
SV_RANGE = _SV_RANGE


cdef inline bint _space(uchar c) noexcept nogil:
    """What Python's bytes.split() splits on (scikit-learn's loader splits lines so)."""
    return c == 32 or 9 <= c <= 13


cdef inline const uchar* _word_end(const uchar* p, const uchar* e) noexcept nogil:
    while p < e and not _space(p[0]):
        p += 1
    return p


cdef inline const uchar* _skip_space(const uchar* p, const uchar* e) noexcept nogil:
    while p < e and _space(p[0]):
        p += 1
    return p


cdef inline bint _number_word(const uchar* p, const uchar* w, uchar sep, double* out) noexcept nogil:
    """The number spelled by exactly [p, w) (no sign of anything after it)."""
    cdef const uchar* t
    if p == w:
        return False
    if _parse_double(p, w, sep, &t, out) != _OK:
        return False
    return t == w


cdef inline int _svm_line(const uchar* p, const uchar* e, bint multilabel, int64_t row,
                          int64_t* rows, int64_t* cols, double* vals, Py_ssize_t* n, Py_ssize_t cap,
                          double* labels, Py_ssize_t* nlab, Py_ssize_t lab_cap,
                          int64_t* qid, bint* has_qid, bint* unsorted,
                          int64_t* min_id, int64_t* max_id, const uchar** word) noexcept nogil:
    """Parse one data line [p, e) (comment removed, not blank); entries appended at n (below cap,
    else _ERR_FULL).  ``word`` is left at the start of the word being parsed (the bad one, on error)."""
    cdef const uchar* w = _word_end(p, e)
    cdef const uchar* colon
    cdef const uchar* t
    cdef const uchar* q
    cdef int64_t idv, prev = -1
    cdef double v
    cdef Py_ssize_t i, first
    cdef int err
    has_qid[0] = False
    unsorted[0] = False
    word[0] = p
    colon = <const uchar*>memchr(p, 58, w - p)
    if multilabel:
        first = nlab[0]
        if colon == NULL:   # a comma-separated label list, sorted as scikit-learn sorts it
            q = p
            while True:
                t = <const uchar*>memchr(q, 44, w - q)
                if t == NULL:
                    t = w
                if nlab[0] >= lab_cap or not _number_word(q, t, 44, &v):
                    return _SV_LABEL
                i = nlab[0]
                while i > first and labels[i - 1] > v:
                    labels[i] = labels[i - 1]
                    i -= 1
                labels[i] = v
                nlab[0] += 1
                if t == w:
                    break
                q = t + 1
            p = _skip_space(w, e)
        # else: no labels, and the first word is already a feature
    else:
        if not _number_word(p, w, 0, &v):
            return _SV_LABEL
        labels[nlab[0]] = v
        nlab[0] += 1
        p = _skip_space(w, e)
    if p < e and e - p >= 4 and p[0] == 113 and p[1] == 105 and p[2] == 100 and p[3] == 58:   # qid:
        word[0] = p
        w = _word_end(p, e)
        err = _parse_int(p + 4, w, &t, qid)
        if err == _ERR_RANGE:
            return _SV_RANGE
        if err != _OK or t != w:
            return _SV_QID
        has_qid[0] = True
        p = _skip_space(w, e)
    while p < e:
        # One pass over "id:value": the id up to its colon, then the value up to a space.
        word[0] = p
        err = _parse_int(p, e, &t, &idv)
        if err != _OK or t == e or t[0] != 58:
            w = _word_end(p, e)
            if memchr(p, 58, w - p) == NULL:
                return _SV_COLON
            return _SV_RANGE if err == _ERR_RANGE else _SV_ID
        if idv < 0:
            return _SV_NEGATIVE
        if n[0] >= cap:
            return _ERR_FULL
        q = t + 1
        if q == e or _space(q[0]) or _parse_double(q, e, 0, &t, &vals[n[0]]) != _OK or \
                (t < e and not _space(t[0])):
            return _SV_VALUE
        w = t
        if idv <= prev:
            unsorted[0] = True
        prev = idv
        if idv < min_id[0]:
            min_id[0] = idv
        if idv > max_id[0]:
            max_id[0] = idv
        rows[n[0]] = row
        cols[n[0]] = idv
        n[0] += 1
        p = _skip_space(w, e)
    return _OK


def count_svmlight(const uchar[::1] buf, bint commas=True):
    """(newlines, colons, commas) in buf: bounds on its lines, entries and multilabel labels
    (commas counted only if asked)."""
    cdef Py_ssize_t n = buf.shape[0], i, j, stop, nl = 0, colons = 0, cm = 0
    cdef const uchar* p
    cdef uchar a, b, c
    if n == 0:
        return 0, 0, 0
    with nogil:
        p = &buf[0]
        i = 0
        while i < n:
            # Byte-wide sums over runs of 255 bytes, which the compiler turns into SIMD.
            stop = min(i + 255, n)
            a = b = c = 0
            if commas:
                for j in range(i, stop):
                    a += p[j] == 10
                    b += p[j] == 58
                    c += p[j] == 44
            else:
                for j in range(i, stop):
                    a += p[j] == 10
                    b += p[j] == 58
            nl += a
            colons += b
            cm += c
            i = stop
    return nl, colons, cm


def parse_svmlight(const uchar[::1] buf, bint multilabel, int64_t[:, ::1] keys, double[::1] vals,
                   double[::1] labels, int64_t[::1] label_ptr, int64_t[::1] qids, uint8_t[::1] has_qid):
    """Parse the svmlight lines of ``buf`` (whole lines; the last may lack its newline).

    Text from ``#`` to the end of a line is a comment; blank lines are skipped.  Each data line
    becomes a row (numbered from 0 in this block): its label(s), an optional ``qid:`` and
    ``id:value`` entries, written to ``keys`` (2, cap: row, then id) and ``vals`` in file order
    with ids as written (no base applied).  Labels go to ``labels``, one per row, or with ``multilabel``
    a sorted, possibly empty list per row whose ends are in ``label_ptr`` (rows + 1 entries).
    ``qids[row]`` and ``has_qid[row]`` say each row's qid.  Capacities: entries <= colons,
    rows <= newlines + 1, labels <= rows + commas; err ERR_FULL when the outputs are too short.

    Returns ``(rows, entries, labels, lines, err, err_line, err_offset, min_id, max_id,
    first_unsorted)``: the counts, on error (err != OK) the 0-based line and the byte offset
    of the word that failed, the smallest and largest id (min_id > max_id when there is none), and the
    0-based line of the first row whose ids are not strictly increasing (-1 when none is).
    """
    cdef Py_ssize_t n = buf.shape[0], nrows = 0, nent = 0, nlab = 0, lines = 0
    cdef Py_ssize_t err_offset = 0, err_line = 0, first_unsorted = -1
    cdef Py_ssize_t row_cap = has_qid.shape[0], lab_cap = labels.shape[0]
    cdef const uchar* base_p
    cdef const uchar* p
    cdef const uchar* e
    cdef const uchar* line_end
    cdef const uchar* data_end
    cdef const uchar* bad = NULL
    cdef const void* hit
    cdef int err = _OK
    cdef bint hq = False, unsorted = False
    cdef int64_t min_id = _INT64_MAX, max_id = -1
    cdef Py_ssize_t cap = keys.shape[1]
    if keys.shape[0] != 2 or vals.shape[0] < cap or qids.shape[0] < row_cap:
        raise ValueError("keys must be (2, cap), vals as long, and qids as long as has_qid")
    if cap == 0 or row_cap == 0 or lab_cap == 0 or label_ptr.shape[0] == 0:
        raise ValueError("the output arrays must hold at least one element")
    if multilabel and label_ptr.shape[0] < row_cap + 1:
        raise ValueError("label_ptr needs one more entry than has_qid")
    if not multilabel and lab_cap < row_cap:
        raise ValueError("labels needs one entry per row")
    if n == 0:
        return 0, 0, 0, 0, _OK, 0, 0, min_id, max_id, -1
    with nogil:
        base_p = &buf[0]
        e = base_p + n
        p = base_p
        if multilabel:
            label_ptr[0] = 0
        while p < e:
            hit = memchr(p, 10, e - p)
            line_end = e if hit == NULL else <const uchar*>hit
            hit = memchr(p, 35, line_end - p)
            data_end = line_end if hit == NULL else <const uchar*>hit
            while data_end > p and _space((data_end - 1)[0]):
                data_end -= 1
            p = _skip_space(p, data_end)
            bad = p
            if p < data_end:
                if nrows == row_cap:
                    err = _ERR_FULL
                else:
                    err = _svm_line(p, data_end, multilabel, nrows, &keys[0, 0], &keys[1, 0], &vals[0], &nent, cap,
                                    &labels[0], &nlab, lab_cap, &qids[nrows], &hq, &unsorted,
                                    &min_id, &max_id, &bad)
                if err != _OK:
                    err_offset = bad - base_p
                    err_line = lines
                    break
                has_qid[nrows] = hq
                if unsorted and first_unsorted < 0:
                    first_unsorted = lines
                nrows += 1
                if multilabel:
                    label_ptr[nrows] = nlab
            lines += 1
            p = line_end + 1 if line_end < e else e
    return nrows, nent, nlab, lines, err, err_line, err_offset, min_id, max_id, first_unsorted
