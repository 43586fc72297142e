"""Inputs and outputs named by URL (sptool/io/_url.py), on the local filesystem only.

``file://`` URLs take the local code paths: the same commands on a URL and on the plain path give
the same tensors, read back by pyarrow (the oracle), and the same reports.  The non-local branch
(filesystem input files, output streams, moves, listings, deletes) runs on filesystems registered
for a scheme: pyarrow's ``SubTreeFileSystem`` over a temporary directory, and a ``PyFileSystem``
over fsspec's local filesystem that refuses to move directories, as S3 and GCS do.  What each
wrote is read back at its local path by pyarrow and compared with NumPy or the plain-path run.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from command_examples import ROOT

import sptool
from sptool.cli import cli
from sptool.io import register_filesystem

SAMPLES = ROOT / "sample_data"


def run(*args, code=0):
    res = CliRunner().invoke(cli, ["--quiet", *args])
    assert res.exit_code == code, res.output
    return res


def url(path) -> str:
    return "file://" + os.path.abspath(path)


def table(path):
    """A tensor's rows as pyarrow reads them: one table for a file or a directory's parts in order."""
    path = str(path)
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".parquet") and not n.startswith((".", "_")))
        import pyarrow as pa

        return pa.concat_tables([pq.read_table(os.path.join(path, n)) for n in names])
    return pq.read_table(path)


def same_tensor(a, b):
    """Same rows, same order, same sptool metadata (pyarrow reads both)."""
    ta, tb = table(a), table(b)
    assert ta.equals(tb)
    assert sptool.open(str(a)).meta == sptool.open(str(b)).meta


def leftovers(folder) -> list[str]:
    """Hidden temporaries (.NAME.tmp-..., .NAME.old-...) anywhere under ``folder``."""
    return [os.path.join(d, n) for d, dirs, files in os.walk(folder) for n in dirs + files if n.startswith(".")]


# -- file:// URLs: the plain-path code, the same results --------------------------------------------

def test_reorder_file_urls_match_plain_paths(tmp_path):
    src = SAMPLES / "unsorted.parquet"
    run("reorder", str(src), "-o", str(tmp_path / "plain.parquet"))
    run("reorder", url(src), "-o", url(tmp_path / "u.parquet"))
    same_tensor(tmp_path / "plain.parquet", tmp_path / "u.parquet")
    # An independent oracle too: NumPy's stable lexsort of pyarrow's rows of the input.
    t = pq.read_table(src)
    idx = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)], axis=1)
    perm = np.lexsort(idx.T[::-1])
    out = pq.read_table(tmp_path / "u.parquet")
    assert np.array_equal(np.stack([out.column(f"indices_{k}").to_numpy() for k in range(3)], axis=1), idx[perm])
    assert np.array_equal(out.column("values").to_numpy(), t.column("values").to_numpy()[perm])
    # A directory output, named by URL.
    run("reorder", url(src), "-o", url(tmp_path / "dir") + "/")
    same_tensor(tmp_path / "plain.parquet", tmp_path / "dir")
    assert leftovers(tmp_path) == []


def test_add_file_urls_match_plain_paths(tmp_path):
    a, b = SAMPLES / "matrix_a.parquet", SAMPLES / "matrix_b.parquet"
    run("add", str(a), str(b), "-o", str(tmp_path / "plain.parquet"))
    run("add", url(a), url(b), "-o", url(tmp_path / "u.parquet"))
    same_tensor(tmp_path / "plain.parquet", tmp_path / "u.parquet")


def test_validate_and_info_file_urls_match_plain_paths(tmp_path):
    for name, code in (("tensor3d.parquet", 0), ("invalid.parquet", 1)):
        plain = json.loads(run("validate", "--json", str(SAMPLES / name), code=code).stdout)
        by_url = json.loads(run("validate", "--json", url(SAMPLES / name), code=code).stdout)
        assert by_url == plain
    plain = json.loads(run("info", "--json", str(SAMPLES / "tensor3d.parquet")).stdout)
    by_url = json.loads(run("info", "--json", url(SAMPLES / "tensor3d.parquet")).stdout)
    assert by_url.pop("path") == url(SAMPLES / "tensor3d.parquet")  # info names the tensor as given
    plain.pop("path")
    assert by_url == plain


def test_convert_file_urls_match_plain_paths(tmp_path):
    run("convert", str(SAMPLES / "tensor3d.tns"), "-o", str(tmp_path / "plain.parquet"))
    run("convert", url(SAMPLES / "tensor3d.tns"), "-o", url(tmp_path / "u.parquet"))
    same_tensor(tmp_path / "plain.parquet", tmp_path / "u.parquet")
    run("convert", url(tmp_path / "u.parquet"), "-o", url(tmp_path / "back.tns"))
    run("convert", str(tmp_path / "plain.parquet"), "-o", str(tmp_path / "plain.tns"))
    assert (tmp_path / "back.tns").read_bytes() == (tmp_path / "plain.tns").read_bytes()


def test_file_url_with_a_host_is_refused(tmp_path):
    res = run("reorder", "file://elsewhere/data/t.parquet", "-o", str(tmp_path / "o.parquet"), code=2)
    assert "file:///ABSOLUTE/PATH" in res.output and len(res.output.strip().splitlines()) == 1


# -- unsupported schemes ---------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["input", "output"])
def test_unsupported_scheme_is_a_one_line_usage_error(tmp_path, where):
    bad = "nosuchfs://bucket/t.parquet"
    args = [bad, "-o", str(tmp_path / "o.parquet")] if where == "input" else \
        [str(SAMPLES / "tensor3d.parquet"), "-o", bad]
    res = run("reorder", *args, code=2)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith(f"Error: {bad}: pyarrow's filesystems cannot open this URL")
    assert "file://" in lines[0] and "s3://" in lines[0]  # the schemes that work (this pyarrow has S3)
    assert os.listdir(tmp_path) == []


# -- the non-local branch: a SubTreeFileSystem over a temporary directory ------------------------------

@pytest.mark.parametrize("output", ["out.parquet", "nested/deeper/out.parquet", "out/", "out.arrows"])
def test_reorder_through_a_filesystem(store, tmp_path, output):
    shutil.copy(SAMPLES / "unsorted.parquet", store / "in.parquet")
    run("reorder", str(SAMPLES / "unsorted.parquet"), "-o", str(tmp_path / "plain.parquet"))
    run("--memory", "16MiB", "reorder", "sub://in.parquet", "-o", f"sub://{output}")
    if output.endswith(".arrows"):  # read back by sptool's reader: compare it as a tensor
        run("reorder", f"sub://{output}", "-o", "sub://back.parquet")
        output = "back.parquet"
    same_tensor(tmp_path / "plain.parquet", store / output)
    assert leftovers(store) == []


def test_part_directory_read_and_replaced_through_a_filesystem(store, tmp_path, monkeypatch):
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "5")  # several row groups: the threaded reader opens the file too
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")
    src = store / "in"
    src.mkdir()
    shutil.copy(SAMPLES / "matrix_a.parquet", src / "part-000000.parquet")
    shutil.copy(SAMPLES / "matrix_b.parquet", src / "part-000001.parquet")
    (src / "_ignored").write_text("hidden entries are not parts")
    run("reorder", str(src) + "/", "-o", str(tmp_path / "plain.parquet"), "--duplicates", "sum")
    run("reorder", "sub://in/", "-o", "sub://out/", "--duplicates", "sum")
    same_tensor(tmp_path / "plain.parquet", store / "out")
    # Written again over the existing directory: the old parts go, the new ones take their place.
    run("reorder", "sub://in/", "-o", "sub://out/", "--perm", "1,0", "--duplicates", "sum")
    run("reorder", str(src) + "/", "-o", str(tmp_path / "plain10.parquet"), "--perm", "1,0", "--duplicates", "sum")
    same_tensor(tmp_path / "plain10.parquet", store / "out")
    info = json.loads(run("info", "--json", "sub://out").stdout)
    assert info["bytes"] == sum(os.path.getsize(store / "out" / n) for n in os.listdir(store / "out"))
    assert info["nnz"] == table(store / "out").num_rows
    assert leftovers(store) == []


def test_stitched_writer_through_a_filesystem_writes_pyarrows_bytes(store):
    """Row groups encoded side by side (io/_stitch.py) and appended to a filesystem's output
    stream make the file pyarrow's own writer makes."""
    import pyarrow as pa

    from sptool.io._stitch import StitchedWriter

    schema = pa.schema([("indices_0", pa.int64()), ("values", pa.float64())])
    options = {"compression": "zstd", "write_page_index": True, "write_page_checksum": True}
    tables = [pa.table({"indices_0": np.arange(i, i + 10), "values": np.linspace(0, 1, 10)}, schema=schema)
              for i in range(0, 50, 10)]
    plain = pa.BufferOutputStream()
    with pq.ParquetWriter(plain, schema, **options) as w:
        for tb in tables:
            w.write_table(tb, row_group_size=tb.num_rows)
    s = StitchedWriter("sub://s.parquet", schema, options, workers=2, inflight=2)
    for tb in tables:
        s.write_table(tb)
    s.close()
    assert (store / "s.parquet").read_bytes() == plain.getvalue().to_pybytes()


