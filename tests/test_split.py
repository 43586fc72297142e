"""split against np.array_split of the dense oracle (TensorFlow's sizes: the first s % n pieces are longer)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.io import sink as sink_module
from sptool.io.source import row_bytes
from sptool.ops.split import piece_sizes, split


def _write(tmp_path, name, t):
    path = str(tmp_path / name)
    sptool.write(t, path)
    return path


def _check_pieces(r, t, axis, num, *, sort_order, unique):
    want = np.array_split(dense_oracle(t), num, axis=axis)
    assert len(r["outputs"]) == num
    for out, w in zip(r["outputs"], want):
        s = sptool.read(out)
        got = s.to_dense()
        if w.dtype == object:
            assert got.astype(object).tolist() == w.tolist()
        elif w.dtype.kind in "fc":
            np.testing.assert_allclose(got, w, rtol=1e-5)
        else:
            np.testing.assert_array_equal(got, w)
        assert s.shape == w.shape
        assert s.sort_order == sort_order and s.unique == (unique or s.nnz <= 1)
        assert sptool.validate(out).valid, out
    assert sum(r["rows"]) == r["rows_in"] or axis >= t.sparse_ndim


def test_tf_sizes():
    assert piece_sizes(10, 3) == [4, 3, 3]
    assert piece_sizes(11, 4) == [3, 3, 3, 2]
    assert piece_sizes(5, 5) == [1] * 5
    assert piece_sizes(7, 1) == [7]


@pytest.mark.parametrize("axis,num", [(0, 3), (1, 4), (-1, 2), (2, 7)])
@pytest.mark.parametrize("dtype", ["float64", "int8", "complex128", "bool"])
def test_unsorted_with_duplicates(tmp_path, rng, tiny_batches, axis, num, dtype):
    t = random_tensor(rng, (10, 9, 7), 200, dtype=dtype, duplicates=True)
    r = split(_write(tmp_path, "in.parquet", t), str(tmp_path / "p-{i}.parquet"), axis=axis, num_split=num)
    _check_pieces(r, t, axis, num, sort_order=(), unique=False)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_sorted_pieces_stay_sorted(tmp_path, rng, tiny_batches, axis):
    t = random_tensor(rng, (11, 6, 5), 150, sort=True)
    r = split(_write(tmp_path, "in.parquet", t), str(tmp_path) + "/out-{i}/", axis=axis, num_split=3)
    assert all(os.path.isdir(o) for o in r["outputs"])
    _check_pieces(r, t, axis, 3, sort_order=(0, 1, 2), unique=True)
    assert all(sptool.read(o).canonical for o in r["outputs"])


def test_edge_cases(tmp_path, rng, tiny_batches):
    one = random_tensor(rng, (4, 1), 1)
    r = split(_write(tmp_path, "one.parquet", one), str(tmp_path / "a{i:02d}.parquet"), axis=0, num_split=4)
    assert [os.path.basename(o) for o in r["outputs"]] == ["a00.parquet", "a01.parquet", "a02.parquet",
                                                             "a03.parquet"]
    _check_pieces(r, one, 0, 4, sort_order=(0, 1), unique=True)
    empty = random_tensor(rng, (5, 0, 3), 0)
    r = split(_write(tmp_path, "e.parquet", empty), str(tmp_path / "e{i}.arrows"), axis=-3, num_split=2)
    _check_pieces(r, empty, 0, 2, sort_order=(0, 1, 2), unique=True)
    single = random_tensor(rng, (1, 3), 2, duplicates=True)
    r = split(_write(tmp_path, "s.parquet", single), str(tmp_path / "s{i}.parquet"), axis=0, num_split=1)
    _check_pieces(r, single, 0, 1, sort_order=single.sort_order, unique=single.unique)


def test_hybrid_sparse_and_dense_axes(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (7, 5, 6), 40, sparse_ndim=2, duplicates=True, dtype="float32")
    path = _write(tmp_path, "h.parquet", t)
    r = split(path, str(tmp_path / "s{i}.parquet"), axis=1, num_split=2)
    _check_pieces(r, t, 1, 2, sort_order=(), unique=False)
    r = split(path, str(tmp_path / "d{i}.parquet"), axis=-1, num_split=4)  # a dense axis: blocks are cut
    _check_pieces(r, t, 2, 4, sort_order=(), unique=False)
    assert r["rows"] == [40] * 4


def test_strings(tmp_path, rng, tiny_batches):
    base = random_tensor(rng, (6, 8), 30)
    t = sptool.SparseTensor(base.indices, np.array([f"v{i}" for i in range(base.nnz)], dtype=object), (6, 8))
    r = split(_write(tmp_path, "s.parquet", t), str(tmp_path / "s{i}.parquet"), axis=1, num_split=3)
    _check_pieces(r, t, 1, 3, sort_order=(), unique=True)


def test_errors(tmp_path, rng):
    path = _write(tmp_path, "t.parquet", random_tensor(rng, (4, 3), 5))
    cases = [
        (dict(axis=1, num_split=4), "Input num_split should be between 1 and the splitting dimension size (3), got 4"),
        (dict(axis=0, num_split=0), "Input num_split should be between 1 and the splitting dimension size (4), got 0"),
        (dict(axis=2, num_split=1), "Input split_dim should be between -2 and 1"),
    ]
    for kw, msg in cases:
        with pytest.raises(UsageError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            split(path, str(tmp_path / "p{i}.parquet"), **kw)
    with pytest.raises(UsageError, match=r"must contain \{i\}"):
        split(path, str(tmp_path / "p.parquet"), axis=0, num_split=2)
    with pytest.raises(UsageError, match="cannot tell the output format"):
        split(path, str(tmp_path / "p{i}.txt"), axis=0, num_split=2)
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


def _out_of_bounds_file(tmp_path):
    """Declared shape [6, 3]; the last row [7, 0] is outside it (it routes to the last piece)."""
    meta = {"format": "sptool.coo", "version": "1.0.0", "shape": [6, 3], "sparse_ndim": 2, "value_type": "float64",
            "fill_value": 0.0, "nnz": 4, "sort_order": [], "unique": False, "canonical": False}
    schema = pa.schema([pa.field("indices_0", pa.int64(), False), pa.field("indices_1", pa.int64(), False),
                        pa.field("values", pa.float64(), False)], metadata={"sptool": json.dumps(meta)})
    path = str(tmp_path / "bad.parquet")
    pq.write_table(pa.table([pa.array([0, 3, 5, 7]), pa.array([1, 0, 2, 0]), pa.array([1.0, 2.0, 3.0, 4.0])],
                            schema=schema), path)
    return path


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_an_entry_out_of_bounds_is_named_as_slice_names_it(tmp_path, axis):
    """The file, the entry's row and coordinates in it, and its shape: what slice says of the same
    file, not a piece's rebased coordinates and shape."""
    bad = _out_of_bounds_file(tmp_path)
    with pytest.raises(DataError) as by_slice:
        sptool.slice_(bad, str(tmp_path / "s.parquet"), start=[0, 0], size=[-1, -1])
    with pytest.raises(DataError) as by_split:
        split(bad, str(tmp_path / "p{i}.parquet"), axis=axis, num_split=2)
    assert str(by_split.value) == str(by_slice.value)
    assert by_split.value.path == bad and "indices[3] = [7,0]" in str(by_split.value) and "[6,3]" in str(by_split.value)
    assert sorted(os.listdir(tmp_path)) == ["bad.parquet"]


