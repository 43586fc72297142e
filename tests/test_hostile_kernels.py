"""Every compiled kernel called directly with hostile arguments: offsets outside their arrays, empty
inputs, shifts of 64 or more, lengths that disagree, structures that contradict each other.  Each
call must raise ValueError or IndexError (the kernels' two kinds of refusal) with a message, and
leave the memory around its arrays alone: none may crash, hang or read or write outside them.

The expected outcome of each call is the kernel's documented contract, not a recorded result."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sptool import _checks, _cross, _journal, _kernels, _linalg, _optim, _reduce, _textparse, _tfrecord, _widekeys

I64 = np.int64
U64 = np.uint64


def a(*values, dtype=I64):
    return np.array(values, dtype=dtype)


def z(*shape, dtype=I64):
    return np.zeros(shape, dtype=dtype)


def refuses(call, match: str | None = None):
    with pytest.raises((ValueError, IndexError), match=match) as info:
        call()
    assert str(info.value)  # a message, not a bare exception
    return info.value


# -- _kernels --------------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", [10**9, -1, 17, -(2**63)])
@pytest.mark.parametrize("m", [1, 3])
def test_scatter_add_refuses_an_offset_outside_out(offset, m):
    out = z(17, m, dtype=np.float64)
    e = refuses(lambda: _kernels.scatter_add(a(0, offset), np.ones((2, m)), out))
    assert isinstance(e, IndexError) and f"offset {offset} at position 1" in str(e)
    np.testing.assert_array_equal(out[0], 1)  # the rows before it were added, nothing else touched
    assert out.sum() == m


def test_scatter_or_refuses_an_offset_outside_out():
    out = z(4, 2, dtype=np.uint8)
    refuses(lambda: _kernels.scatter_or(a(10**9), np.ones((1, 2), np.uint8), out), "outside")
    assert not out.any()


@pytest.mark.parametrize("keys, shape", [
    ([[0, 3]], [3]),          # an index at the dimension's size
    ([[0, -1]], [3]),         # a negative index
    ([[1], [2**40]], [4, 5]),  # a huge one, which would have wrapped the sum
])
def test_linear_offsets_refuses_an_index_outside_the_shape(keys, shape):
    keys = np.array(keys, dtype=I64)
    refuses(lambda: _kernels.linear_offsets(keys, np.array(shape, dtype=I64), z(keys.shape[1])), "outside")


def test_linear_offsets_refuses_a_shape_beyond_int64_and_mismatched_lengths():
    refuses(lambda: _kernels.linear_offsets(z(2, 1), a(2**62, 4), z(1)), "int64")
    refuses(lambda: _kernels.linear_offsets(z(2, 1), a(-3, 4), z(1)), "negative")
    refuses(lambda: _kernels.linear_offsets(z(2, 3), a(3, 4), z(2)), "mismatch")


@pytest.mark.parametrize("shift", [64, 65, -1, 2**40])
def test_pack_keys_refuses_a_shift_outside_0_63(shift):
    refuses(lambda: _kernels.pack_keys(z(1, 4), a(0), a(shift), a(0), z(4, dtype=U64)), "shift")


@pytest.mark.parametrize("shift, width", [(64, 1), (-1, 1), (0, 65), (0, -1)])
def test_unpack_keys_refuses_a_shift_or_width_outside_their_range(shift, width):
    refuses(lambda: _kernels.unpack_keys(z(4, dtype=U64), a(0), a(shift), a(width), z(1, 4)), "shift|width")


def test_or_shifted_refuses_a_negative_shift():
    refuses(lambda: _kernels.or_shifted(z(4), -1, 1, z(4, dtype=U64), True), "shift")


# A key that needs more bits than its field (or is negative) would spill into its neighbour's
# field and sort the rows out of order: every packer refuses it, naming the first such key.
@pytest.mark.parametrize("value", [8, -1, 2**62])
def test_every_key_packer_refuses_a_key_wider_than_its_field(value):
    keys = np.array([[1, 2, value, 3], [0, 1, 2, 3]], dtype=I64)
    order, shifts, widths = a(0, 1), a(2, 0), a(3, 2)  # dimension 0 in 3 bits, 1 in 2 bits
    packers = [
        lambda: _kernels.pack_keys(keys, order, shifts, widths, z(4, dtype=U64)),
        lambda: _kernels.or_shifted(keys[0], 2, 3, z(4, dtype=U64), True),
        lambda: _widekeys.pack_keys(keys, order, a(66, 0), widths, z(4, 2, dtype=U64)),
        lambda: _widekeys.or_shifted(keys[0], 66, 3, z(4, 2, dtype=U64), False),
    ]
    for pack in packers:
        refuses(pack, f"key {value} at position 2 does not fit its field of 3 bits")


@pytest.mark.parametrize("shift, width", [(60, 5), (0, 65), (3, -1)])
def test_key_packers_refuse_a_field_outside_the_key(shift, width):
    refuses(lambda: _kernels.pack_keys(z(1, 4), a(0), a(shift), a(width), z(4, dtype=U64)), "outside")
    refuses(lambda: _kernels.or_shifted(z(4), shift, width, z(4, dtype=U64), True), "outside")
    refuses(lambda: _widekeys.or_shifted(z(4), shift + 64, width, z(4, 2, dtype=U64), True), "outside")


@pytest.mark.parametrize("pos_bits", [64, 100, -1])
def test_tag_and_untag_positions_refuse_pos_bits_outside_0_63(pos_bits):
    refuses(lambda: _kernels.tag_positions(z(4, dtype=U64), pos_bits, z(4, dtype=U64)), "pos_bits")
    refuses(lambda: _kernels.untag_positions(z(4, dtype=U64), pos_bits, z(4), z(4, dtype=U64)), "pos_bits")


def test_tag_positions_refuses_what_the_tag_cannot_hold():
    # 5 positions need 3 bits; a key of 62 bits has no room above 3.
    refuses(lambda: _kernels.tag_positions(z(5, dtype=U64), 2, z(5, dtype=U64)), "positions")
    refuses(lambda: _kernels.tag_positions(a(1, 2**62, dtype=U64), 3, z(2, dtype=U64)), "key")


def test_bucket_counts_refuses_a_negative_shift():
    refuses(lambda: _kernels.bucket_counts(z(3, dtype=U64), -1, z(4)), "shift")


def test_columns_max_refuses_empty_columns():
    refuses(lambda: _kernels.columns_max([z(0), z(0)]), "empty")
    assert _kernels.columns_max([]) == []


def test_rows_of_a_misaligned_view_are_refused():
    raw = np.zeros(200, np.uint8)
    keys = np.lib.stride_tricks.as_strided(raw.view(I64)[:1], shape=(1, 5), strides=(8, 12))
    refuses(lambda: _kernels.first_out_of_bounds(keys, a(3)), "strided")
    refuses(lambda: _kernels.first_order_violation(keys, a(0), True), "strided")


@pytest.mark.parametrize("call", [
    lambda: _kernels.first_out_of_bounds(z(2, 3), a(3)),
    lambda: _kernels.first_order_violation(z(1, 3), a(1), True),
    lambda: _kernels.first_order_violation(z(2, 3), a(0), True, z(3, 1)),
    lambda: _kernels.column_minmax(z(0)),
    lambda: _kernels.radix_argsort(z(3, dtype=U64), z(2), z(3, dtype=U64)),
    lambda: _kernels.bucket_counts(a(9, dtype=U64), 0, z(4)),
    lambda: _kernels.scatter_rows(a(0, 1, dtype=U64), z(2, dtype=U64), 0, 1, a(0, 5), z(2, dtype=U64),
                                  z(2, dtype=U64)),
    lambda: _kernels.merge_runs(z(3, dtype=U64), a(0), a(4), z(3, dtype=U64), z(3), 0),
    lambda: _kernels.merge_runs(z(3, dtype=U64), a(0), a(3), z(3, dtype=U64), z(3), 1),
    lambda: _kernels.columns_out_of_bounds([z(3), z(2)], a(1, 1)),
    lambda: _kernels.columns_order_violation([z(3)], a(2), True),
    lambda: _kernels.columns_scan([z(3)], a(1, 1), a(0), True),
], ids=["oob-shape", "order-dim", "prev-shape", "minmax-empty", "radix-lengths", "bucket-outside", "scatter-room",
        "run-outside", "merge-room", "columns-lengths", "columns-order", "scan-shape"])
def test_checked_kernels_stay_checked(call):
    """Kernels that checked their arguments before: they must go on refusing."""
    refuses(call)


# -- _reduce ---------------------------------------------------------------------------------------

def _group_cells(columns, n, bounds=None, strides=None, width=4):
    C = len(columns)
    bounds = a(*([4] * C)) if bounds is None else bounds
    strides = a(*([1] * C)) if strides is None else strides
    return _reduce.group_cells(columns, n, bounds, 0, strides, width, z(max(n, 1)), z(max(n, 1) + 1))


def test_group_cells_refuses_columns_that_are_not_n_int64_rows():
    refuses(lambda: _group_cells([z(2)], 1000), "rows")
    refuses(lambda: _group_cells([z(4), z(3)], 4), "differ")
    with pytest.raises((ValueError, TypeError)):
        _group_cells([np.zeros(4, np.int32)], 4)
    refuses(lambda: _group_cells([z(4)[::2]], 2))  # not contiguous


def test_group_cells_refuses_strides_that_overflow_and_a_negative_n():
    refuses(lambda: _group_cells([z(2), z(2)], 2, bounds=a(2**40, 2**40), strides=a(2**40, 1)), "strides")
    refuses(lambda: _group_cells([z(2)], 2, strides=a(-1)), "strides")
    refuses(lambda: _reduce.group_cells([], -1, a(), 0, a(), 1, z(0), z(0)), "n entries")
    refuses(lambda: _group_cells([z(3)], 3, width=2**62), "int64")


def _block_sum(columns, n, bounds, strides, extents, E, m=1):
    return _reduce.group_block_sum(columns, n, bounds, strides, extents, np.ones((n, m)), z(E, m, dtype=float), z(E),
                                   z(E, m, dtype=float), z(E), z(1 + len(extents), n), z(n, m, dtype=float), z(n))


def test_group_block_sum_refuses_hostile_columns_strides_and_extents():
    refuses(lambda: _block_sum([z(1), z(1)], 5, a(4, 4), a(0, 1), a(4), 4), "rows")
    refuses(lambda: _block_sum([z(2), z(2)], 2, a(4, 2**40), a(0, 2**40), a(4), 4), "strides")
    refuses(lambda: _block_sum([z(2), z(2)], 2, a(4, 4), a(0, 1), a(-2, -2), 4), "extents")


def test_group_block_sum_with_no_slots_takes_the_general_path():
    code, g = _block_sum([z(2), z(2)], 2, a(4, 1), a(0, 1), a(0), 0)
    assert (code, g) == (-2, 0)  # the first row's slot is outside the block: none was touched


def test_compact_cells_refuses_negative_extents():
    refuses(lambda: _reduce.compact_cells(z(2), 0, 2, 2, 0, a(-1, -2), z(2, 1, dtype=float), z(3, 2),
                                          z(2, 1, dtype=float), z(2)), "extents")


@pytest.mark.parametrize("call", [
    lambda: _reduce.run_starts(z(1, 3), a(1), z(4)),
    lambda: _reduce.segment_sum(np.ones((3, 1)), a(0, 5), z(1, 1, dtype=float)),
    lambda: _reduce.segment_max(np.ones((3, 1)), a(0, 2, 1, 3), z(3, 1, dtype=float)),
    lambda: _reduce.segment_softmax(np.ones((3, 1)), a(0, 3), z(2, 1, dtype=float)),
    lambda: _reduce.scatter_sum(a(10**9), 0, np.ones((1, 1)), z(4, 1, dtype=float), z(4)),
    lambda: _reduce.scatter_prod(a(-1), 0, np.ones((1, 1)), z(4, 1, dtype=float), z(4)),
    lambda: _reduce.scatter_max(a(3), -5, np.ones((1, 1)), z(4, 1, dtype=float), z(4)),
    lambda: _reduce.compact_cells(z(4), 0, 8, 2, 0, a(2), z(4, 1, dtype=float), z(2, 4), z(4, 1, dtype=float),
                                  z(4)),
], ids=["run-dim", "segment-end", "segment-order", "softmax-rows", "scatter-sum", "scatter-prod", "scatter-max",
        "compact-hi"])
def test_checked_reductions_stay_checked(call):
    refuses(call)


# -- _linalg ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [16, 3, 0])
@pytest.mark.parametrize("row, col", [(10**9, 0), (0, 10**9), (-1, 0), (0, -1)])
def test_spmm_coo_refuses_an_entry_outside_the_matrices(n, row, col):
    out = z(4, n, dtype=float)
    e = refuses(lambda: _linalg.spmm_coo(a(0, row), a(0, col), np.ones(2), np.ones((5, n)), out))
    assert "position 1" in str(e)
    assert out[1:].sum() == 0


@pytest.mark.parametrize("row, col", [(10**9, 0), (0, 10**9), (-1, 0), (0, -5)])
def test_sampled_dot_refuses_an_entry_outside_the_matrices(row, col):
    refuses(lambda: _linalg.sampled_dot(a(row), a(col), np.ones((3, 4)), np.ones((5, 4)), z(1, dtype=float)),
            "outside")


def _spgemm(a_rows, a_cols, indptr, b_cols, n=4, cap=64):
    nnz, nb = len(a_rows), len(b_cols)
    out = z(cap), z(cap), z(cap, dtype=float)
    return _linalg.spgemm_rows(a(*a_rows), a(*a_cols), np.ones(nnz), a(*indptr), a(*b_cols), np.ones(nb),
                               z(n, dtype=float), np.full(n, -1, I64), z(n), *out)


def test_spgemm_rows_refuses_offsets_outside_b():
    refuses(lambda: _spgemm([0], [5], [0, 1, 2], [0, 1]), "column 5")          # A's column: no such row of B
    refuses(lambda: _spgemm([0], [-1], [0, 1, 2], [0, 1]), "column -1")
    refuses(lambda: _spgemm([0], [0], [0, 10**6], [0, 1]), "outside")          # B's row runs past its entries
    refuses(lambda: _spgemm([0], [0], [-5, 1], [0, 1]), "outside")
    refuses(lambda: _spgemm([0], [0], [0, 1], [10**9]), "outside")             # B's column past n
    refuses(lambda: _spgemm([-1], [0], [0, 1], [0]), "negative")               # -1 is the marks' fill


def test_spgemm_rows_refuses_a_row_that_comes_back():
    # Row 0 reaches all 8 columns, row 1 two of them, row 0 again those two: the scan of row 0's marks
    # would find all 8 again for an output sized for 2.
    cols = list(range(8))
    refuses(lambda: _spgemm([0, 1, 0], [0, 1, 1], [0, 8, 10], cols + [0, 1], n=8, cap=12), "repeats")


@pytest.mark.parametrize("call", [
    lambda: _linalg.merge_join(z(3, dtype=U64), z(1, dtype=U64), z(2), z(4), z(4, dtype=U64)),
    lambda: _linalg.merge_add(z(2, dtype=U64), z(2, dtype=U64), np.ones(2), np.ones(2), 0.0, 0.0, True, True,
                              a(64), a(1), z(1, 4), z(4, dtype=float), z(1), z(2)),
    lambda: _linalg.merge_add(z(2, dtype=U64), z(2, dtype=U64), np.ones(2), np.ones(2), 0.0, 0.0, True, True,
                              a(0), a(1), z(1, 4), z(4, dtype=float), z(1), a(3, 0)),
    lambda: _linalg.merge_join_bytes(z(2, 3, dtype=np.uint8), z(2, 4, dtype=np.uint8), z(4), z(4)),
    lambda: _linalg.split_rows(z(3), z(2), np.ones(3), 1, z(3), z(3), np.ones(3)),
], ids=["join-room", "add-shift", "add-pos", "join-widths", "split-lengths"])
def test_checked_linalg_kernels_stay_checked(call):
    refuses(call)


# -- _cross ----------------------------------------------------------------------------------------

def _hashed(ptr, feats, offsets, g0, g1):
    n = g1 - g0
    return _cross.cross_hashed(np.ascontiguousarray(ptr, dtype=I64), np.asarray(feats, U64), a(*offsets), g0, g1,
                               0, 10, z(n), z(n), z(n))


def _positions(ptr, offsets, g0, g1):
    ptr = np.ascontiguousarray(ptr, dtype=I64)
    n = g1 - g0
    return _cross.cross_positions(ptr, a(*offsets), g0, g1, z(n), z(n), z(len(ptr), n))


def test_cross_kernels_refuse_ptr_outside_feats():
    # Two rows of two inputs; the second row's features of input 0 lie past the 4 features.
    ptr = [[0, 1, 100], [2, 3, 4]]
    refuses(lambda: _hashed(ptr, z(4), [0, 1, 100], 0, 100), "outside feats|crosses")
    refuses(lambda: _hashed([[0, 1, 2], [-7, 3, 4]], z(4), [0, 10, 11], 0, 11), "crosses|outside")


def test_cross_kernels_refuse_offsets_that_contradict_ptr():
    # Row 0 has no features in input 1, so no crosses, but offsets give it 3: a division by zero
    # and reads past the row before.
    ptr = [[0, 2, 3], [0, 0, 1]]
    refuses(lambda: _hashed(ptr, z(3), [0, 3, 4], 0, 4), "crosses")
    refuses(lambda: _positions(ptr, [0, 3, 4], 0, 4), "crosses")
    # Offsets that promise more crosses than the rows have: the walk would run past the last row.
    refuses(lambda: _positions([[0, 1, 2]], [0, 1, 5], 0, 5), "crosses")
    refuses(lambda: _positions([[0, 1, 2]], [0, 3, 1], 0, 1), "decrease|crosses")
    refuses(lambda: _positions(np.zeros((1, 1)), [7], 0, 3), "no rows")


def test_cross_counts_refuses_a_decreasing_ptr():
    refuses(lambda: _cross.cross_counts(np.array([[0, 5, 2]], dtype=I64), z(2)), "decreases")


def test_cross_kernels_still_cross_what_they_check():
    """The checks refuse only contradictions: a valid piece of a row's crosses still walks."""
    ptr = np.array([[0, 2, 2, 5], [5, 6, 6, 8]], dtype=I64)  # row 1 has no features in either input
    counts = z(3)
    assert _cross.cross_counts(ptr, counts) == -1
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(I64)
    n = int(offsets[-1])
    rows, cols, pos = z(n - 1), z(n - 1), z(2, n - 1)
    _cross.cross_positions(ptr, offsets, 1, n, rows, cols, pos)
    want = [(r, c, p0, p1) for r in range(3) for c, (p0, p1) in
            enumerate((i, j) for i in range(ptr[0, r], ptr[0, r + 1]) for j in range(ptr[1, r], ptr[1, r + 1]))]
    assert list(zip(rows, cols, pos[0], pos[1])) == want[1:]


