"""reshape against np.reshape of the dense oracle, row order and claims, TensorFlow's errors."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.ops.reshape import relinearize, reshape, resolve_shape


def _roundtrip(tmp_path, t, new_shape, out="out.parquet"):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    dst = str(tmp_path / out)
    r = reshape(src, dst, shape=new_shape)
    assert sptool.validate(dst).valid
    return sptool.read(dst), r


def _expected_indices(t, new_sparse):
    K = t.sparse_ndim
    if t.nnz == 0:
        return np.empty((0, len(new_sparse)), dtype=np.int64)
    lin = np.ravel_multi_index(tuple(t.indices.T), t.shape[:K])
    return np.stack(np.unravel_index(lin, new_sparse), axis=1)


CASES = [
    ((6, 4, 5), (12, -1)),
    ((6, 4, 5), (-1,)),
    ((6, 4, 5), (2, 3, 4, 5)),
    ((6, 4, 5), (5, 4, 6)),
    ((1, 1, 7), (7, 1)),
    ((30,), (5, -1, 2)),
    ((0, 3), (3, 0)),
    ((4, 0, 2), (0, 8)),
]


@pytest.mark.parametrize("shape,new", CASES)
@pytest.mark.parametrize("layout", ["sorted", "unsorted-dups", "empty", "one"])
def test_matches_numpy_reshape(tmp_path, rng, tiny_batches, shape, new, layout):
    nnz = {"sorted": 60, "unsorted-dups": 60, "empty": 0, "one": 1}[layout]
    t = random_tensor(rng, shape, nnz, duplicates=layout == "unsorted-dups", sort=layout == "sorted")
    s, r = _roundtrip(tmp_path, t, new)
    want = np.reshape(dense_oracle(t), new)
    assert s.shape == want.shape and r["shape"] == list(want.shape)
    np.testing.assert_array_equal(s.to_dense(), want)
    # Row order is kept: row i of the output is row i of the input, re-indexed.
    np.testing.assert_array_equal(s.indices, _expected_indices(t, want.shape))
    np.testing.assert_array_equal(s.values, t.values)
    assert s.unique == t.unique
    assert s.sort_order == (tuple(range(len(new))) if t.meta.row_major else ())


@pytest.mark.parametrize("dtype", ["int8", "bool", "complex64", "float16"])
def test_value_types_and_canonical_stays_canonical(tmp_path, rng, dtype):
    t = random_tensor(rng, (8, 9), 40, dtype=dtype, sort=True)
    assert t.canonical
    s, _ = _roundtrip(tmp_path, t, (3, 4, 6))
    assert s.canonical and s.values.dtype == t.values.dtype
    np.testing.assert_array_equal(s.to_dense(), dense_oracle(t).reshape(3, 4, 6))


def test_hybrid_keeps_dense_dims(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (6, 4, 3, 2), 30, sparse_ndim=2, duplicates=True)
    for new in [(24, 3, 2), (2, -1, 3, 2), (3, 8, 3, 2)]:
        s, r = _roundtrip(tmp_path, t, new)
        assert s.sparse_ndim == len(new) - 2 and s.shape[-2:] == (3, 2)
        np.testing.assert_array_equal(s.to_dense(), dense_oracle(t).reshape(r["shape"]))
    src = str(tmp_path / "in.parquet")
    with pytest.raises(UsageError, match="must be the new sparse dimensions followed by 3,2"):
        reshape(src, str(tmp_path / "x.parquet"), shape=(24, 6))
    with pytest.raises(UsageError, match="followed by 3,2"):
        reshape(src, str(tmp_path / "x.parquet"), shape=(3, 2))
    assert not os.path.exists(tmp_path / "x.parquet")


def test_rowsparse_sample(tmp_path):
    dst = str(tmp_path / "r.parquet")
    reshape("sample_data/rowsparse.parquet", dst, shape=(10, 10, 8))
    t = sptool.read("sample_data/rowsparse.parquet")
    np.testing.assert_array_equal(sptool.read(dst).to_dense(), dense_oracle(t).reshape(10, 10, 8))


def test_strings(tmp_path):
    idx = np.array([[3, 1], [0, 2], [2, 0]])
    t = sptool.SparseTensor(idx, np.array(["c", "a", "b"], dtype=object), (4, 3))
    s, _ = _roundtrip(tmp_path, t, (2, 6))
    assert s.values.tolist() == ["c", "a", "b"] and s.unique
    np.testing.assert_array_equal(s.indices, [[1, 4], [0, 2], [1, 0]])


def test_products_up_to_int64_max(tmp_path):
    big = 2**31
    shape = (big - 1, big + 1, 2)  # (2^62 - 1) * 2 = 2^63 - 2 elements: linear indices near int64's max
    assert math.prod(shape) <= 2**63 - 1
    idx = np.array([[big - 2, big, 1], [0, 0, 0], [12345, 678, 1]])
    t = sptool.SparseTensor(idx, [1.0, 2.0, 3.0], shape)
    s, _ = _roundtrip(tmp_path, t, (-1, 2))
    lin = [(int(a) * (big + 1) + int(b)) * 2 + int(c) for a, b, c in idx]
    assert s.shape == (math.prod(shape) // 2, 2)
    assert [int(i) * 2 + int(j) for i, j in s.indices] == lin
    s2, _ = _roundtrip(tmp_path, t, (-1,), out="flat.parquet")
    assert [int(i) for i in s2.indices[:, 0]] == lin


def test_relinearize_against_unravel(rng):
    old, new = (7, 11, 13), (13, 77)
    keys = np.stack([rng.integers(0, d, 500) for d in old])
    got = relinearize(keys, old, new)
    want = np.stack(np.unravel_index(np.ravel_multi_index(tuple(keys), old), new))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("new,message", [
    ((-1, -1), "only one output dimension may be -1, not both 0 and 1"),
    ((4, -1, 3, -1), "not both 1 and 3"),
    ((-2, 60), "size 0 must be non-negative, not -2"),
    ((7, 9), "Input to reshape is a tensor with 120 dense values, but the requested shape has 63"),
    ((7, -1), "requested shape requires a multiple of 7"),
    ((), "at least one dimension"),
])
def test_tensorflow_errors(new, message):
    with pytest.raises(UsageError, match=message):
        resolve_shape(new, (6, 4, 5), ())


def test_minus_one_with_zero_sizes():
    with pytest.raises(UsageError, match="cannot infer the missing input size"):
        resolve_shape((0, -1), (0, 3), ())
    assert resolve_shape((3, 0, 5), (0, 3), ()) == (3, 0, 5)


def test_cli_errors_and_pipes(tmp_path, rng):
    t = random_tensor(rng, (6, 4, 5), 50, duplicates=True)
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    r = CliRunner().invoke(cli, ["reshape", src, "--shape", "-1,-1", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "not both 0 and 1" in r.stderr
    assert not os.path.exists(tmp_path / "o.parquet")
    r = CliRunner().invoke(cli, ["reshape", src, "--shape", "7,9"])
    assert r.exit_code == 2 and "120 dense values" in r.stderr
    # stream in, stream out
    stream = str(tmp_path / "in.arrows")
    sptool.write(t, stream)
    with open(stream, "rb") as f:
        r = CliRunner().invoke(cli, ["-q", "reshape", "-", "--shape", "-1,10", "-o", "-"], input=f.read())
    assert r.exit_code == 0, r.stderr
    (tmp_path / "o.arrows").write_bytes(r.stdout_bytes)
    assert sptool.validate(str(tmp_path / "o.arrows")).valid
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "o.arrows")).to_dense(),
                                  dense_oracle(t).reshape(12, 10))


def test_out_of_bounds_input_is_named(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sptool.errors import DataError
    from sptool.format import METADATA_KEY, TensorMeta

    # Row 1 is outside the shape yet inside its element count: relinearizing it would alias row 0.
    meta = TensorMeta(shape=(4, 3), sparse_ndim=2, value_type="float64", nnz=2)
    table = pa.table({"indices_0": pa.array([1, 0], pa.int64()), "indices_1": pa.array([0, 3], pa.int64()),
                      "values": pa.array([1.0, 2.0])}, schema=meta.arrow_schema())
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: meta.to_json()}), str(tmp_path / "bad.parquet"))
    with pytest.raises(DataError, match=r"indices\[1\] = \[0,3\] is out of bounds: need 0 <= index < \[4,3\]"):
        reshape(str(tmp_path / "bad.parquet"), str(tmp_path / "o.parquet"), shape=(-1,))
    assert not os.path.exists(tmp_path / "o.parquet")
