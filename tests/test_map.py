"""map against NumPy applied to the dense oracle's stored cells."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.ops.map_values import FUNCTIONS, map_values


def oracle(t, fn, fill=None):
    f = FUNCTIONS[fn]
    d = dense_oracle(t)
    K = t.sparse_ndim
    stored = np.zeros(t.shape[:K], bool)
    if t.nnz:
        stored[tuple(t.indices.T)] = True
    mask = np.broadcast_to(stored.reshape(stored.shape + (1,) * (len(t.shape) - K)), t.shape)
    with np.errstate(all="ignore"):
        mapped = np.asarray(f(d))
        fill = np.asarray(t.fill_value if fill is None else fill)
        out = np.where(mask, mapped, (fill.real if mapped.dtype.kind != "c" else fill).astype(mapped.dtype))
    return out


def _run(tmp_path, t, fn, **kw):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    out = str(tmp_path / "o.parquet")
    r = map_values(src, out, fn=fn, **kw)
    assert sptool.validate(out).valid
    return sptool.read(out), r


def _close(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=2e-3 if a.dtype == np.float16 else 1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "complex128", "uint8"])
@pytest.mark.parametrize("fn", ["abs", "neg", "sign", "square", "sqrt", "tanh", "floor", "round", "expm1"])
def test_matches_numpy(tmp_path, rng, dtype, fn):
    try:
        with np.errstate(all="ignore"):
            FUNCTIONS[fn](np.zeros(1, dtype=dtype))
    except TypeError:
        with pytest.raises(UsageError):
            _run(tmp_path, random_tensor(rng, (3, 3), 2, dtype=dtype), fn)
        return
    for duplicates in (False, True):
        t = random_tensor(rng, (6, 5, 4), 50, dtype=dtype, duplicates=duplicates, sort=not duplicates)
        s, _ = _run(tmp_path, t, fn)
        _close(s.to_dense(), oracle(t, fn))
        if not duplicates:  # indices, order and uniqueness are kept
            np.testing.assert_array_equal(s.indices, t.indices)
            assert s.canonical
        elif fn == "neg":  # additive: rows are kept as they are
            assert s.nnz == t.nnz and not s.unique
        else:
            assert s.unique and s.nnz == len(np.unique(t.indices, axis=0))


def test_hybrid_streams_and_sort_runs(tmp_path, rng, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 64, 13)
    t = random_tensor(rng, (20, 6, 3), 200, sparse_ndim=2, duplicates=True)
    for fn in ("square", "neg", "sin"):
        s, _ = _run(tmp_path, t, fn)
        _close(s.to_dense(), oracle(t, fn))
    b = random_tensor(rng, (7, 7), 30, dtype="bool", duplicates=True)
    s, _ = _run(tmp_path, b, "abs")
    _close(s.to_dense(), oracle(b, "abs"))


def test_fill_changes(tmp_path, rng):
    t = random_tensor(rng, (5, 4), 8)
    with pytest.raises(UsageError, match="allow-fill-change"):
        _run(tmp_path, t, "exp")
    s, r = _run(tmp_path, t, "exp", allow_fill_change=True)
    assert s.fill_value == 1.0 and r["fill_value"] == 1.0
    _close(s.to_dense(), oracle(t, "exp", fill=1.0))
    # A non-zero fill that the function changes, and one it keeps.
    t4 = random_tensor(rng, (5, 4), 8, fill_value=4.0)
    with pytest.raises(UsageError, match="fill value 4.0 to 2.0"):
        _run(tmp_path, t4, "sqrt")
    s, _ = _run(tmp_path, t4, "floor")
    assert s.fill_value == 4.0


def test_empty_and_dtype_rules(tmp_path, rng):
    t = random_tensor(rng, (3, 0), 0, dtype="int32")
    s, r = _run(tmp_path, t, "sqrt")
    assert s.nnz == 0 and r["value_type"] == "float64"
    c = random_tensor(rng, (4, 4), 5, dtype="complex64")
    s, r = _run(tmp_path, c, "abs")
    assert r["value_type"] == "float32"


def test_cli(tmp_path, rng):
    t = random_tensor(rng, (5, 4), 8)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    runner = CliRunner()
    r = runner.invoke(cli, ["map", src, "--fn", "cos", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "--allow-fill-change" in r.output and r.output.count("\n") == 1
    assert not (tmp_path / "o.parquet").exists()
    r = runner.invoke(cli, ["map", src, "--fn", "nosuch"])
    assert r.exit_code == 2
    r = runner.invoke(cli, ["-q", "map", src, "--fn", "square", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 0, r.output
    _close(sptool.read(str(tmp_path / "o.parquet")).to_dense(), oracle(t, "square"))
