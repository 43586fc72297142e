"""The compiled kernels against the plain NumPy reference, and proof they are the ones in use."""

from __future__ import annotations

import importlib.machinery

import numpy as np
import pytest
from references import kernels as kernels_reference

import sptool
from sptool import _kernels


def test_compiled_kernels_are_loaded_and_used():
    assert _kernels.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert sptool.KERNELS == "compiled"
    from sptool.io import _npy, sink, source  # noqa: F401
    from sptool.ops import validate

    for module in (sink, _npy, validate):
        assert module._kernels is _kernels
    assert "kernels: compiled" in __import__("sptool.cli", fromlist=["_version_text"])._version_text()


def _keys(rng, K, n, hi=5):
    return rng.integers(0, hi, size=(K, n)).astype(np.int64)


@pytest.mark.parametrize("seed", range(20))
def test_first_out_of_bounds(seed):
    rng = np.random.default_rng(seed)
    K, n = rng.integers(1, 4), rng.integers(0, 50)
    keys = rng.integers(-2, 8, size=(K, n)).astype(np.int64)
    shape = rng.integers(1, 8, size=K).astype(np.int64)
    assert _kernels.first_out_of_bounds(keys, shape) == kernels_reference.first_out_of_bounds(keys, shape)


@pytest.mark.parametrize("seed", range(40))
def test_first_order_violation(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 4))
    n = int(rng.integers(0, 30))
    keys = _keys(rng, K, n, hi=3)
    if seed % 2:
        keys = keys[:, np.lexsort(keys[::-1])].copy()
    order = rng.permutation(K)[: rng.integers(0, K + 1)].astype(np.int64)
    prev = _keys(rng, K, 1, hi=3) if seed % 3 == 0 else None
    for repeats in (False, True):
        got = _kernels.first_order_violation(keys, order, repeats, prev)
        assert got == kernels_reference.first_order_violation(keys, order, repeats, prev)


def test_first_order_violation_on_transposed_view():
    idx = np.array([[0, 1], [0, 2], [0, 2], [1, 0]], dtype=np.int64)
    order = np.arange(2, dtype=np.int64)
    assert _kernels.first_order_violation(idx.T, order, True) == (2, _kernels.REPEATED)
    assert _kernels.first_order_violation(idx.T[:, ::-1], order, False) == (1, _kernels.OUT_OF_ORDER)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "int16", "int8", "uint64", "uint32",
                                   "uint16", "uint8", "complex64", "complex128"])
@pytest.mark.parametrize("m", [1, 3])
def test_scatter_add(dtype, m, rng):
    n, cells = 200, 17
    offsets = rng.integers(0, cells, size=n).astype(np.int64)
    vals = (rng.integers(0, 5, size=(n, m)) + (1j if dtype.startswith("complex") else 0)).astype(dtype)
    got = np.zeros((cells, m), dtype=dtype)
    want = np.zeros((cells, m), dtype=dtype)
    _kernels.scatter_add(offsets, vals, got)
    kernels_reference.scatter_add(offsets, vals, want)
    np.testing.assert_array_equal(got, want)


def test_scatter_or(rng):
    offsets = rng.integers(0, 9, size=50).astype(np.int64)
    vals = (rng.random((50, 2)) < 0.3).astype(np.uint8)
    got, want = np.zeros((9, 2), np.uint8), np.zeros((9, 2), np.uint8)
    _kernels.scatter_or(offsets, vals, got)
    kernels_reference.scatter_or(offsets, vals, want)
    np.testing.assert_array_equal(got, want)


def test_linear_offsets_and_minmax(rng):
    shape = np.array([9, 5, 7], dtype=np.int64)
    keys = (rng.random((3, 100)) * shape[:, None]).astype(np.int64)
    got, want = np.empty(100, np.int64), np.empty(100, np.int64)
    _kernels.linear_offsets(keys, shape, got)
    kernels_reference.linear_offsets(keys, shape, want)
    np.testing.assert_array_equal(got, want)
    col = rng.integers(-1000, 1000, size=77).astype(np.int64)
    assert _kernels.column_minmax(col) == kernels_reference.column_minmax(col)
    with pytest.raises(ValueError):
        _kernels.column_minmax(np.empty(0, np.int64))


