"""TFRecord files of tf.train.Example records: read as TensorFlow does (its recorded results in
tests/data/tfrecord/, see README.md there) and as files written by the `protobuf` package say
(tests/tfrecord_oracle.py), written so that protobuf and google-crc32c read them back, and
refused, naming the file and record, when corrupt."""

from __future__ import annotations

import json
import os
import struct
import zlib

import numpy as np
import pytest
import tfrecord_oracle as oracle
from click.testing import CliRunner
from pty_terminal import cursor_restored, run_in_terminal

import sptool
from sptool.cli import cli

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tfrecord")
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data")
FIXTURES = json.load(open(os.path.join(DATA, "index.json")))


def _expected(name):
    return np.load(os.path.join(DATA, name + ".expected.npz"))


def _assert_tensor(t, indices, values, shape):
    assert list(t.shape) == [int(s) for s in shape]
    np.testing.assert_array_equal(t.indices, indices)
    np.testing.assert_array_equal(t.values, values)
    assert t.values.dtype == np.asarray(values).dtype


@pytest.fixture(params=[None, 64, 3000], ids=["default-blocks", "64-byte-blocks", "3000-byte-blocks"])
def blocks(request, monkeypatch):
    """Blocks of records as small as one record, so that every block boundary is crossed."""
    if request.param is not None:
        monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", str(request.param))
    return request.param


# -- what TensorFlow computed ---------------------------------------------------------------

@pytest.mark.parametrize("fixture", FIXTURES, ids=[f["file"] for f in FIXTURES])
def test_sparse_merge_as_tensorflow_computed(fixture, blocks, tmp_path):
    src = os.path.join(DATA, fixture["file"])
    want = _expected(fixture["file"])
    out, labels = tmp_path / "merged.parquet", tmp_path / "labels.npy"
    r = sptool.convert(src, str(out), ids="ids", values="values", vocab_size=fixture["vocab_size"],
                       labels=str(labels), label_key="label")
    t = sptool.read(str(out))
    _assert_tensor(t, want["merged_indices"], want["merged_values"], want["merged_shape"])
    assert r["shape"] == [fixture["examples"], fixture["vocab_size"]] and r["rows"] == len(want["merged_values"])
    assert sptool.validate(str(out)).valid
    got = np.load(labels)
    assert got.dtype == want["label"].dtype
    np.testing.assert_array_equal(got, want["label"])


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f["file"] for f in FIXTURES])
@pytest.mark.parametrize("feature", ["ids", "values"])
def test_varlen_feature_as_tensorflow_computed(fixture, feature, blocks, tmp_path):
    want = _expected(fixture["file"])
    out = tmp_path / "varlen.parquet"
    sptool.convert(os.path.join(DATA, fixture["file"]), str(out), feature=feature)
    t = sptool.read(str(out))
    _assert_tensor(t, want[f"{feature}_indices"], want[f"{feature}_values"], want[f"{feature}_shape"])
    assert t.canonical


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f["file"] for f in FIXTURES])
def test_merge_command_as_tensorflow_computed(fixture, tmp_path):
    """sptool merge on the VarLenFeature tensors gives TensorFlow's sparse_merge."""
    want = _expected(fixture["file"])
    src = os.path.join(DATA, fixture["file"])
    ids = sptool.SparseTensor(want["ids_indices"], want["ids_values"], tuple(want["ids_shape"]))
    vals = sptool.SparseTensor(want["values_indices"], want["values_values"], tuple(want["values_shape"]))
    t = sptool.merge(ids, vals, vocab_size=fixture["vocab_size"])
    _assert_tensor(t, want["merged_indices"], want["merged_values"], want["merged_shape"])
    sptool.convert(src, str(tmp_path / "ids.parquet"), feature="ids")
    sptool.convert(src, str(tmp_path / "values.parquet"), feature="values")
    result = CliRunner().invoke(cli, ["merge", str(tmp_path / "ids.parquet"), str(tmp_path / "values.parquet"),
                                      "--vocab-size", str(fixture["vocab_size"]), "-o", str(tmp_path / "m.parquet"),
                                      "-m", "16MiB"])
    assert result.exit_code == 0, result.output
    _assert_tensor(sptool.read(str(tmp_path / "m.parquet")), want["merged_indices"], want["merged_values"],
                   want["merged_shape"])


