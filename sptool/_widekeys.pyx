# cython: language_level=3
# Compiler directives (boundscheck, wraparound, ...) are set in setup.py so that a debug
# build can turn the checks back on; do not add them here.
"""Compiled kernels for sort keys of 65 to 128 bits: arrays in, arrays out, the GIL released in
every loop.

A shape whose extents need more than 64 bits in all (FROSTT's amazon-reviews, nell-1,
delicious...) packs a row's coordinates into one 128-bit key, held as two 64-bit words: the
high word first, each word big-endian, 16 bytes a key (an (n, 2) uint64 array, or the same
memory as NumPy ``V16``).  Big-endian words compare byte by byte like the numbers they hold, so
NumPy's searchsorted, equality and argsort on the ``V16`` view keep working where speed does not
matter; these kernels do the hot work: packing, unpacking, a stable radix sort, a k-way merge,
the counting sort's scatter by the keys' top bits, and add's fused merge join.

A field at bit offset s (0..127) of width w lies in the low word when s + w <= 64, in the high
word when s >= 64, and across both otherwise.  tests/references/widekeys.py holds the NumPy
(Python integer) equivalent of each function, used as the test oracle.
"""

from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

from ._guards cimport bits_above, check_fits, checked_runs, outside
from ._radix cimport Digits, field_of, low_bits, plan_digits, prefix_sums
from ._types cimport value_t

import numpy as np

cdef extern from *:
    """
    #include <stdint.h>
    /* Byte swaps, and 128-bit arithmetic on (hi, lo) pairs: ``unsigned __int128`` and the builtins
       are GCC/Clang extensions, so other compilers (and -DSPTOOL_PORTABLE_BITS, as in
       sptool/_guards.pxd) get plain C. */
    #if defined(__SIZEOF_INT128__) && !defined(SPTOOL_PORTABLE_BITS)
    #define SPTOOL_WIDE_INT128 1
    #endif
    #if (defined(__GNUC__) || defined(__clang__)) && !defined(SPTOOL_PORTABLE_BITS)
    #define sptool_bswap64(x) __builtin_bswap64(x)
    #else
    static inline uint64_t sptool_bswap64(uint64_t x) {
        x = (x << 32) | (x >> 32);
        x = ((x & 0x0000ffff0000ffffull) << 16) | ((x >> 16) & 0x0000ffff0000ffffull);
        return ((x & 0x00ff00ff00ff00ffull) << 8) | ((x >> 8) & 0x00ff00ff00ff00ffull);
    }
    #endif

    /* (hi, lo) = (hi, lo) * m + a, the caller knowing the result fits in 128 bits. */
    static inline void sptool_wide_mad(uint64_t *hi, uint64_t *lo, uint64_t m, uint64_t a) {
    #ifdef SPTOOL_WIDE_INT128
        unsigned __int128 v = ((((unsigned __int128) *hi) << 64) | *lo) * m + a;
        *hi = (uint64_t) (v >> 64);
        *lo = (uint64_t) v;
    #else
        uint64_t a0 = *lo & 0xffffffffu, a1 = *lo >> 32, b0 = m & 0xffffffffu, b1 = m >> 32;
        uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
        uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
        uint64_t l = (mid << 32) | (p00 & 0xffffffffu);
        uint64_t h = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32) + *hi * m;
        l += a;
        h += l < a;
        *hi = h;
        *lo = l;
    #endif
    }

    /* (hi, lo) = (hi, lo) / d, the remainder returned (d > 0). */
    static inline uint64_t sptool_wide_divmod(uint64_t *hi, uint64_t *lo, uint64_t d) {
    #ifdef SPTOOL_WIDE_INT128
        unsigned __int128 v = (((unsigned __int128) *hi) << 64) | *lo;
        unsigned __int128 q = v / d;
        *hi = (uint64_t) (q >> 64);
        *lo = (uint64_t) q;
        return (uint64_t) (v - q * d);
    #else
        uint64_t r = *hi % d, q = 0, top;
        int i;
        *hi = *hi / d;
        for (i = 63; i >= 0; i--) {  /* long division of (r, lo) by d, one bit at a time; r < d */
            top = r >> 63;
            r = (r << 1) | ((*lo >> i) & 1u);
            if (top || r >= d) {
                r -= d;
                q |= (uint64_t) 1 << i;
            }
        }
        *lo = q;
        return r;
    #endif
    }
    """
    uint64_t _bswap64 "sptool_bswap64"(uint64_t) noexcept nogil
    void _wide_mad "sptool_wide_mad"(uint64_t* hi, uint64_t* lo, uint64_t m, uint64_t a) noexcept nogil
    uint64_t _wide_divmod "sptool_wide_divmod"(uint64_t* hi, uint64_t* lo, uint64_t d) noexcept nogil

