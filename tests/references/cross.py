"""Plain-Python versions of the kernels in sptool/_cross.pyx, with the same signatures.

Written from the published algorithms (FarmHash's farmhashna::Hash64, TensorFlow's
FingerprintCat64 and its sparse cross's product order) with Python integers reduced modulo
2**64, and loops in the order the sources describe.  Used only as the test oracle
(tests/test_cross_kernels.py); the library always runs the compiled kernels.
"""

from __future__ import annotations

import numpy as np

M64 = (1 << 64) - 1
K0, K1, K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F
INT64_MAX = (1 << 63) - 1


def _fetch(s: bytes, i: int, width: int = 8) -> int:
    return int.from_bytes(s[i:i + width], "little")


def _rot(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & M64


def _mix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & M64
    b ^= b >> 47
    return (b * mul) & M64


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = (_fetch(s, i + 8 * j) for j in range(4))
    a = (a + w) & M64
    b = _rot((b + a + z) & M64, 21)
    c = a
    a = (a + x + y) & M64
    b = (b + _rot(a, 44)) & M64
    return (a + z) & M64, (b + c) & M64


def fingerprint64_bytes(s: bytes) -> int:
    """TensorFlow's Fingerprint64 of a byte string: farmhashna::Hash64."""
    n = len(s)
    if n <= 16:
        if n >= 8:
            mul = K2 + n * 2
            a = (_fetch(s, 0) + K2) & M64
            b = _fetch(s, n - 8)
            c = (_rot(b, 37) * mul + a) & M64
            d = ((_rot(a, 25) + b) * mul) & M64
            return _len16(c, d, mul)
        if n >= 4:
            mul = K2 + n * 2
            return _len16(n + (_fetch(s, 0, 4) << 3), _fetch(s, n - 4, 4), mul)
        if n > 0:
            y = s[0] + (s[n >> 1] << 8)
            z = n + (s[n - 1] << 2)
            return (_mix(((y * K2) ^ (z * K0)) & M64) * K2) & M64
        return K2
    mul = (K2 + n * 2) & M64
    if n <= 32:
        a = (_fetch(s, 0) * K1) & M64
        b = _fetch(s, 8)
        c = (_fetch(s, n - 8) * mul) & M64
        d = (_fetch(s, n - 16) * K2) & M64
        return _len16((_rot((a + b) & M64, 43) + _rot(c, 30) + d) & M64, (a + _rot((b + K2) & M64, 18) + c) & M64, mul)
    if n <= 64:
        a = (_fetch(s, 0) * K2) & M64
        b = _fetch(s, 8)
        c = (_fetch(s, n - 8) * mul) & M64
        d = (_fetch(s, n - 16) * K2) & M64
        y = (_rot((a + b) & M64, 43) + _rot(c, 30) + d) & M64
        z = _len16(y, (a + _rot((b + K2) & M64, 18) + c) & M64, mul)
        e = (_fetch(s, 16) * mul) & M64
        f = _fetch(s, 24)
        g = ((y + _fetch(s, n - 32)) * mul) & M64
        h = ((z + _fetch(s, n - 24)) * mul) & M64
        return _len16((_rot((e + f) & M64, 43) + _rot(g, 30) + h) & M64, (e + _rot((f + a) & M64, 18) + g) & M64, mul)
    seed = 81
    x = seed
    y = (seed * K1 + 113) & M64
    z = (_mix((y * K2 + 113) & M64) * K2) & M64
    v = (0, 0)
    w = (0, 0)
    x = (x * K2 + _fetch(s, 0)) & M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rot((x + y + v[0] + _fetch(s, i + 8)) & M64, 37) * K1) & M64
        y = (_rot((y + v[1] + _fetch(s, i + 48)) & M64, 42) * K1) & M64
        x ^= w[1]
        y = (y + v[0] + _fetch(s, i + 40)) & M64
        z = (_rot((z + w[0]) & M64, 33) * K1) & M64
        v = _weak32(s, i, (v[1] * K1) & M64, (x + w[0]) & M64)
        w = _weak32(s, i + 32, (z + w[1]) & M64, (y + _fetch(s, i + 16)) & M64)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = (K1 + ((z & 0xFF) << 1)) & M64
    i = last64
    w = ((w[0] + ((n - 1) & 63)) & M64, w[1])
    v = ((v[0] + w[0]) & M64, v[1])
    w = ((w[0] + v[0]) & M64, w[1])
    x = (_rot((x + y + v[0] + _fetch(s, i + 8)) & M64, 37) * mul) & M64
    y = (_rot((y + v[1] + _fetch(s, i + 48)) & M64, 42) * mul) & M64
    x ^= (w[1] * 9) & M64
    y = (y + v[0] * 9 + _fetch(s, i + 40)) & M64
    z = (_rot((z + w[0]) & M64, 33) * mul) & M64
    v = _weak32(s, i, (v[1] * mul) & M64, (x + w[0]) & M64)
    w = _weak32(s, i + 32, (z + w[1]) & M64, (y + _fetch(s, i + 16)) & M64)
    z, x = x, z
    return _len16((_len16(v[0], w[0], mul) + _mix(y) * K0 + z) & M64, (_len16(v[1], w[1], mul) + x) & M64, mul)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    kmul = 0xC6A4A7935BD1E995
    result = fp1 ^ kmul
    result ^= (_mix((fp2 * kmul) & M64) * kmul) & M64
    result = (result * kmul) & M64
    result = (_mix(result) * kmul) & M64
    return _mix(result)