def test_repeated_ids_as_tensorflow_computed(tmp_path):
    """Repeated ids stay separate entries with TensorFlow's indices exactly; TensorFlow's reorder is
    not stable, so the values of one coordinate are compared as a set (their order carries nothing:
    they sum), and the summed tensors must be equal."""
    want = _expected("duplicates.tfrecord")
    out = tmp_path / "d.parquet"
    sptool.convert(os.path.join(DATA, "duplicates.tfrecord"), str(out), ids="ids", values="values", vocab_size=12,
                   labels=str(tmp_path / "l.npy"))
    t = sptool.read(str(out))
    np.testing.assert_array_equal(t.indices, want["merged_indices"])
    assert list(t.shape) == want["merged_shape"].tolist() and not t.unique
    starts = np.flatnonzero(np.r_[True, (np.diff(t.indices, axis=0) != 0).any(axis=1)])
    for a, b in zip(starts, np.r_[starts[1:], len(t.indices)]):
        assert sorted(t.values[a:b].tolist()) == sorted(want["merged_values"][a:b].tolist())
    dense = np.zeros(tuple(want["merged_shape"]), dtype=np.float64)
    np.add.at(dense, tuple(want["merged_indices"].T), want["merged_values"].astype(np.float64))
    np.testing.assert_allclose(t.to_dense().astype(np.float64), dense, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), want["label"])
    for feature in ("ids", "values"):
        sptool.convert(os.path.join(DATA, "duplicates.tfrecord"), str(out), feature=feature)
        _assert_tensor(sptool.read(str(out)), want[f"{feature}_indices"], want[f"{feature}_values"],
                       want[f"{feature}_shape"])


def test_command_line_on_the_sample(tmp_path):
    want = _expected("small.tfrecord")
    out = tmp_path / "x.parquet"
    sample = os.path.join(SAMPLES, "examples.tfrecord")
    result = CliRunner().invoke(cli, ["convert", sample, "-o", str(out), "--ids", "ids",
                                      "--values", "values", "--vocab-size", "20"])
    assert result.exit_code == 0, result.output
    _assert_tensor(sptool.read(str(out)), want["merged_indices"], want["merged_values"], want["merged_shape"])


def test_sample_is_the_tensorflow_fixture():
    """sample_data/README.md says examples.tfrecord is TensorFlow's small.tfrecord, byte for byte."""
    with open(os.path.join(SAMPLES, "examples.tfrecord"), "rb") as a, open(os.path.join(DATA, "small.tfrecord"),
                                                                            "rb") as b:
        assert a.read() == b.read()


# -- files written by the protobuf package --------------------------------------------------

def _random_file(rng, n, vocab):
    """Examples with every variation: ids missing, an empty Feature, empty lists, repeated ids,
    other features; returns (records, per-example (ids, values) lists, labels)."""
    records, rows, labels = [], [], []
    for i in range(n):
        k = int(rng.integers(0, 7))
        ids = [int(v) for v in rng.integers(0, vocab, size=k)]
        if k > 1 and i % 5 == 0:
            ids[-1] = ids[0]  # a repeated id
        values = [float(v) for v in rng.standard_normal(k).astype(np.float32)]
        label = int(rng.integers(-3, 3))
        feats = {"label": ("int64", [label]), "note": ("bytes", [b"x" * int(rng.integers(0, 40))])}
        if k == 0 and i % 3 == 0:
            pass  # no ids and no values feature at all
        elif k == 0 and i % 3 == 1:
            feats["ids"] = None  # present but empty Features (no kind)
            feats["values"] = None
        else:
            feats["ids"] = ("int64", ids)
            feats["values"] = ("float", values)
        records.append(oracle.example(**feats))
        rows.append((ids, values))
        labels.append(label)
    return records, rows, labels


