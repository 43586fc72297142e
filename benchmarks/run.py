"""Time sptool's commands against what a user would otherwise run, on the same data.

    python benchmarks/run.py [--size small|medium|large] [--only NAME] [--repeat N]

Data is generated once per size into benchmarks/data/<size>/ (git-ignored) and reused. Every
measured tool runs in its own fresh subprocess, so its wall time includes interpreter start-up
and imports (as a user's would), and its peak RSS is that process's own (os.wait4 -> ru_maxrss, taken
by a small launcher process: see LAUNCHER).
sptool runs through its command line with -q.  Results: a table on stdout and
benchmarks/results/latest.json.  See benchmarks/README.md.

A benchmark is a `Benchmark` in the BENCHMARKS registry: a function that makes its data, and one
that gives the sptool command followed by its peers (commands doing the same job with other
tools).  Add one with register(Benchmark(...)).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
RESULTS = os.path.join(HERE, "results")
SEED = 12345

# Per size: entries of the validate tensor, lines of the .tns, and the todense matrix.
SIZES = {
    "small": {"validate_nnz": 500_000, "tns_lines": 1_000_000,
              "dense_shape": (5_000, 2_500), "dense_nnz": 1_250_000, "reorder_nnz": 2_000_000,
              "add_nnz": 1_000_000, "matmul": (100_000, 100_000, 1_000_000),
              "spgemm": (20_000, 60_000, 60_000, 200_000, 600_000, "32MB"), "svm_mb": 20,
              "square_dense": (5_000, 5_000, 250_000)},
    "medium": {"validate_nnz": 5_000_000, "tns_lines": 5_000_000,
               "dense_shape": (10_000, 5_000), "dense_nnz": 5_000_000, "reorder_nnz": 5_000_000,
               "add_nnz": 2_500_000, "matmul": (250_000, 100_000, 2_500_000),
               "spgemm": (50_000, 150_000, 150_000, 500_000, 1_500_000, "64MB"), "svm_mb": 200,
               "square_dense": (10_000, 10_000, 1_000_000)},
    "large": {"validate_nnz": 20_000_000, "tns_lines": 20_000_000,
              "dense_shape": (20_000, 10_000), "dense_nnz": 20_000_000, "reorder_nnz": 20_000_000,
              "add_nnz": 10_000_000, "matmul": (1_000_000, 100_000, 10_000_000),
              "spgemm": (100_000, 300_000, 300_000, 1_000_000, 3_000_000, "128MB"), "svm_mb": 1000,
              "square_dense": (20_000, 20_000, 4_000_000)},
}
# The issue's reorder benchmark: an unsorted 3-D tensor (20M entries at --size large).
SHAPE_REORDER = (1_000_000, 5_000, 200)
SHAPE_3D = (2_000, 1_000, 500)
# --shape issue: the goals' own tensors (2^17 x 2^12 x 2^8) for both of the above, in data/<size>-issue/.
SHAPE_ISSUE = (1 << 17, 1 << 12, 1 << 8)
DATA_TAG = ""
# --one-writer: each sptool row is followed by the same command with the one-thread Parquet
# writer it had before, so that both are timed in the same minutes.
ONE_WRITER = False
ONE_WRITER_CODE = """
    import os, sys
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as sptool.cli.main does, before numpy loads
    import sptool.io.sink as sink
    plain = sink.TensorSink._parquet_writer
    sink.TensorSink._parquet_writer = lambda self, path, many=False: plain(self, path)
    from sptool.__main__ import run  # the script's own set-up, as the other rows have it
    sys.argv[0] = "sptool"
    run()
"""
# --no-checks: each sptool command timed twice, with the read checks on and switched off (page
# CRC verification, the footer walk, ClaimCheck), through the same small launcher so that only the
# checks differ, in the same minutes and without the peers: the difference is what the checks cost
# (benchmarks/README.md, "the cost of the checks").  The launcher's first argument is "on" or "off".
NO_CHECKS = False
CHECKS_CODE = """
    import os, sys
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as sptool.cli.main does, before numpy loads
    import pyarrow.parquet as pq
    import sptool.io._rowgroups as rowgroups
    from sptool.stream import order
    if sys.argv.pop(1) == "off":
        opened = pq.ParquetFile.__init__
        pq.ParquetFile.__init__ = lambda self, *a, **k: opened(self, *a, **{**k, "page_checksum_verification": False})
        rowgroups.check_levels = lambda path, schema: None
        order.ClaimCheck.check = lambda self, keys: None
        order.ClaimCheck.check_batch = lambda self, batch, codes=None: None
    from sptool.__main__ import run
    sys.argv[0] = "sptool"
    run()
"""

# --baseline DIR: each sptool row is followed by the same command run with the sptool of the checkout
# DIR (its kernels built in place), in the same minutes: today's code against an earlier commit's.
BASELINE = None
# --without TEXT: the peers whose names hold TEXT are not run (a shorter session of the rest).
WITHOUT: list[str] = []
BASELINE_CODE = """
    import os, sys
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as sptool.cli.main does, before numpy loads
    from sptool.__main__ import run  # the script's own set-up, as the sptool rows have it
    sys.argv[0] = "sptool"
    run()
"""


# ---------------------------------------------------------------------------------------------
# Running one command

@dataclass
class Tool:
    """One way of doing a benchmark's job: a command line, and the outputs it leaves behind."""

    name: str
    argv: list[str]
    outputs: list[str] = field(default_factory=list)


@dataclass
class Run:
    seconds: float
    max_rss: int  # bytes
    returncode: int
    stderr: str
    cpu: float = 0.0  # user + system seconds of the measured process (on a loaded machine, steadier than wall)


# The measured command is started by this small launcher, not by run.py itself.  Linux carries a
# process's peak RSS across fork and exec: a child of run.py (which holds generated data, and whose
# subprocess uses vfork) would report at least run.py's own peak as its ru_maxrss.  The launcher is
# a fresh, small interpreter, so its child's ru_maxrss is the measured tool's own peak.
LAUNCHER = """
import json, os, sys, time
argv = sys.argv[1:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "max_rss": usage.ru_maxrss * 1024,
                  "cpu": usage.ru_utime + usage.ru_stime,
                  "returncode": os.waitstatus_to_exitcode(status)}))
"""


def run_once(tool: Tool) -> Run:
    """Run ``tool`` once in a fresh process: its wall time (from fork to exit) and peak RSS."""
    for path in tool.outputs:
        _remove(path)
    # Untimed: the dirty pages an earlier run left (the NumPy apply script's 1.5 GB, written back
    # after it exits) are written now, so that a tool which waits for its own writes (apply's
    # fdatasync of its journal) does not wait behind another tool's writeback.  Measured on
    # apply-adam: the journal's sync 0.07 s after a sync, the run 0.74 s longer without one.
    os.sync()
    _settle()
    proc = subprocess.run([sys.executable, "-I", "-c", LAUNCHER, *tool.argv], capture_output=True)
    err = proc.stderr.decode(errors="replace").strip()
    if proc.returncode != 0:
        raise RuntimeError(f"the launcher failed: {err}")
    r = json.loads(proc.stdout)
    return Run(r["seconds"], r["max_rss"], r["returncode"], err, r["cpu"])


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat (None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _settle(quiet: float = 0.1, window: float = 0.1, limit: float = 3.0) -> None:
    """Untimed: wait until the CPUs are idle (busy under ``quiet`` over a ``window``), at most
    ``limit`` seconds.  A tool's work can outlive its process: a Dask cluster's workers release
    the last job's data, close its files and collect garbage after the client has gone, and the
    next tool timed (whichever it is) would share the cores with that."""
    start = time.perf_counter()
    before = _cpu_ticks()
    while before is not None and time.perf_counter() - start < limit:
        time.sleep(window)
        after = _cpu_ticks()
        if after is None:
            return
        busy, total = after[0] - before[0], after[1] - before[1]
        if total > 0 and busy / total < quiet:
            return
        before = after


def _remove(path: str):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def python_tool(name: str, code: str, *args: str, outputs=()) -> Tool:
    """A peer written as the short script a user would write (run with this interpreter)."""
    return Tool(name, [sys.executable, "-c", textwrap.dedent(code), *args], list(outputs))


def baseline_tool(tool: Tool, name: str = "sptool of --baseline") -> Tool:
    """``tool`` (an sptool row) run with the sptool of the --baseline checkout instead."""
    code = textwrap.dedent(BASELINE_CODE)
    # -P: no current directory first on the path, where the checkout's own sptool would win.
    return Tool(name, ["env", f"PYTHONPATH={BASELINE}", sys.executable, "-P", "-c", code, *tool.argv[1:]], tool.outputs)


def sptool_tool(*args: str, outputs=()) -> Tool:
    exe = os.path.join(os.path.dirname(sys.executable), "sptool")
    if not os.path.exists(exe):
        exe = shutil.which("sptool") or "sptool"
    return Tool("sptool", [exe, *args, "-q"], list(outputs))


# ---------------------------------------------------------------------------------------------
# The registry

@dataclass
class Benchmark:
    name: str
    description: str
    target: str
    prepare: Callable[[str, dict], dict]          # (data dir, size params) -> paths
    tools: Callable[[dict, str], list[Tool]]      # (paths, out dir) -> [sptool, peers...]
    skip: Callable[[], str | None] = lambda: None  # a reason to skip, or None
    check: Callable[[dict, str], str | None] | None = None  # after timing: a problem, or None
    # after timing: notes computed from the rows (a per-entry time, a ratio of peak RSS), given the paths
    report: Callable[[dict, list[dict]], list[str]] | None = None


BENCHMARKS: dict[str, Benchmark] = {}


def register(b: Benchmark) -> Benchmark:
    BENCHMARKS[b.name] = b
    return b


def _distinct(a: np.ndarray) -> np.ndarray:
    """np.unique(a) by a sort (numpy 2.4's np.unique took 5 s on 1M int64s where a sort takes 0.05 s)."""
    a = np.sort(a)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a


def _canonical_coords(rng: np.random.Generator, shape, n: int) -> np.ndarray:
    """n distinct coordinates of ``shape`` in row-major order, as an (n, K) int64 array."""
    total = int(np.prod(shape))
    if n > total // 2:
        raise ValueError(f"{n} coordinates are too many for shape {shape}")
    # Draws with replacement that leave about 2% more than n distinct values.
    draws = int(-total * np.log1p(-n / total) * 1.02) + 16
    flat = _distinct(rng.integers(0, total, size=draws))
    while len(flat) < n:
        flat = _distinct(np.concatenate([flat, rng.integers(0, total, size=n - len(flat) + 16)]))
    flat = np.sort(flat[rng.choice(len(flat), size=n, replace=False)])
    return np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)


def _write_sptool(path: str, coords: np.ndarray, values: np.ndarray, shape):
    import sptool

    t = sptool.SparseTensor(coords, values, shape, sort_order=tuple(range(len(shape))), unique=True)
    sptool.write(t, path)


# -- validate -----------------------------------------------------------------------------------

PEER_VALIDATE_READ = """
    import sys
    import pyarrow.parquet as pq
    pq.read_table(sys.argv[1])
"""

PEER_VALIDATE_NUMPY = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    path = sys.argv[1]
    meta = json.loads(pq.read_metadata(path).metadata[b"sptool"])
    table = pq.read_table(path)
    K, shape = meta["sparse_ndim"], meta["shape"]
    cols = [table.column(f"indices_{k}").to_numpy() for k in range(K)]
    problems = []
    if table.num_rows != meta["nnz"]:
        problems.append("nnz")
    for k, c in enumerate(cols):
        if len(c) and (c.min() < 0 or c.max() >= shape[k]):
            problems.append(f"bounds {k}")
    # Row-major order and uniqueness from adjacent differences: later dimensions only break a tie.
    less = np.zeros(len(cols[0]) - 1, dtype=bool)
    equal = np.ones(len(cols[0]) - 1, dtype=bool)
    for c in cols:
        d = np.diff(c)
        less |= equal & (d < 0)
        equal &= d == 0
    if less.any():
        problems.append("order")
    if meta["unique"] and equal.any():
        problems.append("duplicates")
    if table.column("values").null_count:
        problems.append("nulls")
    sys.exit(1 if problems else 0)
