"""todense / to_dense against an independent dense oracle (a Python loop, NumPy and scipy)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DTYPES, dense_oracle, random_tensor

import sptool
from sptool.errors import DataError, ResourceError, UsageError


def _assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-5 if got.dtype.itemsize <= 4 else 1e-12, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("duplicates", [False, True])
def test_todense_matches_oracle(tmp_path, rng, dtype, duplicates):
    t = random_tensor(rng, (9, 7, 5), 120, dtype=dtype, duplicates=duplicates)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    out = str(tmp_path / "d.npy")
    sptool.todense(src, out, memory="64MB")
    _assert_same(np.load(out), dense_oracle(t))
    _assert_same(t.to_dense(), dense_oracle(t))


def test_scipy_agrees_on_duplicates(tmp_path, rng):
    import scipy.sparse as sp

    t = random_tensor(rng, (30, 20), 300, duplicates=True)
    sptool.write(t, str(tmp_path / "m.parquet"))
    sptool.todense(str(tmp_path / "m.parquet"), str(tmp_path / "m.npy"))
    want = sp.coo_array((t.values, (t.indices[:, 0], t.indices[:, 1])), shape=t.shape).toarray()
    np.testing.assert_allclose(np.load(tmp_path / "m.npy"), want)


@pytest.mark.parametrize("fill", [7.5, float("nan"), -1.0])
def test_fill_and_default_value(tmp_path, rng, fill):
    t = random_tensor(rng, (6, 6), 20, duplicates=True, fill_value=fill)
    sptool.write(t, str(tmp_path / "f.parquet"))
    sptool.todense(str(tmp_path / "f.parquet"), str(tmp_path / "f.npy"))
    _assert_same(np.load(tmp_path / "f.npy"), dense_oracle(t))
    sptool.todense(str(tmp_path / "f.parquet"), str(tmp_path / "g.npy"), default_value=3.0)
    _assert_same(np.load(tmp_path / "g.npy"), dense_oracle(t, fill=3.0))


def test_bool_or_and_true_fill(rng):
    t = sptool.SparseTensor([[0], [0], [1], [2]], [False, True, False, False], (4,), fill_value=True)
    assert t.to_dense().tolist() == [True, False, False, True]


def test_hybrid_and_strings(tmp_path, rng):
    t = random_tensor(rng, (8, 3, 2), 10, sparse_ndim=1, duplicates=True)
    sptool.write(t, str(tmp_path / "h.parquet"))
    sptool.todense(str(tmp_path / "h.parquet"), str(tmp_path / "h.npy"))
    _assert_same(np.load(tmp_path / "h.npy"), dense_oracle(t))
    s = sptool.SparseTensor([[2, 1], [0, 0]], np.array(["longer", "x"], dtype=object), (3, 2), fill_value="-")
    sptool.write(s, str(tmp_path / "s.parquet"))
    sptool.todense(str(tmp_path / "s.parquet"), str(tmp_path / "s.npy"))
    assert np.load(tmp_path / "s.npy").tolist() == [["x", "-"], ["-", "-"], ["-", "longer"]]


def test_out_of_bounds_named_and_nothing_written(tmp_path):
    schema = pa.schema([pa.field("indices_0", pa.int64(), False), pa.field("values", pa.float64(), False)])
    meta = sptool.TensorMeta(shape=(3,), sparse_ndim=1, value_type="float64", nnz=3)
    w = pq.ParquetWriter(tmp_path / "bad.parquet", schema)
    w.write_table(pa.table({"indices_0": [0, 5, 1], "values": [1.0, 2.0, 3.0]}, schema=schema))
    w.add_key_value_metadata({"sptool": meta.to_json()})
    w.close()
    with pytest.raises(DataError, match=r"indices\[1\] = \[5\] is out of bounds: need 0 <= index < \[3\]"):
        sptool.todense(str(tmp_path / "bad.parquet"), str(tmp_path / "out.npy"))
    assert sorted(os.listdir(tmp_path)) == ["bad.parquet"]


def test_claims_checked_unless_no_validate(tmp_path):
    schema = pa.schema([pa.field("indices_0", pa.int64(), False), pa.field("values", pa.float64(), False)])
    meta = sptool.TensorMeta(shape=(3,), sparse_ndim=1, value_type="float64", nnz=3, sort_order=(0,), unique=True)
    w = pq.ParquetWriter(tmp_path / "lie.parquet", schema)
    w.write_table(pa.table({"indices_0": [0, 2, 2], "values": [1.0, 2.0, 3.0]}, schema=schema))
    w.add_key_value_metadata({"sptool": meta.to_json()})
    w.close()
    with pytest.raises(DataError, match=r"indices\[2\] = \[2\] is repeated"):
        sptool.todense(str(tmp_path / "lie.parquet"), str(tmp_path / "o.npy"))
    sptool.todense(str(tmp_path / "lie.parquet"), str(tmp_path / "o.npy"), validate=False)
    assert np.load(tmp_path / "o.npy").tolist() == [1.0, 0.0, 5.0]


def test_refuses_overflow_and_disk(tmp_path, monkeypatch):
    t = sptool.SparseTensor([[0, 0]], [1.0], (2**40, 2**20))
    sptool.write(t, str(tmp_path / "huge.parquet"))
    with pytest.raises(ResourceError, match="2\\^63-1|free"):
        sptool.todense(str(tmp_path / "huge.parquet"), str(tmp_path / "huge.npy"))
    assert not os.path.exists(tmp_path / "huge.npy")
    with pytest.raises(UsageError, match=".npy"):
        sptool.todense(str(tmp_path / "huge.parquet"), str(tmp_path / "huge.txt"))


def test_memmap_release_path(tmp_path, rng):
    # A dense output over half the budget takes the flush-and-drop path: the result must not change.
    t = random_tensor(rng, (2000, 3000), 5000, duplicates=True, fill_value=2.0)
    sptool.write(t, str(tmp_path / "big.parquet"))
    sptool.todense(str(tmp_path / "big.parquet"), str(tmp_path / "big.npy"), memory="20MB")
    _assert_same(np.load(tmp_path / "big.npy"), dense_oracle(t))


def test_from_dense_roundtrip(rng):
    a = rng.standard_normal((5, 4, 3))
    a[a < 0.5] = 0
    t = sptool.SparseTensor.from_dense(a)
    assert t.canonical and t.nnz == np.count_nonzero(a)
    np.testing.assert_array_equal(t.to_dense(), a)
    h = sptool.SparseTensor.from_dense(a, sparse_ndim=2)
    assert h.nnz == np.count_nonzero(a.any(axis=2))
    np.testing.assert_array_equal(h.to_dense(), a)


def test_scipy_bridges(rng):
    import scipy.sparse as sp

    m = sp.random_array((20, 30), density=0.2, random_state=1, format="csr")
    t = sptool.SparseTensor.from_scipy(m)
    assert t.sort_order == (0, 1)
    np.testing.assert_allclose(t.to_dense(), m.toarray())
    np.testing.assert_allclose(t.to_scipy("csr").toarray(), m.toarray())
    assert sptool.SparseTensor.from_scipy(m.tocsc()).sort_order == (1, 0)


def _lying(tmp_path, idx, vals, shape):
    """A file whose metadata claims row-major order its rows do not have."""
    K = len(shape)
    fields = [pa.field(f"indices_{k}", pa.int64(), False) for k in range(K)] + [pa.field("values", pa.float64(), False)]
    meta = sptool.TensorMeta(shape=shape, sparse_ndim=K, value_type="float64", nnz=len(vals),
                             sort_order=tuple(range(K)), unique=False)
    path = tmp_path / "lie.parquet"
    w = pq.ParquetWriter(path, pa.schema(fields))
    cols = {f"indices_{k}": idx[:, k] for k in range(K)} | {"values": vals}
    for start in range(0, len(vals), 50):  # several batches: some go backwards, some within one
        w.write_table(pa.table({c: v[start:start + 50] for c, v in cols.items()}, schema=pa.schema(fields)))
    w.add_key_value_metadata({"sptool": meta.to_json()})
    w.close()
    return str(path)


@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "complex128"])
def test_row_major_input_written_block_by_block(tmp_path, rng, dtype, monkeypatch):
    """A sorted input is written front to back in block buffers (a tiny budget: many blocks,
    most never written); duplicates and hybrid blocks sum as in the oracle."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "37")
    t = random_tensor(rng, (300, 40, 3), 500, dtype=dtype, duplicates=True, sparse_ndim=2)
    t = sptool.SparseTensor(t.indices, t.values, t.shape).reorder()
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    from sptool.io import BlockScatter

    made = []
    real = BlockScatter.__init__
    # Block writes and a memory map leave the same bytes: only the writer made tells which ran.
    monkeypatch.setattr(BlockScatter, "__init__", lambda self, *a: made.append(a) or real(self, *a))
    out = str(tmp_path / "o.npy")
    from conftest import tiny_budget

    sptool.todense(src, out, memory=tiny_budget(64 << 10))
    assert len(made) == 1
    _assert_same(np.load(out), dense_oracle(t))


