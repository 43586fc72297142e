"""The byte-flip table: 1-4 random bytes flipped in one region of an sptool-written
Parquet file (the index columns' data pages, the values' data pages, a dictionary page, the
footer), then the commands that read it; each run is either detected (exit 1 or 2 with a
one-line message), right (exit 0 and the answer NumPy gives on the undamaged file) or wrong
(exit 0 with another answer, or any other outcome: a crash, a traceback, a message of several
lines).

    python tests/byteflip.py --seed 1 --trials 200 [--work DIR]

Seeds: one canonical 3-D tensor per value type (every type of formats/SPEC.md), written by
sptool (one row group, page checksums on).  Commands: validate, validate --deep, todense,
reduce --axis 0, reorder --perm 2,1,0, slice and add (the tensor to itself).  A command that
refuses the undamaged file of a value type (todense of strings) is not run on its damaged ones.

The oracles are NumPy's, on the undamaged file's entries as pyarrow reads them: the dense
array, its sum over axis 0, the entries sorted by (2, 1, 0), the box, twice the array.  An
accepting ``validate`` is right when pyarrow reads the damaged file as the same tensor (same
entries, same sptool metadata): the flip changed nothing that matters.

Prints the table (per region: trials, runs, detected, right, wrong) and a JSON report with
every wrong run and its reproducing seed; exit status 1 if any run was wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from fuzz import _fork_call, _fork_run, classify  # noqa: E402

VALUE_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
               "float32", "float64", "complex64", "complex128", "string", "binary")
SHAPE = (12, 10, 8)
REGIONS = ("index pages", "values pages", "dictionary page", "footer")

SEED_SCRIPT = r"""
import os, sys, numpy as np, sptool
out, types, shape = sys.argv[1], sys.argv[2].split(","), tuple(int(s) for s in sys.argv[3].split(","))
rng = np.random.default_rng(5)
flat = np.unique(rng.integers(0, np.prod(shape), 300))
idx = np.stack(np.unravel_index(flat, shape), axis=1)
for vt in types:
    if vt in ("string", "binary"):
        words = [f"w{int(k) % 17}" for k in rng.integers(0, 1000, len(idx))]
        values = np.array(words if vt == "string" else [w.encode() for w in words], dtype=object)
    elif vt == "bool":
        values = rng.random(len(idx)) < 0.5
    elif vt.startswith("complex"):
        values = (rng.standard_normal(len(idx)) + 1j * rng.standard_normal(len(idx))).astype(vt)
    elif vt.startswith("float"):
        values = rng.standard_normal(len(idx)).astype(vt)
    else:
        values = rng.integers(1, 100, len(idx)).astype(vt)
    t = sptool.SparseTensor(idx, values, shape, sort_order=(0, 1, 2), unique=True)
    sptool.write(t, os.path.join(out, vt + ".parquet"))
