"""Compiled kernels for the arithmetic commands: arrays in, arrays out, the GIL released in every loop.

- ``merge_join`` / ``merge_join_bytes``: the union of two strictly increasing key arrays (add, maximum,
  minimum), on packed uint64 keys or on the big-endian byte keys of wide shapes;
- ``merge_add``: add's merge join in one pass: the union of the packed keys, the sums, and the union's
  keys unpacked into index columns with their maxima (three passes over every output row before: the
  unpacking and the maxima took a fifth of the merging thread's time), branch-free while both
  operands have keys left;
- ``split_rows``: a stable two-way partition of COO entries by row, so that two threads can work on
  disjoint output rows;
- ``spmm_coo``: out[row] += value * dense[col] for COO entries (sparse x dense matmul);
- ``spgemm_rows``: sparse x sparse products of row-grouped COO entries times a CSR matrix;
- ``sampled_dot``: the dot products of chosen rows of two row-major matrices (sampled matmul, SDDMM).

Every row, column and offset a kernel indexes by is checked first (IndexError or ValueError), though the
callers check the entries against the shapes already.  tests/references/linalg.py holds the NumPy
equivalent of each function, used as the test oracle (tests/test_linalg_kernels.py).
"""

from libc.stdint cimport int64_t, uint8_t, uint64_t

from ._guards cimport outside
from ._types cimport value_t
from libc.stdlib cimport qsort
from libc.string cimport memcmp

ctypedef fused real_t:
    float
    double

cdef extern from *:
    """
    #include <stdint.h>
    /* A hint to fetch the cache lines of [p, p + nbytes) (at most four) ahead of their use; a
       no-op for compilers without __builtin_prefetch.  A prefetch never faults. */
    static inline void sptool_prefetch(const void *p, Py_ssize_t nbytes, int for_write) {
    #if defined(__GNUC__) || defined(__clang__)
        const char *at = (const char *) ((uintptr_t) p & ~(uintptr_t) 63);
        const char *end = (const char *) p + nbytes;
        int lines = 0;
        for (; at < end && lines < 4; at += 64, lines++) {
            if (for_write) __builtin_prefetch(at, 1, 1); else __builtin_prefetch(at, 0, 1);
        }
    #else
        (void) p; (void) nbytes; (void) for_write;
    #endif
    }
    """
    void sptool_prefetch(const void *p, Py_ssize_t nbytes, int for_write) noexcept nogil

# How many entries ahead spmm_coo asks for the rows it will read and write: B's rows are read at
# random, each a miss to memory that the prefetch overlaps with the work on the entries before.
cdef Py_ssize_t SPMM_AHEAD = 16


# ---------------------------------------------------------------------------------------------
# merge join

def merge_join(const uint64_t[::1] a, const uint64_t[::1] b, int64_t[::1] ia, int64_t[::1] ib,
               uint64_t[::1] union):
    """The sorted union of two strictly increasing key arrays.

    Output row t is the key union[t], found at a[ia[t]] and/or b[ib[t]]; -1 marks the side that
    lacks it.  ``ia``, ``ib`` and ``union`` must hold len(a) + len(b) entries; returns the number
    of output rows.
    """
    cdef Py_ssize_t na = a.shape[0], nb = b.shape[0], i = 0, j = 0, t = 0
    if ia.shape[0] < na + nb or ib.shape[0] < na + nb or union.shape[0] < na + nb:
        raise ValueError("merge_join: output arrays too short")
    with nogil:
        while i < na and j < nb:
            if a[i] < b[j]:
                ia[t] = i
                ib[t] = -1
                union[t] = a[i]
                i += 1
            elif b[j] < a[i]:
                ia[t] = -1
                ib[t] = j
                union[t] = b[j]
                j += 1
            else:
                ia[t] = i
                ib[t] = j
                union[t] = a[i]
                i += 1
                j += 1
            t += 1
        while i < na:
            ia[t] = i
            ib[t] = -1
            union[t] = a[i]
            i += 1
            t += 1
        while j < nb:
            ia[t] = -1
            ib[t] = j
            union[t] = b[j]
            j += 1
            t += 1
    return t


cdef inline void _unpack(uint64_t code, Py_ssize_t t, Py_ssize_t K, const int64_t *shifts,
                         const uint64_t *masks, int64_t[:, :] keys, int64_t *maxes) noexcept nogil:
    cdef Py_ssize_t d
    cdef int64_t x
    for d in range(K):
        x = <int64_t> ((code >> shifts[d]) & masks[d])
        keys[d, t] = x
        if x > maxes[d]:
            maxes[d] = x


