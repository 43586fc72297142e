"""Generate the sptool conformance corpus (formats/SPEC.md §12).

Usage: python formats/make_conformance.py [OUTDIR]     (default: formats/conformance next to this file)

Every case is a directory OUTDIR/<case>/ holding one tensor -- ``data.parquet``, a directory ``data/`` of
parts, or an IPC stream ``data.arrows`` -- and ``expected.json``:

    {"valid": bool, "codes": [...], "description": "...", "info": [...], "deep_codes": [...]}

``valid`` and ``codes`` are what a conforming ``validate`` reports in the default (full) mode: the sorted set of
failed checks of severity fatal, error or warning.  ``info`` (optional) lists the info-level codes reported;
``deep_codes`` (optional) is the code set in ``--deep`` mode where it differs from ``codes``.

The files are built with pyarrow directly (not with sptool's writer), so that broken files can be made and the
corpus does not depend on sptool.  The output is deterministic: no randomness, no timestamps.  Parquet bytes
may still differ between pyarrow versions; tests/test_conformance.py compares the corpus semantically.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

CREATED_BY = "make_conformance.py"
DROP = object()  # meta(key=DROP) removes a key
INT64_MAX = 2**63 - 1
INT64 = pa.int64()

CASES: dict[str, tuple[Callable[[str], None], dict]] = {}


def case(name: str, *, valid: bool, codes=(), description: str, info=(), deep_codes=None, strict_codes=None):
    """Register a builder ``fn(case_dir)`` for the case ``name`` with its expected report (and,
    with ``strict_codes``, the codes strict mode adds to it)."""
    expected = {"valid": valid, "codes": sorted(set(codes)), "description": description}
    if info:
        expected["info"] = sorted(set(info))
    if deep_codes is not None:
        expected["deep_codes"] = sorted(set(deep_codes))
    if strict_codes is not None:
        expected["strict_codes"] = sorted(set(strict_codes))

    def register(fn):
        assert name not in CASES, name
        CASES[name] = (fn, expected)
        return fn

    return register


# ---------------------------------------------------------------------------------------------
# building blocks

def meta(**changes) -> dict:
    """The `sptool` metadata of the default 2-D tensor (shape [4, 5], 4 rows, canonical), changed."""
    d = {
        "format": "sptool.coo", "version": "1.0.0", "shape": [4, 5], "sparse_ndim": 2,
        "value_type": "float64", "fill_value": 0.0, "nnz": 4, "sort_order": [0, 1],
        "unique": True, "canonical": True, "created_by": CREATED_BY,
    }
    for key, value in changes.items():
        if value is DROP:
            d.pop(key, None)
        else:
            d[key] = value
    return d


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def index_field(k: int, nullable: bool = False, type_=INT64) -> pa.Field:
    return pa.field(f"indices_{k}", type_, nullable=nullable)


def table(indices, values: pa.Array, *, nullable: bool = False, values_nullable: bool | None = None,
          index_type=INT64, names=None) -> pa.Table:
    """A table from K lists of indices and a values array (columns indices_0.., values)."""
    values_nullable = nullable if values_nullable is None else values_nullable
    fields = [index_field(k, nullable, index_type) for k in range(len(indices))]
    fields.append(pa.field("values", values.type, nullable=values_nullable))
    if names is not None:
        fields = [f.with_name(n) for f, n in zip(fields, names)]
    arrays = [pa.array(col, type=index_type) for col in indices] + [values]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


# The default 2-D tensor: shape [4, 5], canonical.
ROWS_2D = ([0, 1, 2, 3], [1, 3, 0, 4])
VALUES_2D = [1.5, 2.5, -3.0, 4.25]


def table_2d(values=None, **kw) -> pa.Table:
    return table(ROWS_2D, values if values is not None else pa.array(VALUES_2D, pa.float64()), **kw)


def fsl(rows, elem: pa.DataType, size: int, item_nullable: bool = False) -> pa.Array:
    return pa.array(rows, type=pa.list_(pa.field("item", elem, nullable=item_nullable), size))


def _metadata_bytes(md) -> bytes | None:
    if md is None:
        return None
    if isinstance(md, dict):
        return dumps(md).encode()
    return md.encode() if isinstance(md, str) else md


def _auto_sorting(md, num_columns: int):
    """sorting_columns mirroring a dict's sort_order when that is a list of usable column numbers."""
    if not isinstance(md, dict):
        return None
    order = md.get("sort_order")
    if not isinstance(order, list) or not order:
        return None
    if not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < num_columns for s in order):
        return None
    return [pq.SortingColumn(s) for s in order]


def write_parquet(path: str, tables, md, *, sorting="auto", stats=True, store_schema=True) -> None:
    """Write one row group per table (a single table is one row group) and the `sptool` entry at close,
    as sptool's writer does.  ``sorting``: "auto" (mirror sort_order), None, or a list of SortingColumn."""
    if isinstance(tables, pa.Table):
        tables = [tables]
    schema = tables[0].schema
    if sorting == "auto":
        sorting = _auto_sorting(md, len(schema))
    writer = pq.ParquetWriter(
        path, schema, compression="none", use_dictionary=False, write_statistics=stats,
        sorting_columns=sorting or None, store_schema=store_schema,
    )
    for t in tables:
        writer.write_table(t, row_group_size=max(t.num_rows, 1))
    raw = _metadata_bytes(md)
    if raw is not None:
        writer.add_key_value_metadata({"sptool": raw})
    writer.close()


def data_file(d: str) -> str:
    return os.path.join(d, "data.parquet")


def data_dir(d: str) -> str:
    path = os.path.join(d, "data")
    os.makedirs(path)
    return path


def write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def stream_bytes(schema: pa.Schema, header, batches, *, eos: bool = True) -> bytes:
    """An IPC stream: ``header`` (dict or raw) in the schema metadata, then ``batches`` as
    (table_or_batch, custom_metadata_or_None) pairs, then the end-of-stream marker if ``eos``."""
    raw = _metadata_bytes(header)
    schema = schema.with_metadata({"sptool": raw} if raw is not None else {})
    sink = pa.BufferOutputStream()
    writer = pa.ipc.new_stream(sink, schema)
    for data, custom in batches:
        data = pa.RecordBatch.from_arrays([c.combine_chunks() for c in data.columns], schema=schema)
        if custom is None:
            writer.write_batch(data)
        else:
            writer.write_batch(data, custom_metadata=custom)
    writer.close()
    out = sink.getvalue().to_pybytes()
    end = b"\xff\xff\xff\xff\x00\x00\x00\x00"
    assert out.endswith(end)
    return out if eos else out[: -len(end)]


def trailer(nnz, shape) -> dict:
    return {"sptool.trailer": dumps({"nnz": nnz, "shape": shape})}


def empty_like(t: pa.Table) -> pa.Table:
    return t.schema.empty_table()


def smeta(**changes) -> dict:
    """A stream header: the default 2-D metadata with a promised trailer."""
    return meta(**{"stream": {"trailer": True}, **changes})


# ---------------------------------------------------------------------------------------------
# byte surgery

def _footer_span(data: bytes) -> tuple[int, int]:
    (length,) = struct.unpack("<I", data[-8:-4])
    return len(data) - 8 - length, len(data) - 8


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return value, pos
        shift += 7


