"""Per-entry time of reorder, add and reduce on tensors with FROSTT's extents, whose products pass
2^63 - 1 (format 1.1: sort keys of 65 to 128 bits, two 64-bit words), beside the same work on
the same tensors with every extent scaled down by one factor until the product fits in 64 bits.
Registered into harness.BENCHMARKS on import:

    python benchmarks/run.py --size large --only wide-reorder-amazon-reviews   # 20M entries a tensor
    python benchmarks/wide_bench.py [run.py's options]                        # every wide-* benchmark

One benchmark per command, tensor and index distribution (wide-<command>-<tensor>, and -zipf for
indices of Zipf's law along each dimension, inputs.zipf_indices); its rows are the wide
tensor and its <= 64-bit twin, run alternately, and the ratio column is narrow time / wide time.
The goal: each wide command at most 1.5x the narrow one's time per entry (a note gives the
per-entry figures: the two sides' entry counts differ slightly where repeats were dropped).
With run.py's --baseline DIR, a third row runs the narrow side with the sptool of DIR (the
<= 64-bit path as it was).  Data is generated once per size into benchmarks/data/<size>/.

- reorder: random entries, unsorted, to row-major order;
- add: two canonical tensors of random coordinates (draws made canonical by sptool reorder
  --duplicates sum: about 20M entries each, fewer where Zipf's law repeats a coordinate);
- reduce: --op sum --axis 1 of the first of them.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zlib

import harness
import numpy as np
from harness import SIZES, Benchmark, baseline_tool, register, sptool_tool
from inputs import zipf_coords

# FROSTT's published extents (frostt.io) of tensors whose products pass 2^63 - 1.
FROSTT = {
    "amazon-reviews": (4_821_207, 1_774_269, 1_805_187),
    "delicious": (532_924, 17_262_471, 2_480_308, 1_443),
    "nell-1": (2_902_330, 2_143_368, 25_495_389),
}
COMMANDS = ("reorder", "add", "reduce")
DISTRIBUTIONS = ("uniform", "zipf")
SEED = 2024
CHUNK = 1 << 21
# Entries per tensor at each of run.py's sizes (the 20M at --size large).
NNZ = {"small": 1_000_000, "medium": 5_000_000, "large": 20_000_000}


def narrow_shape(shape) -> tuple:
    """``shape`` with every extent divided by one factor, the smallest that makes its product fit in
    2^63 - 1 and its sort key (the extents' bit widths) fit in 64 bits."""
    factor = (math.prod(shape) / (2**63 - 1)) ** (1 / len(shape))
    while True:
        scaled = tuple(max(1, int(s / factor)) for s in shape)
        if math.prod(scaled) <= 2**63 - 1 and sum((s - 1).bit_length() for s in scaled) <= 64:
            return scaled
        factor *= 1.01


def _coords(rng, shape, n, dist) -> np.ndarray:
    if dist == "zipf":
        return zipf_coords(rng, shape, n)
    return np.stack([rng.integers(0, s, n) for s in shape]).astype(np.int64)


def _write(path: str, shape, chunks):
    """Write unsorted (keys (K, n), values) chunks to ``path`` with sptool's own sink."""
    from sptool.format import TensorMeta
    from sptool.io import open_sink

    meta = TensorMeta(shape=shape, sparse_ndim=len(shape), value_type="float64")
    with open_sink(path, meta, unique_claim=False) as sink:
        for keys, values in chunks:
            sink.write(keys, values)


def _random(rng, shape, n, dist):
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        yield _coords(rng, shape, m, dist), rng.standard_normal(m)


def _file(data: str, name: str, kind: str, dist: str, nnz: int, which: str, shape) -> str:
    """The input ``which`` ("unsorted", "a" or "b") of one tensor, made on first use."""
    tag = f"{name}-{kind}" + ("" if dist == "uniform" else f"-{dist}")
    path = os.path.join(data, f"wide-{tag}-{nnz}-{which}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + zlib.crc32(f"{tag}-{which}".encode()))
        if which == "unsorted":
            _write(path, shape, _random(rng, shape, nnz, dist))
        else:  # about nnz distinct coordinates in row-major order: draws sorted, repeats summed, by sptool
            draws = path + ".draws.parquet"
            _write(draws, shape, _random(rng, shape, nnz, dist))
            subprocess.run(sptool_tool("reorder", draws, "--duplicates", "sum", "-o", path).argv, check=True)
            os.remove(draws)
    return path


def _rows(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


for _size, _nnz in NNZ.items():
    SIZES[_size]["wide_nnz"] = _nnz


def _inputs(command):
    return ("unsorted",) if command == "reorder" else ("a", "b") if command == "add" else ("a",)


def _command_args(command, paths, out):
    if command == "reorder":
        return ["reorder", paths[0], "-o", out]
    if command == "add":
        return ["add", paths[0], paths[1], "-o", out]
    return ["reduce", paths[0], "--op", "sum", "--axis", "1", "-o", out]


def _register(command, name, dist):
    wide = FROSTT[name]
    shapes = {"wide": wide, "narrow": narrow_shape(wide)}

    def prepare(data, params):
        nnz = params["wide_nnz"]
        paths = {}
        for kind, shape in shapes.items():
            files = [_file(data, name, kind, dist, nnz, which, shape) for which in _inputs(command)]
            paths[kind] = files
            paths[f"{kind}_rows"] = sum(_rows(f) for f in files)
        return paths

    def tools(paths, out):
        rows = []
        for kind in shapes:
            o = os.path.join(out, f"wide-{command}-{kind}.parquet")
            tool = sptool_tool(*_command_args(command, paths[kind], o), outputs=[o])
            tool.name = f"sptool, {'FROSTT extents' if kind == 'wide' else '<= 64-bit twin'}"
            rows.append(tool)
        if harness.BASELINE:
            o = os.path.join(out, f"wide-{command}-baseline.parquet")
            rows.append(baseline_tool(sptool_tool(*_command_args(command, paths["narrow"], o), outputs=[o]),
                                      "sptool of --baseline, <= 64-bit twin"))
        return rows

    def report(paths, rows):
        per = {}
        for row, kind in zip(rows, ("wide", "narrow", "narrow")):
            if row["median"]:
                n = paths[f"{kind}_rows"]
                per[row["tool"]] = (row["median"] / n * 1e9, row["cpu_median"] / n * 1e9)
        notes = ["ns per entry (wall / CPU): " + "; ".join(f"{t} {w:.1f} / {c:.1f}" for t, (w, c) in per.items())]
        wide_row, narrow_row = rows[0]["tool"], rows[1]["tool"]
        if wide_row in per and narrow_row in per:
            notes.append(f"wide / narrow per entry: {per[wide_row][0] / per[narrow_row][0]:.2f}x wall, "
                         f"{per[wide_row][1] / per[narrow_row][1]:.2f}x CPU (goal <= 1.5x); peak RSS "
                         f"{rows[0]['max_rss'] / 2**20:.0f} / {rows[1]['max_rss'] / 2**20:.0f} MiB")
        if len(rows) > 2 and rows[2]["median"] and narrow_row in per:
            now, before = per[narrow_row], per[rows[2]["tool"]]
            notes.append(f"narrow now / baseline per entry: {now[0] / before[0]:.2f}x wall, "
                         f"{now[1] / before[1]:.2f}x CPU")
        return notes

    bench = f"wide-{command}-{name}" + ("" if dist == "uniform" else f"-{dist}")
    register(Benchmark(
        bench, f"{command} on {name}'s extents {' x '.join(f'{s:,}' for s in wide)} ({dist} indices) beside "
        f"its <= 64-bit twin {' x '.join(f'{s:,}' for s in shapes['narrow'])}",
        "wide at most 1.5x the narrow time per entry (ratio >= 0.67; see the note's per-entry figure)",
        prepare, tools, report=report,
    ))


for _dist in DISTRIBUTIONS:
    for _name in FROSTT:
        for _command in COMMANDS:
            _register(_command, _name, _dist)


if __name__ == "__main__":
    sys.modules["wide_bench"] = sys.modules[__name__]  # run.py's import of this module: this one, not a second copy
    import run

    sys.exit(run.main_of("wide-", "wide.json", sys.argv[1:]))
