"""JSON lines through sptool convert, against Python's json module: files it writes are read,
files sptool writes are what it reads back, and broken lines are named."""

from __future__ import annotations

import gzip
import json
import os
import re

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.convert import convert as convert_api


@pytest.fixture(params=[None, 7, 300], ids=["default-blocks", "7-byte-blocks", "300-byte-blocks"])
def blocks(request, monkeypatch):
    if request.param is not None:
        monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", str(request.param))
    return request.param


def _read(path) -> sptool.SparseTensor:
    report = sptool.validate(path)
    assert report.valid, report
    t = sptool.read(path)
    assert t.meta.sort_order == (0, 1) and t.meta.unique
    return t


def _random_rows(rng, n_rows, width):
    """Rows as Python objects (the oracle) with unsorted and repeated ids and empty rows."""
    rows = []
    for _ in range(n_rows):
        k = int(rng.integers(0, 6))
        ids = [int(i) for i in rng.integers(0, width, k)]
        values = [float(v) for v in rng.standard_normal(k)]
        rows.append({"ids": ids, "values": values, "label": float(rng.integers(0, 3)), "note": "ignored"})
    return rows


def _dense(rows, width):
    out = np.zeros((len(rows), width))
    for r, row in enumerate(rows):
        for i, v in zip(row["ids"], row["values"]):
            out[r, i] += v
    return out


def test_reads_what_python_json_writes(tmp_path, rng, blocks):
    rows = _random_rows(rng, 60, 12)
    separators = [(",", ":"), (", ", ": ")]
    text = "\n".join(json.dumps(r, separators=separators[i % 2]) for i, r in enumerate(rows))
    path = tmp_path / "r.jsonl"
    path.write_text(text.replace("\n", "\n\n", 3) + "\n")  # blank lines are skipped
    convert_api(str(path), str(tmp_path / "r.parquet"), vocab_size=12, labels=str(tmp_path / "y.npy"))
    t = _read(str(tmp_path / "r.parquet"))
    assert t.shape == (60, 12)
    np.testing.assert_allclose(t.to_dense(), _dense(rows, 12), rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), [r["label"] for r in rows])


def test_values_exact_and_shape_inferred(tmp_path, rng, blocks):
    vals = [float(v) for v in rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200)]
    rows = [{"values": [v], "ids": [i % 9]} for i, v in enumerate(vals)]
    path = tmp_path / "v.ndjson"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    convert_api(str(path), str(tmp_path / "v.parquet"))
    t = _read(str(tmp_path / "v.parquet"))
    assert t.shape == (200, 9)
    np.testing.assert_array_equal(t.values.view(np.uint64), np.array(vals).view(np.uint64))


