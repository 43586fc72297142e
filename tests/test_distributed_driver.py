"""What the driver of a cluster job loads and reads before its tasks run (docs/performance.md):
a float reduce of a sorted directory (the seamed path) does not import
the shuffle's modules, and the driver opens each input footer for its plan at most twice (it
opened them three times).  The results are checked against NumPy, so the paths these tests
constrain are the ones that ran."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_examples import ROOT, env_with_sptool

import sptool
import sptool.distributed

pytest.importorskip("distributed")

SHAPE = (40, 30, 20)


@pytest.fixture
def client(cluster_client):
    return cluster_client


def _sorted_parts(path, rng, parts=5, n=4000, values="float"):
    """A canonical 3-D tensor cut into ``parts`` part files of consecutive rows (each claims the
    row-major order and unique rows), and its (indices, values)."""
    flat = np.unique(rng.integers(0, int(np.prod(SHAPE)), n))
    idx = np.stack(np.unravel_index(flat, SHAPE), axis=1)
    val = rng.standard_normal(len(idx)) if values == "float" else rng.integers(-9, 9, len(idx))
    os.makedirs(path)
    for i, rows in enumerate(np.array_split(np.arange(len(idx)), parts)):
        sptool.write(sptool.SparseTensor(idx[rows], val[rows], SHAPE), os.path.join(path, f"part-{i:06d}.parquet"))
    return str(path) + "/", idx, val


def _read(path, K):
    files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    keys = np.stack([table.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1)
    return keys, table.column("values").to_numpy()


def _summed_over_axis_1(idx, val):
    keys, inverse = np.unique(idx[:, [0, 2]], axis=0, return_inverse=True)
    sums = np.zeros(len(keys))
    np.add.at(sums, inverse.ravel(), val)
    return keys, sums


DRIVER = """
import sys
from sptool.cli import cli
address, src, out = sys.argv[1:4]
try:
    cli.main(["--scheduler", address, "reduce", src, "--op", "sum", "--axis", "1", "-o", out, "-q"],
             standalone_mode=False)
except SystemExit as e:
    assert not e.code, e.code