cdef Py_ssize_t _merge_add_both(const uint64_t *a, const uint64_t *b, const value_t *va, const value_t *vb,
                                Py_ssize_t na, Py_ssize_t nb, value_t fa, value_t fb, bint fa_zero, bint fb_zero,
                                Py_ssize_t *pi, Py_ssize_t *pj, Py_ssize_t cap, Py_ssize_t K, const int64_t *sh,
                                const uint64_t *masks, int64_t *keys, Py_ssize_t stride, value_t *out,
                                int64_t *mx) noexcept nogil:
    """merge_add's rows while both operands have keys left, without a branch on the keys' order
    (on keys of two random operands a branch mispredicts half the time): each row's key, value
    and advances are picked arithmetically.  Row t of dimension d is keys[d * stride + t].
    Returns the rows written; *pi and *pj are advanced past the rows consumed."""
    cdef Py_ssize_t i = pi[0], j = pj[0], t = 0, d
    cdef uint64_t ka, kb, code
    cdef int ta, tb
    cdef int64_t x
    cdef value_t pick[3]
    while t < cap and i < na and j < nb:
        ka = a[i]
        kb = b[j]
        ta = ka <= kb
        tb = kb <= ka
        code = kb ^ ((ka ^ kb) & (<uint64_t> 0 - <uint64_t> ta))
        # The value of each case, chosen by index: B's alone, A's alone, both.
        pick[0] = vb[j] if fa_zero else fa + vb[j]
        pick[1] = va[i] if fb_zero else va[i] + fb
        pick[2] = va[i] + vb[j]
        out[t] = pick[ta + (ta & tb)]
        for d in range(K):
            x = <int64_t> ((code >> sh[d]) & masks[d])
            keys[d * stride + t] = x
            mx[d] = x if x > mx[d] else mx[d]
        i += ta
        j += tb
        t += 1
    pi[0], pj[0] = i, j
    return t


def merge_add(const uint64_t[::1] a, const uint64_t[::1] b, const value_t[::1] va, const value_t[::1] vb,
              value_t fa, value_t fb, bint fa_zero, bint fb_zero, const int64_t[::1] shifts,
              const int64_t[::1] widths, int64_t[:, :] keys, value_t[::1] out, int64_t[::1] maxes,
              int64_t[::1] pos):
    """The union of two strictly increasing packed key arrays with add's sums, the keys unpacked,
    from a[pos[0]:] and b[pos[1]:] until ``out`` is full or both are used up.

    A key in both operands gets va + vb; a key in one gets its value plus the other operand's
    fill, or its value as it is when that fill is zero (``fa_zero``/``fb_zero``: TensorFlow copies
    one-sided entries, so -0.0 stays -0.0).  Output row t's index along dimension d is
    keys[d, t] = (key >> shifts[d]) & (2^widths[d] - 1), dimensions in row-major order.  ``keys``
    (K rows, each contiguous: a slice of the columns of a larger array will do) holds as many rows
    as ``out``; ``maxes`` (K) gets the largest index of each dimension among the output rows, -1
    when there are none; ``pos`` is advanced past the rows consumed.  Returns the number of output
    rows."""
    cdef Py_ssize_t na = a.shape[0], nb = b.shape[0], K = keys.shape[0], cap = out.shape[0], t = 0, d
    cdef Py_ssize_t i, j, word = sizeof(int64_t)
    # Signed: a view of rows in reverse order steps back from one to the next.
    cdef Py_ssize_t stride = keys.strides[0] // word
    cdef uint64_t code
    cdef int64_t sh[64]
    cdef uint64_t masks[64]
    cdef int64_t mx[64]
    if va.shape[0] != na or vb.shape[0] != nb:
        raise ValueError("merge_add: one value per key")
    if keys.shape[1] < cap:
        raise ValueError("merge_add: fewer key rows than output values")
    if (cap > 1 and keys.strides[1] != word) or keys.strides[0] % word:
        raise ValueError("merge_add: each dimension's keys must be contiguous")
    if shifts.shape[0] != K or widths.shape[0] != K or maxes.shape[0] != K or K > 64:
        raise ValueError("merge_add: one shift, width and maximum per dimension")
    if pos.shape[0] != 2 or not (0 <= pos[0] <= na and 0 <= pos[1] <= nb):
        raise ValueError("merge_add: pos must hold a start in a and one in b")
    i, j = pos[0], pos[1]
    for d in range(K):
        if not (0 <= widths[d] <= 64 and 0 <= shifts[d] < 64):
            raise ValueError("merge_add: a shift or width outside 0..64")
        sh[d] = shifts[d]
        masks[d] = (<uint64_t> -1) if widths[d] >= 64 else ((<uint64_t> 1 << widths[d]) - 1)
        mx[d] = -1
    with nogil:
        if na and nb and cap and K:
            t = _merge_add_both(&a[0], &b[0], &va[0], &vb[0], na, nb, fa, fb, fa_zero, fb_zero, &i, &j, cap, K,
                                sh, masks, &keys[0, 0], stride, &out[0], mx)
        while t < cap and (i < na or j < nb):
            if j >= nb or (i < na and a[i] < b[j]):
                code = a[i]
                out[t] = va[i] if fb_zero else va[i] + fb
                i += 1
            elif i >= na or b[j] < a[i]:
                code = b[j]
                out[t] = vb[j] if fa_zero else fa + vb[j]
                j += 1
            else:
                code = a[i]
                out[t] = va[i] + vb[j]
                i += 1
                j += 1
            _unpack(code, t, K, sh, masks, keys, mx)
            t += 1
    for d in range(K):
        maxes[d] = mx[d]
    pos[0], pos[1] = i, j
    return t


