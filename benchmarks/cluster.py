"""The Dask benchmarks (the cluster family), registered into harness.BENCHMARKS on import.

One 2-worker LocalCluster (1 thread, 2 GiB each) is started for sptool and another for the
dask.dataframe peers, both before timing and kept up for the whole run (a user's cluster is up
before the job), so each measured process connects with --scheduler tcp://...; a separate row
times ``--scheduler local:2``, cluster start-up included.  Two clusters, so that the peak worker
memory sptool reports (its --json-summary) is its own tasks', not dask.dataframe's.  The data is
in 8 parts, as on shared storage.
"""

from __future__ import annotations

import atexit
import json
import os

import harness
import numpy as np
from harness import SEED, Benchmark, python_tool, register, remove, run_once, sptool_tool
from inputs import canonical_coords, prepare_add, prepare_reorder, prepare_validate, write_sptool

PARTS = 8
WORKERS = 2
_clusters: dict = {}


# What each cluster's workers import before timing (a cluster in use has its libraries loaded):
# sptool's workers what its preload imports (sptool.distributed.cluster.PRELOAD: its task modules
# and pandas, as dask's workers here), dask's the dataframe stack.
WARM = {"sptool": ["sptool.distributed.cluster"], "dask": ["dask.dataframe", "pandas", "pyarrow.parquet"]}


def scheduler(name: str, workers: int = WORKERS, pinned: bool = False) -> str:
    """The address of the LocalCluster ``name`` of ``workers`` workers (started on first use,
    stopped at exit); ``pinned``: worker i runs on core i (modulo the cores), as if each had a
    machine of one core (sptool's task threads follow the worker's affinity, _threads.py)."""
    if name not in _clusters:
        import importlib
        import logging

        import distributed

        environ = dict(os.environ)
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, memory_limit="2GiB",
                                           processes=True, dashboard_address=":0", silence_logs=logging.ERROR)
        # The nannies set their workers' variables ($MALLOC_TRIM_THRESHOLD_, $OMP_NUM_THREADS...)
        # in this process's environment too; the tools timed after this must not inherit them.
        os.environ.clear()
        os.environ.update(environ)
        _clusters[name] = cluster
        atexit.register(cluster.close)
        with distributed.Client(cluster) as client:
            if pinned:
                def pin(core):  # nested: sent to the workers by value; every thread of the process
                    for tid in os.listdir("/proc/self/task"):
                        os.sched_setaffinity(int(tid), {core})

                cores = sorted(os.sched_getaffinity(0))
                for i, address in enumerate(sorted(client.scheduler_info()["workers"])):
                    client.run(pin, cores[i % len(cores)], workers=[address])
            for module in WARM[name.split("-")[0]]:
                client.run(importlib.import_module, module)
            if name.startswith("sptool"):  # as `dask worker --preload sptool.distributed.cluster` does
                client.run(lambda: importlib.import_module("sptool.distributed.cluster").dask_setup())
    return _clusters[name].scheduler_address


def _worker_cpu(name: str) -> float:
    """The CPU seconds the workers of cluster ``name`` have used so far, summed."""
    import distributed

    def cpu_seconds():  # nested: sent to the workers by value (they cannot import this module)
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    with distributed.Client(_clusters[name]) as client:
        return sum(client.run(cpu_seconds).values())


def _missing() -> str | None:
    try:
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        return 'needs dask[distributed,dataframe] (pip install "sptool[dask]" pandas)'
    return None