def test_custom_keys_and_compressed(tmp_path, rng):
    rows = _random_rows(rng, 30, 7)
    lines = [json.dumps({"f": r["ids"], "w": r["values"], "y": r["label"]}) for r in rows]
    with gzip.open(tmp_path / "c.jsonl.gz", "wt") as f:
        f.write("\n".join(lines))  # no newline at the end
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / "c.jsonl.gz"), "-o", str(tmp_path / "c.parquet"), "--ids",
                                 "f", "--values", "w", "--label-key", "y", "--labels", str(tmp_path / "y.npy"),
                                 "--vocab-size", "7"])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(_read(str(tmp_path / "c.parquet")).to_dense(), _dense(rows, 7), rtol=1e-15)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), [r["label"] for r in rows])


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
def test_writer_read_back_by_python_json(tmp_path, rng, tiny_batches, dtype):
    t = random_tensor(rng, (25, 11), 90, dtype=dtype, duplicates=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    labels = rng.standard_normal(25)
    np.save(tmp_path / "y.npy", labels)
    convert_api(str(tmp_path / "t.parquet"), str(tmp_path / "o.jsonl"), labels=str(tmp_path / "y.npy"))
    lines = (tmp_path / "o.jsonl").read_text().splitlines()
    assert len(lines) == 25
    dense = np.zeros((25, 11))
    for r, line in enumerate(lines):
        obj = json.loads(line)
        assert obj["ids"] == sorted(set(obj["ids"])) and len(obj["ids"]) == len(obj["values"])
        assert obj["label"] == labels[r]
        dense[r, obj["ids"]] = obj["values"]
    want = dense_oracle(t).astype(np.float64)
    np.testing.assert_allclose(dense, want, rtol={"float32": 1e-6, "float64": 1e-14}.get(dtype, 0))


def test_writer_special_floats_and_round_trip(tmp_path):
    idx = np.array([[0, 1], [0, 3], [2, 0], [2, 2]])
    vals = np.array([np.nan, np.inf, -np.inf, -0.0])
    sptool.write(sptool.SparseTensor(idx, vals, (4, 5)), str(tmp_path / "s.parquet"))
    convert_api(str(tmp_path / "s.parquet"), str(tmp_path / "s.jsonl"))
    objs = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [o["ids"] for o in objs] == [[1, 3], [], [0, 2], []]
    got = np.array(objs[0]["values"] + objs[2]["values"])
    np.testing.assert_array_equal(got.view(np.uint64)[1:], vals.view(np.uint64)[1:])
    assert np.isnan(got[0])
    convert_api(str(tmp_path / "s.jsonl"), str(tmp_path / "back.parquet"), vocab_size=5)
    back = _read(str(tmp_path / "back.parquet"))
    assert back.shape == (4, 5)
    np.testing.assert_array_equal(back.indices, idx)
    np.testing.assert_array_equal(back.values.view(np.uint64)[1:], vals.view(np.uint64)[1:])


@pytest.mark.parametrize("bad, message", [
    ('{"ids": [1, 2], "values": [1.0]', r"not JSON"),
    ('[1, 2]', r"not a JSON object"),
    ('{"values": [1.0]}', r"no 'ids' list"),
    ('{"ids": [1.5], "values": [1.0]}', r"'ids' holds 1.5; it must hold integers"),
    ('{"ids": [1], "values": ["a"]}', r"'values' holds \"a\"; it must hold numbers"),
    ('{"ids": [1, 2], "values": [1.0]}', r"'ids' and 'values' differ in length"),
    ('{"ids": [-1], "values": [1.0]}', r"id -1 is negative"),
    ('{"ids": [9], "values": [1.0]}', r"id 9 is past --vocab-size 5"),
    ('{"ids": [1], "values": [1.0]}', r"no 'label' number"),
])
def test_broken_lines_are_named(tmp_path, blocks, bad, message):
    good = [json.dumps({"ids": [i % 5], "values": [i / 3], "label": 1}) for i in range(30)]
    path = tmp_path / "b.jsonl"
    path.write_text("\n".join(good) + "\n\n" + bad + "\n" + good[0] + "\n")
    r = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "X.parquet"), "--vocab-size", "5",
                                 "--labels", str(tmp_path / "y.npy")])
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"Error: {path}: line 32: "), r.output
    assert re.search(message, r.output), r.output
    assert sorted(os.listdir(tmp_path)) == ["b.jsonl"]


def test_options_apply_where_they_mean_something(tmp_path):
    with pytest.raises(UsageError, match="--ids and --values apply to JSON lines and TFRecord files only"):
        convert_api("sample_data/tensor3d.tns", str(tmp_path / "t.parquet"), ids="f")
    with pytest.raises(UsageError, match="--multilabel do not apply to writing JSON lines"):
        convert_api("sample_data/digits.parquet", str(tmp_path / "t.jsonl"), multilabel=True)
    with pytest.raises(DataError):
        (tmp_path / "e.jsonl").write_text('{"ids": [0], "values": [1]}\n{"ids": [0]}\n')
        convert_api(str(tmp_path / "e.jsonl"), str(tmp_path / "e.parquet"))
    # A TFRecord-only option on JSON lines names itself, not --ids/--values (which JSON lines take).
    (tmp_path / "k.jsonl").write_text('{"f": [1], "w": [2.5]}\n')
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / "k.jsonl"), "-o", str(tmp_path / "k.parquet"), "--ids", "f",
                                 "--values", "w", "--vocab-size", "5", "--feature", "f"])
    assert r.exit_code == 2 and "--feature: only for TFRecord" in r.output and "--ids" not in r.output, r.output
    assert not (tmp_path / "k.parquet").exists()


def test_rows_in_counts_ids_as_written(tmp_path):
    """rows_in counts every id of every line, repeats included; rows, the entries written,
    counts each (row, id) once: both counted here with Python's json module."""
    lines = [{"ids": [3, 1, 3], "values": [1.0, 2.0, 3.0]}, {"ids": [], "values": []},
             {"ids": [2, 2, 2, 0], "values": [1.0, 1.0, 1.0, 5.0]}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = convert_api(str(tmp_path / "r.jsonl"), str(tmp_path / "r.parquet"))
    assert out["rows_in"] == sum(len(x["ids"]) for x in lines) == 7
    assert out["rows"] == sum(len(set(x["ids"])) for x in lines) == 4