@pytest.mark.parametrize("seed", range(30))
def test_column_kernels_match_the_array_kernels(seed):
    rng = np.random.default_rng(seed)
    K, n = int(rng.integers(1, 4)), int(rng.integers(1, 40))
    keys = rng.integers(-1, 4, size=(K, n)).astype(np.int64)
    if seed % 2:
        keys = keys[:, np.lexsort(keys[::-1])].copy()
    cols = [keys[k].copy() for k in range(K)]  # separate buffers, as a record batch has
    shape = rng.integers(1, 5, size=K).astype(np.int64)
    assert _kernels.columns_out_of_bounds(cols, shape) == kernels_reference.first_out_of_bounds(keys, shape)
    order = rng.permutation(K)[: rng.integers(0, K + 1)].astype(np.int64)
    prev = rng.integers(0, 4, size=K).astype(np.int64) if seed % 3 == 0 else None
    for repeats in (False, True):
        got = _kernels.columns_order_violation(cols, order, repeats, prev)
        want = kernels_reference.first_order_violation(keys, order, repeats, None if prev is None else prev[:, None])
        assert got == want
    assert _kernels.columns_max(cols) == keys.max(axis=1).tolist()
    with pytest.raises(ValueError):
        _kernels.columns_order_violation(cols, np.array([K], dtype=np.int64), False)


@pytest.mark.parametrize("seed", range(30))
def test_columns_scan_is_the_separate_kernels_fused(seed):
    rng = np.random.default_rng(seed)
    K, n = int(rng.integers(1, 4)), int(rng.integers(1, 40))
    keys = rng.integers(-1, 4, size=(K, n)).astype(np.int64)
    if seed % 2:
        keys = keys[:, np.lexsort(keys[::-1])].copy()
    cols = [keys[k].copy() for k in range(K)]
    shape = rng.integers(1, 5, size=K).astype(np.int64)
    order = rng.permutation(K)[: rng.integers(0, K + 1)].astype(np.int64)
    prev = rng.integers(0, 4, size=K).astype(np.int64) if seed % 3 == 0 else None
    for repeats in (False, True):
        oob_row, oob_dim, row, kind, mins, maxs = _kernels.columns_scan(cols, shape, order, repeats, prev)
        assert (oob_row, oob_dim) == kernels_reference.first_out_of_bounds(keys, shape)
        want = kernels_reference.first_order_violation(keys, order, repeats, None if prev is None else prev[:, None])
        assert (row, kind) == want
        assert mins == keys.min(axis=1).tolist() and maxs == keys.max(axis=1).tolist()


# -- sort keys: packing, radix sort, k-way merge ---------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_pack_unpack_keys(seed):
    rng = np.random.default_rng(seed)
    K, n = int(rng.integers(1, 4)), int(rng.integers(0, 50))
    widths = rng.integers(0, 20, K).astype(np.int64)
    keys = np.stack([rng.integers(0, 1 << int(w), n) if w else np.zeros(n, np.int64) for w in widths])
    order = rng.permutation(K).astype(np.int64)
    w = widths[order]
    shifts = np.array([int(w[j + 1:].sum()) if w[j] else 0 for j in range(K)], np.int64)
    got, want = np.empty(n, np.uint64), np.empty(n, np.uint64)
    _kernels.pack_keys(keys, order, shifts, w, got)
    kernels_reference.pack_keys(keys, order, shifts, want)
    np.testing.assert_array_equal(got, want)
    back, back_ref = np.empty((K, n), np.int64), np.empty((K, n), np.int64)
    _kernels.unpack_keys(got, order, shifts, w, back)
    kernels_reference.unpack_keys(got, order, shifts, w, back_ref)
    np.testing.assert_array_equal(back, back_ref)
    np.testing.assert_array_equal(back, keys)


