"""Temporaries on storage that several machines or containers see (NFS, a shared volume: what a
cluster's workers write to): a sweep removes only what it can prove is its own host's and dead.

A temporary's owner is written into its name as HOST-PID-START (formats/SPEC.md §2.6); the
tests make those from the recipe and /proc themselves (owners.py), and one test
runs a Dask worker in a PID namespace of its own: another host, as far as PIDs tell.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from owners import dead_process, host_tag, start_ticks

import sptool

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="owners are proven through /proc")


OTHER_BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@pytest.fixture
def dead():
    """(pid, start time) of a process that ran and is gone."""
    return dead_process()


@pytest.fixture
def live():
    """(pid, start time) of a process running for the test."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid, start_ticks(proc.pid)
    proc.kill()
    proc.wait()


def tensor(rng, n=40, shape=(30, 20)):
    idx = np.unique(np.stack([rng.integers(0, d, n) for d in shape], axis=1), axis=0)
    return sptool.SparseTensor(idx, rng.standard_normal(len(idx)), shape)


def rows_of(path) -> tuple[np.ndarray, np.ndarray]:
    """(indices, values) of a .parquet file or a part directory, read by pyarrow."""
    t = pq.read_table(path)
    k = sum(1 for name in t.column_names if name.startswith("indices_"))
    return np.stack([t.column(f"indices_{d}").to_numpy() for d in range(k)], axis=1), t.column("values").to_numpy()


def same_rows(path, t) -> bool:
    idx, val = rows_of(path)
    return np.array_equal(idx, t.indices) and np.array_equal(val, t.values)


def plant(folder, names) -> None:
    """Files and directories named as sptool names its temporaries (a directory for sptool-*
    and for names ending in '/'), each holding some bytes."""
    for name in names:
        if name.startswith("sptool-") or name.endswith("/"):
            (folder / name.rstrip("/")).mkdir()
            (folder / name.rstrip("/") / "part-000000.parquet.held").write_bytes(b"in flight")
        else:
            (folder / name).write_bytes(b"in flight")


def test_another_hosts_temporaries_survive_a_write_beside_them(tmp_path, rng, dead, live):
    """Temporaries named by another boot's processes (one with a PID that is dead here, one with
    a PID that runs here, one with this process's own PID), and one named the way an older sptool
    names them (no host: its PID may be any machine's), stay through a write of a sibling from
    Python and from the command line."""
    from click.testing import CliRunner

    from sptool.cli import cli

    other = host_tag(OTHER_BOOT)
    theirs = [f".out.parquet.tmp-{other}-{dead[0]}-{dead[1]}-0123abcd",
              f".part-000001.parquet.tmp-{other}-{live[0]}-{dead[1]}-89abcdef",
              f".out.tmp-{other}-{os.getpid()}-1-00ff00ff/",
              f".out.parquet.tmp-{dead[0]}-{dead[1]}-0123abcd",
              f".old.parquet.old-{dead[0]}-0-abcdef01/"]
    plant(tmp_path, theirs)
    t = tensor(rng)
    sptool.write(t, str(tmp_path / "out.parquet"))
    src = str(tmp_path / "out.parquet")
    r = CliRunner().invoke(cli, ["reorder", src, "--perm", "1,0", "-o", str(tmp_path / "sibling.parquet")])
    assert r.exit_code == 0, r.output
    assert "removed" not in r.output
    assert sorted(os.listdir(tmp_path)) == sorted([n.rstrip("/") for n in theirs] + ["out.parquet", "sibling.parquet"])
    assert same_rows(tmp_path / "out.parquet", t)
    order = np.lexsort((t.indices[:, 0], t.indices[:, 1]))
    idx, val = rows_of(tmp_path / "sibling.parquet")
    assert np.array_equal(idx, t.indices[order]) and np.array_equal(val, t.values[order])


