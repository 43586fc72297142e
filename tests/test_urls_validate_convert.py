"""validate, convert and todense with tensors named by URL, on the local filesystem only.

The non-local branch of sptool/io/_url.py runs on the ``sub://`` scheme of tests/test_urls.py
(pyarrow's ``SubTreeFileSystem`` over a temporary directory) and its ``obj://`` object store (a
``PyFileSystem`` over fsspec that cannot move directories).  The oracles: for validate, the report
of the same file read at its local path (verdict, exit code, every check, text and JSON) and
pyarrow's reading of what the file holds; for convert, the local convert of the same file (pyarrow
reads both outputs; text outputs byte for byte); on a cluster, the single machine's results.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from byteflip import flip, regions
from click.testing import CliRunner
from test_urls import SAMPLES, leftovers, run, same_tensor, table
from test_validate import _meta, _schema, write_raw

import sptool
from sptool.cli import cli
from sptool.io import register_filesystem


def exit_code(*args) -> int:
    return CliRunner().invoke(cli, ["--quiet", *args]).exit_code


def as_json(res) -> dict:
    doc = json.loads(res.stdout)
    doc.pop("target")
    return doc


def same_report(local: str, remote: str, *opts):
    """validate of ``remote`` (a URL) gives the report of ``local`` (its local path): the exit
    code, the JSON (bar the target) and the text, the name aside."""
    code = exit_code("validate", "--json", *opts, local)
    assert code in (0, 1, 2), code
    by_path = run("validate", "--json", *opts, local, code=code)
    by_url = run("validate", "--json", *opts, remote, code=code)
    assert json.loads(by_url.stdout)["target"] == remote
    assert as_json(by_url) == as_json(by_path)
    text_path = run("validate", *opts, local, code=code).stdout
    text_url = run("validate", *opts, remote, code=code).stdout
    assert " ".join(text_url.replace(remote, "NAME").split()) == " ".join(text_path.replace(local, "NAME").split())
    return code, as_json(by_path)


# -- the damaged files: written wrong on purpose, or bytes flipped ------------------------------------

def _raw_cases(folder) -> list[str]:
    """Files whose rows break their own claims (tests/test_validate.py's writer, which writes any
    metadata): out of order, repeated, out of bounds, nnz wrong, across row groups."""
    cols = {"indices_0": [0, 0, 1, 1, 1, 3], "indices_1": [1, 2, 0, 3, 3, 9], "values": [1.0] * 6}
    made = [write_raw(folder / "dup_oob.parquet", cols, _meta(nnz=6), row_group_size=2, schema=_schema(2))]
    cols = {"indices_0": [0, 2, 1, 3], "indices_1": [0, 0, 0, 0], "values": [1.0] * 4}
    made.append(write_raw(folder / "order.parquet", cols, _meta(nnz=4), row_group_size=2, schema=_schema(2)))
    cols = {"indices_0": [0, 0, 1, 1], "indices_1": [3, 1, 2, 2], "values": [1.0] * 4}
    made.append(write_raw(folder / "deep.parquet", cols, _meta(nnz=4, sort_order=(0,), unique=True),
                          schema=_schema(2)))
    cols = {"indices_0": [0, 1], "indices_1": [0, 0], "values": [1.0, 2.0]}
    made.append(write_raw(folder / "nnz.parquet", cols, _meta(nnz=5), schema=_schema(2)))
    # The footer records page checksums that its many small pages lack (or have): --strict reads
    # every page header (tests/test_validate.py's case).
    n = 5000
    idx = np.stack(np.unravel_index(np.arange(0, 3 * n, 3), (100, 150)), axis=1)
    ours = folder / "ours.parquet"
    sptool.write(sptool.SparseTensor(idx, np.arange(n, dtype=np.float64), (100, 150)), str(ours))
    for crc in (False, True):
        claimed = folder / f"claimed-crc{int(crc)}.parquet"
        pq.write_table(pq.read_table(ours).replace_schema_metadata(pq.read_metadata(ours).metadata), claimed,
                       write_page_checksum=crc, sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)],
                       data_page_size=4096, row_group_size=2000)
        made.append(str(claimed))
    return made


def _flipped(folder, seed: int) -> list[str]:
    """tests/byteflip.py's damage: bytes flipped in each region of an sptool-written file."""
    src = SAMPLES / "tensor3d.parquet"
    data = src.read_bytes()
    rng = random.Random(seed)
    made = []
    for region, spans in regions(str(src)).items():
        damaged, _ = flip(data, spans, rng)
        path = folder / f"flip-{seed}-{region.replace(' ', '_')}.parquet"
        path.write_bytes(damaged)
        made.append(str(path))
    return made