def _merged_oracle(rows, vocab):
    """sparse_merge by hand: (row, id) entries sorted by (row, id), repeated ids kept in order."""
    entries = [(r, i, pos, v) for r, (ids, vals) in enumerate(rows) for pos, (i, v) in enumerate(zip(ids, vals))]
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    indices = np.array([[e[0], e[1]] for e in entries], dtype=np.int64).reshape(-1, 2)
    return indices, np.array([e[3] for e in entries], dtype=np.float32)


@pytest.mark.parametrize("compression", ["none", "gzip", "zlib"])
def test_protobuf_written_file(compression, blocks, tmp_path):
    rng = np.random.default_rng(11)
    records, rows, labels = _random_file(rng, 300, 50)
    path = tmp_path / ("in.tfrecord" + (".gz" if compression == "gzip" else ""))
    oracle.write(path, records, compression)
    out = tmp_path / "out.parquet"
    sptool.convert(str(path), str(out), ids="ids", values="values", vocab_size=50, labels=str(tmp_path / "l.npy"))
    indices, values = _merged_oracle(rows, 50)
    _assert_tensor(sptool.read(str(out)), indices, values, (300, 50))
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), np.array(labels, dtype=np.int64))
    # Without --values every id gets 1; repeated ids stay separate entries.
    sptool.convert(str(path), str(out), ids="ids", vocab_size=50, compression=compression)
    _assert_tensor(sptool.read(str(out)), indices, np.ones(len(values), np.float32), (300, 50))
    dense = np.zeros((300, 50))
    np.add.at(dense, (indices[:, 0], indices[:, 1]), 1.0)
    np.testing.assert_array_equal(sptool.read(str(out)).to_dense(), dense)


def test_varlen_bytes_feature_and_trailing_empty_examples(tmp_path):
    items = [[b"a", b""], [], [b"\x00\xff" * 50], [], []]
    records = [oracle.example(note=("bytes", it)) if it else oracle.example(other=("int64", [1])) for it in items]
    oracle.write(tmp_path / "b.tfrecord", records)
    out = tmp_path / "b.parquet"
    sptool.convert(str(tmp_path / "b.tfrecord"), str(out), feature="note")
    t = sptool.read(str(out))
    assert t.shape == (5, 2) and t.meta.value_type == "binary"
    assert t.indices.tolist() == [[0, 0], [0, 1], [2, 0]]
    assert list(t.values) == [b"a", b"", b"\x00\xff" * 50]


def test_value_type_option_and_empty_file(tmp_path):
    oracle.write(tmp_path / "e.tfrecord", [])
    sptool.convert(str(tmp_path / "e.tfrecord"), str(tmp_path / "e.parquet"), ids="ids", vocab_size=7)
    t = sptool.read(str(tmp_path / "e.parquet"))
    assert t.shape == (0, 7) and t.nnz == 0
    oracle.write(tmp_path / "f.tfrecord", [oracle.example(ids=("int64", [3, 1]), w=("float", [0.1, 2.5]))])
    sptool.convert(str(tmp_path / "f.tfrecord"), str(tmp_path / "f.parquet"), ids="ids", values="w", vocab_size=4,
                   dtype="float64")
    t = sptool.read(str(tmp_path / "f.parquet"))
    assert t.values.dtype == np.float64
    np.testing.assert_array_equal(t.values, np.array([2.5, 0.1], dtype=np.float32).astype(np.float64))


# -- writing ----------------------------------------------------------------------------------

def _matrix(rng, shape, nnz, dtype=np.float32):
    idx = np.stack([rng.integers(0, shape[0], nnz), rng.integers(0, shape[1], nnz)], axis=1)
    idx = np.unique(idx, axis=0)
    rng.shuffle(idx)  # stored out of order: the writer sorts
    vals = rng.standard_normal(len(idx)).astype(dtype)
    return sptool.SparseTensor(idx, vals, shape)


