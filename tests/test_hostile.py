"""Hostile inputs: each is built here with pyarrow, NumPy or raw bytes, and every command
that meets it refuses with the exit code the README documents (1 bad data, 2 unreadable input), one
line naming the file and the problem, no traceback, nothing left behind and the input untouched.

The commands run in a child process: a crash (SIGSEGV) shows as a negative return code instead of
taking pytest down with it.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pty_terminal import cursor_restored, run_in_terminal

import sptool

SPTOOL = [sys.executable, "-P", "-m", "sptool", "-q"]
TRAILER_KEY = b"sptool.trailer"


def sptool_run(tmp_path, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(SPTOOL + [str(a) for a in args], cwd=tmp_path, input=stdin, capture_output=True,
                          timeout=300)


def refused(proc, code: int, path, *words):
    """The documented exit code and a one-line message naming ``path`` and the problem."""
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == code, (proc.returncode, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert str(path) in lines[0], lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def snapshot(folder) -> dict:
    """Every file under ``folder`` (hidden ones too) with its bytes."""
    out = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


def validate_json(tmp_path, target, stdin: bytes | None = None) -> tuple[int, dict]:
    proc = sptool_run(tmp_path, "validate", "--json", target, stdin=stdin)
    assert "Traceback" not in proc.stderr.decode(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def codes_of(report: dict) -> set:
    return {c["code"] for c in report["checks"] if not c["passed"]}


def sptool_metadata(d: dict) -> dict:
    return {"format": "sptool.coo", "version": "1.0.0", "value_type": "float64", "fill_value": 0.0, "nnz": None,
            "sort_order": [],
            "unique": False, "canonical": False, **d}


def write_stream(path, schema: pa.Schema, header: dict, batches, trailers=()):
    """An IPC stream written by pyarrow itself: header metadata, batches as given (unchecked), then
    one empty batch per trailer."""
    schema = schema.with_metadata({"sptool": json.dumps(header)})
    with pa.OSFile(str(path), "wb") as f:
        w = pa.ipc.new_stream(f, schema)
        for b in batches:
            w.write_batch(pa.RecordBatch.from_arrays(b.columns, schema=schema))
        for t in trailers:
            empty = pa.RecordBatch.from_arrays([pa.array([], type=fl.type) for fl in schema], schema=schema)
            w.write_batch(empty, custom_metadata={TRAILER_KEY: t})
        w.close()


# -- 1. streams whose buffers are damaged ---------------------------------------------------------

def string_stream_bad_offsets(path):
    """A string tensor whose second offset points a gigabyte past its 3-byte data buffer."""
    offsets = np.array([0, 1, 10**9, 3], dtype=np.int32)
    vals = pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"abc")])
    idx = pa.array([0, 1, 2], pa.int64())
    schema = pa.schema([pa.field("indices_0", pa.int64(), False), pa.field("indices_1", pa.int64(), False),
                        pa.field("values", pa.string(), False)])
    header = sptool_metadata({"shape": [4, 4], "sparse_ndim": 2, "value_type": "string", "fill_value": "",
                              "sort_order": [0, 1], "unique": True, "canonical": True, "stream": {"trailer": True}})
    batch = pa.RecordBatch.from_arrays([idx, idx, vals], schema=schema)
    write_stream(path, schema, header, [batch], [json.dumps({"nnz": 3, "shape": [4, 4]})])


def complex_stream_short_buffer(path):
    """A complex128 stream whose imaginary parts' buffer is declared 8 bytes long for 3 values:
    the length field of that buffer in the record batch message is patched by hand."""
    t = sptool.SparseTensor(np.array([[0], [1], [2]]), np.array([1 + 2j, 3 + 4j, 5 + 6j]), (4,))
    sptool.write(t, str(path))
    data = bytearray(path.read_bytes())
    want = struct.pack("<q", 3 * 8)
    # The message lists (offset, length) per buffer in column order; the last 24 before the
    # trailer message is imag's data.
    end = data.rfind(b"\xff\xff\xff\xff", 0, data.rfind(TRAILER_KEY))  # the trailer message's start
    at = max(i for i in range(end - 7) if data[i:i + 8] == want)
    data[at:at + 8] = struct.pack("<q", 8)
    path.write_bytes(bytes(data))


def test_validate_stdin_on_damaged_string_offsets_reports_not_crashes(tmp_path):
    src = tmp_path / "bad.arrows"
    string_stream_bad_offsets(src)
    with pytest.raises(pa.ArrowInvalid):  # the oracle: pyarrow's own full check says it is damaged
        pa.ipc.open_stream(str(src)).read_next_batch().validate(full=True)
    code, report = validate_json(tmp_path, "-", stdin=src.read_bytes())
    assert code == 1
    assert not report["valid"]
    assert codes_of(report) == {"E_READ_FAILED"}
    assert any("offset" in c["message"].lower() for c in report["checks"])


@pytest.mark.parametrize("build", [string_stream_bad_offsets, complex_stream_short_buffer])
@pytest.mark.parametrize("command", [
    ["slice", "--start", "0", "--size", "2", "-o", "out.parquet"],
    ["info", "--scan"],
    ["convert", "-o", "out.parquet"],
    ["reorder", "-o", "out.arrows"],
])
def test_commands_refuse_damaged_stream_buffers(tmp_path, build, command):
    src = tmp_path / "bad.arrows"
    build(src)
    before = snapshot(tmp_path)
    if build is string_stream_bad_offsets and command[0] == "slice":
        command = ["slice", "--start", "0,0", "--size", "2,2", "-o", "out.parquet"]
    proc = sptool_run(tmp_path, command[0], src.name, *command[1:])
    refused(proc, 1, src.name, "corrupt", "E_READ_FAILED")
    assert snapshot(tmp_path) == before


def test_validate_reports_a_short_buffer_it_once_called_valid(tmp_path):
    src = tmp_path / "bad.arrows"
    complex_stream_short_buffer(src)
    with pytest.raises(pa.ArrowInvalid):
        pa.ipc.open_stream(str(src)).read_next_batch().validate(full=True)
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and not report["valid"]
    assert any("too small" in c["message"] for c in report["checks"])


def test_a_field_name_that_is_not_utf8_is_refused(tmp_path):
    """Found by mutation: a complex stream whose struct field name holds a byte that is not UTF-8."""
    src = tmp_path / "name.arrows"
    sptool.write(sptool.SparseTensor(np.array([[0], [2]]), np.array([1 + 2j, 3 - 1j]), (4,)), str(src))
    data = src.read_bytes()
    assert data.count(b"real") == 1
    src.write_bytes(data.replace(b"real", b"r\xe5al"))
    with pytest.raises(UnicodeDecodeError):  # the oracle: pyarrow cannot decode the name either
        pa.ipc.open_stream(str(src)).schema.field("values").type.field(0).name  # noqa: B018
    before = snapshot(tmp_path)
    for args in (["todense", src.name, "-o", "out.npy"], ["info", src.name]):
        refused(sptool_run(tmp_path, *args), 1, src.name, "not valid UTF-8", "E_VALUES_COLUMN_TYPE")
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and codes_of(report) == {"E_VALUES_COLUMN_TYPE"}
    assert snapshot(tmp_path) == before


def _bad_utf8_strings() -> pa.Array:
    offsets = np.array([0, 1, 3], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"a\xff\xfe")])


@pytest.mark.parametrize("container", ["parquet", "arrows"])
def test_strings_that_are_not_utf8_are_refused(tmp_path, container):
    """Structurally sound string columns whose bytes are not UTF-8 (the spec requires UTF-8):
    Parquet's decoder copies such bytes as they are, so sptool checks them as it reads."""
    values = _bad_utf8_strings()
    with pytest.raises(pa.ArrowInvalid, match="UTF8"):  # the oracle: pyarrow's own full check
        values.validate(full=True)
    idx = pa.array([0, 1], pa.int64())
    header = sptool_metadata({"shape": [2, 2], "sparse_ndim": 2, "value_type": "string", "fill_value": "",
                              "nnz": 2, "sort_order": [0, 1], "unique": True, "canonical": True})
    table = pa.table({"indices_0": idx, "indices_1": idx, "values": values})
    src = tmp_path / f"utf.{container}"
    if container == "parquet":
        pq.write_table(table.replace_schema_metadata({"sptool": json.dumps(header)}), str(src))
    else:
        write_stream(src, table.schema, header, table.to_batches())
    before = snapshot(tmp_path)
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and {c for c in codes_of(report) if not c.startswith("W_")} == {"E_READ_FAILED"}
    for args in (["info", "--scan", src.name], ["transpose", src.name, "-o", "out.parquet"],
                 ["reorder", src.name, "--perm", "1,0", "-o", "out.arrows"]):
        refused(sptool_run(tmp_path, *args), 1, src.name, "UTF8")
    assert snapshot(tmp_path) == before