def overstate_page_size(path: str, column: int) -> None:
    """Make the first data page header of ``column`` (row group 0) claim more bytes than its column chunk
    holds: a truncated data page, with the footer intact."""
    md = pq.read_metadata(path)
    offset = md.row_group(0).column(column).data_page_offset
    data = bytearray(open(path, "rb").read())
    # PageHeader (thrift compact): 1: type (i32), 2: uncompressed_page_size (i32), 3: compressed_page_size.
    pos = offset
    for field_header in (0x15, 0x15, 0x15):
        assert data[pos] == field_header, "unexpected page header layout"
        start = pos + 1
        _, pos = _read_varint(data, start)
    width = pos - start
    # The largest zigzag varint of the same width, so that nothing else moves.
    biggest = (1 << (7 * width)) - 2
    encoded = bytearray()
    v = biggest
    for _ in range(width):
        encoded.append((v & 0x7F) | (0x80 if len(encoded) < width - 1 else 0))
        v >>= 7
    data[start:pos] = encoded
    write_bytes(path, bytes(data))


def rename_footer_key(path: str, old: bytes, new: bytes) -> None:
    """Rename a key-value metadata key in the footer (same length; thrift binary: varint length, bytes)."""
    assert len(old) == len(new) < 128
    data = bytearray(open(path, "rb").read())
    lo, hi = _footer_span(bytes(data))
    footer = bytes(data[lo:hi])
    pattern = bytes([len(old)]) + old
    assert footer.count(pattern) == 1, "key not found exactly once"
    data[lo:hi] = footer.replace(pattern, bytes([len(new)]) + new)
    write_bytes(path, bytes(data))


def patch_footer_int64(path: str, old: int, new: int) -> None:
    """Replace every 8-byte little-endian ``old`` in the footer (statistics) by ``new``."""
    data = bytearray(open(path, "rb").read())
    lo, hi = _footer_span(bytes(data))
    footer = bytes(data[lo:hi])
    pattern, repl = struct.pack("<q", old), struct.pack("<q", new)
    count = footer.count(pattern)
    assert count >= 1, "statistic not found in the footer"
    data[lo:hi] = footer.replace(pattern, repl)
    write_bytes(path, bytes(data))


# =============================================================================================
# valid cases

@case("valid_2d_canonical_float64", valid=True,
      description="2-D canonical float64 with dimension_names and attributes, sorting_columns and statistics")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(dimension_names=["row", None], attributes={"source": "corpus"}))


@case("valid_3d_unsorted_duplicates", valid=True,
      description="3-D, rows in no order with a repeated coordinate: sort_order [], unique false")
def _(d):
    idx = ([2, 0, 2, 1, 0], [3, 1, 3, 0, 2], [1, 4, 1, 2, 0])
    t = table(idx, pa.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    write_parquet(data_file(d), t, meta(shape=[3, 4, 5], sparse_ndim=3, nnz=5, sort_order=[], unique=False,
                                        canonical=False))


@case("valid_column_major", valid=True,
      description="sort_order [1, 0] (column-major), unique, not canonical; sorting_columns [1, 0]")
def _(d):
    idx = ([1, 3, 0, 2], [0, 0, 2, 4])
    write_parquet(data_file(d), table(idx, pa.array([1.0, 2.0, 3.0, 4.0])),
                  meta(sort_order=[1, 0], canonical=False))


@case("valid_partial_sort_order", valid=True,
      description="K = 3 sorted by the subset [2, 0] only, with ties and a repeated coordinate (unique false)")
def _(d):
    idx = ([0, 1, 1, 1, 2], [3, 2, 2, 0, 1], [0, 0, 0, 2, 2])
    write_parquet(data_file(d), table(idx, pa.array([1, 2, 3, 4, 5], pa.int32())),
                  meta(shape=[3, 4, 3], sparse_ndim=3, value_type="int32", fill_value=0, nnz=5,
                       sort_order=[2, 0], unique=False, canonical=False))


@case("valid_hybrid_row_sparse", valid=True,
      description="SelectedRows: K = 1, shape [6, 2, 3], values fixed_size_list<float32>[6], a repeated row id")
def _(d):
    rows = [[float(10 * r + i) + 1 for i in range(6)] for r in range(4)]
    t = table(([0, 2, 2, 5],), fsl(rows, pa.float32(), 6))
    write_parquet(data_file(d), t, meta(shape=[6, 2, 3], sparse_ndim=1, value_type="float32", nnz=4,
                                        sort_order=[0], unique=False, canonical=False))


@case("valid_hybrid_fixed_shape_tensor", valid=True,
      description="hybrid values annotated as arrow.fixed_shape_tensor with shape == shape[K:]")
def _(d):
    storage = fsl([[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]], pa.float32(), 6, True)
    values = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [2, 3]), storage)
    t = table(([1, 3],), values)
    write_parquet(data_file(d), t, meta(shape=[4, 2, 3], sparse_ndim=1, value_type="float32", nnz=2,
                                        sort_order=[0]))


def _complex(vals, part):
    typ = pa.struct([pa.field("real", part, nullable=False), pa.field("imag", part, nullable=False)])
    return pa.array([{"real": v.real, "imag": v.imag} for v in vals], type=typ)


@case("valid_complex128", valid=True, description="complex128 values as struct<real: double, imag: double>")
def _(d):
    write_parquet(data_file(d), table_2d(_complex([1 + 2j, -3j, 4.5 + 0j, 1e300 - 1e-300j], pa.float64())),
                  meta(value_type="complex128", fill_value=[0.0, 0.0]))


@case("valid_complex64_nan_fill", valid=True, description="complex64 with fill_value [1.5, \"NaN\"]")
def _(d):
    write_parquet(data_file(d), table_2d(_complex([1 + 2j, 3j, 4.5 + 0j, 2 + 2j], pa.float32())),
                  meta(value_type="complex64", fill_value=[1.5, "NaN"]))


@case("valid_string_unique", valid=True, description="string values (large_utf8), unique, non-empty fill")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array(["a", "b\u00e9", "", "\U0001f600"], pa.large_string())),
                  meta(value_type="string", fill_value="?"))


@case("valid_binary", valid=True, description="binary values, base64 fill_value \"AQI=\"")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([b"\x00", b"ab", b"", b"\xff\xfe"], pa.binary())),
                  meta(value_type="binary", fill_value="AQI="))


@case("valid_bool_iso", valid=True, description="bool values with iso true (every value true)")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([True] * 4)),
                  meta(value_type="bool", fill_value=False, iso=True))


@case("valid_empty", valid=True, description="nnz 0: one zero-row row group")
def _(d):
    write_parquet(data_file(d), empty_like(table_2d()), meta(nnz=0))


@case("valid_empty_no_row_groups", valid=True, description="nnz 0 with no row groups at all")
def _(d):
    schema = table_2d().schema
    writer = pq.ParquetWriter(data_file(d), schema, compression="none")
    writer.add_key_value_metadata({"sptool": dumps(meta(nnz=0))})
    writer.close()


@case("valid_zero_extent", valid=True,
      description="a dimension of size 0: shape [5, 0, 3] with K = 2 (no row can exist), nnz 0")
def _(d):
    t = table(([], []), fsl([], pa.float64(), 3))
    write_parquet(data_file(d), empty_like(t), meta(shape=[5, 0, 3], nnz=0))


@case("valid_shape_above_2_53", valid=True,
      description="shape [2^53 + 1, 1000] and an index of 2^53: needs exact integers (a double rounds "
                  "2^53 + 1 down to 2^53 and would put the last row out of bounds)")
def _(d):
    big = 2**53
    t = table(([5, big - 1, big], [999, 0, 1]), pa.array([1.0, 2.0, 3.0]))
    write_parquet(data_file(d), t, meta(shape=[big + 1, 1000], nnz=3))


@case("valid_int8", valid=True, description="int8 values incl. -128 and 127, fill_value -1")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([-128, 127, 0, 5], pa.int8())),
                  meta(value_type="int8", fill_value=-1))


