"""What sptool does on every version of its dependencies that pyproject.toml allows: CI runs this
file at the floors (click, numpy, pyarrow and rich at their lowest versions) and on the newest
versions, with and without pandas installed (pandas is no dependency of sptool, but pyarrow's
behaviour changes when it is importable)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from thrift_footer import _varint, footer_fields

import sptool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Parquet's CompressionCodec (parquet.thrift): 5 is the framed LZ4 that other readers reject.
UNCOMPRESSED, ZSTD, LZ4_RAW = 0, 6, 7


def _sptool(*args, cwd):
    """The installed ``sptool`` script, as a user runs it."""
    exe = os.path.join(os.path.dirname(sys.executable), "sptool")
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def _codecs(path) -> list[int]:
    """Each column chunk's codec in the first row group, read from the footer's Thrift by our own
    walker (FileMetaData.row_groups[0].columns[c].meta_data.codec)."""
    data = open(path, "rb").read()
    _, fields = footer_fields(data)
    codecs = {}
    for f in fields:
        if len(f.path) == 6 and f.path[:2] == (4, 0) and f.path[2] == 1 and f.path[4:] == (3, 4):
            raw, _ = _varint(data, f.start)
            codecs[f.path[3]] = (raw >> 1) ^ -(raw & 1)  # zigzag
    return [codecs[c] for c in sorted(codecs)]


def test_noise_values_are_written_as_lz4_raw_pages(tmp_path):
    """Values that zstd hardly shrinks go in LZ4_RAW pages (formats/SPEC.md), on every pyarrow
    allowed: pyarrow 16-23 know no codec named "lz4_raw", and a file in framed LZ4 pages would
    be unreadable elsewhere."""
    rng = np.random.default_rng(0)
    idx = np.unique(rng.integers(0, 1000, (5000, 2)), axis=0)
    values = rng.integers(-2**63, 2**63 - 1, len(idx), dtype=np.int64)  # every bit random
    path = str(tmp_path / "noise.parquet")
    sptool.write(sptool.SparseTensor(idx, values, (1000, 1000)), path)
    assert _codecs(path) == [UNCOMPRESSED, UNCOMPRESSED, LZ4_RAW]
    table = pq.read_table(path)
    np.testing.assert_array_equal(table.column("values").to_numpy(), values)


def test_counts_are_written_as_zstd_pages(tmp_path):
    rng = np.random.default_rng(1)
    idx = np.unique(rng.integers(0, 1000, (5000, 2)), axis=0)
    path = str(tmp_path / "counts.parquet")
    sptool.write(sptool.SparseTensor(idx, rng.poisson(3, len(idx)).astype(np.float64), (1000, 1000)), path)
    assert _codecs(path) == [UNCOMPRESSED, UNCOMPRESSED, ZSTD]


def test_the_command_line_reorders_the_sample(tmp_path):
    """The issue's command: with pandas installed, pyarrow 24 and 25 needed it for
    DataType.to_pandas_dtype, which the command line's process keeps pandas out of (exit 3), and
    pyarrow 16-23 need it whether installed or not.  The oracle is NumPy's lexsort."""
    src = os.path.join(ROOT, "sample_data", "unsorted.parquet")
    p = _sptool("reorder", src, "-o", "o.parquet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    given, got = pq.read_table(src), pq.read_table(tmp_path / "o.parquet")
    cols = [c for c in given.column_names if c.startswith("indices_")]
    keys = np.stack([given.column(c).to_numpy() for c in cols])
    order = np.lexsort(keys[::-1])
    for c in cols + ["values"]:
        np.testing.assert_array_equal(got.column(c).to_numpy(), given.column(c).to_numpy()[order])


def test_the_command_line_adopts_a_plain_tables_number_column(tmp_path):
    """``convert --values-column`` on a float column: pyarrow before 26 gave its type to NumPy
    only through pandas, and the column was refused as "not a number" where pandas was absent."""
    pq.write_table(pa.table({"r": [0, 2, 1], "c": [1, 0, 2], "v": [0.5, 1.5, 2.5]}), tmp_path / "plain.parquet")
    p = _sptool("convert", "plain.parquet", "-o", "t.parquet", "--index-columns", "r,c", "--values-column", "v",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    t = sptool.read(str(tmp_path / "t.parquet"))
    assert t.dtype == np.float64 and t.shape == (3, 3)
    dense = np.zeros((3, 3))
    dense[[0, 2, 1], [1, 0, 2]] = [0.5, 1.5, 2.5]
    np.testing.assert_array_equal(t.to_dense(), dense)