# -- 2. internal errors that became refusals ------------------------------------------------------

def _valid_parquet(tmp_path, name="ok.parquet"):
    t = sptool.SparseTensor(np.array([[0, 0], [1, 1]]), np.array([1.0, 2.0]), (2, 2))
    path = tmp_path / name
    sptool.write(t, str(path))
    return path


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def test_deeply_nested_metadata_is_refused_by_every_reader(tmp_path):
    ok = _valid_parquet(tmp_path)
    meta = json.loads(pq.read_metadata(str(ok)).metadata[b"sptool"])
    text = json.dumps(meta)[:-1] + ', "attributes": {"x": ' + _deep(100_000) + "}}"
    with pytest.raises(RecursionError):  # the oracle: Python's own parser cannot take it
        json.loads(text)
    src = tmp_path / "deep.parquet"
    pq.write_table(pq.read_table(str(ok)).replace_schema_metadata({"sptool": text}), str(src))
    os.remove(ok)
    before = snapshot(tmp_path)
    for args in (["info", src.name], ["reduce", "--op", "sum", src.name],
                 ["reorder", src.name, "-o", "out.parquet"], ["todense", src.name, "-o", "out.npy"]):
        refused(sptool_run(tmp_path, *args), 1, src.name, "nests", "E_METADATA_NOT_JSON")
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and codes_of(report) == {"E_METADATA_NOT_JSON"}
    assert snapshot(tmp_path) == before


