"""sptool on a Dask cluster (sptool.distributed): a 2-worker LocalCluster, tiny parts and runs,
so every op spans many pieces and key ranges.  The oracle is NumPy (a stable lexsort, sums
with np.add.at), and each result is also compared with the single-machine command's, entry by
entry and in order; the metadata compared is what the formats define for a directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from command_examples import ROOT, env_with_sptool, in_workdir
from pty_terminal import cursor_restored, run_in_terminal

import sptool
import sptool.distributed
from sptool.cli import cli

distributed = pytest.importorskip("distributed")

SAMPLES = str(ROOT / "sample_data")
SHAPE = (50, 40, 30)
TINY = {"SPTOOL_BATCH_ROWS": "97", "SPTOOL_RUN_ROWS": "211", "SPTOOL_MERGE_ROWS": "64", "SPTOOL_ROW_GROUP_ROWS": "150",
        "SPTOOL_KEEP_BYTES": "0", "SPTOOL_FAN_IN": "3"}


@pytest.fixture
def client(cluster_client):
    """The session's cluster (conftest.py), shared by every cluster test module."""
    return cluster_client


@pytest.fixture
def tiny(monkeypatch):
    """Tiny batches, runs, merge slices and row groups: read by budget_of on the driver, and
    carried to the workers in the Budget each task gets."""
    for var, value in TINY.items():
        monkeypatch.setenv(var, value)
    return "16MiB"


def _rows(rng, n, *, skew: float = 0.0, dup_pool: int | None = None):
    idx = np.stack([rng.integers(0, s, n) for s in SHAPE], axis=1)
    if dup_pool is not None:  # coordinates drawn from a small pool: many duplicates
        idx = idx[rng.integers(0, dup_pool, n)]
    if skew:
        idx[rng.random(n) < skew] = (7, 3, 11)  # one coordinate (one key range) holds most rows
    return idx


def _write_parts(path, pieces_idx, pieces_val):
    """A part directory, one part per piece (an empty piece makes an empty part)."""
    os.makedirs(path, exist_ok=True)
    for i, (idx, val) in enumerate(zip(pieces_idx, pieces_val)):
        sptool.write(sptool.SparseTensor(idx.reshape(-1, 3), val, SHAPE), os.path.join(path, f"part-{i:06d}.parquet"))
    return str(path) + "/"


def _dataset(tmp_path, rng, *, n=3000, parts=6, values="int", **kw):
    idx = _rows(rng, n, **kw)
    val = rng.integers(-50, 50, n).astype(np.int64) if values == "int" else rng.standard_normal(n)
    cuts = np.sort(rng.integers(0, n, parts - 2))
    cuts = np.r_[cuts[: parts // 2], cuts[parts // 2 - 1], cuts[parts // 2:]]  # two equal cuts: an empty part
    return _write_parts(tmp_path / "in", np.split(idx, cuts), np.split(val, cuts)), idx, val


def _read_all(path):
    """(indices, values) of a 3-D tensor as one stream, in stored order (pyarrow, not sptool)."""
    return _read_all_k(path, len(SHAPE))


def _oracle_sorted(idx, val, order):
    perm = np.lexsort([idx[:, d] for d in reversed(order)])  # stable: equal rows keep input order
    return idx[perm], val[perm]


def _oracle_summed(idx, val):
    keys, inverse = np.unique(idx, axis=0, return_inverse=True)
    sums = np.zeros(len(keys), dtype=val.dtype)
    np.add.at(sums, inverse.ravel(), val)
    return keys, sums


def _part_metas(path):
    return [sptool.open(os.path.join(path, n)).meta for n in sorted(os.listdir(path))]


def _no_leftovers(parent, keep):
    assert sorted(os.listdir(parent)) == sorted(keep), os.listdir(parent)


def _same_as_local(tmp_path, dist_out, local_out):
    """The distributed directory and the single-machine output hold the same rows in the same
    order, with the same dataset metadata."""
    di, dv = _read_all(dist_out)
    li, lv = _read_all(local_out)
    assert np.array_equal(di, li) and np.array_equal(dv, lv)
    dmeta, lmeta = sptool.open(dist_out).meta, sptool.open(local_out).meta
    for key in ("shape", "sparse_ndim", "value_type", "fill_value", "iso", "dimension_names", "nnz"):
        assert getattr(dmeta, key) == getattr(lmeta, key), key


@pytest.mark.parametrize("order", [None, (2, 0, 1)])
@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_reorder_keep_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, order, kind):
    src, idx, val = _dataset(tmp_path, rng, skew=0.8 if kind == "skewed" else 0.0)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reorder(src, out, perm=order, memory=tiny, client=client)
    want_order = order or (0, 1, 2)
    oi, ov = _oracle_sorted(idx, val, want_order)
    gi, gv = _read_all(out)
    assert np.array_equal(gi, oi) and np.array_equal(gv, ov)
    local = str(tmp_path / "local.parquet")
    sptool.reorder(src, local, perm=order, memory=tiny)
    _same_as_local(tmp_path, out, local)
    metas = _part_metas(out)
    assert r["parts"] == len(metas) > 1 and r["rows_out"] == len(idx) and r["workers"] == 2
    assert all(m.sort_order == want_order for m in metas)
    assert r["sort_order"] == list(want_order) and not r["unique"]  # the data holds repeats
    _no_leftovers(tmp_path, ["in", "out", "local.parquet"])


@pytest.mark.parametrize("policy", ["sum", "first", "last", "max"])
def test_reorder_duplicates_matches_one_machine(client, tiny, tmp_path, rng, policy):
    src, idx, val = _dataset(tmp_path, rng, dup_pool=300, skew=0.3)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reorder(src, out, duplicates=policy, memory=tiny, client=client)
    local = str(tmp_path / "local.parquet")
    sptool.reorder(src, local, duplicates=policy, memory=tiny)
    _same_as_local(tmp_path, out, local)
    gi, gv = _read_all(out)
    keys, sums = _oracle_summed(idx, val)
    assert np.array_equal(gi, keys)
    if policy == "sum":
        assert np.array_equal(gv, sums)
    elif policy in ("first", "last"):
        si, sv = _oracle_sorted(idx, val, (0, 1, 2))
        starts = np.r_[0, np.flatnonzero(np.any(np.diff(si, axis=0), axis=1)) + 1]
        ends = np.r_[starts[1:], len(si)] - 1
        assert np.array_equal(gv, sv[starts] if policy == "first" else sv[ends])
    assert r["canonical"] and all(m.unique and m.canonical for m in _part_metas(out))


def test_reorder_of_one_file_split_by_row_group(client, tiny, tmp_path, rng):
    idx = _rows(rng, 2500)
    val = rng.standard_normal(2500)
    src = str(tmp_path / "one.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), src, batch_rows=100)
    assert pq.ParquetFile(src).metadata.num_row_groups > 4
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reorder(src, out, perm=(1, 2, 0), memory=tiny, client=client)
    oi, ov = _oracle_sorted(idx, val, (1, 2, 0))
    gi, gv = _read_all(out)
    assert np.array_equal(gi, oi) and np.array_equal(gv, ov)
    assert r["parts"] > 1


def test_reorder_of_an_arrow_stream_file(client, tiny, tmp_path, rng):
    idx, val = _rows(rng, 1500), rng.standard_normal(1500)
    src = str(tmp_path / "in.arrows")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), src)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reorder(src, out, perm=(2, 1, 0), memory=tiny, client=client)
    oi, ov = _oracle_sorted(idx, val, (2, 1, 0))
    gi, gv = _read_all(out)
    assert np.array_equal(gi, oi) and np.array_equal(gv, ov) and r["parts"] > 1
    _no_leftovers(tmp_path, ["in.arrows", "out"])
    with pytest.raises(sptool.UsageError, match="not stdin"):
        sptool.distributed.reorder("-", str(tmp_path / "o2") + "/", client=client)
    with pytest.raises(sptool.UsageError, match="not a SparseTensor"):
        sptool.distributed.reorder(sptool.SparseTensor(idx, val, SHAPE), str(tmp_path / "o2") + "/", client=client)


