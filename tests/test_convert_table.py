"""convert --index-columns / --values-column / --plain: plain tables written by DuckDB and Polars
adopted as tensors, and tensors written as plain tables that DuckDB and Polars read back; the
engines themselves are the oracles."""

from __future__ import annotations

import gzip
import os

import duckdb
import numpy as np
import polars as pl
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import random_tensor, write_tensor

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError

INT_TYPES = [pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64]


def _frame(rng, n=300, types=(pl.Int32, pl.UInt16), hi=(90, 70)) -> pl.DataFrame:
    return pl.DataFrame({"row": pl.Series(rng.integers(0, hi[0], n)).cast(types[0]),
                         "col": pl.Series(rng.integers(0, hi[1], n)).cast(types[1]),
                         "value": rng.standard_normal(n)})


def _assert_rows(t: sptool.SparseTensor, df: pl.DataFrame, index=("row", "col"), value="value"):
    """The tensor's rows are the frame's rows, in the frame's order."""
    want = np.stack([df[c].to_numpy().astype(np.int64) for c in index], axis=1)
    np.testing.assert_array_equal(t.indices, want)
    if value is None:
        assert t.values.dtype == bool and t.values.all()
    else:
        np.testing.assert_array_equal(t.values, df[value].to_numpy())


@pytest.mark.parametrize("types", [(INT_TYPES[i], INT_TYPES[-1 - i]) for i in range(len(INT_TYPES))],
                         ids=lambda t: f"{t[0]}-{t[1]}")
def test_polars_parquet_any_integer_types(tmp_path, rng, tiny_batches, types):
    df = _frame(rng, types=types, hi=(100, 60))
    df.write_parquet(tmp_path / "table.parquet", row_group_size=50)
    out = str(tmp_path / "t.parquet")
    r = sptool.convert(str(tmp_path / "table.parquet"), out, index_columns="row,col", values_column="value")
    t = sptool.read(out)
    _assert_rows(t, df)
    assert t.shape == (df["row"].max() + 1, df["col"].max() + 1)  # inferred from the maxima (Polars' max)
    assert r["rows"] == len(df) and sptool.validate(out).valid
    assert t.meta.dimension_names == ("row", "col")
    assert t.sort_order == ()  # random rows: no order claimed


def test_duckdb_directory_sorted_rows_are_found_canonical(tmp_path, rng):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT floor(random() * 50)::INTEGER AS i, floor(random() * 40)::BIGINT AS j, "
                "floor(random() * 30)::SMALLINT AS k, random() AS v FROM range(2000)")
    con.execute("CREATE TABLE u AS SELECT i, j, k, sum(v) AS v FROM t GROUP BY ALL ORDER BY i, j, k")
    con.execute(f"COPY u TO '{tmp_path / 'one.parquet'}' (FORMAT parquet, ROW_GROUP_SIZE 100)")
    out = str(tmp_path / "t.parquet")
    sptool.convert(str(tmp_path / "one.parquet"), out, index_columns=["i", "j", "k"], values_column="v",
                   shape=(50, 41, 31))
    t = sptool.read(out)
    want = con.execute("SELECT i, j, k, v FROM u ORDER BY i, j, k").fetchnumpy()
    np.testing.assert_array_equal(t.indices, np.stack([want["i"], want["j"], want["k"]], axis=1))
    np.testing.assert_array_equal(t.values, want["v"])
    assert t.shape == (50, 41, 31) and t.canonical and sptool.validate(out).valid  # order found on the fly
    # A directory of several files, as DuckDB writes per thread: read in file-name order.
    folder = tmp_path / "parts"
    con.execute("SET threads = 2")
    con.execute(f"COPY (SELECT * FROM u) TO '{folder}' (FORMAT parquet, PER_THREAD_OUTPUT true)")
    files = sorted(os.listdir(folder))
    sptool.convert(str(folder), out, index_columns="i,j,k", values_column="v")
    t = sptool.read(out)
    got = pl.concat([pl.read_parquet(folder / f) for f in files])
    _assert_rows(t, got, ("i", "j", "k"), "v")


