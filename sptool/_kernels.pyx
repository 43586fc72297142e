# cython: language_level=3
# Compiler directives (boundscheck, wraparound, ...) are set in setup.py so that a debug
# build can turn the checks back on; do not add them here.
"""Compiled kernels: arrays in, arrays out, the GIL released in every loop.

Index data arrives as a (K, n) int64 array: one row per sparse dimension, which is how the
columns come off a Parquet file (the caller stacks them, or passes a transposed view of an
(n, K) SparseTensor.indices).  tests/references/kernels.py holds the NumPy equivalent of each
function, used as the test oracle.
"""

from libc.stdint cimport INT64_MAX, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

import numpy as np

from ._guards cimport bits_above, check_fits, check_shift, checked_runs, outside
from ._radix cimport Digits, plan_digits, prefix_sums
from ._types cimport number_t


cdef enum:
    _ORDER_OK = 0
    _OUT_OF_ORDER = 1
    _REPEATED = 2

ORDER_OK = _ORDER_OK
OUT_OF_ORDER = _OUT_OF_ORDER
REPEATED = _REPEATED


def first_out_of_bounds(keys, const int64_t[::1] shape):
    """(row, dim) of the first row of (K, n) ``keys`` (any strides) with an index outside
    [0, shape[dim]), or (-1, -1)."""
    return _out_of_bounds(_rows_of(keys), shape)


def first_order_violation(keys, const int64_t[::1] order, bint check_repeats, prev=None):
    """First row that breaks the lexicographic order given by ``order`` (dimension numbers).

    Returns (row, kind): kind is OUT_OF_ORDER when the row sorts before its predecessor and
    REPEATED when ``check_repeats`` and it ties with it on every listed dimension (meaningful
    only when ``order`` is a full permutation).  ``keys`` is (K, n) with any strides; ``prev``
    is the last row of the previous batch as a (K, 1) array, so that order is checked across
    batch boundaries.  (-1, ORDER_OK) if the rows are in order.
    """
    cdef _Columns c = _rows_of(keys)
    if prev is not None:
        if prev.shape[0] != c.K or prev.shape[1] != 1:
            raise ValueError("prev must be a (K, 1) array")
        prev = np.ascontiguousarray(prev[:, 0], dtype=np.int64)
    return _order_violation(c, order, check_repeats, prev)


def linear_offsets(const int64_t[:, :] keys, const int64_t[::1] shape, int64_t[::1] out):
    """out[i] = the row-major cell number, in ``shape``, of row i of (K, n) ``keys``.

    IndexError names an index outside the shape; ValueError a shape whose cells outnumber int64.
    """
    cdef Py_ssize_t K = keys.shape[0], n = keys.shape[1], k, i
    cdef int64_t s, hi
    cdef uint64_t bad = 0
    if out.shape[0] != n or shape.shape[0] != K:
        raise ValueError("shape mismatch in linear_offsets")
    cdef const int64_t[::1] strides = _row_major_strides(shape)
    with nogil:
        for i in range(n):
            out[i] = 0
        for k in range(K):
            s = strides[k]
            hi = shape[k]
            for i in range(n):
                # The check accumulates without a branch, so the loop still vectorises; in bounds,
                # no sum can overflow (the shape's cells fit in int64), and out of them the
                # unsigned arithmetic wraps without undefined behaviour until the error is raised.
                bad |= <uint64_t> keys[k, i] >= <uint64_t> hi
                out[i] = <int64_t> (<uint64_t> out[i] + <uint64_t> keys[k, i] * <uint64_t> s)
            if bad:
                break
    if bad:
        for i in range(n):
            if <uint64_t> keys[k, i] >= <uint64_t> shape[k]:
                raise outside("linear_offsets", f"index of dimension {k}", i, keys[k, i], shape[k])


cdef _row_major_strides(const int64_t[::1] shape):
    """The row-major strides of ``shape``; ValueError when its cells outnumber int64."""
    cdef Py_ssize_t k
    cdef int64_t cells = 1
    strides = np.empty(shape.shape[0], dtype=np.int64)
    for k in range(shape.shape[0] - 1, -1, -1):
        if shape[k] < 0:
            raise ValueError(f"a negative size {shape[k]} in the shape")
        strides[k] = cells
        if shape[k] and cells > INT64_MAX // shape[k]:
            raise ValueError("the shape has more cells than int64 can number")
        cells *= shape[k]
    return strides


