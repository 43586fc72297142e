"""Cluster ops writing their part directories to other filesystems (sptool/distributed/partdir.py
through io's URL layer), tested on the local filesystem only: ``sub://``, pyarrow's
SubTreeFileSystem over a temporary directory (a filesystem with directory renames, as HDFS), and
``obj://``, a PyFileSystem over fsspec's local filesystem that refuses to move a directory (an
object store's behaviour), each registered on the driver and on every worker.

The oracle is the single-machine command's output, read back by pyarrow with the distributed
directory: the same rows in the same order, and the same tensor metadata; a failed job leaves
nothing on the store (no tensor, no hidden temporary), and an output it would have replaced
stays as it was."""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from test_distributed import reorder_killing_a_worker
from test_urls import leftovers, run, table

import sptool
import sptool.distributed
from sptool.io import register_filesystem

distributed = pytest.importorskip("distributed")

SHAPE = (40, 30, 20)
TINY = {"SPTOOL_ROW_GROUP_ROWS": "150", "SPTOOL_BATCH_ROWS": "97"}  # several pieces per part


@pytest.fixture
def client(cluster_client):
    return cluster_client


@pytest.fixture
def tiny(monkeypatch):
    for var, value in TINY.items():
        monkeypatch.setenv(var, value)


class Remote:
    """A store on the local disk at ``root``, named by the URLs of ``scheme``."""

    def __init__(self, scheme: str, root):
        self.scheme, self.root = scheme, root

    def url(self, name: str) -> str:
        return f"sub://{name}" if self.scheme == "sub" else f"obj://{self.root}/{name}"

    def path(self, name: str) -> str:
        return str(self.root / name)


@pytest.fixture(params=["sub", "obj"])
def remote(request, client, tmp_path):
    """The store, its scheme registered on the driver (the conftest fixture) and every worker."""
    if request.param == "sub":
        root = request.getfixturevalue("store")
        fs = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
    else:
        fs = pafs.PyFileSystem(request.getfixturevalue("objstore"))
        root = tmp_path / "store"
        root.mkdir()
    client.run(register_filesystem, request.param, fs)
    yield Remote(request.param, root)
    client.run(register_filesystem, request.param, None)


def on(client, *args, code=0):
    return run("--scheduler", client.scheduler.address, *args, code=code)


def same_tensor(dist, plain):
    """Same rows, same order (pyarrow reads both), same tensor metadata."""
    assert table(dist).equals(table(plain))
    d, p = sptool.open(str(dist)).meta, sptool.open(str(plain)).meta
    for key in ("shape", "sparse_ndim", "value_type", "fill_value", "iso", "dimension_names", "nnz"):
        assert getattr(d, key) == getattr(p, key), key


def parts(folder, idx, val, shape, count=4):
    """A part directory of ``count`` parts of consecutive rows."""
    os.makedirs(folder)
    for i, (ki, vi) in enumerate(zip(np.array_split(idx, count), np.array_split(val, count))):
        sptool.write(sptool.SparseTensor(ki, vi, shape), os.path.join(folder, f"part-{i:06d}.parquet"))
    return str(folder) + "/"


@pytest.fixture
def inputs(tmp_path, rng):
    """Local operands: ``a``, ``b`` (integers, unsorted, with duplicates), ``f`` (floats, unsorted),
    ``s`` (floats, canonical, cut into parts: sorted across its seams), ``m`` x ``n`` (matrices)."""
    made = {}
    for name, kind in (("a", "int"), ("b", "int"), ("f", "float")):
        idx = np.stack([rng.integers(0, d, 2000) for d in SHAPE], axis=1)
        idx[1000:] = idx[rng.integers(0, 1000, 1000)]  # duplicates
        val = rng.integers(-50, 50, 2000) if kind == "int" else rng.standard_normal(2000)
        made[name] = parts(tmp_path / name, idx, val, SHAPE)
    idx = np.unique(np.stack([rng.integers(0, d, 3000) for d in SHAPE], axis=1), axis=0)
    made["s"] = parts(tmp_path / "s", idx, rng.standard_normal(len(idx)) * 1e6, SHAPE)
    for name, shape in (("m", (40, 30)), ("n", (30, 20))):
        idx = np.stack([rng.integers(0, d, 600) for d in shape], axis=1)
        made[name] = parts(tmp_path / name, idx, rng.standard_normal(600), shape, count=3)
    return made