ctypedef fused word:  # a value's bytes, whatever its type: 1, 2, 4 or 8 of them
    uint8_t
    uint16_t
    uint32_t
    uint64_t

cdef inline void _put(uint64_t* hi, uint64_t* lo, uint64_t v, int s) noexcept nogil:
    """OR the field v at bit offset s into the (hi, lo) key (v fits its width)."""
    if s >= 64:
        hi[0] |= v << (s - 64)
    else:
        lo[0] |= v << s
        if s:
            hi[0] |= v >> (64 - s)


cdef inline bint _less(uint64_t ah, uint64_t al, uint64_t bh, uint64_t bl) noexcept nogil:
    return (ah < bh) | ((ah == bh) & (al < bl))


cdef _check_fields(const int64_t[::1] shifts, const int64_t[::1] widths):
    cdef Py_ssize_t j
    for j in range(shifts.shape[0]):
        if not (0 <= widths[j] <= 64 and 0 <= shifts[j] < 128 and shifts[j] + widths[j] <= 128):
            raise ValueError("a field lies outside the 128 bits of a key")


def pack_keys(const int64_t[:, :] keys, const int64_t[::1] order, const int64_t[::1] shifts,
              const int64_t[::1] widths, uint64_t[:, ::1] out):
    """out[i] = sum_j keys[order[j], i] << shifts[j] as a (high, low) pair of big-endian words:
    a sort key whose byte order is the lexicographic order of the rows under ``order``;
    ValueError if a key is negative or needs more than its field's width."""
    cdef Py_ssize_t n = keys.shape[1], m = order.shape[0], i, j
    cdef uint64_t hi, lo, v, spilled = 0
    if out.shape[0] != n or out.shape[1] != 2 or shifts.shape[0] != m or widths.shape[0] != m:
        raise ValueError("shape mismatch in pack_keys")
    _check_fields(shifts, widths)
    for j in range(m):
        if not 0 <= order[j] < keys.shape[0]:
            raise ValueError("order names a dimension the keys do not have")
    with nogil:
        for i in range(n):
            hi = 0
            lo = 0
            for j in range(m):
                if widths[j]:
                    v = <uint64_t> keys[order[j], i]
                    spilled |= bits_above(v, widths[j])
                    _put(&hi, &lo, v, <int> shifts[j])
                else:
                    spilled |= <uint64_t> keys[order[j], i]
            out[i, 0] = _bswap64(hi)
            out[i, 1] = _bswap64(lo)
    if spilled:
        for j in range(m):
            check_fits("pack_keys", np.ascontiguousarray(keys[order[j]]), widths[j])


def or_shifted(const int64_t[::1] col, int shift, int64_t width, uint64_t[:, ::1] out, bint first):
    """out (|)= col << shift, as pack_keys writes keys: one column at a time, straight from a
    column's buffer (a byte swap distributes over OR, so the words are ORed as they are stored);
    ValueError if a value is negative or needs more than ``width`` bits."""
    cdef Py_ssize_t n = col.shape[0], i
    cdef uint64_t hi, lo, spilled = 0
    if out.shape[0] != n or out.shape[1] != 2:
        raise ValueError("shape mismatch in or_shifted")
    if not (0 <= shift < 128 and 0 <= width <= 64 and shift + width <= 128):
        raise ValueError("or_shifted: the field lies outside the 128 bits of a key")
    with nogil:
        for i in range(n):
            spilled |= bits_above(<uint64_t> col[i], width)
            hi = 0
            lo = 0
            _put(&hi, &lo, <uint64_t> col[i], shift)
            if first:
                out[i, 0] = _bswap64(hi)
                out[i, 1] = _bswap64(lo)
            else:
                out[i, 0] |= _bswap64(hi)
                out[i, 1] |= _bswap64(lo)
    if spilled:
        check_fits("or_shifted", col, width)


