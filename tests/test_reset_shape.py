"""reset_shape: the tight bounding box in one pass, explicit shapes checked against the data."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.reset_shape import reset_shape


def _run(tmp_path, t, shape=None, out="out.parquet"):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    dst = os.path.join(str(tmp_path), out)
    reset_shape(src, dst, shape=shape)
    assert sptool.validate(dst).valid
    return sptool.read(dst)


@pytest.mark.parametrize("layout", ["canonical", "unsorted-dups", "empty", "one"])
@pytest.mark.parametrize("out", ["out.parquet", "out.arrows", "outdir/"])
def test_tight_bounding_box(tmp_path, rng, tiny_batches, layout, out):
    nnz = {"canonical": 40, "unsorted-dups": 40, "empty": 0, "one": 1}[layout]
    t = random_tensor(rng, (30, 20, 9), nnz, duplicates=layout == "unsorted-dups", sort=layout == "canonical")
    s = _run(tmp_path, t, out=out)
    want = tuple(int(m) + 1 for m in t.indices.max(axis=0)) if t.nnz else (0, 0, 0)
    assert s.shape == want
    np.testing.assert_array_equal(s.indices, t.indices)
    np.testing.assert_array_equal(s.values, t.values)
    np.testing.assert_array_equal(s.to_dense(), dense_oracle(t)[tuple(slice(0, w) for w in want)])
    assert s.sort_order == t.sort_order and s.unique == t.unique


def test_explicit_shape_grow_and_shrink(tmp_path, rng):
    t = random_tensor(rng, (10, 10), 12, duplicates=True)
    need = t.indices.max(axis=0) + 1
    s = _run(tmp_path, t, (50, 60))
    assert s.shape == (50, 60)
    dense = np.zeros((50, 60))
    dense[:10, :10] = dense_oracle(t)
    np.testing.assert_array_equal(s.to_dense(), dense)
    s = _run(tmp_path, t, tuple(int(x) for x in need), out="tight.parquet")  # smaller than the old shape: allowed
    assert s.shape == tuple(need)


@pytest.mark.parametrize("source", ["parquet", "stream"])
def test_too_small_names_the_dimension(tmp_path, source):
    t = sptool.SparseTensor([[0, 1, 2], [3, 7, 0], [1, 1, 1]], [1.0, 2.0, 3.0], (5, 9, 4))
    src = str(tmp_path / ("in.parquet" if source == "parquet" else "in.arrows"))
    sptool.write(t, src)
    with pytest.raises(DataError, match="dimension 1 of the new shape is 7, but the data needs at least 8"):
        reset_shape(src, str(tmp_path / "o.parquet"), shape=(5, 7, 4))
    assert not os.path.exists(tmp_path / "o.parquet")


def test_stats_reject_before_reading(tmp_path):
    """The footer statistics decide before any row is read: the data pages are overwritten with
    garbage, which any read of the rows would refuse with another message."""
    import pyarrow.parquet as pq

    t = sptool.SparseTensor([[0, 1], [3, 7]], [1.0, 2.0], (5, 9))
    path = tmp_path / "in.parquet"
    sptool.write(t, str(path))
    group = pq.read_metadata(path).row_group(0)
    end = max(group.column(c).data_page_offset + group.column(c).total_compressed_size
              for c in range(group.num_columns))
    data = bytearray(path.read_bytes())
    data[4:end] = b"\xff" * (end - 4)  # every page of the rows, between the magic and the footer
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="dimension 0 .* needs at least 4: a row group"):
        reset_shape(str(path), str(tmp_path / "o.parquet"), shape=(3, 9))
    with pytest.raises(DataError) as read:  # what a read of the rows says
        reset_shape(str(path), str(tmp_path / "o.parquet"), shape=(5, 9))
    assert "needs at least" not in str(read.value)


def test_hybrid_and_strings(tmp_path, rng):
    t = random_tensor(rng, (20, 6, 3), 5, sparse_ndim=2, dtype="float32")
    s = _run(tmp_path, t)
    assert s.shape[2:] == (3,) and s.shape[:2] == tuple(int(m) + 1 for m in t.indices.max(axis=0))
    s = _run(tmp_path, t, (25, 6, 3), out="o2.parquet")
    assert s.shape == (25, 6, 3)
    with pytest.raises(UsageError, match="changes the dense dimensions"):
        _run(tmp_path, t, (25, 6, 4), out="o3.parquet")
    st = sptool.SparseTensor([[2, 0], [0, 3]], np.array(["u", "v"], dtype=object), (9, 9))
    s = _run(tmp_path, st, out="s.parquet")
    assert s.shape == (3, 4) and s.values.tolist() == ["u", "v"]


@pytest.mark.parametrize("shape,message", [((4, 4, 4), "keeps the rank"), ((-1, 4), "negative"),
                                           ((2**63, 2), "past 2\\^63-1")])
def test_bad_shapes(tmp_path, shape, message):
    t = sptool.SparseTensor([[0, 1]], [1.0], (2, 2))
    with pytest.raises(UsageError, match=message):
        _run(tmp_path, t, shape)


def test_cli(tmp_path):
    t = sptool.SparseTensor([[0, 1], [3, 7]], [1.0, 2.0], (5, 9))
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    r = CliRunner().invoke(cli, ["reset-shape", src, "--shape", "5,7", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "dimension 1" in r.stderr
    r = CliRunner().invoke(cli, ["reset-shape", src, "--shape", "5", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "keeps the rank" in r.stderr
    assert not os.path.exists(tmp_path / "o.parquet")
    r = CliRunner().invoke(cli, ["-q", "reset-shape", src, "-o", "-"])
    assert r.exit_code == 0
    (tmp_path / "o.arrows").write_bytes(r.stdout_bytes)
    assert sptool.read(str(tmp_path / "o.arrows")).shape == (4, 8)
    assert sptool.validate(str(tmp_path / "o.arrows")).valid