def _split(path: str, parts_dir: str, parts: int = PARTS) -> str:
    """A tensor file cut into ``parts`` part files of consecutive rows (each keeps the file's
    order claims, which its sink verifies)."""
    import pyarrow.parquet as pq

    from sptool.io import open_sink, open_source, part_name

    if os.path.isdir(parts_dir):
        return parts_dir
    tmp = parts_dir + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    with open_source(path) as src:
        meta = src.meta
    n = meta.nnz
    pf = pq.ParquetFile(path)
    bounds = [n * i // parts for i in range(parts + 1)]
    batches = pf.iter_batches(batch_size=1 << 20)
    pending = None
    for i in range(parts):
        want = bounds[i + 1] - bounds[i]
        with open_sink(os.path.join(tmp, part_name(i)), meta.with_(nnz=None),
                       unique_claim=True if meta.unique else False) as sink:
            while want:
                if pending is None:
                    pending = next(batches)
                take = min(want, pending.num_rows)
                sink.write_batch(pending.slice(0, take))
                pending = pending.slice(take) if take < pending.num_rows else None
                want -= take
    os.rename(tmp, parts_dir)
    return parts_dir


def _summary_note(path: str, what: str) -> str:
    with open(path) as f:
        r = json.loads(f.read().splitlines()[-1])["result"]
    return (f"{what}: {r['parts']} output parts on {r['workers']} workers, peak worker memory "
            f"{r['peak_worker_memory'] / 2**20:,.0f} MiB")


PEER_SET_INDEX = """
    import sys
    import dask.dataframe as dd
    from distributed import Client
    client = Client(sys.argv[1])
    s1, s2 = int(sys.argv[4]), int(sys.argv[5])
    df = dd.read_parquet(sys.argv[2])
    df["key"] = (df["indices_0"] * s1 + df["indices_1"]) * s2 + df["indices_2"]
    df.set_index("key", shuffle_method="tasks").to_parquet(sys.argv[3])
"""

PEER_MERGE = """
    import sys
    import dask.dataframe as dd
    from distributed import Client
    client = Client(sys.argv[1])
    on = ["indices_0", "indices_1", "indices_2"]
    a, b = dd.read_parquet(sys.argv[2]), dd.read_parquet(sys.argv[3])
    m = a.merge(b, how="outer", on=on, shuffle_method="tasks")
    m["values"] = m["values_x"].fillna(0) + m["values_y"].fillna(0)
    m[on + ["values"]].to_parquet(sys.argv[4])
"""

PEER_GROUPBY = """
    import sys
    import dask.dataframe as dd
    from distributed import Client
    client = Client(sys.argv[1])
    df = dd.read_parquet(sys.argv[2])
    df.groupby(["indices_0", "indices_2"])["values"].sum(split_every=8).to_frame().to_parquet(sys.argv[3])
"""


def _check_same_stream(a_dir: str, b_dir: str, what: str) -> str | None:
    """The distributed output and the single-process one (part directories with different part
    boundaries) hold the same entries in the same order, compared as one stream, column by
    column (the issue's comparison), and the same tensor metadata."""
    import pyarrow.parquet as pq

    import sptool

    a, b = sptool.open(a_dir).meta, sptool.open(b_dir).meta
    for key in ("shape", "value_type", "fill_value", "nnz", "dimension_names"):
        if getattr(a, key) != getattr(b, key):
            return f"{what}: {key} {getattr(a, key)!r}, single-process {getattr(b, key)!r}"

    def files(d):
        return [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".parquet")]

    for col in [f"indices_{k}" for k in range(a.sparse_ndim)] + ["values"]:
        x, y = (pq.read_table(files(d), columns=[col]).column(0).to_numpy() for d in (a_dir, b_dir))
        if not np.array_equal(x, y):
            return f"{what}: column {col} differs from the single-process output's"
    return None


def _check(name: str):
    """The check of benchmark dask-NAME: the distributed output equals the single-process one,
    and a note of what the cluster did."""
    def check(paths, out):
        problem = _check_same_stream(_out(out, name, "sptool"), _out(out, name, "single"), name)
        return problem, _summary_note(os.path.join(out, f"dask-{name}.json"), name)
    return check


