"""What run.py shows and keeps of a session: the machine, the table on stdout, the results file."""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np


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


def write_results(args, info: dict, started: float, results: list[dict]):
    doc = {"size": args.size, "repeat": args.repeat, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z",
           time.localtime(started)), "elapsed_seconds": round(time.time() - started, 1), "machine": info,
           "load_average_now": [round(x, 2) for x in os.getloadavg()], "results": results}
    with open(args.output + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(args.output + ".tmp", args.output)