@case("valid_uint64", valid=True, description="uint64 values incl. 2^64 - 1, fill_value 2^64 - 1 (with "
                                               "one stored entry equal to it)", info=["I_EXPLICIT_FILL"])
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([2**64 - 1, 2**63, 1, 7], pa.uint64())),
                  meta(value_type="uint64", fill_value=2**64 - 1))


@case("valid_float16", valid=True, description="float16 (halffloat) values, hex fill_value \"0x3c00\" (1.0)")
def _(d):
    import numpy as np

    write_parquet(data_file(d), table_2d(pa.array(np.array([0.5, 2.0, -3.0, 65504.0], dtype=np.float16))),
                  meta(value_type="float16", fill_value="0x3c00"))


@case("valid_fill_nan", valid=True, description="float64 fill_value \"NaN\" and one stored NaN (an explicit "
                                                "fill entry, reported as info)", info=["I_EXPLICIT_FILL"])
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([1.0, float("nan"), 0.0, 2.0])), meta(fill_value="NaN"))


@case("valid_fill_hex_negative_zero", valid=True, description="float32 fill_value \"0x80000000\" (-0.0)")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([1.0, 2.0, 3.0, 4.0], pa.float32())),
                  meta(value_type="float32", fill_value="0x80000000"))


@case("valid_fill_hex_uppercase_digits", valid=True,
      description="float64 fill_value \"0x7FF8000000000001\" (a NaN with payload, upper-case hex digits)")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(fill_value="0x7FF8000000000001"))


@case("valid_fill_infinity", valid=True, description="float32 fill_value \"-Infinity\"")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([1.0, 2.0, 3.0, 4.0], pa.float32())),
                  meta(value_type="float32", fill_value="-Infinity"))


@case("valid_explicit_fill", valid=True, info=["I_EXPLICIT_FILL"],
      description="int32 fill_value 7 with two stored entries equal to 7: they are data, reported as info")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([7, 1, 7, 2], pa.int32())),
                  meta(value_type="int32", fill_value=7))


@case("valid_multipart", valid=True,
      description="directory: part-000000, part-000001-0af3 (hex suffix) and an empty part-000002; hidden "
                  "entries (_SUCCESS, _sptool.parquet, .part-000003.parquet.tmp) are ignored; parts are "
                  "sorted each but overlap (claims describe parts only)")
def _(d):
    p = data_dir(d)
    a = table(([0, 1], [1, 2]), pa.array([1.0, 2.0]))
    b = table(([0, 3], [0, 4]), pa.array([3.0, 4.0]))
    write_parquet(os.path.join(p, "part-000000.parquet"), a, meta(nnz=2))
    write_parquet(os.path.join(p, "part-000001-0af3.parquet"), b, meta(nnz=2))
    write_parquet(os.path.join(p, "part-000002.parquet"), empty_like(a),
                  meta(nnz=0, sort_order=[], unique=False, canonical=False))
    write_bytes(os.path.join(p, "_SUCCESS"), b"")
    write_bytes(os.path.join(p, "_sptool.parquet"), b"reserved for a manifest; ignored in 1.0\n")
    write_bytes(os.path.join(p, ".part-000003.parquet.tmp"), b"an unfinished append\n")


@case("valid_stream_trailer", valid=True,
      description="IPC stream: header shape [null, 5] and nnz null, two batches sorted across the batch "
                  "boundary, then the promised trailer {nnz: 4, shape: [4, 5]} and end-of-stream")
def _(d):
    t = table_2d()
    header = smeta(shape=[None, 5], nnz=None)
    data = stream_bytes(t.schema, header, [(t.slice(0, 2), None), (t.slice(2), None),
                                           (empty_like(t), trailer(4, [4, 5]))])
    write_bytes(os.path.join(d, "data.arrows"), data)


def digested_stream(t: pa.Table, header, *, flip_value: float | None = None, wrong: bool = False) -> bytes:
    """A stream of ``t`` in two batches whose trailer carries the CRC-32C (google-crc32c, not
    sptool) of every byte before the trailer message: the bytes a stream of the same batches
    without a trailer or end-of-stream marker holds (the writer is deterministic)."""
    import google_crc32c

    batches = [(t.slice(0, 2), None), (t.slice(2), None)]
    prefix = stream_bytes(t.schema, header, batches, eos=False)
    crc = google_crc32c.value(prefix) ^ (1 if wrong else 0)
    nnz, shape = t.num_rows, [4, 5]
    tail = {"sptool.trailer": dumps({"nnz": nnz, "shape": shape, "crc32c": crc})}
    data = stream_bytes(t.schema, header, batches + [(empty_like(t), tail)])
    assert data.startswith(prefix)
    if flip_value is not None:  # one bit of one stored value changed after writing
        at = data.index(struct.pack("<d", flip_value))
        data = data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]
    return data


@case("valid_stream_digest", valid=True, strict_codes=[],
      description="IPC stream whose trailer carries the crc32c digest of every byte before the trailer message "
                  "(passes strict mode)")
def _(d):
    write_bytes(os.path.join(d, "data.arrows"), digested_stream(table_2d(), smeta()))


@case("stream_digest_mismatch", valid=False, codes=["E_STREAM_DIGEST"],
      description="IPC stream whose trailer's crc32c differs from the CRC-32C of the bytes before it")
def _(d):
    write_bytes(os.path.join(d, "data.arrows"), digested_stream(table_2d(), smeta(), wrong=True))


@case("stream_digest_flipped_value", valid=False, codes=["E_STREAM_DIGEST"],
      description="IPC stream with a digest, then one bit of a stored value flipped: the data is still "
                  "well-formed, only the digest can tell")
def _(d):
    write_bytes(os.path.join(d, "data.arrows"), digested_stream(table_2d(), smeta(), flip_value=2.5))


@case("stream_without_digest_strict", valid=True, strict_codes=["W_NO_STREAM_DIGEST"],
      description="IPC stream with a trailer but no crc32c digest: valid, but strict mode requires the digest")
def _(d):
    t = table_2d()
    data = stream_bytes(t.schema, smeta(), [(t, None), (empty_like(t), trailer(4, [4, 5]))])
    write_bytes(os.path.join(d, "data.arrows"), data)


@case("parquet_without_checksums_strict", valid=True, strict_codes=["W_NO_PAGE_CHECKSUMS"],
      description="Parquet file without the sptool.page_checksums footer entry: valid, but strict mode "
                  "requires page checksums")
def _(d):
    write_parquet(data_file(d), table_2d(), meta())


@case("valid_stream_cut_at_batch_boundary", valid=True,
      description="IPC stream without a trailer promise, complete header, missing only its end-of-stream "
                  "marker: reads as complete")
def _(d):
    t = table_2d()
    data = stream_bytes(t.schema, meta(), [(t.slice(0, 2), None), (t.slice(2), None)], eos=False)
    write_bytes(os.path.join(d, "data.arrows"), data)


@case("valid_foreign_engine_layout", valid=True, codes=["W_NULLABLE_COLUMN"],
      description="as a DuckDB-like writer produces it: optional (nullable) columns without nulls, hybrid "
                  "values as LIST<double> (not fixed_size_list), no ARROW:schema, no sorting_columns")
def _(d):
    values = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float64()))
    t = table(([2, 0, 1],), values, nullable=True)
    write_parquet(data_file(d), t, meta(shape=[3, 2], sparse_ndim=1, nnz=3, sort_order=[], unique=False,
                                        canonical=False), store_schema=False)


@case("valid_arrow_schema_stale_copy", valid=True,
      description="ARROW:schema carries a different 'sptool' key (version 9.0.0); the key-value entry is "
                  "authoritative and valid")
