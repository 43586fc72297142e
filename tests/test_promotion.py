"""Duplicates sum in the value type (OR for bool, wrap-around for integers) even when an op
computes in a wider type: against the dense oracle, which applies the format's rule."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import dense_oracle

import sptool


@pytest.fixture
def bool_dup(tmp_path):
    t = sptool.SparseTensor([[0, 0], [0, 0], [1, 1]], np.array([True, True, True]), shape=(2, 2))
    sptool.write(t, str(tmp_path / "b.parquet"))
    return t, str(tmp_path / "b.parquet")


@pytest.fixture
def uint8_dup(tmp_path):
    t = sptool.SparseTensor([[0, 0], [0, 0]], np.array([200, 100], np.uint8), shape=(1, 1))
    sptool.write(t, str(tmp_path / "u.parquet"))
    return t, str(tmp_path / "u.parquet")


def test_mul_div_bool_duplicates(tmp_path, bool_dup):
    t, path = bool_dup
    np.save(tmp_path / "d.npy", np.array([[3, 3], [3, 3]]))
    sptool.mul(path, str(tmp_path / "d.npy"), str(tmp_path / "m.parquet"))
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "m.parquet")).to_dense(), dense_oracle(t) * 3)
    sptool.div(path, str(tmp_path / "d.npy"), str(tmp_path / "v.parquet"))
    np.testing.assert_allclose(sptool.read(str(tmp_path / "v.parquet")).to_dense(), dense_oracle(t) / 3)
    assert sptool.validate(str(tmp_path / "m.parquet")).valid


def test_add_dense_and_matmul_bool_duplicates(tmp_path, bool_dup):
    t, path = bool_dup
    np.save(tmp_path / "z.npy", np.zeros((2, 2)))
    np.save(tmp_path / "eye.npy", np.eye(2))
    sptool.add(path, str(tmp_path / "z.npy"), str(tmp_path / "a.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), dense_oracle(t).astype(float))
    sptool.matmul(path, str(tmp_path / "eye.npy"), str(tmp_path / "p.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), dense_oracle(t).astype(float))
    sptool.matmul(str(tmp_path / "eye.npy"), path, str(tmp_path / "q.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "q.npy"), dense_oracle(t).astype(float))


def test_integer_duplicates_wrap_before_promotion(tmp_path, uint8_dup):
    t, path = uint8_dup
    assert dense_oracle(t)[0, 0] == 44  # (200 + 100) mod 256
    np.save(tmp_path / "ones.npy", np.ones((1, 1)))
    sptool.matmul(path, str(tmp_path / "ones.npy"), str(tmp_path / "p.npy"))
    assert np.load(tmp_path / "p.npy")[0, 0] == 44
    assert sptool.reduce(path, op="mean") == 44
