# What every kernel module shares to stay within its arrays (cimport from here):
# - 64-bit multiply and bit scans, with compile-time fallbacks: ``unsigned __int128`` and the
#   ``__builtin_*`` calls are GCC/Clang extensions, so other compilers (or a build with
#   -DSPTOOL_PORTABLE_BITS, which the debug CI build uses so that the tests cover the fallbacks)
#   get plain C;
# - the checks of arguments the kernels index or shift by, raising one-line errors:
#   ValueError for an argument out of its range, IndexError for an offset outside its array.

from libc.stdint cimport int64_t, uint64_t

cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__SIZEOF_INT128__) && !defined(SPTOOL_PORTABLE_BITS)
    #define SPTOOL_HAVE_INT128 1
    #endif
    #if (defined(__GNUC__) || defined(__clang__)) && !defined(SPTOOL_PORTABLE_BITS)
    #define SPTOOL_HAVE_BUILTIN_CLZ 1
    #endif

    /* a * b as 128 bits: the high half returned, the low half in *lo. */
    static inline uint64_t sptool_mul128(uint64_t a, uint64_t b, uint64_t *lo) {
    #ifdef SPTOOL_HAVE_INT128
        unsigned __int128 r = (unsigned __int128)a * b;
        *lo = (uint64_t)r;
        return (uint64_t)(r >> 64);
    #else
        uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
        uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
        uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
        *lo = (mid << 32) | (p00 & 0xffffffffu);
        return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    #endif
    }

    static inline uint64_t sptool_mulhi64(uint64_t a, uint64_t b) {
        uint64_t lo;
        return sptool_mul128(a, b, &lo);
    }

    /* Leading and trailing zero bits of x != 0 (zero is undefined for the builtins). */
    static inline int sptool_clz64(uint64_t x) {
    #ifdef SPTOOL_HAVE_BUILTIN_CLZ
        return __builtin_clzll(x);
    #else
        int n = 0;
        while (!(x & 0x8000000000000000ull)) { x <<= 1; n++; }
        return n;
    #endif
    }

    static inline int sptool_ctz64(uint64_t x) {
    #ifdef SPTOOL_HAVE_BUILTIN_CLZ
        return __builtin_ctzll(x);
    #else
        int n = 0;
        while (!(x & 1u)) { x >>= 1; n++; }
        return n;
    #endif
    }
    """
    uint64_t sptool_mul128(uint64_t a, uint64_t b, uint64_t* lo) noexcept nogil
    uint64_t sptool_mulhi64(uint64_t a, uint64_t b) noexcept nogil
    int sptool_clz64(uint64_t x) noexcept nogil
    int sptool_ctz64(uint64_t x) noexcept nogil


cdef inline int check_shift(str kernel, str what, int64_t shift, int64_t limit=63) except -1:
    """A shift amount must be in 0..limit: a C shift by 64 or more, or by a negative amount, is
    undefined."""
    if shift < 0 or shift > limit:
        raise ValueError(f"{kernel}: {what} {shift} is outside 0..{limit}")
    return 0


cdef inline object outside(str kernel, str what, Py_ssize_t at, int64_t value, int64_t size):
    """The IndexError for a data offset outside its array, at position ``at`` of its input."""
    return IndexError(f"{kernel}: {what} {value} at position {at} is outside [0, {size})")


cdef inline uint64_t bits_above(uint64_t v, int64_t width) noexcept nogil:
    """The bits of ``v`` above its ``width`` (0 when v fits): ORed over a column, one test after
    the loop tells whether any key spilled into its neighbour's field."""
    return v >> width if width < 64 else 0


cdef inline int check_fits(str kernel, const int64_t[::1] col, int64_t width) except -1:
    """ValueError naming the first value of ``col`` that is negative or needs more than ``width``
    bits: called once a loop's ORed bits_above says there is one."""
    cdef Py_ssize_t i
    for i in range(col.shape[0]):
        if bits_above(<uint64_t> col[i], width):
            raise ValueError(f"{kernel}: key {col[i]} at position {i} does not fit its field of {width} bits")
    return 0


cdef inline Py_ssize_t checked_runs(const int64_t[::1] lo, const int64_t[::1] hi, Py_ssize_t n_keys,
                                    Py_ssize_t out_start, Py_ssize_t out_len, Py_ssize_t perm_len) except -1:
    """The rows of the runs keys[lo[r]:hi[r]] a k-way merge reads, each run checked to lie within
    the n_keys keys and all of them to fit the output from out_start."""
    cdef Py_ssize_t r, total = 0
    if hi.shape[0] != lo.shape[0]:
        raise ValueError("lo and hi must have one entry per run")
    for r in range(lo.shape[0]):
        if lo[r] < 0 or hi[r] > n_keys or lo[r] > hi[r]:
            raise ValueError("a run's stretch is outside the keys")
        total += hi[r] - lo[r]
    if out_start < 0 or out_start + total > out_len or out_len != perm_len:
        raise ValueError("the output is too short for the merged runs")
    return total