@pytest.mark.parametrize("call", [
    lambda: _cross.modulo(z(2, dtype=U64), 0, z(2, dtype=U64)),
    lambda: _cross.fingerprint64(a(0, 9), z(4, dtype=np.uint8), z(1, dtype=U64)),
    lambda: _cross.fingerprint64(a(3, 1), z(4, dtype=np.uint8), z(1, dtype=U64)),
    lambda: _cross.fingerprint_cat(z(2, dtype=U64), z(3, dtype=U64), z(2, dtype=U64)),
    lambda: _positions([[0, 1]], [0, 1], 0, 2),
], ids=["modulo-zero", "fp-past-data", "fp-decreasing", "cat-lengths", "walk-past-total"])
def test_checked_cross_kernels_stay_checked(call):
    refuses(call)


# -- _textparse ------------------------------------------------------------------------------------

def _parse(data: bytes, vkind=_textparse.V_FLOAT, delim=0, comment=0, base=0, cap=4):
    return _textparse.parse_lines(np.frombuffer(data, np.uint8), True, 1, vkind, base, delim, comment, z(1, cap),
                                  z(2 * cap, dtype=float), z(cap))


@pytest.mark.parametrize("kwargs", [dict(vkind=9), dict(delim=300), dict(comment=-1), dict(base=-5)])
def test_parse_lines_refuses_arguments_outside_their_range(kwargs):
    refuses(lambda: _parse(b"1 2.5\n", **kwargs))


