"""apply: a row-sparse gradient applied to a dense float32 table in place (sgd, adagrad, adam, adam
with --no-fsync and under --memory) against the NumPy script a user would write.  Registered into
harness.BENCHMARKS on import.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
from harness import SEED, SIZES, Benchmark, Tool, python_tool, register, remove, sptool_tool

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
            remove(state)
            remove(os.path.join(data, f".apply-{optimizer}-{tool}.npy.journal"))  # the last run's redo journal
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