def merge_join_bytes(const uint8_t[:, ::1] a, const uint8_t[:, ::1] b, int64_t[::1] ia, int64_t[::1] ib):
    """merge_join for keys given as rows of bytes compared lexicographically (big-endian index columns)."""
    cdef Py_ssize_t na = a.shape[0], nb = b.shape[0], w = a.shape[1], i = 0, j = 0, t = 0
    cdef int c
    if ia.shape[0] < na + nb or ib.shape[0] < na + nb:
        raise ValueError("merge_join_bytes: output arrays too short")
    if na and nb and b.shape[1] != w:
        raise ValueError("merge_join_bytes: key widths differ")
    with nogil:
        while i < na and j < nb:
            c = memcmp(&a[i, 0], &b[j, 0], w) if w else 0
            if c < 0:
                ia[t] = i
                ib[t] = -1
                i += 1
            elif c > 0:
                ia[t] = -1
                ib[t] = j
                j += 1
            else:
                ia[t] = i
                ib[t] = j
                i += 1
                j += 1
            t += 1
        while i < na:
            ia[t] = i
            ib[t] = -1
            i += 1
            t += 1
        while j < nb:
            ia[t] = -1
            ib[t] = j
            j += 1
            t += 1
    return t


# ---------------------------------------------------------------------------------------------
# sparse x dense

def split_rows(const int64_t[::1] rows, const int64_t[::1] cols, const value_t[::1] vals, int64_t pivot,
               int64_t[::1] out_rows, int64_t[::1] out_cols, value_t[::1] out_vals):
    """Stable partition: entries with row < pivot first, then the others, each in input order.

    Returns how many entries have row < pivot.
    """
    cdef Py_ssize_t n = rows.shape[0], i, lo = 0, hi
    if cols.shape[0] != n or vals.shape[0] != n or out_rows.shape[0] < n or out_cols.shape[0] < n \
            or out_vals.shape[0] < n:
        raise ValueError("shape mismatch in split_rows")
    with nogil:
        for i in range(n):
            if rows[i] < pivot:
                lo += 1
        hi = lo
        lo = 0
        for i in range(n):
            if rows[i] < pivot:
                out_rows[lo] = rows[i]
                out_cols[lo] = cols[i]
                out_vals[lo] = vals[i]
                lo += 1
            else:
                out_rows[hi] = rows[i]
                out_cols[hi] = cols[i]
                out_vals[hi] = vals[i]
                hi += 1
    return lo


