# The radix sorts' digit plan, shared by the one-word sort (_kernels.pyx) and the two-word one
# (_widekeys.pyx): a key is (hi, lo), the one-word sort's hi being 0.

from libc.stdint cimport int64_t, uint64_t

from ._guards cimport sptool_clz64

cdef enum:
    DIGIT_BITS = 11  # the widest digit: 2,048 buckets
    DIGITS = 12  # ceil(128 / DIGIT_BITS)


cdef inline uint64_t low_bits(int64_t width) noexcept nogil:
    """A mask of the ``width`` lowest bits (all 64 from 64 up)."""
    return (<uint64_t> -1) if width >= 64 else ((<uint64_t> 1 << width) - 1)


cdef inline uint64_t field_of(uint64_t hi, uint64_t lo, int s, uint64_t mask) noexcept nogil:
    """The field at bit offset s under ``mask`` of a (hi, lo) key."""
    if s >= 64:
        return (hi >> (s - 64)) & mask
    if s == 0:
        return lo & mask
    return ((lo >> s) | (hi << (64 - s))) & mask


cdef struct Digits:
    # Digit d is the key's bits [shift[d], shift[d] + width) under mask[d], mask 0 where every key
    # agrees (the pass is skipped); top: the bits below the highest that varies.
    int top
    int count
    int width
    int shift[DIGITS]
    uint64_t mask[DIGITS]


cdef inline Digits plan_digits(uint64_t var_hi, uint64_t var_lo) noexcept nogil:
    """Equal digits of at most DIGIT_BITS bits covering the bits below the highest that varies
    (``var``: the bits where keys differ): as few passes as 11-bit digits take, each digit as
    narrow as that allows (fewer buckets).  No digit reaches bit ``top`` or above, where a sort
    may keep the rows' positions."""
    cdef Digits p
    cdef int top = 0, d, left
    if var_hi:
        top = 128 - sptool_clz64(var_hi)
    elif var_lo:
        top = 64 - sptool_clz64(var_lo)
    p.top = top
    p.count = (top + DIGIT_BITS - 1) // DIGIT_BITS
    p.width = (top + p.count - 1) // p.count if p.count else 0
    for d in range(p.count):
        p.shift[d] = d * p.width
        left = top - p.shift[d]
        p.mask[d] = low_bits(p.width if left > p.width else left)
        if field_of(var_hi, var_lo, p.shift[d], p.mask[d]) == 0:
            p.mask[d] = 0
    return p


cdef inline void prefix_sums(int64_t* counts, Py_ssize_t buckets) noexcept nogil:
    """A digit's bucket counts turned into each bucket's first output position."""
    cdef int64_t total = 0, c
    cdef Py_ssize_t b
    for b in range(buckets):
        c = counts[b]
        counts[b] = total
        total += c
