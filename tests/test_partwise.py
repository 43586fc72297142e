"""Ops run part by part through their plan / map / combine pieces (sptool.stream.engine), as a
distributed driver runs them, give what the whole-dataset op gives, and what NumPy gives."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import dense_oracle, random_tensor

import sptool
from sptool import SparseTensor, UsageError
from sptool._memory import budget_of
from sptool.io import part_name
from sptool.ops.add import Add
from sptool.ops.reduce import Reduce
from sptool.stream.engine import run_parts
from sptool.stream.reorder import Reorder

BUDGET = budget_of("256MiB")


def _write_parts(t: SparseTensor, directory, pieces: int, rng) -> list[str]:
    """``t``'s rows dealt into ``pieces`` part files of one dataset (each a valid tensor of t's shape)."""
    os.makedirs(directory)
    owner = rng.integers(0, pieces, size=t.nnz)
    paths = []
    for i in range(pieces):
        rows = np.flatnonzero(owner == i)
        # Rows drawn from unique rows are unique: claimed, since unsorted rows are not measured.
        part = SparseTensor(t.indices[rows], t.values[rows], t.shape, fill_value=t.fill_value,
                            unique=True if t.unique else None)
        path = os.path.join(directory, part_name(i))
        sptool.write(part, path)
        paths.append(path)
    return paths


@pytest.mark.parametrize("duplicates", ["keep", "sum", "max", "first", "last"])
@pytest.mark.parametrize("order", [None, (2, 0, 1)])
def test_reorder_part_by_part(tmp_path, rng, order, duplicates):
    t = random_tensor(rng, (9, 7, 5), 300, duplicates=True)
    parts = _write_parts(t, tmp_path / "t", 4, rng)
    run_parts(Reorder(order, duplicates), parts, str(tmp_path / "parts.parquet"), budget=BUDGET)
    sptool.reorder(str(tmp_path / "t"), str(tmp_path / "whole.parquet"), order=order, duplicates=duplicates)
    got, whole = sptool.read(str(tmp_path / "parts.parquet")), sptool.read(str(tmp_path / "whole.parquet"))
    assert np.array_equal(got.indices, whole.indices)
    if duplicates == "sum":
        np.testing.assert_allclose(got.values, whole.values, rtol=1e-12)  # partial sums add in another order
    else:
        assert np.array_equal(got.values, whole.values)
    assert got.sort_order == whole.sort_order
    # NumPy's stable lexsort of the dataset's rows (parts in order) is the oracle for the row order.
    rows = np.concatenate([sptool.read(p).indices for p in parts])
    dims = list(order or range(3))
    expected = rows[np.lexsort(rows[:, dims[::-1]].T)]
    if duplicates == "keep":
        assert np.array_equal(got.indices, expected)
    else:
        once = np.unique(expected, axis=0)
        assert np.array_equal(got.indices, once[np.lexsort(once[:, dims[::-1]].T)])


@pytest.mark.parametrize("dtype", ["float64", "int32", "int8"])
@pytest.mark.parametrize("axis", [1, [0, 2]])
def test_reduce_sum_part_by_part(tmp_path, rng, dtype, axis):
    t = random_tensor(rng, (8, 6, 5), 250, dtype=dtype, duplicates=True)
    parts = _write_parts(t, tmp_path / "t", 3, rng)
    run_parts(Reduce("sum", axis=axis), parts, str(tmp_path / "parts.parquet"), budget=BUDGET)
    sptool.reduce(str(tmp_path / "t"), str(tmp_path / "whole.parquet"), op="sum", axis=axis)
    got, whole = sptool.read(str(tmp_path / "parts.parquet")), sptool.read(str(tmp_path / "whole.parquet"))
    assert np.array_equal(got.indices, whole.indices)
    assert got.values.dtype == whole.values.dtype == np.dtype(dtype)
    # NumPy oracle: every stored entry summed over the axes (duplicates included, integers wrap).
    expected = np.zeros(tuple(d for i, d in enumerate(t.shape) if i not in np.atleast_1d(axis)), dtype)
    kept = [i for i in range(3) if i not in np.atleast_1d(axis)]
    with np.errstate(over="ignore"):
        np.add.at(expected, tuple(t.indices[:, kept].T), t.values)
    if dtype == "float64":
        np.testing.assert_allclose(got.values, whole.values, rtol=1e-12)  # partial sums add in another order
        np.testing.assert_allclose(got.values, expected[tuple(got.indices.T)], rtol=1e-12)
    else:
        assert np.array_equal(got.values, whole.values)
        assert np.array_equal(got.values, expected[tuple(got.indices.T)])
    assert np.array_equal(got.indices, np.unique(t.indices[:, kept], axis=0))


def test_add_part_by_part(tmp_path, rng):
    a = random_tensor(rng, (10, 8), 60)
    b = random_tensor(rng, (10, 8), 50, dtype="float32")
    parts_a = _write_parts(a, tmp_path / "a", 3, rng)
    parts_b = _write_parts(b, tmp_path / "b", 2, rng)
    op = Add(sptool.read(str(tmp_path / "a")).meta, sptool.read(str(tmp_path / "b")).meta)
    run_parts(op, parts_a + parts_b, str(tmp_path / "parts.parquet"), budget=BUDGET)
    sptool.add(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "whole.parquet"))
    got, whole = sptool.read(str(tmp_path / "parts.parquet")), sptool.read(str(tmp_path / "whole.parquet"))
    assert np.array_equal(got.indices, whole.indices)
    assert got.values.dtype == whole.values.dtype == np.float64
    assert np.array_equal(got.values, whole.values)
    assert got.meta.canonical
    np.testing.assert_array_equal(got.to_dense(), dense_oracle(a) + dense_oracle(b).astype(np.float64))


def _write_ranges(t: SparseTensor, directory, pieces: int) -> list[str]:
    """``t``'s rows sorted row-major and cut into ``pieces`` contiguous ranges, one part each: a
    globally sorted dataset, unique when ``t`` is (as reorder writes a part directory)."""
    os.makedirs(directory)
    rows = np.lexsort(t.indices.T[::-1])
    paths = []
    for i, take in enumerate(np.array_split(rows, pieces)):
        # Claimed, and verified by the sink as it writes the part.
        part = SparseTensor(t.indices[take], t.values[take], t.shape, fill_value=t.fill_value,
                            sort_order=tuple(range(len(t.shape))), unique=True)
        path = os.path.join(directory, part_name(i))
        sptool.write(part, path)
        paths.append(path)
    return paths


_NUMPY_REDUCE = {"max": np.maximum, "min": np.minimum, "prod": np.multiply}


@pytest.mark.parametrize("op", ["max", "min", "prod", "count"])
@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("axis", [1, [0, 2]])
def test_reduce_of_unique_rows_part_by_part(tmp_path, rng, op, dtype, axis):
    t = random_tensor(rng, (8, 6, 5), 200, dtype=dtype)
    parts = _write_ranges(t, tmp_path / "t", 3)
    # The caller's promise, known here by construction (NumPy confirms it): a dataset's metadata
    # claims nothing across parts.
    assert len(np.unique(t.indices, axis=0)) == t.nnz
    run_parts(Reduce(op, axis=axis, unique=True), parts, str(tmp_path / "parts.parquet"), budget=BUDGET)
    sptool.reduce(str(tmp_path / "t"), str(tmp_path / "whole.parquet"), op=op, axis=axis)
    got, whole = sptool.read(str(tmp_path / "parts.parquet")), sptool.read(str(tmp_path / "whole.parquet"))
    assert np.array_equal(got.indices, whole.indices)
    assert got.values.dtype == whole.values.dtype
    # NumPy oracle: the stored entries of each kept coordinate reduced with the op's ufunc.
    kept = [i for i in range(3) if i not in np.atleast_1d(axis)]
    cells = tuple(t.indices[:, kept].T)
    out_shape = tuple(t.shape[i] for i in kept)
    if op == "count":
        expected = np.zeros(out_shape, np.int64)
        np.add.at(expected, cells, 1)
    else:
        ufunc = _NUMPY_REDUCE[op]
        info = np.finfo(dtype) if dtype == "float64" else np.iinfo(dtype)
        start = {"max": info.min, "min": info.max, "prod": 1}[op]  # each cell's identity
        expected = np.full(out_shape, start, t.values.dtype)
        with np.errstate(over="ignore"):
            ufunc.at(expected, cells, t.values)
    assert np.array_equal(got.indices, np.unique(t.indices[:, kept], axis=0))
    if op == "prod" and dtype == "float64":
        np.testing.assert_allclose(got.values, expected[tuple(got.indices.T)], rtol=1e-12)
        np.testing.assert_allclose(got.values, whole.values, rtol=1e-12)  # partial products in another order
    else:
        assert np.array_equal(got.values, expected[tuple(got.indices.T)])
        assert np.array_equal(got.values, whole.values)


def test_part_by_part_refuses_what_it_cannot_split(tmp_path, rng):
    t = random_tensor(rng, (6, 5), 40)
    parts = _write_parts(t, tmp_path / "t", 2, rng)
    for op in ("max", "min", "prod", "mean", "count"):
        with pytest.raises(UsageError, match=f"{op} does not run part by part"):
            run_parts(Reduce(op, axis=1), parts, str(tmp_path / "out.parquet"), budget=BUDGET)
    # A mean of partial means is not the mean, whatever the rows.
    with pytest.raises(UsageError, match="mean does not run part by part"):
        run_parts(Reduce("mean", axis=1, unique=True), parts, str(tmp_path / "out.parquet"), budget=BUDGET)
    with pytest.raises(UsageError, match="sparse result"):
        run_parts(Reduce("sum"), parts, str(tmp_path / "out.parquet"), budget=BUDGET)
    assert not (tmp_path / "out.parquet").exists()
