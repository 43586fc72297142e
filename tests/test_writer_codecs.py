"""The Parquet writer's per-column codecs: the index columns bit-packed and left
uncompressed, every leaf of the values zstd-compressed (lz4_raw for fixed-width values that are
near noise), each page checksummed; the files read back exactly by pyarrow (verifying the
checksums), DuckDB and Polars, and validate clean."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

import sptool

SHAPE = (4000, 300, 20)


@pytest.fixture(scope="module")
def duckdb():
    return pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def pl():
    return pytest.importorskip("polars")


def _tensor(value_type: str, rng):
    idx = np.unique(np.stack([rng.integers(0, s, 6000) for s in SHAPE], axis=1), axis=0)
    n = len(idx)
    if value_type == "complex128":
        values = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    elif value_type == "string":
        values = np.array([f"w{k}" for k in rng.integers(0, 50, n)], dtype=object)
    elif value_type == "noise":  # every bit random: no codec shrinks it
        values = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    elif value_type == "normal":  # float64 noise: zstd saves a tenth of its byte planes
        values = rng.standard_normal(n)
    elif value_type == "float64":  # counts: zstd shrinks them to a fraction
        values = rng.poisson(3, n).astype(np.float64)
    else:
        values = (rng.standard_normal(n) * 1000).astype(value_type)
    return idx, values


# What zstd at the default level does to the values' byte planes, by Python's own arithmetic on
# the bytes (the oracle for the codec choice: zstd where it saves 15% or more).
def _zstd_saving(values) -> float:
    import pyarrow as pa

    planes = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), -1).T.tobytes()
    return 1 - len(pa.compress(planes, codec="zstd", asbytes=True)) / len(planes)


@pytest.mark.parametrize("value_type,codec", [("float64", "ZSTD"), ("int32", "ZSTD"), ("complex128", "ZSTD"),
                                              ("string", "ZSTD"), ("normal", "LZ4"), ("noise", "LZ4")])
def test_index_columns_uncompressed_values_zstd(tmp_path, value_type, codec):
    """pyarrow names LZ4_RAW pages' codec LZ4 (its writer has no framed LZ4 for Parquet)."""
    rng = np.random.default_rng(15)
    idx, values = _tensor(value_type, rng)
    if value_type in ("float64", "int32", "normal", "noise"):
        assert (_zstd_saving(values) >= 0.15) == (codec == "ZSTD")
    path = str(tmp_path / "t.parquet")
    sptool.write(sptool.SparseTensor(idx, values, SHAPE), path)
    md = pq.read_metadata(path)
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            if col.path_in_schema.startswith("indices_"):
                assert col.compression == "UNCOMPRESSED" and "DELTA_BINARY_PACKED" in col.encodings
            else:
                assert col.path_in_schema.split(".")[0] == "values" and col.compression == codec
    # The oracle: pyarrow verifying every page's CRC reads back the rows written.
    table = pq.ParquetFile(path, page_checksum_verification=True).read()
    for k in range(len(SHAPE)):
        np.testing.assert_array_equal(table.column(f"indices_{k}").to_numpy(), idx[:, k])
    got = table.column("values").to_pylist()
    want = [complex(v["real"], v["imag"]) for v in got] if value_type == "complex128" else got
    assert want == values.tolist()
    report = sptool.validate(path, deep=True, strict=True)
    assert report.ok(strict=True), report.codes


def test_hybrid_blocks_are_compressed_too(tmp_path):
    """A block tensor's values are a nested column (values.list.element): zstd reaches it."""
    rng = np.random.default_rng(16)
    idx = np.unique(rng.integers(0, 50, size=(200, 1)), axis=0)
    values = rng.standard_normal((len(idx), 3, 2))
    path = str(tmp_path / "h.parquet")
    sptool.write(sptool.SparseTensor(idx, values, (50, 3, 2), sort_order=(0,), unique=True), path)
    col = pq.read_metadata(path).row_group(0).column(1)
    assert col.path_in_schema.startswith("values.") and col.compression == "ZSTD"
    got = pq.ParquetFile(path, page_checksum_verification=True).read().column("values").to_pylist()
    np.testing.assert_array_equal(np.array(got).reshape(values.shape), values)


@pytest.mark.parametrize("value_type", ["float64", "normal"])
def test_duckdb_and_polars_read_uncompressed_index_pages(tmp_path, pl, duckdb, value_type):
    """Both values codecs (zstd, lz4_raw) read by both engines."""
    rng = np.random.default_rng(17)
    idx, values = _tensor(value_type, rng)
    path = str(tmp_path / "t.parquet")
    sptool.write(sptool.SparseTensor(idx, values, SHAPE), path)
    got = duckdb.connect().execute(
        f"SELECT indices_0, indices_1, indices_2, \"values\" FROM read_parquet('{path}')").fetchnumpy()
    frame = pl.read_parquet(path)
    for cols in (got, {c: frame[c].to_numpy() for c in frame.columns}):
        for k in range(3):
            np.testing.assert_array_equal(cols[f"indices_{k}"], idx[:, k])
        np.testing.assert_array_equal(np.asarray(cols["values"]), values)
