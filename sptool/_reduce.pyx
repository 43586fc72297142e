"""Compiled reductions over groups of rows: arrays in, arrays out, the GIL released in every loop.

Two ways to find a row's group:

- segments: runs of equal keys in sorted rows, given by their start offsets (``starts`` holds
  the g run starts followed by n), reduced by ``segment_*``;
- cells: a group number per row (``cells``, any order), accumulated into per-cell slots by
  ``scatter_*``, with ``counts`` saying how many rows reached each cell (0: untouched).

Values arrive as an (n, m) C-contiguous array: one row per stored entry, m elements per dense
block (m = 1 for scalar values).  tests/references/reduce.py holds the NumPy equivalent of
each function, used as the test oracle.
"""

from libc.math cimport exp, expf
from libc.stdlib cimport free, malloc
from libc.stdint cimport INT64_MAX, int64_t, uint64_t
from libc.string cimport memset

from ._guards cimport sptool_ctz64
from ._kernels cimport _Columns
from ._types cimport number_t, real_t

ctypedef fused float_t:
    float
    double


cdef inline bint _isnan(real_t v) noexcept nogil:
    if real_t is float or real_t is double:
        return v != v
    else:
        return False


def run_starts(const int64_t[:, :] keys, const int64_t[::1] dims, int64_t[::1] out):
    """Start offsets of the runs of rows with equal indices on ``dims`` in (K, n) ``keys``.

    Writes the g run starts to out[:g] and n to out[g]; returns g.  ``out`` holds n + 1.
    With no ``dims`` the rows form one run.
    """
    cdef Py_ssize_t n = keys.shape[1], nd = dims.shape[0], i, j, g = 0
    cdef int64_t d
    if out.shape[0] < n + 1:
        raise ValueError("out must hold n + 1 offsets")
    for j in range(nd):
        if dims[j] < 0 or dims[j] >= keys.shape[0]:
            raise ValueError("dimension out of range in run_starts")
    with nogil:
        if n > 0:
            out[0] = 0
            g = 1
            for i in range(1, n):
                for j in range(nd):
                    d = dims[j]
                    if keys[d, i] != keys[d, i - 1]:
                        out[g] = i
                        g += 1
                        break
        out[g] = n
    return g


cdef _Columns _columns_of(columns, Py_ssize_t n):
    """The C-contiguous int64 index columns of n rows each in ``columns`` (a list)."""
    cdef _Columns c = _Columns(columns)
    if c.K and c.n != n:
        raise ValueError(f"index columns of {c.n} rows where {n} were expected")
    return c