def _third_close_fails(monkeypatch, error: BaseException) -> list:
    """The third output finished raises ``error`` (a full disk, a Ctrl-C): a fault at one exact
    moment, which no input or signal from outside reaches on demand.  The outputs closed, listed."""
    real_close, calls = sink_module.TensorSink.close, []

    def close(self, **kw):
        calls.append(self.dst)
        if len(calls) == 3:
            raise error
        return real_close(self, **kw)

    monkeypatch.setattr(sink_module.TensorSink, "close", close)
    return calls


def test_no_piece_left_behind(tmp_path, rng, monkeypatch):
    bad = _out_of_bounds_file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DataError, match=r"\[7,0\] is out of bounds"):
        split(bad, str(out / "p{i}.parquet"), axis=0, num_split=2)
    assert os.listdir(out) == []
    # A piece that fails while finishing, after others were finished: none is moved into place.
    good = _write(tmp_path, "good.parquet", random_tensor(rng, (6, 3), 10))
    calls = _third_close_fails(monkeypatch, OSError("disk full"))
    with pytest.raises(OSError, match="disk full"):
        split(good, str(out / "p{i}.parquet"), axis=0, num_split=3)
    assert len(calls) == 3 and os.listdir(out) == []


def test_sinks_share_the_memory_budget(tmp_path, rng):
    from sptool._memory import ROW_GROUP_ROWS

    flat = np.arange(0, 4000 * 1000, 20)  # 200,000 rows in order: 100,000 a piece
    t = sptool.SparseTensor(np.stack(np.unravel_index(flat, (4000, 1000)), axis=1), rng.standard_normal(len(flat)),
                            (4000, 1000), sort_order=(0, 1), unique=True)
    path = _write(tmp_path, "t.parquet", t)
    budget = 24 << 20  # the least that two open writers accept
    split(path, str(tmp_path / "p{i}.parquet"), axis=0, num_split=2, memory=str(budget))
    # Each piece's row groups were cut below the default so that the two buffers (held about
    # three times over: pending rows, their concatenation, the encoder) fit half the budget.
    groups = [pq.read_metadata(tmp_path / f"p{i}.parquet") for i in range(2)]
    largest = [max(g.row_group(k).num_rows for k in range(g.num_row_groups)) for g in groups]
    assert all(g.num_row_groups > 1 for g in groups) and max(largest) < ROW_GROUP_ROWS
    assert 3 * sum(largest) * row_bytes(sptool.read(path).meta) <= budget // 2
    for i in range(2):  # rows 0-1999 and 2000-3999, in order
        s, keep = sptool.read(str(tmp_path / f"p{i}.parquet")), t.indices[:, 0] // 2000 == i
        assert np.array_equal(s.indices, t.indices[keep] - [2000 * i, 0]) and np.array_equal(s.values, t.values[keep])
    path = _write(tmp_path, "small.parquet", random_tensor(rng, (64, 5), 100, sort=True))
    # 64 open writers do not fit a 16 MiB budget: refused up front, nothing written
    for p in tmp_path.glob("q*.parquet"):
        p.unlink()
    with pytest.raises(UsageError, match="raise --memory"):
        split(path, str(tmp_path / "q{i}.parquet"), axis=0, num_split=64, memory="16MiB")
    assert not list(tmp_path.glob("q*"))