def unpack_keys(const uint64_t[:, ::1] packed, const int64_t[::1] order, const int64_t[::1] shifts,
                const int64_t[::1] widths, int64_t[:, ::1] out):
    """The inverse of pack_keys: out[order[j], i] = (packed[i] >> shifts[j]) & (2^widths[j] - 1)."""
    cdef Py_ssize_t n = packed.shape[0], m = order.shape[0], i, j
    cdef int64_t d
    cdef int s
    cdef uint64_t mask
    if packed.shape[1] != 2 or out.shape[1] != n or shifts.shape[0] != m or widths.shape[0] != m:
        raise ValueError("shape mismatch in unpack_keys")
    _check_fields(shifts, widths)
    for j in range(m):
        if not 0 <= order[j] < out.shape[0]:
            raise ValueError("order names a dimension the output does not have")
    for j in range(m):
        d = order[j]
        s = <int> shifts[j]
        mask = low_bits(widths[j]) if widths[j] else 0
        with nogil:
            for i in range(n):
                out[d, i] = <int64_t> field_of(_bswap64(packed[i, 0]), _bswap64(packed[i, 1]), s, mask)


def radix_argsort(const uint64_t[:, ::1] keys, int64_t[::1] perm, uint64_t[:, ::1] sorted_keys):
    """Stable LSD radix sort of (n, 2) keys: perm receives the permutation, sorted_keys the keys
    in order.

    Digits of up to 11 bits over the bits below the highest that varies, every digit's histogram
    counted in one first pass; a digit where every key agrees is skipped.  When the key's varying
    bits and the row's position fit in 128 bits together, the position rides in the high word's
    top bits (above every digit, so it never changes the order) and a pass moves 16 bytes a row,
    as many as the one-word sort; otherwise 24 (the two words and the position)."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef uint64_t or_hi = 0, or_lo = 0, and_hi = <uint64_t> -1, and_lo = <uint64_t> -1
    cdef int pos_bits, tag_shift
    cdef Digits plan
    if keys.shape[1] != 2 or perm.shape[0] != n or sorted_keys.shape[0] != n or sorted_keys.shape[1] != 2:
        raise ValueError("shape mismatch in radix_argsort")
    if n == 0:
        return
    pos_bits = max(int(n - 1).bit_length(), 1)
    with nogil:
        for i in range(n):
            or_hi |= keys[i, 0]
            or_lo |= keys[i, 1]
            and_hi &= keys[i, 0]
            and_lo &= keys[i, 1]
        plan = plan_digits(_bswap64(or_hi ^ and_hi), _bswap64(or_lo ^ and_lo))
    # The positions take the key's top bits, above every varying one; -1 where they do not fit.
    tag_shift = 64 - pos_bits if plan.top + pos_bits <= 128 else -1
    work = np.empty((4 if tag_shift >= 0 else 5, n), dtype=np.uint64)  # the passes alternate
    counts = np.zeros((max(plan.count, 1), 1 << plan.width), dtype=np.int64)
    _radix_passes(keys, perm, sorted_keys, work, counts, &plan, tag_shift, _bswap64(and_hi))


cdef void _count_digits(uint64_t hw, uint64_t lw, Digits* plan, int64_t* counts) noexcept nogil:
    cdef int d
    for d in range(plan.count):
        if plan.mask[d]:
            counts[(d << plan.width) + <Py_ssize_t> field_of(hw, lw, plan.shift[d], plan.mask[d])] += 1


cdef _radix_passes(const uint64_t[:, ::1] keys, int64_t[::1] perm, uint64_t[:, ::1] sorted_keys,
                   uint64_t[:, ::1] w, int64_t[:, ::1] counts_arr, Digits* plan, int tag_shift,
                   uint64_t same_hi):
    """radix_argsort's passes; tag_shift >= 0: positions ride in the high word from that bit."""
    cdef Py_ssize_t n = keys.shape[0], i, d
    cdef bint tagged = tag_shift >= 0
    cdef uint64_t hw, lw, dig, mask
    cdef uint64_t key_hi = low_bits(tag_shift) if tagged else <uint64_t> -1
    cdef int64_t c
    cdef int s
    cdef int64_t* counts = &counts_arr[0, 0]
    cdef int64_t* cnt
    cdef uint64_t* a_hi = &w[0, 0]
    cdef uint64_t* a_lo = &w[1, 0]
    cdef uint64_t* b_hi = &w[2, 0]
    cdef uint64_t* b_lo = &w[3, 0]
    cdef int64_t* a_p = &perm[0]
    cdef int64_t* b_p = NULL if tagged else <int64_t*> &w[4, 0]
    cdef uint64_t* t64
    cdef int64_t* tp
    with nogil:
        for i in range(n):
            hw = _bswap64(keys[i, 0])
            lw = _bswap64(keys[i, 1])
            _count_digits(hw, lw, plan, counts)
            if tagged:
                a_hi[i] = (hw & key_hi) | (<uint64_t> i << tag_shift)
            else:
                a_hi[i] = hw
                a_p[i] = i
            a_lo[i] = lw
        for d in range(plan.count):
            mask = plan.mask[d]
            if mask == 0:
                continue
            cnt = counts + (d << plan.width)
            prefix_sums(cnt, (<Py_ssize_t> 1) << plan.width)
            s = plan.shift[d]
            if tagged:
                for i in range(n):
                    hw = a_hi[i]
                    lw = a_lo[i]
                    dig = field_of(hw, lw, s, mask)
                    c = cnt[dig]
                    b_hi[c] = hw
                    b_lo[c] = lw
                    cnt[dig] = c + 1
            else:
                for i in range(n):
                    dig = field_of(a_hi[i], a_lo[i], s, mask)
                    c = cnt[dig]
                    b_hi[c] = a_hi[i]
                    b_lo[c] = a_lo[i]
                    b_p[c] = a_p[i]
                    cnt[dig] = c + 1
                tp = a_p
                a_p = b_p
                b_p = tp
            t64 = a_hi
            a_hi = b_hi
            b_hi = t64
            t64 = a_lo
            a_lo = b_lo
            b_lo = t64
        if tagged:
            # The bits the positions took were the same in every key: same_hi's.
            for i in range(n):
                hw = a_hi[i]
                perm[i] = <int64_t> (hw >> tag_shift)
                sorted_keys[i, 0] = _bswap64((hw & key_hi) | (same_hi & ~key_hi))
                sorted_keys[i, 1] = _bswap64(a_lo[i])
        else:
            for i in range(n):
                sorted_keys[i, 0] = _bswap64(a_hi[i])
                sorted_keys[i, 1] = _bswap64(a_lo[i])
            if a_p != &perm[0]:
                for i in range(n):
                    perm[i] = a_p[i]