def test_parse_svmlight_stops_at_the_end_of_its_outputs():
    data = np.frombuffer(b"1 1:1 2:2 3:3 4:4 5:5\n", np.uint8)
    keys, vals = np.full((2, 2), -7, I64), np.full(2, -7.0)
    result = _textparse.parse_svmlight(data, False, keys, vals, z(1, dtype=float), z(2), z(1), z(1, dtype=np.uint8))
    assert result[4] == _textparse.ERR_FULL
    assert result[1] == 2


# -- _tfrecord -------------------------------------------------------------------------------------

def _u8(data: bytes):
    return np.frombuffer(data, np.uint8)


INTS = bytes([0x0A, 3, 1, 2, 3])  # an Int64List: one packed field of the values 1, 2, 3
FLOATS = bytes([0x0A, 8]) + np.array([1.5, -2], np.float32).tobytes()


def test_read_numbers_refuses_more_values_than_counted():
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(0), a(5), 1, _tfrecord.K_INT64), "more than 1")
    refuses(lambda: _tfrecord.read_numbers(_u8(FLOATS), a(0), a(10), 1, _tfrecord.K_FLOAT), "more than 1")
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(0), a(5), 5, _tfrecord.K_INT64), "3 values, not 5")


@pytest.mark.parametrize("data", [
    bytes([0x0A, 2, 0x80, 0x80]),   # a packed varint that never ends
    bytes([0x08, 0x80]),            # so does a single one
    bytes([0x0A, 9, 1]),            # a packed field longer than the list
    bytes([0x0D, 1, 2]),            # a float cut short (int64 lists skip it: a wrong wire type)
    bytes([0x80]),                  # a tag cut short
])
@pytest.mark.parametrize("kind", ["K_INT64", "K_FLOAT"])
def test_read_numbers_refuses_a_list_cut_short(data, kind):
    refuses(lambda: _tfrecord.read_numbers(_u8(data), a(0), a(len(data)), 2, getattr(_tfrecord, kind)))