def test_cli(tmp_path, rng):
    path = _write(tmp_path, "t.parquet", random_tensor(rng, (5, 4), 9))
    runner = CliRunner()
    r = runner.invoke(cli, ["split", path, "--axis", "0", "--num-split", "6", "-o", str(tmp_path / "p{i}.parquet")])
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0
    assert "Input num_split should be between 1 and the splitting dimension size (5), got 6" in r.output
    r = runner.invoke(cli, ["split", path, "--axis", "0", "--num-split", "2", "-o", str(tmp_path / "p.parquet")])
    assert r.exit_code == 2 and "{i}" in r.output
    r = runner.invoke(cli, ["split", _out_of_bounds_file(tmp_path), "--axis", "0", "--num-split", "2",
                            "-o", str(tmp_path / "q{i}.parquet")])
    assert r.exit_code == 1 and "out of bounds" in r.output
    r = runner.invoke(cli, ["-q", "split", path, "--axis", "-1", "--num-split", "2",
                            "-o", str(tmp_path / "p{i}.parquet")])
    assert r.exit_code == 0 and sptool.read(str(tmp_path / "p1.parquet")).shape == (5, 2)
    assert not any(n.startswith("q") for n in os.listdir(tmp_path))


def test_a_failure_while_finishing_the_pieces_keeps_the_previous_files(tmp_path, monkeypatch):
    """Ctrl-C while the third of four pieces is being finished: every piece is finished before
    any is moved into place, so the previous files at the four paths stay byte for byte and no
    temporary is left (the oracle: the bytes written before, and a directory listing)."""
    rng = np.random.default_rng(8)
    idx = np.unique(np.stack([rng.integers(0, 40, 500), rng.integers(0, 30, 500)], axis=1), axis=0)
    src = str(tmp_path / "t.parquet")
    sptool.write(sptool.SparseTensor(idx, rng.standard_normal(len(idx)), (40, 30)), src)
    previous = {i: f"previous piece {i}".encode() for i in range(4)}
    for i, data in previous.items():
        (tmp_path / f"p-{i}.parquet").write_bytes(data)
    before = sorted(os.listdir(tmp_path))
    calls = _third_close_fails(monkeypatch, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        sptool.split(src, str(tmp_path / "p-{i}.parquet"), axis=0, num_split=4)
    assert len(calls) == 3
    assert sorted(os.listdir(tmp_path)) == before
    assert {i: (tmp_path / f"p-{i}.parquet").read_bytes() for i in range(4)} == previous
