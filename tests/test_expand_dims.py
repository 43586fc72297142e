"""expand_dims against np.expand_dims of the dense oracle; sort order mapping; hybrid blocks."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.ops.expand_dims import expand_dims, insert_in_order


def _run(tmp_path, t, axis, out="out.parquet"):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    dst = str(tmp_path / out)
    expand_dims(src, dst, axis=axis)
    assert sptool.validate(dst).valid
    return sptool.read(dst)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -4])
@pytest.mark.parametrize("layout", ["canonical", "unsorted-dups", "empty", "one"])
def test_matches_numpy(tmp_path, rng, tiny_batches, axis, layout):
    nnz = {"canonical": 50, "unsorted-dups": 50, "empty": 0, "one": 1}[layout]
    t = random_tensor(rng, (5, 4, 3), nnz, duplicates=layout == "unsorted-dups", sort=layout == "canonical")
    s = _run(tmp_path, t, axis)
    want = np.expand_dims(dense_oracle(t), axis)
    assert s.shape == want.shape and s.sparse_ndim == 4
    np.testing.assert_array_equal(s.to_dense(), want)
    a = axis % 4
    np.testing.assert_array_equal(s.indices, np.insert(t.indices, a, 0, axis=1))
    np.testing.assert_array_equal(s.values, t.values)
    assert s.unique == t.unique
    if t.canonical:
        assert s.canonical


def test_default_axis_is_last(tmp_path, rng):
    t = random_tensor(rng, (5, 4), 10)
    assert _run(tmp_path, t, -1).shape == (5, 4, 1)


def test_sort_order_mapping():
    assert insert_in_order((0, 1, 2), 0) == (0, 1, 2, 3)
    assert insert_in_order((0, 1, 2), 2) == (0, 1, 2, 3)
    assert insert_in_order((0, 1, 2), 3) == (0, 1, 2, 3)
    assert insert_in_order((2, 1, 0), 1) == (3, 2, 1, 0)  # column-major stays column-major
    assert insert_in_order((1, 0, 2), 1) == (2, 0, 3, 1)
    assert insert_in_order((), 1) == ()
    assert insert_in_order((1,), 0) == (0, 2)


def test_column_major_input_keeps_a_true_order(tmp_path, rng):
    t = random_tensor(rng, (6, 5, 4), 60)
    sptool.write(t, str(tmp_path / "in.parquet"))
    sptool.reorder(str(tmp_path / "in.parquet"), str(tmp_path / "cm.parquet"), perm=(2, 1, 0))
    expand_dims(str(tmp_path / "cm.parquet"), str(tmp_path / "o.parquet"), axis=1)
    s = sptool.read(str(tmp_path / "o.parquet"))
    assert s.sort_order == (3, 2, 1, 0) and sptool.validate(str(tmp_path / "o.parquet")).valid


@pytest.mark.parametrize("axis", [0, 1, 2, 3, 4, -1, -2, -3, -5])
def test_hybrid(tmp_path, rng, tiny_batches, axis):
    t = random_tensor(rng, (6, 5, 3, 2), 40, sparse_ndim=2, dtype="int16", duplicates=True)
    s = _run(tmp_path, t, axis)
    want = np.expand_dims(dense_oracle(t), axis)
    a = axis % 5
    assert s.shape == want.shape and s.sparse_ndim == (3 if a <= 2 else 2)
    np.testing.assert_array_equal(s.to_dense(), want)


def test_strings_and_names(tmp_path):
    t = sptool.SparseTensor([[1, 0], [0, 2]], np.array(["p", "q"], dtype=object), (2, 3),
                            dimension_names=("a", "b"))
    s = _run(tmp_path, t, 1)
    assert s.indices.tolist() == [[1, 0, 0], [0, 0, 2]] and s.values.tolist() == ["p", "q"]
    assert s.meta.dimension_names == ("a", None, "b")


@pytest.mark.parametrize("axis", [4, -5, 100])
def test_axis_out_of_range(tmp_path, rng, axis):
    t = random_tensor(rng, (3, 4, 5), 10)
    with pytest.raises(UsageError, match=r"out of range .*valid: -4..3"):
        _run(tmp_path, t, axis)
    assert not os.path.exists(tmp_path / "out.parquet")


def test_cli_and_unknown_shape_stream(tmp_path, rng):
    t = random_tensor(rng, (7, 6), 30, duplicates=True)
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    r = CliRunner().invoke(cli, ["expand-dims", src, "--axis", "5"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "out of range" in r.stderr
    # reset-shape streams out with the shape in the trailer; expand-dims must carry the real extents.
    r = CliRunner().invoke(cli, ["-q", "reset-shape", src, "-o", "-"])
    r = CliRunner().invoke(cli, ["-q", "expand-dims", "-", "--axis", "0", "-o", str(tmp_path / "o.parquet")],
                           input=r.stdout_bytes)
    assert r.exit_code == 0, r.stderr
    s = sptool.read(str(tmp_path / "o.parquet"))
    tight = tuple(int(m) + 1 for m in t.indices.max(axis=0))
    assert s.shape == (1,) + tight and sptool.validate(str(tmp_path / "o.parquet")).valid