"""


def _tools_validate(paths: dict, out: str) -> list[Tool]:
    big = paths["big"]
    return [
        sptool_tool("validate", big),
        python_tool("pyarrow read_table", PEER_VALIDATE_READ, big),
        python_tool("read_table + numpy checks", PEER_VALIDATE_NUMPY, big),
    ]


def _prepare_validate(data: str, params: dict) -> dict:
    n = params["validate_nnz"]
    path = os.path.join(data, f"validate-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED)
        coords = _canonical_coords(rng, SHAPE_3D, n)
        _write_sptool(path, coords, rng.standard_normal(n), SHAPE_3D)
    return {"big": path, "rows": n}


register(Benchmark(
    "validate", "full validation of a canonical 3-D float64 tensor",
    "sptool within 1.5x of a plain pyarrow read_table", _prepare_validate, _tools_validate,
))


# -- convert-tns --------------------------------------------------------------------------------

PEER_TNS_ARROW = """
    import sys
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv
    import pyarrow.parquet as pq
    names = ["indices_0", "indices_1", "indices_2", "values"]
    types = {n: pa.int64() for n in names[:3]} | {"values": pa.float64()}
    t = csv.read_csv(sys.argv[1], read_options=csv.ReadOptions(column_names=names),
                     parse_options=csv.ParseOptions(delimiter=" "),
                     convert_options=csv.ConvertOptions(column_types=types))
    t = pa.table([pc.subtract(t[n], 1) for n in names[:3]] + [t["values"]], names=names)
    pq.write_table(t, sys.argv[2], compression="zstd")
"""

PEER_TNS_NUMPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    a = np.loadtxt(sys.argv[1], dtype=np.float64, ndmin=2)
    cols = [a[:, k].astype(np.int64) - 1 for k in range(a.shape[1] - 1)]
    t = pa.table(cols + [a[:, -1]], names=[f"indices_{k}" for k in range(len(cols))] + ["values"])
    pq.write_table(t, sys.argv[2], compression="zstd")
"""


# The floors convert cannot go below: reading the text (cat to /dev/null, from the page cache)
# and Arrow's multi-threaded CSV parse of it into a table, with nothing written.
FLOOR_TNS_PARSE = """
    import sys
    import pyarrow as pa
    import pyarrow.csv as csv
    names = ["indices_0", "indices_1", "indices_2", "values"]
    types = {n: pa.int64() for n in names[:3]} | {"values": pa.float64()}
    csv.read_csv(sys.argv[1], read_options=csv.ReadOptions(column_names=names),
                 parse_options=csv.ParseOptions(delimiter=" "),
                 convert_options=csv.ConvertOptions(column_types=types))
"""


def _convert_missing() -> str | None:
    try:
        rc = subprocess.run(sptool_tool("convert", "--help").argv[:-1], capture_output=True).returncode
    except OSError:
        rc = 127
    return None if rc == 0 else "convert not available"


def _tools_tns(paths: dict, out: str) -> list[Tool]:
    tns = paths["tns"]
    outs = [os.path.join(out, f"convert-{name}.parquet") for name in ("sptool", "arrow", "numpy")]
    return [
        sptool_tool("convert", tns, "-o", outs[0], outputs=[outs[0]]),
        python_tool("pyarrow.csv + write_table", PEER_TNS_ARROW, tns, outs[1], outputs=[outs[1]]),
        python_tool("numpy.loadtxt + write_table", PEER_TNS_NUMPY, tns, outs[2], outputs=[outs[2]]),
        Tool("I/O floor: cat the text", ["cat", tns], []),
        python_tool("I/O floor: pyarrow.csv parse only", FLOOR_TNS_PARSE, tns),
    ]


def _check_tns(paths: dict, out: str) -> str | None:
    import pyarrow.parquet as pq

    path = os.path.join(out, "convert-sptool.parquet")
    if not os.path.exists(path):
        return "sptool convert wrote no output"
    rows = pq.read_metadata(path).num_rows
    return None if rows == paths["rows"] else f"sptool convert wrote {rows} rows, expected {paths['rows']}"


def _write_tns(path: str, coords: np.ndarray, values: np.ndarray):
    """A 3-D FROSTT .tns at ``path`` of 0-based (n, 3) ``coords`` and their ``values``."""
    import pyarrow as pa
    import pyarrow.csv as csv

    coords = coords + 1
    table = pa.table([coords[:, 0], coords[:, 1], coords[:, 2], values], names=["i", "j", "k", "v"])
    tmp = path + ".tmp"
    # Arrow prints doubles in their shortest round-trip form, as FROSTT files usually are.
    csv.write_csv(table, tmp, csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    os.replace(tmp, path)


def _prepare_tns(data: str, params: dict) -> dict:
    n = params["tns_lines"]
    path = os.path.join(data, f"convert-{n}.tns")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 1)
        _write_tns(path, _canonical_coords(rng, SHAPE_3D, n), rng.standard_normal(n))
    return {"tns": path, "rows": n}


register(Benchmark(
    "convert-tns", "FROSTT .tns text (3-D, 1-based indices) to a Parquet file", "(none set yet)",
    _prepare_tns, _tools_tns, skip=_convert_missing, check=_check_tns,
))


# -- the same commands on a URL -----------------------------------------------------------------
# validate and convert of the files above named by a URL of another filesystem, against the plain
# path: the cost of reading (and writing) through a pyarrow filesystem's files instead of the local
# code.  The filesystem is pyarrow's SubTreeFileSystem over the data directory (sub://NAME), so the
# bytes come from the same page cache and only the route differs (an object store adds its latency
# on top).  Both runs go through the same launcher, which registers sub:// first.

URL_LAUNCHER = """
    import sys
    import pyarrow.fs as pafs
    from sptool.io import register_filesystem
    register_filesystem("sub", pafs.SubTreeFileSystem(sys.argv[1], pafs.LocalFileSystem()))
    from sptool.__main__ import run  # the script's own set-up, as the other rows have it
    sys.argv = ["sptool", *sys.argv[2:]]
    run()
"""


def _plain_and_url(data: str, command: list[str], outputs=()) -> list[Tool]:
    """The command with its files as plain paths, then as sub:// URLs (``{}`` marks a file's name
    relative to ``data``)."""
    plain = [a.format(os.path.join(data, "")) for a in command]
    url = [a.format("sub://") for a in command]
    return [python_tool("sptool, plain path", URL_LAUNCHER, data, *plain, "-q", outputs=[os.path.join(data, o)
                                                                                       for o in outputs]),
            python_tool("sptool, sub:// URL", URL_LAUNCHER, data, *url, "-q", outputs=[os.path.join(data, o)
                                                                                     for o in outputs])]


def _prepare_validate_stream(data: str, params: dict) -> dict:
    paths = _prepare_validate(data, params)
    stream = paths["big"][: -len(".parquet")] + ".arrows"
    if not os.path.exists(stream):
        subprocess.run(sptool_tool("convert", paths["big"], "-o", stream).argv, check=True)
    return {**paths, "stream": stream}


register(Benchmark(
    "validate-url", "full validation of the validate tensor named by a sub:// URL, against its plain path",
    "ratio (URL time / plain time) <= 1.1", _prepare_validate,
    lambda paths, out: _plain_and_url(os.path.dirname(paths["big"]),
                                      ["validate", "{}" + os.path.basename(paths["big"])]),
))
register(Benchmark(
    "validate-url-stream", "full validation of the validate tensor as an .arrows stream, sub:// URL against plain",
    "ratio (URL time / plain time) <= 1.1", _prepare_validate_stream,
    lambda paths, out: _plain_and_url(os.path.dirname(paths["stream"]),
                                      ["validate", "{}" + os.path.basename(paths["stream"])]),
))


def _tools_tns_url(paths: dict, out: str) -> list[Tool]:
    data = os.path.dirname(paths["tns"])
    target = os.path.relpath(os.path.join(out, "convert-url.parquet"), data)
    return _plain_and_url(data, ["convert", "{}" + os.path.basename(paths["tns"]), "-o", "{}" + target],
                          outputs=[target])


register(Benchmark(
    "convert-tns-url", "the .tns text of convert-tns read from and its Parquet written to sub:// URLs, against "
    "plain paths", "ratio (URL time / plain time) <= 1.1", _prepare_tns, _tools_tns_url, skip=_convert_missing,
))


# -- svmlight -----------------------------------------------------------------------------------
# The issue's benchmark: a generated ~200 MB svmlight file (at --size medium) to a Parquet file,
# against the loaders a user would otherwise run (which only load into memory), in two shapes:
# many short rows (10 entries of 100k features) and fewer long rows (500 of 1M).

SVM_SHAPES = {"short": (10, 100_000), "long": (500, 1_000_000)}
PEER_SVM_SKLEARN = """
    import sys
    from sklearn.datasets import load_svmlight_file
    X, y = load_svmlight_file(sys.argv[1])
"""

PEER_SVMLOADER = """
    import sys
    import svmloader
    X, y = svmloader.load_svmfile(sys.argv[1], zero_based=False)
"""

PEER_SVM_DUMP = """
    import sys
    import numpy as np
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file
    t = pq.read_table(sys.argv[1])
    rows, cols = (t.column(c).to_numpy().astype(np.int32) for c in ("indices_0", "indices_1"))
    y = np.load(sys.argv[2])
    X = sp.csr_matrix((t.column("values").to_numpy(), (rows, cols)), shape=(len(y), int(cols.max()) + 1))
    dump_svmlight_file(X, y, sys.argv[3], zero_based=False)
"""


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _write_svm_text(path: str, megabytes: int, per_row: int, n_features: int, seed: int):
    """Rows of Poisson(per_row) distinct sorted one-based ids with standard normal values in their
    shortest round-trip form, labels 0/1, until the file holds ``megabytes`` MB."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    rows = max(1, 2_000_000 // per_row)
    written, tmp = 0, path + ".tmp"
    with open(tmp, "wb") as f:
        while written < megabytes * 10**6:
            row = np.repeat(np.arange(rows), rng.poisson(per_row, rows))
            ids = rng.integers(0, n_features, len(row))
            order = np.lexsort((ids, row))
            row, ids = row[order], ids[order]
            keep = np.ones(len(ids), dtype=bool)
            keep[1:] = (ids[1:] != ids[:-1]) | (row[1:] != row[:-1])
            row, ids = row[keep], ids[keep] + 1
            offsets = np.zeros(rows + 1, dtype=np.int32)
            np.cumsum(np.bincount(row, minlength=rows), out=offsets[1:])
            words = pc.binary_join_element_wise(pc.cast(pa.array(ids), pa.string()),
                                                pc.cast(pa.array(rng.standard_normal(len(ids))), pa.string()), ":")
            features = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), words), " ")
            labels = pc.cast(pa.array(rng.integers(0, 2, rows)), pa.string())
            lines = pc.if_else(pa.array(np.diff(offsets) > 0), pc.binary_join_element_wise(labels, features, " "),
                               labels)
            data = ("\n".join(lines.to_pylist()) + "\n").encode()
            f.write(data)
            written += len(data)
    os.replace(tmp, path)


def _prepare_svm(shape_name: str):
    def prepare(data: str, params: dict) -> dict:
        per_row, n_features = SVM_SHAPES[shape_name]
        mb = params["svm_mb"]
        path = os.path.join(data, f"svmlight-{shape_name}-{mb}MB.svm")
        if not os.path.exists(path):
            _write_svm_text(path, mb, per_row, n_features, SEED + 7)
        return {"svm": path, "bytes": os.path.getsize(path), "per_row": per_row, "n_features": n_features}
    return prepare


def _tools_svm(paths: dict, out: str) -> list[Tool]:
    svm = paths["svm"]
    dst, labels = os.path.join(out, "svmlight-sptool.parquet"), os.path.join(out, "svmlight-labels.npy")
    tools = [
        sptool_tool("convert", svm, "-o", dst, "--labels", labels, outputs=[dst, labels]),
        python_tool("sklearn load_svmlight_file (memory only)", PEER_SVM_SKLEARN, svm),
    ]
    if _have("svmloader"):
        tools.append(python_tool("svmloader.load_svmfile (memory only)", PEER_SVMLOADER, svm))
    return tools


def _check_svm(paths: dict, out: str):
    import pyarrow.parquet as pq

    path = os.path.join(out, "svmlight-sptool.parquet")
    if not os.path.exists(path):
        return "sptool convert wrote no output"
    with open(paths["svm"], "rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    meta = json.loads(pq.read_metadata(path).metadata[b"sptool"])
    note = None if _have("svmloader") else "svmloader is not installed (pip install svmloader): that peer skipped"
    problem = None if meta["shape"][0] == lines else f"sptool wrote {meta['shape'][0]} rows for {lines} lines"
    return (problem, note) if note else problem


for _shape in SVM_SHAPES:
    register(Benchmark(
        f"svmlight-{_shape}", f"svmlight text ({SVM_SHAPES[_shape][0]} entries a row of {SVM_SHAPES[_shape][1]:,} "
        "features) to a Parquet file + labels .npy",
        ">= 5x sklearn, > 1x svmloader", _prepare_svm(_shape), _tools_svm, skip=_convert_missing, check=_check_svm,
    ))


def _prepare_svm_write(data: str, params: dict) -> dict:
    paths = _prepare_svm("short")(data, params)
    tensor, labels = paths["svm"] + ".parquet", paths["svm"] + ".labels.npy"
    if not os.path.exists(tensor):
        subprocess.run(sptool_tool("convert", paths["svm"], "-o", tensor, "--labels", labels).argv, check=True)
    return {"tensor": tensor, "labels": labels, "bytes": paths["bytes"]}


def _tools_svm_write(paths: dict, out: str) -> list[Tool]:
    a, b = os.path.join(out, "write-sptool.svm"), os.path.join(out, "write-sklearn.svm")
    return [
        sptool_tool("convert", paths["tensor"], "-o", a, "--labels", paths["labels"], outputs=[a]),
        python_tool("sklearn dump_svmlight_file", PEER_SVM_DUMP, paths["tensor"], paths["labels"], b, outputs=[b]),
    ]


def _check_svm_write(paths: dict, out: str):
    a = os.path.join(out, "write-sptool.svm")
    size = os.path.getsize(a) if os.path.exists(a) else 0
    return (None if size else "sptool wrote no svmlight file"), f"sptool's svmlight output: {size / 1e6:.0f} MB"


register(Benchmark(
    "svmlight-write", "a Parquet matrix + labels .npy to svmlight text (the short-rows file read back)",
    "MB/s reported against the reading direction", _prepare_svm_write, _tools_svm_write, skip=_convert_missing,
    check=_check_svm_write,
))


# -- todense ------------------------------------------------------------------------------------

PEER_TODENSE_SCIPY = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    path = sys.argv[1]
    shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
    t = pq.read_table(path)
    coo = sp.coo_array((t.column("values").to_numpy(),
                        (t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy())), shape=shape)
    np.save(sys.argv[2], coo.toarray())
"""