def test_a_failure_leaves_nothing_on_the_filesystem(store):
    shutil.copy(SAMPLES / "unsorted.parquet", store / "in.parquet")
    before = sorted(os.listdir(store))
    for output in ("a/b/out.parquet", "out/", "out.arrows"):
        res = run("reorder", "sub://in.parquet", "-o", f"sub://{output}", "--duplicates", "error", code=1)
        assert "duplicate" in res.output.lower() or "repeated" in res.output.lower(), res.output
        assert sorted(os.listdir(store)) == before, output  # no temporary, no made parent
    # An existing output stays as it was.
    run("reorder", "sub://in.parquet", "-o", "sub://out/")
    kept = table(store / "out")
    run("reorder", "sub://in.parquet", "-o", "sub://out/", "--duplicates", "error", code=1)
    assert table(store / "out").equals(kept) and leftovers(store) == []


def test_a_directory_of_other_files_is_not_replaced(store):
    (store / "mine").mkdir()
    (store / "mine" / "notes.txt").write_text("not a tensor part")
    res = run("reorder", str(SAMPLES / "tensor3d.parquet"), "-o", "sub://mine/", code=2)
    assert "refusing to replace directory" in res.output
    assert os.listdir(store / "mine") == ["notes.txt"] and leftovers(store) == []