def bucket_counts(const uint64_t[:, ::1] keys, int shift, int64_t[::1] counts):
    """counts[keys[i] >> shift] += 1: the histogram of a counting sort by the keys' top bits
    (``shift`` in 0..127; the bucket number must fit in 63 bits)."""
    cdef Py_ssize_t n = keys.shape[0], nb = counts.shape[0], i
    cdef uint64_t b, top = 0
    if keys.shape[1] != 2:
        raise ValueError("shape mismatch in bucket_counts")
    if not 0 <= shift < 128:
        raise ValueError("shift must be in 0..127")
    with nogil:
        for i in range(n):
            b = field_of(_bswap64(keys[i, 0]), _bswap64(keys[i, 1]), shift, <uint64_t> -1)
            top = b if b > top else top
            if b < <uint64_t> nb:
                counts[b] += 1
    if n and top >= <uint64_t> nb:
        raise ValueError("a key falls outside the buckets in bucket_counts")


def scatter_rows(const uint64_t[:, ::1] keys, const word[::1] values, int shift, int64_t[::1] nxt,
                 uint64_t[:, ::1] out, word[::1] out_values):
    """The scatter of a counting sort: row i goes to at = nxt[b] for its bucket b = keys[i] >>
    shift (and nxt[b] moves on), its key to out[at] and its value to out_values[at].  Rows of
    one bucket keep their input order, so a stable sort of a stretch of whole buckets keeps ties
    in input order."""
    cdef Py_ssize_t n = keys.shape[0], nb = nxt.shape[0], m = out.shape[0], i
    cdef uint64_t b
    cdef int64_t at
    cdef bint bad = False
    if keys.shape[1] != 2 or out.shape[1] != 2 or values.shape[0] != n or out_values.shape[0] != m:
        raise ValueError("shape mismatch in scatter_rows")
    if not 0 <= shift < 128:
        raise ValueError("shift must be in 0..127")
    with nogil:
        for i in range(n):
            b = field_of(_bswap64(keys[i, 0]), _bswap64(keys[i, 1]), shift, <uint64_t> -1)
            if b >= <uint64_t> nb:
                bad = True
                break
            at = nxt[b]
            if at < 0 or at >= m:
                bad = True
                break
            out[at, 0] = keys[i, 0]
            out[at, 1] = keys[i, 1]
            out_values[at] = values[i]
            nxt[b] = at + 1
    if bad:
        raise ValueError("a key falls outside the buckets or their room in scatter_rows")


