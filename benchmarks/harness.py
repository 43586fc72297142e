"""The timing harness shared by every benchmark family: the registry, the launcher that times one
command in a fresh process, and the loop that times a benchmark's tools against each other.

A benchmark is a `Benchmark` in the BENCHMARKS registry: a function that makes its data, and one
that gives the sptool command followed by its peers (commands doing the same job with other
tools).  A family module adds its own with register(Benchmark(...)) when imported; run.py imports
them all.  SIZES holds each size's parameters (families add their own keys); SHAPE_REORDER,
SHAPE_3D, DATA_TAG and BASELINE are set by run.py's options before any benchmark runs, so they
are read as ``harness.NAME`` when a benchmark's data or tools are made.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field

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

# --baseline DIR: each sptool row is followed by the same command run with the sptool of the checkout
# DIR (its kernels built in place), in the same minutes: today's code against an earlier commit's.
BASELINE = None
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
        remove(path)
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


def remove(path: str):
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


def out_path(out: str, name: str) -> str:
    return os.path.join(out, name)


# ---------------------------------------------------------------------------------------------
# Timing a benchmark

def run_benchmark(b: Benchmark, size: str, repeat: int, variants: Callable[[list[Tool]], list[Tool]] = list,
                  no_checks: bool = False) -> dict:
    """Time benchmark ``b`` at ``size``: its tools ``repeat`` times each, then its check and report.
    ``variants`` turns the benchmark's tools into the rows timed (run.py's extra sptool rows);
    ``no_checks``: those rows are one sptool command with the read checks on and off, no peers."""
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
    own = b.tools(paths, out)
    tools = variants(list(own))
    # A check compares the peers' outputs with sptool's: not when --without left a peer out.
    peers_all_ran = {t.name for t in own} <= {t.name for t in tools}
    load_before = os.getloadavg()
    runs = _interleaved(tools, repeat, alternate=no_checks)
    # Other work on the machine slows every tool; the load (and CPU seconds) say how much.
    notes = ["load average (1, 5, 15 min) before timing {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}"
             .format(*load_before, *os.getloadavg())]
    # With --no-checks the peers whose outputs the check compares against did not run.
    all_ok = all(r.returncode == 0 for rs in runs.values() for r in rs)
    if b.check is not None and not no_checks and peers_all_ran and all_ok:
        notes.extend(_check_notes(b.check(paths, out)))
    for t in tools:
        for path in t.outputs:
            remove(path)
    rows = [_row(t, runs[t.name], notes) for t in tools]
    if no_checks and len(rows) == 2 and all(r["cpu_median"] for r in rows):
        notes.append(_checks_cost(*rows))
    notes.extend(_ratios(rows, runs, paths))
    if b.report is not None and not no_checks:
        notes.extend(b.report(paths, rows))
    return {"benchmark": b.name, "description": b.description, "target": b.target, "params": paths,
            "tools": rows, "notes": notes}


def _interleaved(tools: list[Tool], repeat: int, alternate: bool) -> dict[str, list[Run]]:
    """Every tool's ``repeat`` runs, round by round, so that drift (page cache, thermal) affects all
    of them alike; ``alternate``: every other round in reverse (on, off, off, on, ...: no side always first)."""
    runs: dict[str, list[Run]] = {t.name: [] for t in tools}
    for i in range(repeat):
        for t in tools[::-1] if alternate and i % 2 else tools:
            runs[t.name].append(run_once(t))
    return runs


def _check_notes(problem) -> list[str]:
    """The notes of a check's answer: a problem or None, or (problem or None, a note to print either way)."""
    notes = []
    if isinstance(problem, tuple):
        problem, note = problem
        notes.append(note)
    if problem:
        notes.append(f"check failed: {problem}")
    return notes


def _row(t: Tool, rs: list[Run], notes: list[str]) -> dict:
    """A tool's figures over its runs (a note added for a run that failed)."""
    ok = [r for r in rs if r.returncode == 0]
    if len(ok) < len(rs):
        bad = next(r for r in rs if r.returncode != 0)
        notes.append(f"{t.name} exited {bad.returncode}: {bad.stderr.splitlines()[-1:] or ''}")
    return {
        "tool": t.name, "argv": t.argv,
        "seconds": [round(r.seconds, 4) for r in rs],
        "best": min(r.seconds for r in ok) if ok else None,
        "median": statistics.median(r.seconds for r in ok) if ok else None,
        "cpu_median": statistics.median(r.cpu for r in ok) if ok else None,
        "max_rss": max(r.max_rss for r in rs),
    }


def _checks_cost(on: dict, off: dict) -> str:
    return (f"the read checks cost {100 * (on['cpu_median'] / off['cpu_median'] - 1):+.1f}% CPU "
            f"({on['cpu_median']:.2f} s against {off['cpu_median']:.2f} s), "
            f"{100 * (on['median'] / off['median'] - 1):+.1f}% wall")


def _ratios(rows: list[dict], runs: dict[str, list[Run]], paths: dict) -> list[str]:
    """Each row's ratio to the first (sptool) row, and its rate where the paths give one: the notes."""
    notes = []
    # The median run counts: a user sees a typical run, not the luckiest one.
    base = rows[0]["median"]
    for row in rows:
        row["ratio"] = None if row is rows[0] or base is None or row["median"] is None else row["median"] / base
        if paths.get("rate_rows") and row["median"]:  # apply: gradient rows applied per second
            notes.append(_rows_per_second(row, rows[0], runs[row["tool"]], paths["rate_rows"]))
        if paths.get("bytes") and row["median"]:  # text formats: throughput of the text read or written
            row["mb_per_s"] = round(paths["bytes"] / 1e6 / row["median"], 1)
            notes.append(f"{row['tool']}: {row['mb_per_s']} MB/s of {paths.get('text', 'svmlight text')}")
    return notes


def _rows_per_second(row: dict, first: dict, rs: list[Run], rate_rows: int) -> str:
    row["rows_per_s"] = round(rate_rows / row["median"])
    # Each run is one more step: the mean counts the checkpoints that some runs pay.
    row["mean"] = statistics.mean(r.seconds for r in rs if r.returncode == 0)
    row["cpu_mean"] = statistics.mean(r.cpu for r in rs if r.returncode == 0)
    return (f"{row['tool']}: {row['rows_per_s']:,} gradient rows/s; mean of the runs {row['mean']:.2f} s "
            f"({row['cpu_mean']:.2f} CPU s), ratio of means "
            f"{row['mean'] / first['mean'] if row is not first else 1:.2f}")


def byte_compile_sptool():
    """Compile sptool's modules to bytecode, as `pip install .` does.  An editable checkout run
    with PYTHONDONTWRITEBYTECODE set (as on the development machine) otherwise recompiles every
    module on every run, about 35 ms of a reduce, which an installed sptool never pays; the
    peers' packages come from site-packages, compiled at install time."""
    import compileall

    import sptool

    compileall.compile_dir(os.path.dirname(sptool.__file__), quiet=1)