# The writing no dense output avoids: np.save of as many zeros (pages of no memory, so only the write).
FLOOR_TODENSE = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    shape = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sptool"])["shape"]
    np.save(sys.argv[2], np.zeros(shape))
"""


def _tools_todense(paths: dict, out: str) -> list[Tool]:
    src = paths["matrix"]
    a, b, c = (os.path.join(out, f"todense-{x}.npy") for x in ("sptool", "scipy", "floor"))
    return [
        sptool_tool("todense", src, "-o", a, outputs=[a]),
        python_tool("scipy coo_array.toarray + np.save", PEER_TODENSE_SCIPY, src, b, outputs=[b]),
        python_tool("I/O floor: np.save of np.zeros of the shape", FLOOR_TODENSE, src, c, outputs=[c]),
    ]


def _check_todense(paths: dict, out: str) -> str | None:
    a = np.load(os.path.join(out, "todense-sptool.npy"), mmap_mode="r")
    b = np.load(os.path.join(out, "todense-scipy.npy"), mmap_mode="r")
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"sptool wrote {a.dtype}{a.shape}, scipy {b.dtype}{b.shape}"
    step = 1 << 20
    fa, fb = a.reshape(-1), b.reshape(-1)
    for i in range(0, fa.size, step):
        if not np.array_equal(fa[i:i + step], fb[i:i + step]):
            return "sptool's dense array differs from scipy's"
    return None


def _prepare_todense(data: str, params: dict) -> dict:
    shape, n = params["dense_shape"], params["dense_nnz"]
    path = os.path.join(data, f"todense-{shape[0]}x{shape[1]}-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 2)
        coords = _canonical_coords(rng, shape, n)
        _write_sptool(path, coords, rng.standard_normal(n), shape)
    return {"matrix": path, "rows": n, "dense_bytes": int(np.prod(shape)) * 8}


register(Benchmark(
    "todense", "2-D float64 tensor to a dense .npy", "sptool at least as fast as scipy",
    _prepare_todense, _tools_todense, check=_check_todense,
))


def _prepare_todense_square(data: str, params: dict) -> dict:
    rows, cols, n = params["square_dense"]
    return _prepare_todense(data, {"dense_shape": (rows, cols), "dense_nnz": n})


# The issue's case: 20000 x 20000 with 4M entries, a 3 GiB output (--size large; 800 MB at medium).
register(Benchmark(
    "todense-square", "square 2-D float64 matrix, 1% dense, to a dense .npy (3 GiB at --size large)",
    "ratio >= 1.25 against scipy", _prepare_todense_square, _tools_todense, check=_check_todense,
))


# -- reorder ------------------------------------------------------------------------------------

PEER_REORDER_DUCKDB = """
    import sys
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{sys.argv[1]}'").fetchall()]
    keys = ", ".join(n for n in names if n.startswith("indices_"))
    con.execute(f"COPY (SELECT * FROM '{sys.argv[1]}' ORDER BY {keys}) TO '{sys.argv[2]}' (FORMAT parquet)")
"""

# The I/O floor: read the input and write the sorted rows with sptool's own writer settings
# (the sorted table is read from sptool's output beforehand, so no sort is timed).
PEER_REORDER_FLOOR = """
    import json, sys
    import pyarrow.parquet as pq
    from sptool.format import TensorMeta
    from sptool.io.sink import parquet_writer_options
    pq.read_table(sys.argv[1])
    table = pq.read_table(sys.argv[2])
    meta = TensorMeta.from_dict(json.loads(pq.read_metadata(sys.argv[2]).metadata[b"sptool"]))
    pq.write_table(table, sys.argv[3], row_group_size=131072, **parquet_writer_options(meta, table["values"]))
"""


PEER_REORDER_POLARS = """
    import sys
    import polars as pl
    frame = pl.scan_parquet(sys.argv[1])
    keys = [c for c in frame.collect_schema().names() if c.startswith("indices_")]
    frame.sort(keys).sink_parquet(sys.argv[2])
"""

# The second shape of the sort-based benchmarks: a wide, near-square matrix of int32 values.
SHAPE_2D = (300_000, 300_000)


def _prepare_reorder(data: str, params: dict) -> dict:
    from sptool.format import TensorMeta
    from sptool.io import open_sink

    n = params["reorder_nnz"]
    path = os.path.join(data, f"reorder-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 3)
        meta = TensorMeta(shape=SHAPE_REORDER, sparse_ndim=3, value_type="float64")
        with open_sink(path, meta, unique_claim=False) as sink:
            for start in range(0, n, 1 << 21):
                m = min(1 << 21, n - start)
                keys = np.stack([rng.integers(0, d, size=m) for d in SHAPE_REORDER]).astype(np.int64)
                sink.write(keys, rng.standard_normal(m))
    sorted_path = os.path.join(data, f"reorder-{n}-sorted.parquet")
    if not os.path.exists(sorted_path):
        subprocess.run(sptool_tool("reorder", path, "-o", sorted_path).argv, check=True)
    # The memory benchmark: --memory so small that the input is 8x the budget (rows of 32 bytes).
    budget = max(16 << 20, n * 32 // 8)
    return {"unsorted": path, "sorted": sorted_path, "rows": n, "budget": budget}


def _tools_reorder(paths: dict, out: str) -> list[Tool]:
    src = paths["unsorted"]
    a, b, c, d = (os.path.join(out, f"reorder-{x}.parquet") for x in ("sptool", "duckdb", "floor", "polars"))
    return [
        sptool_tool("reorder", src, "-o", a, outputs=[a]),
        python_tool("duckdb COPY ... ORDER BY (2 threads)", PEER_REORDER_DUCKDB, src, b, outputs=[b]),
        python_tool("polars scan_parquet().sort().sink_parquet()", PEER_REORDER_POLARS, src, d, outputs=[d]),
        python_tool("I/O floor: pyarrow read + write", PEER_REORDER_FLOOR, src, paths["sorted"], c, outputs=[c]),
    ]


def _check_reorder(paths: dict, out: str) -> tuple[str | None, str]:
    import sptool

    report = sptool.validate(os.path.join(out, "reorder-sptool.parquet"), metadata_only=True)
    problem = None if report.valid else f"sptool's output is invalid: {report.codes}"
    return problem, _output_sizes(out, "reorder", ("sptool", "duckdb", "polars", "floor"), paths["rows"])


def _output_sizes(out: str, stem: str, tools, rows: int) -> str:
    """The output's bytes per entry for each tool that wrote one (the write side's other cost)."""
    sizes = []
    for tool in tools:
        path = os.path.join(out, f"{stem}-{tool}.parquet")
        if os.path.exists(path):
            sizes.append(f"{tool} {_size_of(path) / rows:.2f}")
    return "output bytes per entry: " + ", ".join(sizes)


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


register(Benchmark(
    "reorder", "sort an unsorted 3-D float64 tensor row-major, file to file",
    "ratio >= 1.67 against DuckDB, >= 4 against Polars, >= 1.43 against the I/O floor",
    _prepare_reorder, _tools_reorder, check=_check_reorder,
))


def _tools_reorder_memory(paths: dict, out: str) -> list[Tool]:
    src = paths["unsorted"]
    a = os.path.join(out, "reorder-mem-sptool.parquet")
    return [sptool_tool("reorder", src, "-o", a, "--memory", str(paths["budget"]), outputs=[a])]


register(Benchmark(
    "reorder-memory", "reorder with --memory at 1/8 of the input's in-memory size (many spilled runs)",
    "peak RSS at most the --memory budget + 150 MB", _prepare_reorder, _tools_reorder_memory,
))


# -- structural commands against their I/O floor ---------------------------------------------------
# Each floor is pyarrow reading the same input(s) and writing the same output rows with sptool's
# writer settings: the cost of the I/O alone (target: sptool within 1.5x, i.e. ratio >= 0.67).

FLOOR_PRELUDE = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from sptool.format import TensorMeta
    from sptool.io.sink import parquet_writer_options

    def meta_of(path):
        return TensorMeta.from_dict(json.loads(pq.read_metadata(path).metadata[b"sptool"]))

    def write(table, path, meta):
        pq.write_table(table, path, row_group_size=131072, **parquet_writer_options(meta, table["values"]))
"""

FLOOR_CONCAT = FLOOR_PRELUDE + """
    a, b = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
    write(pa.concat_tables([a, b]), sys.argv[3], meta_of(sys.argv[1]))
"""

FLOOR_SPLIT = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    meta = meta_of(sys.argv[1])
    edges = np.linspace(0, meta.shape[0], 5).astype(int)
    i0 = t.column("indices_0")
    for i in range(4):
        piece = t.filter(pc.and_(pc.greater_equal(i0, int(edges[i])), pc.less(i0, int(edges[i + 1]))))
        write(piece, sys.argv[2].replace("{i}", str(i)), meta)
"""

FLOOR_SAME = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    write(t, sys.argv[2], meta_of(sys.argv[1]))
"""

FLOOR_RETAIN = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    write(t.filter(pc.greater(t.column("values"), 0)), sys.argv[2], meta_of(sys.argv[1]))
"""

FLOOR_SLICE = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    lo, hi = int(sys.argv[3]), int(sys.argv[4])
    i0 = t.column("indices_0")
    t = t.filter(pc.and_(pc.greater_equal(i0, lo), pc.less(i0, hi)))
    t = t.set_column(0, "indices_0", pc.subtract(t.column(0), lo))
    write(t, sys.argv[2], meta_of(sys.argv[1]))
"""


def _prepare_structural(data: str, params: dict) -> dict:
    paths = _prepare_validate(data, params)
    halves = [os.path.join(data, f"half-{params['validate_nnz']}-{i}.parquet") for i in range(2)]
    if not all(os.path.exists(h) for h in halves):
        pattern = os.path.join(data, f"half-{params['validate_nnz']}-{{i}}.parquet")
        subprocess.run(sptool_tool("split", paths["big"], "--axis", "0", "--num", "2", "-o", pattern).argv,
                       check=True)
    paths["halves"] = halves
    return paths


def _out(out: str, name: str) -> str:
    return os.path.join(out, name)


def _tools_concat(paths: dict, out: str) -> list[Tool]:
    a, b = _out(out, "concat-sptool.parquet"), _out(out, "concat-floor.parquet")
    return [sptool_tool("concat", *paths["halves"], "--axis", "0", "-o", a, outputs=[a]),
            python_tool("I/O floor: pyarrow read both + write", FLOOR_CONCAT, *paths["halves"], b, outputs=[b])]


def _tools_split(paths: dict, out: str) -> list[Tool]:
    a, b = _out(out, "split-sptool-{i}.parquet"), _out(out, "split-floor-{i}.parquet")
    outs = lambda p: [p.replace("{i}", str(i)) for i in range(4)]  # noqa: E731
    return [sptool_tool("split", paths["big"], "--axis", "0", "--num", "4", "-o", a, outputs=outs(a)),
            python_tool("I/O floor: pyarrow read + write 4 pieces", FLOOR_SPLIT, paths["big"], b, outputs=outs(b))]


def _tools_reshape(paths: dict, out: str) -> list[Tool]:
    a, b = _out(out, "reshape-sptool.parquet"), _out(out, "reshape-floor.parquet")
    shape = f"{SHAPE_3D[0] * SHAPE_3D[1]},{SHAPE_3D[2]}"
    return [sptool_tool("reshape", paths["big"], "--shape", shape, "-o", a, outputs=[a]),
            python_tool("I/O floor: pyarrow read + write", FLOOR_SAME, paths["big"], b, outputs=[b])]