# Each command's arguments before -o; upper-case names are the operands (inputs fixture).
COMMANDS = {
    "reorder": ["reorder", "A", "--perm", "2,0,1"],  # duplicates kept, in input order
    "reorder-sum": ["reorder", "A", "--duplicates", "sum"],
    "add": ["add", "A", "B"],
    "concat": ["concat", "A", "B", "--axis", "1"],
    "slice": ["slice", "A", "--start", "5,0,3", "--size", "20,-1,10"],
    "transpose": ["transpose", "F", "--perm", "2,0,1"],
    "map": ["map", "F", "--fn", "neg"],  # piece by piece
    "map-summed": ["map", "F", "--fn", "square"],  # duplicates summed first: key ranges
    "retain": ["retain", "A", "--where", "values > 0"],
    "matmul": ["matmul", "M", "N"],
}


def _args(command, inputs):
    return [inputs[a.lower()] if a in ("A", "B", "F", "S", "M", "N") else a for a in command]


@pytest.mark.parametrize("name", COMMANDS)
def test_cluster_output_on_another_filesystem_equals_one_machine(client, tiny, remote, inputs, tmp_path, name):
    args = _args(COMMANDS[name], inputs)
    run(*args, "-o", str(tmp_path / "plain.parquet"))
    on(client, *args, "-o", remote.url("out/"))
    same_tensor(remote.path("out"), tmp_path / "plain.parquet")
    assert os.listdir(remote.root) == ["out"] and leftovers(remote.root) == []


@pytest.mark.parametrize("data,strategy", [("a", "partials"), ("s", "seams"), ("f", "ranges")])
def test_cluster_reduce_on_another_filesystem_equals_one_machine(client, tiny, remote, inputs, tmp_path, data,
                                                                 strategy):
    """The three ways a cluster reduces: integer partials, a sorted directory reduced where its
    pieces stand, float rows shuffled into key ranges."""
    sptool.reduce(inputs[data], str(tmp_path / "plain.parquet"), op="sum", axis=1)
    r = sptool.distributed.reduce(inputs[data], remote.url("out/"), op="sum", axis=1, client=client)
    assert r["strategy"] == strategy
    same_tensor(remote.path("out"), tmp_path / "plain.parquet")
    assert os.listdir(remote.root) == ["out"] and leftovers(remote.root) == []


def test_cluster_split_on_another_filesystem_equals_one_machine(client, tiny, remote, inputs, tmp_path):
    run("split", inputs["a"], "--axis", "0", "--num-split", "3", "-o", str(tmp_path / "plain-{i}.parquet"))
    on(client, "split", inputs["a"], "--axis", "0", "--num-split", "3", "-o", remote.url("out-{i}/"))
    for i in range(3):
        same_tensor(remote.path(f"out-{i}"), tmp_path / f"plain-{i}.parquet")
    assert sorted(os.listdir(remote.root)) == ["out-0", "out-1", "out-2"] and leftovers(remote.root) == []


def test_cluster_inputs_and_output_on_another_filesystem(client, tiny, remote, inputs, tmp_path):
    """Operands named by URL too, read by the workers from the store they write to."""
    for name in ("a", "b"):
        os.rename(inputs[name], remote.path(name))
    run("add", remote.path("a") + "/", remote.path("b") + "/", "-o", str(tmp_path / "plain.parquet"))
    on(client, "add", remote.url("a/"), remote.url("b/"), "-o", remote.url("out/"))
    same_tensor(remote.path("out"), tmp_path / "plain.parquet")
    assert sorted(os.listdir(remote.root)) == ["a", "b", "out"] and leftovers(remote.root) == []