def test_reorder_with_keys_wider_than_64_bits(client, tiny, tmp_path, rng):
    """Extents whose bit widths add up past 64: the keys are big-endian bytes, not packed."""
    shape = ((1 << 21) + 1, (1 << 21) + 1, (1 << 20) + 1)  # 22 + 22 + 21 bits
    idx = np.stack([rng.integers(0, 30, 1200) << 16, rng.integers(0, shape[1], 1200), rng.integers(0, 9, 1200)],
                   axis=1)
    val = rng.standard_normal(1200)
    os.makedirs(tmp_path / "in")
    for i, part in enumerate(np.array_split(np.arange(1200), 4)):
        sptool.write(sptool.SparseTensor(idx[part], val[part], shape), str(tmp_path / "in" / f"part-{i:06d}.parquet"))
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reorder(str(tmp_path / "in"), out, memory=tiny, client=client)
    oi, ov = _oracle_sorted(idx, val, (0, 1, 2))
    gi, gv = _read_all(out)
    assert np.array_equal(gi, oi) and np.array_equal(gv, ov) and r["parts"] > 1


def test_reorder_of_an_empty_tensor(client, tiny, tmp_path):
    src = _write_parts(tmp_path / "in", [np.empty((0, 3), np.int64)] * 2, [np.empty(0)] * 2)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reorder(src, out, memory=tiny, client=client)
    assert r["rows_out"] == 0 and os.listdir(out) == ["part-000000.parquet"]
    assert sptool.open(out).meta.shape == SHAPE and sptool.open(out).meta.nnz == 0


def test_bad_part_fails_and_leaves_nothing(client, tiny, tmp_path, rng):
    src, idx, val = _dataset(tmp_path, rng)
    bad = os.path.join(src, "part-000001.parquet")
    file = pq.ParquetFile(bad)
    table = file.read()
    cols = table.column("indices_1").to_numpy().copy()
    cols[5] = SHAPE[1] + 4  # outside the shape
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}  # still an sptool tensor
    pq.write_table(table.set_column(1, "indices_1", pa.array(cols)).replace_schema_metadata(kept), bad)
    out = str(tmp_path / "out") + "/"
    with pytest.raises(sptool.DataError) as failed:
        sptool.distributed.reorder(src, out, memory=tiny, client=client)
    _no_leftovers(tmp_path, ["in"])
    # The operand and the row counted from its start (pyarrow: the rows of part 0 before it), as
    # the single machine says it.
    row = pq.ParquetFile(os.path.join(src, "part-000000.parquet")).metadata.num_rows + 5
    assert f"indices[{row}] = " in str(failed.value) and failed.value.path == src
    with pytest.raises(sptool.DataError) as local:
        sptool.reorder(src, str(tmp_path / "local.parquet"), memory=tiny)
    assert str(failed.value) == str(local.value)


def reorder_killing_a_worker(client, src, out, **kw) -> None:
    """``sptool.distributed.reorder(src, out, **kw)`` with one worker SIGKILLed while the job
    shuffles (its partitioned pieces are lost with it and must be made again); its error, if
    any, raised here, once the nanny has restarted the worker for later tests."""
    pids = list(client.run(os.getpid).values())
    error = []

    def job():
        try:
            sptool.distributed.reorder(src, out, client=client, **kw)
        except BaseException as e:  # noqa: BLE001 - raised below
            error.append(e)

    thread = threading.Thread(target=job)
    thread.start()
    deadline = time.monotonic() + 60
    while not any("partition" in str(k) for keys in client.processing().values() for k in keys) \
            and time.monotonic() < deadline:
        time.sleep(0.005)
    assert thread.is_alive(), "the job ended before the worker could be killed"
    os.kill(pids[0], signal.SIGKILL)
    thread.join(180)
    client.wait_for_workers(2, timeout=60)
    assert not error, error


def test_worker_killed_during_reorder(client, tiny, tmp_path, rng):
    src, idx, val = _dataset(tmp_path, rng, n=40_000, parts=8, dup_pool=5000)
    out = str(tmp_path / "out") + "/"
    reorder_killing_a_worker(client, src, out, duplicates="sum", memory=tiny)
    keys, sums = _oracle_summed(idx, val)
    gi, gv = _read_all(out)
    assert np.array_equal(gi, keys) and np.array_equal(gv, sums)
    _no_leftovers(tmp_path, ["in", "out"])


def _oracle_reduced(idx, val, axes, keepdims, fn):
    """NumPy: duplicates summed first (the format's logical tensor), then ``fn`` (a ufunc) over
    ``axes`` per kept coordinate, in input order within each group."""
    keys, vals = _oracle_summed(idx, val)
    kept = [d for d in range(3) if d not in axes]
    groups = keys.copy()
    groups[:, axes] = 0
    groups = groups if keepdims else keys[:, kept]
    out_keys, inverse = np.unique(groups, axis=0, return_inverse=True)
    if fn.identity is None:
        out = np.array([fn.reduce(vals[inverse.ravel() == g]) for g in range(len(out_keys))], dtype=vals.dtype)
    else:
        out = np.full(len(out_keys), fn.identity, dtype=vals.dtype)
        fn.at(out, inverse.ravel(), vals)
    return out_keys, out


@pytest.mark.parametrize("op,axis,keepdims,values", [
    ("sum", 1, False, "int"), ("sum", [0, 2], True, "float"), ("sum", 2, False, "float"), ("max", 1, False, "float"),
    ("count", [0, 1], False, "int"),
])
def test_reduce_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, op, axis, keepdims, values):
    src, idx, val = _dataset(tmp_path, rng, skew=0.4, values=values, dup_pool=800)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reduce(src, out, op=op, axis=axis, keepdims=keepdims, memory=tiny, client=client)
    local = str(tmp_path / "local.parquet")
    sptool.reduce(src, local, op=op, axis=axis, keepdims=keepdims, memory=tiny)
    axes = [axis] if isinstance(axis, int) else axis
    K = 3 if keepdims else 3 - len(axes)
    di, dv = _read_all_k(out, K)
    li, lv = _read_all_k(local, K)
    assert np.array_equal(di, li) and np.array_equal(dv, lv)  # floats too: the same sums in the same order
    if op == "count":
        keys, _ = _oracle_summed(idx, val)
        kept = [d for d in range(3) if d not in axes]
        want_keys, want = np.unique(keys[:, kept], axis=0, return_counts=True)
    else:
        want_keys, want = _oracle_reduced(idx, val, axes, keepdims, np.add if op == "sum" else np.maximum)
    assert np.array_equal(di, want_keys)
    assert np.array_equal(dv, want) if values == "int" else np.allclose(dv, want, rtol=1e-12, atol=1e-12)
    assert r["rows_out"] == len(want_keys) and r["axes"] == sorted(axes) and r["parts"] > 1
    dmeta, lmeta = sptool.open(out).meta, sptool.open(local).meta
    assert (dmeta.shape, dmeta.value_type, dmeta.fill_value) == (lmeta.shape, lmeta.value_type, lmeta.fill_value)


