"""Every single-input op takes a path, an open source (sptool.open) or an in-memory SparseTensor,
with the same result, and returns a SparseTensor when given no output: in the Python API ops
chain in memory, without files in between."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tensor

import sptool

CASES = {
    "reorder": lambda x, out: sptool.reorder(x, out, perm=[1, 0, 2], duplicates="sum"),
    "transpose": lambda x, out: sptool.transpose(x, out),
    "expand_dims": lambda x, out: sptool.expand_dims(x, out, axis=1),
    "retain": lambda x, out: sptool.retain(x, out, where="values > 0"),
    "reshape": lambda x, out: sptool.reshape(x, out, shape=[6, -1]),
    "reset_shape": lambda x, out: sptool.reset_shape(x, out),
    "reduce": lambda x, out: sptool.reduce(x, out, op="sum", axis=1),
    "map_values": lambda x, out: sptool.map_values(x, out, fn="abs"),
    "slice_": lambda x, out: sptool.slice_(x, out, start=[1, 0, 1], size=[3, -1, 2]),
    "softmax": lambda x, out: sptool.softmax(x, out),
    "fill_empty_rows": lambda x, out: sptool.fill_empty_rows(x, out, default_value=0.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_path_source_and_tensor_agree(tmp_path, rng, name):
    t = random_tensor(rng, (6, 5, 4), 70, duplicates=True)
    path = str(tmp_path / "in.parquet")
    sptool.write(t, path)
    CASES[name](path, str(tmp_path / "from_path.parquet"))
    with sptool.open(path) as src:
        CASES[name](src, str(tmp_path / "from_source.parquet"))
    CASES[name](sptool.read(path), str(tmp_path / "from_tensor.parquet"))
    want = sptool.read(str(tmp_path / "from_path.parquet"))
    for other in ("from_source", "from_tensor"):
        got = sptool.read(str(tmp_path / f"{other}.parquet"))
        assert got.shape == want.shape and got.sort_order == want.sort_order
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.values, want.values)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["in.parquet", "from_path.parquet", "from_source.parquet", "from_tensor.parquet"])


@pytest.mark.parametrize("name", list(CASES))
def test_no_output_returns_the_tensor_the_file_holds(tmp_path, rng, name):
    t = random_tensor(rng, (6, 5, 4), 70, duplicates=True)
    CASES[name](t, str(tmp_path / "out.parquet"))
    want = sptool.read(str(tmp_path / "out.parquet"))
    got = CASES[name](t, None)
    assert isinstance(got, sptool.SparseTensor)
    assert got.shape == want.shape and got.sort_order == want.sort_order and got.unique == want.unique
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.values, want.values)
    assert got.fill_value == want.fill_value or (np.isnan(got.fill_value) and np.isnan(want.fill_value))


def test_ops_chain_in_memory(rng):
    a = random_tensor(rng, (7, 6), 30)
    b = random_tensor(rng, (7, 6), 25)
    total = sptool.add(sptool.transpose(a, None), sptool.transpose(b, None), None)
    summed = sptool.reduce(total, None, op="sum", axis=0)
    dense = np.zeros((7, 6))
    np.add.at(dense, tuple(a.indices.T), a.values)
    np.add.at(dense, tuple(b.indices.T), b.values)
    np.testing.assert_allclose(summed.to_dense(), dense.T.sum(axis=0))
    assert sptool.eye(4, None, None).nnz == 4
    product = sptool.matmul(a, sptool.transpose(b, None), None)
    np.testing.assert_allclose(product.to_dense(), (a.to_scipy("csr") @ b.to_scipy("csr").T).toarray())
    biggest = sptool.maximum(a, b, None)
    np.testing.assert_array_equal(biggest.to_dense(), np.maximum(a.to_dense(), b.to_dense()))


def test_mul_by_a_dense_file_returns_a_tensor(tmp_path, rng):
    t = random_tensor(rng, (5, 4), 12)
    d = rng.standard_normal((5, 4))
    np.save(tmp_path / "d.npy", d)
    got = sptool.mul(t, str(tmp_path / "d.npy"), None)
    np.testing.assert_allclose(got.to_dense(), t.to_dense() * d)


def test_an_in_memory_result_stays_within_memory(rng):
    from sptool._memory import budget_of

    t = random_tensor(rng, (300, 300), 5000)
    with pytest.raises(sptool.ResourceError, match="larger than --memory"):
        sptool.reorder(t, None, memory=budget_of(None).with_total(10_000))


def test_tensor_input_matches_numpy(tmp_path, rng):
    t = random_tensor(rng, (6, 5, 4), 70, duplicates=True)
    assert np.isclose(sptool.reduce(t, op="sum"), t.values.sum())
    sptool.todense(t, str(tmp_path / "d.npy"))
    dense = np.zeros(t.shape)
    np.add.at(dense, tuple(t.indices.T), t.values)
    np.testing.assert_allclose(np.load(tmp_path / "d.npy"), dense)


def test_an_open_source_stays_open_for_its_owner(tmp_path, rng):
    t = random_tensor(rng, (6, 5), 20)
    path = str(tmp_path / "in.parquet")
    sptool.write(t, path)
    with sptool.open(path) as src:
        first = sptool.reduce(src, op="count")
        assert sptool.reduce(src, op="count") == first == t.nnz  # a Parquet source reads again


def test_other_inputs_are_refused(tmp_path):
    with pytest.raises(sptool.UsageError, match="expected a path, an open source or a SparseTensor"):
        sptool.reorder(42, str(tmp_path / "o.parquet"))
    assert not (tmp_path / "o.parquet").exists()
