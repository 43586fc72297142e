"""Time sptool's commands against what a user would otherwise run, on the same data.

    python benchmarks/run.py [--size small|medium|large] [--only NAME] [--repeat N]

Data is generated once per size into benchmarks/data/<size>/ (git-ignored) and reused. Every
measured tool runs in its own fresh subprocess, so its wall time includes interpreter start-up
and imports (as a user's would), and its peak RSS is that process's own (os.wait4 -> ru_maxrss, taken
by a small launcher process: see harness.LAUNCHER).
sptool runs through its command line with -q.  Results: a table on stdout and
benchmarks/results/latest.json.  See benchmarks/README.md.

This file is the command line.  The timing harness and the registry are in harness.py, the data
more than one family makes in inputs.py, and each family's benchmarks (their data, tools, peers
and checks) in a module of its own, imported here so that they register: sorting, reductions,
linalg, converters, apply, cluster, anndata_bench, skewed_bench and wide_bench.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the family modules, when run.py is imported from elsewhere

import anndata_bench  # noqa: E402, F401
import apply  # noqa: E402, F401
import cluster  # noqa: E402, F401
import converters  # noqa: E402, F401
import harness  # noqa: E402
import linalg  # noqa: E402, F401
import reductions  # noqa: E402, F401
import report  # noqa: E402
import skewed_bench  # noqa: E402, F401

# The families, in the order they run; each registers its benchmarks on import.
import sorting  # noqa: E402, F401, I001
import wide_bench  # noqa: E402, F401
from harness import BENCHMARKS, RESULTS, SIZES, Tool, baseline_tool, python_tool, run_benchmark  # noqa: E402

# --one-writer: each sptool row is followed by the same command with the one-thread Parquet
# writer it had before, so that both are timed in the same minutes.
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


def _variants(args) -> Callable[[list[Tool]], list[Tool]]:
    """The rows timed for a benchmark: its own tools, with the sptool rows the options add."""
    def rows(tools: list[Tool]) -> list[Tool]:
        if args.one_writer and tools[0].name == "sptool":
            first = tools[0]
            tools.insert(1, python_tool("sptool, one-thread Parquet writer (before)", ONE_WRITER_CODE,
                                        *first.argv[1:], outputs=first.outputs))
        tools = [tools[0], *(t for t in tools[1:] if not any(w in t.name for w in args.without))]
        if harness.BASELINE and tools[0].name == "sptool":
            tools.insert(1, baseline_tool(tools[0]))
        if args.no_checks and tools[0].name == "sptool":
            first = tools[0]
            tools = [python_tool(f"sptool, read checks {state}", CHECKS_CODE, state, *first.argv[1:],
                                 outputs=first.outputs) for state in ("on", "off")]
        return tools
    return rows


def main_of(prefix: str, output: str, argv: list[str]) -> int:
    """main() over the benchmarks whose names start with ``prefix`` (unless --only picks), results
    to RESULTS/``output`` (unless --output says): a family module's own command line."""
    if "--only" not in argv:
        argv = [*argv, *(a for name in BENCHMARKS if name.startswith(prefix) for a in ("--only", name))]
    if not any(a == "--output" or a.startswith("--output=") for a in argv):
        argv = [*argv, "--output", os.path.join(RESULTS, output)]
    return main(argv)


def _parser() -> argparse.ArgumentParser:
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
    return p


def _configure(args) -> None:
    """Set the harness's options: the --baseline checkout and the --shape of the 3-D tensors."""
    harness.BASELINE = os.path.abspath(args.baseline) if args.baseline else None
    if harness.BASELINE:
        import compileall

        compileall.compile_dir(os.path.join(harness.BASELINE, "sptool"), quiet=1)
    if args.shape == "issue":
        harness.SHAPE_REORDER = harness.SHAPE_3D = harness.SHAPE_ISSUE
        harness.DATA_TAG = "-issue"


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    _configure(args)
    harness.byte_compile_sptool()
    info = report.machine()
    started = time.time()
    results = []
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    for name in args.only or BENCHMARKS:
        results.append(run_benchmark(BENCHMARKS[name], args.size, args.repeat, _variants(args), args.no_checks))
        report.write_results(args, info, started, results)  # after each: a long session stopped keeps what ran
    report.print_table(info, results, args.size, args.repeat)
    print(f"results written to {os.path.relpath(args.output)}")
    if args.readme:
        import readme_table

        readme_table.main([args.output])
    failed = any(t["median"] is None for r in results for t in r.get("tools", [])) or \
        any(n.startswith("check failed") for r in results for n in r.get("notes", []))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