def test_missing_input_on_a_filesystem(store):
    res = run("reorder", "sub://absent.parquet", "-o", "sub://o.parquet", code=2)
    assert res.output.strip() == "Error: sub://absent.parquet: no such file or directory"


def test_local_only_commands_refuse_other_filesystems(store, tmp_path):
    shutil.copy(SAMPLES / "tensor3d.parquet", store / "t.parquet")
    for args in (["todense", str(SAMPLES / "tensor3d.parquet"), "-o", "sub://t.npy"],
                 ["convert", "sub://t.parquet", "-o", "sub://t.npy"],
                 ["convert", "sub://d.npy", "-o", str(tmp_path / "d.parquet")],
                 ["convert", "sub://t.parquet", "-o", "sub://t.h5"],
                 ["matmul", "sub://t.parquet", "sub://d.npy", "-o", str(tmp_path / "p.npy")],
                 ["reorder", "sub://t.parquet", "-o", str(tmp_path / "o.parquet"), "--tmp-dir", "sub://spill"]):
        res = run(*args, code=2)
        assert res.output.count("\n") == 1 and "local" in res.output, res.output
    assert sorted(os.listdir(store)) == ["t.parquet"] and os.listdir(tmp_path) == ["store"]


# -- an object store's behaviour: no directory moves ---------------------------------------------------

