"""bincount against TensorFlow's own results (tests/data/tfsparse) and against np.bincount, with
unsorted, duplicated, weighted and streamed inputs."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import small_runs, tiny_budget

import sptool
from sptool.cli import cli
from sptool.errors import DataError, ShapeMismatch, UsageError

TF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tfsparse")
with open(os.path.join(TF, "index.json")) as _f:
    TF_CASES = [c for c in json.load(_f)["cases"] if c["call"]["op"] == "tf.sparse.bincount"]


@pytest.mark.parametrize("memory", [None, 4096], ids=["dense", "sorted"])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("case", TF_CASES, ids=[c["file"] for c in TF_CASES])
def test_matches_tensorflow(case, shuffle, memory, tmp_path, tiny_batches):
    """Over all values (axis 0), ids are counted into a dense array below a cap that --memory
    sets and sorted above it: a 4 KiB budget puts every id of these cases past that cap."""
    d = np.load(os.path.join(TF, case["file"]))
    idx, vals = d["ids_indices"], d["ids_values"]
    if shuffle:
        p = np.random.default_rng(1).permutation(len(vals))
        idx, vals = idx[p], vals[p]
    src = str(tmp_path / "ids.parquet")
    sptool.write(sptool.SparseTensor(idx, vals, tuple(d["ids_shape"])), src)
    call = case["call"]
    out = str(tmp_path / "out.parquet")
    sptool.bincount(src, out, axis=call["axis"], minlength=call["minlength"], binary_output=call["binary_output"],
                    memory=None if memory is None else tiny_budget(memory))
    got = sptool.read(out)
    np.testing.assert_array_equal(got.indices, d["out_indices"])
    np.testing.assert_array_equal(got.values, d["out_values"])
    assert got.values.dtype == d["out_values"].dtype
    assert got.shape == tuple(int(s) for s in d["out_shape"])


def _ids(rng, shape, nnz, *, dtype=np.int64, hi=40, duplicates=False, shuffle=False):
    flat = rng.choice(shape[0] * shape[1], size=nnz, replace=False)
    idx = np.stack(np.unravel_index(np.sort(flat), shape), axis=1).astype(np.int64)
    vals = rng.integers(0, hi, size=nnz).astype(dtype)
    if duplicates and nnz:
        extra = rng.integers(0, nnz, size=max(1, nnz // 4))
        idx = np.concatenate([idx, idx[extra]])
        vals = np.concatenate([vals, np.zeros(len(extra), dtype)])  # sums keep the ids in range
    if shuffle or duplicates:
        p = rng.permutation(len(idx))
        idx, vals = idx[p], vals[p]
    return sptool.SparseTensor(idx, vals, shape)


def _cells(t):
    """{coordinate: value}, duplicates summed (the format's rule)."""
    cells = {}
    for c, v in zip(map(tuple, t.indices), t.values):
        cells[c] = cells.get(c, 0) + v
    return cells


def oracle(t, *, axis, weights=None, minlength=None, maxlength=None, binary=False):
    """np.bincount per row (axis -1) or over everything (axis 0): a dense array."""
    cells = _cells(t)
    wcells = _cells(weights) if weights is not None else None
    keys = sorted(cells)
    ids = np.array([cells[c] for c in keys], dtype=np.int64)
    w = np.array([wcells[c] for c in keys]) if wcells is not None else None
    rows = np.array([c[0] for c in keys], dtype=np.int64)
    capped = maxlength is not None and maxlength >= 0  # -1 is TensorFlow's "not given"
    if capped:
        keep = ids < maxlength
        ids, rows = ids[keep], rows[keep]
        w = None if w is None else w[keep]
    n = maxlength if capped else max(int(ids.max()) + 1 if len(ids) else 1, minlength or 0)
    if axis == 0:
        out = np.bincount(ids, weights=w, minlength=n)[:n]
        return (out > 0).astype(np.int64) if binary else out
    out = np.stack([np.bincount(ids[rows == r], weights=None if w is None else w[rows == r], minlength=n)[:n]
                    for r in range(t.shape[0])]) if t.shape[0] else np.zeros((0, n))
    return (out > 0).astype(np.int64) if binary else out


@pytest.mark.parametrize("seed", range(8))
def test_random_against_np_bincount(seed, tmp_path, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 16, 5)
    rng = np.random.default_rng(seed)
    t = _ids(rng, (int(rng.integers(1, 20)), 8), int(rng.integers(0, 60)), dtype=[np.int64, np.int32][seed % 2],
             duplicates=seed % 3 == 0, shuffle=seed % 2 == 0)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    out = str(tmp_path / "o.parquet")
    minlength, maxlength = [(None, None), (50, None), (None, 17), (5, 30)][seed % 4]
    for axis in (0, -1):
        for binary in (False, True):
            sptool.bincount(src, out, axis=axis, minlength=minlength, maxlength=maxlength, binary_output=binary)
            got = sptool.read(out)
            assert got.canonical and sptool.validate(out).valid
            want = oracle(t, axis=axis, minlength=minlength, maxlength=maxlength, binary=binary)
            assert got.shape == want.shape
            assert got.values.dtype == t.values.dtype  # TensorFlow counts in the values' type
            np.testing.assert_array_equal(got.to_dense(), want)
            assert got.nnz == np.count_nonzero(want)  # only occurring ids are stored


@pytest.mark.parametrize("wdtype", [np.float32, np.float64, np.int64])
def test_weights(wdtype, tmp_path, tiny_batches):
    rng = np.random.default_rng(9)
    t = _ids(rng, (15, 6), 50, shuffle=True)
    w = sptool.SparseTensor(t.indices[::-1], rng.integers(1, 9, size=t.nnz)[::-1].astype(wdtype), t.shape)
    src, wsrc = str(tmp_path / "t.parquet"), str(tmp_path / "w.parquet")
    sptool.write(t, src)
    sptool.write(w, wsrc)
    for axis in (0, -1):
        got = sptool.bincount(src, weights=wsrc, axis=axis)
        assert got.values.dtype == wdtype
        np.testing.assert_allclose(got.to_dense(), oracle(t, axis=axis, weights=w))
    with pytest.raises(UsageError, match="mutually exclusive"):
        sptool.bincount(src, weights=wsrc, binary_output=True)
    other = sptool.SparseTensor(t.indices[1:], w.values[1:], t.shape)
    sptool.write(other, wsrc)
    with pytest.raises(DataError, match="same indices"):
        sptool.bincount(src, weights=wsrc, axis=-1)
    sptool.write(sptool.SparseTensor(t.indices, w.values, (15, 7)), wsrc)
    with pytest.raises(ShapeMismatch, match="same dense shape"):
        sptool.bincount(src, weights=wsrc)


@pytest.mark.parametrize("weights", [None, np.float32, np.float64, np.int32], ids=str)
@pytest.mark.parametrize("binary", [False, True])
def test_over_all_dense_and_sorted_ids_together(weights, binary, tmp_path, tiny_batches):
    """Small ids go to the dense counts and huge ones (up to 2**62) through the external sort,
    in one call, within a budget that caps the dense array at a few hundred ids: the result is
    np.unique's counts (np.bincount of the inverse for weights, summed in input order as
    TensorFlow's kernel and np.bincount sum them), zero weight sums kept as occurring ids."""
    if binary and weights is not None:
        return
    rng = np.random.default_rng(3)
    n = 3000
    ids = np.where(rng.random(n) < 0.7, rng.integers(0, 600, n), rng.integers(0, 1 << 62, n))
    ids[rng.integers(0, n, 200)] = rng.choice(ids, 200)  # repeats of the huge ids too
    ids[:5] = [0, 1 << 62, 599, 5, 5]
    idx = np.stack([np.arange(n) // 10, np.arange(n) % 10], axis=1)
    t = sptool.SparseTensor(idx, ids, (n // 10, 10))
    w = None
    if weights is not None:
        wv = rng.integers(-3, 4, n).astype(weights)
        if np.dtype(weights).kind == "f":
            wv = (wv * rng.random(n)).astype(weights)
        w = sptool.SparseTensor(idx, wv, t.shape)
    got = sptool.bincount(t, weights=w, binary_output=binary, memory=tiny_budget(64 << 10))
    uniq, inverse = np.unique(ids, return_inverse=True)
    if weights is None:
        want = np.ones(len(uniq), np.int64) if binary else np.bincount(inverse)
    else:
        want = np.zeros(len(uniq), weights)
        for i, v in zip(inverse, w.values):  # input order, in the weights' own type (TensorFlow's)
            want[i] += v
    assert got.shape == (int(ids.max()) + 1,)
    np.testing.assert_array_equal(got.indices[:, 0], uniq)
    # A 64 KiB budget's dense array holds some 450 ids: there each weight is added in input
    # order (bit for bit); the sort path adds each piece's sums, so floats may differ in the last bit.
    dense = uniq < 400
    np.testing.assert_array_equal(got.values[dense], want[dense])
    np.testing.assert_allclose(got.values[~dense], want[~dense], rtol=1e-6 if weights == np.float32 else 1e-12)
    assert got.values.dtype == (np.int64 if weights is None else weights)


def test_empty_and_one_dimensional(tmp_path):
    empty = sptool.SparseTensor(np.empty((0, 2), np.int64), np.empty(0, np.int64), (3, 4))
    got = sptool.bincount(empty, axis=-1)
    assert got.shape == (3, 1) and got.nnz == 0  # TensorFlow's kernel: max(0 + 1, minlength)
    assert sptool.bincount(empty, minlength=6).shape == (6,)
    vec = sptool.SparseTensor([[0], [3], [5]], np.array([4, 4, 1]), (9,))
    got = sptool.bincount(vec)
    np.testing.assert_array_equal(got.to_dense(), np.bincount([4, 4, 1]))


def test_errors_and_cli(tmp_path):
    neg = sptool.SparseTensor([[0, 0], [1, 2]], np.array([3, -2]), (2, 4))
    src = str(tmp_path / "neg.parquet")
    sptool.write(neg, src)
    with pytest.raises(DataError, match=r"\[1,2\] holds -2"):
        sptool.bincount(src, axis=-1)
    with pytest.raises(UsageError, match="Unsupported axis"):
        sptool.bincount(src, axis=1)
    with pytest.raises(UsageError, match="integer ids"):
        sptool.bincount(sptool.SparseTensor([[0, 0]], [1.5], (2, 2)))
    with pytest.raises(UsageError, match="2-D"):
        sptool.bincount(sptool.SparseTensor([[0]], [1], (2,)), axis=-1)
    runner = CliRunner()
    out = str(tmp_path / "o.parquet")
    r = runner.invoke(cli, ["bincount", src, "--axis", "-1", "-o", out])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "holds -2" in r.output and src in r.output
    assert not os.path.exists(out)
    good = str(tmp_path / "good.parquet")
    t = _ids(np.random.default_rng(4), (10, 5), 30)
    sptool.write(t, good)
    r = runner.invoke(cli, ["-q", "bincount", good, "--axis", "-1", "--maxlength", "12", "--binary-output",
                            "-o", out])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(sptool.read(out).to_dense(), oracle(t, axis=-1, maxlength=12, binary=True))


@pytest.mark.parametrize("axis", ["0", "-1"])
def test_cli_maxlength_zero_counts_nothing(axis, tmp_path):
    """--maxlength 0 gives N = 0 (tf.sparse.bincount's [batch, 0] since TensorFlow's fix of
    maxlength=0); leaving it out (or -1, TensorFlow's default) is no cap."""
    src, out = str(tmp_path / "t.parquet"), str(tmp_path / "o.parquet")
    t = _ids(np.random.default_rng(5), (6, 4), 20)
    sptool.write(t, src)
    for extra, maxlength in (["--maxlength", "0"], 0), (["--maxlength", "-1"], None), ([], None):
        r = CliRunner().invoke(cli, ["-q", "bincount", src, "--axis", axis, *extra, "-o", out])
        assert r.exit_code == 0, r.output
        got = sptool.read(out)
        want = oracle(t, axis=int(axis), maxlength=maxlength)
        assert got.shape == want.shape and got.nnz == np.count_nonzero(want)
        np.testing.assert_array_equal(got.to_dense(), want)


def test_ids_too_wide_for_one_code(tmp_path):
    """Ids near 2**61 over two rows: (row, id) codes would overflow int64, so the pairs are sorted
    by two keys instead; the counts are the same."""
    big = 2**61
    t = sptool.SparseTensor([[0, 0], [0, 1], [1, 0], [1, 2], [1, 3]], np.array([big, 5, 5, big, 5]), (2, 4))
    for weights in (None, sptool.SparseTensor(t.indices, np.array([1.5, 2.0, 3.0, 4.0, 5.0]), (2, 4))):
        got = sptool.bincount(t, weights=weights, axis=-1)
        assert got.shape == (2, big + 1)
        want = {(0, 5): 1, (0, big): 1, (1, 5): 2, (1, big): 1} if weights is None else \
            {(0, 5): 2.0, (0, big): 1.5, (1, 5): 8.0, (1, big): 4.0}
        assert {tuple(int(x) for x in i): v for i, v in zip(got.indices, got.values.tolist())} == want


def test_in_a_terminal(tmp_path):
    """A bad id deep in the input: one error line naming it, the bar taken down, no output left."""
    from pty_terminal import cursor_restored, run_in_terminal

    n = 200_000
    rows = np.repeat(np.arange(n // 4), 4)
    ids = np.random.default_rng(0).integers(0, 1000, n)
    ids[n - 10] = -3
    src = str(tmp_path / "ids.parquet")
    sptool.write(sptool.SparseTensor(np.stack([rows, np.tile(np.arange(4), n // 4)], axis=1), ids, (n // 4, 4)), src)
    out = tmp_path / "counts.parquet"
    code, output = run_in_terminal(["sptool", "--memory", "16MiB", "bincount", src, "--axis", "-1", "-o", str(out)],
                                   cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 1, text
    errors = [ln for ln in text.splitlines() if "Error:" in ln]
    assert len(errors) == 1 and "holds -3" in errors[0] and f"[{(n - 10) // 4},{(n - 10) % 4}]" in errors[0], text
    assert cursor_restored(output) and "Traceback" not in text
    assert not out.exists() and not [f for f in os.listdir(tmp_path) if f.startswith(".")]
    ids[n - 10] = 3
    sptool.write(sptool.SparseTensor(np.stack([rows, np.tile(np.arange(4), n // 4)], axis=1), ids, (n // 4, 4)), src)
    code, output = run_in_terminal(["sptool", "bincount", src, "--axis", "-1", "-o", str(out)], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0 and cursor_restored(output) and "bincount" in text, text
    got = sptool.read(str(out))
    head = got.indices[:, 0] < 3
    dense = np.zeros((3, got.shape[1]), np.int64)
    dense[tuple(got.indices[head].T)] = got.values[head]
    np.testing.assert_array_equal(dense, np.stack([np.bincount(ids[4 * r:4 * r + 4], minlength=got.shape[1])
                                                   for r in range(3)]))