def test_a_dead_process_of_this_host_is_swept(tmp_path, rng, dead, capfd):
    """This host's temporaries whose process is gone (an output's, a moved-aside old output, a
    cluster's staging directory, a spill directory) are removed by the next write there, and
    named on stderr; those of this process and of a live one stay."""
    from sptool.io import sweep

    here = host_tag()
    gone = [f".out.parquet.tmp-{here}-{dead[0]}-{dead[1]}-0123abcd",
            f".x.parquet.old-{here}-{dead[0]}-{dead[1]}-abcdef01",
            f".d.tmp-{here}-{dead[0]}-{dead[1]}-00ff00ff/",
            f".out.stdin-{here}-{dead[0]}-{dead[1]}-12345678.parquet"]
    mine = [f".y.parquet.tmp-{here}-{os.getpid()}-{start_ticks(os.getpid())}-0123abcd",
            f".z.parquet.tmp-{here}-{os.getppid()}-{start_ticks(os.getppid())}-0123abcd"]
    plant(tmp_path, gone + mine)
    t = tensor(rng)
    sptool.write(t, str(tmp_path / "out.parquet"))
    err = capfd.readouterr().err
    for name in gone:
        assert f"removed {tmp_path / name.rstrip('/')}, left by an sptool process that is no longer running" in err
    assert sorted(os.listdir(tmp_path)) == sorted(mine + ["out.parquet"])
    assert same_rows(tmp_path / "out.parquet", t)

    spill = tmp_path / "spill"
    spill.mkdir()
    ours = f"sptool-sort-{here}-{dead[0]}-{dead[1]}-abc_1234"
    theirs = f"sptool-sort-{host_tag(OTHER_BOOT)}-{dead[0]}-{dead[1]}-abc_1234"
    plant(spill, [ours, theirs])
    assert sweep(str(spill)) == [ours]
    assert os.listdir(spill) == [theirs]


def test_a_recycled_pid_is_not_its_owner(tmp_path, rng, live):
    """A temporary of this host whose PID runs now, but a process started at another time (the
    PID was reused: even this process's own), is a dead process's and is swept; with the
    running process's own start time it stays."""
    here = host_tag()
    earlier = format(int(start_ticks(live[0]), 16) - 1, "x")
    recycled = [f".out.parquet.tmp-{here}-{live[0]}-{earlier}-0123abcd",
                f".out.parquet.tmp-{here}-{os.getpid()}-{earlier}-89abcdef"]
    running = [f".out.parquet.tmp-{here}-{live[0]}-{live[1]}-00ff00ff"]
    plant(tmp_path, recycled + running)
    sptool.write(tensor(rng), str(tmp_path / "out.parquet"))
    assert sorted(os.listdir(tmp_path)) == sorted(running + ["out.parquet"])


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_apply_state_files_leave_another_hosts_same_pid_temporary_alone(tmp_path, rng, optimizer):
    """A process on another host sharing the state directory, whose PID happens to equal this
    one's, is writing a state file's temporary: apply creating its state names its own
    temporaries by owner and leaves the other's bytes where they are."""
    table = tmp_path / "table.npy"
    np.save(table, np.zeros((30, 4), np.float32))
    grad = tmp_path / "g.parquet"
    rows = np.array([3, 7, 7, 20])
    sptool.write(sptool.SparseTensor(np.stack([rows, np.zeros_like(rows)], 1)[:, :1],
                                     rng.standard_normal((4, 4)).astype(np.float32), (30, 4)), str(grad))
    state = tmp_path / "state"
    state.mkdir()
    theirs = {f"{name}.tmp-{os.getpid()}": name.encode() * 3
              for name in ("state.json", "accumulator.npy", "m.npy", "v.npy")}
    for name, data in theirs.items():
        (state / name).write_bytes(data)
    sptool.apply(str(table), [str(grad)], optimizer=optimizer, lr=0.1, state=str(state))
    for name, data in theirs.items():
        assert (state / name).read_bytes() == data
    assert not [n for n in os.listdir(state) if ".tmp-" in n and n not in theirs]


# -- two Dask workers, one in a PID namespace of its own, writing into one shared directory ------

def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return r.returncode == 0


