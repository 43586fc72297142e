"""One Parquet file encoded on two threads and stitched (sptool/io/_stitch.py): the oracle is
pyarrow's own single-threaded writer, whose file the stitched one must equal byte for byte, and
pyarrow, DuckDB and Polars reading it back against the NumPy arrays written."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DTYPES, random_tensor
from sptool._checks import read_struct

import sptool
import sptool.io.sink as sink_module
from sptool.errors import DataError
from sptool.io import open_sink, parquet_writer_options
from sptool.io._stitch import StitchedWriter, encode_file
from sptool.io._thrift import write_struct

SHAPE = (300, 50, 20)


@pytest.fixture
def stitched(monkeypatch):
    """Count the stitched writers made, so a test knows the two-thread path ran."""
    made = []

    class Counting(StitchedWriter):
        def __init__(self, *a, **kw):
            made.append(self)
            super().__init__(*a, **kw)

    # The stitched file equals the plain one byte for byte by design: nothing in it tells which ran.
    monkeypatch.setattr(sink_module, "StitchedWriter", Counting)
    return made


def _write(monkeypatch, tensor, path, *, threads: int, group_rows: int):
    # 1 or 2 workers: one writer thread; 3: two encoders and the stitched file
    monkeypatch.setenv("SPTOOL_THREADS", str(threads))
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", str(group_rows))
    sptool.write(tensor, path)
    monkeypatch.delenv("SPTOOL_THREADS")
    monkeypatch.delenv("SPTOOL_ROW_GROUP_ROWS")
    return path


def _string_tensor(rng, nnz):
    idx = np.unique(np.stack([rng.integers(0, s, nnz) for s in SHAPE], axis=1), axis=0)
    words = np.array([f"w{int(i)}" * (1 + int(i) % 3) for i in rng.integers(0, 500, len(idx))], dtype=object)
    return sptool.SparseTensor(idx, words, SHAPE)


def _tensor(rng, dtype, nnz):
    if dtype == "string":
        return _string_tensor(rng, nnz)
    return random_tensor(rng, SHAPE, nnz, dtype=dtype, sort=dtype != "float32")


@pytest.mark.parametrize("dtype", [*DTYPES, "string"])
@pytest.mark.parametrize("group_rows", [173, 1000, 100_000])
def test_same_bytes_as_one_writer(monkeypatch, tmp_path, stitched, rng, dtype, group_rows):
    """Many row groups, a few, and one (the single-threaded path) on every value type."""
    tensor = _tensor(rng, dtype, 2500)
    plain = _write(monkeypatch, tensor, str(tmp_path / "plain.parquet"), threads=2, group_rows=group_rows)
    assert not stitched  # two cores: the one writer thread (see TensorSink._parquet_writer)
    both = _write(monkeypatch, tensor, str(tmp_path / "both.parquet"), threads=3, group_rows=group_rows)
    assert len(stitched) == (1 if tensor.nnz > group_rows else 0)
    with open(plain, "rb") as a, open(both, "rb") as b:
        assert a.read() == b.read()
    assert sorted(os.listdir(tmp_path)) == ["both.parquet", "plain.parquet"]  # no temporary left


def _check_read_back(path, tensor, group_rows):
    f = pq.ParquetFile(path, page_checksum_verification=True)
    table = f.read()
    for k in range(3):
        np.testing.assert_array_equal(table.column(k).to_numpy(), tensor.indices[:, k])
    np.testing.assert_array_equal(table.column(3).to_numpy(), tensor.values)
    md = f.metadata
    assert md.num_rows == tensor.nnz
    assert md.num_row_groups == -(-tensor.nnz // group_rows)
    for r in range(md.num_row_groups):
        lo, hi = r * group_rows, min((r + 1) * group_rows, tensor.nnz)
        group = f.read_row_group(r)
        np.testing.assert_array_equal(group.column(3).to_numpy(), tensor.values[lo:hi])
        for k in range(3):
            col = md.row_group(r).column(k)
            assert col.has_offset_index and col.has_column_index
            assert (col.statistics.min, col.statistics.max) == (tensor.indices[lo:hi, k].min(),
                                                                 tensor.indices[lo:hi, k].max())


def test_readers_agree(monkeypatch, tmp_path, stitched, rng):
    tensor = random_tensor(rng, SHAPE, 4000, sort=True)
    path = _write(monkeypatch, tensor, str(tmp_path / "t.parquet"), threads=3, group_rows=300)
    assert len(stitched) == 1
    _check_read_back(path, tensor, 300)
    report = sptool.validate(path, deep=True, strict=True)
    assert report.ok(strict=True), report
    duckdb = pytest.importorskip("duckdb")
    n, s0, s1, s2, sv = duckdb.connect().execute(
        f"SELECT count(*), sum(indices_0), sum(indices_1), sum(indices_2), sum(\"values\") "
        f"FROM read_parquet('{path}')").fetchone()
    assert (n, s0, s1, s2) == (tensor.nnz, *[int(tensor.indices[:, k].sum()) for k in range(3)])
    assert sv == pytest.approx(float(tensor.values.sum()), rel=1e-12)
    pl = pytest.importorskip("polars")
    frame = pl.read_parquet(path)
    np.testing.assert_array_equal(frame["indices_2"].to_numpy(), tensor.indices[:, 2])
    np.testing.assert_array_equal(frame["values"].to_numpy(), tensor.values)


def test_directory_parts(monkeypatch, tmp_path, stitched, rng):
    """Each part of a directory is stitched on its own and equals the one-thread part."""
    tensor = random_tensor(rng, SHAPE, 3000, sort=True)
    out = {}
    for threads in (2, 3):
        monkeypatch.setenv("SPTOOL_THREADS", str(threads))
        monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "200")
        path = str(tmp_path / f"d{threads}") + "/"
        with open_sink(path, tensor.meta, part_rows=1000) as sink:
            for start in range(0, tensor.nnz, 450):
                sink.write(np.ascontiguousarray(tensor.keys[:, start:start + 450]), tensor.values[start:start + 450])
        out[threads] = {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))}
    assert len(stitched) == 3
    assert list(out[2]) == list(out[3]) and len(out[2]) == 3
    assert out[2] == out[3]
    back = sptool.read(str(tmp_path / "d3"))
    np.testing.assert_array_equal(back.indices, tensor.indices)


def test_empty_and_single_group_writers(tmp_path):
    """The writer on no row groups and on one gives pyarrow's file for the same calls."""
    schema = pa.schema([("indices_0", pa.int64()), ("values", pa.float64())])
    table = pa.table({"indices_0": np.arange(10), "values": np.linspace(0, 1, 10)}, schema=schema)
    options = {"compression": "zstd", "write_page_index": True, "write_page_checksum": True}
    for tables in ([], [table], [table.slice(0, 0), table]):
        plain = pa.BufferOutputStream()
        w = pq.ParquetWriter(plain, schema, **options)
        for tb in tables:
            w.write_table(tb, row_group_size=max(tb.num_rows, 1))
        w.add_key_value_metadata({"k": "v"})
        w.close()
        path = str(tmp_path / "s.parquet")
        s = StitchedWriter(path, schema, options, workers=2, inflight=2)
        for tb in tables:
            s.write_table(tb)
        s.add_key_value_metadata({"k": "v"})
        s.close()
        with open(path, "rb") as f:
            assert f.read() == plain.getvalue().to_pybytes(), len(tables)


