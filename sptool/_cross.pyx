# Compiler directives are set in setup.py (see its docstring), not here.
"""Compiled feature crosses (TensorFlow's sparse cross): arrays in, arrays out, the GIL released.

A batch of R rows of m inputs is given by ``ptr``, an (m, R + 1) array: input i's features of
row r are ``ptr[i, r]:ptr[i, r + 1]`` of one array holding every input's features.  Row r
crosses into the product of its m feature counts (0 when an input has none); ``offsets`` (R + 1,
the running sum of those counts) places each row's crosses, and a call fills the global
positions [g0, g1) of that output, so a caller can cut a huge row's product into pieces.
Within a row the crosses come in TensorFlow's order: the last input varies fastest
(ProductIterator in tensorflow/core/kernels/sparse_cross_op.cc).

Hashing is TensorFlow's, bit for bit: a string feature is its Fingerprint64 (FarmHash's
farmhashna::Hash64, google/farmhash src/farmhash.cc), an int64 feature is its own value, and
a cross chains FingerprintCat64 (tensorflow/core/platform/fingerprint.h) from hash_key over the
inputs in order, then takes the result modulo num_buckets (modulo 2**63 - 1 with no buckets).

tests/references/cross.py holds the plain-Python equivalent of each function (the test oracle).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc

# The high 64 bits of a 64 x 64-bit product: one instruction where there is a 128-bit type.
from ._guards cimport sptool_mulhi64

ctypedef fused offset_t:
    int32_t
    int64_t

# FarmHash's primes between 2**63 and 2**64.
cdef uint64_t K0 = 0xc3a5c85c97cb3127ULL
cdef uint64_t K1 = 0xb492b66fbe98f273ULL
cdef uint64_t K2 = 0x9ae16a3b2f90404fULL
# Hash128to64's and FingerprintCat64's multipliers.
cdef uint64_t KMUL128 = 0x9ddfea08eb382d69ULL
cdef uint64_t KMULCAT = 0xc6a4a7935bd1e995ULL
cdef uint64_t INT64_MAX = 0x7fffffffffffffffULL


cdef inline uint64_t _fetch64(const uint8_t* p) noexcept nogil:
    # Little-endian whatever the host, as FarmHash defines it (compilers fold this into one load).
    return (<uint64_t> p[0] | (<uint64_t> p[1] << 8) | (<uint64_t> p[2] << 16) | (<uint64_t> p[3] << 24)
            | (<uint64_t> p[4] << 32) | (<uint64_t> p[5] << 40) | (<uint64_t> p[6] << 48)
            | (<uint64_t> p[7] << 56))


cdef inline uint64_t _fetch32(const uint8_t* p) noexcept nogil:
    return <uint64_t> p[0] | (<uint64_t> p[1] << 8) | (<uint64_t> p[2] << 16) | (<uint64_t> p[3] << 24)


cdef inline uint64_t _rotate(uint64_t v, int shift) noexcept nogil:
    return v if shift == 0 else (v >> shift) | (v << (64 - shift))


cdef inline uint64_t _shift_mix(uint64_t v) noexcept nogil:
    return v ^ (v >> 47)


cdef inline uint64_t _hash_len16(uint64_t u, uint64_t v, uint64_t mul) noexcept nogil:
    cdef uint64_t a = (u ^ v) * mul
    a ^= a >> 47
    cdef uint64_t b = (v ^ a) * mul
    b ^= b >> 47
    return b * mul


cdef inline uint64_t _hash_len0to16(const uint8_t* s, uint64_t n) noexcept nogil:
    cdef uint64_t mul, a, b, c, d
    if n >= 8:
        mul = K2 + n * 2
        a = _fetch64(s) + K2
        b = _fetch64(s + n - 8)
        c = _rotate(b, 37) * mul + a
        d = (_rotate(a, 25) + b) * mul
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = K2 + n * 2
        a = _fetch32(s)
        return _hash_len16(n + (a << 3), _fetch32(s + n - 4), mul)
    if n > 0:
        a = s[0] + (<uint64_t> s[n >> 1] << 8)  # y, a 32-bit value
        b = n + (<uint64_t> s[n - 1] << 2)  # z
        return _shift_mix((a * K2) ^ (b * K0)) * K2
    return K2


cdef inline uint64_t _hash_first32(const uint8_t* s, uint64_t n, uint64_t ka, uint64_t* a, uint64_t* y) noexcept nogil:
    # HashLen17to32 with a = Fetch(s) * ka: all of it for 17-32 bytes (ka = K1), and the first
    # half of HashLen33to64 (ka = K2), which goes on from a and y.
    cdef uint64_t mul = K2 + n * 2
    cdef uint64_t b = _fetch64(s + 8)
    cdef uint64_t c = _fetch64(s + n - 8) * mul
    cdef uint64_t d = _fetch64(s + n - 16) * K2
    a[0] = _fetch64(s) * ka
    y[0] = _rotate(a[0] + b, 43) + _rotate(c, 30) + d
    return _hash_len16(y[0], a[0] + _rotate(b + K2, 18) + c, mul)


cdef inline uint64_t _hash_len33to64(const uint8_t* s, uint64_t n) noexcept nogil:
    cdef uint64_t mul = K2 + n * 2
    cdef uint64_t a, y
    cdef uint64_t z = _hash_first32(s, n, K2, &a, &y)
    cdef uint64_t e = _fetch64(s + 16) * mul
    cdef uint64_t f = _fetch64(s + 24)
    cdef uint64_t g = (y + _fetch64(s + n - 32)) * mul
    cdef uint64_t h = (z + _fetch64(s + n - 24)) * mul
    return _hash_len16(_rotate(e + f, 43) + _rotate(g, 30) + h, e + _rotate(f + a, 18) + g, mul)


cdef inline void _weak32(const uint8_t* s, uint64_t a, uint64_t b, uint64_t* first, uint64_t* second) noexcept nogil:
    # WeakHashLen32WithSeeds on s[0:32]: a 16-byte hash of 32 bytes and two seeds.
    cdef uint64_t w = _fetch64(s), x = _fetch64(s + 8), y = _fetch64(s + 16), z = _fetch64(s + 24), c
    a += w
    b = _rotate(b + a + z, 21)
    c = a
    a += x
    a += y
    b += _rotate(a, 44)
    first[0] = a + z
    second[0] = b + c


cdef uint64_t fingerprint64_of(const uint8_t* s, uint64_t n) noexcept nogil:
    """farmhashna::Hash64, which TensorFlow's Fingerprint64 is."""
    if n <= 16:
        return _hash_len0to16(s, n)
    cdef uint64_t a32, y32
    if n <= 32:
        return _hash_first32(s, n, K1, &a32, &y32)
    if n <= 64:
        return _hash_len33to64(s, n)
    cdef uint64_t seed = 81
    cdef uint64_t[7] st  # x, y, z, v.first, v.second, w.first, w.second
    st[1] = seed * K1 + 113
    st[2] = _shift_mix(st[1] * K2 + 113) * K2
    st[0] = seed * K2 + _fetch64(s)
    st[3] = st[4] = st[5] = st[6] = 0
    cdef const uint8_t* end = s + ((n - 1) // 64) * 64
    cdef const uint8_t* last64 = end + ((n - 1) & 63) - 63
    while True:
        _round64(s, st, K1, 1)
        s += 64
        if s == end:
            break
    cdef uint64_t mul = K1 + ((st[2] & 0xff) << 1)
    st[5] += (n - 1) & 63
    st[3] += st[5]
    st[5] += st[3]
    _round64(last64, st, mul, 9)
    return _hash_len16(_hash_len16(st[3], st[5], mul) + _shift_mix(st[1]) * K0 + st[2],
                       _hash_len16(st[4], st[6], mul) + st[0], mul)


cdef inline void _round64(const uint8_t* s, uint64_t* st, uint64_t mul, uint64_t weight) noexcept nogil:
    # One 64-byte round of farmhashna::Hash64: the loop's (mul = k1, weight 1) and the last one's.
    cdef uint64_t x = st[0], y = st[1], z = st[2]
    x = _rotate(x + y + st[3] + _fetch64(s + 8), 37) * mul
    y = _rotate(y + st[4] + _fetch64(s + 48), 42) * mul
    x ^= st[6] * weight
    y += st[3] * weight + _fetch64(s + 40)
    z = _rotate(z + st[5], 33) * mul
    _weak32(s, st[4] * mul, x + st[5], &st[3], &st[4])
    _weak32(s + 32, z + st[6], y + _fetch64(s + 16), &st[5], &st[6])
    st[0] = z  # x and z trade places, as std::swap(z, x) does
    st[1] = y
    st[2] = x


cdef struct Divisor:
    # n // d as a multiply and shifts (Granlund & Montgomery 1994, "Division by invariant
    # integers using multiplication", figure 4.1): a 64-bit divide costs several times as much,
    # and every cross takes one by the same bucket count.
    uint64_t d, magic
    int sh1, sh2


cdef Divisor _divisor(uint64_t d) except *:
    # Python integers for the 128-bit arithmetic, once a call.
    cdef Divisor v
    if d == 0:
        raise ValueError("the divisor must be positive")
    big = int(d)
    ceil_log2 = (big - 1).bit_length()
    v.d = d
    v.magic = ((1 << 64) * ((1 << ceil_log2) - big)) // big + 1  # < 2**64 for any d < 2**64
    v.sh1 = min(ceil_log2, 1)
    v.sh2 = max(ceil_log2 - 1, 0)
    return v


cdef inline uint64_t _mod(uint64_t n, const Divisor* v) noexcept nogil:
    cdef uint64_t t = sptool_mulhi64(v.magic, n)
    return n - ((t + ((n - t) >> v.sh1)) >> v.sh2) * v.d


def modulo(const uint64_t[::1] a, uint64_t d, uint64_t[::1] out):
    """out[i] = a[i] % d (d > 0), as cross_hashed takes its buckets."""
    cdef Py_ssize_t n = a.shape[0], i
    cdef Divisor v = _divisor(d)
    if out.shape[0] != n:
        raise ValueError("a and out must have the same length")
    with nogil:
        for i in range(n):
            out[i] = _mod(a[i], &v)


cdef inline uint64_t fingerprint_cat64(uint64_t fp1, uint64_t fp2) noexcept nogil:
    cdef uint64_t result = fp1 ^ KMULCAT
    result ^= _shift_mix(fp2 * KMULCAT) * KMULCAT
    result *= KMULCAT
    result = _shift_mix(result) * KMULCAT
    return _shift_mix(result)


def fingerprint64(const offset_t[::1] offsets, const uint8_t[::1] data, uint64_t[::1] out):
    """out[i] = Fingerprint64(data[offsets[i]:offsets[i + 1]]): the strings of an Arrow string
    or binary array (its offsets and data buffers)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, i
    cdef const uint8_t* base
    cdef uint8_t empty = 0
    if n < 0 or out.shape[0] != n:
        raise ValueError("out must hold one entry per string (len(offsets) - 1)")
    if n and (offsets[0] < 0 or offsets[n] > data.shape[0]):
        raise ValueError("string offsets run outside the data")
    for i in range(n):
        if offsets[i + 1] < offsets[i]:
            raise ValueError("string offsets must not decrease")
    base = &data[0] if data.shape[0] else &empty
    with nogil:
        for i in range(n):
            out[i] = fingerprint64_of(base + offsets[i], <uint64_t> (offsets[i + 1] - offsets[i]))


def fingerprint_cat(const uint64_t[::1] a, const uint64_t[::1] b, uint64_t[::1] out):
    """out[i] = FingerprintCat64(a[i], b[i])."""
    cdef Py_ssize_t n = a.shape[0], i
    if b.shape[0] != n or out.shape[0] != n:
        raise ValueError("a, b and out must have the same length")
    with nogil:
        for i in range(n):
            out[i] = fingerprint_cat64(a[i], b[i])


def cross_counts(const int64_t[:, ::1] ptr, int64_t[::1] out):
    """out[r] = the number of crosses of row r: the product of its inputs' feature counts.
    Returns -1, or the first row whose product overflows int64 (out is then incomplete).
    ValueError when ptr decreases."""
    cdef Py_ssize_t R = ptr.shape[1] - 1, r
    cdef int64_t total, bad = -1
    if R < 0 or out.shape[0] != R:
        raise ValueError("out must hold one entry per row (ptr.shape[1] - 1)")
    with nogil:
        for r in range(R):
            total = _product(ptr, r)
            if total < 0:
                bad = r
                break
            out[r] = total
    if bad >= 0 and total == -2:
        raise ValueError(f"ptr decreases in row {bad}")
    return bad


cdef inline int64_t _product(const int64_t[:, ::1] ptr, Py_ssize_t r) noexcept nogil:
    """Row r's number of crosses; -1 when it overflows int64, -2 when an input's count is negative."""
    cdef Py_ssize_t i
    cdef int64_t c, total = 1 if ptr.shape[0] else 0
    for i in range(ptr.shape[0]):
        c = ptr[i, r + 1] - ptr[i, r]
        if c < 0:
            return -2
        if c == 0:
            total = 0
        elif total > <int64_t> INT64_MAX // c:
            return -1
        total = total * c
    return total


cdef int _check_walk(const int64_t[:, ::1] ptr, const int64_t[::1] offsets, int64_t g0, int64_t g1,
                     int64_t[::1] rows, int64_t[::1] cols, const int64_t[::1] row_ids, Py_ssize_t n_feats) except -1:
    """The arguments of a walk of crosses g0..g1, and the rows it visits: their offsets must step by
    their numbers of crosses, and (unless n_feats < 0) their features lie within feats."""
    cdef Py_ssize_t R = ptr.shape[1] - 1, r, i, first, last
    cdef int64_t crosses
    if offsets.shape[0] != R + 1:
        raise ValueError("offsets must hold one entry per row and the total")
    if row_ids is not None and row_ids.shape[0] != R:
        raise ValueError("row_ids must hold one entry per row")
    if g0 < 0 or g1 < g0 or (R >= 0 and g1 > offsets[R]):
        raise ValueError("[g0, g1) must lie within the batch's crosses")
    if rows.shape[0] != g1 - g0 or cols.shape[0] != g1 - g0:
        raise ValueError("rows and cols must hold g1 - g0 entries")
    if g1 == g0 or ptr.shape[0] == 0:
        return 0
    if R < 1:
        raise ValueError("crosses of a batch of no rows")
    first, last = _row_of(offsets, g0), _row_of(offsets, g1 - 1)
    if not (offsets[first] <= g0 < offsets[first + 1] and offsets[last] <= g1 - 1 < offsets[last + 1]):
        raise ValueError("offsets must not decrease")
    for r in range(first, last + 1):
        crosses = _product(ptr, r)
        if crosses < 0 or offsets[r + 1] - offsets[r] != crosses:
            raise ValueError(f"offsets[{r + 1}] - offsets[{r}] is not row {r}'s number of crosses")
        if n_feats < 0 or offsets[r + 1] == offsets[r]:
            continue
        for i in range(ptr.shape[0]):
            if ptr[i, r] < 0 or ptr[i, r + 1] > n_feats:
                raise ValueError(f"ptr points outside feats in row {r}")
    return 0


cdef inline Py_ssize_t _row_of(const int64_t[::1] offsets, int64_t g) noexcept nogil:
    # The row r with offsets[r] <= g < offsets[r + 1] (the last such r: rows with no crosses
    # share their offset with the next row).
    cdef Py_ssize_t lo = 0, hi = offsets.shape[0] - 1, mid
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offsets[mid] <= g:
            lo = mid
        else:
            hi = mid
    return lo


cdef inline void _start_row(const int64_t[:, ::1] ptr, Py_ssize_t r, int64_t p, int64_t* digit,
                            int64_t* count) noexcept nogil:
    # The mixed-radix digits of position p in row r's product, the last input fastest.
    cdef Py_ssize_t i
    for i in range(ptr.shape[0] - 1, -1, -1):
        count[i] = ptr[i, r + 1] - ptr[i, r]
        digit[i] = p % count[i]
        p = p // count[i]


cdef inline Py_ssize_t _advance(int64_t* digit, const int64_t* count, Py_ssize_t m) noexcept nogil:
    # Steps the odometer; returns the lowest input whose digit changed, or -1 past the row's end.
    cdef Py_ssize_t i = m - 1
    while i >= 0:
        digit[i] += 1
        if digit[i] < count[i]:
            return i
        digit[i] = 0
        i -= 1
    return -1


cdef void _walk(const int64_t[:, ::1] ptr, const uint64_t* feats, const int64_t[::1] offsets, int64_t g0,
                int64_t g1, uint64_t hash_key, const Divisor* mod, int64_t[::1] rows, int64_t[::1] cols,
                int64_t* values, int64_t* pos, int64_t* work, const int64_t* row_ids) noexcept nogil:
    # Crosses g0..g1 in order: hashed into values, or (values NULL) as feature positions into
    # pos, an (m, g1 - g0) array.  work holds 2m int64 digits and counts and m + 1 prefixes.
    # rows gets row_ids[r] (the caller's row numbers, written in place: no gather afterwards), or r.
    # The last input varies fastest, so crosses come in runs over its features with the other
    # inputs' digits fixed: a run is one tight loop, the odometer stepped once a run.
    cdef Py_ssize_t m = ptr.shape[0], last = m - 1, r, i, lo = 0
    cdef int64_t k = 0, j, p, run, rid, n = g1 - g0
    cdef int64_t* digit = work
    cdef int64_t* count = work + m
    cdef uint64_t* prefix = <uint64_t*> (work + 2 * m)
    cdef uint64_t h
    cdef const uint64_t* f
    cdef int64_t* out_rows = &rows[0]
    cdef int64_t* out_cols = &cols[0]
    prefix[0] = hash_key
    r = _row_of(offsets, g0)
    p = g0 - offsets[r]
    _start_row(ptr, r, p, digit, count)
    while True:
        run = min(count[last] - digit[last], n - k)
        rid = row_ids[r] if row_ids != NULL else r
        if values != NULL:
            # Only the inputs from the lowest changed digit on are hashed again.
            for i in range(lo, last):
                prefix[i + 1] = fingerprint_cat64(prefix[i], feats[ptr[i, r] + digit[i]])
            h = prefix[last]
            f = feats + ptr[last, r] + digit[last]
            for j in range(run):
                values[k + j] = <int64_t> _mod(fingerprint_cat64(h, f[j]), mod)
                out_rows[k + j] = rid
                out_cols[k + j] = p + j
        else:
            for j in range(run):
                for i in range(last):
                    pos[i * n + k + j] = ptr[i, r] + digit[i]
                pos[last * n + k + j] = ptr[last, r] + digit[last] + j
                out_rows[k + j] = rid
                out_cols[k + j] = p + j
        k += run
        if k >= n:
            return
        p += run
        digit[last] = count[last] - 1  # the run's end: the next step carries
        lo = _advance(digit, count, m)
        if lo < 0:
            r += 1
            while offsets[r + 1] == offsets[r]:
                r += 1
            p = 0
            _start_row(ptr, r, 0, digit, count)
            lo = 0


def cross_hashed(const int64_t[:, ::1] ptr, const uint64_t[::1] feats, const int64_t[::1] offsets,
                 int64_t g0, int64_t g1, uint64_t hash_key, int64_t num_buckets,
                 int64_t[::1] rows, int64_t[::1] cols, int64_t[::1] values, const int64_t[::1] row_ids=None):
    """Crosses g0..g1 of the batch hashed as TensorFlow's SparseCross with hashed_output: each
    one's row (within the batch, or row_ids[row] when given), its position within the row, and
    its bucket."""
    cdef Py_ssize_t m = ptr.shape[0]
    cdef int64_t* work
    cdef Divisor mod = _divisor(<uint64_t> num_buckets if num_buckets > 0 else INT64_MAX)
    _check_walk(ptr, offsets, g0, g1, rows, cols, row_ids, feats.shape[0])
    if values.shape[0] != g1 - g0:
        raise ValueError("values must hold g1 - g0 entries")
    if m == 0 or g1 == g0:
        return
    work = <int64_t*> malloc((3 * m + 1) * sizeof(int64_t))
    if work == NULL:
        raise MemoryError()
    with nogil:
        _walk(ptr, &feats[0], offsets, g0, g1, hash_key, &mod, rows, cols, &values[0], NULL, work,
              &row_ids[0] if row_ids is not None else NULL)
    free(work)


def cross_positions(const int64_t[:, ::1] ptr, const int64_t[::1] offsets, int64_t g0, int64_t g1,
                    int64_t[::1] rows, int64_t[::1] cols, int64_t[:, ::1] pos, const int64_t[::1] row_ids=None):
    """Crosses g0..g1 of the batch as positions: their rows (row_ids[row] when given) and
    positions within the row, and pos[i, k], the feature (an index into the array ptr points
    into) input i gives cross k."""
    cdef Py_ssize_t m = ptr.shape[0]
    cdef int64_t* work
    _check_walk(ptr, offsets, g0, g1, rows, cols, row_ids, -1)
    if pos.shape[0] != m or pos.shape[1] != g1 - g0:
        raise ValueError("pos must be (m, g1 - g0)")
    if m == 0 or g1 == g0:
        return
    work = <int64_t*> malloc((3 * m + 1) * sizeof(int64_t))
    if work == NULL:
        raise MemoryError()
    with nogil:
        _walk(ptr, NULL, offsets, g0, g1, 0, NULL, rows, cols, NULL, &pos[0, 0], work,
              &row_ids[0] if row_ids is not None else NULL)
    free(work)