def test_read_numbers_and_bytes_refuse_spans_outside_the_buffer_and_odd_floats():
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(0), a(10**6), 3, _tfrecord.K_INT64), "outside")
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(-4), a(5), 3, _tfrecord.K_INT64), "outside")
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(3), a(2), 0, _tfrecord.K_INT64), "outside")
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(0, 0), a(5), 3, _tfrecord.K_INT64), "one end")
    refuses(lambda: _tfrecord.read_numbers(_u8(INTS), a(0), a(5), 3, 7), "kind")
    refuses(lambda: _tfrecord.read_numbers(_u8(bytes([0x0A, 3, 0, 0, 0])), a(0), a(5), 1, _tfrecord.K_FLOAT))
    refuses(lambda: _tfrecord.read_bytes(_u8(INTS), a(0), a(10**6), 1), "outside")


def test_read_bytes_refuses_more_values_than_counted_and_a_list_cut_short():
    data = bytes([0x0A, 2, 65, 66, 0x0A, 1, 67])  # a BytesList of b"AB", b"C"
    offsets, raw = _tfrecord.read_bytes(_u8(data), a(0), a(7), 2)
    assert offsets.tolist() == [0, 2, 3] and raw.tobytes() == b"ABC"
    refuses(lambda: _tfrecord.read_bytes(_u8(data), a(0), a(7), 1), "more than 1")
    refuses(lambda: _tfrecord.read_bytes(_u8(data), a(0), a(7), 3), "2 values, not 3")
    refuses(lambda: _tfrecord.read_bytes(_u8(data[:5]), a(0), a(5), 2), "well-formed")