def scatter_add(const int64_t[::1] offsets, const number_t[:, ::1] values, number_t[:, ::1] out):
    """out[offsets[i], :] += values[i, :]: duplicates accumulate, as the format's sum rule says.

    IndexError for an offset outside out's rows (those before it are added)."""
    cdef Py_ssize_t n = offsets.shape[0], m = values.shape[1], rows = out.shape[0], i, j, bad = -1
    cdef int64_t o
    if values.shape[0] != n or out.shape[1] != m:
        raise ValueError("shape mismatch in scatter_add")
    with nogil:
        if m == 1:
            for i in range(n):
                o = offsets[i]
                if <uint64_t> o >= <uint64_t> rows:
                    bad = i
                    break
                out[o, 0] = out[o, 0] + values[i, 0]
        else:
            for i in range(n):
                o = offsets[i]
                if <uint64_t> o >= <uint64_t> rows:
                    bad = i
                    break
                for j in range(m):
                    out[o, j] = out[o, j] + values[i, j]
    if bad >= 0:
        raise outside("scatter_add", "offset", bad, offsets[bad], rows)


def scatter_or(const int64_t[::1] offsets, const uint8_t[:, ::1] values, uint8_t[:, ::1] out):
    """Logical OR into out: the duplicate rule for bool tensors.  IndexError as scatter_add."""
    cdef Py_ssize_t n = offsets.shape[0], m = values.shape[1], rows = out.shape[0], i, j, bad = -1
    cdef int64_t o
    if values.shape[0] != n or out.shape[1] != m:
        raise ValueError("shape mismatch in scatter_or")
    with nogil:
        for i in range(n):
            o = offsets[i]
            if <uint64_t> o >= <uint64_t> rows:
                bad = i
                break
            for j in range(m):
                if values[i, j]:
                    out[o, j] = 1
    if bad >= 0:
        raise outside("scatter_or", "offset", bad, offsets[bad], rows)


def column_minmax(const int64_t[::1] col):
    """(min, max) of a non-empty int64 column in one pass."""
    cdef Py_ssize_t n = col.shape[0], i
    cdef int64_t lo, hi, v
    if n == 0:
        raise ValueError("empty column")
    lo = col[0]
    hi = col[0]
    with nogil:
        for i in range(1, n):
            v = col[i]
            if v < lo:
                lo = v
            elif v > hi:
                hi = v
    return lo, hi


# ---------------------------------------------------------------------------------------------
# sorting: keys packed into uint64, LSD radix sort

def pack_keys(const int64_t[:, :] keys, const int64_t[::1] order, const int64_t[::1] shifts,
              const int64_t[::1] widths, uint64_t[::1] out):
    """out[i] = sum_j keys[order[j], i] << shifts[j]: a sort key whose integer order is the
    lexicographic order of the rows under ``order``; ValueError if a key is negative or needs
    more than its field's width (it would spill into its neighbour and misorder the rows)."""
    cdef Py_ssize_t n = keys.shape[1], m = order.shape[0], i, j
    cdef uint64_t acc, v, spilled = 0
    if out.shape[0] != n or shifts.shape[0] != m or widths.shape[0] != m:
        raise ValueError("shape mismatch in pack_keys")
    for j in range(m):
        if not 0 <= order[j] < keys.shape[0]:
            raise ValueError("order names a dimension the keys do not have")
        check_shift("pack_keys", "shift", shifts[j])
        if not 0 <= widths[j] <= 64 - shifts[j]:
            raise ValueError(f"pack_keys: a field of {widths[j]} bits at bit {shifts[j]} lies outside 64 bits")
    with nogil:
        for i in range(n):
            acc = 0
            for j in range(m):
                v = <uint64_t> keys[order[j], i]
                spilled |= bits_above(v, widths[j])
                acc = acc | (v << shifts[j])
            out[i] = acc
    if spilled:
        for j in range(m):
            check_fits("pack_keys", np.ascontiguousarray(keys[order[j]]), widths[j])


