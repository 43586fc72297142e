"""The compiled reduction kernels (sptool/_reduce.pyx) against their NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from references import reduce as ref

from sptool import _reduce

REAL = ["int8", "int32", "int64", "uint8", "uint64", "float32", "float64"]
ALL = REAL + ["complex64", "complex128"]


def _values(rng, n, m, dtype):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(0, 5, size=(n, m)).astype(dt)
    v = rng.standard_normal((n, m)) + (1j * rng.standard_normal((n, m)) if dt.kind == "c" else 0)
    return v.astype(dt)


def _sorted_keys(rng, K, n, hi=4):
    keys = rng.integers(0, hi, size=(K, n)).astype(np.int64)
    return np.ascontiguousarray(keys[:, np.lexsort(keys[::-1])])


@pytest.mark.parametrize("seed", range(12))
def test_run_starts(seed):
    rng = np.random.default_rng(seed)
    K, n = int(rng.integers(1, 4)), int(rng.integers(0, 40))
    keys = _sorted_keys(rng, K, n)
    dims = np.asarray(sorted(rng.choice(K, size=rng.integers(0, K + 1), replace=False)), dtype=np.int64)
    a, b = np.full(n + 1, -1, np.int64), np.full(n + 1, -1, np.int64)
    ga, gb = _reduce.run_starts(keys, dims, a), ref.run_starts(keys, dims, b)
    assert ga == gb
    np.testing.assert_array_equal(a[: ga + 1], b[: gb + 1])


@pytest.mark.parametrize("seed", range(12))
def test_group_cells(seed):
    rng = np.random.default_rng(seed)
    C, n = int(rng.integers(1, 4)), int(rng.integers(0, 40))
    cols = [np.ascontiguousarray(c) for c in _sorted_keys(rng, C, n)]
    bounds = np.full(C, 4, np.int64)
    if seed % 3 == 0 and n:
        bounds[int(rng.integers(0, C))] = 2  # some rows out of bounds
    n_group = int(rng.integers(0, C + 1))
    strides = np.zeros(C, np.int64)
    strides[n_group:] = 4 ** np.arange(C - n_group)[::-1]
    width = 4 ** (C - n_group)
    ca, cb = np.zeros(n, np.int64), np.zeros(n, np.int64)
    sa, sb = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
    ga = _reduce.group_cells(cols, n, bounds, n_group, strides, width, ca, sa)
    gb = ref.group_cells(cols, n, bounds, n_group, strides, width, cb, sb)
    assert ga == gb
    if ga >= 0:
        np.testing.assert_array_equal(ca, cb)
        np.testing.assert_array_equal(sa[: ga + 1], sb[: gb + 1])


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("dtype", ["int32", "uint8", "float64", "complex64"])
def test_group_block_sum(seed, dtype):
    rng = np.random.default_rng(seed)
    C, n, m = int(rng.integers(1, 4)), int(rng.integers(1, 60)), int(rng.integers(0, 3))
    cols = [np.ascontiguousarray(c) for c in _sorted_keys(rng, C, n, hi=5)]
    bounds = np.full(C, 5, np.int64)
    if seed % 4 == 1:
        bounds[int(rng.integers(0, C))] = 3  # some rows out of bounds
    if seed % 4 == 2 and n > 2:
        cols[0][n // 2:] = cols[0][n // 2:][::-1].copy()  # the leading column goes down
    extents = np.full(C - 1, 5, np.int64)
    strides = np.array([0] + [5 ** (C - 1 - c) for c in range(1, C)], np.int64)
    if seed % 8 == 7 and C > 1:
        strides[1] += 5 ** (C - 1)  # cells outside the E slots: the caller's general path
    E = 5 ** (C - 1)
    vals = _values(rng, n, m, dtype)

    def buffers():
        return [np.zeros((E, m), dtype), np.zeros(E, np.int64), np.zeros((E, m), dtype), np.zeros(E, np.int64),
                np.zeros((C, n), np.int64), np.zeros((n, m), dtype), np.zeros(n, np.int64)]

    got, want = buffers(), buffers()
    ca, ga = _reduce.group_block_sum(cols, n, bounds, strides, extents, vals, *got)
    cb, gb = ref.group_block_sum(cols, n, bounds, strides, extents, vals, *want)
    assert ca == cb
    if ca != -1:
        return
    assert ga == gb
    for a, b in zip(got[:4], want[:4]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_array_equal(got[4][:, :ga], want[4][:, :gb])
    np.testing.assert_allclose(got[5][:ga], want[5][:gb], rtol=1e-6)
    np.testing.assert_array_equal(got[6][:ga], want[6][:gb])
    # Independently of the reference: head, middle and tail together are NumPy's sums per cell.
    lead, cell = cols[0], (np.stack(cols[1:]) * strides[1:, None]).sum(axis=0) if C > 1 else np.zeros(n, np.int64)
    total = np.zeros((int(lead.max()) + 1, E, m), np.complex128)
    np.add.at(total, (lead, cell), vals)
    rebuilt = np.zeros_like(total)
    rebuilt[lead[0]] += got[0]
    if lead[-1] != lead[0]:
        rebuilt[lead[-1]] += got[2]
    else:
        assert not got[3].any()
    flat = (got[4][0, :ga] * E + (np.ravel_multi_index(tuple(got[4][1:, :ga]), tuple(extents)) if C > 1 else 0))
    rebuilt.reshape(total.shape[0] * E, m)[flat] += got[5][:ga]
    np.testing.assert_allclose(rebuilt, total, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
def test_compact_cells(seed, dtype):
    rng = np.random.default_rng(seed)
    R, m = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    extents = rng.integers(1, 5, size=R).astype(np.int64)
    width = int(np.prod(extents))
    groups = int(rng.integers(1, 6))
    counts = np.where(rng.random(groups * width) < 0.4, rng.integers(1, 4, groups * width), 0).astype(np.int64)
    acc = _values(rng, groups * width, m, dtype)
    lo, hi = sorted(int(x) * width for x in rng.integers(0, groups + 1, size=2))
    first = int(rng.integers(0, 100))
    cap = int(np.count_nonzero(counts[lo:hi])) + (1 if seed % 2 else 0)

    def outputs():
        return np.full((1 + R, cap), -1, np.int64), np.zeros((cap, m), dtype), np.full(cap, -1, np.int64)

    got, want = outputs(), outputs()
    ga = _reduce.compact_cells(counts, lo, hi, width, first, extents, acc, *got)
    gb = ref.compact_cells(counts, lo, hi, width, first, extents, acc, *want)
    assert ga == gb == np.count_nonzero(counts[lo:hi])
    for a, b in zip(got, want):  # columns past the count are scratch
        np.testing.assert_array_equal(a[..., :ga] if a.ndim == 2 and a is got[0] else a[:ga], b[..., :gb]
                                      if b.ndim == 2 and b is want[0] else b[:gb])
    # Independently of the reference: each entry names its slot, holds its sum and count.
    slots = (got[0][0, :ga] - first) * width + (np.ravel_multi_index(tuple(got[0][1:, :ga]), tuple(extents))
                                                if R else 0)
    np.testing.assert_array_equal(slots, lo + np.flatnonzero(counts[lo:hi]))
    np.testing.assert_array_equal(got[1][:ga], acc[slots])
    if seed % 2 == 0 and ga:  # outputs one column short: refused, not overrun
        keys, vals, cnt = outputs()
        with pytest.raises(IndexError):
            _reduce.compact_cells(counts, lo, hi, width, first, extents, acc, keys[:, :ga - 1].copy(), vals[:ga - 1],
                                  cnt[:ga - 1])


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_segments(rng, dtype, op):
    if op in ("max", "min") and dtype.startswith("complex"):
        pytest.skip("no order on complex values")
    for n, m in ((0, 1), (1, 1), (37, 1), (25, 3), (9, 0)):
        vals = _values(rng, n, m, dtype)
        if dtype.startswith("float") and n > 5 and m:
            vals[3, 0] = np.nan
        cuts = np.unique(rng.integers(1, max(n, 1), size=4)) if n > 1 else np.zeros(0, np.int64)
        starts = np.concatenate([[0], cuts, [n]]).astype(np.int64) if n else np.zeros(1, np.int64)
        a = np.zeros((len(starts) - 1, m), vals.dtype)
        b = np.zeros_like(a)
        getattr(_reduce, f"segment_{op}")(vals, starts, a)
        getattr(ref, f"segment_{op}")(vals, starts, b)
        np.testing.assert_array_equal(a, b) if vals.dtype.kind in "iu" else \
            np.testing.assert_allclose(a, b, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_segment_softmax(rng, dtype):
    vals = _values(rng, 30, 2, dtype)
    vals[4, 1] = np.inf
    starts = np.array([0, 3, 4, 17, 30], np.int64)
    a, b = np.zeros_like(vals), np.zeros_like(vals)
    _reduce.segment_softmax(vals, starts, a)
    ref.segment_softmax(vals, starts, b)
    np.testing.assert_allclose(a, b, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_scatter(rng, dtype, op):
    if op in ("max", "min") and dtype.startswith("complex"):
        pytest.skip("no order on complex values")
    n, m, c, base = 50, 2, 7, 3
    vals = _values(rng, n, m, dtype)
    if dtype.startswith("float"):
        vals[5, 1] = np.nan
    cells = rng.integers(base, base + c, size=n).astype(np.int64)
    acc_a, acc_b = np.zeros((c, m), vals.dtype), np.zeros((c, m), vals.dtype)
    cnt_a, cnt_b = np.zeros(c, np.int64), np.zeros(c, np.int64)
    getattr(_reduce, f"scatter_{op}")(cells, base, vals, acc_a, cnt_a)
    getattr(ref, f"scatter_{op}")(cells, base, vals, acc_b, cnt_b)
    np.testing.assert_array_equal(cnt_a, cnt_b)
    np.testing.assert_allclose(acc_a, acc_b, rtol=1e-5, equal_nan=True)
    with pytest.raises(IndexError):
        getattr(_reduce, f"scatter_{op}")(cells, base + 1, vals, acc_a, cnt_a)


def test_shape_checks():
    with pytest.raises(ValueError):
        _reduce.segment_sum(np.zeros((3, 1)), np.array([0, 2], np.int64), np.zeros((1, 1)))
    with pytest.raises(ValueError):
        _reduce.segment_sum(np.zeros((3, 1)), np.array([0, 2, 2, 3], np.int64), np.zeros((3, 1)))