def _in_flight(folder: str, prefix: str, writer, timeout: float = 30.0) -> str:
    """The temporary named ``prefix``... that ``writer`` (a future) is writing in ``folder``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if writer.done():
            writer.result()  # its error, if it failed
            raise AssertionError(f"{prefix}* was written before its writer was let go")
        found = [n for n in os.listdir(folder) if n.startswith(prefix)]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no {prefix}* appeared in {folder}")


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare --pid (root, or user namespaces)")
def test_workers_in_two_pid_namespaces_write_into_one_directory(tmp_path, rng, tiny_batches, cluster_client):
    """The session cluster's workers, and one more in a PID namespace of its own (another
    machine, as far as PIDs tell), write parts of one output into its staging directory, each
    while the other namespace's part is in flight, and the other one also writes a sibling of
    the output: both outputs complete and whole, every part there, nothing of either removed.
    (Row groups of 5 rows, in the budget the tasks get: a part's temporary is on disk once its
    first rows are.)"""
    from sptool._memory import budget_of
    from sptool.distributed.partdir import PartDirectory

    def write_held(path: str, t, go: str, budget) -> None:
        """On a worker (made here, so that it goes to the workers by value): write ``t`` to
        ``path`` through the sink sptool.write uses, its first rows, then wait (the temporary in
        flight) until the file ``go`` exists, then the rest."""
        from sptool.io import open_sink

        keys = t.keys
        half = len(t.values) // 2
        with open_sink(path, t.meta, unique_claim=True, budget=budget) as sink:
            sink.write(np.ascontiguousarray(keys[:, :half]), t.values[:half])
            deadline = time.monotonic() + 60
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.02)
            sink.write(np.ascontiguousarray(keys[:, half:]), t.values[half:])

    client = cluster_client
    shared = tmp_path / "shared"
    shared.mkdir()
    go = str(tmp_path / "go")
    parts = [tensor(rng, 60) for _ in range(4)]
    sibling = tensor(rng, 30)
    budget = budget_of(None)
    here = sorted(client.scheduler_info()["workers"])[:2]
    # Two threads: one holds a part in flight while the other writes.
    away = subprocess.Popen(["unshare", "--pid", "--mount-proc", "--kill-child", sys.executable, "-m",
                             "distributed.cli.dask_worker", client.scheduler.address, "--nthreads", "2",
                             "--no-nanny", "--no-dashboard", "--name", "other-namespace"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client.wait_for_workers(len(here) + 1, timeout=60)
        there = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "other-namespace")

        def on(worker, fn, *args):
            return client.submit(fn, *args, workers=[worker], allow_other_workers=False, pure=False)

        with PartDirectory(str(shared / "out") + "/") as out:
            held = [on(here[0], write_held, out.part(0), parts[0], go, budget),
                    on(there, write_held, out.part(1), parts[1], go, budget)]
            flying = [_in_flight(out.root, f".part-00000{i}.parquet.tmp-", held[i]) for i in (0, 1)]
            hosts = {name.split(".tmp-")[1].split("-")[0] for name in flying}
            assert len(hosts) == 2, flying  # two hosts, as far as the names tell
            # Each namespace makes outputs where the other's temporaries are in flight.
            on(here[1], sptool.write, parts[2], out.part(2)).result(timeout=60)
            on(there, sptool.write, parts[3], out.part(3)).result(timeout=60)
            on(there, sptool.write, sibling, str(shared / "sibling.parquet")).result(timeout=60)
            open(go, "w").close()
            for f in held:
                f.result(timeout=60)
            del held
    finally:
        away.kill()  # unshare leaves SIGTERM to the child, which as its namespace's init ignores it
        away.wait(timeout=30)
        deadline = time.monotonic() + 30  # the session's cluster as it was, for the next test
        while len(client.scheduler_info()["workers"]) > len(here) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert sorted(os.listdir(shared)) == ["out", "sibling.parquet"]
    assert sorted(os.listdir(shared / "out")) == [f"part-00000{i}.parquet" for i in range(4)]
    for i, t in enumerate(parts):
        assert same_rows(shared / "out" / f"part-00000{i}.parquet", t)
    assert same_rows(shared / "sibling.parquet", sibling)
