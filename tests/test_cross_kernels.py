"""The compiled cross kernels (sptool/_cross.pyx) against FarmHash's own published test vectors and
against their plain-Python reference (tests/references/cross.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pytest
from references import cross as ref

from sptool import _cross

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "farmhash")


def farmhash_test_buffer(n: int) -> bytes:
    """farmhash.cc's Setup(): the bytes its self-test hashes (tests/data/farmhash/README.md)."""
    m64 = (1 << 64) - 1
    k0 = 0xC3A5C85C97CB3127
    a, b = 9, 777
    out = bytearray(n)
    for i in range(n):
        a = (a + b) & m64
        b = (b + a) & m64
        a = ((a ^ (a >> 41)) * k0) & m64
        b = (((b ^ (b >> 41)) * k0) + i) & m64
        out[i] = (b >> 37) & 0xFF
    return bytes(out)


@pytest.fixture(scope="module")
def farmhash_cases():
    with open(os.path.join(DATA, "fingerprint64.json")) as f:
        cases = json.load(f)
    return cases, farmhash_test_buffer(max(o + n for o, n, _ in cases))


def test_fingerprint64_matches_farmhash_vectors(farmhash_cases):
    cases, data = farmhash_cases
    strings = [data[o:o + n] for o, n, _ in cases]
    arr = pa.array(strings, type=pa.binary())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[: len(arr) + 1]
    blob = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    got = np.empty(len(cases), dtype=np.uint64)
    _cross.fingerprint64(offsets, blob, got)
    want = np.array([h for _, _, h in cases], dtype=np.uint64)
    assert sorted({n for _, n, _ in cases})[:3] == [0, 1, 2] and max(n for _, n, _ in cases) > 64 * 100
    np.testing.assert_array_equal(got, want)
    # The reference is checked against the same vectors (the short ones: it is slow).
    short = [(o, n, h) for o, n, h in cases if n <= 300]
    assert all(ref.fingerprint64_bytes(data[o:o + n]) == h for o, n, h in short)


def test_fingerprint64_int64_offsets_and_slices(rng):
    words = ["", "a", "ab", "abc", "abcd", "x" * 16, "y" * 17, "z" * 33, "w" * 65, "é" * 40, "naïve"]
    arr = pa.array(words, type=pa.large_string()).slice(2)  # a sliced array: offsets start mid-buffer
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    blob = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    got, want = np.empty(len(arr), np.uint64), np.empty(len(arr), np.uint64)
    _cross.fingerprint64(offsets, blob, got)
    ref.fingerprint64(offsets, blob, want)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="outside"):
        _cross.fingerprint64(np.array([0, 99], np.int64), np.zeros(3, np.uint8), np.empty(1, np.uint64))


def test_fingerprint_cat(rng):
    a = rng.integers(0, 2**63, size=200, dtype=np.int64).view(np.uint64) * np.uint64(3)
    b = rng.integers(0, 2**63, size=200, dtype=np.int64).view(np.uint64)
    got, want = np.empty(200, np.uint64), np.empty(200, np.uint64)
    _cross.fingerprint_cat(a, b, got)
    ref.fingerprint_cat(a, b, want)
    np.testing.assert_array_equal(got, want)