shuffle = ["sptool.distributed.ranges", "sptool.distributed.maps", "sptool.distributed.seams"]
print(sorted(m for m in shuffle if m in sys.modules))
"""


def test_seamed_reduce_driver_does_not_import_the_shuffle(client, tmp_path, rng):
    src, idx, val = _sorted_parts(tmp_path / "in", rng)
    out = str(tmp_path / "out") + "/"
    res = subprocess.run([sys.executable, "-c", DRIVER, client.scheduler.address, src, out], capture_output=True,
                         text=True, env=env_with_sptool(), cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]", res.stdout
    keys, sums = _summed_over_axis_1(idx, val)
    got_keys, got = _read(out, 2)
    assert np.array_equal(got_keys, keys) and np.allclose(got, sums, rtol=1e-12, atol=1e-12)


@pytest.fixture
def footer_reads(monkeypatch):
    """Every footer the driver (this process) reads through sptool.io, counted by path."""
    import sptool.io.source as source

    counted, read = Counter(), source.read_part

    def counting(path):
        counted[os.path.realpath(path)] += 1
        return read(path)

    # pyarrow opens the files in C++, and the driver's reads sit among its workers': counted where made.
    monkeypatch.setattr(source, "read_part", counting)
    return counted


def test_seamed_reduce_reads_each_footer_at_most_twice(client, tmp_path, rng, footer_reads):
    src, idx, val = _sorted_parts(tmp_path / "in", rng)
    r = sptool.distributed.reduce(src, str(tmp_path / "out") + "/", op="sum", axis=1, client=client)
    assert r["strategy"] == "seams"
    keys, sums = _summed_over_axis_1(idx, val)
    got_keys, got = _read(str(tmp_path / "out"), 2)
    assert np.array_equal(got_keys, keys) and np.allclose(got, sums, rtol=1e-12, atol=1e-12)
    inputs = {os.path.realpath(os.path.join(src, n)) for n in os.listdir(src)}
    assert inputs <= set(footer_reads) and max(footer_reads[p] for p in inputs) <= 2, footer_reads


def test_add_reads_each_footer_at_most_twice(client, tmp_path, rng, footer_reads):
    a, ia, va = _sorted_parts(tmp_path / "a", rng, values="int")
    b, ib, vb = _sorted_parts(tmp_path / "b", rng, parts=3, values="int")
    sptool.distributed.add(a, b, str(tmp_path / "out") + "/", client=client)
    dense = np.zeros(SHAPE, dtype=np.int64)
    np.add.at(dense, tuple(ia.T), va)
    np.add.at(dense, tuple(ib.T), vb)
    both = np.unique(np.concatenate([ia, ib]), axis=0)
    got_keys, got = _read(str(tmp_path / "out"), 3)
    assert np.array_equal(got_keys, both) and np.array_equal(got, dense[tuple(both.T)])
    inputs = {os.path.realpath(os.path.join(d, n)) for d in (a, b) for n in os.listdir(d)}
    assert inputs <= set(footer_reads) and max(footer_reads[p] for p in inputs) <= 2, footer_reads


def test_part_edges_read_by_a_task_per_worker(client, tmp_path, rng):
    """The seams of two operands (8 parts) are read in one round of at most one task per
    worker, and each part's first and last coordinates are what pyarrow reads there."""
    from distributed import get_task_stream

    from sptool.distributed.seams import part_edges

    a, _, _ = _sorted_parts(tmp_path / "a", rng)
    b, _, _ = _sorted_parts(tmp_path / "b", rng, parts=3)
    sources = [sptool.open(a), sptool.open(b)]
    with get_task_stream(client) as stream:
        found = part_edges(client, sources)
    tasks = [t for t in stream.data if str(t["key"]).startswith("edge_keys")]
    assert 1 <= len(tasks) <= len(client.scheduler_info(n_workers=-1)["workers"])
    for src, edges in zip(sources, found):
        assert len(edges) == len(src.parts)
        for part, (first, last) in zip(src.parts, edges):
            table = pq.read_table(part.path)
            rows = np.stack([table.column(f"indices_{k}").to_numpy() for k in range(3)], axis=1)
            assert first == tuple(rows[0]) and last == tuple(rows[-1])



def test_a_job_on_a_client_that_is_not_the_default(client, tmp_path, rng, monkeypatch):
    """A caller holding two clients runs a job on the older one, no longer Dask's default: the
    job follows its tasks on its own client's event loop.  dask's as_completed takes the default
    client's loop unless given one; with the other client's loop, the futures' events were set
    from one thread and awaited on another's loop, and a benchmark script with two clusters
    waited for ever on tasks long finished (a race: no test reproduces it on demand).  So the
    loop handed to as_completed is checked, and the job's result against NumPy."""
    import threading

    import distributed

    loops = []
    real = distributed.as_completed

    def watched(futures, **kw):
        loops.append(kw.get("loop") is futures[0].client.loop)  # the loop of the futures' own client
        return real(futures, **kw)

    monkeypatch.setattr(distributed, "as_completed", watched)
    src, idx, val = _sorted_parts(tmp_path / "in", rng)
    out = str(tmp_path / "out") + "/"
    other = distributed.Client(client.scheduler.address, set_as_default=True)
    try:
        done, default = [], []

        def run():  # a thread of its own: its default is the newest client, not the fixture's current one
            default.append(distributed.default_client())
            done.append(sptool.distributed.reduce(src, out, op="sum", axis=[1], client=client))

        job = threading.Thread(target=run, daemon=True)
        job.start()
        job.join(timeout=120)
        assert default == [other] and other.loop is not client.loop
        assert done, "the job did not finish within 120 s"
    finally:
        other.close()
    assert loops and all(loops)
    keys, sums = _read(out, 2)
    want_keys, want = _summed_over_axis_1(idx, val)
    assert np.array_equal(keys, want_keys) and np.allclose(sums, want, rtol=1e-12, atol=1e-12)
    assert done[0]["rows_out"] == len(want_keys)