def test_locate_features_refuses_records_and_names_outside_their_buffers():
    names, ends = _u8(b"ids"), a(3)
    refuses(lambda: _tfrecord.locate_features(_u8(INTS), a(0), a(10**6), names, ends), "outside")
    refuses(lambda: _tfrecord.locate_features(_u8(INTS), a(-10), a(5), names, ends), "outside")
    refuses(lambda: _tfrecord.locate_features(_u8(INTS), a(0, 1), a(5), names, ends), "one end")
    refuses(lambda: _tfrecord.locate_features(_u8(INTS), a(0), a(5), names, a(300)), "name_ends")
    refuses(lambda: _tfrecord.locate_features(_u8(INTS), a(0), a(5), _u8(b"abc"), a(2, 1)), "name_ends")


def _column(kind=_tfrecord.K_INT64, starts=(0, 2), ints=(1, 2), floats=(), boffsets=(), bdata=b""):
    return (kind, _u8(b"f"), a(*starts), a(*ints), np.array(floats, np.float32), a(*boffsets), _u8(bdata))


@pytest.mark.parametrize("column", [
    _column(starts=(0, 1000)),                                       # values past the ints
    _column(starts=(3, 1)),                                          # decreasing
    _column(starts=(-5, 1)),
    _column(kind=_tfrecord.K_FLOAT, starts=(0, 2), floats=(1.0,)),
    _column(kind=_tfrecord.K_BYTES, starts=(0, 1), boffsets=(0, 500), bdata=b"ab"),  # bytes past the data
    _column(kind=_tfrecord.K_BYTES, starts=(0, 2), boffsets=(0, 2, 1), bdata=b"ab"),
    _column(kind=_tfrecord.K_NONE),
    _column(kind=9),
], ids=["past-ints", "decreasing", "negative", "past-floats", "past-bytes", "bytes-decreasing", "kind-none",
        "kind-9"])