def test_modulo_by_multiplication_is_exact(rng):
    """The bucket (a multiply and shifts in place of a divide) against the reference's Python %: every power of
    two and its neighbours as divisors, TensorFlow's 2**63 - 1 and random ones, on dividends at
    the edges (0, multiples of d and their neighbours, 2**64 - 1) and random 64-bit ones."""
    m64 = (1 << 64) - 1
    divisors = {1, 3, 7, 10, 641, 1_000_000, 6_700_417, (1 << 63) - 1, m64}
    divisors |= {(1 << k) + j for k in range(1, 64) for j in (-1, 0, 1)}
    divisors |= {int(d) for d in rng.integers(1, 2**63, size=50, dtype=np.int64)}
    edges = [0, 1, 2, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, m64]
    random = [int(v) for v in rng.integers(0, 2**64, size=300, dtype=np.uint64, endpoint=False)]
    for d in sorted(divisors):
        near = {d * q + j for q in (1, 2, m64 // d) for j in (-1, 0, 1)}
        a = np.array(sorted({v for v in edges + random + list(near) if 0 <= v <= m64}), dtype=np.uint64)
        got, want = np.empty_like(a), np.empty_like(a)
        _cross.modulo(a, d, got)
        ref.modulo(a, d, want)  # Python's integer %
        np.testing.assert_array_equal(got, want, err_msg=str(d))
    with pytest.raises(ValueError, match="positive"):
        _cross.modulo(np.zeros(1, np.uint64), 0, np.empty(1, np.uint64))


def _random_batch(rng, m, R, max_feats=4):
    counts = rng.integers(0, max_feats + 1, size=(m, R))
    ptr = np.zeros((m, R + 1), np.int64)
    base = 0
    for i in range(m):
        ptr[i, 0] = base
        ptr[i, 1:] = base + np.cumsum(counts[i])
        base = int(ptr[i, -1])
    feats = rng.integers(-(2**63), 2**63 - 1, size=base, dtype=np.int64).view(np.uint64)
    return ptr, feats


@pytest.mark.parametrize("seed", range(10))
def test_cross_kernels_match_reference(seed):
    rng = np.random.default_rng(seed)
    m, R = int(rng.integers(1, 4)), int(rng.integers(0, 12))
    ptr, feats = _random_batch(rng, m, R)
    counts_a, counts_b = np.empty(R, np.int64), np.empty(R, np.int64)
    assert _cross.cross_counts(ptr, counts_a) == ref.cross_counts(ptr, counts_b) == -1
    np.testing.assert_array_equal(counts_a, counts_b)
    offsets = np.concatenate([[0], np.cumsum(counts_a)]).astype(np.int64)
    total = int(offsets[-1])
    buckets = [0, 1, 7, 2**40][seed % 4]
    key = int(rng.integers(0, 2**63)) * 2 + 1
    # Whole batch, and pieces starting and ending mid-row.
    cuts = sorted({0, total, *rng.integers(0, total + 1, size=3).tolist()})
    for g0, g1 in zip(cuts[:-1], cuts[1:]):
        n = g1 - g0
        got = [np.empty(n, np.int64) for _ in range(3)]
        want = [np.empty(n, np.int64) for _ in range(3)]
        _cross.cross_hashed(ptr, feats, offsets, g0, g1, key, buckets, *got)
        ref.cross_hashed(ptr, feats, offsets, g0, g1, key, buckets, *want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        if buckets:
            assert ((got[2] >= 0) & (got[2] < buckets)).all()
        pos_a, pos_b = np.empty((m, n), np.int64), np.empty((m, n), np.int64)
        ra, ca, rb, cb = (np.empty(n, np.int64) for _ in range(4))
        _cross.cross_positions(ptr, offsets, g0, g1, ra, ca, pos_a)
        ref.cross_positions(ptr, offsets, g0, g1, rb, cb, pos_b)
        np.testing.assert_array_equal(pos_a, pos_b)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(ca, cb)
        # The caller's row numbers written in place of the batch's: the same as gathering them.
        row_ids = np.sort(rng.choice(10 * R + 10, size=R, replace=False)).astype(np.int64)
        got_ids = [np.empty(n, np.int64) for _ in range(3)]
        _cross.cross_hashed(ptr, feats, offsets, g0, g1, key, buckets, *got_ids, row_ids=row_ids)
        ref.cross_hashed(ptr, feats, offsets, g0, g1, key, buckets, *want, row_ids=row_ids)
        np.testing.assert_array_equal(got_ids[0], row_ids[got[0]])
        for a, b in zip(got_ids, want):
            np.testing.assert_array_equal(a, b)
        _cross.cross_positions(ptr, offsets, g0, g1, ra, ca, pos_a, row_ids=row_ids)
        ref.cross_positions(ptr, offsets, g0, g1, rb, cb, pos_b, row_ids=row_ids)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(pos_a, pos_b)


def test_cross_counts_overflow():
    big = 1 << 22
    ptr = np.array([[0, 1, 1 + big], [0, 1, 1 + big], [0, 1, 1 + big]], np.int64)
    out_a, out_b = np.empty(2, np.int64), np.empty(2, np.int64)
    assert _cross.cross_counts(ptr, out_a) == ref.cross_counts(ptr, out_b) == 1
    assert out_a[0] == out_b[0] == 1


def test_cross_hashed_checks_ranges():
    ptr = np.array([[0, 2]], np.int64)
    feats = np.arange(2, dtype=np.uint64)
    offsets = np.array([0, 2], np.int64)
    out = [np.empty(3, np.int64) for _ in range(3)]
    with pytest.raises(ValueError, match="within"):
        _cross.cross_hashed(ptr, feats, offsets, 0, 3, 1, 0, *out)
