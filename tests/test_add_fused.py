"""add's fused merge join: _linalg.merge_add filling the columns of a larger buffer (its output
gathered across rounds), and the join writing the sink whole row groups, against the NumPy
reference and a dense sum."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import dense_oracle, random_tensor
from references import linalg as linalg_reference

import sptool
from sptool import _linalg
from sptool.ops.add import add
from sptool.stream.sort import KeyCodec

SHAPE = (1 << 9, 1 << 6, 1 << 4)


def _codes(rng, codec, n):
    flat = np.unique(rng.integers(0, int(np.prod(SHAPE)), n))
    return codec.encode(np.stack(np.unravel_index(flat, SHAPE)))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "complex128"])
@pytest.mark.parametrize("fills", [(0, 0), (2, -3)])
@pytest.mark.parametrize("at", [0, 1, 333])
def test_merge_add_into_a_column_slice(rng, dtype, fills, at):
    """Keys and sums written into keys[:, at:] and out[at:] of larger arrays equal the reference's
    on fresh arrays, on operands interleaving at random; the columns before ``at`` untouched."""
    codec = KeyCodec(SHAPE, (0, 1, 2))
    a, b = _codes(rng, codec, 3000), _codes(rng, codec, 2500)
    b = np.union1d(b, a[::3])  # keys in both operands too
    dt = np.dtype(dtype)
    va, vb = (rng.standard_normal(len(a)) * 9).astype(dt), (rng.standard_normal(len(b)) * 9).astype(dt)
    fa, fb = (dt.type(f) for f in fills)
    za, zb = fills[0] == 0, fills[1] == 0
    m = len(a) + len(b)
    want = [np.empty((3, m), np.int64), np.empty(m, dt), np.empty(3, np.int64), np.zeros(2, np.int64)]
    n = linalg_reference.merge_add(a, b, va, vb, fa, fb, za, zb, codec.shifts, codec.widths, *want)
    keys, out = np.full((3, at + m), -5, np.int64), np.full(at + m, 7, dt)
    maxes, pos = np.empty(3, np.int64), np.zeros(2, np.int64)
    got = _linalg.merge_add(a, b, va, vb, fa, fb, za, zb, codec.shifts, codec.widths, keys[:, at:], out[at:],
                            maxes, pos)
    assert got == n
    np.testing.assert_array_equal(keys[:, at:at + n], want[0][:, :n])
    np.testing.assert_array_equal(out[at:at + n], want[1][:n])
    np.testing.assert_array_equal(maxes, want[2])
    np.testing.assert_array_equal(pos, [len(a), len(b)])
    assert (keys[:, :at] == -5).all() and (out[:at] == 7).all()


def test_merge_add_refuses_strided_columns():
    codec = KeyCodec((4, 4), (0, 1))
    a = np.array([1, 5], np.uint64)
    v = np.ones(2)
    with pytest.raises(ValueError, match="contiguous"):
        _linalg.merge_add(a, a, v, v, 0.0, 0.0, True, True, codec.shifts, codec.widths,
                          np.empty((2, 8), np.int64)[:, ::2], np.empty(4), np.empty(2, np.int64), np.zeros(2, np.int64))


def test_join_gathers_rows_across_rounds(tmp_path, rng, tiny_batches):
    """With rounds bounded by batches of 7 rows and row groups of 5, the fused join's rows are
    gathered across rounds into the sink's groups: the sum is the dense one, the output canonical
    and its row groups whole but the last."""
    ta = random_tensor(rng, (30, 8, 6), 400, sort=True)
    tb = random_tensor(rng, (30, 8, 6), 350, sort=True)
    a, b, out = (str(tmp_path / f) for f in ("a.parquet", "b.parquet", "o.parquet"))
    sptool.write(ta, a)
    sptool.write(tb, b)
    add(a, b, out)
    s = sptool.read(out)
    assert s.canonical and sptool.validate(out).valid
    np.testing.assert_array_equal(s.to_dense(), dense_oracle(ta) + dense_oracle(tb))
    md = pq.read_metadata(out)
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert len(sizes) > 10 and set(sizes[:-1]) == {5} and 0 < sizes[-1] <= 5


def test_merge_add_into_rows_in_reverse_order(rng):
    """Key rows given in reverse order (a negative step from one dimension's row to the next)
    are filled as the reference fills its own."""
    codec = KeyCodec(SHAPE, (0, 1, 2))
    a, b = _codes(rng, codec, 800), _codes(rng, codec, 700)
    va, vb = rng.standard_normal(len(a)), rng.standard_normal(len(b))
    m = len(a) + len(b)
    want = [np.empty((3, m), np.int64), np.empty(m), np.empty(3, np.int64), np.zeros(2, np.int64)]
    n = linalg_reference.merge_add(a, b, va, vb, 0.0, 0.0, True, True, codec.shifts, codec.widths, *want)
    keys = np.full((3, m), -5, np.int64)[::-1]
    out, maxes, pos = np.empty(m), np.empty(3, np.int64), np.zeros(2, np.int64)
    assert _linalg.merge_add(a, b, va, vb, 0.0, 0.0, True, True, codec.shifts, codec.widths, keys, out, maxes,
                             pos) == n
    np.testing.assert_array_equal(keys[:, :n], want[0][:, :n])
    np.testing.assert_array_equal(maxes, want[2])