def test_reduce_to_a_scalar_is_refused_on_a_cluster(client, tmp_path, rng):
    src, _, _ = _dataset(tmp_path, rng)
    with pytest.raises(sptool.UsageError, match="keep a sparse dimension"):
        sptool.distributed.reduce(src, str(tmp_path / "out") + "/", op="sum", axis=[0, 1, 2], client=client)
    _no_leftovers(tmp_path, ["in"])


@pytest.mark.parametrize("values,thresh", [("int", 0), ("float", 0), ("float", 0.8)])
def test_add_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, values, thresh):
    a, ia, va = _dataset(tmp_path / "a", rng, values=values, dup_pool=400)
    b, ib, vb = _dataset(tmp_path / "b", rng, n=2000, parts=4, values=values, skew=0.5)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.add(a, b, out, thresh=thresh, memory=tiny, client=client)
    local = str(tmp_path / "local.parquet")
    sptool.add(a, b, local, thresh=thresh, memory=tiny)
    _same_as_local(tmp_path, out, local)
    ka, sa = _oracle_summed(ia, va)
    kb, sb = _oracle_summed(ib, vb)
    keys, sums = _oracle_summed(np.concatenate([ka, kb]), np.concatenate([sa, sb]))  # A's sum + B's sum
    both = np.isin(_flat(keys), _flat(ka)) & np.isin(_flat(keys), _flat(kb))
    kept = ~(both & (np.abs(sums) < thresh))  # TensorFlow's thresh: two-sided sums only
    di, dv = _read_all(out)
    assert np.array_equal(di, keys[kept])
    # Exactly the single-machine sums (above); NumPy may group a float sum of duplicates differently.
    assert np.array_equal(dv, sums[kept]) if values == "int" else np.allclose(dv, sums[kept], rtol=1e-12, atol=0)
    assert r["rows_out"] == kept.sum() and r["dropped"] == (~kept).sum() and r["parts"] > 1


def _flat(keys):
    return np.ravel_multi_index(keys.T, SHAPE)


def test_add_refuses_what_does_not_split(client, tmp_path, rng):
    a, _, _ = _dataset(tmp_path, rng)
    with pytest.raises(sptool.UsageError, match="on a cluster, add"):
        sptool.distributed.add(a, scalar=2, output=str(tmp_path / "out") + "/", client=client)


def _unique_copy(path, idx, val):
    """The first row of each coordinate, as a one-part tensor."""
    _, first = np.unique(idx, axis=0, return_index=True)
    first = np.sort(first)
    return _write_parts(path, [idx[first]], [val[first]]), idx[first], val[first]


def _read_all_k(path, K):
    files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".parquet")) \
        if os.path.isdir(path) else [path]
    table = pa.concat_tables([pq.read_table(f) for f in files])
    return (np.stack([table.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1).reshape(-1, K),
            table.column("values").to_numpy())


# -- the command line ---------------------------------------------------------------------------

def test_cli_reorder_on_the_scheduler(client, tiny, tmp_path, rng):
    src, idx, val = _dataset(tmp_path, rng)
    out = str(tmp_path / "out") + "/"
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "reorder", src, "-o", out,
                                   "--duplicates", "sum", "--memory", tiny])
    assert res.exit_code == 0, res.output
    assert "2 workers" in res.output and "peak worker memory" in res.output
    keys, sums = _oracle_summed(idx, val)
    gi, gv = _read_all(out)
    assert np.array_equal(gi, keys) and np.array_equal(gv, sums)
    # The summary counts the rows read, as one machine's does, not the (fewer) rows written.
    assert len(keys) < len(idx) and f"({len(idx):,} rows), wrote {out} (" in res.output, res.output
    assert f"nnz {len(keys):,})" in res.output, res.output


def test_cli_summaries_on_the_scheduler_count_the_rows_read(client, tiny, tmp_path, rng):
    """The summary's rows in and out on a cluster are one machine's: the rows of the inputs
    (pyarrow's count of them) and of the output, whether ranges are shuffled (reorder of
    unsorted parts, duplicates summed) or read where they stand (add of sorted operands)."""
    src, _, _ = _dataset(tmp_path / "u", rng)
    (a, _, _), (b, _, _) = _unique_parts(tmp_path / "a", rng), _unique_parts(tmp_path / "b", rng)
    for args, inputs in ((["reorder", src, "--duplicates", "sum"], [src]), (["add", a, b], [a, b])):
        summaries = []
        for where, extra in (("cluster", ["--scheduler", client.scheduler.address]), ("local", [])):
            out = str(tmp_path / f"{args[0]}-{where}") + ("/" if where == "cluster" else ".parquet")
            doc = tmp_path / f"{args[0]}-{where}.json"
            res = CliRunner().invoke(cli, [*extra, "--json-summary", str(doc), *args, "-o", out, "--memory", tiny])
            assert res.exit_code == 0, res.output
            summaries.append(json.loads(doc.read_text()))
        read = sum(pq.ParquetDataset(p).read().num_rows for p in inputs)
        on_cluster, local = summaries
        assert on_cluster["rows_in"] == local["rows_in"] == read, (args[0], summaries)
        assert on_cluster["rows_out"] == local["rows_out"] < read

def test_cli_scheduler_from_the_environment(client, tiny, tmp_path, rng, monkeypatch):
    src, idx, val = _dataset(tmp_path, rng)
    monkeypatch.setenv("SPTOOL_SCHEDULER", client.scheduler.address)
    res = CliRunner().invoke(cli, ["reorder", src, "-o", str(tmp_path / "out") + "/", "-m", tiny])
    assert res.exit_code == 0, res.output
    assert np.array_equal(_read_all(str(tmp_path / "out"))[0], _oracle_sorted(idx, val, (0, 1, 2))[0])


def test_cli_refusals(client, tmp_path):
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "softmax",
                                   f"{SAMPLES}/tensor3d.parquet", "-o", str(tmp_path / "t.parquet")])
    assert res.exit_code == 2 and "does not run on a cluster" in res.output
    assert not os.path.exists(tmp_path / "t.parquet")
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "reorder",
                                   f"{SAMPLES}/unsorted.parquet", "-o", str(tmp_path / "t.parquet")])
    assert res.exit_code == 2 and "directory of parts" in res.output
    res = CliRunner().invoke(cli, ["--scheduler", "nonsense", "reorder", f"{SAMPLES}/unsorted.parquet", "-o",
                                   str(tmp_path / "d/")])
    assert res.exit_code == 2 and "tcp://HOST:PORT" in res.output
    assert "Cluster: runs on one machine only" in CliRunner().invoke(cli, ["softmax", "--help"]).output
    assert "Cluster: given --scheduler" in CliRunner().invoke(cli, ["reorder", "--help"]).output