def test_deeply_nested_trailer_is_refused(tmp_path):
    ok = tmp_path / "ok.arrows"
    sptool.write(sptool.SparseTensor(np.array([[0, 1]]), np.array([1.0]), (2, 2)), str(ok))
    reader = pa.ipc.open_stream(str(ok))
    header = json.loads(reader.schema.metadata[b"sptool"])
    rows = [b for b in reader if b.num_rows]
    src = tmp_path / "deep.arrows"
    write_stream(src, reader.schema.remove_metadata(), header, rows, [_deep(100_000)])
    os.remove(ok)
    before = snapshot(tmp_path)
    refused(sptool_run(tmp_path, "info", "--scan", src.name), 1, src.name, "E_TRAILER_CONFLICT")
    refused(sptool_run(tmp_path, "convert", src.name, "-o", "out.tns"), 1, src.name, "E_TRAILER_CONFLICT")
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and "E_TRAILER_CONFLICT" in codes_of(report)
    assert snapshot(tmp_path) == before


def test_metadata_within_the_limits_still_reads(tmp_path):
    """Control for the limits: attributes nested 60 deep (under 64) are carried through."""
    ok = _valid_parquet(tmp_path)
    meta = json.loads(pq.read_metadata(str(ok)).metadata[b"sptool"])
    meta["attributes"] = {"x": json.loads(_deep(60))}
    src = tmp_path / "nested.parquet"
    pq.write_table(pq.read_table(str(ok)).replace_schema_metadata({"sptool": json.dumps(meta)}), str(src))
    code, report = validate_json(tmp_path, src.name)
    assert code == 0, report
    assert sptool.read(str(src)).to_dense().tolist() == [[1.0, 0.0], [0.0, 2.0]]


def _npy_with_header(tmp_path, name: str, header: bytes) -> object:
    """A version 1.0 .npy: magic, header length, ``header`` padded as NumPy pads it, 6 doubles."""
    body = header + b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    path = tmp_path / name
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body + np.arange(6.0).tobytes())
    return path


@pytest.mark.parametrize("header", [
    b"\"\"\"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",  # an unterminated triple quote
    b"{'''descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3\xff\xfe), }",
    b"{'descr': '<f8', 'fortran_order': False, 'shape': " + b"(" * 3000 + b")" * 3000 + b", }",
], ids=["triple-quote", "quoted-key", "bad-bytes", "nested"])
def test_damaged_npy_header_is_unreadable_input(tmp_path, header):
    src = _npy_with_header(tmp_path, "bad.npy", header)
    with pytest.raises(Exception):  # noqa: B017 - the oracle: NumPy itself cannot read it (any error)
        np.load(str(src), allow_pickle=False)
    t = tmp_path / "t.parquet"
    sptool.write(sptool.SparseTensor(np.array([[0, 0]]), np.array([1.0]), (2, 3)), str(t))
    before = snapshot(tmp_path)
    refused(sptool_run(tmp_path, "convert", src.name, "-o", "out.parquet"), 2, src.name, "not a readable .npy")
    refused(sptool_run(tmp_path, "mul", t.name, src.name, "-o", "out.parquet"), 2, src.name, "not a readable .npy")
    assert snapshot(tmp_path) == before


def test_npy_header_control_reads(tmp_path):
    """Control: the same writer with NumPy's own header gives NumPy's array back."""
    src = _npy_with_header(tmp_path, "ok.npy", b"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }")
    expected = np.load(str(src))
    proc = sptool_run(tmp_path, "convert", src.name, "-o", "ok.parquet")
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(sptool.read(str(tmp_path / "ok.parquet")).to_dense(), expected)