def _(d):
    t = table_2d()
    t = t.replace_schema_metadata({"sptool": dumps(meta(version="9.0.0", nnz=99))})
    write_parquet(data_file(d), t, meta())


@case("valid_version_prerelease_build", valid=True,
      description="version \"1.0.3-rc.1+build.5\": patch, pre-release and build parts are ignored")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(version="1.0.3-rc.1+build.5"))


@case("version_newer_minor", valid=True, codes=["W_VERSION_NEWER_MINOR"], description="version \"1.2.0\"")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(version="1.2.0"))


@case("unknown_key", valid=True, codes=["W_UNKNOWN_KEY"],
      description="unknown top-level keys (incl. the reserved 'dataset') are ignored with a warning")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(dataset={"parts": 1}, colour="blue"))


@case("sorting_columns_absent", valid=True, codes=["W_SORTING_COLUMNS_ABSENT"],
      description="sort_order [0, 1] without Parquet sorting_columns")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(), sorting=None)


@case("no_statistics", valid=True, codes=["W_NO_STATISTICS"],
      description="written without column statistics")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(), stats=False)


@case("stats_inconsistent", valid=True, codes=["W_STATS_INCONSISTENT"],
      description="footer surgery: indices_0 statistics say max 1234566 but the data holds 1234567")
def _(d):
    t = table(([5, 1234567], [0, 1]), pa.array([1.0, 2.0]))
    path = data_file(d)
    write_parquet(path, t, meta(shape=[2000000, 5], nnz=2))
    patch_footer_int64(path, 1234567, 1234566)


@case("duplicate_coordinate_unsorted_claim", valid=True, deep_codes=["E_DUPLICATE_COORDINATE"],
      description="unique true with sort_order [] and a repeated coordinate: only --deep finds it")
def _(d):
    t = table(([2, 0, 2], [1, 1, 1]), pa.array([1.0, 2.0, 3.0]))
    write_parquet(data_file(d), t, meta(nnz=3, sort_order=[], canonical=False))


@case("duplicate_coordinate_partial_sort_order", valid=True, deep_codes=["E_DUPLICATE_COORDINATE"],
      description="unique true with sort_order [0] (not a full permutation) and a non-adjacent repeat")
def _(d):
    t = table(([0, 1, 1, 1], [2, 3, 0, 3]), pa.array([1.0, 2.0, 3.0, 4.0]))
    write_parquet(data_file(d), t, meta(sort_order=[0], canonical=False))


# =============================================================================================
# A. container and metadata

@case("not_parquet", valid=False, codes=["E_NOT_PARQUET"], description="a text file named data.parquet")
def _(d):
    write_bytes(data_file(d), b"indices_0,indices_1,values\n0,1,1.5\n")


@case("not_parquet_truncated_footer", valid=False, codes=["E_NOT_PARQUET"],
      description="a Parquet file cut short: the footer and trailing magic are gone")
def _(d):
    path = data_file(d)
    write_parquet(path, table_2d(), meta())
    data = open(path, "rb").read()
    write_bytes(path, data[: len(data) // 2])


@case("not_parquet_encrypted_magic", valid=False, codes=["E_NOT_PARQUET"],
      description="trailing magic PARE (encrypted footer): not an sptool file")
def _(d):
    path = data_file(d)
    write_parquet(path, table_2d(), meta())
    data = open(path, "rb").read()
    write_bytes(path, data[:-4] + b"PARE")


@case("no_sptool_metadata", valid=False, codes=["E_NO_SPTOOL_METADATA"],
      description="a plain Parquet table without the 'sptool' key")
def _(d):
    write_parquet(data_file(d), table_2d(), None)


@case("sptool_only_in_arrow_schema", valid=False, codes=["E_NO_SPTOOL_METADATA"],
      description="the metadata only in ARROW:schema; footer surgery renamed the key-value entry (which "
                  "pyarrow copies from the schema) to 'xptool'")
def _(d):
    t = table_2d().replace_schema_metadata({"sptool": dumps(meta())})
    path = data_file(d)
    write_parquet(path, t, None)
    rename_footer_key(path, b"sptool", b"xptool")


@case("metadata_not_json", valid=False, codes=["E_METADATA_NOT_JSON"], description="the value is '{not json'")
def _(d):
    write_parquet(data_file(d), table_2d(), "{not json")


@case("metadata_invalid_utf8", valid=False, codes=["E_METADATA_NOT_JSON"],
      description="the value is not UTF-8 (a Latin-1 byte inside a string)")
def _(d):
    text = json.dumps(meta(created_by="caf\u00e9"), ensure_ascii=False)
    write_parquet(data_file(d), table_2d(), text.encode("latin-1"))


@case("metadata_bom", valid=False, codes=["E_METADATA_NOT_JSON"],
      description="JSON preceded by a UTF-8 byte-order mark")
def _(d):
    write_parquet(data_file(d), table_2d(), b"\xef\xbb\xbf" + dumps(meta()).encode())


@case("metadata_duplicate_member", valid=False, codes=["E_METADATA_NOT_JSON"],
      description="the member 'nnz' appears twice")
def _(d):
    text = dumps(meta())
    write_parquet(data_file(d), table_2d(), text[:-1] + ',"nnz":4}')


@case("metadata_nan_literal", valid=False, codes=["E_METADATA_NOT_JSON"],
      description="fill_value written as the non-JSON literal NaN")
def _(d):
    write_parquet(data_file(d), table_2d(), dumps(meta(fill_value="NaN")).replace('"NaN"', "NaN"))


@case("metadata_not_object", valid=False, codes=["E_METADATA_NOT_OBJECT"], description="the value is [1,2,3]")
def _(d):
    write_parquet(data_file(d), table_2d(), "[1,2,3]")


@case("missing_key", valid=False, codes=["E_MISSING_KEY"], description="no 'canonical' key")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(canonical=DROP))


def _key_type_case(name, description, **changes):
    @case(name, valid=False, codes=["E_KEY_TYPE"], description=description)
    def _(d):
        write_parquet(data_file(d), table_2d(), meta(**changes))


_key_type_case("key_type_unique_string", "unique is the string \"true\"", unique="true")
_key_type_case("key_type_nnz_float", "nnz is 4.0 (a number with a fraction part is not an integer)", nnz=4.0)
_key_type_case("key_type_nnz_null", "nnz is null outside a stream header", nnz=None)
_key_type_case("key_type_sparse_ndim_bool", "sparse_ndim is true (booleans are not integers)", sparse_ndim=True)
_key_type_case("key_type_sort_order_item", "a sort_order item is a string", sort_order=[0, "1"])
_key_type_case("key_type_value_type_number", "value_type is a number", value_type=8)
_key_type_case("key_type_created_by", "created_by is a number", created_by=5)
_key_type_case("key_type_attributes", "attributes is an array", attributes=["a"])
_key_type_case("key_type_format_number", "format is a number (a type error, not a wrong id)", format=1)
_key_type_case("key_type_version_number", "version is a number (a type error, not bad syntax)", version=1)


@case("format_id", valid=False, codes=["E_FORMAT_ID"], description="format is \"sptool.csr\"")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(format="sptool.csr"))


@case("version_syntax", valid=False, codes=["E_VERSION_SYNTAX"], description="version \"1.0\"")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(version="1.0"))


@case("version_syntax_empty_prerelease_identifier", valid=False, codes=["E_VERSION_SYNTAX"],
      description="version \"1.0.0-rc..1\": SemVer forbids empty pre-release identifiers")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(version="1.0.0-rc..1"))


@case("version_unsupported", valid=False, codes=["E_VERSION_UNSUPPORTED"], description="version \"2.0.0\"")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(version="2.0.0"))