def test_encode_examples_refuses_columns_that_point_outside_their_arrays(column):
    refuses(lambda: _tfrecord.encode_examples(1, [column]))


def test_encode_examples_refuses_a_negative_row_count():
    refuses(lambda: _tfrecord.encode_examples(-1, []), "rows")


@pytest.mark.parametrize("counts", [(2, 5), (-1, 4), (1, 1)])
def test_order_within_rows_refuses_counts_that_are_not_the_ids(counts):
    refuses(lambda: _tfrecord.order_within_rows(a(*counts), a(3, 2, 1)), "counts")


@pytest.mark.parametrize("ids, start", [((-1,), 0), ((2**62,), 0), ((0,), -8)])
def test_crc32c_pieces_refuse_rows_outside_a_file(ids, start):
    rows = np.ones((1, 16), np.uint8)
    refuses(lambda: _tfrecord.crc32c_pieces(rows, a(*ids), start, 4096, 2))
    refuses(lambda: _tfrecord.first_unmatched_row(rows, rows, z(1, 2, dtype=np.uint32), a(*ids), start, 4096))


def test_scan_records_stops_at_a_length_past_the_end():
    head = (2**62).to_bytes(8, "little")
    data = head + _tfrecord.masked_crc32c(_u8(head)).to_bytes(4, "little") + b"x" * 20
    _, lengths, end, status, next_length = _tfrecord.scan_records(_u8(data))
    assert (len(lengths), end, status, next_length) == (0, 0, _tfrecord.OK, 2**62)