def test_sorted_with_repeats_is_sorted_not_unique(tmp_path):
    df = pl.DataFrame({"r": [0, 0, 1, 3, 3], "c": [1, 2, 0, 4, 4], "x": [1.0, 2.0, 3.0, 4.0, 5.0]})
    df.write_parquet(tmp_path / "d.parquet")
    out = str(tmp_path / "t.parquet")
    sptool.convert(str(tmp_path / "d.parquet"), out, index_columns="r,c", values_column="x")
    t = sptool.read(out)
    assert t.sort_order == (0, 1) and not t.meta.unique and sptool.validate(out).valid
    np.testing.assert_allclose(t.to_dense()[3, 4], 9.0)


@pytest.mark.parametrize("name,columns", [("t.csv", "row,col"), ("t.csv", "1,2"), ("t.tsv", "row,2"),
                                          ("t.csv.gz", "row,col")])
def test_delimited_text_with_a_header(tmp_path, rng, tiny_batches, name, columns):
    df = _frame(rng, n=500)
    path = tmp_path / name
    sep = "\t" if ".tsv" in name else ","
    text = df.write_csv(separator=sep)
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    out = str(tmp_path / "t.parquet")
    sptool.convert(str(path), out, index_columns=columns, values_column="3")
    t = sptool.read(out)
    _assert_rows(t, df)
    assert sptool.validate(out).valid


@pytest.mark.parametrize("name", ["t.arrow", "t.feather"])
def test_arrow_ipc_files(tmp_path, rng, name):
    df = _frame(rng)
    if name.endswith(".arrow"):
        df.write_ipc(tmp_path / name)
    else:
        feather.write_feather(df.to_arrow(), str(tmp_path / name), chunksize=64)
    out = str(tmp_path / "t.parquet")
    sptool.convert(str(tmp_path / name), out, index_columns="row,col", values_column="value", shape=(90, 70))
    t = sptool.read(out)
    _assert_rows(t, df)
    assert t.shape == (90, 70)


def test_pattern_table_without_values(tmp_path, rng):
    df = _frame(rng).select("row", "col")
    df.write_parquet(tmp_path / "edges.parquet")
    out = str(tmp_path / "t.parquet")
    sptool.convert(str(tmp_path / "edges.parquet"), out, index_columns="row,col")
    _assert_rows(sptool.read(out), df, value=None)


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_plain_output_read_by_duckdb_and_polars(tmp_path, rng, suffix):
    t = random_tensor(rng, (40, 30, 20), 200, dtype="float32")
    src = write_tensor(tmp_path, "t.parquet", t)
    out = str(tmp_path / f"plain{suffix}")
    runner = CliRunner()
    r = runner.invoke(cli, ["-q", "convert", src, "-o", out, "--plain", "--dimension-names", "user,item,day",
                            "--values-column", "score"])
    assert r.exit_code == 0, r.output
    df = pl.read_parquet(out) if suffix == ".parquet" else pl.read_ipc(out)
    assert df.columns == ["user", "item", "day", "score"] and df["score"].dtype == pl.Float32
    _assert_rows(t, df, ("user", "item", "day"), "score")
    if suffix == ".parquet":
        assert b"sptool" not in (pq.read_metadata(out).metadata or {})
        got = duckdb.sql(f"SELECT user, item, day, score FROM '{out}'").fetchnumpy()
        np.testing.assert_array_equal(got["score"], t.values)
        # ...and back again: the plain table adopted by name gives the same tensor.
        back = str(tmp_path / "back.parquet")
        sptool.convert(out, back, index_columns="user,item,day", values_column="score", shape=t.shape)
        np.testing.assert_array_equal(sptool.read(back).to_dense(), t.to_dense())


def test_plain_defaults_to_the_format_column_names(tmp_path, rng):
    t = random_tensor(rng, (10, 8), 20)
    out = str(tmp_path / "plain.parquet")
    sptool.convert(write_tensor(tmp_path, "t.parquet", t), out, plain=True)
    assert pq.read_schema(out).names == ["indices_0", "indices_1", "values"]
    with pytest.raises(sptool.FormatError, match="E_NO_SPTOOL_METADATA"):
        sptool.read(out)


