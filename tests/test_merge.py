"""merge with several ids tensors and a list of vocab sizes (TensorFlow's sparse_merge list form),
against TensorFlow's recorded case and a NumPy oracle, through the API and the command line."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError

# tensorflow/python/kernel_tests/sparse_ops/sparse_ops_test.py::SparseMergeHighDimTest (its
# unsorted input; the result TensorFlow's test asserts, sorted row-major).
TF_INDICES = np.array([[0, 0], [1, 0], [1, 2], [2, 0], [2, 1], [1, 1]])
TF_IDS0, TF_IDS1 = [0, 13, 10, 33, 32, 14], [12, 4, 0, 0, 1, 30]
TF_VALUES = [-3.0, 4.0, 1.0, 9.0, 5.0, 1.0]
TF_WANT = ([[0, 0, 12], [1, 10, 0], [1, 13, 4], [1, 14, 30], [2, 32, 1], [2, 33, 0]], [-3, 1, 4, 1, 5, 9], (3, 50, 31))


def _tensor(values, indices=TF_INDICES, shape=(3, 3)):
    return sptool.SparseTensor(np.array(indices), np.array(values), shape)


def _oracle(indices, ids_list, values, sizes):
    """sparse_merge by hand: the dense [batch..., V1, ..., VD] sum of each value at its ids."""
    batch = tuple(int(s) for s in indices.max(axis=0)[:-1] + 1)
    dense = np.zeros(batch + tuple(sizes))
    np.add.at(dense, tuple(indices[:, :-1].T) + tuple(np.asarray(ids) for ids in ids_list), values)
    return dense


def test_tensorflows_high_dim_case_through_the_cli(tmp_path):
    paths = []
    for name, t in (("ids0", _tensor(TF_IDS0)), ("ids1", _tensor(TF_IDS1)), ("values", _tensor(TF_VALUES))):
        paths.append(str(tmp_path / f"{name}.parquet"))
        sptool.write(t, paths[-1])
    out = str(tmp_path / "m.parquet")
    r = CliRunner().invoke(cli, ["-q", "merge", *paths, "--vocab-size", "50,31", "-o", out])
    assert r.exit_code == 0, r.output
    got = sptool.read(out)
    np.testing.assert_array_equal(got.indices, TF_WANT[0])
    np.testing.assert_array_equal(got.values, TF_WANT[1])
    assert got.shape == TF_WANT[2]


@pytest.mark.parametrize("seed", range(4))
def test_three_ids_tensors_against_numpy(seed, tmp_path):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, size=12)
    indices = np.array([[r, p] for r in range(12) for p in range(counts[r])], dtype=np.int64).reshape(-1, 2)
    sizes = (7, 3, 5)
    ids_list = [rng.integers(0, v, size=len(indices)) for v in sizes]
    values = rng.standard_normal(len(indices))
    shape = (12, 4)
    got = sptool.merge([_tensor(i, indices, shape) for i in ids_list], _tensor(values, indices, shape),
                       vocab_size=list(sizes))
    assert got.shape == (12,) + sizes and got.sort_order == (0, 1, 2, 3)
    if len(indices):
        np.testing.assert_allclose(got.to_dense(), _oracle(indices, ids_list, values, sizes), rtol=0, atol=1e-12)


def test_one_ids_tensor_takes_a_list_of_one(tmp_path):
    one = sptool.merge([_tensor(TF_IDS0)], _tensor(TF_VALUES), vocab_size=[50])
    plain = sptool.merge(_tensor(TF_IDS0), _tensor(TF_VALUES), vocab_size=50)
    np.testing.assert_array_equal(one.indices, plain.indices)
    assert one.shape == plain.shape == (3, 50)


def test_list_errors(tmp_path):
    ids0, ids1, vals = _tensor(TF_IDS0), _tensor(TF_IDS1), _tensor(TF_VALUES)
    # TensorFlow: ValueError "sp_ids and vocab_size have to have equal lengths."
    with pytest.raises(UsageError, match="--vocab-size .*equal lengths"):
        sptool.merge([ids0, ids1], vals, vocab_size=50)
    with pytest.raises(UsageError, match="--vocab-size .*equal lengths"):
        sptool.merge(ids0, vals, vocab_size=[50, 31])
    with pytest.raises(UsageError, match="--vocab-size must be >= 0"):
        sptool.merge([ids0, ids1], vals, vocab_size=[50, -1])
    with pytest.raises(DataError, match=r"id 33 is outside \[0, 31\)"):
        sptool.merge([ids1, ids0], vals, vocab_size=[50, 31])
    elsewhere = TF_INDICES.copy()
    elsewhere[-1] = [2, 2]
    moved = _tensor(TF_IDS1, elsewhere)
    with pytest.raises(DataError, match="same sparsity pattern"):
        sptool.merge([ids0, moved], vals, vocab_size=[50, 31])
    src = str(tmp_path / "ids1.parquet")
    sptool.write(_tensor(TF_IDS1[:5], TF_INDICES[:5]), src)
    with pytest.raises(DataError, match="Dimensions 5 and 6 are not compatible") as err:
        sptool.merge([ids0, src], vals, vocab_size=[50, 31])
    assert err.value.path == src
    out = str(tmp_path / "m.parquet")
    r = CliRunner().invoke(cli, ["merge", src, src, src, "--vocab-size", "50", "-o", out])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "equal lengths" in r.output, r.output
    assert not os.path.exists(out)