@pytest.mark.parametrize("args,message,code", [
    (["reorder", f"{SAMPLES}/unsorted.parquet", "-o", "OUT"], "cannot tell the output format", 2),
    (["reduce", "MISSING", "--op", "sum", "--axis", "1", "-o", "OUT/"], "no such file or directory", 2),
    (["add", f"{SAMPLES}/tensor3d.parquet", f"{SAMPLES}/tensor3d.parquet", "-o", "OUT.parquet"], "directory of parts",
     2),
    (["add", "MISSING", f"{SAMPLES}/tensor3d.parquet", "-o", "OUT/"], "no such file or directory", 2),
    (["add", f"{SAMPLES}/tensor3d.parquet", f"{SAMPLES}/matrix_a.parquet", "-o", "OUT/"], "shapes differ", 1),
])
def test_cli_checks_its_arguments_before_connecting(tmp_path, args, message, code):
    """A bad output name or a missing input is reported before the command connects: the
    scheduler named here refuses connections (port 1), so a command that connected first
    reported that instead (after Dask's 20 s connect timeout)."""
    args = [a.replace("OUT", str(tmp_path / "out")).replace("MISSING", str(tmp_path / "missing.parquet"))
            for a in args]
    res = CliRunner().invoke(cli, ["--scheduler", "tcp://127.0.0.1:1", *args])
    assert res.exit_code == code, res.output  # as on one machine: 1 for the data, 2 for usage
    assert message in res.output and "scheduler" not in res.output
    assert os.listdir(tmp_path) == []


def test_cli_validate_stops_at_an_unreachable_scheduler(tmp_path, rng, monkeypatch):
    """A scheduler that does not answer fails the job once, in one line, instead of marking
    every tensor of a validate UNREADABLE and trying to connect again for each (a port nothing
    listens on, and a connect timeout of 2 s instead of 20)."""
    import time

    monkeypatch.setenv("SPTOOL_CONNECT_TIMEOUT", "2s")
    a, _, _ = _dataset(tmp_path / "a", rng)
    b, _, _ = _dataset(tmp_path / "b", rng)
    started = time.monotonic()
    res = CliRunner().invoke(cli, ["--scheduler", "tcp://127.0.0.1:1", "validate", a, b])
    assert res.exit_code == 2, res.output
    assert time.monotonic() - started < 2 * 2  # one connect timeout, not one a tensor
    assert res.output.count("cannot reach the scheduler tcp://127.0.0.1:1") == 1, res.output
    assert "UNREADABLE" not in res.output, res.output

def test_docs_cluster_example_on_a_local_cluster_in_a_terminal(tmp_path):
    """docs/clusters.md's two commands: the first starts a scheduler and workers; the second, run as
    written but with --scheduler local:2 (a cluster it starts and stops itself, the one CLI test
    that does) under a pseudo-terminal: the bar drawn and taken down, the dashboard link and the
    summary line printed, and the rows NumPy's sums."""
    page = (ROOT / "docs" / "clusters.md").read_text()
    block = re.search(r"## Commands on a Dask cluster.*?```bash\n(.*?)```", page, re.S).group(1)
    start, job = block.strip().splitlines()
    assert start.startswith("dask scheduler --port 8786 & dask worker tcp://127.0.0.1:8786")
    assert "--scheduler tcp://127.0.0.1:8786 " in job
    argv = shlex.split(in_workdir(job, tmp_path).replace("tcp://127.0.0.1:8786", "local:2"))
    code, output = run_in_terminal(argv, cwd=tmp_path, timeout=120)
    text = output.decode("utf-8", "replace")
    assert code == 0, text
    assert cursor_restored(output), text
    assert "Dask dashboard: http" in text and "2 workers" in text and "peak worker memory" in text, text
    assert "Traceback" not in text and "Error" not in text and "Warning" not in text, text
    table = sptool.read(f"{SAMPLES}/unsorted.parquet")
    keys, sums = _oracle_summed(table.indices, table.values)
    got = sptool.read(str(tmp_path / "sorted"))
    assert np.array_equal(got.indices, keys) and np.allclose(got.values, sums, rtol=1e-12, atol=0)


def _loaded(modules):
    return [m in sys.modules for m in modules]


def test_local_cluster_workers_preload_what_tasks_import():
    """The workers of --scheduler local:N run sptool's preload (dask_setup, as `dask worker
    --preload sptool.distributed.cluster` does) before any task: sptool's task modules, and
    pandas (which pyarrow's to_numpy would otherwise import in a worker's first task), are in
    each worker's sys.modules when it starts."""
    import importlib.util

    from sptool.distributed.cluster import PRELOAD

    want = [m for m in PRELOAD if importlib.util.find_spec(m.split(".")[0]) is not None]
    assert "pandas" in want or importlib.util.find_spec("pandas") is None
    with sptool.distributed.connect("local:1") as c:
        assert list(c.run(_loaded, want).values()) == [[True] * len(want)]


KILLED_TWICE = """
import os, signal, sys, time
import sptool.distributed

def kill_and_wait(client):
    # A new pid from client.run, not wait_for_workers: the scheduler lists a killed worker as
    # running for a moment, and a loaded machine takes seconds to start the new one.
    old = next(iter(client.run(os.getpid).values()))
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            pids = list(client.run(os.getpid).values())
        except Exception:
            pids = []
        if pids and pids[0] != old:
            return
        time.sleep(0.05)
    sys.exit("the killed worker was not restarted within 60 s")

with sptool.distributed.connect("local:1") as client:
    import dask
    assert dask.config.get("distributed.deploy.lost-worker-timeout") == "1h"  # whatever the timing below
    first = time.monotonic()
    kill_and_wait(client)
    # The first death's timer fires about LOST seconds after it: the second death is timed to be
    # restarting then (if the first restart took longer, the kill comes at once: no race to lose).
    time.sleep(max(0.0, first + float(sys.argv[1]) - 0.4 - time.monotonic()))
    kill_and_wait(client)
"""


def test_local_cluster_keeps_a_worker_killed_twice():
    """A worker of --scheduler local:N killed a second time just before the cluster's
    'lost-worker-timeout' after its first death is restarted, not closed for good (the cause of
    a CI run's 58 failures: one kill test 15 s after another left the session's cluster with one
    worker).  The timeout is 3 s here instead of 15 so the test takes seconds; on Dask's own
    settings (sptool.distributed.cluster without keep_restarted_workers) the second kill loses
    the worker."""
    env = dict(env_with_sptool(), DASK_DISTRIBUTED__DEPLOY__LOST_WORKER_TIMEOUT="3s")
    res = subprocess.run([sys.executable, "-c", KILLED_TWICE, "3"], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]


# -- Dask stays out unless asked for ---------------------------------------------------------------

NO_DASK = """
import sys
import sptool
import sptool.distributed
from sptool.cli import cli
out = sys.argv[1]
sptool.reorder("sample_data/unsorted.parquet", out + "/a.parquet")
for args in (["reorder", "sample_data/unsorted.parquet", "-o", out + "/b.parquet"], ["info", out + "/b.parquet"],
             ["--help"]):
    try:
        cli.main(args, standalone_mode=False)
    except SystemExit:
        pass
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))
assert not loaded, loaded
"""