def _shape_case(name, description, shape, code="E_SHAPE"):
    @case(name, valid=False, codes=[code], description=description)
    def _(d):
        write_parquet(data_file(d), table_2d(), meta(shape=shape))


_shape_case("shape_negative", "shape [4, -5]", [4, -5])
_shape_case("shape_empty", "shape []", [])
_shape_case("shape_not_array", "shape is the string \"4x5\" (checked by E_SHAPE, not E_KEY_TYPE)", "4x5")
_shape_case("shape_float_entry", "shape [4, 5.0]", [4, 5.0])
_shape_case("shape_entry_too_large", "shape [4, 2^63]", [4, INT64_MAX + 1])
_shape_case("shape_null_in_parquet", "shape [null, 5] outside a stream header", [None, 5])
_shape_case("shape_overflow", "shape [2^62, 5]: the product exceeds 2^63 - 1", [2**62, 5], "E_SHAPE_OVERFLOW")


@case("shape_overflow_version_1_1", valid=True,
      description="shape [2^62, 5] under version 1.1.0, whose extents may multiply past 2^63 - 1 (SPEC 4.6)")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(shape=[2**62, 5], version="1.1.0"))


@case("sparse_ndim_too_large", valid=False, codes=["E_SPARSE_NDIM"], description="sparse_ndim 3 for shape [4, 5]")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(sparse_ndim=3, sort_order=[0, 1], canonical=False))


@case("sparse_ndim_zero", valid=False, codes=["E_SPARSE_NDIM"], description="sparse_ndim 0")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(sparse_ndim=0, sort_order=[], unique=True, canonical=False))


@case("value_type_unknown", valid=False, codes=["E_VALUE_TYPE"], description="value_type \"float128\"")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(value_type="float128"))


def _fill_case(name, description, value_type, fill, values):
    @case(name, valid=False, codes=["E_FILL_VALUE"], description=description)
    def _(d):
        write_parquet(data_file(d), table_2d(values), meta(value_type=value_type, fill_value=fill))


_I8 = pa.array([1, 2, 3, 4], pa.int8())
_F64 = pa.array(VALUES_2D)
_F32 = pa.array(VALUES_2D, pa.float32())
_fill_case("fill_value_out_of_range", "int8 fill_value 300", "int8", 300, _I8)
_fill_case("fill_value_float_for_int", "int8 fill_value 1.0", "int8", 1.0, _I8)
_fill_case("fill_value_lowercase_nan", "float64 fill_value \"nan\"", "float64", "nan", _F64)
_fill_case("fill_value_hex_wrong_width", "float64 fill_value \"0x7fc00000\" (8 hex digits, need 16)",
           "float64", "0x7fc00000", _F64)
_fill_case("fill_value_hex_with_space", "float64 fill_value \"0x7ff80000 00000000\" (not exactly 16 hex digits)",
           "float64", "0x7ff80000 00000000", _F64)
_fill_case("fill_value_float32_overflow", "float32 fill_value 1e39 overflows to infinity", "float32", 1e39, _F32)
_fill_case("fill_value_bool_as_int", "bool fill_value 0", "bool", 0, pa.array([True, False, True, True]))
_fill_case("fill_value_complex_one_part", "complex128 fill_value [1.0]", "complex128", [1.0],
           _complex([1j, 2j, 3j, 4j], pa.float64()))
_fill_case("fill_value_lone_surrogate", "string fill_value with an unpaired surrogate escape \"\\ud800\"",
           "string", "\ud800", pa.array(["a", "b", "c", "d"]))
_fill_case("fill_value_bad_base64", "binary fill_value \"AQI\" (padding missing)", "binary", "AQI",
           pa.array([b"a", b"b", b"c", b"d"], pa.binary()))


@case("sort_order_repeated", valid=False, codes=["E_SORT_ORDER"],
      description="sort_order [0, 0] (mirrored by sorting_columns [0, 0]); rows sorted by dimension 0")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(sort_order=[0, 0], canonical=False),
                  sorting=[pq.SortingColumn(0), pq.SortingColumn(0)])


@case("sort_order_out_of_range", valid=False, codes=["E_SORT_ORDER"],
      description="sort_order [2] for K = 2, mirrored by sorting_columns [2]; rows sorted row-major")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(sort_order=[2], canonical=False),
                  sorting=[pq.SortingColumn(2)])


@case("canonical_inconsistent", valid=False, codes=["E_CANONICAL_INCONSISTENT"],
      description="canonical true with unique false")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(unique=False, canonical=True))


@case("canonical_inconsistent_false", valid=False, codes=["E_CANONICAL_INCONSISTENT"],
      description="canonical false although sort_order is [0, 1] and unique is true")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(canonical=False))


@case("dimension_names_wrong_length", valid=False, codes=["E_DIMENSION_NAMES"],
      description="three dimension_names for a 2-D tensor")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(dimension_names=["a", "b", "c"]))


@case("dimension_names_bad_item", valid=False, codes=["E_DIMENSION_NAMES"],
      description="a dimension name is a number")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(dimension_names=[1, "b"]))


@case("duplicates_for_type", valid=False, codes=["E_DUPLICATES_FOR_TYPE"],
      description="a string tensor with unique false (strings cannot be summed)")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array(["a", "b", "c", "d"])),
                  meta(value_type="string", fill_value="", sort_order=[], unique=False, canonical=False))


@case("structure_unsupported", valid=False, codes=["E_STRUCTURE_UNSUPPORTED"],
      description="the reserved 'structure' key")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(structure="symmetric"))


@case("iso_type", valid=False, codes=["E_ISO_TYPE"], description="iso is the number 1 (all values equal)")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([2.0] * 4)), meta(iso=1))


# =============================================================================================
# B. schema and footer

@case("missing_index_column", valid=False, codes=["E_MISSING_INDEX_COLUMN"],
      description="K = 2 but only indices_0 and values")
def _(d):
    write_parquet(data_file(d), table(([0, 1, 2, 3],), _F64), meta())


@case("index_column_int32", valid=False, codes=["E_INDEX_COLUMN_TYPE"], description="index columns are int32")
def _(d):
    write_parquet(data_file(d), table(ROWS_2D, _F64, index_type=pa.int32()), meta())


@case("index_column_uint64", valid=False, codes=["E_INDEX_COLUMN_TYPE"], description="index columns are uint64")
def _(d):
    write_parquet(data_file(d), table(ROWS_2D, _F64, index_type=pa.uint64()), meta())


@case("missing_values_column", valid=False, codes=["E_MISSING_VALUES_COLUMN"],
      description="the values column is named 'value'")
def _(d):
    write_parquet(data_file(d), table(ROWS_2D, _F64, names=["indices_0", "indices_1", "value"]), meta())


@case("values_column_type", valid=False, codes=["E_VALUES_COLUMN_TYPE"],
      description="value_type float64 but the column is float32")
def _(d):
    write_parquet(data_file(d), table_2d(_F32), meta())


@case("values_column_list_for_scalar", valid=False, codes=["E_VALUES_COLUMN_TYPE"],
      description="D = 0 but values is fixed_size_list<double>[1]")
def _(d):
    write_parquet(data_file(d), table_2d(fsl([[v] for v in VALUES_2D], pa.float64(), 1)), meta())


@case("values_column_dictionary", valid=False, codes=["E_VALUES_COLUMN_TYPE"],
      description="string values with a dictionary-encoded Arrow type")
def _(d):
    values = pa.array(["a", "b", "a", "c"]).dictionary_encode()
    write_parquet(data_file(d), table_2d(values), meta(value_type="string", fill_value=""))


