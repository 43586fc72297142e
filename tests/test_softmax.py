"""softmax against a hand-written softmax of the dense oracle over the stored cells."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.ops.softmax import softmax


def oracle(t):
    K = t.sparse_ndim
    d = dense_oracle(t).astype(np.float64)
    stored = np.zeros(t.shape[:K], dtype=bool)
    if t.nnz:
        stored[tuple(t.indices.T)] = True
    mask = np.broadcast_to(stored.reshape(stored.shape + (1,) * (len(t.shape) - K)), t.shape)
    x = np.where(mask, d, -np.inf)
    with np.errstate(all="ignore"):
        top = x.max(axis=K - 1, keepdims=True)
        e = np.where(mask, np.exp(d - top), 0.0)
        out = e / e.sum(axis=K - 1, keepdims=True)
    out[~mask] = t.fill_value
    return out


def _run(tmp_path, t, **kw):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    out = str(tmp_path / "out.parquet")
    softmax(src, out, **kw)
    assert sptool.validate(out).valid
    s = sptool.read(out)
    assert s.canonical and s.dtype == t.dtype
    return s


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("shape,K", [((6, 5, 4), 3), ((9, 7), 2), ((5, 4, 3), 2), ((12, 3), 1)])
def test_matches_oracle(tmp_path, rng, dtype, shape, K):
    rtol = {"float64": 1e-12, "float32": 1e-5, "float16": 3e-3}[dtype]
    for duplicates in (False, True):
        t = random_tensor(rng, shape, 40, dtype=dtype, sparse_ndim=K, duplicates=duplicates)
        s = _run(tmp_path, t)
        np.testing.assert_allclose(s.to_dense().astype(np.float64), oracle(t), rtol=rtol, atol=rtol)
        assert s.nnz == len(np.unique(t.indices, axis=0))


def test_across_batches_and_sort_runs(tmp_path, rng, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 64, 13)
    for sort in (True, False):
        t = random_tensor(rng, (4, 3, 60), 500, duplicates=True, sort=sort)
        s = _run(tmp_path, t)
        np.testing.assert_allclose(s.to_dense(), oracle(t), rtol=1e-12, atol=1e-12)


def test_empty_and_special_values(tmp_path, rng):
    for shape in [(3, 0), (4, 5)]:
        t = random_tensor(rng, shape, 0)
        assert _run(tmp_path, t).nnz == 0
    t = sptool.SparseTensor([[0, 0], [0, 3], [1, 1], [2, 0], [2, 2]], [1000.0, 1001.0, -5.0, np.inf, 1.0], (3, 4))
    s = _run(tmp_path, t)
    np.testing.assert_allclose(s.values[:3], [1 / (1 + np.e), np.e / (1 + np.e), 1.0])
    assert np.isnan(s.values[3]) or s.values[3] == 1.0  # inf - inf: NumPy's NaN, as TensorFlow


def test_errors_and_cli(tmp_path, rng):
    ints = random_tensor(rng, (4, 5), 6, dtype="int32")
    sptool.write(ints, str(tmp_path / "i.parquet"))
    with pytest.raises(UsageError, match="float values"):
        softmax(str(tmp_path / "i.parquet"), str(tmp_path / "o.parquet"))
    vec = random_tensor(rng, (9,), 4)
    sptool.write(vec, str(tmp_path / "v.parquet"))
    r = CliRunner().invoke(cli, ["softmax", str(tmp_path / "v.parquet"), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "Input should have rank >= 2" in r.output and r.output.count("\n") == 1
    r = CliRunner().invoke(cli, ["softmax", str(tmp_path / "i.parquet"), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "float" in r.output
    assert not (tmp_path / "o.parquet").exists()
    t = random_tensor(rng, (5, 6), 12)
    sptool.write(t, str(tmp_path / "t.parquet"))
    r = CliRunner().invoke(cli, ["-q", "softmax", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(sptool.read(str(tmp_path / "o.parquet")).to_dense(), oracle(t))