def test_no_dask_import_without_a_scheduler(tmp_path):
    res = subprocess.run([sys.executable, "-c", NO_DASK, str(tmp_path)], capture_output=True, text=True,
                         env=env_with_sptool(), cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr


def test_scheduler_without_distributed_says_how_to_install(tmp_path):
    blocked = ("import sys; sys.modules['distributed'] = None\n"
               "from sptool.cli import main; main(sys.argv[1:])")
    res = subprocess.run([sys.executable, "-c", blocked, "--scheduler", "local:2", "reorder",
                          f"{SAMPLES}/unsorted.parquet", "-o", str(tmp_path / "o/")],
                         capture_output=True, text=True, env=env_with_sptool(), cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert 'pip install "sptool[dask]"' in res.stderr
    assert not os.path.exists(tmp_path / "o")


# -- validate: the parts of a directory checked in parallel, the checks across parts on the driver --

def _canonical_part(path, rng, n, shape=SHAPE):
    idx = np.unique(np.stack([rng.integers(0, s, n) for s in shape], axis=1), axis=0)
    sptool.write(sptool.SparseTensor(idx, rng.integers(-9, 9, len(idx)).astype(np.int64), shape), path)
    return idx


def _shuffled_copy(src, dst, perm):
    """``src``'s rows in the order ``perm``, its sptool metadata (claiming the order) kept."""
    file = pq.ParquetFile(src)
    table = file.read().take(perm)
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    pq.write_table(table.replace_schema_metadata(kept), dst)


def _first_out_of_order(idx):
    """The first row whose coordinate is below the previous one's (row-major), by NumPy."""
    d = np.diff(idx, axis=0)
    first_nonzero = np.argmax(d != 0, axis=1)
    below = d[np.arange(len(d)), first_nonzero] < 0
    return int(np.flatnonzero(below)[0]) + 1


@pytest.fixture
def broken_dir(tmp_path, rng):
    """A directory with one problem of each group: a part whose rows break its sort_order, a part
    of another shape, a text file named as a part, a part named off the pattern, a stray file,
    an empty part, and good parts around them."""
    d = tmp_path / "ds"
    d.mkdir()
    _canonical_part(str(d / "part-000000.parquet"), rng, 400)
    good = _canonical_part(str(tmp_path / "good.parquet"), rng, 300)
    perm = rng.permutation(len(good))
    _shuffled_copy(str(tmp_path / "good.parquet"), str(d / "part-000001.parquet"), perm)
    _canonical_part(str(d / "part-000002.parquet"), rng, 200, shape=(60, 40, 30))
    (d / "part-000003.parquet").write_text("not parquet\n")
    sptool.write(sptool.SparseTensor(np.empty((0, 3), np.int64), np.empty(0, np.int64), SHAPE),
                 str(d / "part-000004.parquet"))
    _canonical_part(str(d / "part-7.parquet"), rng, 100)
    (d / "notes.txt").write_text("stray\n")
    return str(d) + "/", good[perm]


@pytest.mark.parametrize("mode", [{}, {"metadata_only": True}, {"deep": True}])
def test_validate_on_a_cluster_equals_one_machine(client, broken_dir, mode):
    path, shuffled = broken_dir
    local = sptool.validate(path, memory="16MiB", **mode).as_dict()
    dist = sptool.distributed.validate(path, memory="16MiB", client=client, **mode).as_dict()
    assert dist == local
    codes = [c["code"] for c in dist["checks"]]
    for code in ("W_STRAY_FILE", "E_PART_METADATA_MISMATCH", "E_NOT_PARQUET", "W_PART_NAME"):
        assert code in codes, codes
    # nnz: the rows of the parts that passed their fatal checks, counted by pyarrow.
    readable = [n for n in os.listdir(path) if n.endswith(".parquet") and n != "part-000003.parquet"]
    assert dist["nnz"] == sum(pq.ParquetFile(os.path.join(path, n)).metadata.num_rows for n in readable)
    if not mode.get("metadata_only"):
        (bad,) = [c for c in dist["checks"] if c["code"] == "E_NOT_SORTED"]
        row = _first_out_of_order(shuffled)
        assert bad["location"]["part"] == "part-000001.parquet" and bad["location"]["row"] == row
        assert bad["location"]["index"] == shuffled[row].tolist()


def test_validate_of_a_valid_directory_on_a_cluster(client, tmp_path, rng):
    d = tmp_path / "ok"
    d.mkdir()
    n = [_canonical_part(str(d / f"part-{i:06d}.parquet"), rng, 150).shape[0] for i in range(5)]
    dist = sptool.distributed.validate(str(d) + "/", client=client)
    assert dist.as_dict() == sptool.validate(str(d) + "/").as_dict()
    assert dist.valid and dist.nnz == sum(n)


def test_cli_validate_on_the_scheduler(client, broken_dir):
    path, _ = broken_dir
    args = ["validate", path, "--json", "--memory", "16MiB"]
    local = CliRunner().invoke(cli, args)
    dist = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, *args])
    assert dist.exit_code == local.exit_code == 1, dist.output
    assert json.loads(dist.output) == json.loads(local.output)
    text = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "validate", path])
    assert text.exit_code == 1 and "INVALID" in text.output and "Traceback" not in text.output


# -- info: footers read in parallel ------------------------------------------------------------

@pytest.mark.parametrize("scan", [False, True])
def test_info_on_a_cluster_equals_one_machine(client, tiny, tmp_path, rng, scan):
    src, idx, val = _dataset(tmp_path, rng)
    local = sptool.info(src, scan=scan, histogram=1 if scan else None, memory=tiny)
    dist = sptool.distributed.info(src, scan=scan, histogram=1 if scan else None, memory=tiny, client=client)
    assert dist == local
    assert dist["nnz"] == len(idx) and dist["parts"] == 6
    assert dist["min_index"] == idx.min(axis=0).tolist() and dist["max_index"] == idx.max(axis=0).tolist()
    if scan:
        assert dist["histogram"]["max"] == np.bincount(idx[:, 1], minlength=SHAPE[1]).max()


def test_info_on_a_cluster_refuses_a_bad_part(client, tmp_path, rng):
    d = tmp_path / "ds"
    d.mkdir()
    _canonical_part(str(d / "part-000000.parquet"), rng, 100)
    _canonical_part(str(d / "part-000001.parquet"), rng, 100, shape=(60, 40, 30))
    args = ["info", str(d) + "/"]
    local = CliRunner().invoke(cli, args)
    dist = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, *args])
    assert dist.exit_code == local.exit_code != 0
    assert dist.output.endswith(local.output) and "E_PART_METADATA_MISMATCH" in dist.output
    (d / "part-000002.parquet").write_text("text\n")
    dist = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, *args])
    assert dist.exit_code == 2 and "part-000002.parquet" in dist.output and "Traceback" not in dist.output


