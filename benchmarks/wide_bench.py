"""Per-entry time of reorder, add and reduce on tensors with FROSTT's extents, whose products pass
2^63 - 1 (format 1.1: sort keys of 65 to 128 bits, two 64-bit words), beside the same work on
the same tensors with every extent scaled down by one factor until the product fits in 64 bits.

    python benchmarks/wide_bench.py [--nnz 20000000] [--repeat 3] [--only reorder] [--tensor amazon-reviews]

The goal: at 20M entries, each wide command at most 1.5x the narrow one's time per entry.  Each
command runs in a fresh process through run.py's launcher (wall time, CPU time and peak RSS of
the command alone; start-up and imports included, as for a user), the pair side by side in the
same minutes.  The commands are this checkout's: PYTHONPATH is set to it.  Data is generated
once per size into benchmarks/data/wide-<nnz>/ (git-ignored); the results go to stdout and
benchmarks/results/wide-latest.json.

- reorder: uniformly random entries, unsorted, to row-major order;
- add: two canonical tensors of distinct random coordinates;
- reduce: --op sum --axis 1 of the first of them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import run  # noqa: E402  (run.py's launcher, tools and machine description)

# FROSTT's published extents (frostt.io) of tensors whose products pass 2^63 - 1, of 3, 4 and 5 dimensions.
FROSTT = {
    "amazon-reviews": (4_821_207, 1_774_269, 1_805_187),
    "nell-1": (2_902_330, 2_143_368, 25_495_389),
    "delicious": (532_924, 17_262_471, 2_480_308, 1_443),
    "lbnl-network": (1_605, 4_198, 1_631, 4_209, 868_131),
}
COMMANDS = ("reorder", "add", "reduce")
SEED = 2024
CHUNK = 1 << 21


def narrow_shape(shape) -> tuple:
    """``shape`` with every extent divided by one factor, the smallest that makes its product fit in
    2^63 - 1 and its sort key (the extents' bit widths) fit in 64 bits."""
    factor = (math.prod(shape) / (2**63 - 1)) ** (1 / len(shape))
    while True:
        scaled = tuple(max(1, int(s / factor)) for s in shape)
        if math.prod(scaled) <= 2**63 - 1 and sum((s - 1).bit_length() for s in scaled) <= 64:
            return scaled
        factor *= 1.01


def _coords(rng, shape, n) -> np.ndarray:
    return np.stack([rng.integers(0, s, n) for s in shape]).astype(np.int64)


def _write(path: str, shape, chunks, *, canonical: bool):
    """Write (keys (K, n), values) chunks to ``path`` with sptool's own sink."""
    from sptool.format import TensorMeta
    from sptool.io import open_sink

    meta = TensorMeta(shape=shape, sparse_ndim=len(shape), value_type="float64",
                      sort_order=tuple(range(len(shape))) if canonical else (), unique=canonical)
    with open_sink(path, meta, unique_claim=True if canonical else False) as sink:
        for keys, values in chunks:
            sink.write(keys, values)


def _random(rng, shape, n):
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        yield _coords(rng, shape, m), rng.standard_normal(m)


def _canonical(rng, shape, n):
    """About n distinct coordinates in row-major order (draws with repeats, sorted, repeats dropped)."""
    keys = _coords(rng, shape, n)
    keys = keys[:, np.lexsort(keys[::-1])]
    fresh = np.ones(n, dtype=bool)
    fresh[1:] = (np.diff(keys, axis=1) != 0).any(axis=0)
    keys = np.ascontiguousarray(keys[:, fresh])
    values = rng.standard_normal(keys.shape[1])
    for start in range(0, keys.shape[1], CHUNK):
        yield keys[:, start:start + CHUNK], values[start:start + CHUNK]


def prepare(data: str, name: str, kind: str, shape, nnz: int) -> dict:
    """The input files of one tensor (``kind`` "wide" or "narrow"): unsorted, and two canonical."""
    paths = {c: os.path.join(data, f"{name}-{kind}-{c}.parquet") for c in ("unsorted", "a", "b")}
    rng = np.random.default_rng(SEED + zlib.crc32(f"{name}-{kind}".encode()))
    if not os.path.exists(paths["unsorted"]):
        _write(paths["unsorted"], shape, _random(rng, shape, nnz), canonical=False)
    for c in ("a", "b"):
        if not os.path.exists(paths[c]):
            _write(paths[c], shape, _canonical(rng, shape, nnz), canonical=True)
    return paths


def tools(paths: dict, out: str) -> dict:
    o = {c: os.path.join(out, f"{c}.parquet") for c in COMMANDS}
    return {
        "reorder": run.sptool_tool("reorder", paths["unsorted"], "-o", o["reorder"], outputs=[o["reorder"]]),
        "add": run.sptool_tool("add", paths["a"], paths["b"], "-o", o["add"], outputs=[o["add"]]),
        "reduce": run.sptool_tool("reduce", paths["a"], "--op", "sum", "--axis", "1", "-o", o["reduce"],
                                  outputs=[o["reduce"]]),
    }


def rows_of(paths: dict, command: str) -> int:
    import pyarrow.parquet as pq

    files = [paths["unsorted"]] if command == "reorder" else [paths["a"], paths["b"]] if command == "add" \
        else [paths["a"]]
    return sum(pq.read_metadata(f).num_rows for f in files)


def measure(pairs: dict, command: str, repeat: int) -> dict:
    """Median wall and CPU seconds per entry of ``command`` on each side, the two run alternately."""
    times: dict = {kind: [] for kind in pairs}
    for _ in range(repeat):
        for kind, (paths, out) in pairs.items():
            r = run.run_once(tools(paths, out)[command])
            if r.returncode != 0:
                raise RuntimeError(f"{command} on the {kind} tensor failed: {r.stderr}")
            times[kind].append((r.seconds, r.cpu, r.max_rss))
    result = {}
    for kind, (paths, _) in pairs.items():
        n = rows_of(paths, command)
        wall = statistics.median(t[0] for t in times[kind])
        cpu = statistics.median(t[1] for t in times[kind])
        result[kind] = {"rows": n, "seconds": wall, "cpu": cpu, "ns_per_entry": wall / n * 1e9,
                        "cpu_ns_per_entry": cpu / n * 1e9, "max_rss": max(t[2] for t in times[kind])}
    result["ratio"] = result["wide"]["ns_per_entry"] / result["narrow"]["ns_per_entry"]
    result["cpu_ratio"] = result["wide"]["cpu_ns_per_entry"] / result["narrow"]["cpu_ns_per_entry"]
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Wide (FROSTT-extent) against narrow tensors: time per entry.")
    p.add_argument("--nnz", type=int, default=20_000_000, help="entries per tensor [20000000]")
    p.add_argument("--repeat", type=int, default=3, help="runs per command and side; the median counts [3]")
    p.add_argument("--only", action="append", choices=COMMANDS, help="this command only (repeatable)")
    p.add_argument("--tensor", action="append", choices=list(FROSTT), help="this tensor only (repeatable)")
    p.add_argument("--output", default=os.path.join(run.RESULTS, "wide-latest.json"))
    args = p.parse_args(argv)
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    sys.path.insert(0, ROOT)
    run.byte_compile_sptool()
    data = os.path.join(run.DATA, f"wide-{args.nnz}")
    results = []
    started = time.time()
    for name in args.tensor or ["amazon-reviews", "delicious"]:
        wide = FROSTT[name]
        pairs = {}
        for kind, shape in (("wide", wide), ("narrow", narrow_shape(wide))):
            out = os.path.join(data, "out", kind)
            os.makedirs(out, exist_ok=True)
            t0 = time.perf_counter()
            pairs[kind] = (prepare(data, name, kind, shape, args.nnz), out)
            print(f"{name} {kind} {list(shape)}: data ready in {time.perf_counter() - t0:.1f} s", flush=True)
        for command in args.only or COMMANDS:
            r = measure(pairs, command, args.repeat)
            results.append({"tensor": name, "command": command, "wide_shape": list(wide),
                            "narrow_shape": list(narrow_shape(wide)), **r})
            w, n = r["wide"], r["narrow"]
            print(f"{name:15} {command:8} wide {w['ns_per_entry']:7.1f} ns/entry ({w['cpu_ns_per_entry']:6.1f} CPU), "
                  f"narrow {n['ns_per_entry']:7.1f} ({n['cpu_ns_per_entry']:6.1f} CPU): ratio {r['ratio']:.2f} "
                  f"(CPU {r['cpu_ratio']:.2f}); peak RSS {w['max_rss'] / 2**20:.0f} / {n['max_rss'] / 2**20:.0f} MiB",
                  flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"nnz": args.nnz, "repeat": args.repeat, "elapsed_seconds": round(time.time() - started, 1),
                   "machine": run.machine(), "results": results}, f, indent=2)
        f.write("\n")
    print(f"results written to {os.path.relpath(args.output)}")
    return 1 if any(r["ratio"] > 1.5 for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