def test_duplicate_column_names_are_refused_at_open(tmp_path):
    ok = _valid_parquet(tmp_path)
    table = pq.read_table(str(ok))
    dup = pa.Table.from_arrays([table.column(0), table.column(0), table.column(1), table.column(2)],
                               names=["indices_0", "indices_0", "indices_1", "values"])
    assert dup.schema.names.count("indices_0") == 2  # the oracle: pyarrow sees two columns of one name
    src = tmp_path / "dup.parquet"
    pq.write_table(dup.replace_schema_metadata({"sptool": pq.read_metadata(str(ok)).metadata[b"sptool"]}), str(src))
    os.remove(ok)
    before = snapshot(tmp_path)
    for args in (["info", src.name], ["reduce", "--op", "sum", src.name], ["slice", src.name, "--start", "0,0",
                 "--size", "1,1", "-o", "out.parquet"], ["add", src.name, src.name, "-o", "out.parquet"]):
        refused(sptool_run(tmp_path, *args), 1, src.name, "indices_0", "E_DUPLICATE_COLUMN")
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and codes_of(report) == {"E_DUPLICATE_COLUMN"}
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("text", [
    "indices_0,indices_1,values\n0,1,2.0\n1,,3.0\n",
    "indices_0,indices_1,values\n0,1,2.0\n1,2,\n",
    "0,1,2.0\n1,3.0\n",
])
def test_csv_line_with_a_missing_field(tmp_path, text):
    src = tmp_path / "miss.csv"
    src.write_text(text)
    before = snapshot(tmp_path)
    line = refused(sptool_run(tmp_path, "convert", src.name, "--index-base", "0", "-o", "out.parquet"), 1,
                   src.name, "line ")
    # The oracle for the line number: the first line whose field count or fields are short.
    bad = next(i for i, row in enumerate(text.splitlines(), 1) if "" in row.split(",") or len(row.split(",")) < 3)
    assert f"line {bad}:" in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kind,size_line", [("coordinate", "99999999999999999999 0 1"),
                                            ("coordinate", "9223372036854775808 0 0"),
                                            ("array", "4294967296 4294967296"),
                                            ("coordinate", "3 3 99999999999999999999")])
def test_mtx_size_line_out_of_range(tmp_path, kind, size_line):
    """A number past int64, or an array file (one value per cell) of more than 2^63 - 1 cells; a
    coordinate file's rows x columns may pass 2^63 - 1 (format 1.1)."""
    rows, cols, *entries = (int(v) for v in size_line.split())
    assert max(rows, cols, *entries) > 2**63 - 1 or (kind == "array" and rows * cols > 2**63 - 1)  # Python's ints
    src = tmp_path / "huge.mtx"
    src.write_text(f"%%MatrixMarket matrix {kind} real general\n{size_line}\n1 1 1.0\n")
    before = snapshot(tmp_path)
    for out in ("out.parquet", "out.tns"):
        refused(sptool_run(tmp_path, "convert", src.name, "-o", out), 1, src.name, "line 2", "out of range")
    assert snapshot(tmp_path) == before


# -- 3. validate no longer says valid ---------------------------------------------------------------

def test_a_second_trailer_is_a_conflict(tmp_path):
    ok = tmp_path / "ok.arrows"
    sptool.write(sptool.SparseTensor(np.array([[0, 1], [1, 0]]), np.array([1.0, 2.0]), (2, 2)), str(ok))
    reader = pa.ipc.open_stream(str(ok))
    header = json.loads(reader.schema.metadata[b"sptool"])
    rows = [b for b in reader if b.num_rows]
    trailer = json.dumps({"nnz": 2, "shape": [2, 2]})
    src = tmp_path / "two.arrows"
    write_stream(src, reader.schema.remove_metadata(), header, rows, [trailer, trailer])
    customs = []
    r = pa.ipc.open_stream(str(src))
    while True:
        try:
            customs.append(r.read_next_batch_with_custom_metadata()[1])
        except StopIteration:
            break
    assert sum(c is not None and TRAILER_KEY in c for c in customs) == 2  # pyarrow sees both trailers
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and codes_of(report) == {"E_TRAILER_CONFLICT"}
    refused(sptool_run(tmp_path, "info", "--scan", src.name), 1, src.name, "E_TRAILER_CONFLICT")