def test_cli_info_on_the_scheduler(client, tiny, tmp_path, rng):
    src, idx, _ = _dataset(tmp_path, rng)
    args = ["info", src, "--json"]
    local = CliRunner().invoke(cli, args)
    dist = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, *args])
    assert dist.exit_code == local.exit_code == 0, dist.output
    assert json.loads(dist.output) == json.loads(local.output)
    assert json.loads(dist.output)["nnz"] == len(idx)


# -- concat: ranges of the dimensions before the axis ------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, axis):
    a, ai, av = _dataset(tmp_path / "a", rng, skew=0.5)
    b, bi, bv = _dataset(tmp_path / "b", rng, n=2000, dup_pool=300)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.concat([a, b], out, axis=axis, memory=tiny, client=client)
    shifted = bi.copy()
    shifted[:, axis] += SHAPE[axis]
    oi, ov = _oracle_sorted(np.concatenate([ai, shifted]), np.concatenate([av, bv]), (0, 1, 2))
    shape = list(SHAPE)
    shape[axis] *= 2
    gi, gv = _read_all_k(out, 3)
    assert np.array_equal(gi, oi) and np.array_equal(gv, ov)
    local = str(tmp_path / "local.parquet")
    sptool.concat([a, b], local, axis=axis, memory=tiny)
    li, lv = _read_all_k(local, 3)
    assert np.array_equal(gi, li) and np.array_equal(gv, lv)
    assert sptool.open(out).meta.shape == sptool.open(local).meta.shape == tuple(shape)
    assert r["rows_out"] == len(oi) and (r["parts"] == 1 if axis == 0 else r["parts"] > 1)


def test_concat_of_unique_inputs_stays_unique_on_a_cluster(client, tiny, tmp_path, rng):
    d = tmp_path / "u"
    d.mkdir()
    ai = _canonical_part(str(d / "a.parquet"), rng, 500)
    bi = _canonical_part(str(d / "b.parquet"), rng, 500)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.concat([str(d / "a.parquet"), str(d / "b.parquet")], out, axis=2, memory=tiny,
                                  client=client)
    assert r["unique"] and r["canonical"] and all(m.unique for m in _part_metas(out))
    shifted = bi.copy()
    shifted[:, 2] += SHAPE[2]
    both = np.concatenate([ai, shifted])
    assert np.array_equal(_read_all_k(out, 3)[0], both[np.lexsort(both.T[::-1])])


# -- reduce by partials: order-free reductions reduced per piece, the partials combined ----------

def _unique_parts(tmp_path, rng, n=4000, parts=6, *, seam_repeat=False, values="int"):
    """A canonical tensor cut into parts of consecutive rows (each canonical on its own); with
    ``seam_repeat`` the first row of part 3 repeats the last row of part 2 (each part is still
    unique, the dataset is not)."""
    idx = np.unique(_rows(rng, n), axis=0)
    val = rng.integers(-2**62, 2**62, len(idx)).astype(np.int64) if values == "int" else \
        rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))  # int: products and sums wrap
    cuts = np.linspace(0, len(idx), parts + 1).astype(int)[1:-1]
    pieces_idx, pieces_val = np.split(idx, cuts), np.split(val, cuts)
    if seam_repeat:
        pieces_idx[3] = np.concatenate([pieces_idx[2][-1:], pieces_idx[3]])
        pieces_val[3] = np.concatenate([pieces_val[2][-1:], pieces_val[3]])
    path = _write_parts(tmp_path / "in", pieces_idx, pieces_val)
    return path, np.concatenate(pieces_idx), np.concatenate(pieces_val)


@pytest.mark.parametrize("op,ufunc", [("sum", np.add), ("prod", np.multiply), ("max", np.maximum),
                                      ("min", np.minimum), ("count", None)])
@pytest.mark.parametrize("seam_repeat", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_by_partials_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, op, ufunc, seam_repeat,
                                                         axis):
    src, idx, val = _unique_parts(tmp_path, rng, seam_repeat=seam_repeat)
    assert all(m.unique for m in _part_metas(src))
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reduce(src, out, op=op, axis=axis, memory=tiny, client=client)
    # The directory is sorted on dimension 0: kept (axis 1), its pieces are reduced where they
    # stand, whatever the op.  Reduced (axis 0): sum splits into partials always, the others
    # only when the seams show no coordinate on two parts, and otherwise the rows are shuffled.
    partials = "partials" if op == "sum" or not seam_repeat else "ranges"
    assert r["strategy"] == ("seams" if axis == 1 else partials)
    local = str(tmp_path / "local.parquet")
    sptool.reduce(src, local, op=op, axis=axis, memory=tiny)
    di, dv = _read_all_k(out, 2)
    li, lv = _read_all_k(local, 2)
    assert np.array_equal(di, li) and np.array_equal(dv, lv)
    keys, summed = _oracle_summed(idx, val)  # the logical tensor: duplicates summed first
    kept = [d for d in range(3) if d != axis]
    if op == "count":
        want_keys, want = np.unique(keys[:, kept], axis=0, return_counts=True)
    else:
        want_keys, want = _oracle_reduced(keys, summed, [axis], False, ufunc)
    assert np.array_equal(di, want_keys) and np.array_equal(dv, want)
    assert r["rows_in"] == len(idx) and r["rows_out"] == len(want_keys) and r["workers"] == 2


def test_reduce_integer_sum_of_repeats_by_partials(client, tiny, tmp_path, rng):
    """A sum of integers splits whatever the duplicates (they add up across pieces); a max of
    the same rows does not (it needs each coordinate's duplicates summed first)."""
    src, idx, val = _dataset(tmp_path, rng, dup_pool=500, skew=0.3)
    for op, strategy in (("sum", "partials"), ("max", "ranges")):
        out = str(tmp_path / f"out-{op}") + "/"
        r = sptool.distributed.reduce(src, out, op=op, axis=[0, 2], keepdims=True, memory=tiny, client=client)
        assert r["strategy"] == strategy
        local = str(tmp_path / f"local-{op}.parquet")
        sptool.reduce(src, local, op=op, axis=[0, 2], keepdims=True, memory=tiny)
        assert all(np.array_equal(a, b) for a, b in zip(_read_all_k(out, 3), _read_all_k(local, 3)))
    keys, summed = _oracle_reduced(idx, val, [0, 2], True, np.add)
    assert np.array_equal(_read_all_k(str(tmp_path / "out-sum"), 3)[1], summed)


# -- seams: the dataset view's order and uniqueness, so a sorted input is not sorted again -------

@pytest.mark.parametrize("layout", ["sorted", "seam_repeat", "overlap"])
def test_dataset_claims_from_the_seams(client, tmp_path, rng, layout):
    """The whole's claims as the driver (and one machine) derive them, and as the parts' edges
    read on the cluster give them, are NumPy's."""
    from sptool.distributed.seams import part_edges
    from sptool.format import dataset_claims

    src, idx, _ = _unique_parts(tmp_path, rng, seam_repeat=layout == "seam_repeat")
    if layout == "overlap":  # the first part written again as the last: out of order at that seam
        os.link(os.path.join(src, "part-000000.parquet"), os.path.join(src, "part-000009.parquet"))
        idx = np.concatenate([idx, _read_all_k(os.path.join(src, "part-000000.parquet"), 3)[0]])
    with sptool.open(src) as opened:
        meta = opened.meta
        on_cluster = dataset_claims([p.meta for p in opened.parts], part_edges(client, [opened])[0])
    diffs = np.diff(idx[:, 0] * SHAPE[1] * SHAPE[2] + idx[:, 1] * SHAPE[2] + idx[:, 2])  # row-major keys, NumPy
    for order, unique in ((meta.sort_order, meta.unique), on_cluster):
        assert (order == (0, 1, 2)) == bool(np.all(diffs >= 0))
        assert unique == bool(np.all(diffs > 0))


