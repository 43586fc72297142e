"""Peak RSS of each command at --memory 64MiB, 256MiB and 1GiB, one fresh process per
run (harness.py's launcher: the process's own ru_maxrss), on one canonical and one unsorted input.

    python benchmarks/memory.py [--rows 12000000] [--budgets 64MiB,256MiB,1GiB] [--only reorder,...]

Prints a Markdown table: peak RSS per command and budget, and peak minus budget (the overhead
beyond --memory: the interpreter, numpy, pyarrow and the kernels are about 70-80 MiB before any
data).  Data goes to benchmarks/data/memory-<rows>/ (git-ignored), generated once.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from converters import SVM_SHAPES, write_svm_text  # noqa: E402
from harness import SEED, run_once, sptool_tool  # noqa: E402

MIB = 1 << 20

MAKE = """
import sys, numpy as np, sptool
rows, folder = int(sys.argv[1]), sys.argv[2]
shape = (4000, 3000, 2000)
rng = np.random.default_rng(1)
flat = np.unique(rng.integers(0, np.prod(shape), size=int(rows * 1.001)))[:rows]
coords = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
values = rng.standard_normal(len(coords))
sptool.write(sptool.SparseTensor(coords, values, shape, sort_order=(0, 1, 2), unique=True), folder + "/canon.parquet")
perm = rng.permutation(len(coords))
sptool.write(sptool.SparseTensor(coords[perm], values[perm], shape), folder + "/unsorted.parquet")
"""


def commands(data: str, out: str) -> dict:
    c, u = os.path.join(data, "canon.parquet"), os.path.join(data, "unsorted.parquet")
    o = os.path.join(out, "o.parquet")
    return {
        "validate": (["validate", c], []),
        "info --scan": (["info", "--scan", c], []),
        "convert (to .arrows)": (["convert", c, "-o", os.path.join(out, "o.arrows")], [os.path.join(out, "o.arrows")]),
        "reorder (unsorted, external sort)": (["reorder", u, "-o", o, "--tmp-dir", out], [o]),
        "reorder --order 2,1,0": (["reorder", c, "--order", "2,1,0", "-o", o, "--tmp-dir", out], [o]),
        "reduce --axis 0": (["reduce", c, "--op", "sum", "--axis", "0", "-o", o, "--tmp-dir", out], [o]),
        "reduce --axis 2": (["reduce", c, "--op", "sum", "--axis", "2", "-o", o, "--tmp-dir", out], [o]),
        "reduce (all)": (["reduce", c, "--op", "sum"], []),
        "slice": (["slice", c, "--start", "0,0,0", "--size", "2000,3000,2000", "-o", o], [o]),
        "transpose": (["transpose", c, "-o", o, "--tmp-dir", out], [o]),
        "add": (["add", c, u, "-o", o, "--tmp-dir", out], [o]),
        "concat --axis 0": (["concat", c, c, "--axis", "0", "-o", o, "--tmp-dir", out], [o]),
        "split --axis 0 -n 4": (["split", c, "--axis", "0", "-n", "4", "-o", os.path.join(out, "p-{i}.parquet")],
                                [os.path.join(out, f"p-{i}.parquet") for i in range(4)]),
    }


def svmlight_commands(data: str, out: str, megabytes: int) -> dict:
    """The case: an svmlight text file many times larger than the budget, converted (the
    parser's byte blocks, the sort-free writer); generated once, and only when asked for."""
    svm = os.path.join(data, f"short-{megabytes}MB.svm")
    if not os.path.exists(svm):
        write_svm_text(svm, megabytes, *SVM_SHAPES["short"], SEED + 7)
    o = os.path.join(out, "svm.parquet")
    return {f"convert svmlight ({megabytes} MB text)": (["convert", svm, "-o", o], [o])}


def parse_size(text: str) -> int:
    units = {"MiB": MIB, "GiB": 1 << 30}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * m)
    return int(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=12_000_000)
    ap.add_argument("--budgets", default="64MiB,256MiB,1GiB")
    ap.add_argument("--only", default=None, help="Comma-separated command names (as in the table).")
    ap.add_argument("--svm-mb", type=int, default=0, help="Also convert a generated svmlight file of this many MB.")
    args = ap.parse_args(argv)
    data = os.path.join(HERE, "data", f"memory-{args.rows}")
    out = os.path.join(data, "out")
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(os.path.join(data, "unsorted.parquet")):
        subprocess.run([sys.executable, "-c", MAKE, str(args.rows), data], check=True)
    budgets = args.budgets.split(",")
    size = os.path.getsize(os.path.join(data, "canon.parquet"))
    print(f"input: {args.rows:,} entries of a 4000 x 3000 x 2000 float64 tensor, {args.rows * 32 / MIB:,.0f} MiB "
          f"in memory (32 bytes a row), {size / MIB:,.0f} MiB as Parquet\n")
    print("| command | " + " | ".join(f"peak at {b} (over budget)" for b in budgets) + " | seconds at " +
          budgets[0] + " |")
    print("|---|" + "---|" * (len(budgets) + 1))
    wanted = set(args.only.split(",")) if args.only else None
    failed = 0
    cases = commands(data, out) | (svmlight_commands(data, out, args.svm_mb) if args.svm_mb else {})
    for name, (argv_, outputs) in cases.items():
        if wanted and name not in wanted:
            continue
        cells, first_seconds = [], None
        for b in budgets:
            run = run_once(sptool_tool(*argv_, "--memory", b, outputs=outputs))
            if run.returncode != 0:
                cells.append(f"exit {run.returncode}: {run.stderr.splitlines()[-1][:60] if run.stderr else ''}")
                failed += 1
                continue
            first_seconds = first_seconds or run.seconds
            over = run.max_rss - parse_size(b)
            cells.append(f"{run.max_rss / MIB:,.0f} MiB ({over / MIB:+,.0f})")
        print(f"| {name} | " + " | ".join(cells) + f" | {first_seconds or 0:.1f} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