@pytest.mark.parametrize("seed", range(6))
def test_or_shifted_checks_the_extent_as_it_packs(seed):
    """With a limit, or_shifted packs as the reference does and tells whether every value lies
    in [0, limit): negatives, the extent itself and past it are caught, whatever the field's width."""
    rng = np.random.default_rng(seed)
    n, limit = 300, int(rng.integers(1, 1 << 20))
    width, shift = max(limit - 1, 1).bit_length(), int(rng.integers(0, 40))
    col = rng.integers(0, limit, n)
    planted = seed % 2 == 1
    if planted:
        col[rng.integers(0, n)] = [-1, limit, -(1 << 62)][seed // 2]
    prior = rng.integers(0, 1 << 63, n, dtype=np.uint64)
    for first in (True, False):
        got, want = prior.copy(), prior.copy()
        ok = _kernels.or_shifted(col, shift, width, got, first, limit)
        assert ok == kernels_reference.or_shifted(col, shift, want, first, limit) == (not planted)
        if ok:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("hi", [1, 7, 1 << 40])
def test_radix_argsort_is_a_stable_sort(rng, hi):
    keys = rng.integers(0, hi, 5000).astype(np.uint64)
    perm, out = np.empty(5000, np.int64), np.empty(5000, np.uint64)
    want_perm, want = np.empty(5000, np.int64), np.empty(5000, np.uint64)
    _kernels.radix_argsort(keys, perm, out)
    kernels_reference.radix_argsort(keys, want_perm, want)
    np.testing.assert_array_equal(perm, want_perm)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("top", [1, 21, 51, 52])
@pytest.mark.parametrize("same", [0, 0xABC])
def test_radix_argsort_positions_beside_the_key(rng, top, same):
    """5,000 rows take 13 bits of position: keys of 51 varying bits leave exactly room for them
    in the word, 52 do not; bits above the varying ones, the same in every key, come back."""
    keys = rng.integers(0, 1 << top, 5000, dtype=np.uint64)
    keys[0] |= np.uint64(1 << (top - 1))  # the top bit varies
    keys |= np.uint64(same << 52)
    perm, out = np.empty(5000, np.int64), np.empty(5000, np.uint64)
    _kernels.radix_argsort(keys, perm, out)
    np.testing.assert_array_equal(perm, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(out, keys[perm])


@pytest.mark.parametrize("seed", range(12))
def test_merge_runs_is_a_stable_merge(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 9))
    hi = [1, 3, 1000][seed % 3]  # many ties, some, few
    runs = [np.sort(rng.integers(0, hi, int(rng.integers(0, 30)))).astype(np.uint64) for _ in range(k)]
    keys = np.concatenate(runs)
    ends = np.cumsum([len(r) for r in runs])
    lo, hi_ = ends - [len(r) for r in runs], ends
    # Merge stretches of each run (not always whole runs) into an output at an offset.
    lo = lo + (rng.integers(0, 2, k) * (hi_ > lo))
    lo = np.minimum(lo, hi_).astype(np.int64)
    hi_ = hi_.astype(np.int64)
    n, start = int((hi_ - lo).sum()), 3
    got = [np.zeros(n + start, np.uint64), np.full(n + start, -1, np.int64)]
    want = [a.copy() for a in got]
    _kernels.merge_runs(keys, lo, hi_, *got, start)
    kernels_reference.merge_runs(keys, lo, hi_, *want, start)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    with pytest.raises(ValueError):
        _kernels.merge_runs(keys, lo, hi_, got[0][: n + start - 1], got[1][: n + start - 1], start)


@pytest.mark.parametrize("parts_min", [1, 1 << 16])
@pytest.mark.parametrize("k", [1, 3, 7])
@pytest.mark.parametrize("bits", [51, 64])  # 64: no room for position tags, always the merge tree
def test_merge_keys_on_threads_matches_a_stable_sort(rng, monkeypatch, parts_min, k, bits):
    from concurrent.futures import ThreadPoolExecutor

    from sptool.stream import sort as _sort

    for hi in (2, 50, 1 << 50):
        runs = [np.sort(rng.integers(0, hi, int(rng.integers(0, 400)))).astype(np.uint64) for _ in range(k)]
        with ThreadPoolExecutor(3) as pool:
            perm, merged = _sort.merge_keys(runs, pool, bits, parallel_rows=parts_min, parts=3)
        keys = np.concatenate(runs)
        want = np.argsort(keys, kind="stable")
        np.testing.assert_array_equal(perm, want)
        np.testing.assert_array_equal(merged, keys[want])


@pytest.mark.parametrize("radix", [False, True])
def test_codec_argsort_is_a_stable_sort_whichever_algorithm_it_picks(rng, radix):
    """KeyCodec.argsort sorts runs by NumPy's sort of position-tagged keys or, from RADIX_MIN_ROWS
    keys on, by the radix sort: both are NumPy's stable lexsort of the rows."""
    from sptool.stream import sort as _sort

    shape = (50, 7, 1 << 20)
    codec = _sort.KeyCodec(shape, (2, 0, 1))
    sizes = (_sort.RADIX_MIN_ROWS, _sort.RADIX_MIN_ROWS + 5000) if radix else (1, 2, 1000, 5000)
    for n in sizes:
        idx = np.stack([rng.integers(0, s if n != sizes[-1] else 3, n) for s in shape])  # the last: many ties
        perm, keys = codec.argsort(codec.encode(idx))
        want = np.lexsort((idx[1], idx[0], idx[2]))  # the last key first: dimension 2, then 0, then 1
        np.testing.assert_array_equal(perm, want)
        np.testing.assert_array_equal(keys, codec.encode(idx[:, want]))


@pytest.mark.parametrize("seed", range(8))
def test_bucket_counts_and_scatter_rows_against_the_reference(seed):
    rng = np.random.default_rng(seed)
    bits, bucket_bits = [(20, 4), (37, 10), (3, 3), (64, 2)][seed % 4]
    dtype = [np.float64, np.int32, np.uint8, np.float16][seed % 4]
    shift = bits - bucket_bits
    batches = [rng.integers(0, 1 << bits, int(rng.integers(0, 300)), dtype=np.uint64, endpoint=bits == 64)
               if bits < 64 else rng.integers(0, 2**63, int(rng.integers(0, 300)), dtype=np.uint64) * np.uint64(2)
               for _ in range(4)]
    counts, want_counts = np.zeros(1 << bucket_bits, np.int64), np.zeros(1 << bucket_bits, np.int64)
    for k in batches:
        _kernels.bucket_counts(k, shift, counts)
        kernels_reference.bucket_counts(k, shift, want_counts)
    np.testing.assert_array_equal(counts, want_counts)
    n = int(counts.sum())
    pos_bits = max(n - 1, 1).bit_length() + seed % 2  # room for every position, or one bit more
    values = [(rng.standard_normal(len(k)) * 100).astype(dtype) for k in batches]
    words = f"u{np.dtype(dtype).itemsize}"
    got, want = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    got_values, want_values = np.zeros(n, dtype), np.zeros(n, dtype)
    nxt, want_nxt = np.cumsum(counts) - counts, np.cumsum(counts) - counts
    for k, v in zip(batches, values):
        _kernels.scatter_rows(k, v.view(words), shift, pos_bits, nxt, got, got_values.view(words))
        kernels_reference.scatter_rows(k, v, shift, pos_bits, want_nxt, want, want_values)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_values.view(words), want_values.view(words))
    np.testing.assert_array_equal(nxt, np.cumsum(counts))
    if bits + pos_bits > 64:
        return
    # Sorting the tagged keys sorts the rows stably: NumPy's stable argsort is the oracle.
    keys, allvalues = np.concatenate(batches), np.concatenate(values)
    got.sort()
    where = (got & np.uint64((1 << pos_bits) - 1)).astype(np.int64)
    np.testing.assert_array_equal(got >> np.uint64(pos_bits), np.sort(keys))
    want_order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(got_values[where].view(words), allvalues[want_order].view(words))


def test_bucket_kernels_refuse_keys_outside_the_buckets():
    keys, values = np.array([1, 2, 64], dtype=np.uint64), np.zeros(3, np.uint64)
    with pytest.raises(ValueError):
        _kernels.bucket_counts(keys, 4, np.zeros(4, np.int64))  # 64 >> 4 = 4: no bucket 4
    with pytest.raises(ValueError):
        _kernels.scatter_rows(keys, values, 4, 8, np.zeros(4, np.int64), np.zeros(3, np.uint64), values.copy())
    with pytest.raises(ValueError):  # no room left in bucket 0
        _kernels.scatter_rows(keys[:2], values[:2], 6, 8, np.array([2], np.int64), np.zeros(3, np.uint64),
                              values.copy())
    with pytest.raises(ValueError):  # positions up to 2 need two bits
        _kernels.scatter_rows(keys, values, 7, 1, np.zeros(1, np.int64), np.zeros(3, np.uint64), values.copy())