def _streams(folder) -> list[str]:
    """A whole .arrows stream, one cut short, and one with a byte of a batch changed (the digest)."""
    whole = folder / "s.arrows"
    run("reorder", str(SAMPLES / "unsorted.parquet"), "-o", str(whole))
    data = whole.read_bytes()
    (folder / "cut.arrows").write_bytes(data[: len(data) * 2 // 3])
    changed = bytearray(data)
    changed[len(data) // 2] ^= 0x5A
    (folder / "changed.arrows").write_bytes(bytes(changed))
    return [str(whole), str(folder / "cut.arrows"), str(folder / "changed.arrows")]


def _directory(folder, name: str, damaged: bool) -> str:
    d = folder / name
    d.mkdir()
    shutil.copy(SAMPLES / "matrix_a.parquet", d / "part-000000.parquet")
    shutil.copy(SAMPLES / "matrix_b.parquet", d / "part-000001.parquet")
    if damaged:
        (d / "notes.txt").write_text("a stray file")
        shutil.copy(SAMPLES / "tensor3d.parquet", d / "part-000002.parquet")  # another shape
    return str(d)


def _all_cases(store) -> list[str]:
    names = ["tensor3d.parquet", "invalid.parquet", "unsorted.parquet", "digits.parquet", "rowsparse.parquet"]
    for n in names:
        shutil.copy(SAMPLES / n, store / n)
    return ([str(store / n) for n in names] + _raw_cases(store) + _flipped(store, 1) + _flipped(store, 2)
            + _streams(store) + [_directory(store, "good", False), _directory(store, "bad", True)])


@pytest.mark.parametrize("opts", [[], ["--deep"], ["--strict"], ["--metadata-only"]], ids=lambda o: "".join(o))
def test_validate_through_a_filesystem_gives_the_local_report(store, opts):
    verdicts = set()
    for local in _all_cases(store):
        remote = "sub://" + os.path.relpath(local, store)
        code, doc = same_report(local, remote, *opts)
        verdicts.add(code)
        if code == 0 and local.endswith(".parquet") and "--metadata-only" not in opts:
            # pyarrow's reading of a file validate passes: its rows are the report's nnz.
            assert doc["nnz"] == pq.read_table(local).num_rows
    assert verdicts == {0, 1, 2}  # valid, invalid and unreadable files were met
    assert leftovers(store) == []


def test_validate_a_part_directory_on_an_object_store(objstore, tmp_path):
    """The object store lists a prefix (no directories to move): the same report as locally."""
    bad = _directory(tmp_path, "bad", True)
    good = _directory(tmp_path, "good", False)
    for local in (bad, good):
        same_report(local, f"obj://{local}")
    # pyarrow's reading of the good directory: its parts' rows are the report's.
    doc = as_json(run("validate", "--json", f"obj://{good}/"))
    assert doc["valid"] and doc["nnz"] == table(good).num_rows


def test_a_missing_url_is_unreadable(store):
    res = run("validate", "sub://absent.parquet", code=2)
    assert res.stdout.strip() == "sub://absent.parquet: UNREADABLE (no such file or directory)"
    for args in (["sub://absent.tns"], ["sub://absent.tfrecord", "--ids", "ids", "--vocab-size", "3"]):
        res = run("convert", *args, "-o", "sub://x.parquet", code=2)
        assert res.output == f"Error: {args[0]}: no such file or directory\n"
    assert os.listdir(store) == []


# -- convert ------------------------------------------------------------------------------------------

# (input sample, output name, options): every text format and TFRecord, each way
CONVERSIONS = [
    ("tensor3d.tns", "t.parquet", []),
    ("tensor3d.tns", "tdir/", []),
    ("tensor3d.parquet", "t.tns", []),
    ("tensor3d.parquet", "t.arrows", []),
    ("matrix_a.parquet", "m.mtx", []),
    ("matrix_a.parquet", "m.csv", []),
    ("matrix_a.parquet", "m.tsv", []),
    ("digits.parquet", "d.svm", []),
    ("digits.svm", "d.parquet", []),
    ("digits.parquet", "d.jsonl", []),
    ("examples.tfrecord", "e.parquet", ["--ids", "ids", "--values", "values", "--vocab-size", "20"]),
    ("digits.parquet", "d.tfrecord", ["--ids", "ids", "--values", "values"]),
    ("tensor3d.parquet", "t.tns.gz", []),
]


def _same_output(a: str, b: str):
    if a.endswith("/") or a.endswith(".parquet"):
        same_tensor(a, b)  # pyarrow reads both, and sptool's metadata
    elif a.endswith(".arrows"):
        ta, tb = (pa.ipc.open_stream(p).read_all() for p in (a, b))
        assert ta.equals(tb) and ta.schema.metadata == tb.schema.metadata
    elif a.endswith(".gz"):  # gzip's header names the file and the time: the text inside is the output
        assert gzip.decompress(open(b, "rb").read()) == gzip.decompress(open(a, "rb").read())
    else:
        assert open(b, "rb").read() == open(a, "rb").read()


@pytest.mark.parametrize("src,dst,opts", CONVERSIONS, ids=[f"{s}->{d}" for s, d, _ in CONVERSIONS])
def test_convert_through_a_filesystem_writes_the_local_output(store, tmp_path, src, dst, opts):
    shutil.copy(SAMPLES / src, store / src)
    local = tmp_path / "local"
    local.mkdir()
    run("convert", str(SAMPLES / src), "-o", os.path.join(local, dst), *opts)  # a trailing / kept
    run("--memory", "16MiB", "convert", f"sub://{src}", "-o", f"sub://{dst}", *opts)
    _same_output(os.path.join(local, dst), os.path.join(store, dst))
    assert leftovers(store) == []


def test_convert_reads_a_compressed_text_url_with_a_one_line_error_naming_the_line(store, tmp_path):
    text = (SAMPLES / "tensor3d.tns").read_bytes()
    (store / "t.tns.gz").write_bytes(gzip.compress(text))
    run("convert", str(SAMPLES / "tensor3d.tns"), "-o", str(tmp_path / "plain.parquet"))
    run("convert", "sub://t.tns.gz", "-o", "sub://t.parquet")
    same_tensor(tmp_path / "plain.parquet", store / "t.parquet")
    # An independent oracle: NumPy's reading of the text (1-based indices, then the value).
    rows = np.loadtxt(SAMPLES / "tensor3d.tns", comments="#", ndmin=2)
    out = pq.read_table(store / "t.parquet")
    got = np.stack([out.column(f"indices_{k}").to_numpy() for k in range(3)], axis=1)
    assert np.array_equal(got, rows[:, :3].astype(np.int64) - 1)
    assert np.array_equal(out.column("values").to_numpy(), rows[:, 3])
    lines = text.decode().splitlines()
    bad = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    lines[bad] = "1 1 x 2.0"
    (store / "bad.tns").write_text("\n".join(lines) + "\n")
    res = run("convert", "sub://bad.tns", "-o", "sub://bad.parquet", code=1)
    assert res.output.startswith(f"Error: sub://bad.tns: line {bad + 1}:") and res.output.count("\n") == 1
    assert not (store / "bad.parquet").exists() and leftovers(store) == []


@pytest.mark.parametrize("args", [
    ["convert", "sub://t.parquet", "-o", "sub://t.npy"],
    ["convert", "sub://t.parquet", "-o", "sub://t.npz"],
    ["convert", "sub://t.parquet", "-o", "sub://t.h5"],
    ["convert", "sub://t.parquet", "-o", "sub://plain.parquet", "--plain"],
    ["convert", "sub://d.npy", "-o", "sub://d.parquet"],
], ids=["npy-out", "npz-out", "binsparse-out", "plain-out", "npy-in"])
def test_convert_refuses_urls_for_formats_of_local_files(store, args):
    shutil.copy(SAMPLES / "tensor3d.parquet", store / "t.parquet")
    shutil.copy(SAMPLES / "dense_b.npy", store / "d.npy")
    before = sorted(os.listdir(store))
    res = run(*args, code=2)
    assert res.output.count("\n") == 1, res.output
    assert "local path" in res.output and "text formats" in res.output and ".tfrecord" in res.output
    assert sorted(os.listdir(store)) == before


def test_todense_to_a_url_is_refused_before_reading(store, tmp_path):
    shutil.copy(SAMPLES / "tensor3d.parquet", store / "t.parquet")
    res = run("todense", "sub://t.parquet", "-o", "sub://t.npy", code=2)
    assert res.output.count("\n") == 1 and "memory map" in res.output and "local path" in res.output
    assert sorted(os.listdir(store)) == ["t.parquet"]
    # The input may be a URL: NumPy's dense array from pyarrow's rows is the oracle.
    run("todense", "sub://t.parquet", "-o", str(tmp_path / "t.npy"))
    t = pq.read_table(SAMPLES / "tensor3d.parquet")
    want = np.zeros((40, 30, 20))
    np.add.at(want, tuple(t.column(f"indices_{k}").to_numpy() for k in range(3)), t.column("values").to_numpy())
    assert np.array_equal(np.load(tmp_path / "t.npy"), want)


# -- on a cluster: the workers resolve the URLs -----------------------------------------------------------

@pytest.fixture
def shared_sub(cluster_client, store):
    """sub:// registered on the driver (by ``store``) and on every worker of the session's cluster."""
    cluster_client.run(register_filesystem, "sub", pafs.SubTreeFileSystem(str(store), pafs.LocalFileSystem()))
    yield store
    cluster_client.run(register_filesystem, "sub", None)


def test_cluster_validate_of_urls_gives_the_single_machine_report(cluster_client, shared_sub, monkeypatch, rng):
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "50")  # many row groups: a single file is scanned in runs
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "37")
    store = shared_sub
    shape = (30, 20, 10)
    idx = np.stack(np.unravel_index(np.sort(rng.choice(6000, 900, replace=False)), shape), axis=1)
    sptool.write(sptool.SparseTensor(idx, rng.standard_normal(900), shape, sort_order=(0, 1, 2), unique=True),
                 str(store / "big.parquet"))
    assert pq.read_metadata(store / "big.parquet").num_row_groups > 4
    swapped = idx.copy()
    swapped[[400, 401]] = swapped[[401, 400]]  # one order break, inside the file
    write_raw(store / "broken.parquet", {f"indices_{k}": swapped[:, k] for k in range(3)} | {
        "values": np.ones(900)}, _meta(shape=shape, sparse_ndim=3, nnz=900, sort_order=(0, 1, 2)),
        row_group_size=50, schema=_schema(3))
    cases = [str(store / "big.parquet"), str(store / "broken.parquet"), _directory(store, "good", False),
             _directory(store, "bad", True)]
    address = cluster_client.scheduler.address
    for local in cases:
        remote = "sub://" + os.path.relpath(local, store)
        code = exit_code("validate", "--json", local)
        plain = as_json(run("validate", "--json", local, code=code))
        dist = run("--scheduler", address, "validate", "--json", remote, code=code)
        assert as_json(dist) == plain, local
    assert not as_json(run("validate", "--json", str(store / "broken.parquet"), code=1))["valid"]


def test_cluster_convert_of_url_files_gives_the_single_machine_tensors(cluster_client, shared_sub, tmp_path):
    store = shared_sub
    (store / "raw").mkdir()
    lines = (SAMPLES / "tensor3d.tns").read_text().splitlines()
    data = [line for line in lines if line and not line.startswith("#")]
    for i, chunk in enumerate(np.array_split(np.array(data, dtype=object), 3)):
        (store / "raw" / f"f{i}.tns").write_text("\n".join(chunk) + "\n")
    address = cluster_client.scheduler.address
    run("--scheduler", address, "convert", "sub://raw/*.tns", "--shape", "40,30,20", "-o", str(tmp_path / "dist") + "/")
    # The single machine's convert of each file, in name order, is the oracle, part by part.
    for i in range(3):
        run("convert", str(store / "raw" / f"f{i}.tns"), "--shape", "40,30,20", "-o", str(tmp_path / f"one{i}.parquet"))
    one = pa.concat_tables([pq.read_table(tmp_path / f"one{i}.parquet") for i in range(3)])
    assert table(tmp_path / "dist").equals(one)
    # The directory of the files, named by its URL: each file of it, in name order.
    run("--scheduler", address, "convert", "sub://raw/", "--shape", "40,30,20", "-o", str(tmp_path / "whole") + "/")
    assert table(tmp_path / "whole").equals(one)
    # A list of URLs through the Python API, in its order.
    from sptool.distributed import OPERATIONS

    OPERATIONS["convert"](["sub://raw/f2.tns", "sub://raw/f0.tns"], str(tmp_path / "list") + "/",
                          client=cluster_client, shape=(40, 30, 20))
    two = pa.concat_tables([pq.read_table(tmp_path / f"one{i}.parquet") for i in (2, 0)])
    assert table(tmp_path / "list").equals(two)
    res = run("--scheduler", address, "convert", "sub://raw/*.mtx", "-o", str(tmp_path / "none") + "/", code=2)
    assert "no file matches" in res.output and not (tmp_path / "none").exists()
    assert leftovers(tmp_path) == []


# -- in a terminal ------------------------------------------------------------------------------------

WITH_SUB = """
import sys
import pyarrow.fs as pafs
from sptool.io import register_filesystem
register_filesystem("sub", pafs.SubTreeFileSystem(sys.argv[1], pafs.LocalFileSystem()))
from sptool.cli import main
sys.argv = ["sptool", *sys.argv[2:]]
main()
"""


def test_validate_and_convert_of_urls_in_a_terminal(store, tmp_path):
    """Under a pseudo-terminal, as a person runs them: the bar drawn and the cursor given back, and
    the lines the local path gives (its name aside)."""
    import sys

    from pty_terminal import BAR_GLYPH, cursor_restored, run_in_terminal

    shutil.copy(SAMPLES / "tensor3d.tns", store / "t.tns")
    shutil.copy(SAMPLES / "invalid.parquet", store / "invalid.parquet")

    def terminal(*args):
        code, output = run_in_terminal([sys.executable, "-c", WITH_SUB, str(store), *args], cwd=tmp_path)
        text = output.decode("utf-8", "replace")
        assert cursor_restored(output) and "Traceback" not in text, text
        return code, output, text

    code, output, text = terminal("convert", "sub://t.tns", "-o", "sub://t.parquet")
    assert code == 0 and "sub://t.parquet" in text, text
    same_tensor(store / "t.parquet", _local_convert(tmp_path))
    code, output, text = terminal("validate", "sub://t.parquet")
    assert code == 0 and BAR_GLYPH in output and "sub://t.parquet" in text, text
    code, _, text = terminal("validate", "sub://invalid.parquet")
    local_code, _, local_text = terminal("validate", str(store / "invalid.parquet"))
    assert code == local_code == 1
    words = [line.split() for line in text.replace("sub://invalid.parquet", "NAME").splitlines() if "E_" in line]
    local_words = [line.split() for line in local_text.replace(str(store / "invalid.parquet"), "NAME").splitlines()
                   if "E_" in line]
    assert words and words == local_words


def _local_convert(tmp_path) -> str:
    out = str(tmp_path / "local.parquet")
    run("convert", str(SAMPLES / "tensor3d.tns"), "-o", out)
    return out
