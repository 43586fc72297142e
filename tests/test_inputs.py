"""Every single-input op takes a path, an open source (sptool.open) or an in-memory SparseTensor,
with the same result: in the Python API ops chain without writing the input to a file first."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tensor

import sptool

CASES = {
    "reorder": lambda x, out: sptool.reorder(x, out, order=[1, 0, 2], duplicates="sum"),
    "transpose": lambda x, out: sptool.transpose(x, out),
    "expand_dims": lambda x, out: sptool.expand_dims(x, out, axis=1),
    "retain": lambda x, out: sptool.retain(x, out, where="values > 0"),
    "reshape": lambda x, out: sptool.reshape(x, out, shape=[6, -1]),
    "reset_shape": lambda x, out: sptool.reset_shape(x, out),
    "reduce": lambda x, out: sptool.reduce(x, out, op="sum", axis=1),
    "map_values": lambda x, out: sptool.map_values(x, out, fn="abs"),
    "slice_": lambda x, out: sptool.slice_(x, out, start=[1, 0, 1], size=[3, -1, 2]),
    "softmax": lambda x, out: sptool.softmax(x, out),
    "fill_empty_rows": lambda x, out: sptool.fill_empty_rows(x, out, value=0.5),
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