@case("page_checksum_mismatch", valid=False, codes=["E_PAGE_CHECKSUM"],
      description="page CRC-32s written (and recorded); one byte of the values' data page flipped after writing")
def _(d):
    path = data_file(d)
    t = table_2d()
    writer = pq.ParquetWriter(path, t.schema, compression="none", use_dictionary=False, write_page_checksum=True,
                              sorting_columns=_auto_sorting(meta(), 3))
    writer.write_table(t)
    writer.add_key_value_metadata({"sptool": dumps(meta()), "sptool.page_checksums": "crc32"})
    writer.close()
    chunk = pq.read_metadata(path).row_group(0).column(2)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[chunk.data_page_offset + chunk.total_compressed_size - 3] ^= 0x10  # inside the last double
    write_bytes(path, bytes(data))


@case("values_column_string_view", valid=False, codes=["E_VALUES_COLUMN_TYPE"],
      description="string values in the string_view layout")
def _(d):
    values = pa.array(["a", "b", "c", "d"], pa.string_view())
    write_parquet(data_file(d), table_2d(values), meta(value_type="string", fill_value=""))


@case("duplicate_column", valid=False, codes=["E_DUPLICATE_COLUMN"],
      description="two columns named indices_0 (then indices_1, values)")
def _(d):
    t = table_2d()
    t = pa.Table.from_arrays([t.column(0), t.column(0), t.column(1), t.column(2)],
                             schema=pa.schema([t.schema.field(0), t.schema.field(0), t.schema.field(1),
                                               t.schema.field(2)]))
    write_parquet(data_file(d), t, meta())


@case("values_column_complex_swapped", valid=False, codes=["E_VALUES_COLUMN_TYPE"],
      description="complex128 struct with fields (imag, real)")
def _(d):
    typ = pa.struct([pa.field("imag", pa.float64(), False), pa.field("real", pa.float64(), False)])
    values = pa.array([{"imag": 1.0, "real": 2.0}] * 4, type=typ)
    write_parquet(data_file(d), table_2d(values), meta(value_type="complex128", fill_value=[0.0, 0.0]))


_HYBRID = {"shape": [4, 2, 3], "sparse_ndim": 1, "value_type": "float32", "nnz": 2, "sort_order": [0]}


@case("dense_block_size", valid=False, codes=["E_DENSE_BLOCK_SIZE"],
      description="shape [4, 2, 3] (m = 6) but values is fixed_size_list<float>[4]")
def _(d):
    t = table(([1, 3],), fsl([[1, 2, 3, 4], [5, 6, 7, 8]], pa.float32(), 4))
    write_parquet(data_file(d), t, meta(**_HYBRID))


@case("dense_block_size_tensor_shape", valid=False, codes=["E_DENSE_BLOCK_SIZE"],
      description="arrow.fixed_shape_tensor with shape [3, 2] for dense shape [2, 3] (same m)")
def _(d):
    storage = fsl([[1, 2, 3, 4, 5, 6]] * 2, pa.float32(), 6, True)
    values = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [3, 2]), storage)
    write_parquet(data_file(d), table(([1, 3],), values), meta(**_HYBRID))


@case("dense_block_size_tensor_permutation", valid=False, codes=["E_DENSE_BLOCK_SIZE"],
      description="arrow.fixed_shape_tensor with permutation [1, 0]")
def _(d):
    storage = fsl([[1, 2, 3, 4, 5, 6]] * 2, pa.float32(), 6, True)
    typ = pa.fixed_shape_tensor(pa.float32(), [2, 3], permutation=[1, 0])
    values = pa.ExtensionArray.from_storage(typ, storage)
    write_parquet(data_file(d), table(([1, 3],), values), meta(**_HYBRID))


@case("dense_block_size_over_int32", valid=False, codes=["E_DENSE_BLOCK_SIZE"],
      description="shape [2, 2^31] with K = 1: m exceeds 2^31 - 1 (values as list<float>, no rows)")
def _(d):
    t = table(([],), pa.array([], pa.list_(pa.field("item", pa.float32(), False))))
    write_parquet(data_file(d), t, meta(shape=[2, 2**31], sparse_ndim=1, value_type="float32", nnz=0,
                                        sort_order=[0]))


@case("unexpected_column", valid=False, codes=["E_UNEXPECTED_COLUMN"], description="an extra column 'weight'")
def _(d):
    t = table_2d().append_column(pa.field("weight", pa.int32(), False), pa.array([1, 1, 1, 1], pa.int32()))
    write_parquet(data_file(d), t, meta())


@case("column_order", valid=False, codes=["E_COLUMN_ORDER"], description="columns indices_1, indices_0, values")
def _(d):
    t = table_2d()
    t = t.select(["indices_1", "indices_0", "values"])
    write_parquet(data_file(d), t, meta(sort_order=[], unique=False, canonical=False))


@case("nnz_mismatch", valid=False, codes=["E_NNZ_MISMATCH"], description="nnz 5 for 4 rows")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(nnz=5))


@case("sorting_columns_mismatch", valid=False, codes=["E_SORTING_COLUMNS_MISMATCH"],
      description="sort_order [0, 1] but sorting_columns [1, 0]")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(), sorting=[pq.SortingColumn(1), pq.SortingColumn(0)])


@case("sorting_columns_descending", valid=False, codes=["E_SORTING_COLUMNS_MISMATCH"],
      description="sorting_columns declare indices_0 descending")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(),
                  sorting=[pq.SortingColumn(0, descending=True), pq.SortingColumn(1)])


@case("sorting_columns_without_sort_order", valid=False, codes=["E_SORTING_COLUMNS_MISMATCH"],
      description="sort_order [] but sorting_columns [0]")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(sort_order=[], unique=False, canonical=False),
                  sorting=[pq.SortingColumn(0)])


@case("stats_out_of_bounds", valid=False, codes=["E_STATS_OUT_OF_BOUNDS", "E_INDEX_OUT_OF_BOUNDS"],
      description="indices_1 holds 5 for shape [4, 5]: proven by the statistics and found by the scan")
def _(d):
    write_parquet(data_file(d), table(([0, 1, 2, 3], [1, 3, 0, 5]), _F64), meta())


@case("stats_not_sorted", valid=False, codes=["E_STATS_NOT_SORTED", "E_NOT_SORTED"],
      description="two row groups: indices_0 spans [2, 3] then [0, 1]")
def _(d):
    a = table(([2, 3], [0, 4]), pa.array([1.0, 2.0]))
    b = table(([0, 1], [1, 3]), pa.array([3.0, 4.0]))
    write_parquet(data_file(d), [a, b], meta())


# =============================================================================================
# C. data scan

@case("read_failed_truncated_page", valid=False, codes=["E_READ_FAILED"],
      description="byte surgery: the values column's data page header claims more bytes than the chunk "
                  "holds (footer intact)")
def _(d):
    path = data_file(d)
    write_parquet(path, table_2d(), meta())
    overstate_page_size(path, 2)


@case("null_index", valid=False, codes=["E_NULL_INDEX", "W_NULLABLE_COLUMN"],
      description="indices_1 is nullable and holds a null")
def _(d):
    t = table(([0, 1, 2, 3], [1, None, 0, 4]), _F64, nullable=True, values_nullable=False)
    write_parquet(data_file(d), t, meta())


@case("null_value", valid=False, codes=["E_NULL_VALUE", "W_NULLABLE_COLUMN"],
      description="values is nullable and holds a null")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([1.0, None, 2.0, 3.0]), values_nullable=True), meta())


@case("null_value_list_item", valid=False, codes=["E_NULL_VALUE"],
      description="hybrid values (required) whose nullable list items hold a null")