def test_cluster_output_url_with_a_query(client, tiny, store, inputs, tmp_path):
    """A URL's ?query configures its filesystem (s3://b/t/?endpoint_override=...): the names of
    the parts, the staging directory and the scratch go before it."""
    fs = pafs.SubTreeFileSystem(str(store), pafs.LocalFileSystem())
    client.run(register_filesystem, "sub", fs)
    try:
        run("reorder", inputs["a"], "--duplicates", "sum", "-o", str(tmp_path / "plain.parquet"))
        on(client, "reorder", inputs["a"], "--duplicates", "sum", "-o", "sub://out/?region=here")
        run("split", inputs["a"], "--axis", "2", "--num-split", "2", "-o", str(tmp_path / "plain-{i}.parquet"))
        on(client, "split", inputs["a"], "--axis", "2", "--num-split", "2", "-o", "sub://sp-{i}/?region=here")
        # convert of a pattern and to a directory, each named with the query: the formats are
        # told from the names before it, and the query is no wildcard.
        (store / "raw").mkdir()
        for i in range(2):
            (store / "raw" / f"t{i}.tns").write_text("".join(f"{i + 1} {j + 1} {j + 2} {j}.5\n" for j in range(3)))
            run("convert", str(store / "raw" / f"t{i}.tns"), "--shape", "4,5,6", "-o", str(tmp_path / f"t{i}.parquet"))
        on(client, "convert", "sub://raw/t*.tns?region=here", "--shape", "4,5,6", "-o", "sub://cv/?region=here")
        on(client, "convert", "sub://raw/t1.tns?region=here", "--shape", "4,5,6", "-o", "sub://cv1/?region=here")
    finally:
        client.run(register_filesystem, "sub", None)
    same_tensor(store / "out", tmp_path / "plain.parquet")
    for i in range(2):
        same_tensor(store / f"sp-{i}", tmp_path / f"plain-{i}.parquet")
    assert table(store / "cv").equals(pa.concat_tables([pq.read_table(tmp_path / f"t{i}.parquet") for i in range(2)]))
    assert table(store / "cv1").equals(pq.read_table(tmp_path / "t1.parquet"))
    assert sorted(os.listdir(store)) == ["cv", "cv1", "out", "raw", "sp-0", "sp-1"] and leftovers(store) == []


def test_cluster_replaces_an_output_on_another_filesystem(client, tiny, remote, inputs, tmp_path):
    on(client, "reorder", inputs["a"], "--duplicates", "sum", "-o", remote.url("out/"))
    before = set(os.listdir(remote.path("out")))
    on(client, "transpose", inputs["f"], "--perm", "1,0,2", "-o", remote.url("out/"))
    run("transpose", inputs["f"], "--perm", "1,0,2", "-o", str(tmp_path / "plain.parquet"))
    same_tensor(remote.path("out"), tmp_path / "plain.parquet")
    assert len(before) > 1 and os.listdir(remote.root) == ["out"] and leftovers(remote.root) == []


def _damaged(folder: str, part: int, dim: int) -> int:
    """Part ``part`` of ``folder`` rewritten with one index outside the shape (still an sptool
    file): the row, counted from the operand's start, that the error names."""
    path = os.path.join(folder, f"part-{part:06d}.parquet")
    file = pq.ParquetFile(path)
    t = file.read()
    col = t.column(f"indices_{dim}").to_numpy().copy()
    col[5] = SHAPE[dim] + 3
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    pq.write_table(t.set_column(dim, f"indices_{dim}", pa.array(col)).replace_schema_metadata(kept), path)
    return sum(pq.ParquetFile(os.path.join(folder, f"part-{i:06d}.parquet")).metadata.num_rows
               for i in range(part)) + 5


@pytest.mark.parametrize("command", [["reorder"], ["reduce", "--op", "sum", "--axis", "1"],
                                     ["transpose", "--perm", "2,0,1"], ["map", "--fn", "neg"]])