@pytest.mark.parametrize("container", ["parquet", "arrows"])
def test_string_view_values_are_refused_with_a_code(tmp_path, container):
    ok = tmp_path / "s.parquet"
    sptool.write(sptool.SparseTensor(np.array([[0, 0], [1, 1]]), np.array(["a", "bb"], dtype=object), (2, 2)),
                 str(ok))
    meta = json.loads(pq.read_metadata(str(ok)).metadata[b"sptool"])
    table = pq.read_table(str(ok))
    view = table.set_column(2, pa.field("values", pa.string_view(), nullable=False),
                            table.column(2).cast(pa.string_view()))
    src = tmp_path / f"view.{container}"
    if container == "parquet":
        pq.write_table(view.replace_schema_metadata({"sptool": json.dumps(meta)}), str(src))
        assert pq.read_schema(str(src)).field("values").type == pa.string_view()
    else:
        write_stream(src, view.schema, {**meta, "stream": {"trailer": False}}, view.to_batches())
    os.remove(ok)
    before = snapshot(tmp_path)
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and codes_of(report) == {"E_VALUES_COLUMN_TYPE"}
    refused(sptool_run(tmp_path, "info", "--scan", src.name), 1, src.name, "string_view", "E_VALUES_COLUMN_TYPE")
    refused(sptool_run(tmp_path, "convert", src.name, "-o", "out.tns"), 1, src.name, "E_VALUES_COLUMN_TYPE")
    assert snapshot(tmp_path) == before


# -- 4. a valid string tensor reordered into a stream --------------------------------------------

@pytest.mark.parametrize("out", ["s.arrows", "s.parquet"])
def test_reordered_string_tensor_stays_unique(tmp_path, out):
    idx = np.array([[0, 1], [1, 0], [1, 1], [2, 0]])
    vals = np.array(["a", "b", "c", "d"], dtype=object)
    src = tmp_path / "S.parquet"
    sptool.write(sptool.SparseTensor(idx, vals, (3, 2)), str(src))
    proc = sptool_run(tmp_path, "reorder", src.name, "--perm", "1,0", "-o", out)
    assert proc.returncode == 0, proc.stderr
    path = str(tmp_path / out)
    if out.endswith(".arrows"):
        reader = pa.ipc.open_stream(path)
        header = json.loads(reader.schema.metadata[b"sptool"])
        table = reader.read_all()
    else:
        header = json.loads(pq.read_metadata(path).metadata[b"sptool"])
        table = pq.read_table(path)
    assert header["unique"] is True and header["sort_order"] == [1, 0]
    order = np.lexsort((idx[:, 0], idx[:, 1]))  # the oracle: NumPy's sort by dimension 1, then 0
    assert table.column("indices_0").to_pylist() == idx[order, 0].tolist()
    assert table.column("indices_1").to_pylist() == idx[order, 1].tolist()
    assert table.column("values").to_pylist() == vals[order].tolist()
    code, report = validate_json(tmp_path, out)
    assert code == 0, report


# -- 5. null and out-of-bounds indices --------------------------------------------------------------

def _parquet_with_indices(tmp_path, name, i0, i1, *, shape=(2, 2)):
    table = pa.table({"indices_0": pa.array(i0, pa.int64()), "indices_1": pa.array(i1, pa.int64()),
                      "values": pa.array([1.0 + k for k in range(len(i0))])})
    meta = sptool_metadata({"shape": list(shape), "sparse_ndim": 2, "nnz": len(i0)})
    path = tmp_path / name
    pq.write_table(table.replace_schema_metadata({"sptool": json.dumps(meta)}), str(path))
    return path


def test_reduce_over_all_axes_refuses_a_null_index(tmp_path):
    src = _parquet_with_indices(tmp_path, "null.parquet", [0, None], [0, 1])
    assert pq.read_table(str(src)).column("indices_0").null_count == 1  # the oracle: pyarrow sees the null
    before = snapshot(tmp_path)
    for args in (["reduce", "--op", "sum", src.name], ["reduce", "--op", "sum", "--axis", "0", src.name],
                 ["reduce", "--op", "count", "--keepdims", src.name, "-o", "out.parquet"]):
        refused(sptool_run(tmp_path, *args), 1, src.name, "null", "E_NULL_INDEX")
    code, report = validate_json(tmp_path, src.name)
    assert code == 1 and "E_NULL_INDEX" in codes_of(report)
    assert snapshot(tmp_path) == before


def test_reduce_control_without_the_null(tmp_path):
    src = _parquet_with_indices(tmp_path, "ok.parquet", [0, 1], [0, 1])
    proc = sptool_run(tmp_path, "reduce", "--op", "sum", src.name)
    assert proc.returncode == 0, proc.stderr
    import pyarrow.compute as pc

    assert float(proc.stdout) == pc.sum(pq.read_table(str(src)).column("values")).as_py()


