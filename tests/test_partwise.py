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
from sptool.ops.concat import ConcatParts
from sptool.ops.reduce import Reduce
from sptool.ops.validate import ValidateParts
from sptool.stream.engine import run_parts
from sptool.stream.reorder import Reorder

BUDGET = budget_of("256MiB")


def _write_parts(t: SparseTensor, directory, pieces: int, rng, *, sort: bool = False) -> list[str]:
    """``t``'s rows dealt into ``pieces`` part files of one dataset (each a valid tensor of t's
    shape), each part's rows row-major with ``sort``."""
    os.makedirs(directory)
    owner = rng.integers(0, pieces, size=t.nnz)
    paths = []
    for i in range(pieces):
        rows = np.flatnonzero(owner == i)
        if sort:
            rows = rows[np.lexsort(t.indices[rows].T[::-1])]
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
    sptool.reorder(str(tmp_path / "t"), str(tmp_path / "whole.parquet"), perm=order, duplicates=duplicates)
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
    # Unique parts in an order (a claim of unique rows in none is not acted on: TensorMeta.trusted).
    parts_a = _write_parts(a, tmp_path / "a", 3, rng, sort=True)
    parts_b = _write_parts(b, tmp_path / "b", 2, rng, sort=True)
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


def _stored_rows(parts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A dataset's (indices, values) in dataset order: its parts' rows, part after part."""
    tensors = [sptool.read(p) for p in parts]
    return np.concatenate([t.indices for t in tensors]), np.concatenate([t.values for t in tensors])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat_part_by_part(tmp_path, rng, axis):
    shapes = [(5, 4, 3), (5, 4, 3), (5, 4, 3)]
    shapes = [tuple(d + i if j == axis else d for j, d in enumerate(s)) for i, s in enumerate(shapes)]
    tensors = [random_tensor(rng, s, 30, duplicates=True) for s in shapes]
    parts = [_write_parts(t, tmp_path / f"op{i}", 2 + i % 2, rng) for i, t in enumerate(tensors)]
    dirs = [str(tmp_path / f"op{i}") for i in range(3)]
    metas = [sptool.read(d).meta for d in dirs]
    run_parts(ConcatParts(metas, axis), parts, str(tmp_path / "parts.parquet"), budget=BUDGET)
    sptool.concat(dirs, str(tmp_path / "whole.parquet"), axis=axis)
    got, whole = sptool.read(str(tmp_path / "parts.parquet")), sptool.read(str(tmp_path / "whole.parquet"))
    assert np.array_equal(got.indices, whole.indices)
    assert np.array_equal(got.values, whole.values)
    assert got.shape == whole.shape and got.sort_order == (0, 1, 2)
    # NumPy oracles: the dense concatenation, and every operand's rows (in dataset order) shifted
    # by the sizes before it and stably sorted row-major.
    # (duplicates add in dataset order, not in the order they were dealt to the parts)
    np.testing.assert_allclose(got.to_dense(), np.concatenate([dense_oracle(t) for t in tensors], axis=axis),
                               rtol=1e-12)
    rows, vals = [], []
    offset = 0
    for group, shape in zip(parts, shapes):
        idx, v = _stored_rows(group)
        idx = idx.copy()
        idx[:, axis] += offset
        offset += shape[axis]
        rows.append(idx)
        vals.append(v)
    rows, vals = np.concatenate(rows), np.concatenate(vals)
    perm = np.lexsort(rows.T[::-1])  # stable
    assert np.array_equal(got.indices, rows[perm])
    assert np.array_equal(got.values, vals[perm])


def test_concat_part_by_part_expands_other_dimensions(tmp_path, rng):
    a, b = random_tensor(rng, (6, 3), 12), random_tensor(rng, (4, 5), 10)
    parts = [_write_parts(a, tmp_path / "a", 2, rng), _write_parts(b, tmp_path / "b", 3, rng)]
    metas = [sptool.read(str(tmp_path / d)).meta for d in ("a", "b")]
    meta = run_parts(ConcatParts(metas, 0, expand_nonconcat=True), parts, str(tmp_path / "parts.parquet"),
                     budget=BUDGET)
    assert meta.shape == (10, 5) and meta.unique  # both operands unique: claimed and verified by the sink
    expected = np.zeros((10, 5))
    expected[:6, :3], expected[6:, :5] = dense_oracle(a), dense_oracle(b)
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "parts.parquet")).to_dense(), expected)


def test_concat_part_by_part_refuses_a_part_unlike_its_operand(tmp_path, rng):
    a, b = random_tensor(rng, (6, 3), 12), random_tensor(rng, (4, 3), 10)
    parts_a = _write_parts(a, tmp_path / "a", 2, rng)
    parts_b = _write_parts(b, tmp_path / "b", 2, rng)
    metas = [sptool.read(str(tmp_path / d)).meta for d in ("a", "b")]
    with pytest.raises(UsageError, match=r"shape \(4, 3\) but its operand \(position 0\) has \(6, 3\)"):
        run_parts(ConcatParts(metas, 0), [parts_a + parts_b[:1], parts_b[1:]], str(tmp_path / "out.parquet"),
                  budget=BUDGET)
    assert not (tmp_path / "out.parquet").exists()


def _report_of(directory, **kw) -> tuple[dict, object]:
    """validate's report of a directory, and the same dataset validated part by part."""
    parts = [os.path.join(directory, n) for n in sorted(os.listdir(directory))]
    whole = sptool.validate(str(directory), **kw)
    got = run_parts(ValidateParts(str(directory), **kw), parts, None, budget=BUDGET)
    assert got.report.as_dict() == whole.as_dict()
    return whole.as_dict(), got


def _numpy_claims(rows: np.ndarray) -> tuple[bool, bool]:
    """(sorted row-major, no repeated coordinate) of rows in dataset order, by NumPy."""
    diffs = np.diff(rows, axis=0)
    # Row-major order between neighbours: the first non-zero difference is positive.
    lead = np.array([d[np.flatnonzero(d)[0]] if d.any() else 0 for d in diffs])
    return bool(np.all(lead >= 0)), len(np.unique(rows, axis=0)) == len(rows)


@pytest.mark.parametrize("mode", [{}, {"metadata_only": True}, {"deep": True}])
def test_validate_part_by_part_of_sorted_ranges(tmp_path, rng, mode):
    t = random_tensor(rng, (9, 7, 5), 200)
    parts = _write_ranges(t, tmp_path / "t", 4)
    report, got = _report_of(tmp_path / "t", **mode)
    assert report["valid"] and report["nnz"] == t.nnz
    assert _numpy_claims(_stored_rows(parts)[0]) == (True, True)
    assert (got.sort_order, got.unique) == ((0, 1, 2), True)


def test_validate_part_by_part_finds_the_seams(tmp_path, rng):
    t = random_tensor(rng, (9, 7), 120)
    # Each part sorted and unique on its own, the parts' ranges in descending order: a seam goes down.
    parts = _write_ranges(t, tmp_path / "down", 3)
    for i, p in enumerate(parts):
        os.rename(p, os.path.join(tmp_path / "down", f"x{i}"))
    for i in range(3):
        os.rename(os.path.join(tmp_path / "down", f"x{i}"), parts[2 - i])
    report, got = _report_of(tmp_path / "down")
    assert report["valid"]
    assert _numpy_claims(_stored_rows(parts)[0]) == (False, True)
    assert (got.sort_order, got.unique) == ((), False)
    # Sorted ranges whose seam repeats a coordinate: sorted as a whole, not unique.
    rows = np.lexsort(t.indices.T[::-1])
    idx, vals = t.indices[rows], t.values[rows]
    os.makedirs(tmp_path / "seam")
    cut = len(idx) // 2
    halves = [(idx[:cut], vals[:cut]), (np.concatenate([idx[cut - 1:cut], idx[cut:]]),
                                        np.concatenate([vals[cut - 1:cut], vals[cut:]]))]
    seam_parts = []
    for i, (ix, v) in enumerate(halves):
        path = os.path.join(tmp_path / "seam", part_name(i))
        sptool.write(SparseTensor(ix, v, t.shape, sort_order=(0, 1), unique=True), path)
        seam_parts.append(path)
    report, got = _report_of(tmp_path / "seam")
    assert report["valid"]
    assert _numpy_claims(_stored_rows(seam_parts)[0]) == (True, False)
    assert (got.sort_order, got.unique) == ((0, 1), False)
    # Parts dealt at random: no order claimed, so none derived.
    _write_parts(t, tmp_path / "dealt", 3, rng)
    report, got = _report_of(tmp_path / "dealt")
    assert report["valid"] and (got.sort_order, got.unique) == ((), False)


def test_validate_part_by_part_reports_what_validate_reports(tmp_path, rng):
    t = random_tensor(rng, (9, 7), 80)
    parts = _write_ranges(t, tmp_path / "t", 3)
    # A part of another shape (group D), and a part that is not Parquet at all (group A).
    sptool.write(random_tensor(rng, (9, 8), 10), parts[1])
    with open(parts[2], "wb") as f:
        f.write(b"not parquet")
    report, got = _report_of(tmp_path / "t", strict=True)
    codes = {c["code"]: c["location"]["part"] for c in report["checks"]}
    assert codes["E_PART_METADATA_MISMATCH"] == os.path.basename(parts[1])
    assert codes["E_NOT_PARQUET"] == os.path.basename(parts[2])
    assert not report["valid"] and (got.sort_order, got.unique) == ((), False)