def test_a_bad_input_part_leaves_nothing_on_the_store(client, tiny, remote, inputs, command):
    """A job failing in its tasks (an index outside the shape in part 2) leaves no tensor and no
    temporary on the store, and an output it would have replaced as it was."""
    on(client, "reorder", inputs["a"], "-o", remote.url("out/"))
    kept = table(remote.path("out"))
    row = _damaged(inputs["a"], 2, 1)
    name, *opts = command
    res = on(client, name, inputs["a"], *opts, "-o", remote.url("new/"), code=1)
    assert res.output.count("\n") == 1 and inputs["a"] in res.output
    if name != "reduce":  # reduce's partials count the row from their piece's start (ops/reduce.py feed_all)
        assert f"indices[{row}]" in res.output
    res = on(client, name, inputs["a"], *opts, "-o", remote.url("out/"), code=1)
    assert res.output.count("\n") == 1
    assert os.listdir(remote.root) == ["out"] and leftovers(remote.root) == []
    assert table(remote.path("out")).equals(kept)


def test_a_task_failing_to_write_leaves_nothing_on_the_store(client, tiny, objstore, inputs, tmp_path):
    """A storage error in one task (the workers' filesystem refuses to write one part) fails the
    job in one line (an OSError is exit 3, as on one machine) and leaves nothing behind."""

    class FailingPart(type(objstore)):
        def open_output_stream(self, path, metadata):
            if "part-000001.parquet" in path:
                raise OSError("the store refused the write")
            return super().open_output_stream(path, metadata)

    root = tmp_path / "store"
    root.mkdir()
    client.run(register_filesystem, "obj", pafs.PyFileSystem(FailingPart(objstore.fs)))
    try:
        res = on(client, "transpose", inputs["f"], "--perm", "2,0,1", "-o", f"obj://{root}/out/", code=3)
    finally:
        client.run(register_filesystem, "obj", None)
    assert res.output.count("\n") == 1 and "refused the write" in res.output
    assert os.listdir(root) == []


def test_a_worker_killed_during_a_job_leaves_no_temporary_on_the_store(client, tiny, objstore, tmp_path, rng):
    """A worker killed while the job shuffles: Dask runs its tasks again, the directory committed
    on the object store is the single machine's, and nothing the killed tasks began is left."""
    idx = np.stack([rng.integers(0, d, 40_000) for d in SHAPE], axis=1)[rng.integers(0, 5000, 40_000)]
    src = parts(tmp_path / "in", idx, rng.integers(-50, 50, 40_000), SHAPE, count=8)
    root = tmp_path / "store"
    root.mkdir()
    fs = pafs.PyFileSystem(objstore)

    class RegisterObj(distributed.WorkerPlugin):
        """obj:// on every worker, the one the nanny starts after the kill included."""

        def setup(self, worker):
            register_filesystem("obj", fs)

        def teardown(self, worker):
            register_filesystem("obj", None)

    client.register_plugin(RegisterObj(), name="register-obj")
    try:
        reorder_killing_a_worker(client, src, f"obj://{root}/out/", duplicates="sum")
    finally:
        client.unregister_worker_plugin("register-obj")
    sptool.reorder(src, str(tmp_path / "plain.parquet"), duplicates="sum")
    same_tensor(root / "out", tmp_path / "plain.parquet")
    assert os.listdir(root) == ["out"] and leftovers(root) == []


def test_a_dense_product_on_another_filesystem_is_refused(client, remote, inputs, tmp_path):
    """A .npy output is written through a memory map by the tasks: a local or shared path only."""
    np.save(tmp_path / "d.npy", np.ones((30, 4)))
    res = on(client, "matmul", inputs["m"], str(tmp_path / "d.npy"), "-o", remote.url("p.npy"), code=2)
    assert res.output.count("\n") == 1 and "local" in res.output
    assert os.listdir(remote.root) == []