def _(d):
    t = table(([1, 3],), fsl([[1, 2, 3, 4, 5, 6], [7, None, 9, 10, 11, 12]], pa.float32(), 6, True))
    write_parquet(data_file(d), t, meta(**_HYBRID))


@case("null_value_complex_field", valid=False, codes=["E_NULL_VALUE"],
      description="complex128 values (required) whose nullable 'imag' field holds a null")
def _(d):
    typ = pa.struct([pa.field("real", pa.float64()), pa.field("imag", pa.float64())])
    values = pa.array([{"real": 1.0, "imag": 1.0}, {"real": 2.0, "imag": None},
                       {"real": 3.0, "imag": 1.0}, {"real": 4.0, "imag": 1.0}], type=typ)
    write_parquet(data_file(d), table_2d(values), meta(value_type="complex128", fill_value=[0.0, 0.0]))


@case("index_out_of_bounds", valid=False, codes=["E_INDEX_OUT_OF_BOUNDS", "W_NO_STATISTICS"],
      description="indices_0 holds 4 for shape [4, 5]; no statistics, so only the scan finds it")
def _(d):
    write_parquet(data_file(d), table(([0, 1, 2, 4], [1, 3, 0, 4]), _F64), meta(), stats=False)


@case("index_negative", valid=False, codes=["E_INDEX_OUT_OF_BOUNDS", "E_STATS_OUT_OF_BOUNDS", "E_NOT_SORTED"],
      description="indices_1 holds -1 in the last row")
def _(d):
    write_parquet(data_file(d), table(([0, 1, 2, 3], [1, 3, 0, -1]), _F64), meta(sort_order=[1, 0],
                                                                                  canonical=False))


@case("not_sorted", valid=False, codes=["E_NOT_SORTED"], description="rows 1 and 2 swapped in one row group")
def _(d):
    write_parquet(data_file(d), table(([0, 2, 1, 3], [1, 0, 3, 4]), _F64), meta())


@case("not_sorted_across_row_groups", valid=False, codes=["E_NOT_SORTED"],
      description="each row group sorted; the break is at the boundary: (1, 4) then (1, 2), which the "
                  "statistics of the leading dimension cannot prove")
def _(d):
    a = table(([0, 1], [0, 4]), pa.array([1.0, 2.0]))
    b = table(([1, 3], [2, 0]), pa.array([3.0, 4.0]))
    write_parquet(data_file(d), [a, b], meta())


@case("not_sorted_column_major", valid=False, codes=["E_NOT_SORTED"],
      description="sort_order [1, 0] but the rows are row-major")
def _(d):
    write_parquet(data_file(d), table_2d(), meta(sort_order=[1, 0], canonical=False))


@case("duplicate_coordinate", valid=False, codes=["E_DUPLICATE_COORDINATE"],
      description="canonical with the coordinate (1, 3) stored twice")
def _(d):
    write_parquet(data_file(d), table(([0, 1, 1, 3], [1, 3, 3, 4]), _F64), meta())


@case("duplicate_coordinate_across_row_groups", valid=False, codes=["E_DUPLICATE_COORDINATE"],
      description="canonical; the last row of row group 0 equals the first of row group 1")
def _(d):
    a = table(([0, 1], [1, 3]), pa.array([1.0, 2.0]))
    b = table(([1, 3], [3, 4]), pa.array([3.0, 4.0]))
    write_parquet(data_file(d), [a, b], meta())


@case("dense_block_length", valid=False, codes=["E_DENSE_BLOCK_LENGTH"],
      description="hybrid values as list<float> where one list holds 5 items instead of 6")
def _(d):
    values = pa.array([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5]], pa.list_(pa.field("item", pa.float32(), False)))
    write_parquet(data_file(d), table(([1, 3],), values), meta(**_HYBRID))


@case("iso_values_differ", valid=False, codes=["E_ISO_VALUES_DIFFER"],
      description="iso true but the third value differs")
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([2.0, 2.0, 3.0, 2.0])), meta(iso=True))


@case("iso_values_differ_negative_zero", valid=False, codes=["E_ISO_VALUES_DIFFER"],
      description="iso true with 0.0 and -0.0: equal as numbers, different bit patterns", info=["I_EXPLICIT_FILL"])
def _(d):
    write_parquet(data_file(d), table_2d(pa.array([0.0, 0.0, -0.0, 0.0])), meta(iso=True))


# =============================================================================================
# D. directory

@case("dir_no_parts", valid=False, codes=["E_NO_PARTS"], description="a directory with only a hidden file")
def _(d):
    write_bytes(os.path.join(data_dir(d), ".gitkeep"), b"")


@case("dir_part_schema_mismatch", valid=False, codes=["E_PART_SCHEMA_MISMATCH"],
      description="string values as utf8 in one part and large_utf8 in the other")
def _(d):
    p = data_dir(d)
    m = meta(value_type="string", fill_value="", nnz=2)
    write_parquet(os.path.join(p, "part-000000.parquet"), table(([0, 1], [0, 0]), pa.array(["a", "b"])), m)
    write_parquet(os.path.join(p, "part-000001.parquet"),
                  table(([2, 3], [0, 0]), pa.array(["c", "d"], pa.large_string())), m)


@case("dir_part_metadata_mismatch", valid=False, codes=["E_PART_METADATA_MISMATCH"],
      description="parts with shapes [4, 5] and [4, 6]")
def _(d):
    p = data_dir(d)
    write_parquet(os.path.join(p, "part-000000.parquet"), table(([0, 1], [0, 0]), pa.array([1.0, 2.0])),
                  meta(nnz=2))
    write_parquet(os.path.join(p, "part-000001.parquet"), table(([2, 3], [0, 0]), pa.array([3.0, 4.0])),
                  meta(nnz=2, shape=[4, 6]))


@case("dir_part_fill_mismatch", valid=False, codes=["E_PART_METADATA_MISMATCH"],
      description="parts with fill_value 0.0 and \"0x8000000000000000\" (-0.0): compared as bit patterns")
def _(d):
    p = data_dir(d)
    write_parquet(os.path.join(p, "part-000000.parquet"), table(([0, 1], [0, 0]), pa.array([1.0, 2.0])),
                  meta(nnz=2))
    write_parquet(os.path.join(p, "part-000001.parquet"), table(([2, 3], [0, 0]), pa.array([3.0, 4.0])),
                  meta(nnz=2, fill_value="0x8000000000000000"))


@case("dir_part_name", valid=True, codes=["W_PART_NAME"], description="a part named chunk-0.parquet")
def _(d):
    write_parquet(os.path.join(data_dir(d), "chunk-0.parquet"), table_2d(), meta())


@case("dir_stray_file", valid=True, codes=["W_STRAY_FILE"],
      description="besides a part: README.txt, part-000001.PARQUET (the suffix is case-sensitive) and a "
                  "subdirectory")
def _(d):
    p = data_dir(d)
    write_parquet(os.path.join(p, "part-000000.parquet"), table_2d(), meta())
    write_bytes(os.path.join(p, "README.txt"), b"not a part\n")
    write_bytes(os.path.join(p, "part-000001.PARQUET"), b"not a part either\n")
    os.makedirs(os.path.join(p, "sub"))
    write_bytes(os.path.join(p, "sub", "x.txt"), b"nested\n")


@case("dir_bad_part", valid=False, codes=["E_NOT_PARQUET"],
      description="the second part is not Parquet; the first is valid")
def _(d):
    p = data_dir(d)
    write_parquet(os.path.join(p, "part-000000.parquet"), table_2d(), meta())
    write_bytes(os.path.join(p, "part-000001.parquet"), b"garbage\n")


# =============================================================================================
# E. Arrow IPC stream