@pytest.mark.parametrize("bad", [-1, 2], ids=["minus-one", "equal-to-shape"])
@pytest.mark.parametrize("command", [
    ["slice", "--start", "0,0", "--size", "2,2", "-o", "out.parquet"],
    ["slice", "--start", "0,0", "--size", "1,1", "-o", "out.parquet"],
    ["convert", "-o", "out.tns"],
    ["convert", "-o", "out.csv"],
])
def test_an_index_outside_the_shape_is_named(tmp_path, bad, command):
    src = _parquet_with_indices(tmp_path, "oob.parquet", [0, bad], [0, 1])
    assert not 0 <= bad < 2  # the rule the oracle states: 0 <= index < shape
    before = snapshot(tmp_path)
    proc = sptool_run(tmp_path, command[0], src.name, *command[1:])
    refused(proc, 1, src.name, f"indices[1] = [{bad},1] is out of bounds")
    assert snapshot(tmp_path) == before


def test_slice_refuses_an_unread_row_group_whose_statistics_are_out_of_bounds(tmp_path):
    """Slice skips row groups outside the box unread; one whose footer statistics prove an index
    outside the shape is refused rather than dropped unseen."""
    table = pa.table({"indices_0": pa.array([0, 1, 5, 6], pa.int64()), "indices_1": pa.array([0, 1, 0, 1], pa.int64()),
                      "values": pa.array([1.0, 2.0, 3.0, 4.0])})
    meta = sptool_metadata({"shape": [4, 2], "sparse_ndim": 2, "nnz": 4})
    src = tmp_path / "rg.parquet"
    pq.write_table(table.replace_schema_metadata({"sptool": json.dumps(meta)}), str(src), row_group_size=2)
    st = pq.read_metadata(str(src)).row_group(1).column(0).statistics
    assert (st.min, st.max) == (5, 6)  # the oracle: pyarrow's own statistics of the second group
    before = snapshot(tmp_path)
    refused(sptool_run(tmp_path, "slice", src.name, "--start", "0,0", "--size", "2,2", "-o", "out.parquet"), 1,
            src.name, "row group 1", "E_STATS_OUT_OF_BOUNDS")
    assert snapshot(tmp_path) == before


def test_slice_refuses_statistics_whose_min_exceeds_their_max(tmp_path):
    """A flipped footer byte that raised a row group's minimum above its maximum (found by
    tests/byteflip.py, seed 15): slice skipped that group as outside the box, dropping its rows."""
    from thrift_footer import footer_fields, replace_field, varint

    idx = np.array([[0, 0], [1, 1], [3, 1]])
    src = tmp_path / "t.parquet"
    sptool.write(sptool.SparseTensor(idx, np.array([1.0, 2.0, 3.0]), (4, 2)), str(src))
    data = src.read_bytes()
    # Row group 0, column chunk 0, ColumnMetaData.statistics.min_value (parquet.thrift).
    (field,) = [f for f in footer_fields(data)[1] if f.path == (4, 0, 1, 0, 3, 12, 6)]
    damaged = replace_field(data, field, varint(8) + struct.pack("<q", 58624))
    st = pq.read_metadata(pa.BufferReader(damaged)).row_group(0).column(0).statistics
    assert (st.min, st.max) == (58624, 3)  # the oracle: pyarrow reads min > max in the damaged footer
    src.write_bytes(damaged)
    before = snapshot(tmp_path)
    refused(sptool_run(tmp_path, "slice", src.name, "--start", "0,0", "--size", "2,2", "-o", "out.parquet"), 1,
            src.name, "row group 0", "E_STATS_OUT_OF_BOUNDS")
    for mode in ([], ["--metadata-only"]):  # validate proves it from the footer alone, too
        proc = sptool_run(tmp_path, "validate", src.name, *mode)
        said = (proc.stdout + proc.stderr).decode()
        assert proc.returncode == 1 and "E_STATS_OUT_OF_BOUNDS" in said and "minimum above the maximum" in said, said
    assert snapshot(tmp_path) == before


def test_refusals_in_a_terminal(tmp_path):
    """In a person's terminal (with the progress bar on) the refusal is one Error line, the cursor
    comes back and nothing is left behind."""
    src = tmp_path / "bad.arrows"
    string_stream_bad_offsets(src)
    oob = _parquet_with_indices(tmp_path, "oob.parquet", [0, -1], [0, 1])
    before = snapshot(tmp_path)
    for args, words in ((["slice", src.name, "--start", "0,0", "--size", "2,2", "-o", "out.parquet"], "corrupt"),
                        (["convert", oob.name, "-o", "out.tns"], "[-1,1] is out of bounds")):
        code, output = run_in_terminal(SPTOOL[:-1] + args, cwd=tmp_path)
        text = output.decode("utf-8", "replace")
        assert code == 1, text
        assert cursor_restored(output), text
        assert "Traceback" not in text and "internal error" not in text
        errors = [line for line in text.splitlines() if "Error:" in line]
        assert len(errors) == 1 and words in text.replace("\r\n", " ").replace("\n", " "), text
        assert snapshot(tmp_path) == before


