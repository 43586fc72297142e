"""reduce run part by part through ``Reduce``'s ``map_part`` and ``combine``, the pieces the
distributed driver's partial reductions run, gives what the whole-dataset reduce gives, and
what NumPy gives."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from conftest import random_tensor

import sptool
from sptool import SparseTensor, UsageError
from sptool._memory import budget_of
from sptool.io import open_source, part_name
from sptool.ops.reduce import Reduce
from sptool.stream.engine import run

BUDGET = budget_of("256MiB")


def reduce_part_by_part(step: Reduce, parts: list[str], output: str, *, budget) -> None:
    """Each part reduced on its own by ``step.map_part``, the partials combined into ``output``
    by ``step.combine``: what the distributed driver's tasks do, one after another."""
    partials = tempfile.mkdtemp(dir=os.path.dirname(output))
    for i, part in enumerate(parts):
        with open_source(part) as src:
            step.map_part(src, os.path.join(partials, part_name(i)), budget=budget)
    with open_source(partials) as src:
        run(step.combine(src.meta), src, output, budget=budget)


def _write_parts(t: SparseTensor, directory, pieces: int, rng) -> list[str]:
    """``t``'s rows dealt into ``pieces`` part files of one dataset (each a valid tensor of t's
    shape)."""
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


@pytest.mark.parametrize("dtype", ["float64", "int32", "int8"])
@pytest.mark.parametrize("axis", [1, [0, 2]])
def test_reduce_sum_part_by_part(tmp_path, rng, dtype, axis):
    t = random_tensor(rng, (8, 6, 5), 250, dtype=dtype, duplicates=True)
    parts = _write_parts(t, tmp_path / "t", 3, rng)
    reduce_part_by_part(Reduce("sum", axis=axis), parts, str(tmp_path / "parts.parquet"), budget=BUDGET)
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
    reduce_part_by_part(Reduce(op, axis=axis, unique=True), parts, str(tmp_path / "parts.parquet"), budget=BUDGET)
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
            reduce_part_by_part(Reduce(op, axis=1), parts, str(tmp_path / "out.parquet"), budget=BUDGET)
    # A mean of partial means is not the mean, whatever the rows.
    with pytest.raises(UsageError, match="mean does not run part by part"):
        reduce_part_by_part(Reduce("mean", axis=1, unique=True), parts, str(tmp_path / "out.parquet"), budget=BUDGET)
    with pytest.raises(UsageError, match="sparse result"):
        reduce_part_by_part(Reduce("sum"), parts, str(tmp_path / "out.parquet"), budget=BUDGET)
    assert not (tmp_path / "out.parquet").exists()