@pytest.mark.parametrize("compression", ["none", "gzip", "zlib"])
def test_writer_read_back_by_protobuf_and_sptool(compression, blocks, tmp_path):
    rng = np.random.default_rng(5)
    t = _matrix(rng, (40, 30), 200)  # row 39 and others empty with high probability
    src = tmp_path / "t.parquet"
    sptool.write(t, str(src))
    labels = rng.standard_normal(40).astype(np.float32)
    np.save(tmp_path / "labels.npy", labels)
    name = "out.tfrecord" + (".gz" if compression == "gzip" else "")
    out = tmp_path / name
    sptool.convert(str(src), str(out), ids="ids", values="values", labels=str(tmp_path / "labels.npy"),
                   compression=None if compression != "zlib" else "zlib", memory="16MiB")
    examples = oracle.read(out, compression)
    dense = t.to_dense()
    assert len(examples) == 40
    for r, ex in enumerate(examples):
        kind, ids = oracle.feature_values(ex, "ids")
        vkind, vals = oracle.feature_values(ex, "values")
        assert (kind, vkind) == ("int64_list", "float_list")
        cols = np.flatnonzero(dense[r] != 0)
        assert ids == cols.tolist()
        np.testing.assert_array_equal(np.array(vals, np.float32), dense[r, cols])
        assert oracle.feature_values(ex, "label") == ("float_list", [float(labels[r])])
    back = tmp_path / "back.parquet"
    sptool.convert(str(out), str(back), ids="ids", values="values", vocab_size=30, labels=str(tmp_path / "l2.npy"),
                   compression=compression if compression == "zlib" else None)
    np.testing.assert_array_equal(sptool.read(str(back)).to_dense(), dense)
    np.testing.assert_array_equal(np.load(tmp_path / "l2.npy"), labels)


def test_writer_value_kinds(tmp_path):
    idx = np.array([[0, 2], [2, 0], [2, 5]])
    for values, kind, expect in (
        (np.array([7, -1, 2**40], dtype=np.int64), "int64_list", [7, -1, 2**40]),
        (np.array([b"ab", b"", b"\x00"], dtype=object), "bytes_list", [b"ab", b"", b"\x00"]),
        (np.array([0.5, 1.25, -3.0]), "float_list", [0.5, 1.25, -3.0]),  # float64, exactly float32
    ):
        t = sptool.SparseTensor(idx, values, (4, 6))
        sptool.write(t, str(tmp_path / "t.parquet"))
        sptool.convert(str(tmp_path / "t.parquet"), str(tmp_path / "o.tfrecord"), ids="i", values="v")
        exs = oracle.read(tmp_path / "o.tfrecord")
        assert [oracle.feature_values(e, "i")[1] for e in exs] == [[2], [], [0, 5], []]
        got = [v for e in exs for v in oracle.feature_values(e, "v")[1]]
        assert oracle.feature_values(exs[0], "v")[0] == kind and got == expect


def test_writer_refuses_what_it_would_lose(tmp_path):
    t = sptool.SparseTensor(np.array([[0, 1]]), np.array([0.1]), (2, 3))  # 0.1 is not a float32
    sptool.write(t, str(tmp_path / "t.parquet"))
    runner = CliRunner()
    r = runner.invoke(cli, ["convert", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "o.tfrecord"), "--ids",
                            "ids", "--values", "values"])
    assert r.exit_code == 1 and "row 0" in r.output and "float32" in r.output
    r = runner.invoke(cli, ["convert", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "o.tfrecord"), "--ids",
                            "ids"])
    assert r.exit_code == 1 and "--values" in r.output
    assert not (tmp_path / "o.tfrecord").exists()
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


# -- corrupt files ------------------------------------------------------------------------

def _good_records():
    return [oracle.example(ids=("int64", [i, i + 1]), values=("float", [1.0, 2.0])) for i in range(6)]