def test_directory_committed_part_by_part_on_an_object_store(objstore, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(SAMPLES / "matrix_a.parquet", src / "part-000000.parquet")
    shutil.copy(SAMPLES / "matrix_b.parquet", src / "part-000001.parquet")
    out = f"obj://{tmp_path}/out/"
    run("concat", f"obj://{src}", f"obj://{src}", "--axis", "0", "-o", out)
    run("concat", str(src), str(src), "--axis", "0", "-o", str(tmp_path / "plain.parquet"))
    same_tensor(tmp_path / "plain.parquet", tmp_path / "out")
    # Each part moved into place as an object (a copy that appears whole), not the directory at once.
    assert [dst for _, dst in objstore.moves] == [f"out/{n}" for n in sorted(os.listdir(tmp_path / "out"))]
    objstore.moves.clear()
    run("reorder", str(tmp_path / "plain.parquet"), "-o", out)  # replaces the directory, part by part
    same_tensor(tmp_path / "plain.parquet", tmp_path / "out")
    assert leftovers(tmp_path) == []


# -- on a cluster: file:// URLs for the inputs and the output directory (other filesystems: -------------
# -- tests/test_cluster_urls.py) -------------------------------------------------------------------------

@pytest.fixture
def client(cluster_client):
    """The session's cluster (conftest.py)."""
    return cluster_client


def _parts(tmp_path, name, rng, n=2000, parts=4):
    shape = (40, 30, 20)
    idx = np.stack([rng.integers(0, s, n) for s in shape], axis=1)
    val = rng.integers(-50, 50, n).astype(np.int64)
    folder = tmp_path / name
    folder.mkdir()
    for i, (ki, vi) in enumerate(zip(np.array_split(idx, parts), np.array_split(val, parts))):
        sptool.write(sptool.SparseTensor(ki, vi, shape), str(folder / f"part-{i:06d}.parquet"))
    return folder


@pytest.mark.parametrize("command", [["reorder", "--duplicates", "sum"], ["add"],
                                     ["reduce", "--op", "sum", "--axis", "1"]])
def test_cluster_with_file_urls_matches_one_machine(client, tmp_path, rng, monkeypatch, command):
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "150")
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "97")
    a, b = _parts(tmp_path, "a", rng), _parts(tmp_path, "b", rng)
    name, *opts = command
    inputs = [a, b] if name == "add" else [a]
    run(name, *[str(p) for p in inputs], *opts, "-o", str(tmp_path / "plain.parquet"))
    run("--scheduler", client.scheduler.address, name, *[url(p) for p in inputs], *opts,
        "-o", url(tmp_path / "dist") + "/")
    assert table(tmp_path / "dist").equals(table(tmp_path / "plain.parquet"))
    dist, plain = sptool.open(str(tmp_path / "dist")).meta, sptool.open(str(tmp_path / "plain.parquet")).meta
    for key in ("shape", "value_type", "fill_value", "nnz"):
        assert getattr(dist, key) == getattr(plain, key), key
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("command", [["reorder", "--duplicates", "sum"], ["add"],
                                     ["reduce", "--op", "sum", "--axis", "0"]])