# -- _checks ---------------------------------------------------------------------------------------

def test_footer_walk_does_not_spin_on_a_map_of_countless_empty_entries():
    """A map field whose 2**62 entries are bools, which take no bytes: the walk ends at once (with
    what reading every entry would give), in a child process, so that a spin fails instead of hanging."""
    count = 2**62
    varint = bytearray()
    while count >= 0x80:
        varint.append(count & 0x7F | 0x80)
        count >>= 7
    varint.append(count)
    footer = bytes([0x1B]) + bytes(varint) + bytes([0x11, 0x00])  # field 1: map<bool, bool>; stop
    code = f"from sptool import _checks; print(_checks.footer_chunks({footer!r})[0])"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "0"


def test_footer_walk_refuses_a_footer_cut_short():
    refuses(lambda: _checks.footer_chunks(bytes([0x19, 0xFC])), "ends")  # a list of 15+ elements, no count


def test_read_struct_refuses_hostile_bytes():
    assert isinstance(refuses(lambda: _checks.read_struct(b"\x00", 2)), IndexError)
    assert isinstance(refuses(lambda: _checks.read_struct(b"\x00", -1)), IndexError)
    refuses(lambda: _checks.read_struct(b""), "ends")
    # A list claiming 2**62 elements over 3 bytes: refused when the bytes end, not read for ever.
    refuses(lambda: _checks.read_struct(bytes([0x19, 0xF5]) + bytes([0xFF] * 8) + bytes([0x3F, 1, 2, 3])), "ends")
    refuses(lambda: _checks.read_struct(bytes([0x1C] * 200)), "nests too deeply")  # structs in structs
    refuses(lambda: _checks.read_struct(bytes([0x15]) + bytes([0xFF] * 9) + bytes([0x02])), "wider than 64 bits")
    refuses(lambda: _checks.read_struct(bytes([0x1B, 0x01, 0x11, 0x00])), "unsupported Thrift type 11")