def _corruptions():
    recs = _good_records()
    good = oracle.frame(recs)
    third = len(oracle.frame(recs[:3]))  # byte offset of record 3
    flip_data = bytearray(good)
    flip_data[third + 14] ^= 0x40
    flip_len = bytearray(good)
    flip_len[third] ^= 0x01
    huge = oracle.frame(recs[:3]) + struct.pack("<Q", 10**6) + struct.pack("<I", oracle.masked_crc(
        struct.pack("<Q", 10**6))) + b"\x00" * 20
    not_example = oracle.frame(recs[:3] + [b"\xff\xff\xff"])
    float_ids = oracle.frame(recs[:3] + [oracle.example(ids=("float", [1.0]), values=("float", [1.0]))])
    outside = oracle.frame(recs[:3] + [oracle.example(ids=("int64", [99]), values=("float", [1.0]))])
    negative = oracle.frame(recs[:3] + [oracle.example(ids=("int64", [-1]), values=("float", [1.0]))])
    counts = oracle.frame(recs[:3] + [oracle.example(ids=("int64", [1, 2]), values=("float", [1.0]))])
    return [
        ("data-crc", bytes(flip_data), "record 3", "CRC-32C of its data"),
        ("length-crc", bytes(flip_len), "record 3", "CRC-32C of its length"),
        ("cut-in-header", good[: third + 5], "record 3", "ends inside its header"),
        ("cut-in-data", good[: third + 20], "record 3", "runs past the end of the file"),
        ("length-past-end", huge, "record 3", "runs past the end of the file"),
        ("not-an-example", not_example, "record 3", "not a tf.train.Example"),
        ("float-ids", float_ids, "record 3", "float_list"),
        ("id-outside-vocab", outside, "record 3", "outside [0, 10)"),
        ("negative-id", negative, "record 3", "id -1"),
        ("values-count", counts, "record 3", "2 ids"),
        ("gzip-cut", zlib.compress(good)[:-30], "record", "cut short"),
    ]


@pytest.mark.parametrize("name,data,record,why", _corruptions(), ids=[c[0] for c in _corruptions()])
def test_corrupt_records_are_named(name, data, record, why, blocks, tmp_path):
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(data)
    out = tmp_path / "out.parquet"
    args = ["convert", str(path), "-o", str(out), "--ids", "ids", "--values", "values", "--vocab-size", "10"]
    if name == "gzip-cut":
        args += ["--compression", "zlib"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and record in lines[0] and why in lines[0], r.output
    assert "Traceback" not in r.output
    assert sorted(os.listdir(tmp_path)) == ["bad.tfrecord"], "nothing is written"


def test_label_problems_are_named(tmp_path):
    recs = [oracle.example(ids=("int64", [1]), label=("int64", [1])), oracle.example(ids=("int64", [2])),
            oracle.example(ids=("int64", [1]), label=("int64", [1, 2]))]
    oracle.write(tmp_path / "l.tfrecord", recs)
    for upto, why in ((2, "record 1 (byte"), (3, "record 1 (byte")):
        oracle.write(tmp_path / "l.tfrecord", recs[:upto])
        r = CliRunner().invoke(cli, ["convert", str(tmp_path / "l.tfrecord"), "-o", str(tmp_path / "o.parquet"),
                                     "--ids", "ids", "--vocab-size", "5", "--labels", str(tmp_path / "l.npy")])
        assert r.exit_code == 1 and why in r.output and "has no feature 'label'" in r.output, r.output
        assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "l.npy").exists()
    oracle.write(tmp_path / "l.tfrecord", [recs[0], recs[2]])
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / "l.tfrecord"), "-o", str(tmp_path / "o.parquet"),
                                 "--ids", "ids", "--vocab-size", "5", "--labels", str(tmp_path / "l.npy")])
    assert r.exit_code == 1 and "record 1" in r.output and "holds 2 values" in r.output, r.output


@pytest.mark.parametrize("args,message", [
    (["--vocab-size", "5"], "--ids"),
    (["--ids", "ids"], "--vocab-size"),
    (["--ids", "ids", "--vocab-size", "5", "--feature", "ids"], "--feature"),
    (["--feature", "ids", "--values", "values"], "--values"),
])
def test_option_misuse(args, message, tmp_path):
    sample = os.path.join(SAMPLES, "examples.tfrecord")
    r = CliRunner().invoke(cli, ["convert", sample, "-o", str(tmp_path / "o.parquet"), *args])
    assert r.exit_code == 2 and message in r.output, r.output
    r = CliRunner().invoke(cli, ["convert", os.path.join(SAMPLES, "tensor3d.tns"), "-o", str(tmp_path / "o.parquet"),
                                 "--ids", "x"])
    assert r.exit_code == 2 and "TFRecord" in r.output, r.output