def _weak(data: str, paths: dict) -> dict:
    """Part directories of the reorder input for 1, 2 and 4 workers: 4, 8 and 16 parts (the
    last holding every part twice, as links), so the entries per worker stay the same."""
    parts = paths["unsorted_parts"]
    names = sorted(os.listdir(parts))
    for workers, count in ((1, PARTS // 2), (2, PARTS), (4, 2 * PARTS)):
        d = os.path.join(data, f"weak-{paths['rows']}-{workers}w")
        if not os.path.isdir(d):
            os.makedirs(d + ".tmp")
            for i in range(count):
                target = os.path.join(parts, names[i % len(names)])
                os.symlink(target, os.path.join(d + ".tmp", f"part-{i:06d}.parquet"))
            os.rename(d + ".tmp", d)
        paths[f"weak_{workers}"] = d
    return paths


def _in_parts(prepare, *keys):
    """``prepare`` (a data maker of inputs.py), with each file ``keys`` names also cut into PARTS parts
    (at ``KEY_parts``)."""
    def prepared(data, params):
        paths = prepare(data, params)
        for key in keys:
            paths[f"{key}_parts"] = _split(paths[key], paths[key].removesuffix(".parquet") + "-parts")
        return paths
    return prepared


def _out(out: str, name: str, who: str) -> str:
    return os.path.join(out, f"dask-{name}-{who}/")


def _named(tool, name: str):
    tool.name = name
    return tool


def _sptool_pair(name, out, *args):
    """The command ``args`` on the cluster and in one process, each to its own directory."""
    on, single = _out(out, name, "sptool"), _out(out, name, "single")
    tool = sptool_tool("--scheduler", scheduler("sptool"), *args, "-o", on, outputs=[on])
    tool.argv[-1:-1] = ["--json-summary", os.path.join(out, f"dask-{name}.json")]  # before -q
    return [_named(tool, "sptool --scheduler (2 workers)"),
            _named(sptool_tool(*args, "-o", single, outputs=[single]), "sptool, one process")]


# -- reorder ------------------------------------------------------------------------------

def _tools_reorder(paths, out):
    src = paths["unsorted_parts"]
    p, local = _out(out, "reorder", "dask"), _out(out, "reorder", "local")
    _, s1, s2 = harness.SHAPE_REORDER
    return [
        *_sptool_pair("reorder", out, "reorder", src),
        python_tool("dask.dataframe set_index, packed key (tasks)", PEER_SET_INDEX, scheduler("dask"), src,
                    p, str(s1), str(s2), outputs=[p]),
        _named(sptool_tool("--scheduler", "local:2", "reorder", src, "-o", local, outputs=[local]),
               "sptool --scheduler local:2 (cluster start included)"),
    ]


register(Benchmark(
    "dask-reorder", f"reorder of an unsorted 3-D float64 tensor in {PARTS} parts on a 2-worker LocalCluster",
    "at most 1.5x single-process sptool (ratio >= 0.67); 3x faster than dask set_index (ratio >= 3)",
    _in_parts(prepare_reorder, "unsorted"), _tools_reorder, skip=_missing, check=_check("reorder"),
))


# -- weak scaling: 1, 2 and 4 workers, entries per worker fixed --------------------------------

def _prepare_weak(data, params):
    return _weak(data, _in_parts(prepare_reorder, "unsorted")(data, params))


def _tools_weak(paths, out):
    tools = []
    for workers in (1, 2, 4):
        o = _out(out, "weak", f"{workers}w")
        tool = sptool_tool("--scheduler", scheduler(f"sptool-{workers}w", workers, pinned=True), "reorder",
                           paths[f"weak_{workers}"], "-o", o, outputs=[o])
        tools.append(_named(tool, f"{workers} worker{'s' if workers > 1 else ''}, "
                                  f"{paths['rows'] * workers // 2:,} entries"))
    return tools


def _check_weak(paths, out):
    """One more run per cluster size, with its CPU time: the workers' (their processes'
    user + system time, before and after) plus the driver's (the sptool process, a waited-for
    descendant of this one).  Four workers share two cores, so their wall time cannot scale;
    CPU time per entry shows whether the work does."""
    import resource

    def children_cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    notes = []
    for workers, tool in zip((1, 2, 4), _tools_weak(paths, out)):
        entries = paths["rows"] * workers // 2
        w0, d0 = _worker_cpu(f"sptool-{workers}w"), children_cpu()
        r = run_once(tool)
        w1, d1 = _worker_cpu(f"sptool-{workers}w"), children_cpu()
        for path in tool.outputs:
            remove(path)
        if r.returncode:
            return f"{tool.name} exited {r.returncode}", "; ".join(notes)
        notes.append(f"{workers} worker{'s' if workers > 1 else ''}, {entries:,} entries: wall "
                     f"{r.seconds / entries * 1e6:.2f} us/entry, CPU {(w1 - w0 + d1 - d0) / entries * 1e6:.2f} "
                     f"us/entry (workers {w1 - w0:.1f} s, driver {d1 - d0:.1f} s)")
    return None, "; ".join(notes)


register(Benchmark(
    "dask-weak-scaling", f"reorder on 1, 2 and 4 workers with {PARTS // 2} parts per worker (weak scaling; "
    "worker i pinned to core i, as on machines of one core each: 2 cores, so 4 workers share them)",
    "time per entry within 1.3x of 1 worker's (time ratio <= 1.3 at 2x and 4x the entries)", _prepare_weak,
    _tools_weak, skip=_missing, check=_check_weak,
))


# -- add ----------------------------------------------------------------------------------

def _tools_add(paths, out):
    a, b = paths["a_parts"], paths["b_parts"]
    p = _out(out, "add", "dask")
    return [
        *_sptool_pair("add", out, "add", a, b),
        python_tool("dask.dataframe outer merge (tasks)", PEER_MERGE, scheduler("dask"), a, b, p,
                    outputs=[p]),
    ]


register(Benchmark(
    "dask-add", f"sparse + sparse of two canonical 3-D float64 tensors, {PARTS} parts each, 2-worker LocalCluster",
    "5x faster than dask.dataframe merge (ratio >= 5)", _in_parts(prepare_add, "a", "b"), _tools_add,
    skip=_missing, check=_check("add"),
))


# -- reduce -------------------------------------------------------------------------------

def _tools_reduce(paths, out):
    src = paths["big_parts"]
    p = _out(out, "reduce", "dask")
    return [
        *_sptool_pair("reduce", out, "reduce", src, "--op", "sum", "--axis", "1"),
        python_tool("dask.dataframe groupby sum (tree)", PEER_GROUPBY, scheduler("dask"), src, p,
                    outputs=[p]),
    ]


register(Benchmark(
    "dask-reduce", f"sum over axis 1 of a canonical 3-D float64 tensor in {PARTS} parts, 2-worker LocalCluster",
    "at most 1.5x single-process sptool (ratio >= 0.67)", _in_parts(prepare_validate, "big"),
    _tools_reduce, skip=_missing, check=_check("reduce"),
))


# -- reduce of integers: partial reductions per piece, combined ------------------------------

def _prepare_reduce_int(data, params):
    """The ``validate`` tensor's coordinates with int64 values (its parts each canonical, so
    max, min, prod and count split too: the seams show no coordinate on two parts)."""
    n = params["validate_nnz"]
    path = os.path.join(data, f"reduce-int-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED)
        coords = canonical_coords(rng, harness.SHAPE_3D, n)
        write_sptool(path, coords, rng.integers(-1_000_000, 1_000_000, n), harness.SHAPE_3D)
    paths = {"int": path, "rows": n}
    paths["int_parts"] = _split(path, path.removesuffix(".parquet") + "-parts")
    return paths


def _tools_reduce_int(op):
    def tools(paths, out):
        return _sptool_pair(f"reduce-int-{op}", out, "reduce", paths["int_parts"], "--op", op, "--axis", "1")
    return tools


for _op in ("sum", "max"):
    register(Benchmark(
        f"dask-reduce-int-{_op}", f"{_op} over axis 1 of a canonical 3-D int64 tensor in {PARTS} parts, 2-worker "
        "LocalCluster (partial reductions per piece, combined)",
        "at most 1.5x single-process sptool (ratio >= 0.67)",
        _prepare_reduce_int, _tools_reduce_int(_op), skip=_missing, check=_check(f"reduce-int-{_op}"),
    ))