def spmm_coo(const int64_t[::1] rows, const int64_t[::1] cols, const value_t[::1] vals,
             const value_t[:, ::1] dense, value_t[:, ::1] out):
    """out[rows[e], :] += vals[e] * dense[cols[e], :] for every entry e (duplicates accumulate).

    IndexError for a row outside out or a column outside dense (the entries before it are added).
    """
    cdef Py_ssize_t nnz = rows.shape[0], n = dense.shape[1], e, j, bad = -1
    cdef uint64_t n_out = out.shape[0], n_dense = dense.shape[0]
    cdef value_t v
    cdef const value_t* src
    cdef value_t* dst
    cdef const char* dense_at
    cdef char* out_at
    cdef Py_ssize_t row_bytes = n * sizeof(value_t)
    if cols.shape[0] != nnz or vals.shape[0] != nnz or out.shape[1] != n:
        raise ValueError("shape mismatch in spmm_coo")
    if n == 0 or nnz == 0 or n_out == 0 or n_dense == 0:
        _check_entries("spmm_coo", rows, n_out, cols, n_dense)
        return
    # Both C-contiguous (the memoryviews' type says so): row r begins r * row_bytes in.
    dense_at = <const char*> &dense[0, 0]
    out_at = <char*> &out[0, 0]
    with nogil:
        if n == 16:
            # The common embedding width: a fixed trip count the compiler unrolls and vectorises.
            for e in range(nnz):
                if <uint64_t> rows[e] >= n_out or <uint64_t> cols[e] >= n_dense:
                    bad = e
                    break
                _prefetch_entry(&rows[0], &cols[0], e + SPMM_AHEAD, nnz, dense_at, n_dense, out_at, n_out,
                                row_bytes)
                v = vals[e]
                src = &dense[cols[e], 0]
                dst = &out[rows[e], 0]
                for j in range(16):
                    dst[j] = dst[j] + v * src[j]
        else:
            for e in range(nnz):
                if <uint64_t> rows[e] >= n_out or <uint64_t> cols[e] >= n_dense:
                    bad = e
                    break
                _prefetch_entry(&rows[0], &cols[0], e + SPMM_AHEAD, nnz, dense_at, n_dense, out_at, n_out,
                                row_bytes)
                v = vals[e]
                src = &dense[cols[e], 0]
                dst = &out[rows[e], 0]
                for j in range(n):
                    dst[j] = dst[j] + v * src[j]
    if bad >= 0:
        _check_entries("spmm_coo", rows[bad:bad + 1], n_out, cols[bad:bad + 1], n_dense, bad)


cdef inline void _prefetch_entry(const int64_t* rows, const int64_t* cols, Py_ssize_t e, Py_ssize_t nnz,
                                 const char* dense, uint64_t n_dense, char* out, uint64_t n_out,
                                 Py_ssize_t row_bytes) noexcept nogil:
    """Ask for the row of ``dense`` that entry e reads and the row of ``out`` it adds to (rows of
    ``row_bytes``), when e is an entry and both rows are inside their matrices (an entry outside
    is the loop's to report when it gets there)."""
    if e >= nnz:
        return
    if <uint64_t> cols[e] < n_dense:
        sptool_prefetch(dense + cols[e] * row_bytes, row_bytes, 0)
    if <uint64_t> rows[e] < n_out:
        sptool_prefetch(out + rows[e] * row_bytes, row_bytes, 1)


cdef int _check_entries(str kernel, const int64_t[::1] rows, uint64_t n_rows, const int64_t[::1] cols,
                        uint64_t n_cols, Py_ssize_t first=0) except -1:
    """IndexError for the first entry whose row is outside [0, n_rows) or column outside [0, n_cols)
    (``first``: the position of rows[0] in the kernel's input)."""
    cdef Py_ssize_t e
    for e in range(rows.shape[0]):
        if <uint64_t> rows[e] >= n_rows:
            raise outside(kernel, "row", first + e, rows[e], n_rows)
        if <uint64_t> cols[e] >= n_cols:
            raise outside(kernel, "column", first + e, cols[e], n_cols)
    return 0


# ---------------------------------------------------------------------------------------------
# sparse x sparse

cdef int _compare_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*> a)[0], y = (<const int64_t*> b)[0]
    return (x > y) - (x < y)


