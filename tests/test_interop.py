"""Third-party engines read sptool tensors as ordinary Parquet (formats/SPEC.md §11)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import sptool
from sptool.format import TensorMeta
from sptool.io import open_sink

SHAPE = (500, 40, 7)
NNZ = 3000


@pytest.fixture(scope="module")
def tensor():
    rng = np.random.default_rng(2024)
    idx = np.stack([rng.integers(0, s, NNZ) for s in SHAPE], axis=1)
    idx = np.unique(idx, axis=0)  # sorted row-major, unique
    values = rng.standard_normal(len(idx))
    return sptool.SparseTensor(idx, values, SHAPE)


@pytest.fixture(scope="module")
def written(tensor, tmp_path_factory, request):
    """The tensor as one file (several row groups) and as a directory of several parts."""
    base = tmp_path_factory.mktemp("interop")
    file_path = str(base / "t.parquet")
    dir_path = str(base / "parts") + "/"
    mp = pytest.MonkeyPatch()
    request.addfinalizer(mp.undo)
    mp.setenv("SPTOOL_ROW_GROUP_ROWS", "400")  # several row groups per file, for pruning
    sptool.write(tensor, file_path)
    with open_sink(dir_path, tensor.meta, part_rows=1000) as sink:
        for start in range(0, tensor.nnz, 700):
            sink.write(np.ascontiguousarray(tensor.keys[:, start:start + 700]), tensor.values[start:start + 700])
    mp.undo()
    assert pq.read_metadata(file_path).num_row_groups > 3
    assert len([n for n in os.listdir(dir_path) if n.endswith(".parquet")]) >= 3
    assert sptool.validate(file_path).valid and sptool.validate(dir_path).valid
    return file_path, dir_path.rstrip("/")


def expected_sums(t):
    return t.nnz, [int(t.indices[:, k].sum()) for k in range(t.sparse_ndim)], float(t.values.sum())


def check(rows, index_sums, value_sum, t):
    n, want_idx, want_val = expected_sums(t)
    assert rows == n
    assert [int(s) for s in index_sums] == want_idx
    assert value_sum == pytest.approx(want_val, rel=1e-9, abs=1e-9)


COLUMNS = ["indices_0", "indices_1", "indices_2", "values"]


# ---------------------------------------------------------------------------------------------
# pyarrow.dataset

@pytest.mark.parametrize("which", ["file", "dir"])
def test_pyarrow_dataset(written, tensor, which):
    path = written[0] if which == "file" else written[1]
    table = pads.dataset(path, format="parquet").to_table()
    assert table.column_names == COLUMNS
    check(table.num_rows, [table[c].to_numpy().sum() for c in COLUMNS[:3]], table["values"].to_numpy().sum(), tensor)


def test_pyarrow_dataset_ignores_hidden_entries(written, tensor, tmp_path):
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(written[1], d)
    (d / "_SUCCESS").write_bytes(b"")
    (d / ".part-000099.parquet.tmp").write_bytes(b"partial")
    table = pads.dataset(str(d), format="parquet").to_table()
    assert table.num_rows == tensor.nnz
    assert sptool.validate(str(d)).valid


def test_pyarrow_filter_on_sorted_file(written, tensor):
    lo, hi = 100, 180
    table = pads.dataset(written[0], format="parquet").to_table(
        filter=(pads.field("indices_0") >= lo) & (pads.field("indices_0") < hi))
    mask = (tensor.indices[:, 0] >= lo) & (tensor.indices[:, 0] < hi)
    assert table.num_rows == int(mask.sum())
    np.testing.assert_array_equal(table["indices_1"].to_numpy(), tensor.indices[mask, 1])


# ---------------------------------------------------------------------------------------------
# DuckDB

@pytest.fixture(scope="module")
def duckdb():
    return pytest.importorskip("duckdb")


def _duck_sums(con, source):
    return con.execute(
        f"SELECT count(*), sum(indices_0), sum(indices_1), sum(indices_2), sum(\"values\") FROM {source}"
    ).fetchone()


def test_duckdb_reads_dir_glob_and_file(duckdb, written, tensor):
    con = duckdb.connect()
    for source in (f"read_parquet('{written[1]}/*.parquet')", f"read_parquet('{written[0]}')"):
        n, s0, s1, s2, sv = _duck_sums(con, source)
        check(n, [s0, s1, s2], sv, tensor)


def test_duckdb_kv_metadata_exposes_sptool(duckdb, written):
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT value FROM parquet_kv_metadata('{written[0]}') WHERE key = 'sptool'").fetchall()
    assert len(rows) == 1
    raw = rows[0][0]
    assert raw == pq.read_metadata(written[0]).metadata[b"sptool"]
    meta = json.loads(raw)
    assert meta["format"] == "sptool.coo" and meta["shape"] == list(SHAPE)
    parts = con.execute(
        f"SELECT file_name, value FROM parquet_kv_metadata('{written[1]}/*.parquet') WHERE key = 'sptool'"
    ).fetchall()
    assert len(parts) == len([n for n in os.listdir(written[1]) if n.endswith(".parquet")])
    assert sum(json.loads(v)["nnz"] for _, v in parts) == sptool.read(written[1]).nnz


def test_duckdb_range_predicate_on_sorted_file(duckdb, written, tensor):
    con = duckdb.connect()
    lo, hi = 137, 262
    got = con.execute(
        f"SELECT indices_0, indices_1, indices_2, \"values\" FROM read_parquet('{written[0]}') "
        f"WHERE indices_0 BETWEEN {lo} AND {hi} ORDER BY indices_0, indices_1, indices_2").fetchall()
    mask = (tensor.indices[:, 0] >= lo) & (tensor.indices[:, 0] <= hi)
    want = [(*map(int, i), float(v)) for i, v in zip(tensor.indices[mask], tensor.values[mask])]
    assert len(got) == int(mask.sum()) > 0
    assert [tuple(r) for r in got] == want
    # The footer statistics let DuckDB skip row groups outside the range: the file has several, and the
    # range covers only some of them.
    md = pq.read_metadata(written[0])
    spans = [(md.row_group(r).column(0).statistics.min, md.row_group(r).column(0).statistics.max)
             for r in range(md.num_row_groups)]
    assert any(mx < lo or mn > hi for mn, mx in spans)


# ---------------------------------------------------------------------------------------------
# Polars

@pytest.fixture(scope="module")
def pl():
    return pytest.importorskip("polars")


def _polars_sums(pl, frame):
    out = frame.select(pl.len().alias("n"), *[pl.col(c).sum() for c in COLUMNS])
    if hasattr(out, "collect"):
        out = out.collect()
    row = out.row(0)
    return row[0], list(row[1:4]), row[4]


def test_polars_scan_dir_glob(pl, written, tensor):
    n, idx, sv = _polars_sums(pl, pl.scan_parquet(f"{written[1]}/*.parquet"))
    check(n, idx, sv, tensor)


def test_polars_read_file(pl, written, tensor):
    df = pl.read_parquet(written[0])
    assert df.columns == COLUMNS
    assert all(df[c].dtype == pl.Int64 for c in COLUMNS[:3])
    n, idx, sv = _polars_sums(pl, df)
    check(n, idx, sv, tensor)


def test_polars_reads_sptool_metadata(pl, written):
    if not hasattr(pl, "read_parquet_metadata"):
        pytest.skip("polars without read_parquet_metadata")
    md = pl.read_parquet_metadata(written[0])
    assert json.loads(md["sptool"])["nnz"] == pq.read_metadata(written[0]).num_rows


def test_hybrid_tensor_reads_as_lists(pl, duckdb, tmp_path):
    """A SelectedRows (K = 1) tensor: engines see one list of m values per row."""
    rng = np.random.default_rng(5)
    rows = np.array([[0], [3], [3], [9]])
    values = rng.standard_normal((4, 2, 3))
    t = sptool.SparseTensor(rows, values, (10, 2, 3), sort_order=(0,), unique=False)
    path = str(tmp_path / "h.parquet")
    meta = sptool.write(t, path)
    stored = TensorMeta.from_dict(json.loads(pq.read_metadata(path).metadata[b"sptool"]))
    assert stored.with_(created_by=None) == meta.with_(created_by=None)
    assert stored.shape == (10, 2, 3) and stored.sparse_ndim == 1 and not stored.unique
    total = duckdb.connect().execute(
        f"SELECT count(*), sum(list_sum(\"values\")), min(len(\"values\")) FROM read_parquet('{path}')").fetchone()
    assert total[0] == 4 and total[2] == 6
    assert total[1] == pytest.approx(values.sum())
    df = pl.read_parquet(path)
    assert df.height == 4
    np.testing.assert_allclose(np.stack(df["values"].to_numpy()).reshape(4, 2, 3), values)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("ordered", [True, False])
def test_engines_read_every_encoding_exactly(pl, duckdb, tmp_path, dtype, ordered):
    """Each value type's column encoding (delta indices, byte-stream-split or dictionary values),
    sorted or not: DuckDB and Polars decode exactly the rows written."""
    rng = np.random.default_rng(11)
    n = 5000
    idx = np.stack([rng.integers(0, s, n) for s in (300_000, 300_000)], axis=1)
    if ordered:
        idx = np.unique(idx, axis=0)
    values = (rng.standard_normal(len(idx)) * 1000).astype(dtype)
    t = sptool.SparseTensor(idx, values, (300_000, 300_000), sort_order=(0, 1) if ordered else (), unique=ordered)
    path = str(tmp_path / "t.parquet")
    sptool.write(t, path)
    got = duckdb.connect().execute(f"SELECT indices_0, indices_1, \"values\" FROM read_parquet('{path}')").fetchnumpy()
    frame = pl.read_parquet(path)
    for cols in (got, {c: frame[c].to_numpy() for c in frame.columns}):
        np.testing.assert_array_equal(cols["indices_0"], idx[:, 0])
        np.testing.assert_array_equal(cols["indices_1"], idx[:, 1])
        np.testing.assert_array_equal(np.asarray(cols["values"]), values)
