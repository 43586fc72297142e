"""The compiled kernels of sptool/_linalg.pyx against the plain NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from references import linalg as linalg_reference

from sptool import _linalg
from sptool.stream.sort import KeyCodec

VALUE_TYPES = ["float64", "float32", "int64", "int32", "complex128", "complex64"]


def _values(rng, n, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    if dt.kind == "i":
        return rng.integers(-20, 20, n).astype(dt)
    return rng.standard_normal(n).astype(dt)


def _keys(rng, n, hi):
    return np.unique(rng.integers(0, hi, n).astype(np.uint64))


@pytest.mark.parametrize("na,nb", [(0, 0), (0, 5), (7, 0), (50, 60), (300, 20)])
def test_merge_join(rng, na, nb):
    a, b = _keys(rng, na, 100), _keys(rng, nb, 100)
    got = [np.full(len(a) + len(b), -9, np.int64) for _ in range(2)] + [np.zeros(len(a) + len(b), np.uint64)]
    want = [np.full(len(a) + len(b), -9, np.int64) for _ in range(2)] + [np.ones(len(a) + len(b), np.uint64)]
    n = _linalg.merge_join(a, b, *got)
    assert n == linalg_reference.merge_join(a, b, *want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g[:n], w[:n])


@pytest.mark.parametrize("na,nb", [(0, 0), (0, 4), (40, 33), (5, 0), (300, 280)])
@pytest.mark.parametrize("dtype", VALUE_TYPES)
@pytest.mark.parametrize("fills", [(0, 0), (1.5, 0), (0, -2), (-0.0, 3)])
def test_merge_add(rng, na, nb, dtype, fills):
    shape = (7, 3, 5)
    codec = KeyCodec(shape, (0, 1, 2))
    hi = int(np.prod(shape))
    flat_a, flat_b = _keys(rng, na, hi), _keys(rng, nb, hi)
    # codes of the coordinates, so that the oracle for the unpacked keys is unravel_index
    a = codec.encode(np.stack(np.unravel_index(flat_a.astype(np.int64), shape)))
    b = codec.encode(np.stack(np.unravel_index(flat_b.astype(np.int64), shape)))
    dt = np.dtype(dtype)
    va = (rng.standard_normal(len(a)) * 10).astype(dt)
    vb = (rng.standard_normal(len(b)) * 10).astype(dt)
    if dt.kind == "f" and len(va):
        va[0] = -0.0  # a one-sided -0.0 stays -0.0 when the other fill is zero
    fa, fb = (dt.type(f) for f in fills)
    za, zb = (f == 0 and not (isinstance(f, float) and np.signbit(f)) for f in fills)
    m = len(a) + len(b)
    got = [np.full((3, m), -7, np.int64), np.zeros(m, dt), np.zeros(3, np.int64), np.zeros(2, np.int64)]
    want = [np.full((3, m), -9, np.int64), np.ones(m, dt), np.ones(3, np.int64), np.zeros(2, np.int64)]
    n = _linalg.merge_add(a, b, va, vb, fa, fb, za, zb, codec.shifts, codec.widths, *got)
    assert n == linalg_reference.merge_add(a, b, va, vb, fa, fb, za, zb, codec.shifts, codec.widths, *want)
    np.testing.assert_array_equal(got[3], [len(a), len(b)])
    np.testing.assert_array_equal(want[3], [len(a), len(b)])
    np.testing.assert_array_equal(got[0][:, :n], want[0][:, :n])
    np.testing.assert_array_equal(got[1][:n], want[1][:n])
    np.testing.assert_array_equal(got[2], want[2])
    if dt.kind == "f":
        np.testing.assert_array_equal(np.signbit(got[1][:n]), np.signbit(want[1][:n]))
    # the keys are the coordinates of the union, row-major, and the maxima theirs
    union = np.union1d(flat_a, flat_b).astype(np.int64)
    coords = np.stack(np.unravel_index(union, shape)) if n else np.empty((3, 0), np.int64)
    np.testing.assert_array_equal(got[0][:, :n], coords)
    np.testing.assert_array_equal(got[2], coords.max(axis=1) if n else [-1, -1, -1])


@pytest.mark.parametrize("piece", [1, 7, 64])
def test_merge_add_in_pieces(rng, piece):
    """Pieces of at most ``piece`` rows, each resuming where the last stopped (``pos``), give the
    reference's whole join; the maxima are each piece's own."""
    shape = (9, 4, 6)
    codec = KeyCodec(shape, (0, 1, 2))
    a, b = (codec.encode(np.stack(np.unravel_index(_keys(rng, n, 216).astype(np.int64), shape))) for n in (90, 70))
    va, vb = rng.standard_normal(len(a)), rng.standard_normal(len(b))
    m = len(a) + len(b)
    want = [np.empty((3, m), np.int64), np.empty(m), np.empty(3, np.int64), np.zeros(2, np.int64)]
    n = linalg_reference.merge_add(a, b, va, vb, 0.0, 0.0, True, True, codec.shifts, codec.widths, *want)
    keys, vals, pos = [], [], np.zeros(2, np.int64)
    while pos[0] < len(a) or pos[1] < len(b):
        k, v, mx = np.empty((3, piece), np.int64), np.empty(piece), np.empty(3, np.int64)
        t = _linalg.merge_add(a, b, va, vb, 0.0, 0.0, True, True, codec.shifts, codec.widths, k, v, mx, pos)
        assert 0 < t <= piece
        np.testing.assert_array_equal(mx, k[:, :t].max(axis=1))
        keys.append(k[:, :t])
        vals.append(v[:t])
    np.testing.assert_array_equal(np.concatenate(keys, axis=1), want[0][:, :n])
    np.testing.assert_array_equal(np.concatenate(vals), want[1][:n])


def test_merge_add_checks_its_arrays():
    codec = KeyCodec((4, 4), (0, 1))
    a = np.array([1, 5], np.uint64)
    v = np.ones(2)
    start = np.zeros(2, np.int64)
    with pytest.raises(ValueError, match="fewer key rows"):
        _linalg.merge_add(a, a, v, v, 0.0, 0.0, True, True, codec.shifts, codec.widths,
                          np.empty((2, 3), np.int64), np.empty(4), np.empty(2, np.int64), start)
    with pytest.raises(ValueError, match="per dimension"):
        _linalg.merge_add(a, a, v, v, 0.0, 0.0, True, True, codec.shifts, codec.widths,
                          np.empty((3, 4), np.int64), np.empty(4), np.empty(3, np.int64), start)
    with pytest.raises(ValueError, match="pos must"):
        _linalg.merge_add(a, a, v, v, 0.0, 0.0, True, True, codec.shifts, codec.widths,
                          np.empty((2, 4), np.int64), np.empty(4), np.empty(2, np.int64), np.array([3, 0]))


@pytest.mark.parametrize("na,nb", [(0, 4), (40, 33), (5, 0)])
def test_merge_join_bytes(rng, na, nb):
    a, b = _keys(rng, na, 1 << 40), _keys(rng, nb, 1 << 40)
    if na and nb:
        b[: min(len(a), len(b)) // 2] = a[: min(len(a), len(b)) // 2]
        b = np.unique(b)
    ab, bb = a.astype(">u8").view(np.uint8).reshape(-1, 8), b.astype(">u8").view(np.uint8).reshape(-1, 8)
    got = [np.empty(len(a) + len(b), np.int64) for _ in range(2)]
    want = [np.empty(len(a) + len(b), np.int64) for _ in range(2)]
    n = _linalg.merge_join_bytes(ab, bb, *got)
    assert n == linalg_reference.merge_join_bytes(ab, bb, *want)
    np.testing.assert_array_equal(got[0][:n], want[0][:n])
    np.testing.assert_array_equal(got[1][:n], want[1][:n])
    # ...and the same as the packed-key join
    packed = [np.empty(len(a) + len(b), np.int64) for _ in range(2)] + [np.empty(len(a) + len(b), np.uint64)]
    assert _linalg.merge_join(a, b, *packed) == n
    np.testing.assert_array_equal(packed[0][:n], got[0][:n])


@pytest.mark.parametrize("dtype", VALUE_TYPES)
def test_split_rows(rng, dtype):
    n = 200
    rows, cols = rng.integers(0, 30, n), rng.integers(0, 9, n)
    vals = _values(rng, n, dtype)
    got = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, vals.dtype))
    want = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, vals.dtype))
    assert _linalg.split_rows(rows, cols, vals, 13, *got) == linalg_reference.split_rows(rows, cols, vals, 13, *want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", VALUE_TYPES)
@pytest.mark.parametrize("n", [16, 3, 1])
def test_spmm_coo(rng, dtype, n):
    nnz, m, k = 500, 40, 25
    rows, cols = rng.integers(0, m, nnz), rng.integers(0, k, nnz)  # with repeats: they accumulate
    vals = _values(rng, nnz, dtype)
    dense = np.stack([_values(rng, n, dtype) for _ in range(k)])
    got, want = np.zeros((m, n), vals.dtype), np.zeros((m, n), vals.dtype)
    _linalg.spmm_coo(rows, cols, vals, dense, got)
    linalg_reference.spmm_coo(rows, cols, vals, dense, want)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [16, 5])
@pytest.mark.parametrize("where", ["row", "column"])
def test_spmm_coo_adds_the_entries_before_one_far_outside(rng, n, where):
    """An entry far outside the matrices, some way into a long batch (the kernel looks ahead of
    the entry it adds): every entry before it is added, as the reference adds them, and the
    error names its position."""
    nnz, m, k, bad = 400, 30, 20, 137
    rows, cols = np.sort(rng.integers(0, m, nnz)), rng.integers(0, k, nnz)
    (rows if where == "row" else cols)[bad] = 1 << 60
    vals, dense = rng.standard_normal(nnz), rng.standard_normal((k, n))
    got, want = np.zeros((m, n)), np.zeros((m, n))
    with pytest.raises(IndexError, match=f"position {bad}"):
        _linalg.spmm_coo(rows, cols, vals, dense, got)
    linalg_reference.spmm_coo(rows[:bad], cols[:bad], vals[:bad], dense, want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_spmm_coo_reads_a_read_only_memmap(tmp_path, rng):
    dense = rng.standard_normal((10, 16))
    np.save(tmp_path / "d.npy", dense)
    mm = np.load(tmp_path / "d.npy", mmap_mode="r")
    out = np.zeros((4, 16))
    _linalg.spmm_coo(np.array([0, 3, 3]), np.array([9, 0, 0]), np.array([1.0, 2.0, 0.5]), mm, out)
    np.testing.assert_allclose(out[3], 2.5 * dense[0])


@pytest.mark.parametrize("dtype", VALUE_TYPES)
@pytest.mark.parametrize("n", [50, 4])
def test_spgemm_rows(rng, dtype, n):
    m, k, nnz_a, nnz_b = 30, 20, 150, 60
    a_rows = np.sort(rng.integers(0, m, nnz_a))  # grouped by row, repeats allowed
    a_cols = rng.integers(0, k, nnz_a)
    a_vals = _values(rng, nnz_a, dtype)
    b_r = np.sort(rng.integers(0, k, nnz_b))
    b_cols = rng.integers(0, n, nnz_b)
    b_vals = _values(rng, nnz_b, dtype)
    b_indptr = np.searchsorted(b_r, np.arange(k + 1)).astype(np.int64)
    cap = nnz_a * n
    res = {}
    for name, mod in (("got", _linalg), ("want", linalg_reference)):
        acc, mark, touched = np.zeros(n, a_vals.dtype), np.full(n, -1, np.int64), np.empty(n, np.int64)
        out = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, a_vals.dtype))
        t = mod.spgemm_rows(a_rows, a_cols, a_vals, b_indptr, b_cols, b_vals, acc, mark, touched, *out)
        res[name] = [o[:t] for o in out]
    g, w = res["got"], res["want"]
    np.testing.assert_array_equal(g[0], w[0])
    np.testing.assert_array_equal(g[1], w[1])
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    np.testing.assert_allclose(g[2], w[2], rtol=tol, atol=tol)
    # both against a dense product
    dense_a = np.zeros((m, k), a_vals.dtype)
    np.add.at(dense_a, (a_rows, a_cols), a_vals)
    dense_b = np.zeros((k, n), a_vals.dtype)
    np.add.at(dense_b, (b_r, b_cols), b_vals)
    prod = np.zeros((m, n), a_vals.dtype)
    prod[g[0], g[1]] = g[2]
    np.testing.assert_allclose(prod, dense_a @ dense_b, rtol=tol, atol=tol)


def test_spgemm_rows_refuses_short_outputs():
    one = np.array([0], np.int64)
    with pytest.raises(ValueError, match="too short"):
        _linalg.spgemm_rows(one, one, np.array([1.0]), np.array([0, 2], np.int64), np.array([0, 1], np.int64),
                            np.array([1.0, 1.0]), np.zeros(2), np.full(2, -1, np.int64), np.empty(2, np.int64),
                            np.empty(1, np.int64), np.empty(1, np.int64), np.empty(1))