def spgemm_rows(const int64_t[::1] a_rows, const int64_t[::1] a_cols, const value_t[::1] a_vals,
                const int64_t[::1] b_indptr, const int64_t[::1] b_cols, const value_t[::1] b_vals,
                value_t[::1] acc, int64_t[::1] mark, int64_t[::1] touched,
                int64_t[::1] out_rows, int64_t[::1] out_cols, value_t[::1] out_vals):
    """The rows of A @ B for A's entries grouped by row (each row's entries adjacent) and B in CSR.

    Every column j reached by a product A[i, k] * B[k, j] is an output entry (row-major sorted,
    one per (i, j); products that cancel leave an explicit zero).  ``acc`` (n values), ``mark``
    (n, filled with -1, which is no row number) and ``touched`` (n) are scratch; ``mark`` stays
    valid across calls as long as no row number repeats.  The caller sizes the outputs for the
    worst case (per row, min(n, number of products)).  Returns the number of entries written.
    IndexError for a column of A outside B's rows, or an offset or column of B outside its arrays.
    """
    cdef Py_ssize_t nnz = a_rows.shape[0], n = acc.shape[0], e = 0, p, q, nt, t = 0, cap = out_rows.shape[0]
    cdef Py_ssize_t k_rows = b_indptr.shape[0] - 1, nb = b_cols.shape[0], end
    cdef int64_t r, k, j, lo, hi
    cdef value_t v
    if a_cols.shape[0] != nnz or a_vals.shape[0] != nnz or mark.shape[0] != n or touched.shape[0] < n:
        raise ValueError("shape mismatch in spgemm_rows")
    if out_cols.shape[0] < cap or out_vals.shape[0] < cap:
        raise ValueError("spgemm_rows: output arrays differ in length")
    if k_rows < 0 or b_vals.shape[0] != nb:
        raise ValueError("spgemm_rows: B needs an indptr and one value per column")
    with nogil:
        while e < nnz:
            r = a_rows[e]
            if r < 0:
                with gil:
                    raise ValueError(f"spgemm_rows: row {r} at position {e} is negative")
            nt = 0
            while e < nnz and a_rows[e] == r:
                k = a_cols[e]
                v = a_vals[e]
                if <uint64_t> k >= <uint64_t> k_rows:
                    with gil:
                        raise outside("spgemm_rows", "column", e, k, k_rows)
                lo, hi = b_indptr[k], b_indptr[k + 1]
                if lo < hi and (lo < 0 or hi > nb):
                    with gil:
                        raise ValueError(f"spgemm_rows: B's row {k} spans [{lo}, {hi}), outside its {nb} entries")
                for p in range(lo, hi):
                    j = b_cols[p]
                    if <uint64_t> j >= <uint64_t> n:
                        with gil:
                            raise outside("spgemm_rows", "column of B", p, j, n)
                    if mark[j] != r:
                        mark[j] = r
                        touched[nt] = j
                        nt += 1
                        acc[j] = v * b_vals[p]
                    else:
                        acc[j] = acc[j] + v * b_vals[p]
                e += 1
            if t + nt > cap:
                with gil:
                    raise ValueError("spgemm_rows: output arrays too short")
            if nt > n // 8:
                # Dense enough: a scan of the marks is cheaper than sorting the columns.  It finds
                # the nt columns of this row, and more only if the row came before.
                end = t + nt
                for j in range(n):
                    if mark[j] == r:
                        if t == end:
                            with gil:
                                raise ValueError(f"spgemm_rows: row {r} repeats after other rows")
                        out_rows[t] = r
                        out_cols[t] = j
                        out_vals[t] = acc[j]
                        t += 1
            else:
                if nt > 1:
                    qsort(&touched[0], nt, sizeof(int64_t), _compare_int64)
                for q in range(nt):
                    j = touched[q]
                    out_rows[t] = r
                    out_cols[t] = j
                    out_vals[t] = acc[j]
                    t += 1
    return t


# ---------------------------------------------------------------------------------------------
# sampled dense x dense (SDDMM)

def sampled_dot(const int64_t[::1] rows, const int64_t[::1] cols, const real_t[:, ::1] a,
                const real_t[:, ::1] bt, real_t[::1] out):
    """out[e] = sum over t of a[rows[e], t] * bt[cols[e], t]: entry e of A @ B with bt = B^T.

    IndexError for a row outside a or a column outside bt (nothing written then).
    """
    cdef Py_ssize_t n = rows.shape[0], k = a.shape[1], e, t
    cdef const real_t* x
    cdef const real_t* y
    cdef real_t s0, s1, s2, s3
    cdef uint64_t n_a = a.shape[0], n_b = bt.shape[0]
    cdef bint bad = False
    if cols.shape[0] != n or out.shape[0] != n or bt.shape[1] != k:
        raise ValueError("shape mismatch in sampled_dot")
    with nogil:
        # A pass of its own, without a branch (it vectorises): checked inside the products' loop,
        # the loop measured slower.
        for e in range(n):
            bad |= (<uint64_t> rows[e] >= n_a) | (<uint64_t> cols[e] >= n_b)
    if bad:
        _check_entries("sampled_dot", rows, n_a, cols, n_b)
    with nogil:
        for e in range(n):
            x = &a[rows[e], 0] if k else NULL
            y = &bt[cols[e], 0] if k else NULL
            # Four partial sums: independent chains the CPU overlaps (one chain waits on each add).
            s0 = s1 = s2 = s3 = 0
            t = 0
            while t + 4 <= k:
                s0 = s0 + x[t] * y[t]
                s1 = s1 + x[t + 1] * y[t + 1]
                s2 = s2 + x[t + 2] * y[t + 2]
                s3 = s3 + x[t + 3] * y[t + 3]
                t += 4
            while t < k:
                s0 = s0 + x[t] * y[t]
                t += 1
            out[e] = (s0 + s1) + (s2 + s3)