cdef inline bint _before(uint64_t ah, uint64_t al, int64_t ta, uint64_t bh, uint64_t bl, int64_t tb) noexcept nogil:
    # (key, tag) order: ties go to the lower run, and an exhausted run (tag run + k) loses to
    # every live one, whatever its key.
    return _less(ah, al, bh, bl) | ((ah == bh) & (al == bl) & (ta < tb))


def merge_runs(const uint64_t[:, ::1] keys, const int64_t[::1] lo, const int64_t[::1] hi,
               uint64_t[:, ::1] out_keys, int64_t[::1] out_perm, Py_ssize_t out_start):
    """Stable k-way merge of the sorted stretches keys[lo[r]:hi[r]] (r = 0..k-1, in input order),
    as sptool._kernels.merge_runs does for packed keys: a tournament (loser) tree, the merged
    keys to out_keys[out_start:] and each one's position in ``keys`` to out_perm."""
    cdef Py_ssize_t k = lo.shape[0], r, total = 0, o = out_start, node, leaves = 1, x
    cdef int64_t* pos
    cdef int64_t* tag
    cdef uint64_t* khi
    cdef uint64_t* klo
    cdef uint64_t wh, wl, ch, cl
    cdef int64_t wt, t
    cdef bint c, live
    if keys.shape[1] != 2 or out_keys.shape[1] != 2:
        raise ValueError("shape mismatch in merge_runs")
    total = checked_runs(lo, hi, keys.shape[0], out_start, out_keys.shape[0], out_perm.shape[0])
    if total == 0:
        return
    while leaves < k:
        leaves *= 2
    # pos: each run's next row; node entries 1..leaves-1 hold the loser of each match, entries
    # leaves + r run r's head while the tree is built.
    pos = <int64_t*> malloc(leaves * sizeof(int64_t))
    tag = <int64_t*> malloc(2 * leaves * sizeof(int64_t))
    khi = <uint64_t*> malloc(2 * leaves * sizeof(uint64_t))
    klo = <uint64_t*> malloc(2 * leaves * sizeof(uint64_t))
    wtag_arr = np.empty(2 * leaves, dtype=np.int64)
    whi_arr = np.empty(2 * leaves, dtype=np.uint64)
    wlo_arr = np.empty(2 * leaves, dtype=np.uint64)
    cdef int64_t[::1] wtag = wtag_arr
    cdef uint64_t[::1] whi = whi_arr, wlo = wlo_arr
    if pos == NULL or tag == NULL or khi == NULL or klo == NULL:
        free(pos)
        free(tag)
        free(khi)
        free(klo)
        raise MemoryError()
    with nogil:
        for r in range(leaves):
            pos[r] = lo[r] if r < k else 0
            x = leaves + r
            if r < k and lo[r] < hi[r]:
                whi[x], wlo[x], wtag[x] = _bswap64(keys[lo[r], 0]), _bswap64(keys[lo[r], 1]), r
            else:
                whi[x], wlo[x], wtag[x] = <uint64_t> -1, <uint64_t> -1, r + leaves
        for node in range(leaves - 1, 0, -1):
            if _before(whi[2 * node], wlo[2 * node], wtag[2 * node],
                       whi[2 * node + 1], wlo[2 * node + 1], wtag[2 * node + 1]):
                whi[node], wlo[node], wtag[node] = whi[2 * node], wlo[2 * node], wtag[2 * node]
                khi[node], klo[node], tag[node] = whi[2 * node + 1], wlo[2 * node + 1], wtag[2 * node + 1]
            else:
                whi[node], wlo[node], wtag[node] = whi[2 * node + 1], wlo[2 * node + 1], wtag[2 * node + 1]
                khi[node], klo[node], tag[node] = whi[2 * node], wlo[2 * node], wtag[2 * node]
        wh, wl, wt = whi[1], wlo[1], wtag[1]
        while wt < leaves:
            out_keys[o, 0] = _bswap64(wh)
            out_keys[o, 1] = _bswap64(wl)
            out_perm[o] = pos[wt]
            o += 1
            r = wt
            pos[r] += 1
            live = pos[r] < hi[r]
            if live:
                wh = _bswap64(keys[pos[r], 0])
                wl = _bswap64(keys[pos[r], 1])
            else:
                wh, wl, wt = <uint64_t> -1, <uint64_t> -1, r + leaves
            node = (r + leaves) // 2
            while node >= 1:
                c = _before(khi[node], klo[node], tag[node], wh, wl, wt)
                ch, cl, t = khi[node], klo[node], tag[node]
                if c:
                    khi[node], klo[node], tag[node] = wh, wl, wt
                    wh, wl, wt = ch, cl, t
                node //= 2
    free(pos)
    free(tag)
    free(khi)
    free(klo)


