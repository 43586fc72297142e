"""The compiled wide-key kernels (sptool/_widekeys.pyx: keys of 65 to 128 bits as two big-endian
words) against their plain-Python reference, which works on Python integers."""

from __future__ import annotations

import numpy as np
import pytest
from references import widekeys as ref

from sptool import _widekeys
from sptool.stream.sort import KeyCodec

# FROSTT's amazon-reviews (65 bits), delicious (78), lbnl-network (68) and TensorFlow's
# SparseReorderTest.testShapeOverflow (72): fields straddling the words' boundary, and not.
SHAPES = [(4821207, 1774269, 1805187), (532924, 17262471, 2480308, 1443), (1605, 4198, 1631, 4209, 868131),
          (4096,) * 6]


def _rows(rng, shape, n):
    return np.stack([rng.integers(0, s, n) for s in shape]).astype(np.int64)


def _codec(shape, order=None):
    codec = KeyCodec(shape, tuple(range(len(shape))) if order is None else order)
    assert codec.wide
    return codec


def _random_keys(rng, n, bits):
    """(n, 2) words of random keys below 2**bits, with repeats."""
    ints = [int(x) for x in rng.integers(0, 1 << 62, n)]
    ints = [(v << (bits - 62)) | int(rng.integers(0, 1 << min(bits - 62, 62))) for v in ints]
    ints = [ints[int(i)] for i in rng.integers(0, max(n // 2, 1), n)] if n else ints
    return ref.words_of(ints)


@pytest.mark.parametrize("shape", SHAPES)
def test_pack_unpack_and_or_shifted(rng, shape):
    order = tuple(rng.permutation(len(shape)))
    codec = _codec(shape, order)
    keys = _rows(rng, shape, 300)
    keys[:, :len(shape)] = np.asarray(shape)[:, None] - 1  # the largest index of every field
    got, want = np.empty((300, 2), np.uint64), np.empty((300, 2), np.uint64)
    args = (np.asarray(order, dtype=np.int64), codec.shifts, codec.widths)
    _widekeys.pack_keys(keys, *args, got)
    ref.pack_keys(keys, *args, want)
    assert np.array_equal(got, want)
    # One column at a time, straight from the columns, gives the same keys.
    cols = np.empty((300, 2), np.uint64)
    for j, d in enumerate(order):
        _widekeys.or_shifted(keys[d], int(codec.shifts[j]), int(codec.widths[j]), cols, j == 0)
    assert np.array_equal(cols, want)
    back, back_ref = np.empty_like(keys), np.empty_like(keys)
    _widekeys.unpack_keys(got, *args, back)
    ref.unpack_keys(want, *args, back_ref)
    assert np.array_equal(back, keys) and np.array_equal(back_ref, keys)


def test_packed_keys_sort_as_the_rows_do(rng):
    """The byte order of the keys is the lexicographic order of the rows (NumPy's lexsort)."""
    shape = SHAPES[1]
    keys = _rows(rng, shape, 2000)
    codec = _codec(shape)
    codes = codec.encode(keys)
    assert codes.dtype == np.dtype("V16")
    assert np.array_equal(np.argsort(codes, kind="stable"), np.lexsort(keys[::-1]))


@pytest.mark.parametrize("n", [0, 1, 7, 3000])
@pytest.mark.parametrize("bits", [65, 90, 128])
def test_radix_argsort_is_a_stable_sort(rng, n, bits):
    keys = _random_keys(rng, n, bits)
    got = (np.empty(n, np.int64), np.empty((n, 2), np.uint64))
    want = (np.empty(n, np.int64), np.empty((n, 2), np.uint64))
    _widekeys.radix_argsort(keys, *got)
    ref.radix_argsort(keys, *want)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("bits", [116, 117])
@pytest.mark.parametrize("high", [0, 0x5A5])
def test_radix_argsort_with_constant_high_bits(rng, bits, high):
    """3,000 rows take 12 bits of position: 116 varying bits leave exactly room for them, 117 do
    not; bits above the varying ones, the same in every key, come back as they went in."""
    n = 3000
    ints = ref.ints_of(_random_keys(rng, n, bits))
    ints[0] |= 1 << (bits - 1)  # the top bit varies
    keys = ref.words_of([v | (high << 117) for v in ints])
    got = (np.empty(n, np.int64), np.empty((n, 2), np.uint64))
    want = (np.empty(n, np.int64), np.empty((n, 2), np.uint64))
    _widekeys.radix_argsort(keys, *got)
    ref.radix_argsort(keys, *want)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(8))
def test_merge_runs_is_a_stable_merge(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 9))
    runs = [np.sort(np.array(ref.ints_of(_random_keys(rng, int(rng.integers(0, 40)), 70)), dtype=object))
            for _ in range(k)]
    keys = ref.words_of([int(v) for r in runs for v in r]) if any(len(r) for r in runs) else np.empty((0, 2), np.uint64)
    sizes = np.array([len(r) for r in runs], dtype=np.int64)
    lo = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    hi = lo + sizes
    start = int(rng.integers(0, 3))
    n = int(sizes.sum()) + start
    got = (np.zeros((n, 2), np.uint64), np.full(n, -1, np.int64))
    want = (np.zeros((n, 2), np.uint64), np.full(n, -1, np.int64))
    _widekeys.merge_runs(keys, lo, hi, *got, start)
    ref.merge_runs(keys, lo, hi, *want, start)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_counting_sort_scatter(rng):
    keys = _random_keys(rng, 500, 75)
    shift = 75 - 6
    counts, counts_ref = np.zeros(64, np.int64), np.zeros(64, np.int64)
    _widekeys.bucket_counts(keys, shift, counts)
    ref.bucket_counts(keys, shift, counts_ref)
    assert np.array_equal(counts, counts_ref)
    values = rng.integers(0, 1 << 40, 500).astype(np.uint64)
    nxt = np.cumsum(counts) - counts
    got = (np.zeros((500, 2), np.uint64), np.zeros(500, np.uint64))
    want = (np.zeros((500, 2), np.uint64), np.zeros(500, np.uint64))
    _widekeys.scatter_rows(keys, values, shift, nxt.copy(), *got)
    ref.scatter_rows(keys, values, shift, nxt.copy(), *want)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    with pytest.raises(ValueError, match="outside the buckets"):
        _widekeys.bucket_counts(keys, shift, np.zeros(32, np.int64))


@pytest.mark.parametrize("fills", [(0.0, 0.0), (1.5, -2.0)])
def test_merge_add(rng, fills):
    shape = SHAPES[0]
    codec = _codec(shape)

    def side(n):
        keys = np.unique(_rows(rng, (40, 3, 5), n), axis=1) * np.array([[100000], [500000], [300000]])
        codes = codec.encode(np.ascontiguousarray(keys)).view(np.uint64).reshape(-1, 2)
        return codes, rng.standard_normal(keys.shape[1])

    (a, va), (b, vb) = side(60), side(50)
    fa, fb = fills
    outs = []
    for kernel in (_widekeys.merge_add, ref.merge_add):
        keys, out, maxes = np.zeros((3, 40), np.int64), np.zeros(40), np.zeros(3, np.int64)
        pos, rows = np.zeros(2, np.int64), []
        while pos[0] < len(a) or pos[1] < len(b):
            n = kernel(a, b, va, vb, fa, fb, fa == 0, fb == 0, codec.shifts, codec.widths, keys, out, maxes, pos)
            rows.append((keys[:, :n].copy(), out[:n].copy(), maxes.copy()))
        outs.append(rows)
    for (k1, v1, m1), (k2, v2, m2) in zip(*outs):
        assert np.array_equal(k1, k2) and np.array_equal(v1, v2) and np.array_equal(m1, m2)


@pytest.mark.parametrize("old,new", [((4821207, 1774269, 1805187), (4821207 * 1774269, 1805187)),
                                     ((4096,) * 6, (4096 ** 3, 4096 ** 3)), ((10**10, 10**10), (10**5,) * 4)])
def test_relinearize(rng, old, new):
    keys = _rows(rng, old, 200)
    keys[:, 0] = np.asarray(old) - 1
    got, want = np.empty((len(new), 200), np.int64), np.empty((len(new), 200), np.int64)
    args = (np.asarray(old, dtype=np.int64), np.asarray(new, dtype=np.int64))
    _widekeys.relinearize(keys, *args, got)
    ref.relinearize(keys, *args, want)
    assert np.array_equal(got, want)
    assert got[:, 0].tolist() == [s - 1 for s in new]


def test_relinearize_names_an_index_outside_the_shape():
    keys = np.array([[0, 4821207], [1, 0], [2, 0]], dtype=np.int64)
    out = np.empty((2, 2), np.int64)
    old, new = np.array((4821207, 1774269, 1805187), np.int64), np.array((4821207 * 1774269, 1805187), np.int64)
    with pytest.raises(IndexError, match="index of dimension 0 4821207 at position 1 is outside"):
        _widekeys.relinearize(keys, old, new, out)
