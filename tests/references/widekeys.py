"""Plain-Python versions of the compiled wide-key kernels (sptool/_widekeys.pyx), with the same
signatures: keys as Python integers, turned into and out of (n, 2) arrays of big-endian 64-bit
words (the high word first).

Used only as the test oracle (tests/test_widekeys_kernels.py); the library always runs the
compiled kernels.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1


def ints_of(words: np.ndarray) -> list[int]:
    """The 128-bit integers held by (n, 2) big-endian words."""
    raw = np.ascontiguousarray(words).view(">u8").reshape(-1, 2)
    return [(int(h) << 64) | int(lo) for h, lo in raw]


def words_of(ints) -> np.ndarray:
    """(n, 2) uint64 words (each big-endian in memory) holding 128-bit integers."""
    raw = np.array([[(v >> 64) & MASK64, v & MASK64] for v in ints], dtype=">u8").reshape(-1, 2)
    return raw.view(np.uint64)


def _store(out: np.ndarray, ints) -> None:
    out[:] = words_of(list(ints)).reshape(out.shape)


def pack_keys(keys, order, shifts, widths, out):
    keys = np.asarray(keys)
    ints = []
    for i in range(keys.shape[1]):
        v = 0
        for d, s, w in zip(order, shifts, widths):
            if w:
                v |= int(keys[d, i]) << int(s)
        ints.append(v)
    _store(out, ints)


def or_shifted(col, shift, out, first):
    base = [0] * len(col) if first else ints_of(out)
    _store(out, [b | (int(c) << shift) for b, c in zip(base, col)])


def unpack_keys(packed, order, shifts, widths, out):
    for i, v in enumerate(ints_of(packed)):
        for d, s, w in zip(order, shifts, widths):
            out[d, i] = (v >> int(s)) & ((1 << int(w)) - 1)


def radix_argsort(keys, perm, sorted_keys):
    ints = ints_of(keys)
    order = sorted(range(len(ints)), key=lambda i: ints[i])  # Python's sort is stable
    perm[:] = order
    _store(sorted_keys, [ints[i] for i in order])


def bucket_counts(keys, shift, counts):
    for v in ints_of(keys):
        b = v >> shift
        if b >= len(counts):
            raise ValueError("a key falls outside the buckets in bucket_counts")
        counts[b] += 1


def scatter_rows(keys, values, shift, nxt, out, out_values):
    ints = ints_of(keys)
    placed = ints_of(out)
    for i, v in enumerate(ints):
        b = v >> shift
        if b >= len(nxt) or not 0 <= nxt[b] < len(out):
            raise ValueError("a key falls outside the buckets or their room in scatter_rows")
        at = nxt[b]
        placed[at] = v
        out_values[at] = values[i]
        nxt[b] = at + 1
    _store(out, placed)


def merge_runs(keys, lo, hi, out_keys, out_perm, out_start):
    ints = ints_of(keys)
    rows = [(ints[p], r, p) for r in range(len(lo)) for p in range(lo[r], hi[r])]
    rows.sort(key=lambda t: (t[0], t[1]))  # ties to the lower run; within a run, stable
    merged = ints_of(out_keys)
    for o, (v, _, p) in enumerate(rows, start=out_start):
        merged[o] = v
        out_perm[o] = p
    _store(out_keys, merged)


def merge_add(a, b, va, vb, fa, fb, fa_zero, fb_zero, shifts, widths, keys, out, maxes, pos):
    ka, kb = ints_of(a), ints_of(b)
    i, j, t = int(pos[0]), int(pos[1]), 0
    maxes[:] = -1
    while t < len(out) and (i < len(ka) or j < len(kb)):
        if j >= len(kb) or (i < len(ka) and ka[i] < kb[j]):
            code, value = ka[i], (va[i] if fb_zero else va[i] + fb)
            i += 1
        elif i >= len(ka) or kb[j] < ka[i]:
            code, value = kb[j], (vb[j] if fa_zero else fa + vb[j])
            j += 1
        else:
            code, value = ka[i], va[i] + vb[j]
            i += 1
            j += 1
        out[t] = value
        for d, (s, w) in enumerate(zip(shifts, widths)):
            keys[d, t] = (code >> int(s)) & ((1 << int(w)) - 1)
            maxes[d] = max(maxes[d], keys[d, t])
        t += 1
    pos[0], pos[1] = i, j
    return t


def relinearize(keys, old_shape, new_shape, out):
    for i in range(np.asarray(keys).shape[1]):
        lin = 0
        for k, extent in enumerate(old_shape):
            lin = lin * int(extent) + int(keys[k, i])
        for k in range(len(new_shape) - 1, 0, -1):
            lin, out[k, i] = divmod(lin, int(new_shape[k]))
        out[0, i] = lin