def merge_add(const uint64_t[:, ::1] a, const uint64_t[:, ::1] b, const value_t[::1] va, const value_t[::1] vb,
              value_t fa, value_t fb, bint fa_zero, bint fb_zero, const int64_t[::1] shifts,
              const int64_t[::1] widths, int64_t[:, ::1] keys, value_t[::1] out, int64_t[::1] maxes,
              int64_t[::1] pos):
    """sptool._linalg.merge_add on (n, 2) keys: the union of two strictly increasing key arrays
    with add's sums, the keys unpacked (dimension d of output row t from the field at shifts[d]
    of width widths[d], dimensions in row-major order), from a[pos[0]:] and b[pos[1]:] until
    ``out`` is full or both are used up.  A key in both gets va + vb; a key in one its value
    plus the other's fill, or its value as it is when that fill is zero.  ``maxes`` gets each
    dimension's largest output index (-1 for none); ``pos`` moves past the rows consumed.
    Returns the number of output rows."""
    cdef Py_ssize_t na = a.shape[0], nb = b.shape[0], K = keys.shape[0], cap = out.shape[0], t = 0, d
    cdef Py_ssize_t i, j
    cdef uint64_t ah = 0, al = 0, bh = 0, bl = 0, hw, lw
    cdef int64_t x
    cdef int sh[128]
    cdef uint64_t masks[128]
    cdef int64_t mx[128]
    if a.shape[1] != 2 or b.shape[1] != 2 or va.shape[0] != na or vb.shape[0] != nb:
        raise ValueError("merge_add: one value per key, keys of two words")
    if keys.shape[1] < cap:
        raise ValueError("merge_add: fewer key rows than output values")
    if shifts.shape[0] != K or widths.shape[0] != K or maxes.shape[0] != K or K > 128:
        raise ValueError("merge_add: one shift, width and maximum per dimension")
    if pos.shape[0] != 2 or not (0 <= pos[0] <= na and 0 <= pos[1] <= nb):
        raise ValueError("merge_add: pos must hold a start in a and one in b")
    _check_fields(shifts, widths)
    i, j = pos[0], pos[1]
    for d in range(K):
        sh[d] = <int> shifts[d]
        masks[d] = low_bits(widths[d]) if widths[d] else 0
        mx[d] = -1
    with nogil:
        if i < na:
            ah, al = _bswap64(a[i, 0]), _bswap64(a[i, 1])
        if j < nb:
            bh, bl = _bswap64(b[j, 0]), _bswap64(b[j, 1])
        while t < cap and (i < na or j < nb):
            if j >= nb or (i < na and _less(ah, al, bh, bl)):
                hw, lw = ah, al
                out[t] = va[i] if fb_zero else va[i] + fb
                i += 1
                if i < na:
                    ah, al = _bswap64(a[i, 0]), _bswap64(a[i, 1])
            elif i >= na or _less(bh, bl, ah, al):
                hw, lw = bh, bl
                out[t] = vb[j] if fa_zero else fa + vb[j]
                j += 1
                if j < nb:
                    bh, bl = _bswap64(b[j, 0]), _bswap64(b[j, 1])
            else:
                hw, lw = ah, al
                out[t] = va[i] + vb[j]
                i += 1
                j += 1
                if i < na:
                    ah, al = _bswap64(a[i, 0]), _bswap64(a[i, 1])
                if j < nb:
                    bh, bl = _bswap64(b[j, 0]), _bswap64(b[j, 1])
            for d in range(K):
                x = <int64_t> field_of(hw, lw, sh[d], masks[d])
                keys[d, t] = x
                if x > mx[d]:
                    mx[d] = x
            t += 1
    for d in range(K):
        maxes[d] = mx[d]
    pos[0], pos[1] = i, j
    return t