# -- 6. Parquet page checksums -------------------------------------------------------------------

def _flip_in_page(path, column: int, offset_from_end: int):
    """Flip one byte inside the last data page of a column chunk (the page body, not its header)."""
    chunk = pq.read_metadata(str(path)).row_group(0).column(column)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + chunk.total_compressed_size - offset_from_end] ^= 0x5A
    path.write_bytes(bytes(data))


def test_sptool_writes_and_records_page_checksums(tmp_path):
    rng = np.random.default_rng(11)
    idx = np.unique(rng.integers(0, 50, size=(3000, 2)), axis=0)
    path = tmp_path / "t.parquet"
    sptool.write(sptool.SparseTensor(idx, rng.standard_normal(len(idx)), (50, 50)), str(path))
    assert pq.read_metadata(str(path)).metadata[b"sptool.page_checksums"] == b"crc32"
    _flip_in_page(path, 2, 40)
    # The oracle: pyarrow, asked to verify, finds the mismatch; not asked, it decodes other numbers.
    with pytest.raises(OSError, match="CRC"):
        pq.ParquetFile(str(path), page_checksum_verification=True).read()


@pytest.mark.parametrize("column", [0, 1, 2], ids=["indices_0", "indices_1", "values"])
@pytest.mark.parametrize("back", [9, 100])
def test_a_flipped_byte_in_a_page_is_refused_by_every_reader(tmp_path, column, back):
    rng = np.random.default_rng(column * 100 + back)
    idx = np.unique(rng.integers(0, 60, size=(4000, 2)), axis=0)
    vals = rng.standard_normal(len(idx))
    path = tmp_path / "t.parquet"
    sptool.write(sptool.SparseTensor(idx, vals, (60, 60)), str(path))
    good = pq.read_table(str(path))
    intact = path.read_bytes()
    # The first byte from ``back`` on whose flip changes what decodes: the index columns' pages are
    # not compressed, and a flip in a bit-packed page's padding changes no value (the CRC still
    # catches it; this test is about damage that would otherwise be read as data).
    for at in range(back, back + 64):
        path.write_bytes(intact)
        _flip_in_page(path, column, at)
        try:
            unchecked = pq.ParquetFile(str(path)).read()
        except OSError:
            unchecked = None  # zstd's own frame check caught this flip
        if unchecked is None or not unchecked.equals(good):  # the flip changed what decodes
            break
    assert unchecked is None or not unchecked.equals(good)
    with pytest.raises(OSError, match="CRC"):  # the oracle: pyarrow's verification names the page
        pq.ParquetFile(str(path), page_checksum_verification=True).read()
    before = snapshot(tmp_path)
    code, report = validate_json(tmp_path, path.name)
    assert code == 1 and codes_of(report) == {"E_PAGE_CHECKSUM"}
    for args in (["info", "--scan", path.name], ["slice", path.name, "--start", "0,0", "--size", "60,60", "-o",
                 "out.parquet"], ["reorder", path.name, "--perm", "1,0", "-o", "out.parquet"],
                 ["todense", path.name, "-o", "out.npy"], ["convert", path.name, "-o", "out.tns"],
                 ["add", path.name, path.name, "-o", "out.parquet"]):
        refused(sptool_run(tmp_path, *args), 1, path.name, "E_PAGE_CHECKSUM")
    # A reduction reads every index column (an index outside the shape would change its answer,
    # whatever the footer's statistics say) and the values: a damaged page anywhere is refused.
    for args in (["--axis", "0", "-o", "out.npy"], ["--axis", "1", "-o", "out.npy"], []):
        refused(sptool_run(tmp_path, "reduce", "--op", "sum", path.name, *args), 1, path.name, "E_PAGE_CHECKSUM")
    assert snapshot(tmp_path) == before


# -- 7. a damaged footer ------------------------------------------------------------------------