@pytest.mark.parametrize("entries", [3_000, 300_000])
def test_each_block_starts_from_zeros(tmp_path, rng, entries):
    """A row-major input over several block buffers (a block is at least 1 MiB), sparse (a few
    cells of each page reached, zeroed again one by one) or dense (the buffer zeroed whole): no
    cell of one block carries into the next."""
    shape = (600, 1_000)
    flat = np.sort(rng.choice(shape[0] * shape[1], entries, replace=False))
    t = sptool.SparseTensor(np.stack(np.unravel_index(flat, shape), axis=1), rng.standard_normal(entries), shape,
                            sort_order=(0, 1), unique=True)
    src, out = str(tmp_path / "t.parquet"), str(tmp_path / "o.npy")
    sptool.write(t, src)
    from conftest import tiny_budget

    sptool.todense(src, out, memory=tiny_budget(64 << 10))
    _assert_same(np.load(out), dense_oracle(t))


def test_rows_out_of_order_without_validation_still_add_up(tmp_path, rng):
    """--no-validate trusts a false row-major claim: rows that go back are added through a map."""
    idx = np.stack([rng.integers(0, 400, 300), rng.integers(0, 30, 300)], axis=1)
    vals = rng.standard_normal(300)
    path = _lying(tmp_path, idx, vals, (400, 30))
    out = str(tmp_path / "o.npy")
    from conftest import tiny_budget

    sptool.todense(path, out, validate=False, memory=tiny_budget(32 << 10))
    want = np.zeros((400, 30))
    np.add.at(want, tuple(idx.T), vals)
    np.testing.assert_allclose(np.load(out), want, rtol=1e-12)
    with pytest.raises(DataError, match="out of order"):
        sptool.todense(path, out)