"""

COMMANDS = {
    "validate": ["validate", "IN"],
    "validate --deep": ["validate", "--deep", "IN"],
    "todense": ["todense", "IN", "-o", "out.npy"],
    "reduce --axis 0": ["reduce", "IN", "--op", "sum", "--axis", "0", "-o", "out.parquet"],
    "reorder": ["reorder", "IN", "--perm", "2,1,0", "-o", "out.parquet"],
    "slice": ["slice", "IN", "--start", "2,1,0", "--size", "6,-1,5", "-o", "out.parquet"],
    "add": ["add", "IN", "IN", "-o", "out.parquet"],
}
BOX = ((2, 8), (1, 10), (0, 5))  # the slice's start and size, as [start, end) per dimension


# ---------------------------------------------------------------------------------------------
# Regions and flips (pure Python on bytes: the process forks its commands and starts no threads).

def regions(path: str) -> dict:
    """[start, end) byte ranges of each region of the file, from its footer as pyarrow reads it."""
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(size - 8)
        footer_len = int.from_bytes(f.read(4), "little")
    found = {r: [] for r in REGIONS}
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            first = col.data_page_offset
            if col.has_dictionary_page and col.dictionary_page_offset:
                found["dictionary page"].append((col.dictionary_page_offset, col.data_page_offset))
                first = col.dictionary_page_offset
            name = md.schema.column(c).path.split(".")[0]
            found["values pages" if name == "values" else "index pages"].append(
                (col.data_page_offset, first + col.total_compressed_size))
    found["footer"].append((size - 8 - footer_len, size - 8))
    return {r: spans for r, spans in found.items() if spans}


def flip(data: bytes, spans, rng: random.Random) -> tuple[bytes, list[int]]:
    """1-4 bytes of the spans, each XORed with a random non-zero byte."""
    out = bytearray(data)
    where = []
    for _ in range(rng.randint(1, 4)):
        lo, hi = rng.choice(spans)
        at = rng.randrange(lo, hi)
        out[at] ^= rng.randrange(1, 256)
        where.append(at)
    return bytes(out), where


# ---------------------------------------------------------------------------------------------
# NumPy's answers on the undamaged file, and the verdict on a run that exited 0.

def _entries(path: str):
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = json.loads(pq.read_metadata(path).metadata[b"sptool"])
    K = meta.get("sparse_ndim", len(meta["shape"]))
    keys = np.stack([table.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1)
    values = table.column("values").to_numpy(zero_copy_only=False)
    return meta, keys, values


def _dense(keys, values, shape):
    import numpy as np

    dense = np.zeros(shape, dtype=np.result_type(values.dtype, np.float64) if values.dtype != object else object)
    np.add.at(dense, tuple(keys.T), values)
    return dense


def _same(a, b) -> bool:
    import numpy as np

    if a.shape != b.shape:
        return False
    if a.dtype == object or b.dtype == object:
        return bool(np.all(a == b))
    return bool(np.allclose(a.astype(np.complex128), b.astype(np.complex128), rtol=1e-6, atol=1e-6, equal_nan=True))


def verdict(command: str, original: str, damaged: str, case_dir: str) -> str:
    """'right' or what is wrong with a run of ``command`` that exited 0."""
    import numpy as np

    meta, keys, values = _entries(original)
    shape = tuple(meta["shape"])
    if command.startswith("validate"):
        try:
            got_meta, got_keys, got_values = _entries(damaged)
        except Exception as e:  # noqa: BLE001 - pyarrow cannot read what validate accepted
            return f"accepted a file pyarrow cannot read: {type(e).__name__}: {e}"
        same = got_meta == meta and np.array_equal(got_keys, keys) and _same(got_values, values)
        return "right" if same else "accepted a file that holds another tensor"
    if command == "todense":
        got = np.load(os.path.join(case_dir, "out.npy"), allow_pickle=False)
        return "right" if _same(got, _dense(keys, values, shape)) else "todense differs from NumPy"
    out_meta, out_keys, out_values = _entries(os.path.join(case_dir, "out.parquet"))
    if command.startswith("reduce"):
        want = _dense(keys, values, shape).sum(axis=0)
        return "right" if _same(_dense(out_keys, out_values, want.shape), want) else "the sums differ from NumPy"
    if command == "reorder":
        order = np.lexsort((keys[:, 0], keys[:, 1], keys[:, 2]))
        ok = np.array_equal(out_keys, keys[order]) and _same(out_values, values[order])
        return "right" if ok else "the reordered entries differ from NumPy's sort"
    if command == "slice":
        inside = np.all([(keys[:, d] >= lo) & (keys[:, d] < hi) for d, (lo, hi) in enumerate(BOX)], axis=0)
        ok = np.array_equal(out_keys, keys[inside] - [lo for lo, _ in BOX]) and _same(out_values, values[inside])
        return "right" if ok else "the box differs from NumPy's"
    if command == "add":
        want = 2 * _dense(keys, values, shape)
        return "right" if _same(_dense(out_keys, out_values, shape), want) else "the sum differs from NumPy"
    raise ValueError(command)


# ---------------------------------------------------------------------------------------------

def _clean(case_dir: str):
    """An empty case directory, with the scratch directory a forked run takes as TMPDIR."""
    for name in os.listdir(case_dir):
        p = os.path.join(case_dir, name)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    os.mkdir(os.path.join(case_dir, ".fuzz-tmp"))


def _run(command: str, path: str, case_dir: str, timeout: int) -> tuple[int, str]:
    argv = [path if a == "IN" else a for a in COMMANDS[command]]
    code, _, err = _fork_run(argv, case_dir, None, timeout)
    return code, err


def usable_commands(seed_dir: str, work: str, timeout: int, value_types=VALUE_TYPES) -> dict:
    """Per value type, the commands that accept its undamaged file and give NumPy's answer."""
    case_dir = os.path.join(work, "case")
    os.makedirs(case_dir, exist_ok=True)
    usable = {}
    for vt in value_types:
        path = os.path.join(seed_dir, vt + ".parquet")
        usable[vt] = []
        for command in COMMANDS:
            _clean(case_dir)
            code, err = _run(command, path, case_dir, timeout)
            if code == 0 and _fork_call(verdict, command, path, path, case_dir) == "right":
                usable[vt].append(command)
    _clean(case_dir)
    return usable