def radix_argsort(const uint64_t[::1] keys, int64_t[::1] perm, uint64_t[::1] sorted_keys):
    """Stable LSD radix sort: perm receives the permutation, sorted_keys the keys in order.

    When the bits that vary and the row's position fit in 64 together, the position rides above
    the varying bits (it never changes the order) and a pass moves one array of 8 bytes a row,
    in digits of up to 11 bits over the varying bits only.  Otherwise digits of 8 bits over key
    and position arrays.  Either way a digit where every key agrees is skipped.
    """
    cdef Py_ssize_t n = keys.shape[0], i, d, passes = 8
    cdef int shift
    cdef Digits plan
    cdef uint64_t lo_or = 0, hi_and = <uint64_t> -1, digit, varying
    cdef Py_ssize_t[256] count
    cdef Py_ssize_t total, c
    if perm.shape[0] != n or sorted_keys.shape[0] != n:
        raise ValueError("shape mismatch in radix_argsort")
    with nogil:
        for i in range(n):
            lo_or = lo_or | keys[i]
            hi_and = hi_and & keys[i]
    varying = lo_or ^ hi_and
    plan = plan_digits(0, varying)
    if n and plan.top + max(int(n - 1).bit_length(), 1) <= 64:
        _radix_tagged(keys, perm, sorted_keys, &plan, hi_and)
        return
    tmp_keys_arr = np.empty(n, dtype=np.uint64)
    tmp_perm_arr = np.empty(n, dtype=np.int64)
    cdef uint64_t[::1] tmp_keys = tmp_keys_arr
    cdef int64_t[::1] tmp_perm = tmp_perm_arr
    cdef uint64_t[::1] src_k = sorted_keys
    cdef int64_t[::1] src_p = perm
    cdef uint64_t[::1] dst_k = tmp_keys
    cdef int64_t[::1] dst_p = tmp_perm
    cdef uint64_t[::1] swap_k
    cdef int64_t[::1] swap_p
    with nogil:
        for i in range(n):
            sorted_keys[i] = keys[i]
            perm[i] = i
    for d in range(passes):
        shift = 8 * d
        if ((varying >> shift) & 255) == 0:
            continue
        with nogil:
            for i in range(256):
                count[i] = 0
            for i in range(n):
                count[(src_k[i] >> shift) & 255] += 1
            total = 0
            for i in range(256):
                c = count[i]
                count[i] = total
                total += c
            for i in range(n):
                digit = (src_k[i] >> shift) & 255
                dst_k[count[digit]] = src_k[i]
                dst_p[count[digit]] = src_p[i]
                count[digit] += 1
        swap_k = src_k
        src_k = dst_k
        dst_k = swap_k
        swap_p = src_p
        src_p = dst_p
        dst_p = swap_p
    if &src_k[0] != &sorted_keys[0] if n else False:
        with nogil:
            for i in range(n):
                sorted_keys[i] = src_k[i]
                perm[i] = src_p[i]