@pytest.mark.parametrize("value", [7, 9, -1], ids=["fixed-len-byte-array", "unknown", "negative"])
@pytest.mark.parametrize("where", ["file", "part"])
def test_a_damaged_column_type_in_the_footer_is_refused_not_aborted(tmp_path, value, where):
    """A column chunk's type field (located by our own Thrift walker, thrift_footer.py) set to
    another type: pyarrow aborted the process (SIGABRT) when asked for that chunk's statistics."""
    from thrift_footer import column_type_fields, replace_field, zigzag_varint

    rng = np.random.default_rng(5)
    idx = np.unique(rng.integers(0, 9, size=(30, 3)), axis=0)
    good = tmp_path / "good.parquet"
    sptool.write(sptool.SparseTensor(idx, rng.standard_normal(len(idx)), (9, 9, 9)), str(good))
    data = good.read_bytes()
    fields = column_type_fields(data)
    assert [data[f.start] for f in fields] == [4, 4, 4, 10]  # zigzag INT64 (2) x3, DOUBLE (5): the walker's check
    bad = replace_field(data, fields[1], zigzag_varint(value))
    good.unlink()
    if where == "part":
        (tmp_path / "d").mkdir()
        target = tmp_path / "d" / "part-000000.parquet"
        name = "d"
    else:
        target = tmp_path / "bad.parquet"
        name = "bad.parquet"
    target.write_bytes(bad)
    # The oracle: pyarrow reads the footer, and reports a type other than the schema's.
    md = pq.read_metadata(str(target))
    assert md.row_group(0).column(1).physical_type != md.schema.column(1).physical_type
    before = snapshot(tmp_path)
    for flags in ([], ["--metadata-only"]):
        proc = sptool_run(tmp_path, "validate", "--json", *flags, name)
        assert proc.returncode == 2, proc.stderr
        (check,) = [c for c in json.loads(proc.stdout)["checks"] if not c["passed"]]
        assert check["code"] == "E_NOT_PARQUET" and "the footer is damaged" in check["message"]
    for args in (["info", name], ["info", "--scan", name], ["reduce", "--op", "sum", name],
                 ["slice", name, "--start", "0,0,0", "--size", "2,2,2", "-o", "out.parquet"],
                 ["todense", name, "-o", "out.npy"], ["reorder", name, "--perm", "2,1,0", "-o", "out.parquet"]):
        refused(sptool_run(tmp_path, *args), 2, target.name,
                "the footer is damaged: row group 0 says column indices_1 holds", "[E_NOT_PARQUET]")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("rows", [2**63 - 1, 0, -5])
def test_a_row_group_count_that_does_not_add_up_is_refused(tmp_path, rows):
    """A row group's num_rows damaged (the data pages are intact, so sptool decoded the right
    entries, but pyarrow's own reader fails on the file: found by tests/fuzz.py)."""
    from thrift_footer import footer_fields, replace_field, zigzag_varint

    path = _valid_parquet(tmp_path)
    data = path.read_bytes()
    (field,) = [f for f in footer_fields(data)[1] if f.path == (4, 0, 3)]  # RowGroup.num_rows
    path.write_bytes(replace_field(data, field, zigzag_varint(rows)))
    md = pq.read_metadata(str(path))  # the oracle: pyarrow's count for the row group disagrees
    assert md.row_group(0).num_rows == rows != md.num_rows == 2
    proc = sptool_run(tmp_path, "validate", "--json", path.name)
    assert proc.returncode == 2 and b"the footer is damaged" in proc.stdout
    refused(sptool_run(tmp_path, "todense", path.name, "-o", "d.npy"), 2, path.name, "the footer is damaged")


def test_a_level_histogram_that_does_not_fit_its_column_is_refused_not_aborted(tmp_path):
    """A dense-block (list) column declared OPTIONAL in the footer's schema: its chunks' definition
    level histograms (written for the REQUIRED column) no longer fit, and pyarrow aborted (SIGABRT)
    making the chunk's metadata.  Found by tests/fuzz.py (seed 2, case 1508)."""
    from thrift_footer import footer_fields, replace_field, zigzag_varint

    path = tmp_path / "h.parquet"
    sptool.write(sptool.SparseTensor(np.array([[0], [2]]), np.ones((2, 2, 2)), (4, 2, 2)), str(path))
    data = path.read_bytes()
    fields = footer_fields(data)[1]
    (leaf,) = [f for f in fields if f.path == (2, 4, 3)]  # SchemaElement 4 (the list's element): repetition
    assert data[leaf.start] == 0  # REQUIRED (zigzag 0), as sptool writes it
    (hist,) = [f for f in fields if f.path[:1] == (4,) and f.path[-3:] == (3, 16, 3) and f.path[3] == 1]
    path.write_bytes(replace_field(data, leaf, zigzag_varint(1)))  # OPTIONAL
    # The oracle: pyarrow now expects one more definition level than the histogram holds.
    assert pq.read_metadata(str(path)).schema.column(1).max_definition_level == 2
    assert hist.end > hist.start
    before = snapshot(tmp_path)
    proc = sptool_run(tmp_path, "validate", "--json", path.name)
    assert proc.returncode == 2 and b"a level histogram has 2 entries, the schema allows 3" in proc.stdout
    for args in (["info", path.name], ["todense", path.name, "-o", "d.npy"], ["reduce", "--op", "sum", path.name]):
        refused(sptool_run(tmp_path, *args), 2, path.name, "the footer is damaged", "[E_NOT_PARQUET]")
    assert snapshot(tmp_path) == before
