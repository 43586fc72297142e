"""concat against np.concatenate of dense oracles: sorted, unsorted, duplicates, hybrid, strings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import WatchedFolder, column_major, dense_oracle, random_tensor, small_runs
from conftest import write_tensor as _write

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.concat import concat

# -P: do not put the working directory (a checkout whose sptool/ has no compiled kernels) first on
# sys.path, so the installed package runs, as a user's `sptool` command would.
SPTOOL = [sys.executable, "-P", "-m", "sptool"]


@pytest.fixture
def tiny_runs(monkeypatch):
    small_runs(monkeypatch, 64, 13)


def _dense(t, shape=None):
    """The oracle of t, padded with its fill value to ``shape`` (expand_nonconcat)."""
    d = dense_oracle(t)
    if shape is None or tuple(shape) == d.shape:
        return d
    out = np.full(shape, t.fill_value, dtype=d.dtype)
    out[tuple(slice(0, s) for s in d.shape)] = d
    return out


def _check(out, want, *, unique):
    s = sptool.read(out)
    got = s.to_dense()
    if want.dtype == object:
        assert got.astype(object).tolist() == want.tolist()
    elif want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)
    assert s.sort_order == tuple(range(s.sparse_ndim))
    assert s.unique == (unique or s.nnz <= 1) and s.canonical == s.unique
    assert sptool.validate(out).valid
    return s


def _inputs(rng, axis, dtype="float64"):
    """Five awkward inputs that agree on every dimension but ``axis``."""
    base = [6, 5, 4]
    specs = [(7, 120, dict(duplicates=True)), (3, 40, dict(sort=True)), (0, 0, {}), (1, 1, {}),
             (9, 90, dict(duplicates=True, sort=True))]
    out = []
    for extent, nnz, kw in specs:
        shape = list(base)
        shape[axis] = extent
        out.append(random_tensor(rng, tuple(shape), nnz, dtype=dtype, **kw))
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float64", "int32", "complex64", "bool"])
def test_matches_np_concatenate(tmp_path, rng, tiny_batches, tiny_runs, axis, dtype):
    ts = _inputs(rng, axis % 3, dtype)
    paths = [_write(tmp_path, f"in{i}.parquet", t) for i, t in enumerate(ts)]
    out = str(tmp_path / "out.parquet")
    r = concat(paths, out, axis=axis)
    want = np.concatenate([dense_oracle(t) for t in ts], axis=axis)
    s = _check(out, want, unique=False)
    assert s.shape == want.shape and r["rows_out"] == sum(t.nnz for t in ts) == r["rows_in"]
    assert r["strategy"] == ("append" if axis % 3 == 0 else "merge")


@pytest.mark.parametrize("axis", [0, 2])
def test_unique_inputs_give_a_canonical_output(tmp_path, rng, tiny_batches, tiny_runs, axis):
    # Out of row-major order, unique in an order one pass checks (an unordered claim is not acted on).
    ts = [column_major(random_tensor(rng, (5, 6, 7), 80)), random_tensor(rng, (5, 6, 7), 60, sort=True),
          random_tensor(rng, (5, 6, 7), 0)]
    paths = [_write(tmp_path, f"in{i}.parquet", t) for i, t in enumerate(ts)]
    out = str(tmp_path / "out.arrows")
    r = concat(paths, out, axis=axis)
    _check(out, np.concatenate([dense_oracle(t) for t in ts], axis=axis), unique=True)
    assert r["canonical"]


def test_sorted_inputs_are_merged_without_sorting(tmp_path, rng, tiny_batches, monkeypatch):
    ts = [random_tensor(rng, (8, 3 + i), 20, sort=True) for i in range(4)]
    paths = [_write(tmp_path, f"in{i}.parquet", t) for i, t in enumerate(ts)]
    small_runs(monkeypatch, 3, 5)  # many merge rounds; a sort would spill its runs
    spill = WatchedFolder(tmp_path / "spill")
    out = str(tmp_path / "o.parquet")
    assert concat(paths, out, axis=1, tmp_dir=spill.path)["sorted_inputs"] == 4
    _check(out, np.concatenate([dense_oracle(t) for t in ts], axis=1), unique=True)
    assert not spill.touched  # merged as they come, nothing sorted
    r = concat(paths[:1] * 3, out, axis=0, tmp_dir=spill.path)
    assert r["strategy"] == "append" and not spill.touched
    _check(out, np.concatenate([dense_oracle(ts[0])] * 3, axis=0), unique=True)
    unsorted = _write(tmp_path, "u.parquet", column_major(random_tensor(rng, (8, 3), 20)))
    concat([unsorted, paths[0]], out, axis=1, tmp_dir=spill.path)
    assert spill.touched  # the same watch sees an input out of order being sorted


def test_expand_nonconcat(tmp_path, rng, tiny_batches, tiny_runs):
    ts = [random_tensor(rng, (4, 6, 2), 30, duplicates=True), random_tensor(rng, (7, 2, 5), 40),
          random_tensor(rng, (3, 1, 1), 2)]
    paths = [_write(tmp_path, f"in{i}.parquet", t) for i, t in enumerate(ts)]
    out = str(tmp_path / "o.parquet")
    with pytest.raises(UsageError, match="Input shapes must match: expected 6 for dimension 1 but got 2 at position 1"):
        concat(paths, out, axis=0)
    r = concat(paths, out, axis=0, expand_nonconcat=True)
    assert r["shape"] == [14, 6, 5]
    want = np.concatenate([_dense(t, (t.shape[0], 6, 5)) for t in ts], axis=0)
    _check(out, want, unique=False)


def test_hybrid(tmp_path, rng, tiny_batches, tiny_runs):
    ts = [random_tensor(rng, (5, 4, 3), 25, sparse_ndim=2, duplicates=True),
          random_tensor(rng, (5, 2, 3), 8, sparse_ndim=2, sort=True)]
    paths = [_write(tmp_path, f"h{i}.parquet", t) for i, t in enumerate(ts)]
    out = str(tmp_path / "o.parquet")
    concat(paths, out, axis=-2)
    _check(out, np.concatenate([dense_oracle(t) for t in ts], axis=1), unique=False)
    with pytest.raises(UsageError, match="axis 2 is a dense dimension"):
        concat(paths[:1] * 2, out, axis=2)
    rows = [random_tensor(rng, (9, 8), 5, sparse_ndim=1), random_tensor(rng, (3, 8), 3, sparse_ndim=1)]
    rpaths = [_write(tmp_path, f"r{i}.parquet", t) for i, t in enumerate(rows)]
    concat(rpaths, out, axis=0)
    _check(out, np.concatenate([dense_oracle(t) for t in rows]), unique=True)


def test_strings(tmp_path, rng, tiny_batches, tiny_runs):
    def strings(shape, n, seed):
        t = random_tensor(np.random.default_rng(seed), shape, n)
        return sptool.SparseTensor(t.indices, np.array([f"s{seed}-{i}" for i in range(t.nnz)], dtype=object), shape)

    ts = [strings((4, 5), 12, 1), strings((4, 2), 5, 2), strings((4, 0), 0, 3)]
    paths = [_write(tmp_path, f"s{i}.parquet", t) for i, t in enumerate(ts)]
    out = str(tmp_path / "o.parquet")
    concat(paths, out, axis=1)
    _check(out, np.concatenate([dense_oracle(t) for t in ts], axis=1), unique=True)


def test_single_input_is_sorted_through(tmp_path, rng, tiny_runs):
    t = random_tensor(rng, (6, 7), 30, duplicates=True)
    out = str(tmp_path / "o.parquet")
    r = concat([_write(tmp_path, "a.parquet", t)], out, axis=1, expand_nonconcat=True)
    assert r["shape"] == [6, 7]
    _check(out, dense_oracle(t), unique=False)


def test_errors(tmp_path, rng):
    a = _write(tmp_path, "a.parquet", random_tensor(rng, (3, 4), 5))
    b = _write(tmp_path, "b.parquet", random_tensor(rng, (3, 4, 2), 5))
    c = _write(tmp_path, "c.parquet", random_tensor(rng, (3, 4), 5, dtype="int32"))
    d = _write(tmp_path, "d.parquet", random_tensor(rng, (3, 5), 5))
    e = _write(tmp_path, "e.parquet", random_tensor(rng, (3, 4), 5, fill_value=1.0))
    out = str(tmp_path / "o.parquet")
    cases = [
        ([a, b], 0, "Ranks of all input tensors must match: expected 2 but got 3 at position 1"),
        ([a, c], 0, "Value types of all input tensors must match: expected float64 but got int32 at position 1"),
        ([a, d], 0, "Input shapes must match: expected 4 for dimension 1 but got 5 at position 1"),
        ([a, e], 0, "Fill values of all input tensors must match"),
        ([a, a], 2, "axis 2 is out of range for 2 dimensions"),
        (["-", "-"], 0, "at most one input may be '-'"),
        ([], 0, "at least one input"),
    ]
    for paths, axis, msg in cases:
        with pytest.raises(UsageError, match=msg.replace("(", r"\(")):
            concat(paths, out, axis=axis)
    assert not os.path.exists(out)
    concat([a, d], out, axis=1)
    assert sptool.read(out).shape == (3, 9)


def _corrupt(tmp_path, name):
    """A file whose row [5, 0] lies outside its declared shape [3, 3]."""
    meta = {"format": "sptool.coo", "version": "1.0.0", "shape": [3, 3], "sparse_ndim": 2, "value_type": "float64",
            "fill_value": 0.0, "nnz": 2, "sort_order": [], "unique": False, "canonical": False}
    schema = pa.schema([pa.field("indices_0", pa.int64(), False), pa.field("indices_1", pa.int64(), False),
                        pa.field("values", pa.float64(), False)], metadata={"sptool": json.dumps(meta)})
    table = pa.table([pa.array([0, 5]), pa.array([1, 0]), pa.array([1.0, 2.0])], schema=schema)
    path = str(tmp_path / name)
    pq.write_table(table, path)
    return path


def test_bad_data_writes_nothing(tmp_path, rng):
    bad = _corrupt(tmp_path, "bad.parquet")
    good = _write(tmp_path, "good.parquet", random_tensor(rng, (3, 3), 4))
    out = str(tmp_path / "o.parquet")
    with pytest.raises(DataError, match=r"indices\[1\] = \[5,0\] is out of bounds"):
        concat([good, bad, good], out, axis=0)
    assert sorted(os.listdir(tmp_path)) == ["bad.parquet", "good.parquet"]  # not even a temp file


def test_cli_exit_codes_and_one_line_errors(tmp_path, rng):
    a = _write(tmp_path, "a.parquet", random_tensor(rng, (3, 4), 5))
    d = _write(tmp_path, "d.parquet", random_tensor(rng, (3, 5), 5))
    bad = _corrupt(tmp_path, "bad.parquet")
    out = str(tmp_path / "o.parquet")
    runner = CliRunner()
    r = runner.invoke(cli, ["concat", a, d, "--axis", "0", "-o", out])
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0
    assert "Input shapes must match: expected 4 for dimension 1 but got 5 at position 1" in r.output
    r = runner.invoke(cli, ["concat", a, a, "--axis", "-3", "-o", out])
    assert r.exit_code == 2 and "out of range" in r.output
    r = runner.invoke(cli, ["concat", bad, bad, "--axis", "0", "-o", out])
    assert r.exit_code == 1 and "out of bounds" in r.output
    assert not os.path.exists(out)
    r = runner.invoke(cli, ["-q", "concat", a, d, "--axis", "1", "-o", out])
    assert r.exit_code == 0 and sptool.read(out).shape == (3, 9)


def test_pipe_concat_into_slice(tmp_path, rng):
    ta, tb = random_tensor(rng, (6, 4), 15, duplicates=True), random_tensor(rng, (6, 3), 10)
    a, b = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb)
    out = str(tmp_path / "box.parquet")
    p1 = subprocess.Popen(SPTOOL + ["-q", "concat", a, b, "--axis", "1", "-o", "-"], stdout=subprocess.PIPE)
    p2 = subprocess.run(SPTOOL + ["-q", "slice", "-", "--start", "1,2", "--size", "4,-1", "-o", out],
                        stdin=p1.stdout, capture_output=True)
    p1.stdout.close()
    assert p1.wait() == 0 and p2.returncode == 0, p2.stderr
    want = np.concatenate([dense_oracle(ta), dense_oracle(tb)], axis=1)[1:5, 2:]
    s = _check(out, want, unique=False)
    assert s.shape == (4, 5)
    # stdin as one of several inputs
    stream = subprocess.run(SPTOOL + ["-q", "reorder", b, "-o", "-"], capture_output=True, check=True).stdout
    p3 = subprocess.run(SPTOOL + ["-q", "concat", a, "-", "--axis", "1", "-o", out], input=stream, capture_output=True)
    assert p3.returncode == 0, p3.stderr
    _check(out, np.concatenate([dense_oracle(ta), dense_oracle(tb)], axis=1), unique=False)