def test_float_reduce_of_a_directory_sorted_otherwise_by_ranges_is_one_machines(client, tmp_path, rng):
    """A directory sorted (0, 2, 1) whose parts have no statistics (so no seamed path): its
    ranges claim the order one machine derives for the whole, and each reduces in stored order
    as one machine does, bitwise (sorting a range again in another order changed the sums)."""
    from sptool.io import open_sink

    shape = (200_000, 60, 60)
    idx = np.unique(np.stack([rng.integers(0, 300, 40_000) * 600, rng.integers(0, 60, 40_000),
                              rng.integers(0, 60, 40_000)], axis=1), axis=0)
    idx = idx[np.lexsort((idx[:, 1], idx[:, 2], idx[:, 0]))]  # sorted (0, 2, 1)
    val = rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))
    meta = sptool.SparseTensor(idx[:0], val[:0], shape).meta.with_(sort_order=(0, 2, 1), unique=True, nnz=None)
    d = tmp_path / "in"
    d.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(idx)), 3)):
        with open_sink(str(tmp_path / "p.parquet"), meta) as sink:
            sink.write(np.ascontiguousarray(idx[rows].T), val[rows])
        f = pq.ParquetFile(tmp_path / "p.parquet")
        kept = {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"}
        pq.write_table(f.read().replace_schema_metadata(kept), d / f"part-{i:06d}.parquet", write_statistics=False)
    src = str(d) + "/"
    assert sptool.open(src).meta.sort_order == (0, 2, 1)
    out, local = str(tmp_path / "out") + "/", str(tmp_path / "local.parquet")
    r = sptool.distributed.reduce(src, out, op="sum", axis=[1, 2], memory="16MiB", client=client)
    assert r["strategy"] == "ranges"
    sptool.reduce(src, local, op="sum", axis=[1, 2], memory="16MiB")
    want = np.zeros(shape[0])
    np.add.at(want, idx[:, 0], val)  # in stored order, one after another
    keys = np.unique(idx[:, 0])
    for got in (out, local):
        gi, gv = _read_all_k(got, 1)
        assert np.array_equal(gi[:, 0], keys) and np.array_equal(gv.view(np.int64), want[keys].view(np.int64))


def test_add_of_sorted_parts_on_a_cluster(client, tiny, tmp_path, rng):
    """Both operands globally canonical (their seams say so): each range is merged without a
    sort, and the sum is NumPy's and the single machine's."""
    a, ai, av = _unique_parts(tmp_path / "a", rng)
    b, bi, bv = _unique_parts(tmp_path / "b", rng)
    out = str(tmp_path / "out") + "/"
    sptool.distributed.add(a, b, out, memory=tiny, client=client)
    keys, sums = _oracle_summed(np.concatenate([ai, bi]), np.concatenate([av, bv]))
    gi, gv = _read_all_k(out, 3)
    assert np.array_equal(gi, keys) and np.array_equal(gv, sums)
    local = str(tmp_path / "local.parquet")
    sptool.add(a, b, local, memory=tiny)
    assert all(np.array_equal(x, y) for x, y in zip(_read_all_k(out, 3), _read_all_k(local, 3)))
    assert all(m.canonical for m in _part_metas(out))


def _sorted_add_checked(client, tiny, tmp_path, a, b, rows, values, *, exact: bool = True) -> set:
    """add of two sorted part directories on the cluster, checked against NumPy's sums of
    ``rows``/``values`` (both operands' rows) and the single machine's output, into several
    canonical non-empty parts: the names of the tasks that ran."""
    out = str(tmp_path / "out") + "/"
    with distributed.get_task_stream(client) as stream:
        r = sptool.distributed.add(a, b, out, memory=tiny, client=client)
    keys, sums = _oracle_summed(rows, values)
    gi, gv = _read_all_k(out, 3)
    assert np.array_equal(gi, keys)
    assert np.array_equal(gv, sums) if exact else np.allclose(gv, sums, rtol=1e-12, atol=0)
    local = str(tmp_path / "local.parquet")
    sptool.add(a, b, local, memory=tiny)
    assert all(np.array_equal(x, y) for x, y in zip(_read_all_k(out, 3), _read_all_k(local, 3)))
    assert r["parts"] > 1 and all(m.canonical and m.nnz for m in _part_metas(out))
    return {t["key"].split("-")[0] for t in stream.data}


def test_add_of_sorted_parts_reads_ranges_where_they_stand(client, tiny, tmp_path, rng):
    """Operands sorted on the key are not shuffled: no partition task runs, each range task
    reads its keys from the parts (row groups pruned by statistics), and the sum is NumPy's."""
    a, ai, av = _unique_parts(tmp_path / "a", rng, n=6000, values="float")
    b, bi, bv = _unique_parts(tmp_path / "b", rng, n=300, parts=3, values="float")
    names = _sorted_add_checked(client, tiny, tmp_path, a, b, np.concatenate([ai, bi]), np.concatenate([av, bv]),
                                exact=False)
    assert "direct_slot" in names and "partition" not in names, names


def test_add_of_sorted_parts_takes_its_splitters_from_the_parts_edges(client, tiny, tmp_path, rng):
    """Operands sorted on the key, cut into uneven parts (one holding most rows, an empty one):
    the splitters come from the parts' first keys (no sample task reads the parts), each range
    task gets only the pieces that meet its range, and the sum is NumPy's and the single
    machine's."""
    a, ai, av = _unique_parts(tmp_path / "a", rng, n=5000, values="float")
    idx = np.unique(_rows(rng, 3000), axis=0)
    val = rng.standard_normal(len(idx))
    cuts = [len(idx) // 10, len(idx) // 10, len(idx) // 5]  # parts of 10%, 0%, 10% and 80% of the rows
    b = _write_parts(tmp_path / "b", np.split(idx, cuts), np.split(val, cuts))
    names = _sorted_add_checked(client, tiny, tmp_path, a, b, np.concatenate([ai, idx]), np.concatenate([av, val]))
    assert "direct_slot" in names and not names & {"sample", "partition", "pooled_splitters"}, names


def test_add_of_empty_sorted_operands_on_a_cluster(client, tiny, tmp_path, rng):
    empty = np.empty((0, 3), dtype=np.int64), np.empty(0)
    a = _write_parts(tmp_path / "a", [empty[0]] * 2, [empty[1]] * 2)
    b = _write_parts(tmp_path / "b", [empty[0]], [empty[1]])
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.add(a, b, out, memory=tiny, client=client)
    assert r["parts"] == 1 and r["rows_out"] == 0 and sorted(os.listdir(out)) == ["part-000000.parquet"]
    assert sptool.open(out).meta.shape == SHAPE and sptool.open(out).meta.nnz == 0


def test_float_reduce_of_sorted_parts_is_bitwise_one_machines(client, tiny, tmp_path, rng):
    """Float sums depend on the path: a directory sorted on a kept dimension is reduced piece by
    piece where it stands, the rows at the seams (a value of dimension 0 on two parts) by tasks
    of their own, every output coordinate's rows whole and in input order, so the sums agree
    with one machine's to the bit."""
    src, idx, val = _unique_parts(tmp_path, rng, n=20000, values="float")
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reduce(src, out, op="sum", axis=1, memory=tiny, client=client)
    local = str(tmp_path / "local.parquet")
    sptool.reduce(src, local, op="sum", axis=1, memory=tiny)
    assert r["strategy"] == "seams"
    di, dv = _read_all_k(out, 2)
    li, lv = _read_all_k(local, 2)
    assert np.array_equal(di, li) and np.array_equal(dv.view(np.int64), lv.view(np.int64))
    want_keys, want = _oracle_reduced(idx, val, [1], False, np.add)
    assert np.array_equal(di, want_keys) and np.allclose(dv, want, rtol=1e-9, atol=1e-9)
    assert r["rows_in"] == len(idx) and r["rows_out"] == len(want_keys) and r["parts"] == 2  # a task per worker


def _seam_layout_parts(tmp_path, rng, layout):
    """A canonical float tensor cut into parts whose seams are awkward: ``one-value`` puts a part
    holding only rows of one value of dimension 0 between two parts that also hold it, ``empty``
    adds empty parts (first, in the middle, last), ``clean`` cuts only where dimension 0 changes
    (no seams at all)."""
    idx = np.unique(_rows(rng, 6000), axis=0)
    val = rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))
    if layout == "one-value":
        run = np.flatnonzero(idx[:, 0] == idx[len(idx) // 2, 0])  # the rows of one value, consecutive
        cuts = [len(idx) // 5, run[0] + 3, run[-1] - 2, 4 * len(idx) // 5]
    elif layout == "empty":
        cuts = [0, len(idx) // 3, len(idx) // 3, 2 * len(idx) // 3, len(idx)]
    else:
        starts = np.flatnonzero(np.diff(idx[:, 0])) + 1
        cuts = list(starts[[len(starts) // 4, len(starts) // 2, 3 * len(starts) // 4]])
    path = _write_parts(tmp_path / "in", np.split(idx, cuts), np.split(val, cuts))
    return path, idx, val


@pytest.mark.parametrize("layout", ["one-value", "empty", "clean"])
@pytest.mark.parametrize("op,ufunc,axis,keepdims", [("sum", np.add, 1, False), ("max", np.maximum, [1, 2], True),
                                                    ("prod", np.multiply, 2, False)])
def test_seamed_reduce_layouts_match_numpy_and_one_machine(client, tiny, tmp_path, rng, layout, op, ufunc, axis,
                                                           keepdims):
    src, idx, val = _seam_layout_parts(tmp_path, rng, layout)
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reduce(src, out, op=op, axis=axis, keepdims=keepdims, memory=tiny, client=client)
    assert r["strategy"] == "seams"
    local = str(tmp_path / "local.parquet")
    sptool.reduce(src, local, op=op, axis=axis, keepdims=keepdims, memory=tiny)
    K = 3 if keepdims else 3 - len(np.atleast_1d(axis))
    di, dv = _read_all_k(out, K)
    li, lv = _read_all_k(local, K)
    assert np.array_equal(di, li) and np.array_equal(dv.view(np.int64), lv.view(np.int64))
    want_keys, want = _oracle_reduced(idx, val, list(np.atleast_1d(axis)), keepdims, ufunc)
    assert np.array_equal(di, want_keys) and np.allclose(dv, want, rtol=1e-9, atol=0)
    assert all(m.nnz for m in _part_metas(out))  # a part left without rows is not written
    assert sptool.open(out).meta.shape == sptool.open(local).meta.shape


def test_reduce_of_sorted_parts_out_of_order_is_not_seamed(client, tiny, tmp_path, rng):
    """Each part sorted, but the parts in reverse order: the rows of one value of dimension 0 are
    not consecutive in the whole, so the seams path is not taken (key ranges are), and the sums
    are still the single machine's, bit for bit."""
    idx = np.unique(_rows(rng, 4000), axis=0)
    val = rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))
    cuts = [len(idx) // 3, 2 * len(idx) // 3]
    src = _write_parts(tmp_path / "in", np.split(idx, cuts)[::-1], np.split(val, cuts)[::-1])
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reduce(src, out, op="sum", axis=2, memory=tiny, client=client)
    assert r["strategy"] == "ranges"
    local = str(tmp_path / "local.parquet")
    sptool.reduce(src, local, op="sum", axis=2, memory=tiny)
    di, dv = _read_all_k(out, 2)
    li, lv = _read_all_k(local, 2)
    assert np.array_equal(di, li) and np.array_equal(dv.view(np.int64), lv.view(np.int64))
    want_keys, want = _oracle_reduced(idx, val, [2], False, np.add)
    assert np.array_equal(di, want_keys) and np.allclose(dv, want, rtol=1e-9, atol=1e-9)


def test_reduce_over_the_sorted_dimension_is_not_seamed(client, tiny, tmp_path, rng):
    """Reducing dimension 0, which the dataset is sorted on first, leaves no kept dimension whose
    values stay together: the rows are shuffled into key ranges."""
    src, idx, val = _unique_parts(tmp_path, rng, values="float")
    out = str(tmp_path / "out") + "/"
    r = sptool.distributed.reduce(src, out, op="sum", axis=0, memory=tiny, client=client)
    assert r["strategy"] == "ranges"
    want_keys, want = _oracle_reduced(idx, val, [0], False, np.add)
    di, dv = _read_all_k(out, 2)
    assert np.array_equal(di, want_keys) and np.allclose(dv, want, rtol=1e-9, atol=1e-9)


def test_cli_validate_and_info_on_the_scheduler_in_a_terminal(client, tiny, tmp_path, rng):
    """validate (of a directory, and of one file whose runs of row groups are checked by tasks) and
    info with --scheduler (the session's cluster) under a pseudo-terminal: the dashboard link, the
    report and the summary, the cursor restored, no traceback; the same verdict as one machine."""
    src, idx, val = _dataset(tmp_path, rng)
    one = str(tmp_path / "one.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), one, batch_rows=100)
    for command in (["validate", src, one], ["info", src]):
        with distributed.get_task_stream(client) as stream:  # the scheduler's record, whichever client
            code, output = run_in_terminal(["sptool", "--scheduler", client.scheduler.address, *command], cwd=ROOT,
                                           timeout=120)
        runs = [t for t in stream.data if str(t["key"]).startswith("scanned_run")]
        assert len(runs) == (4 if command[0] == "validate" else 0), runs
        text = output.decode("utf-8", "replace")
        assert code == 0, text
        assert cursor_restored(output), text
        assert "Dask dashboard: http" in text and "Traceback" not in text, text
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # rich styles digits apart
        if command[0] == "validate":  # the directory's report and the file's, each with its entries
            assert plain.count(f"{len(idx):,} entries") == 2, plain
        else:
            assert f"{len(idx):,}" in plain, plain