cdef _radix_tagged(const uint64_t[::1] keys, int64_t[::1] perm, uint64_t[::1] sorted_keys,
                   Digits* plan, uint64_t same):
    """radix_argsort when a key's ``plan.top`` varying bits and its position fit in one word: the
    position is stored from bit ``top`` up; bits above ``top`` are ``same``'s in every key."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef int top = plan.top, d, s
    cdef uint64_t low = ((<uint64_t> 1) << top) - 1  # top < 64: the positions take a bit at least
    cdef uint64_t k, dig, mask
    cdef int64_t c
    counts_arr = np.zeros((max(plan.count, 1), 1 << plan.width), dtype=np.int64)
    work = np.empty((2, n), dtype=np.uint64)
    cdef int64_t[:, ::1] counts_2d = counts_arr
    cdef int64_t* counts = &counts_2d[0, 0]
    cdef int64_t* cnt
    cdef uint64_t[:, ::1] w = work
    cdef uint64_t* a = &w[0, 0]
    cdef uint64_t* z = &w[1, 0]
    cdef uint64_t* t
    with nogil:
        for i in range(n):
            k = keys[i]
            for d in range(plan.count):
                if plan.mask[d]:
                    counts[(d << plan.width) + <Py_ssize_t> ((k >> plan.shift[d]) & plan.mask[d])] += 1
            a[i] = (k & low) | (<uint64_t> i << top)
        for d in range(plan.count):
            mask = plan.mask[d]
            if mask == 0:
                continue
            cnt = counts + (d << plan.width)
            prefix_sums(cnt, (<Py_ssize_t> 1) << plan.width)
            s = plan.shift[d]
            for i in range(n):
                k = a[i]
                dig = (k >> s) & mask
                c = cnt[dig]
                z[c] = k
                cnt[dig] = c + 1
            t = a
            a = z
            z = t
        for i in range(n):
            k = a[i]
            perm[i] = <int64_t> (k >> top)
            sorted_keys[i] = (k & low) | (same & ~low)


def unpack_keys(const uint64_t[::1] packed, const int64_t[::1] order, const int64_t[::1] shifts,
                const int64_t[::1] widths, int64_t[:, ::1] out):
    """The inverse of pack_keys: out[order[j], i] = (packed[i] >> shifts[j]) & (2^widths[j] - 1)."""
    cdef Py_ssize_t n = packed.shape[0], m = order.shape[0], i, j
    cdef uint64_t mask
    cdef int64_t d, s
    if out.shape[1] != n or shifts.shape[0] != m or widths.shape[0] != m:
        raise ValueError("shape mismatch in unpack_keys")
    for j in range(m):
        if not 0 <= order[j] < out.shape[0]:
            raise ValueError("order names a dimension the output does not have")
        check_shift("unpack_keys", "shift", shifts[j])
        check_shift("unpack_keys", "width", widths[j], 64)
    for j in range(m):
        d = order[j]
        s = shifts[j]
        mask = (<uint64_t> -1) if widths[j] >= 64 else ((<uint64_t> 1 << widths[j]) - 1)
        with nogil:
            if widths[j] == 0:
                for i in range(n):
                    out[d, i] = 0
            else:
                for i in range(n):
                    out[d, i] = <int64_t> ((packed[i] >> s) & mask)


def or_shifted(const int64_t[::1] col, int shift, int64_t width, uint64_t[::1] out, bint first,
               uint64_t limit=0):
    """out (|)= col << shift: pack_keys one column at a time, straight from a column's buffer;
    ValueError if a value is negative or needs more than ``width`` bits.  With ``limit`` (the
    dimension's extent, at most 2**width), the bounds check in the same pass: False, and nothing
    raised, when a value is negative or not below it (the caller names the row); else True."""
    cdef Py_ssize_t n = col.shape[0], i
    cdef uint64_t spilled = 0, v
    cdef bint over = False
    if out.shape[0] != n:
        raise ValueError("shape mismatch in or_shifted")
    check_shift("or_shifted", "shift", shift)
    if not 0 <= width <= 64 - shift:
        raise ValueError(f"or_shifted: a field of {width} bits at bit {shift} lies outside 64 bits")
    if limit and width < 64 and limit > (<uint64_t> 1) << width:
        raise ValueError(f"or_shifted: an extent of {limit} does not fit {width} bits")
    with nogil:
        if limit:
            # Negative values read as unsigned are past any extent: one comparison each.
            for i in range(n):
                v = <uint64_t> col[i]
                over |= v >= limit
                out[i] = (v << shift) if first else (out[i] | (v << shift))
        elif first:
            for i in range(n):
                spilled |= bits_above(<uint64_t> col[i], width)
                out[i] = <uint64_t> col[i] << shift
        else:
            for i in range(n):
                spilled |= bits_above(<uint64_t> col[i], width)
                out[i] = out[i] | (<uint64_t> col[i] << shift)
    if spilled:
        check_fits("or_shifted", col, width)
    return not over


def tag_positions(const uint64_t[::1] keys, int pos_bits, uint64_t[::1] out):
    """out[i] = keys[i] << pos_bits | i: ties then sort in input order under any sort.

    ValueError unless every position fits in pos_bits and every key in the bits above them."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef uint64_t used = 0
    if out.shape[0] != n:
        raise ValueError("shape mismatch in tag_positions")
    check_shift("tag_positions", "pos_bits", pos_bits)
    if n and <uint64_t> (n - 1) >> pos_bits:
        raise ValueError(f"tag_positions: {n} positions do not fit in {pos_bits} bits")
    with nogil:
        for i in range(n):
            used |= keys[i]
            out[i] = (keys[i] << pos_bits) | <uint64_t> i
    if pos_bits and used >> (64 - pos_bits):
        raise ValueError(f"tag_positions: a key does not fit in {64 - pos_bits} bits")


def untag_positions(const uint64_t[::1] tagged, int pos_bits, int64_t[::1] perm, uint64_t[::1] keys):
    """Split sorted tagged keys back into the permutation and the keys."""
    cdef Py_ssize_t n = tagged.shape[0], i
    cdef uint64_t mask
    if perm.shape[0] != n or keys.shape[0] != n:
        raise ValueError("shape mismatch in untag_positions")
    check_shift("untag_positions", "pos_bits", pos_bits)
    mask = (<uint64_t> 1 << pos_bits) - 1
    with nogil:
        for i in range(n):
            perm[i] = <int64_t> (tagged[i] & mask)
            keys[i] = tagged[i] >> pos_bits


def bucket_counts(const uint64_t[::1] keys, int shift, int64_t[::1] counts):
    """counts[keys[i] >> shift] += 1: the histogram of a counting sort by the keys' top bits."""
    cdef Py_ssize_t n = keys.shape[0], nb = counts.shape[0], i
    cdef uint64_t b, top = 0
    check_shift("bucket_counts", "shift", shift)
    with nogil:
        for i in range(n):
            b = keys[i] >> shift
            top = b if b > top else top
            if b < <uint64_t> nb:
                counts[b] += 1
    if n and top >= <uint64_t> nb:
        raise ValueError("a key falls outside the buckets in bucket_counts")


ctypedef fused word:  # a value's bytes, whatever its type: 1, 2, 4 or 8 of them
    uint8_t
    uint16_t
    uint32_t
    uint64_t


def scatter_rows(const uint64_t[::1] keys, const word[::1] values, int shift, int pos_bits, int64_t[::1] nxt,
                 uint64_t[::1] out, word[::1] out_values):
    """The scatter of a counting sort: row i goes to at = nxt[b] for its bucket b = keys[i] >>
    shift (and nxt[b] moves on), its value to out_values[at] and its key, tagged with where it
    went, to out[at] = keys[i] << pos_bits | at.  Rows of one bucket keep their input order, so
    a sort of the tagged keys keeps ties in input order."""
    cdef Py_ssize_t n = keys.shape[0], nb = nxt.shape[0], m = out.shape[0], i
    cdef uint64_t b
    cdef int64_t at
    cdef bint bad = False
    if values.shape[0] != n or out_values.shape[0] != m:
        raise ValueError("shape mismatch in scatter_rows")
    if shift < 0 or shift >= 64 or pos_bits < 1 or pos_bits >= 64 or (m and (m - 1) >> pos_bits):
        raise ValueError("shift and pos_bits must be in 0..63 and 1..63, with room for every position")
    with nogil:
        for i in range(n):
            b = keys[i] >> shift
            if b >= <uint64_t> nb:
                bad = True
                break
            at = nxt[b]
            if at < 0 or at >= m:
                bad = True
                break
            out[at] = (keys[i] << pos_bits) | <uint64_t> at
            out_values[at] = values[i]
            nxt[b] = at + 1
    if bad:
        raise ValueError("a key falls outside the buckets or their room in scatter_rows")


cdef inline bint _before(uint64_t ka, int64_t ta, uint64_t kb, int64_t tb) noexcept nogil:
    # (key, tag) order.  A tag is the run number, so ties go to the lower run (the runs hold
    # consecutive stretches of the input: the merge is stable); an exhausted run has key
    # UINT64_MAX and tag run + k, so it loses to every live one.
    return (ka < kb) | ((ka == kb) & (ta < tb))  # bitwise: no branches to mispredict


def merge_runs(const uint64_t[::1] keys, const int64_t[::1] lo, const int64_t[::1] hi,
               uint64_t[::1] out_keys, int64_t[::1] out_perm, Py_ssize_t out_start):
    """Stable k-way merge of the sorted stretches keys[lo[r]:hi[r]] (r = 0..k-1, in input order).

    Writes the merged keys to out_keys[out_start:] and, for each, its position in ``keys`` to
    out_perm (the gather order for the rows that travel with the keys).  A tournament (loser)
    tree: log2(k) comparisons per row, each against keys held in the tree.  The GIL is released,
    so callers merge disjoint key ranges on several threads (stream/sort.py: merge_keys).
    """
    cdef Py_ssize_t k = lo.shape[0], r, total = 0, o = out_start, node, leaves = 1
    cdef int64_t* pos
    cdef int64_t* tag
    cdef uint64_t* key
    cdef uint64_t* wkey
    cdef int64_t* wtag
    cdef int64_t wt, t
    cdef uint64_t wk, kk
    cdef bint c
    cdef const uint64_t* kp = &keys[0] if keys.shape[0] else NULL
    total = checked_runs(lo, hi, keys.shape[0], out_start, out_keys.shape[0], out_perm.shape[0])
    if total == 0:
        return
    while leaves < k:
        leaves *= 2
    # pos: each run's next row.  key/tag[1..leaves-1]: the loser of each node's match;
    # key/tag[leaves + r]: run r's head while the tree is built (then unused).
    pos = <int64_t*> malloc(leaves * sizeof(int64_t))
    tag = <int64_t*> malloc(2 * leaves * sizeof(int64_t))
    key = <uint64_t*> malloc(2 * leaves * sizeof(uint64_t))
    wkey = <uint64_t*> malloc(2 * leaves * sizeof(uint64_t))
    wtag = <int64_t*> malloc(2 * leaves * sizeof(int64_t))
    if pos == NULL or tag == NULL or key == NULL or wkey == NULL or wtag == NULL:
        free(pos)
        free(tag)
        free(key)
        free(wkey)
        free(wtag)
        raise MemoryError()
    with nogil:
        for r in range(leaves):
            pos[r] = lo[r] if r < k else 0
            if r < k and lo[r] < hi[r]:
                wkey[leaves + r], wtag[leaves + r] = kp[lo[r]], r
            else:
                wkey[leaves + r], wtag[leaves + r] = <uint64_t> -1, r + leaves
        for node in range(leaves - 1, 0, -1):
            if _before(wkey[2 * node], wtag[2 * node], wkey[2 * node + 1], wtag[2 * node + 1]):
                wkey[node], wtag[node] = wkey[2 * node], wtag[2 * node]
                key[node], tag[node] = wkey[2 * node + 1], wtag[2 * node + 1]
            else:
                wkey[node], wtag[node] = wkey[2 * node + 1], wtag[2 * node + 1]
                key[node], tag[node] = wkey[2 * node], wtag[2 * node]
        wk, wt = wkey[1], wtag[1]
        while wt < leaves:
            out_keys[o] = wk
            out_perm[o] = pos[wt]
            o += 1
            r = wt
            pos[r] += 1
            if pos[r] < hi[r]:
                wk = kp[pos[r]]
            else:
                wk, wt = <uint64_t> -1, r + leaves
            node = (r + leaves) // 2
            while node >= 1:
                # Swap when the stored loser beats the candidate, as selects rather than a
                # branch: on random keys the branch is mispredicted half the time.
                c = _before(key[node], tag[node], wk, wt)
                kk, t = key[node], tag[node]
                key[node] = wk if c else kk
                tag[node] = wt if c else t
                wk = kk if c else wk
                wt = t if c else wt
                node //= 2
    free(wkey)
    free(wtag)
    free(pos)
    free(tag)
    free(key)


# ---------------------------------------------------------------------------------------------
# The checks on index columns: separate column buffers (the columns of a record batch as they
# are, so callers need not copy them into one array) or the rows of a (K, n) array, any strides.


cdef class _Columns:
    """Pointers to K int64 columns of equal length n (attributes in _kernels.pxd).  Built from a
    list of contiguous columns, or from the rows of a (K, n) array of any strides (_rows_of): the
    kernels below (and sptool/_reduce.pyx's) serve both."""

    def __cinit__(self, cols=()):
        cdef const int64_t[::1] view
        cdef Py_ssize_t k
        self.arrays = list(cols)
        self.K = len(self.arrays)
        self.n = len(self.arrays[0]) if self.K else 0
        self.stride = 1
        self.ptr = <const int64_t**> malloc(max(self.K, 1) * sizeof(int64_t*))
        if self.ptr == NULL:
            raise MemoryError()
        for k in range(self.K):
            view = self.arrays[k]
            if view.shape[0] != self.n:
                raise ValueError("columns differ in length")
            self.ptr[k] = &view[0] if self.n else NULL

    def __dealloc__(self):
        free(self.ptr)


cdef _Columns _rows_of(keys):
    """The rows of a (K, n) int64 array (a transposed view too) as _Columns, without a copy."""
    cdef const int64_t[:, :] view = keys
    cdef _Columns c = _Columns()
    cdef Py_ssize_t k
    c.arrays = [keys]
    c.K, c.n = view.shape[0], view.shape[1]
    if c.n > 1 and view.strides[1] % <Py_ssize_t> sizeof(int64_t):
        raise ValueError("the keys' rows must be strided in whole int64 elements")
    c.stride = view.strides[1] // <Py_ssize_t> sizeof(int64_t)
    free(c.ptr)
    c.ptr = <const int64_t**> malloc(max(c.K, 1) * sizeof(int64_t*))
    if c.ptr == NULL:
        raise MemoryError()
    for k in range(c.K):
        c.ptr[k] = &view[k, 0] if c.n else NULL
    return c


cdef inline int _cmp_rows(const int64_t** cols, Py_ssize_t stride, const int64_t[::1] order, Py_ssize_t a,
                          Py_ssize_t b) noexcept nogil:
    """Lexicographic comparison of rows a and b of separate columns under ``order``."""
    cdef Py_ssize_t j
    cdef int64_t x, y
    for j in range(order.shape[0]):
        x = cols[order[j]][a * stride]
        y = cols[order[j]][b * stride]
        if x != y:
            return -1 if x < y else 1
    return 0


cdef inline int _cmp_prev(const int64_t[::1] prev, const int64_t** cols,
                          const int64_t[::1] order) noexcept nogil:
    """Comparison of the previous batch's last row with this batch's first, under ``order``."""
    cdef Py_ssize_t j
    cdef int64_t x, y
    for j in range(order.shape[0]):
        x = prev[order[j]]
        y = cols[order[j]][0]
        if x != y:
            return -1 if x < y else 1
    return 0


cdef tuple _out_of_bounds(_Columns c, const int64_t[::1] shape):
    cdef Py_ssize_t k, i, first_row = c.n, first_dim = -1, stride = c.stride
    cdef int64_t hi, v
    cdef const int64_t* col
    if shape.shape[0] != c.K:
        raise ValueError("shape length must equal the number of index rows")
    with nogil:
        for k in range(c.K):
            hi = shape[k]
            col = c.ptr[k]
            # Only rows before the best hit so far can improve it.
            for i in range(first_row):
                v = col[i * stride]
                if v < 0 or v >= hi:
                    first_row = i
                    first_dim = k
                    break
    if first_dim < 0:
        return -1, -1
    return first_row, first_dim


cdef tuple _order_violation(_Columns c, const int64_t[::1] order, bint check_repeats, const int64_t[::1] prev):
    cdef Py_ssize_t n = c.n, m = order.shape[0], i, j
    cdef int cmp
    cdef Py_ssize_t bad = -1
    cdef int kind = _ORDER_OK
    for j in range(m):
        if not 0 <= order[j] < c.K:
            raise ValueError("order names a dimension the keys do not have")
    if m == 0 or n == 0:
        return -1, ORDER_OK
    if prev is not None:
        if prev.shape[0] != c.K:
            raise ValueError("prev must hold K values")
        cmp = _cmp_prev(prev, c.ptr, order)
        if cmp > 0 or (cmp == 0 and check_repeats):
            return 0, OUT_OF_ORDER if cmp > 0 else REPEATED
    with nogil:
        for i in range(1, n):
            cmp = _cmp_rows(c.ptr, c.stride, order, i - 1, i)
            if cmp > 0 or (cmp == 0 and check_repeats):
                bad = i
                kind = _OUT_OF_ORDER if cmp > 0 else _REPEATED
                break
    return bad, kind


def columns_out_of_bounds(cols, const int64_t[::1] shape):
    """first_out_of_bounds on a list of K contiguous int64 columns."""
    return _out_of_bounds(_Columns(cols), shape)


def columns_order_violation(cols, const int64_t[::1] order, bint check_repeats, const int64_t[::1] prev=None):
    """first_order_violation on a list of K contiguous int64 columns; ``prev`` is the previous
    row (K values) or None."""
    return _order_violation(_Columns(cols), order, check_repeats, prev)


def columns_max(cols):
    """Per-column maxima of K non-empty int64 columns."""
    cdef _Columns c = _Columns(cols)
    cdef Py_ssize_t k, i
    cdef int64_t hi
    if c.K and c.n == 0:
        raise ValueError("columns_max of empty columns")
    out = []
    for k in range(c.K):
        hi = c.ptr[k][0]
        with nogil:
            for i in range(1, c.n):
                if c.ptr[k][i] > hi:
                    hi = c.ptr[k][i]
        out.append(hi)
    return out


def columns_scan(cols, const int64_t[::1] shape, const int64_t[::1] order, bint check_repeats,
                 const int64_t[::1] prev=None):
    """validate's per-batch pass, fused: bounds, per-column min/max and row order in one sweep.

    Returns (oob_row, oob_dim, order_row, order_kind, mins, maxs): the first row outside the
    shape (or -1, -1), the first row breaking ``order`` (or -1, ORDER_OK), as the separate
    column kernels would report them, and each column's minimum and maximum.
    """
    cdef _Columns c = _Columns(cols)
    cdef Py_ssize_t K = c.K, n = c.n, m = order.shape[0], i, j, k
    cdef Py_ssize_t oob_row = -1, oob_dim = -1, bad = -1
    cdef int kind = _ORDER_OK, cmp
    cdef int64_t v
    if shape.shape[0] != K:
        raise ValueError("shape length must equal the number of columns")
    for j in range(m):
        if not 0 <= order[j] < K:
            raise ValueError("order names a dimension the columns do not have")
    if n == 0:
        return -1, -1, -1, ORDER_OK, [], []
    mins_arr = np.empty(K, dtype=np.int64)
    maxs_arr = np.empty(K, dtype=np.int64)
    cdef int64_t[::1] mins = mins_arr
    cdef int64_t[::1] maxs = maxs_arr
    for k in range(K):
        mins[k] = c.ptr[k][0]
        maxs[k] = c.ptr[k][0]
    if m and prev is not None:
        if prev.shape[0] != K:
            raise ValueError("prev must hold K values")
        cmp = _cmp_prev(prev, c.ptr, order)
        if cmp > 0 or (cmp == 0 and check_repeats):
            bad = 0
            kind = _OUT_OF_ORDER if cmp > 0 else _REPEATED
    with nogil:
        for i in range(n):
            for k in range(K):
                v = c.ptr[k][i]
                if v < mins[k]:
                    mins[k] = v
                elif v > maxs[k]:
                    maxs[k] = v
                if oob_row < 0 and (v < 0 or v >= shape[k]):
                    oob_row = i
                    oob_dim = k
            if bad < 0 and m and i > 0:
                cmp = _cmp_rows(c.ptr, 1, order, i - 1, i)  # columns_scan takes contiguous columns
                if cmp > 0 or (cmp == 0 and check_repeats):
                    bad = i
                    kind = _OUT_OF_ORDER if cmp > 0 else _REPEATED
    return oob_row, oob_dim, bad, kind, mins_arr.tolist(), maxs_arr.tolist()