def test_cluster_workers_resolve_input_urls(client, store, tmp_path, rng, monkeypatch, command):
    """A URL goes to the workers as a string and each resolves it: the scheme is registered on
    every worker here (a pyarrow filesystem pickles), as s3:// resolves on every worker by itself."""
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "150")
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "97")
    client.run(register_filesystem, "sub", pafs.SubTreeFileSystem(str(store), pafs.LocalFileSystem()))
    try:
        _parts(store, "a", rng), _parts(store, "b", rng)
        name, *opts = command
        inputs = ["a", "b"] if name == "add" else ["a"]
        run(name, *[str(store / p) for p in inputs], *opts, "-o", str(tmp_path / "plain.parquet"))
        run("--scheduler", client.scheduler.address, name, *[f"sub://{p}/" for p in inputs], *opts,
            "-o", str(tmp_path / "dist") + "/")
    finally:
        client.run(register_filesystem, "sub", None)
    assert table(tmp_path / "dist").equals(table(tmp_path / "plain.parquet"))
    assert leftovers(tmp_path) == []


def test_a_pattern_names_the_same_files_by_path_and_by_url(store):
    """io.matching: files only (no directories, no hidden entries), in name order, whether the
    pattern is a path or a URL (with a ?query, which is no wildcard and stays on every name)."""
    from sptool.io import matching

    (store / "d").mkdir()
    for name in ("b.tns", "a.tns", ".hidden.tns", "c.mtx"):
        (store / "d" / name).write_text("1 1 1 1.0\n")
    (store / "d" / "sub.tns").mkdir()
    expected = sorted(n for n in os.listdir(store / "d")
                      if n.endswith(".tns") and not n.startswith(".") and os.path.isfile(store / "d" / n))
    assert expected == ["a.tns", "b.tns"]
    assert matching(str(store / "d" / "*.tns")) == [str(store / "d" / n) for n in expected]
    assert matching("sub://d/*.tns") == [f"sub://d/{n}" for n in expected]
    assert matching("sub://d/*.tns?region=x") == [f"sub://d/{n}?region=x" for n in expected]
    assert matching("sub://d/a.tns?region=x") == ["sub://d/a.tns?region=x"]


def test_a_hidden_sibling_of_a_file_url_is_beside_its_path(tmp_path):
    """io.sibling_name (the temporaries of outputs and of a copied stdin) of a file:// URL lies in
    the URL's directory, as for the plain path, not in a directory named 'file:' here."""
    from sptool.io import sibling_name

    for name in (url(tmp_path / "o") + "/", str(tmp_path / "o") + "/", url(tmp_path / "t.parquet")):
        head, tail = os.path.split(sibling_name(name, "stdin", ".parquet"))
        assert head == str(tmp_path) and tail.startswith((".o.stdin-", ".t.parquet.stdin-")), (name, head, tail)


def test_a_npy_named_by_a_url_with_a_query_is_refused_as_a_npy(store, tmp_path):
    """A .npy operand is told by its name before the URL's ?query: refused as a .npy (read
    through a memory map), not read as a Parquet file."""
    shutil.copy(SAMPLES / "tensor3d.parquet", store / "t.parquet")
    res = run("matmul", "sub://t.parquet", "sub://d.npy?region=x", "-o", str(tmp_path / "p.npy"), code=2)
    assert res.output.count("\n") == 1 and ".npy operand takes local paths" in res.output, res.output


def test_a_dense_output_named_by_a_pathlib_path(tmp_path):
    """The Python API's dense outputs take os.PathLike names, as str ones: the sum equals NumPy's
    dense sum of the two operands."""
    import pathlib

    dense = np.arange(40 * 30 * 20, dtype=np.float64).reshape(40, 30, 20)
    np.save(tmp_path / "d.npy", dense)
    sptool.add(str(SAMPLES / "tensor3d.parquet"), str(tmp_path / "d.npy"), pathlib.Path(tmp_path / "s.npy"))
    t = pq.read_table(SAMPLES / "tensor3d.parquet")
    expected = dense.copy()
    np.add.at(expected, tuple(t.column(f"indices_{k}").to_numpy() for k in range(3)), t.column("values").to_numpy())
    assert np.array_equal(np.load(tmp_path / "s.npy"), expected)