@pytest.mark.parametrize("frame,args,error,message", [
    (pl.DataFrame({"r": [0, -3], "c": [1, 1], "v": [1.0, 2.0]}), {}, DataError,
     "row 2: index -3 in column 'r' is negative"),
    (pl.DataFrame({"r": [0, None, 2], "c": [1, 1, 1], "v": [1.0, 2.0, 3.0]}), {}, DataError,
     "row 2: index column 'r' is empty (null)"),
    (pl.DataFrame({"r": [0.5, 1.0], "c": [1, 1], "v": [1.0, 2.0]}), {}, DataError,
     "index column 'r' holds double, not integers"),
    (pl.DataFrame({"r": [0, 7], "c": [1, 1], "v": [1.0, 2.0]}), {"shape": (5, 5)}, DataError,
     "row 2: index 7 in column 'r' is outside --shape [5, 5]"),
    (pl.DataFrame({"r": [0, 1], "c": [1, 1], "v": [1.0, None]}), {}, DataError,
     "row 2: value column 'v' is empty (null)"),
    (pl.DataFrame({"r": [0], "c": [1], "v": [1.0]}), {"index_columns": "r,cc"}, UsageError,
     "the table has no column 'cc'; its columns are r, c, v"),
    (pl.DataFrame({"r": [0], "c": [1], "v": ["a"]}), {}, UsageError, "must hold numbers or booleans"),
    (pl.DataFrame({"r": [0], "c": [1], "v": [1.0]}), {"shape": (5,)}, UsageError,
     "--shape [5] has 1 dimensions but --index-columns names 2 columns"),
])
def test_bad_tables(tmp_path, frame, args, error, message):
    frame.write_parquet(tmp_path / "bad.parquet")
    out = tmp_path / "t.parquet"
    kw = {"index_columns": "r,c", "values_column": "v", **args}
    with pytest.raises(error) as e:
        sptool.convert(str(tmp_path / "bad.parquet"), str(out), **kw)
    assert message in str(e.value) and str(tmp_path / "bad.parquet") in str(e.value)
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.parquet"]


def test_bad_text_names_its_line(tmp_path):
    (tmp_path / "bad.csv").write_text("row,col,value\n1,2,3.5\n4,x,1\n")
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / "bad.csv"), "--index-columns", "row,col",
                                 "--values-column", "value", "-o", str(tmp_path / "t.parquet")])
    assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
    assert "bad.csv: row 2 (line 3): index column 'col' holds 'x'" in r.output
    assert not (tmp_path / "t.parquet").exists()


def test_usage_of_the_options(tmp_path, rng):
    src = write_tensor(tmp_path, "t.parquet", random_tensor(rng, (4, 4), 5))
    runner = CliRunner()
    for args, message in [(["--values-column", "v"], "--values-column needs --index-columns"),
                          (["--dimension-names", "a,b"], "--dimension-names names the index columns of a --plain"),
                          (["--plain", "-o", str(tmp_path / "x.csv")], "--plain writes a .parquet, .arrow or .feather"),
                          (["--plain", "--dimension-names", "a,a"], "column names must differ")]:
        argv = ["convert", src, *args] + ([] if "-o" in args else ["-o", str(tmp_path / "x.parquet")])
        r = runner.invoke(cli, argv)
        assert r.exit_code == 2 and message in r.output, (args, r.output)
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


def test_zoned_timestamp_values_refused_in_one_line(tmp_path):
    """A zoned timestamp has no NumPy type without pandas (which the command line keeps out):
    still the one-line refusal, exit 2, nothing written."""
    import subprocess
    import sys

    import pyarrow as pa

    src = tmp_path / "ts.parquet"
    pq.write_table(pa.table({"row": [0, 1], "value": pa.array([1, 2], pa.timestamp("us", tz="UTC"))}), src)
    out = tmp_path / "t.parquet"
    r = subprocess.run([sys.executable, "-P", "-m", "sptool", "convert", str(src), "--index-columns", "row",
                        "--values-column", "value", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "'value' holds timestamp[us, tz=UTC], which is not a number" in r.stderr and "ts.parquet" in r.stderr
    assert not out.exists()