@pytest.mark.parametrize("dtype", ["float64", "string", "bool"])
def test_thrift_round_trip(rng, dtype):
    """A footer and an offset index read to a field tree and written back are pyarrow's bytes."""
    tensor = _tensor(rng, dtype, 3000)
    table = pa.Table.from_batches([sptool.io.make_batch(tensor.keys, tensor.values, tensor.meta,
                                                        sptool.io.schema_of(tensor.meta))])
    buf = encode_file(table, table.schema, parquet_writer_options(tensor.meta), {"a": "b" * 300})
    data = buf.to_pybytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - length:-8]
    fields, end = read_struct(footer)
    assert end == len(footer)
    assert bytes(write_struct(fields)) == footer
    chunk = pq.read_metadata(pa.BufferReader(buf)).row_group(0).column(0)
    # FileMetaData.row_groups[0].columns[0]: its offset index (ColumnChunk fields 4 and 5), and
    # ColumnMetaData.data_page_offset (3.9), which pyarrow reads too
    group = [f for f in fields if f[0] == 4][0][2][1][0]
    first = [f for f in group if f[0] == 1][0][2][1][0]
    at, n = [f[2] for f in first if f[0] == 4][0], [f[2] for f in first if f[0] == 5][0]
    assert [f[2] for f in [f for f in first if f[0] == 3][0][2] if f[0] == 9] == [chunk.data_page_offset]
    assert chunk.has_offset_index
    index, used = read_struct(data[at:at + n])
    assert used == n and bytes(write_struct(index)) == data[at:at + n]


def test_error_leaves_nothing(monkeypatch, tmp_path, stitched, rng):
    """Rows out of the promised order after several stitched row groups: no output, no temporary."""
    tensor = random_tensor(rng, SHAPE, 3000, sort=True)
    monkeypatch.setenv("SPTOOL_THREADS", "3")
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "100")
    path = str(tmp_path / "t.parquet")
    with pytest.raises(DataError), open_sink(path, tensor.meta) as sink:
        sink.write(np.ascontiguousarray(tensor.keys[:, :2000]), tensor.values[:2000])
        sink.write(np.ascontiguousarray(tensor.keys[:, :10]), tensor.values[:10])
    assert len(stitched) == 1
    assert os.listdir(tmp_path) == []