# -- merge errors -----------------------------------------------------------------------------

def test_merge_against_numpy_and_its_errors(tmp_path):
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 5, size=30)
    idx = np.array([[r, p] for r in range(30) for p in range(counts[r])], dtype=np.int64)
    ids = rng.integers(0, 12, size=len(idx))
    vals = rng.standard_normal(len(idx))
    t_ids = sptool.SparseTensor(idx, ids, (30, 5))
    t_vals = sptool.SparseTensor(idx, vals, (30, 5))
    got = sptool.merge(t_ids, t_vals, vocab_size=12)
    dense = np.zeros((30, 12))
    np.add.at(dense, (idx[:, 0], ids), vals)
    np.testing.assert_allclose(got.to_dense(), dense, rtol=0, atol=0)
    assert got.shape == (30, 12) and got.sort_order == (0, 1)
    runner = CliRunner()
    sptool.write(t_ids, str(tmp_path / "ids.parquet"))
    cases = [
        (sptool.SparseTensor(idx[:-1], vals[:-1], (30, 5)), 1,
         f"ids has {len(idx)} entries but values has {len(idx) - 1}"),
        (sptool.SparseTensor(idx, vals, (30, 6)), 1, "shape"),
        # An entry missing early: TensorFlow 2.21's sparse_merge says "Dimensions 3 and 2 are not
        # compatible" for 3 ids and 2 values whatever their coordinates; so does merge.
        (sptool.SparseTensor(np.delete(idx, 1, axis=0), np.delete(vals, 1), (30, 5)), 1,
         f"Dimensions {len(idx)} and {len(idx) - 1} are not compatible"),
    ]
    moved = idx.copy()
    moved[-1, 1] = 4 if moved[-1, 1] != 4 else 3
    cases.append((sptool.SparseTensor(moved, vals, (30, 5)), 1, "same sparsity pattern"))
    for other, code, message in cases:
        sptool.write(other, str(tmp_path / "v.parquet"))
        r = runner.invoke(cli, ["merge", str(tmp_path / "ids.parquet"), str(tmp_path / "v.parquet"), "--vocab-size",
                                "12", "-o", str(tmp_path / "m.parquet")])
        assert r.exit_code == code and message in r.output, r.output
        assert not (tmp_path / "m.parquet").exists()
    sptool.write(t_vals, str(tmp_path / "v.parquet"))
    r = runner.invoke(cli, ["merge", str(tmp_path / "ids.parquet"), str(tmp_path / "v.parquet"), "--vocab-size", "11",
                            "-o", str(tmp_path / "m.parquet")])
    assert int(ids.max()) == 11  # the seed draws the id 11
    assert r.exit_code == 1 and "outside [0, 11)" in r.output, r.output
    r = runner.invoke(cli, ["merge", str(tmp_path / "v.parquet"), str(tmp_path / "v.parquet"), "--vocab-size", "11"])
    assert r.exit_code == 2 and "integers" in r.output, r.output


# -- in a terminal ----------------------------------------------------------------------------

