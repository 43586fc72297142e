"""validate's messages name the first offending entry, TensorFlow-style, across batch boundaries."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sptool
from sptool.format import TensorMeta


def write_raw(path, columns: dict, meta: dict | TensorMeta, *, row_group_size=None, schema=None):
    """A Parquet file with exactly these columns and this 'sptool' JSON, however wrong."""
    table = pa.table(columns, schema=schema)
    w = pq.ParquetWriter(path, table.schema)
    w.write_table(table, row_group_size=row_group_size)
    text = meta if isinstance(meta, str) else meta.to_json() if isinstance(meta, TensorMeta) else json.dumps(meta)
    w.add_key_value_metadata({"sptool": text})
    w.close()
    return str(path)


def _schema(K, vtype=None):
    return pa.schema([pa.field(f"indices_{k}", pa.int64(), False) for k in range(K)]
                     + [pa.field("values", vtype or pa.float64(), False)])


def _meta(**kw):
    base = dict(shape=(4, 4), sparse_ndim=2, value_type="float64", sort_order=(0, 1), unique=True)
    base.update(kw)
    return TensorMeta(**base)


def test_out_of_order_message(tmp_path):
    path = write_raw(tmp_path / "a.parquet", {"indices_0": [0, 1, 1, 1], "indices_1": [0, 2, 0, 3],
                                               "values": [1.0] * 4}, _meta(nnz=4), schema=_schema(2))
    r = sptool.validate(path)
    assert not r.valid and [p.code for p in r.errors] == ["E_NOT_SORTED"]
    p = r.errors[0]
    assert p.message.startswith("indices[2] = [1,0] is out of order")
    assert p.location == {"row_group": 0, "row": 2, "index": [1, 0]}


@pytest.mark.parametrize("batch", [1, 2, 3, 1000])
def test_errors_found_across_row_groups_and_batches(tmp_path, batch, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", str(batch))
    cols = {"indices_0": [0, 0, 1, 1, 1, 3], "indices_1": [1, 2, 0, 3, 3, 9], "values": [1.0] * 6}
    path = write_raw(tmp_path / "b.parquet", cols, _meta(nnz=6), row_group_size=2, schema=_schema(2))
    r = sptool.validate(path)
    msgs = {p.code: p.message for p in r.problems}
    assert msgs["E_DUPLICATE_COORDINATE"] == "indices[4] = [1,3] is repeated"
    assert msgs["E_INDEX_OUT_OF_BOUNDS"] == "indices[5] = [3,9] is out of bounds: need 0 <= index < [4,4]"
    assert "E_NOT_SORTED" not in msgs


def test_order_break_between_row_groups(tmp_path):
    cols = {"indices_0": [0, 2, 1, 3], "indices_1": [0, 0, 0, 0], "values": [1.0] * 4}
    path = write_raw(tmp_path / "c.parquet", cols, _meta(nnz=4), row_group_size=2, schema=_schema(2))
    r = sptool.validate(path)
    assert "E_NOT_SORTED" in r.codes and "E_STATS_NOT_SORTED" in r.codes
    sorted_msg = next(p for p in r.problems if p.code == "E_NOT_SORTED")
    assert sorted_msg.message.startswith("indices[2] = [1,0] is out of order")
    assert sorted_msg.location["row_group"] == 1


def test_metadata_only_reads_no_data(tmp_path):
    cols = {"indices_0": [0, 1, 0], "indices_1": [0, 0, 0], "values": [1.0] * 3}
    path = write_raw(tmp_path / "d.parquet", cols, _meta(nnz=3), schema=_schema(2))
    assert sptool.validate(path, metadata_only=True).valid
    assert not sptool.validate(path).valid


def test_deep_finds_duplicates_when_order_is_partial(tmp_path):
    cols = {"indices_0": [0, 0, 1, 1], "indices_1": [3, 1, 2, 2], "values": [1.0] * 4}
    meta = _meta(nnz=4, sort_order=(0,), unique=True)
    path = write_raw(tmp_path / "e.parquet", cols, meta, schema=_schema(2))
    assert sptool.validate(path).valid
    r = sptool.validate(path, deep=True)
    assert [p.code for p in r.errors] == ["E_DUPLICATE_COORDINATE"]
    assert r.errors[0].message == "indices[3] = [1,2] is repeated"


def test_nnz_and_sorting_columns(tmp_path):
    cols = {"indices_0": [0, 1], "indices_1": [0, 0], "values": [1.0, 2.0]}
    path = write_raw(tmp_path / "f.parquet", cols, _meta(nnz=5), schema=_schema(2))
    r = sptool.validate(path)
    assert "E_NNZ_MISMATCH" in r.codes and "W_SORTING_COLUMNS_ABSENT" in r.codes
    assert sptool.validate(path).as_dict()["checks"][0]["passed"] is False


def test_explicit_fill_is_information_only(tmp_path):
    t = sptool.SparseTensor([[0, 0], [1, 1]], [0.0, 2.0], (2, 2))
    sptool.write(t, str(tmp_path / "z.parquet"))
    r = sptool.validate(str(tmp_path / "z.parquet"))
    assert r.valid and r.codes == ["I_EXPLICIT_FILL"] and r.problems[0].message.startswith("1 stored")


def test_iso_and_nulls(tmp_path):
    meta = _meta(nnz=3, iso=True, sort_order=(), unique=False)
    cols = {"indices_0": [0, 1, 2], "indices_1": [0, 0, 0], "values": [1.0, 1.0, 2.0]}
    r = sptool.validate(write_raw(tmp_path / "i.parquet", cols, meta, schema=_schema(2)))
    assert r.codes == ["E_ISO_VALUES_DIFFER"] and "values[2]" in r.problems[0].message
    nullable = pa.schema([pa.field("indices_0", pa.int64()), pa.field("indices_1", pa.int64()),
                          pa.field("values", pa.float64())])
    cols = {"indices_0": [0, None, 2], "indices_1": [0, 0, 0], "values": [1.0, 1.0, None]}
    r = sptool.validate(write_raw(tmp_path / "n.parquet", cols, _meta(nnz=3, sort_order=(), unique=False),
                                  schema=nullable))
    assert {"E_NULL_INDEX", "E_NULL_VALUE", "W_NULLABLE_COLUMN"} <= set(r.codes)


def test_stream_from_stdin(tmp_path):
    from click.testing import CliRunner

    from sptool.cli import cli

    t = sptool.SparseTensor([[1, 0], [0, 1]], [1.0, 2.0], (2, 2))
    sptool.write(t, str(tmp_path / "s.arrows"))
    r = CliRunner().invoke(cli, ["-q", "validate", "-"], input=(tmp_path / "s.arrows").read_bytes())
    assert r.exit_code == 0 and r.stdout == "-: valid (full, 2 entries)\n", r.output


def test_report_json_shape(tmp_path):
    cols = {"indices_0": [2, 1], "indices_1": [0, 0], "values": [1.0, 2.0]}
    path = write_raw(tmp_path / "j.parquet", cols, _meta(nnz=2), schema=_schema(2))
    d = json.loads(sptool.validate(path).to_json())
    assert set(d) == {"target", "mode", "valid", "unreadable", "nnz", "checks"}
    check = next(c for c in d["checks"] if c["code"] == "E_NOT_SORTED")
    assert check["location"] == {"part": None, "row_group": 0, "row": 1, "index": [1, 0]}
    assert np.isscalar(d["nnz"]) and d["mode"] == "full"


@pytest.mark.parametrize("fill_json", ["1e400", "1" + "0" * 400, "-1e400"])
def test_overflowing_fill_values_are_reported_not_raised(tmp_path, fill_json):
    meta = _meta(nnz=1, sort_order=(), unique=False).to_json()
    raw = re.sub(r'"fill_value":[^,]+', f'"fill_value":{fill_json}', meta)
    assert raw != meta
    path = write_raw(tmp_path / "f.parquet", {"indices_0": [0], "indices_1": [0], "values": [1.0]}, raw,
                     schema=_schema(2))
    r = sptool.validate(path)
    assert "E_FILL_VALUE" in r.codes and not r.valid


def test_strict_requires_page_checksums(tmp_path):
    """--strict: a Parquet file without the footer's record of page checksums fails with
    W_NO_PAGE_CHECKSUMS; one sptool wrote passes.  The oracle for what each file holds is
    pyarrow's reading of the footer."""
    import subprocess
    import sys

    ours = tmp_path / "ours.parquet"
    sptool.write(sptool.SparseTensor(np.array([[0, 1], [1, 0]]), np.array([1.0, 2.0]), (2, 2)), str(ours))
    table = pq.read_table(str(ours))
    md = pq.read_metadata(str(ours)).metadata
    assert md[b"sptool.page_checksums"] == b"crc32"
    foreign = tmp_path / "foreign.parquet"  # the same table, written by pyarrow without checksums
    pq.write_table(table.replace_schema_metadata({b"sptool": md[b"sptool"]}), str(foreign),
                   sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)])
    assert b"sptool.page_checksums" not in pq.read_metadata(str(foreign)).metadata

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "sptool", "validate", "--json", *args], capture_output=True)
        return proc.returncode, json.loads(proc.stdout)

    code, doc = run(str(foreign))
    assert code == 0 and doc["valid"]  # not required unless strict
    code, doc = run("--strict", str(foreign))
    assert code == 1 and not doc["valid"]
    assert [c["code"] for c in doc["checks"] if not c["passed"]] == ["W_NO_PAGE_CHECKSUMS"]
    code, doc = run("--strict", str(ours))
    assert code == 0 and doc["valid"], doc
    assert sptool.validate(str(foreign), strict=True).codes == ["W_NO_PAGE_CHECKSUMS"]
    assert not sptool.validate(str(foreign), strict=True).ok(strict=True)