def fingerprint64(offsets, data, out):
    raw = bytes(np.asarray(data, dtype=np.uint8))
    for i in range(len(offsets) - 1):
        out[i] = fingerprint64_bytes(raw[int(offsets[i]):int(offsets[i + 1])])


def fingerprint_cat(a, b, out):
    for i in range(len(a)):
        out[i] = fingerprint_cat64(int(a[i]), int(b[i]))


def modulo(a, d, out):
    # Python integers: exact for any 64-bit dividend and divisor.
    for i, v in enumerate(a):
        out[i] = int(v) % int(d)


def cross_counts(ptr, out):
    counts = np.diff(np.asarray(ptr), axis=1)
    for r in range(counts.shape[1]):
        total = 1
        for c in counts[:, r]:
            total *= int(c)
        if total > INT64_MAX:
            return r
        out[r] = total
    return -1


def _crosses(ptr, offsets, g0, g1):
    """(row, position in row, [feature index per input]) of crosses g0..g1, by nested loops in
    TensorFlow's order (the last input fastest)."""
    import itertools

    ptr = np.asarray(ptr)
    g = 0
    for r in range(ptr.shape[1] - 1):
        ranges = [range(int(ptr[i, r]), int(ptr[i, r + 1])) for i in range(ptr.shape[0])]
        for p, combo in enumerate(itertools.product(*ranges)):
            if g0 <= g < g1:
                yield r, p, combo
            g += 1


def cross_hashed(ptr, feats, offsets, g0, g1, hash_key, num_buckets, rows, cols, values, row_ids=None):
    mod = num_buckets if num_buckets > 0 else INT64_MAX
    for k, (r, p, combo) in enumerate(_crosses(ptr, offsets, g0, g1)):
        h = int(hash_key) & M64
        for j in combo:
            h = fingerprint_cat64(h, int(feats[j]))
        rows[k], cols[k], values[k] = r if row_ids is None else row_ids[r], p, h % mod


def cross_positions(ptr, offsets, g0, g1, rows, cols, pos, row_ids=None):
    for k, (r, p, combo) in enumerate(_crosses(ptr, offsets, g0, g1)):
        rows[k], cols[k] = r if row_ids is None else row_ids[r], p
        pos[:, k] = combo