def relinearize(const int64_t[:, :] keys, const int64_t[::1] old_shape, const int64_t[::1] new_shape,
                int64_t[:, ::1] out):
    """out[:, i]: the coordinates in ``new_shape`` of the row-major linear index that keys[:, i]
    has in ``old_shape`` (reshape), that index held in 128 bits: the caller checks the shapes'
    products are equal and below 2^128.  IndexError names an index outside ``old_shape``."""
    cdef Py_ssize_t K = keys.shape[0], K2 = out.shape[0], n = keys.shape[1], i, k
    cdef uint64_t hi, lo
    cdef bint bad = False
    if old_shape.shape[0] != K or new_shape.shape[0] != K2 or out.shape[1] != n or K2 == 0:
        raise ValueError("shape mismatch in relinearize")
    for k in range(1, K2):
        if n and new_shape[k] <= 0:
            raise ValueError("relinearize needs positive extents in the new shape")
    with nogil:
        for i in range(n):
            hi = 0
            lo = 0
            for k in range(K):
                bad |= <uint64_t> keys[k, i] >= <uint64_t> old_shape[k]
                _wide_mad(&hi, &lo, <uint64_t> old_shape[k], <uint64_t> keys[k, i])
            if bad:
                break
            for k in range(K2 - 1, 0, -1):
                out[k, i] = <int64_t> _wide_divmod(&hi, &lo, <uint64_t> new_shape[k])
            out[0, i] = <int64_t> lo
    if bad:
        for k in range(K):
            if <uint64_t> keys[k, i] >= <uint64_t> old_shape[k]:
                raise outside("relinearize", f"index of dimension {k}", i, keys[k, i], old_shape[k])