def test_strict_reaches_the_parts_of_a_directory(tmp_path):
    """--strict on a part directory checks each part's footer: a part rewritten by pyarrow
    without page checksums (its own footer, read by pyarrow, is the oracle) fails strict mode
    and only strict mode, locally and through the per-part check a cluster task runs."""
    from sptool.ops.validate import check_part

    d = tmp_path / "d"
    sptool.write(sptool.SparseTensor(np.array([[0, 1], [1, 0], [2, 2]]), np.array([1.0, 2.0, 3.0]), (3, 3)),
                 str(d) + "/")
    part = d / "part-000000.parquet"
    table = pq.read_table(str(part))
    md = pq.read_metadata(str(part)).metadata
    pq.write_table(table.replace_schema_metadata({b"sptool": md[b"sptool"]}), str(part),
                   sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)])
    assert b"sptool.page_checksums" not in pq.read_metadata(str(part)).metadata
    assert "W_NO_PAGE_CHECKSUMS" not in sptool.validate(str(d)).codes
    assert "W_NO_PAGE_CHECKSUMS" in sptool.validate(str(d), strict=True).codes
    one = check_part(str(d), part.name, metadata_only=False, deep=False, strict=True)
    assert [p.code for p in one.problems] == ["W_NO_PAGE_CHECKSUMS"]


