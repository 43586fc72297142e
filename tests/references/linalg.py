"""Plain NumPy versions of the kernels in sptool/_linalg.pyx, with the same signatures.

Used only as the test oracle (tests/test_linalg_kernels.py); the library always runs the compiled
kernels.
"""

from __future__ import annotations

import numpy as np


def merge_join(a, b, ia, ib, union) -> int:
    a, b = np.asarray(a), np.asarray(b)
    keys = np.union1d(a, b)
    pa_ = np.searchsorted(a, keys)
    pb = np.searchsorted(b, keys)
    in_a = (pa_ < len(a)) & (a[np.minimum(pa_, max(len(a) - 1, 0))] == keys) if len(a) else np.zeros(len(keys), bool)
    in_b = (pb < len(b)) & (b[np.minimum(pb, max(len(b) - 1, 0))] == keys) if len(b) else np.zeros(len(keys), bool)
    n = len(keys)
    ia[:n] = np.where(in_a, pa_, -1)
    ib[:n] = np.where(in_b, pb, -1)
    union[:n] = keys
    return n


def merge_add(a, b, va, vb, fa, fb, fa_zero, fb_zero, shifts, widths, keys, out, maxes, pos) -> int:
    a, b = np.asarray(a, np.uint64), np.asarray(b, np.uint64)
    i, j = int(pos[0]), int(pos[1])
    a, b, va, vb = a[i:], b[j:], np.asarray(va)[i:], np.asarray(vb)[j:]
    union = np.union1d(a, b)[:len(out)]
    n = len(union)
    in_a, in_b = np.isin(union, a), np.isin(union, b)
    ga = np.full(n, fa, dtype=out.dtype)
    gb = np.full(n, fb, dtype=out.dtype)
    ga[in_a] = va[:in_a.sum()]
    gb[in_b] = vb[:in_b.sum()]
    with np.errstate(all="ignore"):
        s = ga + gb
    if fb_zero:
        s = np.where(in_b, s, ga)
    if fa_zero:
        s = np.where(in_a, s, gb)
    out[:n] = s
    for d, (shift, width) in enumerate(zip(shifts, widths)):
        mask = np.uint64((1 << int(width)) - 1) if width < 64 else np.uint64(2**64 - 1)
        keys[d, :n] = ((union >> np.uint64(shift)) & mask).astype(np.int64)
        maxes[d] = keys[d, :n].max() if n else -1
    pos[0], pos[1] = i + int(in_a.sum()), j + int(in_b.sum())
    return n


def merge_join_bytes(a, b, ia, ib) -> int:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    w = a.shape[1] if a.ndim == 2 else b.shape[1]
    # Lexicographic byte order is the order of the keys as Python bytes.
    ka = [bytes(r) for r in a.reshape(-1, w)]
    kb = [bytes(r) for r in b.reshape(-1, w)]
    da, db = {k: i for i, k in enumerate(ka)}, {k: i for i, k in enumerate(kb)}
    union = sorted(set(ka) | set(kb))
    for t, k in enumerate(union):
        ia[t] = da.get(k, -1)
        ib[t] = db.get(k, -1)
    return len(union)


def split_rows(rows, cols, vals, pivot, out_rows, out_cols, out_vals) -> int:
    rows = np.asarray(rows)
    low = rows < pivot
    perm = np.concatenate([np.flatnonzero(low), np.flatnonzero(~low)])
    n = len(rows)
    out_rows[:n] = rows[perm]
    out_cols[:n] = np.asarray(cols)[perm]
    out_vals[:n] = np.asarray(vals)[perm]
    return int(low.sum())


def spmm_coo(rows, cols, vals, dense, out) -> None:
    np.add.at(out, np.asarray(rows), np.asarray(vals)[:, None] * np.asarray(dense)[np.asarray(cols)])


def spgemm_rows(a_rows, a_cols, a_vals, b_indptr, b_cols, b_vals, acc, mark, touched, out_rows, out_cols,
                out_vals) -> int:
    """Expand every product, sort by (row, column), sum runs: no accumulator, no CSR walk."""
    a_rows, a_cols, a_vals = np.asarray(a_rows), np.asarray(a_cols), np.asarray(a_vals)
    b_indptr = np.asarray(b_indptr)
    lens = b_indptr[a_cols + 1] - b_indptr[a_cols]
    entry = np.repeat(np.arange(len(a_rows)), lens)
    pos = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(b_indptr[a_cols], lens)
    r, c = a_rows[entry], np.asarray(b_cols)[pos]
    v = a_vals[entry] * np.asarray(b_vals)[pos]
    order = np.lexsort((c, r))
    r, c, v = r[order], c[order], v[order]
    if not len(r):
        return 0
    start = np.concatenate([[0], np.flatnonzero((r[1:] != r[:-1]) | (c[1:] != c[:-1])) + 1])
    n = len(start)
    out_rows[:n] = r[start]
    out_cols[:n] = c[start]
    out_vals[:n] = np.add.reduceat(v, start)
    return n


def sampled_dot(rows, cols, a, bt, out) -> None:
    out[:] = np.einsum("ij,ij->i", a[rows], bt[cols])