def _tools_retain(paths: dict, out: str) -> list[Tool]:
    a, b = _out(out, "retain-sptool.parquet"), _out(out, "retain-floor.parquet")
    return [sptool_tool("retain", paths["big"], "--where", "values > 0", "-o", a, outputs=[a]),
            python_tool("I/O floor: pyarrow read + filter + write", FLOOR_RETAIN, paths["big"], b, outputs=[b])]


def _slice_box() -> tuple[int, int]:
    lo = SHAPE_3D[0] // 2
    return lo, lo + max(SHAPE_3D[0] // 100, 1)  # 1% of the leading dimension, all of the others


def _tools_slice(paths: dict, out: str) -> list[Tool]:
    a, b = _out(out, "slice-sptool.parquet"), _out(out, "slice-floor.parquet")
    lo, hi = _slice_box()
    start, size = f"{lo},0,0", f"{hi - lo},-1,-1"
    return [sptool_tool("slice", paths["big"], "--start", start, "--size", size, "-o", a, outputs=[a]),
            python_tool("pyarrow read whole file + filter + write", FLOOR_SLICE, paths["big"], b, str(lo), str(hi),
                        outputs=[b])]


def _check_slice(paths: dict, out: str) -> str | None:
    import sptool

    lo, hi = _slice_box()
    r = sptool.slice_(paths["big"], _out(out, "slice-check.parquet"), start=(lo, 0, 0), size=(hi - lo, -1, -1))
    _remove(_out(out, "slice-check.parquet"))
    frac = r["bytes_read"] / r["bytes_total"]
    note = (f"read {r['row_groups_read']} of {r['row_groups_total']} row groups, "
            f"{r['bytes_read'] / 2**20:.1f} of {r['bytes_total'] / 2**20:.1f} MiB ({frac:.1%}; target < 10%)")
    return note if frac >= 0.10 else None, note


for _name, _desc, _tools in (
    ("concat", "concatenate two canonical halves along axis 0 (an append)", _tools_concat),
    ("split", "split a canonical 3-D tensor into 4 pieces along axis 0", _tools_split),
    ("reshape", "reshape a canonical 3-D tensor to 2-D (row order kept)", _tools_reshape),
    ("retain", "keep the entries with values > 0 (--where)", _tools_retain),
):
    register(Benchmark(_name, _desc, "sptool within 1.5x of the I/O floor (ratio >= 0.67)", _prepare_structural,
                       _tools))

register(Benchmark(
    "slice", "a box of 1% of the leading dimension from a row-major sorted file",
    "reads under 10% of the file's bytes (row-group pruning)", _prepare_structural, _tools_slice,
    check=_check_slice,
))


# -- math: reduce, add, matmul ------------------------------------------------------------------

PEER_REDUCE_DUCKDB = """
    import sys
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{sys.argv[1]}'").fetchall()]
    kept = ", ".join(n for n in names if n.startswith("indices_") and n != "indices_1")
    con.execute(f"COPY (SELECT {kept}, sum(values) AS values FROM '{sys.argv[1]}' "
                f"GROUP BY {kept}) TO '{sys.argv[2]}' (FORMAT parquet)")
"""

PEER_REDUCE_PYDATA = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sparse
    t = pq.read_table(sys.argv[1])
    shape = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sptool"])["shape"]
    coords = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)])
    s = sparse.COO(coords, t.column("values").to_numpy(), shape=shape, sorted=True, has_duplicates=False)
    r = s.sum(axis=1)
    pq.write_table(pa.table({"indices_0": r.coords[0], "indices_1": r.coords[1], "values": r.data}), sys.argv[2])
"""


PEER_REDUCE_POLARS = """
    import sys
    import polars as pl
    frame = pl.scan_parquet(sys.argv[1])
    kept = [c for c in frame.collect_schema().names() if c.startswith("indices_") and c != "indices_1"]
    frame.group_by(kept).agg(pl.col("values").sum()).sink_parquet(sys.argv[2])
"""


def _tools_reduce(paths: dict, out: str) -> list[Tool]:
    src = paths["big"]
    a, b, c, d = (_out(out, f"reduce-{x}.parquet") for x in ("sptool", "duckdb", "pydata", "polars"))
    tools = [sptool_tool("reduce", src, "--op", "sum", "--axis", "1", "-o", a, outputs=[a]),
             python_tool("duckdb GROUP BY to Parquet (2 threads)", PEER_REDUCE_DUCKDB, src, b, outputs=[b]),
             python_tool("polars group_by().sum() to Parquet", PEER_REDUCE_POLARS, src, d, outputs=[d])]
    if paths.get("ndim", 3) == 3:
        tools.append(python_tool("pydata sparse COO.sum(axis=1)", PEER_REDUCE_PYDATA, src, c, outputs=[c]))
    return tools


register(Benchmark(
    "reduce", "sum over axis 1 of a canonical 3-D float64 tensor, file to file",
    "ratio >= 2.5 against DuckDB, >= 3.3 against Polars, >= 3 against pydata sparse",
    _prepare_validate, _tools_reduce,
))

PEER_ADD_DUCKDB = """
    import sys
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{sys.argv[1]}'").fetchall()]
    keys = [n for n in names if n.startswith("indices_")]
    pick = ", ".join(f"coalesce(a.{k}, b.{k}) AS {k}" for k in keys)
    order = ", ".join(str(i + 1) for i in range(len(keys)))
    con.execute(f\"\"\"COPY (SELECT {pick}, coalesce(a.values, 0) + coalesce(b.values, 0) AS values
                        FROM '{sys.argv[1]}' a FULL OUTER JOIN '{sys.argv[2]}' b USING ({", ".join(keys)})
                        ORDER BY {order}) TO '{sys.argv[3]}' (FORMAT parquet)\"\"\")
"""

PEER_ADD_PYDATA = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sparse
    def load(path):
        t = pq.read_table(path)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        coords = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)])
        return sparse.COO(coords, t.column("values").to_numpy(), shape=shape, sorted=True, has_duplicates=False)
    r = load(sys.argv[1]) + load(sys.argv[2])
    cols = {f"indices_{k}": r.coords[k] for k in range(3)}
    pq.write_table(pa.table({**cols, "values": r.data}), sys.argv[3])
"""


