"""to_indicator against a loop over the dense oracle's stored cells."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.to_indicator import to_indicator


def _ids_tensor(rng, shape, nnz, V, dtype="int64", duplicates=False, sort=False):
    t = random_tensor(rng, shape, nnz, dtype=dtype, duplicates=duplicates, sort=sort)
    if duplicates:  # keep every summed id within [0, V): the duplicated coordinates get 0 and one id
        seen = {}
        vals = np.zeros(t.nnz, dtype=dtype)
        for i, c in enumerate(map(tuple, t.indices)):
            if c not in seen:
                seen[c] = i
                vals[i] = rng.integers(0, V)
        return sptool.SparseTensor(t.indices, vals, shape)
    return sptool.SparseTensor(t.indices, rng.integers(0, V, size=t.nnz).astype(dtype), shape)


def oracle(t, V):
    d = dense_oracle(t)
    stored = np.zeros(t.shape, bool)
    if t.nnz:
        stored[tuple(t.indices.T)] = True
    out = np.zeros(t.shape[:-1] + (V,), dtype=bool)
    for c in zip(*np.nonzero(stored)):
        out[c[:-1] + (int(d[c]),)] = True
    return out


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("shape", [(6, 5), (4, 3, 7), (9,)])
def test_matches_oracle(tmp_path, rng, dtype, shape):
    V = 6
    for duplicates in (False, True):
        t = _ids_tensor(rng, shape, 25, V, dtype=dtype, duplicates=duplicates)
        src = str(tmp_path / "in.parquet")
        sptool.write(t, src)
        out = str(tmp_path / "o.parquet")
        r = to_indicator(src, out, vocab_size=V)
        assert sptool.validate(out).valid
        s = sptool.read(out)
        assert s.canonical and s.dtype == bool and s.shape == shape[:-1] + (V,) and r["rows_out"] == s.nnz
        want = oracle(t, V)
        np.testing.assert_array_equal(s.to_dense(), want)
        assert s.nnz == want.sum()
        to_indicator(src, str(tmp_path / "o.npy"), vocab_size=V)
        got = np.load(str(tmp_path / "o.npy"))
        assert got.dtype == bool
        np.testing.assert_array_equal(got, want)


def test_streaming_and_sort_runs(tmp_path, rng, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 64, 13)
    for duplicates in (False, True):
        t = _ids_tensor(rng, (30, 20), 400, 11, duplicates=duplicates)
        src = str(tmp_path / "in.parquet")
        sptool.write(t, src)
        to_indicator(src, str(tmp_path / "o.parquet"), vocab_size=11)
        assert sptool.validate(str(tmp_path / "o.parquet")).valid
        np.testing.assert_array_equal(sptool.read(str(tmp_path / "o.parquet")).to_dense(), oracle(t, 11))


def test_empty(tmp_path, rng):
    t = random_tensor(rng, (4, 0), 0, dtype="int64")
    sptool.write(t, str(tmp_path / "e.parquet"))
    to_indicator(str(tmp_path / "e.parquet"), str(tmp_path / "o.parquet"), vocab_size=0)
    s = sptool.read(str(tmp_path / "o.parquet"))
    assert s.shape == (4, 0) and s.nnz == 0


def test_errors_and_cli(tmp_path, rng):
    t = sptool.SparseTensor([[0, 0], [1, 2], [1, 3]], np.array([2, 7, 1]), (2, 4))
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    with pytest.raises(DataError, match=r"indices\[1\] = \[1,2\] has id 7, outside \[0, 5\): vocab size 5 is "
                                        r"smaller than a value"):
        to_indicator(src, str(tmp_path / "o.parquet"), vocab_size=5)
    neg = sptool.SparseTensor([[0, 0]], np.array([-1]), (2, 4))
    sptool.write(neg, str(tmp_path / "n.parquet"))
    with pytest.raises(DataError, match="non-negative"):
        to_indicator(str(tmp_path / "n.parquet"), str(tmp_path / "o.npy"), vocab_size=5)
    runner = CliRunner()
    r = runner.invoke(cli, ["to-indicator", src, "--vocab-size", "5", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 1 and "vocab size 5 is smaller than a value" in r.output and r.output.count("\n") == 1
    floats = random_tensor(rng, (3, 3), 3)
    sptool.write(floats, str(tmp_path / "f.parquet"))
    r = runner.invoke(cli, ["to-indicator", str(tmp_path / "f.parquet"), "--vocab-size", "5", "-o",
                            str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "integer ids" in r.output
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "o.npy").exists()
    with pytest.raises(UsageError):
        to_indicator(src, None, vocab_size=-1)
    r = runner.invoke(cli, ["-q", "to-indicator", src, "--vocab-size", "8", "-o", str(tmp_path / "o.npy")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(str(tmp_path / "o.npy")), oracle(t, 8))