def test_cluster_convert_of_several_files_to_another_filesystem(client, remote, tmp_path):
    """convert on a cluster writes a part per input file into the staged directory (partdir.py):
    part i is the single machine's convert of the i-th file in name order."""
    for i in range(3):
        (tmp_path / f"t{i}.tns").write_text("".join(f"{i + 1} {j + 1} {j + 2} {i * 10 + j}.5\n" for j in range(4)))
        run("convert", str(tmp_path / f"t{i}.tns"), "--shape", "4,5,6", "-o", str(tmp_path / f"one{i}.parquet"))
    on(client, "convert", str(tmp_path / "t*.tns"), "-o", remote.url("out/"), "--shape", "4,5,6")
    one = pa.concat_tables([pq.read_table(tmp_path / f"one{i}.parquet") for i in range(3)])
    assert table(remote.path("out")).equals(one)
    assert os.listdir(remote.root) == ["out"] and leftovers(remote.root) == []


def test_an_output_scheme_the_workers_do_not_know_fails_in_one_line(client, store, inputs):
    """sub:// registered on the driver only: the workers cannot resolve the output they are to
    write, and the job says so in one line, leaving nothing."""
    res = on(client, "reorder", inputs["a"], "-o", "sub://out/", code=2)
    assert res.output.count("\n") == 1 and re.search(r"sub://\S*: pyarrow's filesystems cannot open", res.output)
    assert os.listdir(store) == []



def test_a_failed_commit_puts_back_the_outputs_it_replaced(client, tiny, objstore, inputs, tmp_path):
    """split's directories are committed together: when moving a part into the last of them fails
    (once, on the driver, which commits), the parts already moved go back, every output is the
    previous job's, and nothing else is left on the store."""
    root = tmp_path / "store"
    root.mkdir()
    client.run(register_filesystem, "obj", pafs.PyFileSystem(objstore))
    try:
        on(client, "split", inputs["a"], "--axis", "0", "--num-split", "3", "-o", f"obj://{root}/out-{{i}}/")
        before = [table(root / f"out-{i}") for i in range(3)]

        class FailsOnce(type(objstore)):
            failed = []

            def move(self, src, dest):
                if "/out-2/" in dest and not self.failed:
                    self.failed.append(dest)
                    raise OSError("the store failed a copy")
                super().move(src, dest)

        failing = FailsOnce(objstore.fs)
        register_filesystem("obj", pafs.PyFileSystem(failing))  # the driver's filesystem only
        res = on(client, "split", inputs["f"], "--axis", "1", "--num-split", "3", "-o", f"obj://{root}/out-{{i}}/",
                 code=3)
    finally:
        client.run(register_filesystem, "obj", None)
    assert failing.failed and "failed a copy" in res.output and res.output.count("\n") == 1
    assert [table(root / f"out-{i}") for i in range(3)] == before
    assert sorted(os.listdir(root)) == ["out-0", "out-1", "out-2"] and leftovers(root) == []


def test_a_killed_tasks_temporary_is_not_committed(remote, rng):
    """A worker killed while writing a part leaves its hidden temporary in the staging directory
    (the task runs again elsewhere): the commit leaves it behind, with the scratch."""
    from sptool.distributed.partdir import PartDirectory

    t = sptool.SparseTensor(np.stack([rng.integers(0, d, 50) for d in SHAPE], axis=1), rng.standard_normal(50), SHAPE)
    with PartDirectory(remote.url("out/")) as out:
        sptool.write(t, out.part(0))
        staged = out.root.replace("obj://", "") if remote.scheme == "obj" else remote.path(out.root[len("sub://"):])
        with open(os.path.join(staged, ".part-000001.parquet.tmp-1-0-00000000"), "wb") as f:
            f.write(b"PAR1 half a part")
        out.scratch("partials")
    assert os.listdir(remote.root) == ["out"] and os.listdir(remote.path("out")) == ["part-000000.parquet"]
    got = table(remote.path("out"))
    assert np.array_equal(np.stack([got.column(f"indices_{d}").to_numpy() for d in range(3)], axis=1), t.indices)
    assert np.array_equal(got.column("values").to_numpy(), t.values)