@pytest.mark.parametrize("crc", [False, True], ids=["pages-without-crc", "pages-with-crc"])
def test_strict_reads_the_page_headers_behind_the_footer_claim(tmp_path, crc):
    """A file whose footer records page checksums (sptool.page_checksums = crc32) but whose
    pages were written by pyarrow with write_page_checksum=False: --strict finds the pages
    without a CRC by reading their headers (W_NO_PAGE_CHECKSUMS, naming the first page);
    written with checksums, the same claim passes."""
    ours = tmp_path / "ours.parquet"
    n = 5000
    idx = np.stack(np.unravel_index(np.arange(0, 3 * n, 3), (100, 150)), axis=1)
    sptool.write(sptool.SparseTensor(idx, np.arange(n, dtype=np.float64), (100, 150)), str(ours))
    md = pq.read_metadata(str(ours)).metadata
    claimed = tmp_path / "claimed.parquet"
    pq.write_table(pq.read_table(str(ours)).replace_schema_metadata(md), str(claimed), write_page_checksum=crc,
                   sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)], data_page_size=4096,
                   row_group_size=2000)
    assert pq.read_metadata(str(claimed)).metadata[b"sptool.page_checksums"] == b"crc32"
    assert pq.read_metadata(str(claimed)).num_row_groups == 3
    assert sptool.validate(str(claimed)).valid  # not looked for unless strict
    r = sptool.validate(str(claimed), strict=True)
    found = [c for c in r.codes if not c.startswith("I_")]  # notes (I_EXPLICIT_FILL) are no failures
    if crc:
        assert found == [] and r.ok(strict=True)
        return
    assert found == ["W_NO_PAGE_CHECKSUMS"] and not r.ok(strict=True)
    text = next(p.message for p in r.problems if p.code == "W_NO_PAGE_CHECKSUMS")
    missing, pages = re.search(r"but (\d+) of (\d+) pages have none", text).groups()
    assert missing == pages and int(pages) > 3 * 3  # every page of every column chunk of 3 row groups
    assert "(indices_0, row group 0)" in text