# -- _journal and _optim ---------------------------------------------------------------------------

def test_journal_copies_never_drop_memory_outside_their_arrays():
    """``release`` gives pages back (MADV_DONTNEED): on anonymous memory that zeroes them, so only
    whole pages of the array itself may be given back, never the bytes around it."""
    page = 4096
    big = np.ones(64 * page, np.uint8)  # large enough for malloc to map it on its own
    inner = big[100:100 + 60 * page].reshape(-1, page)  # starts and ends inside pages of ``big``
    rows = np.arange(len(inner), dtype=I64)
    _journal.gather_rows(inner, rows, np.empty_like(inner), 1)
    _journal.scatter_rows(inner, rows, np.ones_like(inner), 1)
    assert big[:100].all() and big[100 + 60 * page:].all()


@pytest.mark.parametrize("call", [
    lambda: _journal.gather_rows(z(4, 8, dtype=np.uint8), a(0, 4), z(2, 8, dtype=np.uint8)),
    lambda: _journal.gather_rows(z(4, 8, dtype=np.uint8), a(-1), z(1, 8, dtype=np.uint8)),
    lambda: _journal.scatter_rows(z(4, 8, dtype=np.uint8), a(2, 1), z(2, 8, dtype=np.uint8)),
    lambda: _journal.scatter_rows(z(4, 8, dtype=np.uint8), a(1), z(1, 8, dtype=np.uint8), -1),
    lambda: _optim.sgd_rows(z(4, 2, dtype=float), a(9), z(1, 2, dtype=float), z(1, 2, dtype=float), 0.1),
    lambda: _optim.adagrad_rows(z(4, 2, dtype=float), z(3, 2, dtype=float), a(3), z(1, 2, dtype=float),
                                z(1, 2, dtype=float), z(1, 2, dtype=float), 0.1, 1e-8),
    lambda: _optim.adam_rows(*[z(4, 2, dtype=float)] * 3, a(-2), *[z(1, 2, dtype=float)] * 4, 0.1, 0.9, 0.99,
                             1e-8),
], ids=["gather-past", "gather-negative", "scatter-unsorted", "release-negative", "sgd", "adagrad-state", "adam"])
def test_row_copies_and_optimizer_steps_refuse_rows_outside_the_tables(call):
    refuses(call)
