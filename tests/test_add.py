"""add: sparse + sparse (merge join) and sparse + dense, against dense NumPy and scipy.sparse."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sps
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs

import sptool
from sptool.cli import cli
from sptool.errors import DataError, ShapeMismatch, UsageError
from sptool.ops.add import add
from sptool.stream import sort as _sort
from sptool.stream.binary import JOIN_BATCH_ROWS


def _write(tmp_path, name, t, **claims):
    path = str(tmp_path / name)
    if claims:
        t = sptool.SparseTensor(t.indices, t.values, t.shape, fill_value=t.fill_value, **claims)
    sptool.write(t, path)
    return path


def _check_sparse(path):
    s = sptool.read(path)
    assert s.canonical, (s.sort_order, s.unique)
    assert sptool.validate(path).valid
    return s


@pytest.fixture
def tiny_runs(monkeypatch):
    small_runs(monkeypatch, 19, 11)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "int8", "uint8", "complex128", "complex64",
                                   "bool", "float16"])
def test_sparse_sparse_matches_dense(tmp_path, rng, tiny_batches, tiny_runs, dtype):
    ta = random_tensor(rng, (9, 7, 5), 120, dtype=dtype, duplicates=True)  # unsorted, with duplicates
    tb = random_tensor(rng, (9, 7, 5), 90, dtype=dtype, sort=True)
    a, b, out = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), str(tmp_path / "o.parquet")
    r = add(a, b, out)
    s = _check_sparse(out)
    assert s.dtype == np.dtype(dtype) and r["rows_out"] == s.nnz
    with np.errstate(over="ignore"):
        want = dense_oracle(ta) + dense_oracle(tb)
    np.testing.assert_allclose(s.to_dense(), want, rtol=1e-6, atol=4e-3 if dtype == "float16" else 0)
    union = {tuple(i) for i in ta.indices} | {tuple(i) for i in tb.indices}
    assert {tuple(i) for i in s.indices} == union  # explicit zeros kept: nothing dropped at thresh 0


def test_matches_scipy_2d(tmp_path, rng, tiny_batches):
    ta = random_tensor(rng, (40, 30), 200, duplicates=True)
    tb = random_tensor(rng, (40, 30), 150)
    a, b, out = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), str(tmp_path / "o.parquet")
    add(a, b, out)
    want = (ta.to_scipy("csr") + tb.to_scipy("csr")).toarray()
    np.testing.assert_allclose(_check_sparse(out).to_scipy("csr").toarray(), want)


def test_operands_of_many_default_batches_match_scipy(tmp_path, rng):
    """The default budget, no tuning: each operand is several of the join's batches, the two
    sides' batch edges falling at different coordinates; the sum is SciPy's, bit for bit."""
    shape = (1000, 1000)
    ta, tb = (random_tensor(rng, shape, n, sort=True) for n in (420_000, 380_000))
    assert min(ta.nnz, tb.nnz) > JOIN_BATCH_ROWS  # more than one batch a side
    pa_, pb_ = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb)
    out = str(tmp_path / "out.parquet")
    add(pa_, pb_, out)
    s = sptool.read(out)
    assert s.canonical
    a = sps.coo_array((ta.values, tuple(ta.indices.T)), shape=shape).tocsr()
    b = sps.coo_array((tb.values, tuple(tb.indices.T)), shape=shape).tocsr()
    want = (a + b).tocoo()
    want.sum_duplicates()
    np.testing.assert_array_equal(s.indices, np.stack([want.row, want.col], axis=1))
    np.testing.assert_array_equal(s.values, want.data)


def test_wide_keys_use_the_byte_join(tmp_path, rng, tiny_batches):
    shape = (33,) * 12  # 12 dims of 6 bits: keys do not pack into 64 bits
    assert not _sort.KeyCodec(shape, range(12)).packed
    ta = random_tensor(rng, shape, 40, duplicates=True)
    tb = sptool.SparseTensor(np.concatenate([ta.indices[:10], rng.integers(0, 33, (15, 12))]), rng.random(25), shape)
    a, b, out = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), str(tmp_path / "o.parquet")
    add(a, b, out)
    s = _check_sparse(out)
    want: dict = {}
    for t in (ta, tb):
        for i, v in zip(map(tuple, t.indices), t.values):
            want[i] = want.get(i, 0.0) + v
    assert [tuple(i) for i in s.indices] == sorted(want)
    np.testing.assert_allclose(s.values, [want[k] for k in sorted(want)])


def test_thresh_only_tests_colliding_coordinates(tmp_path):
    ta = sptool.SparseTensor([[0, 0], [0, 1], [1, 0]], [1.0, 0.1, -0.05], (2, 2))
    tb = sptool.SparseTensor([[0, 0], [1, 0], [1, 1]], [-0.95, 0.05, 0.01], (2, 2))
    a, b = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb)
    out = str(tmp_path / "o.parquet")

    def entries():
        s = _check_sparse(out)
        return {tuple(i): round(float(v), 6) for i, v in zip(s.indices, s.values)}

    add(a, b, out)  # thresh 0 keeps everything, including the explicit zero
    assert entries() == {(0, 0): 0.05, (0, 1): 0.1, (1, 0): 0.0, (1, 1): 0.01}
    r = add(a, b, out, thresh=0.2)  # TensorFlow: only (0,0) and (1,0) are tested
    assert entries() == {(0, 1): 0.1, (1, 1): 0.01} and r["dropped"] == 2
    add(a, b, out, thresh=0.2, prune=True)  # every entry tested
    assert entries() == {}
    add(a, b, out, thresh=0.05)  # |0.05| >= 0.05 is kept (strictly smaller is dropped)
    assert entries() == {(0, 0): 0.05, (0, 1): 0.1, (1, 1): 0.01}
    add(a, b, out, prune=True)  # prune at 0 drops nothing
    assert len(entries()) == 4


def test_thresh_on_complex_magnitude(tmp_path):
    ta = sptool.SparseTensor([[0], [1]], np.array([1 + 1j, 3j], np.complex64), (2,))
    tb = sptool.SparseTensor([[0], [1]], np.array([-0.5 - 0.5j, -2.5j], np.complex64), (2,))
    out = str(tmp_path / "o.parquet")
    add(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out, thresh=0.6)
    s = _check_sparse(out)
    assert s.indices.tolist() == [[0]] and s.dtype == np.complex64  # |0.5+0.5j| = 0.707, |0.5j| = 0.5


def test_promotion_fills_hybrid_and_empty(tmp_path, rng):
    ta = random_tensor(rng, (6, 4, 3), 10, sparse_ndim=2, dtype="int32", duplicates=True)
    tb = random_tensor(rng, (6, 4, 3), 8, sparse_ndim=2, dtype="float32")
    out = str(tmp_path / "o.parquet")
    add(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out)
    s = _check_sparse(out)
    assert s.dtype == np.float64  # NumPy promotion of int32 and float32
    np.testing.assert_allclose(s.to_dense(), dense_oracle(ta) + dense_oracle(tb), rtol=1e-6)
    # non-zero fill values add too
    fa = sptool.SparseTensor([[0, 0], [1, 1]], [1.0, 2.0], (2, 3), fill_value=1.0)
    fb = sptool.SparseTensor([[1, 1], [0, 2]], [5.0, 7.0], (2, 3), fill_value=-4.0)
    add(_write(tmp_path, "fa.parquet", fa), _write(tmp_path, "fb.parquet", fb), out)
    s = _check_sparse(out)
    assert s.fill_value == -3.0
    np.testing.assert_allclose(s.to_dense(), dense_oracle(fa) + dense_oracle(fb))
    # empty operands
    e = sptool.SparseTensor(np.empty((0, 2), np.int64), np.empty(0), (2, 3))
    add(_write(tmp_path, "e.parquet", e), _write(tmp_path, "e2.parquet", e), out)
    assert _check_sparse(out).nnz == 0
    add(_write(tmp_path, "e3.parquet", e), str(tmp_path / "fa.parquet"), out)
    np.testing.assert_allclose(sptool.read(out).to_dense()[0, 0], 1.0)


def test_shape_errors_write_nothing(tmp_path, rng):
    a = _write(tmp_path, "a.parquet", random_tensor(rng, (4, 5), 6))
    b = _write(tmp_path, "b.parquet", random_tensor(rng, (4, 6), 6))
    c = _write(tmp_path, "c.parquet", random_tensor(rng, (4, 5, 1), 6))
    out = str(tmp_path / "o.parquet")
    with pytest.raises(ShapeMismatch, match=r"Operands' shapes do not match: got 5 and 6 for dimension 1"):
        add(a, b, out)
    with pytest.raises(ShapeMismatch, match="Operands do not have the same ranks"):
        add(a, c, out)
    s = _write(tmp_path, "s.parquet", sptool.SparseTensor([[0, 0]], np.array(["x"], object), (4, 5)))
    with pytest.raises(UsageError, match="numeric"):
        add(a, s, out)
    with pytest.raises(UsageError, match="at most one"):
        add("-", "-", out)
    assert not os.path.exists(out)


def test_false_sort_claim_is_an_error(tmp_path):
    meta = sptool.TensorMeta(shape=(3, 3), sparse_ndim=2, value_type="float64", nnz=3, sort_order=(0, 1),
                             unique=True)
    table = pa.table({"indices_0": [2, 0, 1], "indices_1": [0, 0, 0], "values": [1.0, 2.0, 3.0]})
    path = str(tmp_path / "liar.parquet")
    w = pq.ParquetWriter(path, table.schema)
    w.write_table(table)
    w.add_key_value_metadata({"sptool": meta.to_json()})
    w.close()
    b = _write(tmp_path, "b.parquet", sptool.SparseTensor([[0, 1]], [1.0], (3, 3)))
    with pytest.raises(DataError, match=r"indices\[1\] = \[0,0\] is out of order"):
        add(path, b, str(tmp_path / "o.parquet"))
    assert not os.path.exists(tmp_path / "o.parquet")



@pytest.mark.parametrize("lie,message", [
    ("repeat", r"indices\[9\] = \[4,0\] is repeated"),  # claimed unique, a coordinate twice (across batches)
    ("bounds", r"indices\[9\] = \[4,7\] is out of bounds"),  # claimed sorted, an index past the shape
    ("order", r"indices\[9\] = \[3,0\] is out of order"),  # a row behind the one before (across batches)
])
def test_join_output_unchecked_by_sink_still_refuses_lying_operands(tmp_path, tiny_batches, lie, message):
    """The merge join vouches for its rows to the sink (no second order/bounds pass there), so
    every lie an operand tells must be caught as it is read, batch boundaries included."""
    rows = [(i // 2, i % 2) for i in range(9)] + [{"repeat": (4, 0), "bounds": (4, 7), "order": (3, 0)}[lie]]
    meta = sptool.TensorMeta(shape=(6, 6), sparse_ndim=2, value_type="float64", nnz=len(rows), sort_order=(0, 1),
                             unique=True)
    table = pa.table({"indices_0": [r[0] for r in rows], "indices_1": [r[1] for r in rows],
                      "values": np.arange(len(rows), dtype=np.float64)})
    path = str(tmp_path / "liar.parquet")
    with pq.ParquetWriter(path, table.schema) as w:
        w.write_table(table)
        w.add_key_value_metadata({"sptool": meta.to_json()})
    b = _write(tmp_path, "b.parquet", sptool.SparseTensor([[0, 1], [5, 5]], [1.0, 2.0], (6, 6)))
    for x, y in ((path, b), (b, path)):
        with pytest.raises(DataError, match=message):
            add(x, y, str(tmp_path / "o.parquet"))
        assert not os.path.exists(tmp_path / "o.parquet")


# ---------------------------------------------------------------------------------------------
# sparse + dense

@pytest.mark.parametrize("dense_first", [False, True])
@pytest.mark.parametrize("dtype,ddtype", [("float64", "float64"), ("int32", "int32"), ("complex64", "complex64"),
                                          ("int8", "float32"), ("bool", "bool")])
def test_sparse_dense(tmp_path, rng, tiny_batches, dense_first, dtype, ddtype):
    t = random_tensor(rng, (8, 6, 3), 70, dtype=dtype, duplicates=True)
    d = random_tensor(rng, (8, 6, 3), 100, dtype=ddtype).to_dense()
    sp_path = _write(tmp_path, "t.parquet", t)
    np.save(tmp_path / "d.npy", d)
    out = str(tmp_path / "o.npy")
    args = (str(tmp_path / "d.npy"), sp_path) if dense_first else (sp_path, str(tmp_path / "d.npy"))
    r = add(*args, out)
    got = np.load(out)
    with np.errstate(over="ignore"):
        want = dense_oracle(t).astype(got.dtype) + d.astype(got.dtype)
    assert got.dtype == np.result_type(np.dtype(dtype), np.dtype(ddtype)) and r["shape"] == [8, 6, 3]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_sparse_dense_matches_scipy_and_reads_fortran_npy(tmp_path, rng):
    t = random_tensor(rng, (30, 20), 90, duplicates=True)
    d = np.asfortranarray(rng.standard_normal((30, 20)))
    np.save(tmp_path / "d.npy", d)
    out = str(tmp_path / "o.npy")
    add(_write(tmp_path, "t.parquet", t), str(tmp_path / "d.npy"), out)
    want = sps.coo_matrix((t.values, (t.indices[:, 0], t.indices[:, 1])), shape=(30, 20)).toarray() + d
    np.testing.assert_allclose(np.load(out), want)


def test_sparse_dense_errors(tmp_path, rng):
    t = _write(tmp_path, "t.parquet", random_tensor(rng, (4, 5), 6))
    np.save(tmp_path / "d.npy", np.zeros((4, 1)))
    np.save(tmp_path / "r.npy", np.zeros(5))
    out = str(tmp_path / "o.npy")
    with pytest.raises(ShapeMismatch, match=r"Dimension 1 does not equal \(no broadcasting is supported\)"):
        add(t, str(tmp_path / "d.npy"), out)
    with pytest.raises(ShapeMismatch, match="different ranks"):
        add(str(tmp_path / "r.npy"), t, out)
    with pytest.raises(UsageError, match="both operands are dense"):
        add(str(tmp_path / "d.npy"), str(tmp_path / "d.npy"), out)
    with pytest.raises(UsageError, match=r"\*\.npy"):
        add(t, str(tmp_path / "d.npy"), str(tmp_path / "o.parquet"))
    assert not os.path.exists(out)


@pytest.mark.parametrize("dense_first", [False, True])
def test_sparse_dense_index_outside_the_shape_names_the_file(tmp_path, dense_first):
    """An index outside the shape (a file written without sptool's checks) is refused with the
    entry and the file named, whichever side the dense operand is on; nothing is written."""
    from sptool.format import TensorMeta

    bad = str(tmp_path / "bad.parquet")
    table = pa.table({"indices_0": pa.array([0, 1], pa.int64()), "indices_1": pa.array([1, 3], pa.int64()),
                      "values": pa.array([1.0, 2.0])})
    meta = TensorMeta(shape=(2, 2), sparse_ndim=2, value_type="float64", sort_order=(), unique=False, nnz=2)
    pq.write_table(table.replace_schema_metadata({"sptool": meta.to_json()}), bad)
    dense = str(tmp_path / "d.npy")
    np.save(dense, np.ones((2, 2)))
    out = str(tmp_path / "o.npy")
    args = [dense, bad] if dense_first else [bad, dense]
    with pytest.raises(DataError, match=r"indices\[1\] = \[1,3\] is out of bounds") as err:
        add(*args, out)
    assert err.value.path == bad
    r = CliRunner().invoke(cli, ["add", *args, "-o", out])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "bad.parquet" in r.output, r.output
    assert sorted(os.listdir(tmp_path)) == ["bad.parquet", "d.npy"]


# ---------------------------------------------------------------------------------------------
# CLI

def test_cli_exit_codes_and_stdin(tmp_path, rng):
    ta, tb = random_tensor(rng, (5, 4), 8, duplicates=True), random_tensor(rng, (5, 4), 7)
    a, b = _write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb)
    c = _write(tmp_path, "c.parquet", random_tensor(rng, (5, 3), 3))
    out = str(tmp_path / "o.parquet")
    runner = CliRunner()
    r = runner.invoke(cli, ["-q", "add", a, b, "--thresh", "0.1", "-o", out])
    assert r.exit_code == 0, r.output
    _check_sparse(out)
    r = runner.invoke(cli, ["add", a, c, "-o", str(tmp_path / "bad.parquet")])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert r.output.startswith("Error: Operands' shapes do not match: got 4 and 3 for dimension 1")
    r = runner.invoke(cli, ["add", a, b, "-o", str(tmp_path / "bad.txt")])
    assert r.exit_code == 2
    assert not os.path.exists(tmp_path / "bad.parquet")
    # the second operand from stdin, the result to stdout
    stream = runner.invoke(cli, ["-q", "reorder", b, "-o", "-"]).stdout_bytes
    r = runner.invoke(cli, ["-q", "add", a, "-", "-o", "-"], input=stream)
    assert r.exit_code == 0
    with open(tmp_path / "s.arrows", "wb") as f:
        f.write(r.stdout_bytes)
    meta = json.loads(pa.ipc.open_stream(str(tmp_path / "s.arrows")).schema.metadata[b"sptool"])
    assert meta["sort_order"] == [0, 1] and meta["unique"]
    s = sptool.read(str(tmp_path / "s.arrows"))
    np.testing.assert_allclose(s.to_dense(), dense_oracle(ta) + dense_oracle(tb))


def test_one_sided_entries_are_copied_as_they_are(tmp_path):
    ta = sptool.SparseTensor([[0], [2]], [-0.0, 1.0], (4,))
    tb = sptool.SparseTensor([[1], [2]], [-0.0, 2.0], (4,))
    out = str(tmp_path / "o.parquet")
    add(_write(tmp_path, "a.parquet", ta), _write(tmp_path, "b.parquet", tb), out)
    s = sptool.read(out)
    assert s.values.tolist() == [0.0, 0.0, 3.0] and np.signbit(s.values[:2]).all()


def test_thresh_keeps_the_most_negative_integer(tmp_path):
    # np.abs(int8 -128) is -128: the magnitude must not wrap, or the entry would be dropped.
    a = sptool.SparseTensor([[0], [1]], np.array([-128, 5], np.int8), shape=(2,))
    b = sptool.SparseTensor([[0]], np.array([0], np.int8), shape=(2,))
    sptool.write(a, str(tmp_path / "a.parquet"))
    sptool.write(b, str(tmp_path / "b.parquet"))
    for prune in (False, True):
        sptool.add(str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), str(tmp_path / "o.parquet"), thresh=1,
                   prune=prune)
        assert sptool.read(str(tmp_path / "o.parquet")).to_dense().tolist() == [-128, 5]