def test_rows_out_of_order_reaching_ahead_are_not_overwritten(tmp_path, rng, monkeypatch):
    """--no-validate on a false row-major claim: a batch out of order adds to cells past the block
    being gathered, and a later batch in order gathers the block that holds them: both add up."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "50")
    shape = (1_000, 1_000)  # 8 MB: several 1 MiB blocks under a tiny budget
    first = np.sort(rng.choice(100_000, 50, replace=False))
    behind = rng.permutation(rng.choice(np.arange(700_000, 710_000), 50, replace=False))
    ahead = np.sort(rng.choice(np.arange(699_000, 711_000), 50, replace=False))
    idx = np.stack(np.unravel_index(np.concatenate([first, behind, ahead]), shape), axis=1)
    vals = rng.standard_normal(150)
    path = _lying(tmp_path, idx, vals, shape)
    out = str(tmp_path / "o.npy")
    from conftest import tiny_budget

    sptool.todense(path, out, validate=False, memory=tiny_budget(64 << 10))
    want = np.zeros(shape)
    np.add.at(want, tuple(idx.T), vals)
    np.testing.assert_allclose(np.load(out), want, rtol=1e-12)


def test_untouched_blocks_stay_holes(tmp_path):
    """Two entries 1 GiB apart in a 2 GiB output: the file takes a few blocks of disk, not 2 GiB
    (where the filesystem keeps holes at all)."""
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.truncate(64 << 20)
    if os.stat(probe).st_blocks * 512 >= 64 << 20:
        pytest.skip("this filesystem does not keep holes")
    t = sptool.SparseTensor([[0, 0], [1 << 14, 5]], [1.0, 2.0], (1 << 15, 1 << 13), sort_order=(0, 1), unique=True)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    out = str(tmp_path / "o.npy")
    sptool.todense(src, out)
    assert os.stat(out).st_blocks * 512 < 256 << 20
    d = np.load(out, mmap_mode="r")
    assert d.shape == (1 << 15, 1 << 13) and d[0, 0] == 1.0 and d[1 << 14, 5] == 2.0 and d[1 << 14, 4] == 0


@pytest.mark.parametrize("value_type, bad", [
    ("float64", "abc"), ("float64", "[0]"), ("float64", ""), ("float32", "1e300"),
    ("int64", "1.5"), ("int64", "nan"), ("int32", "99999999999"), ("bool", "2"),
])
def test_a_default_value_not_of_the_value_type_is_a_usage_error(tmp_path, value_type, bad):
    """--default-value is read as the tensor's value type (as np.dtype would take it, without
    truncating or overflowing): otherwise exit 2, one line naming the option; the API alike."""
    from click.testing import CliRunner

    from sptool.cli import cli

    t = sptool.SparseTensor([[0, 1], [2, 0]], np.array([1, 0]).astype(value_type), (3, 2))
    src, out = str(tmp_path / "t.parquet"), str(tmp_path / "d.npy")
    sptool.write(t, src)
    r = CliRunner().invoke(cli, ["todense", src, "-o", out, "--default-value", bad])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "--default-value" in r.output, r.output
    with pytest.raises(UsageError, match="--default-value"):
        sptool.todense(src, out, default_value=bad)
    for wrong in ([0], object(), b"0"):
        with pytest.raises(UsageError, match="--default-value"):
            sptool.todense(src, out, default_value=wrong)
    assert not os.path.exists(out)


def test_a_default_value_is_taken_as_the_value_type(tmp_path):
    """The text of --default-value is a string for a string tensor and a number for a number one."""
    from click.testing import CliRunner

    from sptool.cli import cli

    s = sptool.SparseTensor([[0, 0]], np.array(["ab"], dtype=object), (2, 2))
    f = sptool.SparseTensor([[0, 0]], np.array([2.5]), (2, 2))
    for t, text, fill in ((s, "1.5", "1.5"), (f, "1.5", 1.5), (f, "-7", -7.0)):
        src, out = str(tmp_path / "t.parquet"), str(tmp_path / "d.npy")
        sptool.write(t, src)
        r = CliRunner().invoke(cli, ["-q", "todense", src, "-o", out, "--default-value", text])
        assert r.exit_code == 0, r.output
        assert np.load(out).tolist() == dense_oracle(t, fill=fill).tolist()
