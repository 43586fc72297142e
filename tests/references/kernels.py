"""Plain NumPy versions of the compiled kernels, with the same signatures.

Used only as the test oracle (tests/test_kernels.py); the library always runs the compiled
kernels, and a broken build fails at import instead of falling back to these.
"""

from __future__ import annotations

import numpy as np

ORDER_OK, OUT_OF_ORDER, REPEATED = 0, 1, 2


def first_out_of_bounds(keys, shape):
    keys = np.asarray(keys)
    bad = (keys < 0) | (keys >= np.asarray(shape)[:, None])
    rows = np.flatnonzero(bad.any(axis=0))
    if not len(rows):
        return -1, -1
    row = int(rows[0])
    return row, int(np.flatnonzero(bad[:, row])[0])


def first_order_violation(keys, order, check_repeats, prev=None):
    keys = np.asarray(keys)
    order = list(order)
    if not order or keys.shape[1] == 0:
        return -1, ORDER_OK
    if prev is not None:
        keys = np.concatenate([np.asarray(prev), keys], axis=1)
    sub = keys[order]
    for i in range(1, sub.shape[1]):
        a, b = tuple(sub[:, i - 1]), tuple(sub[:, i])
        if a > b or (a == b and check_repeats):
            return i - (1 if prev is not None else 0), OUT_OF_ORDER if a > b else REPEATED
    return -1, ORDER_OK


def linear_offsets(keys, shape, out):
    keys = np.asarray(keys)
    out[:] = np.ravel_multi_index(tuple(keys), tuple(int(s) for s in shape)) if len(keys) else 0


def scatter_add(offsets, values, out):
    np.add.at(out, offsets, values)


def scatter_or(offsets, values, out):
    np.bitwise_or.at(out, offsets, (np.asarray(values) != 0).astype(out.dtype))


def column_minmax(col):
    col = np.asarray(col)
    return int(col.min()), int(col.max())


# -- sort keys ------------------------------------------------------------------------------------

def pack_keys(keys, order, shifts, out):
    k = np.asarray(keys)[np.asarray(order)].astype(np.uint64)
    out[:] = np.bitwise_or.reduce(k << np.asarray(shifts, dtype=np.uint64)[:, None], axis=0) if len(order) else 0


def or_shifted(col, shift, out, first, limit):
    """out (|)= col << shift; whether every value lies in [0, limit)."""
    shifted = col.astype(np.uint64) << np.uint64(shift)
    out[:] = shifted if first else out | shifted
    return bool(((col >= 0) & (col.astype(np.uint64) < np.uint64(limit))).all())


def unpack_keys(packed, order, shifts, widths, out):
    for j, d in enumerate(order):
        mask = (np.uint64(1) << np.uint64(widths[j])) - np.uint64(1)
        out[d] = (np.asarray(packed) >> np.uint64(shifts[j])) & mask


def radix_argsort(keys, perm, sorted_keys):
    perm[:] = np.argsort(keys, kind="stable")
    sorted_keys[:] = np.asarray(keys)[perm]


def bucket_counts(keys, shift, counts):
    b = np.asarray(keys) >> np.uint64(shift)
    if len(b) and int(b.max()) >= len(counts):
        raise ValueError("a key falls outside the buckets")
    counts += np.bincount(b.astype(np.int64), minlength=len(counts))


def scatter_rows(keys, values, shift, pos_bits, nxt, out, out_values):
    keys = np.asarray(keys)
    b = (keys >> np.uint64(shift)).astype(np.int64)
    for i in np.argsort(b, kind="stable"):  # bucket by bucket, input order within one
        at = nxt[b[i]]
        out[at] = ((int(keys[i]) << pos_bits) | int(at)) & ((1 << 64) - 1)
        out_values[at] = values[i]
        nxt[b[i]] += 1


def merge_runs(keys, lo, hi, out_keys, out_perm, out_start):
    pos = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)] or [np.zeros(0, np.int64)]).astype(np.int64)
    run = np.concatenate([np.full(b - a, r) for r, (a, b) in enumerate(zip(lo, hi))] or [np.zeros(0, np.int64)])
    ordered = pos[np.lexsort((run, np.asarray(keys)[pos]))]  # by key, then by run (stable)
    out_keys[out_start:out_start + len(pos)] = np.asarray(keys)[ordered]
    out_perm[out_start:out_start + len(pos)] = ordered