def table(seed: int, trials: int, work: str, *, timeout: int = 60, value_types=VALUE_TYPES, progress=None) -> dict:
    seed_dir = os.path.join(work, "seeds")
    if not os.path.isdir(seed_dir):
        os.makedirs(seed_dir)
        subprocess.run([sys.executable, "-c", SEED_SCRIPT, seed_dir, ",".join(VALUE_TYPES),
                        ",".join(map(str, SHAPE))], check=True)
    from fuzz import _preload

    spans = {vt: _fork_call(regions, os.path.join(seed_dir, vt + ".parquet")) for vt in value_types}
    usable = _fork_call(usable_commands, seed_dir, work, timeout, value_types)
    _preload()
    counts = {r: {"trials": 0, "runs": 0, "detected": 0, "right": 0, "wrong": 0} for r in REGIONS}
    wrong = []
    case_dir = os.path.join(work, "case")
    os.makedirs(case_dir, exist_ok=True)
    damaged = os.path.join(work, "damaged.parquet")
    for trial in range(trials):
        rng = random.Random(f"{seed}-{trial}")
        vt = rng.choice(value_types)
        region = rng.choice(sorted(spans[vt]))
        original = os.path.join(seed_dir, vt + ".parquet")
        with open(original, "rb") as f:
            data, where = flip(f.read(), spans[vt][region], rng)
        with open(damaged, "wb") as f:
            f.write(data)
        row = counts[region]
        row["trials"] += 1
        for command in usable[vt]:
            _clean(case_dir)
            code, err = _run(command, damaged, case_dir, timeout)
            row["runs"] += 1
            problems = classify(COMMANDS[command], code, err)
            if code in (1, 2) and not problems:
                row["detected"] += 1
                continue
            result = _fork_call(verdict, command, original, damaged, case_dir) if code == 0 and not problems \
                else "; ".join(f"{c}: {d.strip()[:200]}" for c, d in problems) or f"exit {code}: {err.strip()}"
            if result == "right":
                row["right"] += 1
                continue
            row["wrong"] += 1
            wrong.append({"trial": trial, "seed": seed, "value_type": vt, "region": region, "bytes": where,
                          "command": command, "exit": code, "detail": str(result)[:400]})
        if progress:
            progress(trial, counts)
    _clean(case_dir)
    return {"seed": seed, "trials": trials, "table": counts, "wrong": wrong, "commands": usable}


def markdown(report: dict) -> str:
    lines = ["| region | trials | runs | detected | right | wrong |", "|---|---|---|---|---|---|"]
    total = {"trials": 0, "runs": 0, "detected": 0, "right": 0, "wrong": 0}
    for region, row in report["table"].items():
        lines.append(f"| {region} | " + " | ".join(str(row[k]) for k in total) + " |")
        for k in total:
            total[k] += row[k]
    lines.append("| all | " + " | ".join(str(total[k]) for k in total) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--work", default=None, help="Scratch directory (default: a new temporary one).")
    ap.add_argument("--timeout", type=int, default=60, help="Seconds a command may run.")
    ap.add_argument("--types", default=",".join(VALUE_TYPES), help="Comma-separated value types.")
    args = ap.parse_args(argv)
    # Absolute: the commands run with the case directory as their working directory.
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="sptool-byteflip-")
    os.makedirs(work, exist_ok=True)
    t0 = time.time()

    def progress(trial, counts):
        if (trial + 1) % 25 == 0:
            print(f"trial {trial + 1}: {time.time() - t0:.0f} s", file=sys.stderr)

    report = table(args.seed, args.trials, work, timeout=args.timeout, value_types=args.types.split(","),
                   progress=progress)
    report["seconds"] = round(time.time() - t0, 1)
    print(markdown(report))
    print(json.dumps(report, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