cdef int64_t _largest_offset(const int64_t[::1] bounds, const int64_t[::1] strides, Py_ssize_t first) except -1:
    """The largest sum over c >= first of index_c * strides[c] for indices within ``bounds``:
    ValueError for a negative stride or a sum that could overflow int64 (so none does)."""
    cdef int64_t total = 0, top
    cdef Py_ssize_t c
    for c in range(first, strides.shape[0]):
        top = bounds[c] - 1 if bounds[c] > 0 else 0
        if strides[c] < 0 or (strides[c] and top > (INT64_MAX - total) // strides[c]):
            raise ValueError("the strides must be non-negative, their offsets within int64")
        total += top * strides[c]
    return total


def group_cells(columns, Py_ssize_t n, const int64_t[::1] bounds, Py_ssize_t n_group,
                const int64_t[::1] strides, int64_t width, int64_t[::1] cells, int64_t[::1] starts):
    """Cell numbers for rows ordered by their first ``n_group`` index columns, in one pass.

    ``columns`` is a list of C contiguous int64 index columns of n rows each.
    cells[i] = group(i) * width + sum_c columns[c][i] * strides[c],
    where group(i) numbers the runs of equal indices on the first n_group columns (0, 1, ...);
    the caller gives strides whose offsets stay below width.  Every column is checked against
    0 <= index < bounds[c].  Writes the run starts and then n to ``starts``; returns the
    number of runs, or -(row + 1) for the first row with an index out of bounds.
    """
    cdef _Columns held = _columns_of(columns, n)
    cdef Py_ssize_t C = held.K, i, c, g = 0, bad = -1
    cdef const int64_t** cols = held.ptr
    cdef const int64_t* col0
    cdef int64_t v, off, base = -width
    cdef bint new
    if bounds.shape[0] != C or strides.shape[0] != C or n_group > C or n_group < 0:
        raise ValueError("columns, bounds and strides must have one entry per column")
    if n < 0 or cells.shape[0] < n or starts.shape[0] < n + 1:
        raise ValueError("cells must hold n entries and starts n + 1")
    off = _largest_offset(bounds, strides, 0)
    if width < 0 or (n > 1 and width and n - 1 > (INT64_MAX - off) // width):
        raise ValueError("the cells of n groups of width slots must be numbered within int64")
    with nogil:
        if C == 2 and n_group == 1 and strides[0] == 0:
            # The common case (one leading kept dimension, one other): a tighter loop.
            col0 = cols[0]
            for i in range(n):
                v = col0[i]
                off = cols[1][i]
                if v < 0 or v >= bounds[0] or off < 0 or off >= bounds[1]:
                    bad = i
                    break
                if i == 0 or v != col0[i - 1]:
                    starts[g] = i
                    g += 1
                    base = base + width
                cells[i] = base + off * strides[1]
        else:
            for i in range(n):
                new = i == 0
                off = 0
                for c in range(C):
                    v = cols[c][i]
                    if v < 0 or v >= bounds[c]:
                        bad = i
                        break
                    if c < n_group and not new and v != cols[c][i - 1]:
                        new = True
                    off = off + v * strides[c]
                if bad >= 0:
                    break
                if new:
                    starts[g] = i
                    g += 1
                cells[i] = (g - 1) * width + off
        starts[g] = n
    if bad >= 0:
        return -(bad + 1)
    return g


cdef inline void _add_row(const number_t[:, ::1] values, Py_ssize_t i, number_t[:, ::1] acc, int64_t o,
                          int64_t[::1] counts) noexcept nogil:
    cdef Py_ssize_t j, m = values.shape[1]
    counts[o] += 1
    if m == 1:
        acc[o, 0] = acc[o, 0] + values[i, 0]
    else:
        for j in range(m):
            acc[o, j] = acc[o, j] + values[i, j]


cdef inline void _check_extents(const int64_t[::1] extents, Py_ssize_t width) except *:
    """A group's dense block of shape ``extents`` must have exactly ``width`` cells (its slots)."""
    cdef int64_t total = 1
    cdef Py_ssize_t j
    for j in range(extents.shape[0]):
        if extents[j] < 0 or (extents[j] and total > INT64_MAX // extents[j]):
            raise ValueError("the extents must be sizes whose product fits in int64")
        total *= extents[j]
    if total != width:
        raise ValueError("the extents' product must be the group's number of slots")


cdef inline Py_ssize_t _emit(const number_t[:, ::1] acc, const int64_t[::1] counts, Py_ssize_t s, int64_t lead,
                             int64_t cell, const int64_t[::1] extents, int64_t[:, ::1] keys, number_t[:, ::1] vals,
                             int64_t[::1] counts_out, Py_ssize_t g) noexcept nogil:
    """Slot s, the cell ``cell`` of the group ``lead``, as the entry in column g: written whether
    the slot was touched or not, g advanced only if it was (about half the slots are, so a
    branch on it would be mispredicted every other slot); the new g."""
    cdef Py_ssize_t R = extents.shape[0], m = acc.shape[1], j
    cdef int64_t off
    keys[0, g] = lead
    if R == 1:
        keys[1, g] = cell
    else:
        off = cell
        for j in range(R - 1, -1, -1):
            keys[1 + j, g] = off % extents[j]
            off = off // extents[j]
    if m == 1:
        vals[g, 0] = acc[s, 0]
    else:
        for j in range(m):
            vals[g, j] = acc[s, j]
    counts_out[g] = counts[s]
    return g + (counts[s] != 0)


def compact_cells(const int64_t[::1] counts, Py_ssize_t lo, Py_ssize_t hi, int64_t width, int64_t first,
                  const int64_t[::1] extents, const number_t[:, ::1] acc, int64_t[:, ::1] keys,
                  number_t[:, ::1] vals, int64_t[::1] counts_out):
    """The touched slots (counts != 0) of slots lo..hi-1 of an accumulator, in slot order, as
    entries: slot s is group (s // width) of a run of groups numbered from ``first`` and, within
    it, the cell (s % width) of a dense block of shape ``extents`` (row-major; their product is
    width).  Writes keys[0] = first + s // width, keys[1:] = the cell's coordinates, vals =
    acc[s] and counts_out = counts[s], one column per touched slot; returns how many.  lo and
    hi are multiples of width; the outputs hold at least that many columns (a bound the caller
    knows: the rows that reached the slots)."""
    cdef Py_ssize_t R = extents.shape[0], m = acc.shape[1], cap = counts_out.shape[0], g = 0, s, grp, r
    if width <= 0 or lo % width or hi % width or lo < 0 or hi > counts.shape[0] or acc.shape[0] != counts.shape[0]:
        raise ValueError("lo and hi must be multiples of width within the accumulator")
    if keys.shape[0] != R + 1 or keys.shape[1] < cap or vals.shape[0] < cap or vals.shape[1] != m:
        raise ValueError("keys must be (1 + len(extents), cap), vals (cap, m) and counts_out (cap,)")
    _check_extents(extents, width)
    with nogil:
        for grp in range(lo // width, hi // width):
            for r in range(width):
                s = grp * width + r
                if g >= cap:
                    if counts[s] == 0:
                        continue
                    g = -1
                    break
                g = _emit(acc, counts, s, first + grp, r, extents, keys, vals, counts_out, g)
            if g < 0:
                break
    if g < 0:
        raise IndexError("more touched slots than the outputs hold")
    return g


cdef inline Py_ssize_t _drain(number_t[:, ::1] acc, int64_t[::1] counts, uint64_t* touched, int64_t lead,
                              const int64_t[::1] extents, int64_t[:, ::1] keys, number_t[:, ::1] vals,
                              int64_t[::1] counts_out, Py_ssize_t g) noexcept nogil:
    """The touched cells of one group's slots (the set bits of ``touched``, in order) as entries
    from column g on, the slots and bits zeroed; the new g.  Visiting set bits only: a group of
    E = 256 slots typically has about half of them touched."""
    cdef Py_ssize_t E = counts.shape[0], m = acc.shape[1], w, s, j
    cdef uint64_t word
    for w in range((E + 63) // 64):
        word = touched[w]
        while word:
            s = w * 64 + sptool_ctz64(word)
            g = _emit(acc, counts, s, lead, s, extents, keys, vals, counts_out, g)
            for j in range(m):
                acc[s, j] = 0
            counts[s] = 0
            word &= word - 1
        touched[w] = 0
    return g


def group_block_sum(columns, Py_ssize_t n, const int64_t[::1] bounds,
                    const int64_t[::1] strides, const int64_t[::1] extents, const number_t[:, ::1] values,
                    number_t[:, ::1] head, int64_t[::1] head_counts, number_t[:, ::1] tail,
                    int64_t[::1] tail_counts, int64_t[:, ::1] keys, number_t[:, ::1] vals,
                    int64_t[::1] counts_out):
    """Sums of rows ordered by their first index column, one group per value of it, in one pass
    that never leaves a group's E = prod(extents) slots (in cache): the first group's sums are
    added to ``head``, the last one's to ``tail`` (the caller carries them across batches), and
    every group between is made entries as it ends: keys[0] = the leading index, keys[1:] = the
    cell's coordinates (row-major in ``extents``), vals = its sum, counts_out = its rows, only
    for cells some row reached (as compact_cells).  A row's cell is sum_c>0 columns[c][i] *
    strides[c]; every index is checked against 0 <= index < bounds[c].  head, tail (E, m) and
    head_counts, tail_counts (E,) start at zero; the outputs hold n columns; tail is zero again
    when the batch has one group (all in head).

    Returns (code, g): code -1 when every row was added, g entries written; the row of the
    first index out of bounds; or -2 - row when column 0 decreases at that row (the caller
    takes the general path; the outputs are then garbage)."""
    cdef _Columns held = _columns_of(columns, n)
    cdef Py_ssize_t C = held.K, m = values.shape[1], R = extents.shape[0], i, c, j
    cdef Py_ssize_t E = head_counts.shape[0], cap = counts_out.shape[0], g = 0
    cdef const int64_t** cols = held.ptr
    cdef int64_t v, cur, o, off
    cdef Py_ssize_t result = -1
    cdef bint in_head = True
    if bounds.shape[0] != C or strides.shape[0] != C or C < 1:
        raise ValueError("columns, bounds and strides must have one entry per column (at least one)")
    if head.shape[0] != E or tail.shape[0] != E or tail_counts.shape[0] != E or head.shape[1] != m \
            or tail.shape[1] != m or values.shape[0] != n:
        raise ValueError("head and tail must be (E, m), their counts (E,), values (n, m)")
    if keys.shape[0] != R + 1 or keys.shape[1] < cap or vals.shape[0] < cap or vals.shape[1] != m or cap < n:
        raise ValueError("keys must be (1 + len(extents), n), vals (n, m) and counts_out (n,)")
    _check_extents(extents, E)
    _largest_offset(bounds, strides, 1)
    if n == 0:
        return -1, 0
    cdef Py_ssize_t words = max((E + 63) // 64, 1)
    cdef uint64_t* touched = <uint64_t*> malloc(words * sizeof(uint64_t))
    if touched == NULL:
        raise MemoryError()
    # The rows' slots: head's, then tail's (switched once); bits mark tail's touched slots.
    # No slots (an extent of 0): every row's slot is outside them, so none is dereferenced.
    cdef number_t* acc = NULL
    cdef int64_t* cnt = &head_counts[0] if E else NULL
    if m and E:
        acc = &head[0, 0]
    try:
        with nogil:
            memset(touched, 0, words * sizeof(uint64_t))
            cur = cols[0][0]
            for i in range(n):
                v = cols[0][i]
                if v < 0 or v >= bounds[0]:
                    result = i
                    break
                if v < cur:
                    result = -2 - i
                    break
                o = 0
                for c in range(1, C):
                    off = cols[c][i]
                    if off < 0 or off >= bounds[c]:
                        result = i
                        break
                    o = o + off * strides[c]
                if result >= 0:
                    break
                if o < 0 or o >= E:
                    result = -2 - i
                    break
                if v != cur:
                    if in_head:
                        memset(touched, 0, words * sizeof(uint64_t))  # head's slots: the caller's
                        in_head = False
                        if m:
                            acc = &tail[0, 0]
                        cnt = &tail_counts[0]
                    else:  # the group in tail ends: its cells become entries, tail zeroed for the next
                        g = _drain(tail, tail_counts, touched, cur, extents, keys, vals, counts_out, g)
                    cur = v
                if m == 1:
                    acc[o] = acc[o] + values[i, 0]
                else:
                    for j in range(m):
                        acc[o * m + j] = acc[o * m + j] + values[i, j]
                cnt[o] += 1
                touched[o >> 6] |= (<uint64_t> 1) << (o & 63)
    finally:
        free(touched)
    return result, g


# ---------------------------------------------------------------------------------------------
# segments: runs of sorted rows

cdef inline void _check_segments(const int64_t[::1] starts, Py_ssize_t n, Py_ssize_t g, Py_ssize_t m,
                                 Py_ssize_t out_rows, Py_ssize_t out_m) except *:
    if starts.shape[0] != g + 1 or out_rows != g or out_m != m:
        raise ValueError("shape mismatch: starts must hold g + 1 offsets and out (g, m)")
    cdef Py_ssize_t s
    if g > 0 and (starts[0] != 0 or starts[g] != n):
        raise ValueError("starts must begin at 0 and end at n")
    if g == 0 and n != 0:
        raise ValueError("rows but no segments")
    for s in range(g):
        if starts[s] >= starts[s + 1]:
            raise ValueError("segments must be non-empty and increasing")


def segment_arith(const number_t[:, ::1] values, const int64_t[::1] starts, number_t[:, ::1] out,
                  bint multiply):
    """out[s] = sum (or product) of values[starts[s]:starts[s+1]], in the value type (integers
    wrap)."""
    cdef Py_ssize_t n = values.shape[0], m = values.shape[1], g = starts.shape[0] - 1, s, i, j
    cdef number_t acc
    _check_segments(starts, n, g, m, out.shape[0], out.shape[1])
    with nogil:
        for s in range(g):
            for j in range(m):
                acc = values[starts[s], j]
                for i in range(starts[s] + 1, starts[s + 1]):
                    acc = acc * values[i, j] if multiply else acc + values[i, j]
                out[s, j] = acc


def segment_sum(values, starts, out):
    segment_arith(values, starts, out, False)


def segment_prod(values, starts, out):
    segment_arith(values, starts, out, True)


cdef inline bint _replaces(real_t v, real_t acc, bint want_max) noexcept nogil:
    """Whether v takes acc's place in a running max (or min); a NaN wins, as in np.maximum."""
    if _isnan(acc):
        return False
    return _isnan(v) or (v > acc if want_max else v < acc)


def segment_extreme(const real_t[:, ::1] values, const int64_t[::1] starts, real_t[:, ::1] out,
                    bint want_max):
    """out[s] = max (or min) of values[starts[s]:starts[s+1]]; a NaN wins."""
    cdef Py_ssize_t n = values.shape[0], m = values.shape[1], g = starts.shape[0] - 1, s, i, j
    cdef real_t acc, v
    _check_segments(starts, n, g, m, out.shape[0], out.shape[1])
    with nogil:
        for s in range(g):
            for j in range(m):
                acc = values[starts[s], j]
                for i in range(starts[s] + 1, starts[s + 1]):
                    v = values[i, j]
                    if _replaces(v, acc, want_max):
                        acc = v
                out[s, j] = acc


def segment_max(values, starts, out):
    segment_extreme(values, starts, out, True)


def segment_min(values, starts, out):
    segment_extreme(values, starts, out, False)


def segment_softmax(const float_t[:, ::1] values, const int64_t[::1] starts, float_t[:, ::1] out):
    """Softmax of each column over each segment: exp(v - max) / sum(exp(v - max))."""
    cdef Py_ssize_t n = values.shape[0], m = values.shape[1], g = starts.shape[0] - 1, s, i, j
    cdef float_t top, total, e
    if out.shape[0] != n:
        raise ValueError("out must have one row per value row")
    _check_segments(starts, n, g, m, g, out.shape[1])
    with nogil:
        for s in range(g):
            for j in range(m):
                top = values[starts[s], j]
                for i in range(starts[s] + 1, starts[s + 1]):
                    if values[i, j] > top or values[i, j] != values[i, j]:
                        if top == top:
                            top = values[i, j]
                total = 0
                for i in range(starts[s], starts[s + 1]):
                    if float_t is float:
                        e = expf(values[i, j] - top)
                    else:
                        e = exp(values[i, j] - top)
                    out[i, j] = e
                    total = total + e
                for i in range(starts[s], starts[s + 1]):
                    out[i, j] = out[i, j] / total


# ---------------------------------------------------------------------------------------------
# cells: rows in any order, accumulated into slots

cdef inline void _check_cells(Py_ssize_t n, Py_ssize_t values_rows, Py_ssize_t m, Py_ssize_t acc_m,
                              Py_ssize_t acc_rows, Py_ssize_t counts_rows) except *:
    if values_rows != n or acc_m != m or counts_rows != acc_rows:
        raise ValueError("shape mismatch: values (n, m), acc (c, m) and counts (c,) expected")


def scatter_sum(const int64_t[::1] cells, int64_t base, const number_t[:, ::1] values, number_t[:, ::1] acc,
                int64_t[::1] counts):
    """acc[cells[i] - base] += values[i]; counts[cells[i] - base] += 1.  acc starts at zero."""
    cdef Py_ssize_t n = cells.shape[0], m = values.shape[1], c = acc.shape[0], i
    cdef int64_t o
    cdef bint bad = False
    _check_cells(n, values.shape[0], m, acc.shape[1], c, counts.shape[0])
    with nogil:
        for i in range(n):
            o = cells[i] - base
            if o < 0 or o >= c:
                bad = True
                break
            _add_row(values, i, acc, o, counts)
    if bad:
        raise IndexError("a cell is outside the accumulator")


def scatter_prod(const int64_t[::1] cells, int64_t base, const number_t[:, ::1] values, number_t[:, ::1] acc,
                 int64_t[::1] counts):
    """acc[cells[i] - base] *= values[i] (the first row of a cell sets it); counts as scatter_sum."""
    cdef Py_ssize_t n = cells.shape[0], m = values.shape[1], c = acc.shape[0], i, j
    cdef int64_t o
    cdef bint bad = False
    _check_cells(n, values.shape[0], m, acc.shape[1], c, counts.shape[0])
    with nogil:
        for i in range(n):
            o = cells[i] - base
            if o < 0 or o >= c:
                bad = True
                break
            for j in range(m):
                if counts[o] == 0:
                    acc[o, j] = values[i, j]
                else:
                    acc[o, j] = acc[o, j] * values[i, j]
            counts[o] += 1
    if bad:
        raise IndexError("a cell is outside the accumulator")


def scatter_extreme(const int64_t[::1] cells, int64_t base, const real_t[:, ::1] values, real_t[:, ::1] acc,
                    int64_t[::1] counts, bint want_max):
    """acc[cell] = max (or min) of the rows reaching a cell (a NaN wins); counts as scatter_sum."""
    cdef Py_ssize_t n = cells.shape[0], m = values.shape[1], c = acc.shape[0], i, j
    cdef int64_t o
    cdef real_t v
    cdef bint bad = False
    _check_cells(n, values.shape[0], m, acc.shape[1], c, counts.shape[0])
    with nogil:
        for i in range(n):
            o = cells[i] - base
            if o < 0 or o >= c:
                bad = True
                break
            for j in range(m):
                v = values[i, j]
                if counts[o] == 0 or _replaces(v, acc[o, j], want_max):
                    acc[o, j] = v
            counts[o] += 1
    if bad:
        raise IndexError("a cell is outside the accumulator")


def scatter_max(cells, base, values, acc, counts):
    scatter_extreme(cells, base, values, acc, counts, True)


def scatter_min(cells, base, values, acc, counts):
    scatter_extreme(cells, base, values, acc, counts, False)