def test_small_budget_keeps_one_writer(monkeypatch, tmp_path, stitched, rng):
    """Stitching needs room for two waiting row groups (rows and encoded bytes, 2 x 1000 x 32
    bytes each) eight times over in the usable budget (a quarter of a small total)."""
    from sptool._memory import budget_of

    tensor = random_tensor(rng, SHAPE, 3000, sort=True)
    monkeypatch.setenv("SPTOOL_THREADS", "3")
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "1000")
    room = 4 * 8 * 2 * (2 * 1000 * 32)
    for total, made in ((room - 4, 0), (room, 1)):
        budget = budget_of(None).with_total(total)
        with open_sink(str(tmp_path / f"{total}.parquet"), tensor.meta, budget=budget) as sink:
            sink.write(tensor.keys, tensor.values)
        assert len(stitched) == made
    with open(tmp_path / f"{room - 4}.parquet", "rb") as a, open(tmp_path / f"{room}.parquet", "rb") as b:
        assert a.read() == b.read()


def test_add_encodes_on_every_core(monkeypatch, tmp_path, stitched, rng):
    """add's merge join is lighter than the encoding, so on 2 workers its output is stitched
    from two encoders; the file equals the one-writer file of 1 worker byte for byte, and its
    entries are NumPy's sum of the two dense operands."""
    a = random_tensor(rng, SHAPE, 2500, sort=True)
    b = random_tensor(rng, SHAPE, 2500, sort=True)
    pa_, pb = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    sptool.write(a, pa_)
    sptool.write(b, pb)
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "300")
    outs = {}
    for threads in (1, 2):
        monkeypatch.setenv("SPTOOL_THREADS", str(threads))
        outs[threads] = str(tmp_path / f"sum{threads}.parquet")
        sptool.add(pa_, pb, output=outs[threads])
        assert len(stitched) == threads - 1
    with open(outs[1], "rb") as one, open(outs[2], "rb") as two:
        assert one.read() == two.read()
    back = sptool.read(outs[2])
    dense = np.zeros(SHAPE)
    dense[tuple(back.indices.T)] = back.values
    expected = np.zeros(SHAPE)
    np.add.at(expected, tuple(a.indices.T), a.values)
    np.add.at(expected, tuple(b.indices.T), b.values)
    np.testing.assert_array_equal(dense, expected)
    assert back.nnz == len(np.unique(np.concatenate([a.indices, b.indices]), axis=0))
    assert sptool.validate(outs[2], deep=True, strict=True).ok(strict=True)


def _pyarrow_file(tables, schema, options, entries) -> bytes:
    plain = pa.BufferOutputStream()
    w = pq.ParquetWriter(plain, schema, **options)
    for tb in tables:
        w.write_table(tb, row_group_size=max(tb.num_rows, 1))
    w.add_key_value_metadata(entries)
    w.close()
    return plain.getvalue().to_pybytes()


@pytest.mark.parametrize("bloom", [False, True], ids=["stitched", "bloom filters: pyarrow's writer"])
def test_a_layout_the_stitcher_does_not_know_falls_back_to_pyarrows_writer(tmp_path, rng, bloom):
    """Bloom filters sit between row groups, where the stitcher cannot move them: the first table's
    probe sees that and the whole file goes through pyarrow's writer; either way the file is the
    bytes pyarrow's own writer gives for the same calls."""
    if bloom and "bloom_filter_options" not in pq.ParquetWriter.__init__.__code__.co_varnames:
        pytest.skip("this pyarrow writes no bloom filters")
    schema = pa.schema([("indices_0", pa.int64()), ("values", pa.float64())])
    options = {"compression": "zstd", "write_page_index": True}
    if bloom:
        options["bloom_filter_options"] = {"indices_0": {"ndv": 1000, "fpp": 0.05}}
    tables = [pa.table({"indices_0": np.arange(i, i + 500), "values": rng.random(500)}, schema=schema)
              for i in range(0, 2000, 500)]
    path = str(tmp_path / "s.parquet")
    s = StitchedWriter(path, schema, options, workers=2, inflight=2)
    for tb in tables:
        s.write_table(tb)
    s.add_key_value_metadata({"k": "v"})
    assert s.stitching is (not bloom)
    s.close()
    with open(path, "rb") as f:
        assert f.read() == _pyarrow_file(tables, schema, options, {"k": "v"})


ABORT_A_FALLBACK = """
import sys
import numpy as np, pyarrow as pa
from sptool.io._stitch import StitchedWriter
schema = pa.schema([("indices_0", pa.int64()), ("values", pa.float64())])
options = {"bloom_filter_options": {"indices_0": {"ndv": 100, "fpp": 0.05}}}
s = StitchedWriter(sys.argv[1], schema, options, workers=2, inflight=2)
s.write_table(pa.table({"indices_0": np.arange(100), "values": np.ones(100)}, schema=schema))
assert s.stitching is False
s.abort()
"""


def test_an_aborted_fallback_writer_leaves_no_message(tmp_path):
    """A file written by pyarrow's writer and aborted says nothing on stderr as the process ends (a
    writer left open would try to end the closed file when collected)."""
    if "bloom_filter_options" not in pq.ParquetWriter.__init__.__code__.co_varnames:
        pytest.skip("this pyarrow writes no bloom filters")
    p = subprocess.run([sys.executable, "-c", ABORT_A_FALLBACK, str(tmp_path / "s.parquet")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stderr == "", p.stderr