def test_convert_and_a_corrupt_file_in_a_terminal(tmp_path):
    code, output = run_in_terminal(["sptool", "convert", os.path.join(DATA, "medium.tfrecord.gz"), "-o",
                                    str(tmp_path / "m.parquet"), "--ids", "ids", "--values", "values",
                                    "--vocab-size", "5000"], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0 and cursor_restored(output), text
    assert "convert:" in text and "[2000, 5000]" in text
    data = bytearray(open(os.path.join(DATA, "medium.tfrecord"), "rb").read())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "bad.tfrecord").write_bytes(bytes(data))
    code, output = run_in_terminal(["sptool", "convert", str(tmp_path / "bad.tfrecord"), "-o",
                                    str(tmp_path / "b.parquet"), "--ids", "ids", "--vocab-size", "5000"],
                                   cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 1 and cursor_restored(output), text
    errors = [ln for ln in text.splitlines() if "Error:" in ln]
    assert len(errors) == 1 and "bad.tfrecord" in errors[0] and "record " in errors[0], text
    assert not (tmp_path / "b.parquet").exists()


# -- bounded memory -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_tfrecord(tmp_path_factory):
    """About 45 MB of Examples (4M ids and values in 200k Examples): more than the smallest budget."""
    rng = np.random.default_rng(9)
    n = 4_000_000
    idx = np.stack([rng.integers(0, 200_000, n), rng.integers(0, 1_000_000, n)], axis=1)
    d = tmp_path_factory.mktemp("tfrecord-memory")
    t = sptool.SparseTensor(idx, rng.standard_normal(n).astype(np.float32), (200_000, 1_000_000))
    sptool.write(t, str(d / "big.parquet"))
    for name in ("big.tfrecord", "big.tfrecord.gz"):
        sptool.convert(str(d / "big.parquet"), str(d / name), ids="ids", values="values")
    return d, n


@pytest.mark.parametrize("budget", [16 << 20, 64 << 20], ids=["16MiB", "64MiB"])
@pytest.mark.parametrize("name", ["big.tfrecord", "big.tfrecord.gz", "to-tfrecord"])
def test_peak_rss_within_the_stated_figure(big_tfrecord, tmp_path, budget, name):
    from test_memory import OVERHEAD, peak_rss

    d, n = big_tfrecord
    if name == "to-tfrecord":
        args = ["convert", str(d / "big.parquet"), "-o", "o.tfrecord", "--ids", "ids", "--values", "values"]
    else:
        args = ["convert", str(d / name), "-o", "o.parquet", "--ids", "ids", "--values", "values", "--vocab-size",
                "1000000"]
    rss = peak_rss(["--memory", str(budget), *args], tmp_path)
    assert rss < budget + OVERHEAD, f"peak RSS {rss >> 20} MiB over {budget >> 20} MiB + {OVERHEAD >> 20} MiB"
    if name == "to-tfrecord":
        assert len(oracle.read(tmp_path / "o.tfrecord")) == 200_000
    else:
        with sptool.open(str(tmp_path / "o.parquet")) as src:
            assert src.meta.nnz == n


def _bad_record(kind: str) -> bytes:
    return {"outside": oracle.example(ids=("int64", [99]), values=("float", [1.0])),
            "float-ids": oracle.example(ids=("float", [1.0]), values=("float", [1.0])),
            "not-an-example": b"\xff\xff\xff", "data-crc": None}[kind]


@pytest.mark.parametrize("early,late", [("outside", "data-crc"), ("data-crc", "outside"),
                                        ("float-ids", "not-an-example"), ("not-an-example", "float-ids")])
@pytest.mark.parametrize("block", [64, 512])
def test_the_first_bad_record_is_named_while_blocks_decode_ahead(early, late, block, tmp_path, monkeypatch):
    """Blocks are scanned a block ahead on a second thread: with two bad records in different
    blocks (records of about 50 bytes), of the kinds found there (CRC, wire format) and those
    found after it (kind, vocab), the error names the earlier one and its byte offset in the
    oracle's framing, as a plain loop would."""
    monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", str(block))
    recs = [oracle.example(ids=("int64", [i % 10]), values=("float", [1.0])) for i in range(40)]
    flips = []
    for at, kind in ((7, early), (30, late)):
        if kind == "data-crc":
            flips.append(len(oracle.frame(recs[:at])) + 14)  # a byte of record `at`'s data
        else:
            recs[at] = _bad_record(kind)
    data = bytearray(oracle.frame(recs))
    for i in flips:
        data[i] ^= 0x40
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    args = ["convert", str(path), "-o", str(tmp_path / "out.parquet"), "--ids", "ids", "--values", "values",
            "--vocab-size", "10"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    assert f"record 7 (byte {len(oracle.frame(recs[:7]))})" in r.output, r.output
    assert "record 30" not in r.output and "Traceback" not in r.output
    assert sorted(os.listdir(tmp_path)) == ["bad.tfrecord"]