def _prepare_add(data: str, params: dict) -> dict:
    n = params["add_nnz"]
    paths = {}
    for i, name in enumerate(("a", "b")):
        path = os.path.join(data, f"add-{n}-{name}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED + 10 + i)
            coords = _canonical_coords(rng, SHAPE_3D, n)
            _write_sptool(path, coords, rng.standard_normal(n), SHAPE_3D)
        paths[name] = path
    paths["rows"] = n
    return paths


PEER_ADD_POLARS = """
    import sys
    import polars as pl
    a, b = pl.scan_parquet(sys.argv[1]), pl.scan_parquet(sys.argv[2])
    keys = [c for c in a.collect_schema().names() if c.startswith("indices_")]
    total = pl.col("values").fill_null(0) + pl.col("values_b").fill_null(0)
    (a.join(b, on=keys, how="full", coalesce=True, suffix="_b").select(*keys, total.alias("values"))
     .sort(keys).sink_parquet(sys.argv[3]))
"""


def _tools_add(paths: dict, out: str) -> list[Tool]:
    a, b = paths["a"], paths["b"]
    o1, o2, o3, o4 = (_out(out, f"add-{x}.parquet") for x in ("sptool", "duckdb", "pydata", "polars"))
    tools = [sptool_tool("add", a, b, "-o", o1, outputs=[o1]),
             python_tool("duckdb FULL OUTER JOIN + coalesce, ordered", PEER_ADD_DUCKDB, a, b, o2, outputs=[o2]),
             python_tool("polars full join + fill_null, sorted", PEER_ADD_POLARS, a, b, o4, outputs=[o4])]
    if paths.get("ndim", 3) == 3:
        tools.append(python_tool("pydata sparse a + b", PEER_ADD_PYDATA, a, b, o3, outputs=[o3]))
    return tools


register(Benchmark(
    "add", "sparse + sparse of two canonical 3-D float64 tensors, file to file",
    "ratio >= 2.5 against DuckDB, >= 5 against Polars, >= 3 against pydata sparse",
    _prepare_add, _tools_add,
))

def _prepare_2d_int32(kind: str):
    """The wide 2-D int32 shape of reorder (unsorted), reduce (canonical) and add (two canonical)."""
    def prepare(data: str, params: dict) -> dict:
        n = params["reorder_nnz" if kind == "reorder" else "validate_nnz" if kind == "reduce" else "add_nnz"]
        names = ("a", "b") if kind == "add" else ("x",)
        paths = {}
        for i, name in enumerate(names):
            path = os.path.join(data, f"{kind}-2d-int32-{n}-{name}.parquet")
            if not os.path.exists(path):
                rng = np.random.default_rng(SEED + 80 + i)
                values = rng.integers(-1000, 1000, n, dtype=np.int32)
                if kind == "reorder":
                    import sptool

                    coords = np.stack([rng.integers(0, d, n) for d in SHAPE_2D], axis=1)
                    sptool.write(sptool.SparseTensor(coords, values, SHAPE_2D), path)
                else:
                    _write_sptool(path, _canonical_coords(rng, SHAPE_2D, n), values, SHAPE_2D)
            paths[name] = path
        if kind == "reorder":
            paths = {"unsorted": paths["x"], "sorted": None}
        elif kind == "reduce":
            paths = {"big": paths["x"]}
        return {**paths, "rows": n, "ndim": 2}
    return prepare


def _tools_reorder_2d(paths: dict, out: str) -> list[Tool]:
    return [t for t in _tools_reorder({**paths, "sorted": paths["unsorted"]}, out) if not t.name.startswith("I/O")]


register(Benchmark(
    "reorder-2d-int32", "sort an unsorted 300k x 300k int32 matrix row-major, file to file",
    "sptool at least as fast as DuckDB and Polars", _prepare_2d_int32("reorder"), _tools_reorder_2d,
    check=lambda p, o: _check_reorder(p, o),
))
register(Benchmark(
    "reduce-2d-int32", "sum over axis 1 of a canonical 300k x 300k int32 matrix, file to file",
    "sptool at least as fast as DuckDB and Polars", _prepare_2d_int32("reduce"), _tools_reduce,
))
register(Benchmark(
    "add-2d-int32", "sparse + sparse of two canonical 300k x 300k int32 matrices, file to file",
    "sptool at least as fast as DuckDB and Polars", _prepare_2d_int32("add"), _tools_add,
))

PEER_MATMUL_SCIPY = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    t = pq.read_table(sys.argv[1])
    shape = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sptool"])["shape"]
    a = sp.coo_array((t.column("values").to_numpy(), (t.column("indices_0").to_numpy(),
                      t.column("indices_1").to_numpy())), shape=shape).tocsr()
    np.save(sys.argv[3], a @ np.load(sys.argv[2]))
"""


def _prepare_matmul(data: str, params: dict) -> dict:
    m, k, n = params["matmul"]
    path = os.path.join(data, f"matmul-{m}x{k}-{n}.parquet")
    dense = os.path.join(data, f"matmul-dense-{k}x16.npy")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 20)
        coords = _canonical_coords(rng, (m, k), n)
        _write_sptool(path, coords, rng.standard_normal(n), (m, k))
    if not os.path.exists(dense):
        np.save(dense, np.random.default_rng(SEED + 21).standard_normal((k, 16)))
    return {"a": path, "b": dense, "rows": n}


def _tools_matmul(paths: dict, out: str) -> list[Tool]:
    o1, o2 = _out(out, "matmul-sptool.npy"), _out(out, "matmul-scipy.npy")
    return [sptool_tool("matmul", paths["a"], paths["b"], "-o", o1, outputs=[o1]),
            python_tool("scipy load + tocsr + @ + np.save", PEER_MATMUL_SCIPY, paths["a"], paths["b"], o2,
                        outputs=[o2])]


def _check_matmul(paths: dict, out: str) -> str | None:
    a, b = np.load(_out(out, "matmul-sptool.npy")), np.load(_out(out, "matmul-scipy.npy"))
    return None if np.allclose(a, b) else "sptool's product differs from scipy's"


register(Benchmark(
    "matmul", "sparse (rows x 100k) @ dense (100k x 16), to a dense .npy",
    "sptool at least as fast as scipy (ratio >= 1)", _prepare_matmul, _tools_matmul, check=_check_matmul,
))


PEER_SPGEMM_SCIPY = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    def load(path):
        t = pq.read_table(path)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        return sp.coo_array((t.column("values").to_numpy(), (t.column("indices_0").to_numpy(),
                             t.column("indices_1").to_numpy())), shape=shape).tocsr()
    c = (load(sys.argv[1]) @ load(sys.argv[2])).tocoo()
    c.sum_duplicates()
    pq.write_table(pa.table({"indices_0": c.row.astype(np.int64), "indices_1": c.col.astype(np.int64),
                             "values": c.data}), sys.argv[3])
"""


def _prepare_spgemm(data: str, params: dict) -> dict:
    m, k, n, nnz_a, nnz_b, budget = params["spgemm"]
    paths = {"budget": budget, "rows": nnz_a + nnz_b}
    for name, shape, nnz, seed in (("a", (m, k), nnz_a, 30), ("b", (k, n), nnz_b, 31)):
        path = os.path.join(data, f"spgemm-{name}-{shape[0]}x{shape[1]}-{nnz}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED + seed)
            _write_sptool(path, _canonical_coords(rng, shape, nnz), rng.standard_normal(nnz), shape)
        paths[name] = path
    return paths


def _tools_spgemm(paths: dict, out: str) -> list[Tool]:
    o1, o2 = _out(out, "spgemm-sptool.parquet"), _out(out, "spgemm-scipy.parquet")
    return [sptool_tool("matmul", paths["a"], paths["b"], "-o", o1, "--memory", paths["budget"], outputs=[o1]),
            python_tool("scipy load + tocsr + @ + write (in memory)", PEER_SPGEMM_SCIPY, paths["a"], paths["b"], o2,
                        outputs=[o2])]


def _check_spgemm(paths: dict, out: str) -> str | None:
    import pyarrow.parquet as pq

    a, b = pq.read_table(_out(out, "spgemm-sptool.parquet")), pq.read_table(_out(out, "spgemm-scipy.parquet"))
    same = a.num_rows == b.num_rows and all(
        np.array_equal(a.column(c).to_numpy(), b.column(c).to_numpy()) for c in ("indices_0", "indices_1"))
    close = same and np.allclose(a.column("values").to_numpy(), b.column("values").to_numpy())
    note = f"product of {a.num_rows:,} entries; B as CSR needs about {_csr_bytes(paths) / 2**20:.0f} MiB"
    return (None if close else "sptool's product differs from scipy's"), note


def _csr_bytes(paths: dict) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(paths["b"]).num_rows * 24 * 2


register(Benchmark(
    "spgemm-memory", "sparse @ sparse with B over half of --memory (B taken in slabs), to a sparse tensor",
    "peak RSS at most the --memory budget + 150 MB; product equal to scipy's", _prepare_spgemm, _tools_spgemm,
    check=_check_spgemm,
))


# -- an in-memory SparseTensor written (the API) --------------------------------------------------

WRITE_SPTOOL = """
    import sys
    import numpy as np
    import sptool
    idx, values = np.load(sys.argv[1]), np.load(sys.argv[2])
    shape = tuple(int(s) for s in sys.argv[3].split(","))
    sptool.write(sptool.SparseTensor(idx, values, shape), sys.argv[4])
"""
WRITE_PYARROW = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    idx, values = np.load(sys.argv[1]), np.load(sys.argv[2])
    columns = {f"indices_{k}": idx[:, k] for k in range(idx.shape[1])}
    pq.write_table(pa.table({**columns, "values": values}), sys.argv[4])
"""


def _prepare_tensor_write(data: str, params: dict, *, name: str, shape: tuple, sort: bool) -> dict:
    n = params["reorder_nnz"]
    base = os.path.join(data, f"write-{name}-{n}")
    if not os.path.exists(base + "-values.npy"):
        rng = np.random.default_rng(SEED + 9)
        idx = np.stack([rng.integers(0, d, n) for d in shape], axis=1)
        if sort:
            idx = idx[np.lexsort(idx.T[::-1])]
        np.save(base + "-indices.npy", idx)
        np.save(base + "-values.npy", rng.standard_normal(n))
    return {"indices": base + "-indices.npy", "values": base + "-values.npy", "shape": ",".join(map(str, shape)),
            "rows": n}


def _tools_tensor_write(paths: dict, out: str) -> list[Tool]:
    a, b = _out(out, "write-sptool.parquet"), _out(out, "write-pyarrow.parquet")
    args = (paths["indices"], paths["values"], paths["shape"])
    return [python_tool("sptool (SparseTensor + sptool.write)", WRITE_SPTOOL, *args, a, outputs=[a]),
            python_tool("pyarrow write_table", WRITE_PYARROW, *args, b, outputs=[b])]


for _name, _shape, _sort, _desc in (
    ("write-unsorted", (1_000_000, 100_000), False, "SparseTensor(indices, values, shape) of unsorted entries, "
     "written to Parquet"),
    ("write-sorted", SHAPE_REORDER, True, "SparseTensor of row-major entries (3-D), written to Parquet"),
):
    register(Benchmark(_name, _desc, "sptool no slower than pyarrow's write_table (ratio >= 1)",
                       lambda data, params, _n=_name, _s=_shape, _o=_sort: _prepare_tensor_write(
                           data, params, name=_n, shape=_s, sort=_o), _tools_tensor_write))


# -- TFRecord Examples -----------------------------------------------------------------

# Ids per size, and the two shapes of the data: many short Examples (0-20 ids each, as click logs)
# and fewer long ones (0-200 ids).  The files are written by the protobuf package with google-crc32c
# framing (the test extra), not by sptool.
TFRECORD_IDS = {"small": 2_000_000, "medium": 10_000_000, "large": 10_000_000}
TFRECORD_SHAPES = {"short": (20, 100_000), "long": (200, 1_000_000)}  # max ids per Example, vocab size
TESTS = os.path.join(os.path.dirname(HERE), "tests")

PEER_TFRECORD_PROTOBUF = """
    import struct, sys
    import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    import google_crc32c
    sys.path.insert(0, sys.argv[4])
    from tfrecord_oracle import Example  # tf.train.Example built by the protobuf package
    def masked(b):
        c = google_crc32c.value(b)
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    data = open(sys.argv[1], "rb").read()
    rows, ids, vals, pos = [], [], [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        assert struct.unpack_from("<I", data, pos + 8)[0] == masked(data[pos:pos + 8])
        body = data[pos + 12:pos + 12 + n]
        assert struct.unpack_from("<I", data, pos + 12 + n)[0] == masked(body)
        f = Example.FromString(body).features.feature
        i = f["ids"].int64_list.value
        ids.extend(i); vals.extend(f["values"].float_list.value); rows.append(len(i))
        pos += 16 + n
    rows = np.repeat(np.arange(len(rows)), rows)
    ids, vals = np.array(ids, dtype=np.int64), np.array(vals, dtype=np.float32)
    order = np.lexsort((ids, rows))
    pq.write_table(pa.table({"indices_0": rows[order], "indices_1": ids[order], "values": vals[order]}),
                   sys.argv[2], compression="zstd")
"""

PEER_TFRECORD_TF = """
    import sys
    import pyarrow as pa, pyarrow.parquet as pq
    import tensorflow as tf
    spec = {"ids": tf.io.VarLenFeature(tf.int64), "values": tf.io.VarLenFeature(tf.float32)}
    writer, base = None, 0
    for batch in tf.data.TFRecordDataset(sys.argv[1]).batch(100_000):
        p = tf.io.parse_example(batch, spec)
        m = tf.compat.v1.sparse_merge(p["ids"], p["values"], int(sys.argv[3]))
        idx = m.indices.numpy()
        t = pa.table({"indices_0": idx[:, 0] + base, "indices_1": idx[:, 1], "values": m.values.numpy()})
        base += int(batch.shape[0])
        writer = writer or pq.ParquetWriter(sys.argv[2], t.schema, compression="zstd")
        writer.write_table(t)
    writer.close()
"""

PEER_TFRECORD_WRITE_PROTOBUF = """
    import struct, sys
    import numpy as np, pyarrow.parquet as pq
    import google_crc32c
    sys.path.insert(0, sys.argv[3])
    from tfrecord_oracle import Example
    def masked(b):
        c = google_crc32c.value(b)
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    t = pq.read_table(sys.argv[1])
    rows, ids, vals = (t.column(c).to_numpy() for c in ("indices_0", "indices_1", "values"))
    n_rows = int(sys.argv[4])
    starts = np.searchsorted(rows, np.arange(n_rows + 1))
    with open(sys.argv[2], "wb") as out:
        for r in range(n_rows):
            a, b = starts[r], starts[r + 1]
            ex = Example()
            f = ex.features.feature
            f["ids"].int64_list.value.extend(ids[a:b].tolist())
            f["values"].float_list.value.extend(vals[a:b].tolist())
            body = ex.SerializeToString()
            head = struct.pack("<Q", len(body))
            out.write(head + struct.pack("<I", masked(head)) + body + struct.pack("<I", masked(body)))
"""


def _tensorflow_present() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def _tfrecord_missing() -> str | None:
    import importlib.util

    for module in ("google", "google_crc32c"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install '.[test]': protobuf, google-crc32c)"
    return _convert_missing()


def _prepare_tfrecord(shape: str):
    def prepare(data: str, params: dict) -> dict:
        sys.path.insert(0, TESTS)
        import tfrecord_oracle

        total = TFRECORD_IDS[os.path.basename(data)]
        most, vocab = TFRECORD_SHAPES[shape]
        path = os.path.join(data, f"tfrecord-{shape}-{total}.tfrecord")
        rng = np.random.default_rng(SEED + 30)
        counts = rng.integers(0, most + 1, size=4 * total // most)
        counts = counts[: int(np.searchsorted(np.cumsum(counts), total)) + 1]
        n = int(counts.sum())
        if not os.path.exists(path):
            ids = rng.integers(0, vocab, size=n)
            vals = rng.standard_normal(n).astype(np.float32)
            starts = np.concatenate([[0], np.cumsum(counts)])
            records = []
            for i in range(len(counts)):
                ex = tfrecord_oracle.Example()
                f = ex.features.feature
                f["ids"].int64_list.value.extend(ids[starts[i]:starts[i + 1]].tolist())
                f["values"].float_list.value.extend(vals[starts[i]:starts[i + 1]].tolist())
                records.append(ex.SerializeToString())
            with open(path + ".tmp", "wb") as f:
                f.write(tfrecord_oracle.frame(records))
            os.replace(path + ".tmp", path)
        # bytes / text: the MB/s notes, reading and writing alike (the write side's output is this file's size).
        return {"tfrecord": path, "rows": n, "examples": len(counts), "vocab": vocab,
                "megabytes": round(os.path.getsize(path) / 1e6, 1), "bytes": os.path.getsize(path),
                "text": "TFRecord"}
    return prepare


def _tools_tfrecord(paths: dict, out: str) -> list[Tool]:
    src, vocab = paths["tfrecord"], str(paths["vocab"])
    o = [_out(out, f"tfrecord-{x}.parquet") for x in ("sptool", "protobuf", "tf")]
    tools = [sptool_tool("convert", src, "-o", o[0], "--ids", "ids", "--values", "values", "--vocab-size", vocab,
                         outputs=[o[0]]),
             python_tool("protobuf Example.FromString loop + write_table", PEER_TFRECORD_PROTOBUF, src, o[1], vocab,
                         TESTS, outputs=[o[1]])]
    if _tensorflow_present():  # never a dependency: measured only where someone installed it
        tools.append(python_tool("tensorflow TFRecordDataset + parse_example + sparse_merge", PEER_TFRECORD_TF, src,
                                 o[2], vocab, outputs=[o[2]]))
    return tools


def _check_tfrecord(paths: dict, out: str):
    import pyarrow.parquet as pq

    got = pq.read_table(_out(out, "tfrecord-sptool.parquet"))
    peer = pq.read_table(_out(out, "tfrecord-protobuf.parquet"))
    same = all(np.array_equal(got.column(c).to_numpy(), peer.column(c).to_numpy())
               for c in ("indices_0", "indices_1", "values"))
    if same and _tensorflow_present():
        # TensorFlow's sparse_merge reorders with an unstable sort: a repeated id's values may come
        # in another order, so entries are compared with ties put in value order on both sides.
        tf_out = pq.read_table(_out(out, "tfrecord-tf.parquet"))
        a, b = ([t.column(c).to_numpy() for c in ("indices_0", "indices_1", "values")] for t in (got, tf_out))
        same = len(a[0]) == len(b[0]) and all(
            np.array_equal(x[np.lexsort(a[::-1])], y[np.lexsort(b[::-1])]) for x, y in zip(a, b))
    note = (f"input {paths['megabytes']} MB, {paths['examples']:,} Examples, {paths['rows']:,} ids; "
            "MB/s = megabytes / seconds" + ("" if _tensorflow_present() else "; tensorflow is not installed, so "
                                            "its pipeline was not measured"))
    return (None if same else "sptool's tensor differs from the protobuf (or TensorFlow) peer's", note)


def _prepare_tfrecord_write(data: str, params: dict) -> dict:
    paths = _prepare_tfrecord("short")(data, params)
    parquet = os.path.join(data, f"tfrecord-short-{paths['rows']}.parquet")
    if not os.path.exists(parquet):
        subprocess.run(sptool_tool("convert", paths["tfrecord"], "-o", parquet, "--ids", "ids", "--values", "values",
                                   "--vocab-size", str(paths["vocab"])).argv, check=True)
    return {**paths, "parquet": parquet}


def _tools_tfrecord_write(paths: dict, out: str) -> list[Tool]:
    o = [_out(out, f"write-{x}.tfrecord") for x in ("sptool", "protobuf")]
    return [sptool_tool("convert", paths["parquet"], "-o", o[0], "--ids", "ids", "--values", "values", outputs=[o[0]]),
            python_tool("protobuf SerializeToString loop + google-crc32c framing", PEER_TFRECORD_WRITE_PROTOBUF,
                        paths["parquet"], o[1], TESTS, str(paths["examples"]), outputs=[o[1]])]


def _check_tfrecord_write(paths: dict, out: str):
    sys.path.insert(0, TESTS)
    import tfrecord_oracle

    a, b = _out(out, "write-sptool.tfrecord"), _out(out, "write-protobuf.tfrecord")
    mine, theirs = tfrecord_oracle.read(a), tfrecord_oracle.read(b)  # both CRCs of every record checked
    same = len(mine) == len(theirs) == paths["examples"] and all(
        tfrecord_oracle.feature_values(x, name) == tfrecord_oracle.feature_values(y, name)
        for x, y in zip(mine, theirs) for name in ("ids", "values"))
    size = round(os.path.getsize(a) / 1e6, 1)
    return (None if same else "sptool's Examples differ from the protobuf peer's",
            f"output {size} MB ({paths['examples']:,} Examples); MB/s = megabytes / seconds")


for _shape, _desc in (("short", "0-20 ids per Example, vocabulary 100k"),
                      ("long", "0-200 ids per Example, vocabulary 1M")):
    register(Benchmark(
        f"tfrecord-{_shape}", f"TFRecord Examples (ids + float values, {_desc}) to a Parquet sparse_merge tensor",
        "sptool at least 2x faster than TensorFlow's pipeline (when installed)", _prepare_tfrecord(_shape),
        _tools_tfrecord, skip=_tfrecord_missing, check=_check_tfrecord,
    ))

register(Benchmark(
    "tfrecord-write", "a Parquet [examples, vocab] tensor back to TFRecord Examples (ids + values)",
    "(MB/s reported against the reading direction)", _prepare_tfrecord_write, _tools_tfrecord_write,
    skip=_tfrecord_missing, check=_check_tfrecord_write,
))


# ---------------------------------------------------------------------------------------------
# Reporting

def machine() -> dict:
    import pyarrow
    import scipy

    import sptool

    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": usable, "cpu": cpu, "ram_bytes": mem, "platform": platform.platform(),
        "python": platform.python_version(), "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": {"sptool": sptool.__version__, "numpy": np.__version__, "pyarrow": pyarrow.__version__,
                     "scipy": scipy.__version__},
    }


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def print_table(info: dict, results: list[dict], size: str, repeat: int):
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 110))
    v = info["versions"]
    console.print(
        f"[bold]sptool benchmarks[/] size={size}, median of {repeat} runs; {info['nproc']} CPUs ({info['cpu']}), "
        f"RAM {info['ram_bytes'] / 2**30:.1f} GiB; Python {info['python']}, sptool {v['sptool']}, "
        f"numpy {v['numpy']}, pyarrow {v['pyarrow']}, scipy {v['scipy']}"
    )
    console.print(f"Load average at the start: {info['load_average']} (CPU s: user + system time, median).")
    console.print("Each tool runs in a fresh process (start-up and imports included); sptool calls no BLAS "
                  "(NumPy peers may: sampled-matmul's).")
    table = Table(show_lines=False)
    for col, justify in (("benchmark", "left"), ("tool", "left"), ("seconds", "right"),
                         ("ratio", "right"), ("CPU s", "right"), ("peak RSS", "right")):
        table.add_column(col, justify=justify)
    for r in results:
        if r.get("skipped"):
            table.add_row(r["benchmark"], f"skipped: {r['skipped']}", "", "", "", "")
            continue
        for i, t in enumerate(r["tools"]):
            secs = "failed" if t["median"] is None else f"{t['median']:.2f}"
            ratio = "" if t["ratio"] is None else f"{t['ratio']:.2f}x"
            cpu = "" if t.get("cpu_median") is None else f"{t['cpu_median']:.2f}"
            table.add_row(r["benchmark"] if i == 0 else "", t["tool"], secs, ratio, cpu, _mib(t["max_rss"]),
                          end_section=i == len(r["tools"]) - 1)
    console.print(table)
    console.print("ratio = peer time / sptool time (>1: sptool faster). Targets: " +
                  "; ".join(f"{r['benchmark']}: {r['target']}" for r in results if not r.get("skipped")))
    for r in results:
        for note in r.get("notes", []):
            console.print(f"[yellow]{r['benchmark']}: {note}[/]")


# ---------------------------------------------------------------------------------------------

def run_benchmark(b: Benchmark, size: str, repeat: int) -> dict:
    reason = b.skip()
    if reason:
        print(f"{b.name}: skipped: {reason}", flush=True)
        return {"benchmark": b.name, "skipped": reason}
    data = os.path.join(DATA, size + DATA_TAG)
    out = os.path.join(data, "out")
    os.makedirs(out, exist_ok=True)
    t0 = time.perf_counter()
    paths = b.prepare(data, SIZES[size])
    print(f"{b.name}: data ready in {time.perf_counter() - t0:.1f} s; timing...", flush=True)
    tools = b.tools(paths, out)
    if ONE_WRITER and tools[0].name == "sptool":
        first = tools[0]
        tools.insert(1, python_tool("sptool, one-thread Parquet writer (before)", ONE_WRITER_CODE,
                                    *first.argv[1:], outputs=first.outputs))
    tools = [tools[0], *(t for t in tools[1:] if not any(w in t.name for w in WITHOUT))]
    if BASELINE and tools[0].name == "sptool":
        tools.insert(1, baseline_tool(tools[0]))
    if NO_CHECKS and tools[0].name == "sptool":
        first = tools[0]
        tools = [python_tool(f"sptool, read checks {state}", CHECKS_CODE, state, *first.argv[1:], outputs=first.outputs)
                 for state in ("on", "off")]
    runs: dict[str, list[Run]] = {t.name: [] for t in tools}
    notes = []
    load_before = os.getloadavg()
    # Interleave the tools so that drift (page cache, thermal) affects all of them alike.
    for i in range(repeat):
        for t in tools[::-1] if NO_CHECKS and i % 2 else tools:  # on, off, off, on, ...: no side always first
            runs[t.name].append(run_once(t))
    # Other work on the machine slows every tool; the load (and CPU seconds) say how much.
    notes.append("load average (1, 5, 15 min) before timing {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}"
                 .format(*load_before, *os.getloadavg()))
    # With --no-checks the peers whose outputs the check compares against did not run.
    if b.check is not None and not NO_CHECKS and all(r.returncode == 0 for rs in runs.values() for r in rs):
        problem = b.check(paths, out)
        if isinstance(problem, tuple):  # (problem or None, a note to print either way)
            problem, note = problem
            notes.append(note)
        if problem:
            notes.append(f"check failed: {problem}")
    for t in tools:
        for path in t.outputs:
            _remove(path)
    rows = []
    for t in tools:
        rs = runs[t.name]
        ok = [r for r in rs if r.returncode == 0]
        if len(ok) < len(rs):
            bad = next(r for r in rs if r.returncode != 0)
            notes.append(f"{t.name} exited {bad.returncode}: {bad.stderr.splitlines()[-1:] or ''}")
        rows.append({
            "tool": t.name, "argv": t.argv,
            "seconds": [round(r.seconds, 4) for r in rs],
            "best": min(r.seconds for r in ok) if ok else None,
            "median": statistics.median(r.seconds for r in ok) if ok else None,
            "cpu_median": statistics.median(r.cpu for r in ok) if ok else None,
            "max_rss": max(r.max_rss for r in rs),
        })
    if NO_CHECKS and len(rows) == 2 and all(r["cpu_median"] for r in rows):
        on, off = rows
        notes.append(f"the read checks cost {100 * (on['cpu_median'] / off['cpu_median'] - 1):+.1f}% CPU "
                     f"({on['cpu_median']:.2f} s against {off['cpu_median']:.2f} s), "
                     f"{100 * (on['median'] / off['median'] - 1):+.1f}% wall")
    # The median run counts: a user sees a typical run, not the luckiest one.
    base = rows[0]["median"]
    for row in rows:
        row["ratio"] = None if row is rows[0] or base is None or row["median"] is None else row["median"] / base
        if paths.get("rate_rows") and row["median"]:  # apply: gradient rows applied per second
            row["rows_per_s"] = round(paths["rate_rows"] / row["median"])
            # Each run is one more step: the mean counts the checkpoints that some runs pay.
            row["mean"] = statistics.mean(r.seconds for r in runs[row["tool"]] if r.returncode == 0)
            row["cpu_mean"] = statistics.mean(r.cpu for r in runs[row["tool"]] if r.returncode == 0)
            notes.append(f"{row['tool']}: {row['rows_per_s']:,} gradient rows/s; mean of the runs {row['mean']:.2f} s "
                         f"({row['cpu_mean']:.2f} CPU s), ratio of means "
                         f"{row['mean'] / rows[0]['mean'] if row is not rows[0] else 1:.2f}")
        if paths.get("bytes") and row["median"]:  # text formats: throughput of the text read or written
            row["mb_per_s"] = round(paths["bytes"] / 1e6 / row["median"], 1)
            notes.append(f"{row['tool']}: {row['mb_per_s']} MB/s of {paths.get('text', 'svmlight text')}")
    if b.report is not None and not NO_CHECKS:
        notes.extend(b.report(paths, rows))
    return {"benchmark": b.name, "description": b.description, "target": b.target, "params": paths,
            "tools": rows, "notes": notes}


def byte_compile_sptool():
    """Compile sptool's modules to bytecode, as `pip install .` does.  An editable checkout run
    with PYTHONDONTWRITEBYTECODE set (as on the development machine) otherwise recompiles every
    module on every run, about 35 ms of a reduce, which an installed sptool never pays; the
    peers' packages come from site-packages, compiled at install time."""
    import compileall

    import sptool

    compileall.compile_dir(os.path.dirname(sptool.__file__), quiet=1)


# -- cross-hashed and bincount --------------------------------------------------------

# Rows of the [batch, ids] inputs per size; --size medium is the issue's 1M rows.
for _size, _rows in {"small": 100_000, "medium": 1_000_000, "large": 2_000_000}.items():
    SIZES[_size]["cross_rows"] = _rows
CROSS_VOCAB = 1_000  # distinct strings of the string feature

# The plain NumPy peer: the same hash as TensorFlow (FingerprintCat64 on uint64 arrays), the
# product of ragged rows built pairwise with np.repeat, the vocabulary's Fingerprint64 computed
# once per distinct string with sptool's plain-Python reference (1,000 strings: negligible).
PEER_CROSS_NUMPY = """
    import json, os, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sptool
    sys.path.insert(0, os.path.join(os.path.dirname(sptool.__file__), "..", "tests"))
    from references.cross import fingerprint64_bytes  # the plain-Python oracle of the tests
    M = np.uint64(0xC6A4A7935BD1E995)
    S = np.uint64(47)
    def cat(a, b):
        r = a ^ M
        r ^= ((b * M) ^ ((b * M) >> S)) * M
        r *= M
        r = (r ^ (r >> S)) * M
        return r ^ (r >> S)
    out, buckets = sys.argv[1], np.uint64(int(sys.argv[2]))
    rows = h = None
    for path in sys.argv[3:]:
        t = pq.read_table(path)
        r = t.column("indices_0").to_numpy()
        v = t.column("values")
        if pa.types.is_string(v.type):
            d = v.combine_chunks().dictionary_encode()
            table = np.array([fingerprint64_bytes(s.encode()) for s in d.dictionary.to_pylist()], dtype=np.uint64)
            f = table[d.indices.to_numpy()]
        else:
            f = v.to_numpy().astype(np.int64).view(np.uint64)
        n_rows = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"][0]
        counts = np.bincount(r, minlength=n_rows)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        if h is None:
            rows, h = r, cat(np.full(len(f), 0xDECAFCAFFE, np.uint64), f)
            continue
        k = counts[rows] if len(rows) else np.zeros(0, np.int64)
        rep = np.repeat(np.arange(len(rows)), k)
        first = np.repeat(np.cumsum(k) - k, k)
        j = starts[rows[rep]] + (np.arange(len(rep)) - first)
        rows, h = rows[rep], cat(h[rep], f[j])
    values = (h % buckets).astype(np.int64)
    change = np.concatenate([[True], rows[1:] != rows[:-1]]) if len(rows) else np.zeros(0, bool)
    first = np.maximum.accumulate(np.where(change, np.arange(len(rows)), 0))
    pq.write_table(pa.table({"indices_0": rows, "indices_1": np.arange(len(rows)) - first, "values": values}), out)
"""

PEER_CROSS_TF = """
    import json, sys
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tensorflow as tf
    inputs = []
    for path in sys.argv[3:]:
        t = pq.read_table(path)
        idx = tf.stack([t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy()], axis=1)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        inputs.append(tf.sparse.SparseTensor(idx, t.column("values").to_numpy(zero_copy_only=False), shape))
    r = tf.sparse.cross_hashed(inputs, num_buckets=int(sys.argv[2]))
    pq.write_table(pa.table({"indices_0": r.indices[:, 0].numpy(), "indices_1": r.indices[:, 1].numpy(),
                             "values": r.values.numpy()}), sys.argv[1])
"""


def _tensorflow_missing() -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("tensorflow") else "tensorflow is not installed"


def _ids_file(path: str, rows: int, per_row, kind: str, seed: int):
    """A canonical [rows, 8] id tensor: ``per_row`` ids per row (an int, or (lo, hi) drawn per row)."""
    if os.path.exists(path):
        return
    import sptool

    rng = np.random.default_rng(SEED + seed)
    counts = np.full(rows, per_row) if isinstance(per_row, int) else rng.integers(*per_row, size=rows)
    r = np.repeat(np.arange(rows, dtype=np.int64), counts)
    c = np.arange(len(r), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    if kind == "string":
        words = np.array([f"w{i}" for i in range(CROSS_VOCAB)], dtype=object)
        values = words[rng.integers(0, CROSS_VOCAB, size=len(r))]
    else:
        values = rng.integers(0, 1 << 40, size=len(r)).astype(np.int64)
    sptool.write(sptool.SparseTensor(np.stack([r, c], axis=1), values, (rows, 8), sort_order=(0, 1), unique=True),
                 path)


def _prepare_cross(shape: str):
    def prepare(data: str, params: dict) -> dict:
        n = params["cross_rows"]
        specs = [("string", 5), ("int", 5), ("int", 5)] if shape == "5x5x5" else [("string", (0, 5)), ("int", (0, 5))]
        paths = []
        for i, (kind, per_row) in enumerate(specs):
            path = os.path.join(data, f"cross-{shape}-{n}-{i}.parquet")
            _ids_file(path, n, per_row, kind, 40 + i + (10 if shape != "5x5x5" else 0))
            paths.append(path)
        return {"inputs": paths, "rows": n, "buckets": "1000000"}
    return prepare


def _tools_cross(paths: dict, out: str) -> list[Tool]:
    o1, o2, o3 = (_out(out, f"cross-{x}.parquet") for x in ("sptool", "numpy", "tf"))
    tools = [sptool_tool("cross-hashed", *paths["inputs"], "--num-buckets", paths["buckets"], "-o", o1, outputs=[o1]),
             python_tool("NumPy (vectorised FingerprintCat64) + write", PEER_CROSS_NUMPY, o2, paths["buckets"],
                         *paths["inputs"], outputs=[o2])]
    if not _tensorflow_missing():
        tools.append(python_tool("TensorFlow tf.sparse.cross_hashed (eager) + write", PEER_CROSS_TF, o3,
                                 paths["buckets"], *paths["inputs"], outputs=[o3]))
    return tools


def _check_same_table(a_path: str, b_path: str, what: str) -> str | None:
    """Both outputs hold the same entries (compared batch by batch, not loaded whole)."""
    import pyarrow.parquet as pq

    a, b = pq.ParquetFile(a_path), pq.ParquetFile(b_path)
    if a.metadata.num_rows != b.metadata.num_rows:
        return f"{what}: {a.metadata.num_rows} entries, the peer's {b.metadata.num_rows}"
    for x, y in zip(a.iter_batches(1 << 20), b.iter_batches(1 << 20)):
        n = min(x.num_rows, y.num_rows)
        for col in ("indices_0", "indices_1", "values"):
            if not np.array_equal(x.column(col).to_numpy()[:n], y.column(col).to_numpy()[:n]):
                return f"{what}: column {col} differs from the peer's"
        break  # the first million entries; the row counts above cover the rest
    return None


def _check_cross(paths: dict, out: str):
    import pyarrow.parquet as pq

    n = pq.read_metadata(_out(out, "cross-sptool.parquet")).num_rows
    problem = _check_same_table(_out(out, "cross-sptool.parquet"), _out(out, "cross-numpy.parquet"), "cross-hashed")
    if not problem and not _tensorflow_missing():
        problem = _check_same_table(_out(out, "cross-sptool.parquet"), _out(out, "cross-tf.parquet"),
                                    "cross-hashed against TensorFlow")
    return problem, f"{paths['rows']:,} rows crossed into {n:,} buckets; TensorFlow: {_tensorflow_missing() or 'run'}"


register(Benchmark(
    "cross-hashed", "tf.sparse.cross_hashed of 3 features x 5 ids per row (string, int64, int64), to Parquet",
    "sptool 3x faster than TensorFlow eager (ratio >= 3; skipped when TensorFlow is absent)",
    _prepare_cross("5x5x5"), _tools_cross, check=_check_cross,
))
register(Benchmark(
    "cross-hashed-ragged", "cross_hashed of 2 features of 0-4 ids per row (string, int64), to Parquet",
    "(no target; a second data shape)", _prepare_cross("ragged"), _tools_cross, check=_check_cross,
))

PEER_BINCOUNT_SCIPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    t = pq.read_table(sys.argv[1])
    rows, ids = t.column("indices_0").to_numpy(), t.column("values").to_numpy()
    c = sp.coo_array((np.ones(len(ids), np.int64), (rows, ids)), shape=(int(rows.max()) + 1, int(ids.max()) + 1))
    c = c.tocsr()
    c.sum_duplicates()
    c = c.tocoo()
    pq.write_table(pa.table({"indices_0": c.row.astype(np.int64), "indices_1": c.col.astype(np.int64),
                             "values": c.data}), sys.argv[2])
"""

PEER_BINCOUNT_NUMPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    counts = np.bincount(pq.read_table(sys.argv[1]).column("values").to_numpy())
    ids = np.flatnonzero(counts)
    pq.write_table(pa.table({"indices_0": ids.astype(np.int64), "values": counts[ids]}), sys.argv[2])
"""


def _prepare_bincount(data: str, params: dict) -> dict:
    n = params["cross_rows"]
    path = os.path.join(data, f"bincount-{n}x20.parquet")
    if not os.path.exists(path):
        import sptool

        rng = np.random.default_rng(SEED + 50)
        r = np.repeat(np.arange(n, dtype=np.int64), 20)
        c = np.tile(np.arange(20, dtype=np.int64), n)
        ids = rng.zipf(1.3, size=len(r)) % 100_000  # skewed, as word ids are
        sptool.write(sptool.SparseTensor(np.stack([r, c], axis=1), ids.astype(np.int64), (n, 20), sort_order=(0, 1),
                                         unique=True), path)
    return {"ids": path, "rows": n * 20}


def _tools_bincount_rows(paths: dict, out: str) -> list[Tool]:
    o1, o2 = _out(out, "bincount-sptool.parquet"), _out(out, "bincount-scipy.parquet")
    return [sptool_tool("bincount", paths["ids"], "--axis", "-1", "-o", o1, outputs=[o1]),
            python_tool("scipy coo -> csr (sum duplicates) + write", PEER_BINCOUNT_SCIPY, paths["ids"], o2,
                        outputs=[o2])]


def _tools_bincount_all(paths: dict, out: str) -> list[Tool]:
    o1, o2 = _out(out, "bincount0-sptool.parquet"), _out(out, "bincount0-numpy.parquet")
    return [sptool_tool("bincount", paths["ids"], "--axis", "0", "-o", o1, outputs=[o1]),
            python_tool("np.bincount + nonzero + write", PEER_BINCOUNT_NUMPY, paths["ids"], o2, outputs=[o2])]


register(Benchmark(
    "bincount-rows", "tf.sparse.bincount per row (axis -1) of 20 skewed ids per row, to Parquet",
    "(no target) against scipy's coo -> csr", _prepare_bincount, _tools_bincount_rows,
    check=lambda p, o: _check_same_table(_out(o, "bincount-sptool.parquet"), _out(o, "bincount-scipy.parquet"),
                                         "bincount --axis -1"),
))
register(Benchmark(
    "bincount-all", "tf.sparse.bincount over all values (axis 0) of the same ids, to Parquet",
    "(no target) against np.bincount", _prepare_bincount, _tools_bincount_all,
))

# segment-sum: the issue's 10M (index, segment) pairs onto a 1M x 64 float32 table at --size medium.
for _size, _shape in {"small": (1_000_000, 100_000), "medium": (10_000_000, 1_000_000),
                      "large": (20_000_000, 2_000_000)}.items():
    SIZES[_size]["segment"] = _shape

PEER_SEGMENT_ADD_AT = """
    import sys
    import numpy as np
    data = np.load(sys.argv[1], mmap_mode="r")
    idx, seg = np.load(sys.argv[2], mmap_mode="r"), np.load(sys.argv[3], mmap_mode="r")
    out = np.zeros((int(seg[-1]) + 1, data.shape[1]), data.dtype)
    np.add.at(out, seg, data[idx])
    np.save(sys.argv[4], out)
"""


def _prepare_segment(data: str, params: dict) -> dict:
    pairs, rows = params["segment"]
    names = {k: os.path.join(data, f"segment-{k}-{pairs}-{rows}.npy") for k in ("data", "idx", "seg")}
    if not all(os.path.exists(p) for p in names.values()):
        rng = np.random.default_rng(SEED + 60)
        np.save(names["data"], rng.standard_normal((rows, 64), dtype=np.float32))
        np.save(names["idx"], rng.integers(0, rows, size=pairs))
        np.save(names["seg"], np.sort(rng.integers(0, rows, size=pairs)))
    return {**names, "rows": pairs}


def _tools_segment(paths: dict, out: str) -> list[Tool]:
    o1, o2 = _out(out, "segment-sptool.npy"), _out(out, "segment-numpy.npy")
    return [sptool_tool("segment-sum", paths["data"], "--indices", paths["idx"], "--segment-ids", paths["seg"],
                        "-o", o1, outputs=[o1]),
            python_tool("np.add.at on the memory-mapped data + np.save", PEER_SEGMENT_ADD_AT, paths["data"],
                        paths["idx"], paths["seg"], o2, outputs=[o2])]


def _check_segment(paths: dict, out: str) -> str | None:
    a = np.load(_out(out, "segment-sptool.npy"), mmap_mode="r")
    b = np.load(_out(out, "segment-numpy.npy"), mmap_mode="r")
    return None if a.shape == b.shape and np.array_equal(a, b) else "sptool's sums differ from np.add.at's"


register(Benchmark(
    "segment-sum", "segment_sum of (index, sorted segment) pairs onto a float32 table with 64 columns, to .npy",
    "sptool at least as fast as np.add.at (ratio >= 1) and far below its memory", _prepare_segment, _tools_segment,
    check=_check_segment,
))


# sampled-matmul: the issue's 10M mask entries with k = 64 at --size medium, in two shapes (a
# square 20k x 20k mask, and a tall 100k x 5k one), where the dense product is still computable
# in row blocks: the peer a user would write.
for _size, _nnz in {"small": 1_000_000, "medium": 10_000_000, "large": 20_000_000}.items():
    SIZES[_size]["sddmm"] = _nnz
SDDMM_SHAPES = {"square": (20_000, 20_000), "tall": (100_000, 5_000)}
SDDMM_K = 64

PEER_SDDMM_NUMPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pq.read_table(sys.argv[1])
    i, j = t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy()
    v = t.column("values").to_numpy()
    a, b = np.load(sys.argv[2], mmap_mode="r"), np.load(sys.argv[3])
    out = np.empty(len(v), np.float32)
    block = max(1, (256 << 20) // (b.shape[1] * 4))  # 256 MB of dense product at a time
    starts = np.searchsorted(i, np.arange(0, a.shape[0] + block, block))
    for n, r0 in enumerate(range(0, a.shape[0], block)):
        lo, hi = starts[n], starts[n + 1]
        product = a[r0: r0 + block] @ b
        out[lo:hi] = product[i[lo:hi] - r0, j[lo:hi]] + v[lo:hi]
    pq.write_table(pa.table({"indices_0": i, "indices_1": j, "values": out}), sys.argv[4])
"""


def _prepare_sddmm(shape_name: str):
    def prepare(data: str, params: dict) -> dict:
        m, n = SDDMM_SHAPES[shape_name]
        nnz = min(params["sddmm"], m * n // 10)
        names = {k: os.path.join(data, f"sddmm-{shape_name}-{k}-{nnz}.{ext}")
                 for k, ext in (("mask", "parquet"), ("a", "npy"), ("b", "npy"))}
        if not all(os.path.exists(p) for p in names.values()):
            rng = np.random.default_rng(SEED + 70)
            _write_sptool(names["mask"], _canonical_coords(rng, (m, n), nnz),
                          rng.standard_normal(nnz, dtype=np.float32), (m, n))
            np.save(names["a"], rng.standard_normal((m, SDDMM_K), dtype=np.float32))
            np.save(names["b"], rng.standard_normal((SDDMM_K, n), dtype=np.float32))
        return {**names, "rows": nnz}
    return prepare


def _tools_sddmm(paths: dict, out: str) -> list[Tool]:
    o1, o2 = _out(out, "sddmm-sptool.parquet"), _out(out, "sddmm-numpy.parquet")
    return [sptool_tool("sampled-matmul", paths["mask"], paths["a"], paths["b"], "-o", o1, outputs=[o1]),
            python_tool("NumPy dense product in row blocks + gather", PEER_SDDMM_NUMPY, paths["mask"], paths["a"],
                        paths["b"], o2, outputs=[o2])]


def _check_sddmm(paths: dict, out: str) -> str | None:
    import pyarrow.parquet as pq

    a, b = pq.read_table(_out(out, "sddmm-sptool.parquet")), pq.read_table(_out(out, "sddmm-numpy.parquet"))
    for col in ("indices_0", "indices_1"):
        if not np.array_equal(a.column(col).to_numpy(), b.column(col).to_numpy()):
            return f"sampled-matmul: column {col} differs from NumPy's"
    ok = np.allclose(a.column("values").to_numpy(), b.column("values").to_numpy(), rtol=1e-4, atol=1e-3)
    return None if ok else "sampled-matmul: values differ from NumPy's dense product"


for _shape in SDDMM_SHAPES:
    register(Benchmark(
        f"sampled-matmul-{_shape}", f"alpha * (A @ B) at a {_shape} float32 mask's entries, k = {SDDMM_K}, to Parquet",
        "sptool at least 2x faster than NumPy's dense product in row blocks + gather (ratio >= 2)",
        _prepare_sddmm(_shape), _tools_sddmm, check=_check_sddmm,
    ))
# apply: lazy Adam with a 100k-row gradient onto a 2M x 64 float32 table (512 MB) at --size
# medium, against the NumPy script a user writes today (load the table and moments, update the
# touched rows, save them); sgd and adagrad as rows/s; and Adam with --memory 8 times below the table.
for _size, _shape in {"small": (200_000, 10_000), "medium": (2_000_000, 100_000),
                      "large": (4_000_000, 200_000)}.items():
    SIZES[_size]["apply"] = _shape
APPLY_LR = {"sgd": 0.1, "adagrad": 0.05, "adam": 0.01}

PEER_APPLY_NUMPY = """
    import json, os, sys
    import numpy as np
    opt, table, state, rows_path, vals_path, lr = sys.argv[1:7]
    lr = float(lr)
    p = np.load(table)
    rows, g = np.load(rows_path), np.load(vals_path)
    order = np.argsort(rows, kind="stable")
    uniq, starts = np.unique(rows[order], return_index=True)
    gs = np.add.reduceat(g[order], starts, axis=0)  # repeated rows summed
    def path(name):
        return os.path.join(state, name + ".npy")
    if opt == "sgd":
        p[uniq] -= np.float32(lr) * gs
    elif opt == "adagrad":
        acc = np.load(path("accumulator"))
        acc[uniq] += gs * gs
        p[uniq] -= np.float32(lr) * gs / (np.sqrt(acc[uniq]) + np.float32(1e-7))
        np.save(path("accumulator"), acc)
    else:
        m, v = np.load(path("m")), np.load(path("v"))
        with open(os.path.join(state, "step.json")) as f:
            t = json.load(f)["step"] + 1
        m[uniq] = np.float32(0.9) * m[uniq] + np.float32(0.1) * gs
        v[uniq] = np.float32(0.999) * v[uniq] + np.float32(0.001) * gs * gs
        step = np.float32(lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t))
        p[uniq] -= step * m[uniq] / (np.sqrt(v[uniq]) + np.float32(1e-8))
        np.save(path("m"), m)
        np.save(path("v"), v)
        with open(os.path.join(state, "step.json"), "w") as f:
            json.dump({"step": t}, f)
    np.save(table, p)
"""


def _prepare_apply(optimizer: str):
    def prepare(data: str, params: dict) -> dict:
        rows, n = params["apply"]
        base = os.path.join(data, f"apply-table-{rows}.npy")
        grad = {k: os.path.join(data, f"apply-grad-{k}-{rows}-{n}.npy") for k in ("rows", "values")}
        grad_pq = os.path.join(data, f"apply-grad-{rows}-{n}.parquet")
        rng = np.random.default_rng(SEED + 70)
        if not os.path.exists(base):
            table = np.lib.format.open_memmap(base, mode="w+", dtype=np.float32, shape=(rows, 64))
            for lo in range(0, rows, 1 << 18):
                table[lo:lo + (1 << 18)] = rng.standard_normal((min(1 << 18, rows - lo), 64), dtype=np.float32)
            table.flush()
            del table
        if not os.path.exists(grad_pq):
            import sptool

            ids = rng.integers(0, rows, size=n)  # uniform ids: some repeat
            vals = rng.standard_normal((n, 64), dtype=np.float32)
            np.save(grad["rows"], ids)
            np.save(grad["values"], vals)
            sptool.write(sptool.SparseTensor(ids.reshape(-1, 1), vals, (rows, 64), unique=False), grad_pq)
        # Each tool updates its own copy, in place, once per run (the runs are successive steps).
        work = {}
        for tool in ("sptool", "numpy"):
            table = os.path.join(data, f"apply-{optimizer}-{tool}.npy")
            state = os.path.join(data, f"apply-{optimizer}-{tool}-state")
            shutil.copyfile(base, table)
            _remove(state)
            _remove(os.path.join(data, f".apply-{optimizer}-{tool}.npy.journal"))  # the last run's redo journal
            os.makedirs(state)
            work[tool] = (table, state)
        _, state = work["numpy"]
        for name, value in {"adagrad": {"accumulator": 0.1}, "adam": {"m": 0.0, "v": 0.0}}.get(optimizer, {}).items():
            out = np.lib.format.open_memmap(os.path.join(state, f"{name}.npy"), mode="w+", dtype=np.float32,
                                            shape=(rows, 64))
            if value:
                out[:] = value
            out.flush()
            del out
        with open(os.path.join(state, "step.json"), "w") as f:
            json.dump({"step": 0}, f)
        return {"grad": grad_pq, **{f"grad_{k}": v for k, v in grad.items()}, "work": work, "rate_rows": n,
                "table_bytes": rows * 64 * 4}
    return prepare


def _tools_apply(optimizer: str, memory: str | None = None, extra: tuple = ()):
    def tools(paths: dict, out: str) -> list[Tool]:
        table, state = paths["work"]["sptool"]
        args = ["apply", table, paths["grad"], "--optimizer", optimizer, "--lr", str(APPLY_LR[optimizer]), *extra]
        if optimizer != "sgd":
            args += ["--state", state]
        if memory:
            args = ["--memory", memory] + args
        peer_table, peer_state = paths["work"]["numpy"]
        return [sptool_tool(*args),
                python_tool("numpy: load table (and state), update touched rows, save", PEER_APPLY_NUMPY, optimizer,
                            peer_table, peer_state, paths["grad_rows"], paths["grad_values"],
                            str(APPLY_LR[optimizer]))]
    return tools


def _check_apply(paths: dict, out: str) -> str | None:
    """After the same number of runs (steps) both copies must agree on the touched rows."""
    a = np.load(paths["work"]["sptool"][0], mmap_mode="r")
    b = np.load(paths["work"]["numpy"][0], mmap_mode="r")
    rows = np.unique(np.load(paths["grad_rows"]))
    if not np.allclose(a[rows], b[rows], rtol=1e-4, atol=1e-6):
        return "sptool's table differs from numpy's on the touched rows"
    return None


for _opt, _target in (("adam", "at least 3x faster than the NumPy script (ratio >= 3), peak RSS far below the table"),
                      ("sgd", "(no target) rows/s"), ("adagrad", "(no target) rows/s")):
    register(Benchmark(
        f"apply-{_opt}", f"apply --optimizer {_opt}: a row-sparse gradient (uniform ids, some repeated) onto a "
        "float32 table of 64 columns, in place", _target, _prepare_apply(_opt), _tools_apply(_opt),
        check=_check_apply,
    ))
register(Benchmark(
    "apply-adam-nofsync", "apply --optimizer adam --no-fsync: as apply-adam, safe against a killed process but not "
    "a power loss (the NumPy script does not fsync either)", "(no target) ratio and peak RSS beside apply-adam",
    _prepare_apply("adam"), _tools_apply("adam", extra=("--no-fsync",)), check=_check_apply,
))
register(Benchmark(
    "apply-memory", "apply --optimizer adam with --memory 64MiB, 8x below the 512 MB table (--size medium)",
    "(no target) peak RSS within --memory + 256 MiB", _prepare_apply("adam"), _tools_apply("adam", "64MiB"),
    check=_check_apply,
))
# The Dask benchmarks: benchmarks/cluster.py.
sys.path.insert(0, HERE)
import cluster  # noqa: E402

cluster.add_to(sys.modules[__name__])
# AnnData .h5ad and tensors whose extents multiply past 2^63, with skewed indices.
import anndata_bench  # noqa: E402
import linalg_bench  # noqa: E402
import skewed_bench  # noqa: E402
import wide_bench  # noqa: E402

anndata_bench.add_to(sys.modules[__name__])
skewed_bench.add_to(sys.modules[__name__])
wide_bench.add_to(sys.modules[__name__])
linalg_bench.add_to(sys.modules[__name__])


def _write_results(args, info: dict, started: float, results: list[dict]):
    doc = {"size": args.size, "repeat": args.repeat, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z",
           time.localtime(started)), "elapsed_seconds": round(time.time() - started, 1), "machine": info,
           "load_average_now": [round(x, 2) for x in os.getloadavg()], "results": results}
    with open(args.output + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(args.output + ".tmp", args.output)


def main_of(prefix: str, output: str, argv: list[str]) -> int:
    """main() over the benchmarks whose names start with ``prefix`` (unless --only picks), results
    to RESULTS/``output`` (unless --output says): a family module's own command line."""
    if "--only" not in argv:
        argv = [*argv, *(a for name in BENCHMARKS if name.startswith(prefix) for a in ("--only", name))]
    if not any(a == "--output" or a.startswith("--output=") for a in argv):
        argv = [*argv, "--output", os.path.join(RESULTS, output)]
    return main(argv)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Time sptool's commands against the tools a user would otherwise use.")
    p.add_argument("--size", choices=list(SIZES), default="medium")
    p.add_argument("--only", metavar="NAME", action="append", choices=list(BENCHMARKS),
                   help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}")
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per tool; the median counts [3]")
    p.add_argument("--output", default=os.path.join(RESULTS, "latest.json"), help="JSON results file")
    p.add_argument("--shape", choices=["default", "issue"], default="default",
                   help="issue: the 3-D tensors are 2^17 x 2^12 x 2^8")
    p.add_argument("--one-writer", action="store_true",
                   help="also time each sptool command with the one-thread Parquet writer")
    p.add_argument("--no-checks", action="store_true",
                   help="time each sptool command against itself with the read checks off (no peers)")
    p.add_argument("--baseline", metavar="DIR",
                   help="also time each sptool command with the sptool of the checkout DIR (kernels built in place)")
    p.add_argument("--without", metavar="TEXT", action="append", default=[],
                   help="leave out the peers whose names hold TEXT (repeatable), e.g. pydata")
    p.add_argument("--readme", action="store_true",
                   help="write the results as benchmarks/README.md's current results table")
    args = p.parse_args(argv)
    global SHAPE_REORDER, SHAPE_3D, DATA_TAG, ONE_WRITER, NO_CHECKS, BASELINE, WITHOUT
    BASELINE = os.path.abspath(args.baseline) if args.baseline else None
    WITHOUT = args.without
    if BASELINE:
        import compileall

        compileall.compile_dir(os.path.join(BASELINE, "sptool"), quiet=1)
    ONE_WRITER = args.one_writer
    NO_CHECKS = args.no_checks
    if args.shape == "issue":
        SHAPE_REORDER = SHAPE_3D = SHAPE_ISSUE
        DATA_TAG = "-issue"
    byte_compile_sptool()
    info = machine()
    started = time.time()
    results = []
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    for name in args.only or BENCHMARKS:
        results.append(run_benchmark(BENCHMARKS[name], args.size, args.repeat))
        _write_results(args, info, started, results)  # after each: a long session stopped keeps what ran
    print_table(info, results, args.size, args.repeat)
    print(f"results written to {os.path.relpath(args.output)}")
    if args.readme:
        import readme_table

        readme_table.main([args.output])
    failed = any(t["median"] is None for r in results for t in r.get("tools", [])) or \
        any(n.startswith("check failed") for r in results for n in r.get("notes", []))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