def _stream_case(name, *, codes, description, valid=False):
    def register(fn):
        @case(name, valid=valid, codes=codes, description=description)
        def _(d):
            write_bytes(os.path.join(d, "data.arrows"), fn())
        return fn
    return register


@_stream_case("stream_not_arrow", codes=["E_STREAM_NOT_ARROW"], description="a text file named data.arrows")
def _():
    return b"this is not an Arrow stream\n"


@_stream_case("stream_ipc_file_format", codes=["E_STREAM_NOT_ARROW"],
              description="the Arrow IPC *file* format (magic ARROW1), which is not a v1.0 container")
def _():
    t = table_2d().replace_schema_metadata({"sptool": dumps(meta())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


@_stream_case("stream_no_sptool_metadata", codes=["E_NO_SPTOOL_METADATA"],
              description="an IPC stream whose schema has no 'sptool' metadata")
def _():
    t = table_2d()
    return stream_bytes(t.schema, None, [(t, None)])


@_stream_case("stream_truncated", codes=["E_STREAM_TRUNCATED"],
              description="a trailer was promised; the stream ends (with its end-of-stream marker) after the "
                          "first batch")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t.slice(0, 2), None)])


@_stream_case("stream_truncated_no_eos", codes=["E_STREAM_TRUNCATED"],
              description="a trailer was promised; the stream is cut at a batch boundary (no end-of-stream)")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t.slice(0, 2), None)], eos=False)


@_stream_case("stream_cut_mid_message", codes=["E_READ_FAILED"],
              description="no trailer promised; the stream is cut inside the second record batch, whose data "
                          "therefore does not decode")
def _():
    t = table_2d()
    full = stream_bytes(t.schema, meta(nnz=None), [(t.slice(0, 2), None), (t.slice(2), None)])
    one = stream_bytes(t.schema, meta(nnz=None), [(t.slice(0, 2), None)], eos=False)
    return full[: len(one) + (len(full) - 8 - len(one)) // 2]


@_stream_case("stream_trailer_conflict", codes=["E_TRAILER_CONFLICT"],
              description="header shape [4, 5], trailer shape [6, 5]")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t, None), (empty_like(t), trailer(4, [6, 5]))])


@_stream_case("stream_trailer_not_last", codes=["E_TRAILER_CONFLICT"],
              description="a record batch follows the trailer (trailer nnz counts all rows)")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t.slice(0, 2), None), (empty_like(t), trailer(4, [4, 5])),
                                                    (t.slice(2), None)])


@_stream_case("stream_two_trailers", codes=["E_TRAILER_CONFLICT"],
              description="the promised trailer arrives twice")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t, None), (empty_like(t), trailer(4, [4, 5])),
                                                    (empty_like(t), trailer(4, [4, 5]))])


@_stream_case("stream_trailer_garbled", codes=["E_TRAILER_CONFLICT"],
              description="the trailer's sptool.trailer value is not JSON")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t, None), (empty_like(t), {"sptool.trailer": "{nnz: 4"})])


@_stream_case("stream_trailer_missing_shape", codes=["E_TRAILER_CONFLICT"],
              description="the trailer is {\"nnz\": 4}: both keys are required")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None),
                        [(t, None), (empty_like(t), {"sptool.trailer": dumps({"nnz": 4})})])


@_stream_case("stream_shape_unresolved", codes=["E_STREAM_SHAPE_UNRESOLVED"],
              description="header shape [null, 5], no trailer promised and none sent")
def _():
    t = table_2d()
    return stream_bytes(t.schema, meta(shape=[None, 5], nnz=None), [(t, None)])


@_stream_case("stream_nnz_mismatch_trailer", codes=["E_NNZ_MISMATCH"],
              description="the trailer says nnz 5; 4 rows arrived")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(nnz=None), [(t, None), (empty_like(t), trailer(5, [4, 5]))])


@_stream_case("stream_nnz_mismatch_header", codes=["E_NNZ_MISMATCH"],
              description="no trailer; the header says nnz 5 and 4 rows arrived")
def _():
    t = table_2d()
    return stream_bytes(t.schema, meta(nnz=5), [(t, None)])


@_stream_case("stream_not_sorted_across_batches", codes=["E_NOT_SORTED"],
              description="each batch sorted; the order breaks at the batch boundary")
def _():
    a = table(([0, 2], [0, 1]), pa.array([1.0, 2.0]))
    b = table(([1, 3], [0, 3]), pa.array([3.0, 4.0]))
    return stream_bytes(a.schema, meta(), [(a, None), (b, None)])


@_stream_case("stream_duplicate_across_batches", codes=["E_DUPLICATE_COORDINATE"],
              description="canonical; the first row of batch 1 repeats the last row of batch 0")
def _():
    a = table(([0, 2], [0, 1]), pa.array([1.0, 2.0]))
    b = table(([2, 3], [1, 3]), pa.array([3.0, 4.0]))
    return stream_bytes(a.schema, meta(), [(a, None), (b, None)])


@_stream_case("stream_index_out_of_bounds", codes=["E_INDEX_OUT_OF_BOUNDS"],
              description="header shape [4, 5]; a row has indices_0 = 4 (no statistics in a stream)")
def _():
    t = table(([0, 1, 2, 4], [1, 3, 0, 4]), _F64)
    return stream_bytes(t.schema, meta(), [(t, None)])


@_stream_case("stream_index_out_of_final_shape", codes=["E_INDEX_OUT_OF_BOUNDS"],
              description="header shape [null, 5]; the trailer resolves it to [3, 5] but a row has indices_0 = 3")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(shape=[None, 5], nnz=None),
                        [(t, None), (empty_like(t), trailer(4, [3, 5]))])


@_stream_case("stream_final_shape_overflow", codes=["E_SHAPE_OVERFLOW"],
              description="header shape [null, 2^62]; the trailer's [4, 2^62] exceeds 2^63 - 1 elements")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(shape=[None, 2**62], nnz=None),
                        [(t, None), (empty_like(t), trailer(4, [4, 2**62]))])


@_stream_case("stream_final_shape_overflow_version_1_1", codes=[], valid=True,
              description="header shape [null, 2^62] under version 1.1.0; the trailer's [4, 2^62] may exceed "
                          "2^63 - 1 elements (SPEC 4.6)")
def _():
    t = table_2d()
    return stream_bytes(t.schema, smeta(shape=[None, 2**62], nnz=None, version="1.1.0"),
                        [(t, None), (empty_like(t), trailer(4, [4, 2**62]))])


@_stream_case("stream_dense_extent_null", codes=["E_SHAPE"],
              description="a hybrid stream whose dense extent is null in the header")
def _():
    t = table(([0, 2],), fsl([[1, 2], [3, 4]], pa.float64(), 2))
    return stream_bytes(t.schema, smeta(shape=[3, None], sparse_ndim=1, nnz=None, sort_order=[0]), [(t, None)])


@_stream_case("stream_key_type_stream", codes=["E_KEY_TYPE"], description="the header's 'stream' key is true")
def _():
    t = table_2d()
    return stream_bytes(t.schema, meta(stream=True), [(t, None)])


# =============================================================================================

def generate(outdir: str) -> list[str]:
    """Write every case into ``outdir`` (replacing it) and return the case names."""
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    for name, (build, expected) in sorted(CASES.items()):
        d = os.path.join(outdir, name)
        os.makedirs(d)
        build(d)
        with open(os.path.join(d, "expected.json"), "w") as f:
            json.dump(expected, f, indent=2, sort_keys=True)
            f.write("\n")
    return sorted(CASES)


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = argv[1] if len(argv) > 1 else os.path.join(here, "conformance")
    names = generate(outdir)
    print(f"wrote {len(names)} cases to {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
