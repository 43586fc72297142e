"""SparseTensor's order and uniqueness, measured lazily in one pass, against NumPy's lexsort and
unique as the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import sptool
from sptool.tensor import detect_order, first_repeat


def _oracle(idx: np.ndarray) -> tuple[bool, bool, bool]:
    """(sorted row-major, sorted row-major without repeats, no repeats at all) by NumPy."""
    is_sorted = bool((idx[np.lexsort(idx.T[::-1])] == idx).all())  # sorting changes nothing
    no_repeats = len(np.unique(idx, axis=0)) == len(idx)
    return is_sorted, is_sorted and no_repeats, no_repeats


def _cases(seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        K = int(rng.integers(1, 4))
        n = int(rng.integers(0, 30))
        hi = int(rng.integers(1, 6))
        idx = rng.integers(0, hi, size=(n, K))
        kind = rng.integers(0, 3)
        if kind == 1:
            idx = idx[np.lexsort(idx.T[::-1])]  # sorted, repeats likely
        elif kind == 2 and n:
            idx = np.unique(idx, axis=0)  # sorted and unique
        yield idx


@pytest.mark.parametrize("seed", range(5))
def test_detected_order_matches_lexsort(seed):
    for idx in _cases(seed):
        is_sorted, strictly, no_repeats = _oracle(idx)
        order, unique = detect_order(idx.T)  # a transposed view: the layout SparseTensor holds
        K = idx.shape[1]
        if is_sorted:
            assert order == tuple(range(K)) and unique == strictly, idx
        else:
            assert order == () and unique is None, idx
        # NumPy's first row equal to an earlier one
        repeats = np.setdiff1d(np.arange(len(idx)), np.unique(idx, axis=0, return_index=True)[1])
        want = int(repeats[0]) if len(repeats) else -1
        assert (want < 0) == no_repeats
        assert first_repeat(np.ascontiguousarray(idx.T), (6,) * K) == want
        # too wide to pack into 64 bits: the byte-string sort keys
        assert first_repeat(np.ascontiguousarray(idx.T), (2**40,) * K) == want
        t = sptool.SparseTensor(idx, np.ones(len(idx)), (6,) * K)
        assert t.sort_order == (tuple(range(K)) if is_sorted else ())
        assert t.canonical == strictly
        assert t.unique == no_repeats  # exact, by a sort, when the rows are in no order
        assert t.meta.unique == no_repeats  # and the metadata knows it from then on


def test_a_claimed_order_is_checked_for_repeats_in_the_same_pass():
    idx = np.array([[0, 1], [1, 1], [0, 2], [2, 2]])  # sorted by column, then row: order (1, 0)
    assert detect_order(idx.T, (1, 0)) == ((1, 0), True)
    assert detect_order(np.array([[0, 1], [0, 1]]).T, (1, 0)) == ((1, 0), False)
    t = sptool.SparseTensor(idx, np.ones(4), (3, 3), sort_order=(1, 0))
    assert t.sort_order == (1, 0) and t.unique and not t.canonical


@pytest.mark.parametrize("repeat", [False, True])
def test_unsorted_rows_cost_no_sort_until_unique_is_asked(repeat):
    rng = np.random.default_rng(3)
    idx = np.unique(rng.integers(0, 1000, size=(500, 2)), axis=0)[rng.permutation(500)[:480]]
    if repeat:
        idx[-1] = idx[7]
    t = sptool.SparseTensor(idx, rng.random(len(idx)), (1000, 1000))
    assert t.meta.sort_order == () and t.meta.unique is False  # the format's "no promise": nothing measured
    assert t.nnz == len(idx) and t.meta.unique is False
    assert t.unique is not repeat  # measured on request, by a sort
    assert t.meta.unique is not repeat and t.unique is not repeat  # and known from then on


def test_written_claims_are_what_is_known(tmp_path):
    rng = np.random.default_rng(4)
    idx = np.unique(rng.integers(0, 50, size=(200, 2)), axis=0)
    shuffled = idx[rng.permutation(len(idx))]
    for rows, want_order, want_unique in [(idx, (0, 1), True), (shuffled, (), False)]:
        path = str(tmp_path / "t.parquet")
        sptool.write(sptool.SparseTensor(rows, np.arange(len(rows), dtype=float), (50, 50)), path)
        back = sptool.read(path)
        assert back.sort_order == want_order and back.meta.unique == want_unique
        assert sptool.validate(path).valid
        np.testing.assert_array_equal(back.indices, rows)


def test_strings_need_unique_coordinates_even_unsorted():
    vals = np.array(["a", "b", "c"], dtype=object)
    with pytest.raises(sptool.DataError, match="cannot hold repeated coordinates"):
        sptool.SparseTensor([[2], [0], [2]], vals, (3,))
    assert sptool.SparseTensor([[2], [0], [1]], vals, (3,)).unique
