"""A mutation fuzzer for sptool: valid inputs of every kind, damaged at random, thrown
at the commands that read them; each run is classified.

    python tests/fuzz.py --seed 1 --cases 5000 [--jobs 2] [--work DIR] [--keep-failures DIR]

Inputs: Parquet files (floats, hybrid blocks, strings, several row groups), an Arrow IPC stream
(read from a file and from stdin), a directory of parts, FROSTT .tns, Matrix Market, CSV, svmlight
and .npy.  Mutations: flipped, deleted, inserted and repeated bytes, truncation, a field of the
Parquet footer set to a hostile value (located with our own Thrift walker, thrift_footer.py), the
``sptool`` JSON metadata rewritten (keys dropped, changed, nested deep), text lines changed
(numbers out of range, fields missing, bad UTF-8), parts deleted, duplicated or replaced.

Each command runs in a forked child of a process that has already imported sptool, numpy and
pyarrow (and started no threads), with the case's directory as TMPDIR.  A run fails when:

- ``exit``: its exit code is not 0, 1 or 2 (3 is sptool's internal error);
- ``signal``: it died of a signal (``hang`` when the alarm of --timeout seconds fired);
- ``traceback``: stderr holds a Python traceback;
- ``message``: a refusal (exit 1 or 2) that is not one line starting ``Error:``;
- ``leftover``: a file or directory other than the inputs and the committed output remains;
- ``modified``: an input changed;
- ``invalid-output``: ``validate`` accepts the input but rejects the tensor the command wrote;
- ``wrong``: ``validate --deep`` accepts the input and todense / reduce disagree with NumPy
  applied to the entries as pyarrow reads them.

Exit status 1 if any run failed; a JSON summary (totals by category, failures with their
reproducing seed) on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: its thread pool would not fork

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from thrift_footer import BINARY, I32, I64, footer_fields, replace_field, varint, zigzag_varint  # noqa: E402

CATEGORIES = ("exit", "signal", "hang", "traceback", "message", "leftover", "modified", "invalid-output", "wrong")

# ---------------------------------------------------------------------------------------------
# Seeds: valid inputs, made once per work directory by a separate process (so the fuzzing
# process never starts pyarrow's threads before forking).

SEED_SCRIPT = r"""
import os, sys, numpy as np, sptool
out = sys.argv[1]
rng = np.random.default_rng(11)
def canon(shape, n):
    idx = np.unique(np.stack([rng.integers(0, s, n) for s in shape], axis=1), axis=0)
    return idx
idx = canon((6, 7, 5), 60)
t = sptool.SparseTensor(idx, rng.standard_normal(len(idx)), (6, 7, 5))
os.environ["SPTOOL_ROW_GROUP_ROWS"] = "16"
sptool.write(t, os.path.join(out, "t.parquet"))
sptool.write(t, os.path.join(out, "t.arrows"))
h = sptool.SparseTensor(np.array([[0], [2], [3]]), rng.standard_normal((3, 2, 2)), (5, 2, 2))
sptool.write(h, os.path.join(out, "h.parquet"))
i2 = canon((9, 4), 12)
s = sptool.SparseTensor(i2, np.array([f"w{k}" for k in range(len(i2))], dtype=object), (9, 4))
sptool.write(s, os.path.join(out, "s.parquet"))
m = sptool.SparseTensor(i2, rng.integers(-5, 5, len(i2)).astype(np.int32), (9, 4))
sptool.write(m, os.path.join(out, "m.parquet"))
sptool.split(os.path.join(out, "t.parquet"), os.path.join(out, "parts", "part-{i:06d}.parquet"), axis=0, num_split=3)
sptool.convert(os.path.join(out, "t.parquet"), os.path.join(out, "t.tns"))
sptool.convert(os.path.join(out, "m.parquet"), os.path.join(out, "m.mtx"))
sptool.convert(os.path.join(out, "m.parquet"), os.path.join(out, "m.csv"))
np.save(os.path.join(out, "d.npy"), rng.standard_normal((4, 5)) * (rng.random((4, 5)) < 0.4))
with open(os.path.join(out, "x.svm"), "w") as f:
    f.write("1 1:0.5 3:2\n0 2:1.5\n1 1:1 4:-2 7:3\n")
"""

KINDS = {
    "t.parquet": "parquet", "h.parquet": "parquet", "s.parquet": "parquet", "m.parquet": "parquet",
    "t.arrows": "stream", "parts": "dir", "t.tns": "text", "m.mtx": "text", "m.csv": "text",
    "x.svm": "text", "d.npy": "npy",
}

# The commands each input kind meets: IN is the input, OUT a name in the case directory.
TENSOR_COMMANDS = [
    ["validate", "IN"], ["validate", "--deep", "--strict", "IN"], ["info", "IN"], ["info", "--scan", "IN"],
    ["head", "IN"], ["todense", "IN", "-o", "out.npy"], ["convert", "IN", "-o", "out.tns"],
    ["reorder", "IN", "--perm", "REV", "-o", "out.parquet"], ["reduce", "IN", "--op", "sum", "--axis", "0",
                                                               "-o", "out.parquet"],
    ["reduce", "IN", "--op", "sum"], ["slice", "IN", "--start", "ZEROS", "--size", "TWOS", "-o", "out.parquet"],
    ["transpose", "IN", "-o", "out.arrows"], ["add", "IN", "IN", "-o", "out.parquet"],
    ["split", "IN", "--axis", "0", "--num-split", "2", "-o", "out-{i}.parquet"], ["concat", "IN", "IN", "--axis", "0",
                                                                 "-o", "out.parquet"],
]
COMMANDS = {
    "parquet": TENSOR_COMMANDS,
    "dir": TENSOR_COMMANDS,
    "stream": TENSOR_COMMANDS + [["validate", "-", "<IN"], ["reduce", "-", "--op", "sum", "--axis", "0",
                                                             "-o", "out.parquet", "<IN"]],
    "text": [["convert", "IN", "-o", "out.parquet"], ["convert", "IN", "-o", "out.arrows"]],
    "npy": [["convert", "IN", "-o", "out.parquet"]],
}
OUTPUT_COMMANDS_CHECKED = ("reorder", "reduce", "slice", "transpose", "add", "concat", "convert")

# ---------------------------------------------------------------------------------------------
# Mutations (pure Python on bytes: the fuzzing process must not start threads before forking).

INTERESTING_INTS = [0, 1, -1, 2, 7, 255, 2**15, 2**31 - 1, -2**31, 2**32, 2**62, 2**63 - 1, -2**63]
INTERESTING_JSON = [None, -1, 0, 1, 2**63, -2**63 - 1, 1e308, "x", "", [], {}, [None], [-1, -1, -1], [2**40] * 3,
                    True, "float64", "string", [0, 1, 2], [2, 1, 0]]
TEXT_TOKENS = ["-1", "0", "99999999999999999999", "1e400", "nan", "inf", "-inf", "", "x", "1.5", "-0",
               "9223372036854775808", "\xff", "0x10", " ", "1:2:3", "%", "\x00"]


def _deep(n: int):
    return "[" * n + "]" * n


def mutate_json(doc: dict, rng: random.Random) -> str:
    keys = list(doc)
    choice = rng.randrange(6)
    if choice == 0 and keys:
        doc.pop(rng.choice(keys))
    elif choice == 1 and keys:
        doc[rng.choice(keys)] = rng.choice(INTERESTING_JSON)
    elif choice == 2:
        doc[rng.choice(keys + ["extra"])] = "@deep@"  # spliced in as text: too deep for json itself
        return json.dumps(doc).replace('"@deep@"', _deep(rng.choice([50, 500, 5000])))
    elif choice == 3 and "shape" in doc and isinstance(doc["shape"], list) and doc["shape"]:
        shape = list(doc["shape"])
        i = rng.randrange(len(shape))
        shape[i] = rng.choice([0, 1, None, -1, 2**62, (shape[i] or 1) - 1, (shape[i] or 0) + 1])
        doc["shape"] = shape
    elif choice == 4:
        for k in ("sort_order", "unique", "canonical", "nnz"):
            if k in doc:
                doc[k] = rng.choice(INTERESTING_JSON)
    else:
        return json.dumps(doc)[: rng.randrange(1, len(json.dumps(doc)) + 1)]
    return json.dumps(doc)


def _json_span(data: bytes) -> tuple[int, int] | None:
    start = data.find(b'{"format"')
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(data)):
        c = data[i]
        if c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return start, i + 1
    return None


def mutate_bytes(data: bytes, rng: random.Random, hot: tuple[int, int] | None = None) -> bytes:
    buf = bytearray(data)
    if not buf:
        return bytes([rng.randrange(256)])
    lo, hi = hot if hot and rng.random() < 0.5 else (0, len(buf))
    pos = rng.randrange(lo, max(lo + 1, min(hi, len(buf))))
    kind = rng.randrange(6)
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(lo, max(lo + 1, min(hi, len(buf))))] ^= rng.randrange(1, 256)
    elif kind == 1:
        del buf[pos:]
    elif kind == 2:
        del buf[pos:pos + rng.randint(1, 64)]
    elif kind == 3:
        buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == 4:
        n = rng.randint(1, 64)
        buf[pos:pos] = buf[pos:pos + n]
    else:
        buf[pos] = rng.choice([0, 0xFF, 0x7F, 0x80])
    return bytes(buf)


def mutate_parquet(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    try:
        base, fields = footer_fields(data)
    except (ValueError, IndexError):
        return mutate_bytes(data, rng), "bytes"
    r = rng.random()
    if r < 0.35:
        ints = [f for f in fields if f.kind in (I32, I64)]
        f = rng.choice(ints)
        value = rng.choice(INTERESTING_INTS + [rng.randrange(-40, 40)])
        return replace_field(data, f, zigzag_varint(value)), f"footer{f.path}={value}"
    if r < 0.6:
        meta = [f for f in fields if f.kind == BINARY and data[f.start:f.end].find(b'{"format"') >= 0]
        if meta:
            f = meta[0]
            raw = data[f.start:f.end]
            j = raw.find(b"{")
            try:
                doc = json.loads(raw[j:])
            except ValueError:
                doc = {}
            text = mutate_json(doc, rng).encode()
            value = varint(len(text)) + text
            return replace_field(data, f, value), "metadata-json"
    return mutate_bytes(data, rng, (base, len(data)) if r < 0.8 else None), "bytes"


def mutate_stream(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    span = _json_span(data)
    if span and rng.random() < 0.4:
        try:
            doc = json.loads(data[span[0]:span[1]])
        except ValueError:
            doc = {}
        text = mutate_json(doc, rng).encode()
        width = span[1] - span[0]
        if len(text) <= width:
            text = text + b" " * (width - len(text))  # the flatbuffer's string length stays right
        return data[:span[0]] + text + data[span[1]:], "metadata-json"
    trailer = data.rfind(b"sptool.trailer")
    if trailer > 0 and rng.random() < 0.3:
        return mutate_bytes(data, rng, (trailer, len(data))), "trailer-bytes"
    return mutate_bytes(data, rng), "bytes"


def mutate_text(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    r = rng.randrange(7)
    if r == 0:
        words = lines[i].split(b" ") if b" " in lines[i] else lines[i].split(b",")
        sep = b" " if b" " in lines[i] else b","
        if words:
            j = rng.randrange(len(words))
            tok = rng.choice(TEXT_TOKENS).encode("latin-1")
            if b":" in words[j] and rng.random() < 0.5:
                a, _, b = words[j].partition(b":")
                words[j] = (a + b":" + tok) if rng.random() < 0.5 else (tok + b":" + b)
            else:
                words[j] = tok
            lines[i] = sep.join(words)
    elif r == 1:
        del lines[i]
    elif r == 2:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif r == 3:
        lines.insert(i, rng.choice([b"%%MatrixMarket matrix coordinate real general", b"1 2", b"1 2 3 4 5",
                                    b"\xff\xfe", b"a,b,c", b"", b"#", b"3 3 99999999999999999999"]))
    elif r == 4:
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    elif r == 5:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        return mutate_bytes(data, rng), "bytes"
    return b"\n".join(lines), "lines"


def mutate_npy(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    header_end = data.find(b"\n") + 1
    if rng.random() < 0.5:
        head = data[:header_end]
        r = rng.randrange(4)
        if r == 0:
            # Some relabellings keep the element's 8 bytes, so that the data is read as that type.
            head = head.replace(b"'descr': '<f8'", rng.choice([b"'descr': '<c8'", b"'descr': 'O'",
                                                             b"'descr': '<U4'", b"'descr': 'zz'",
                                                             b"'descr': '<i8'", b"'descr': '>f8'",
                                                             b"'descr': '<U2'", b"'descr': '>U2'",
                                                             b"'descr': '|S8'", b"'descr': '<M8[s]'",
                                                             b"'descr': '|V8'", b"'descr': [('a', '<f8')]"]))
        elif r == 1:
            head = head.replace(b"(4, 5)", rng.choice([b"(4, 50)", b"(-1, 5)", b"(99999999999999999999,)",
                                                       b"()", b"(0, 5)", b"(4, 5, 1)", b"(" * 2000,
                                                       b"(20,)", b"(2, 2, 5)", b"(1,)"]))
        elif r == 2:
            head = head.replace(b"False", b"True")
        else:
            head = mutate_bytes(head, rng)
        return head + data[header_end:], "npy-header"
    return mutate_bytes(data, rng), "bytes"


def mutate_dir(folder: str, rng: random.Random):
    parts = sorted(n for n in os.listdir(folder) if n.endswith(".parquet"))
    r = rng.randrange(5)
    target = os.path.join(folder, rng.choice(parts))
    if r == 0 and len(parts) > 1:
        os.remove(target)
        return "part-deleted"
    if r == 1:
        shutil.copyfile(target, os.path.join(folder, f"part-{len(parts):06d}.parquet"))
        return "part-duplicated"
    if r == 2:
        with open(os.path.join(folder, rng.choice(["part-999999.parquet", "zz.parquet", "notes.txt"])), "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
        return "part-added"
    with open(target, "rb") as f:
        data = f.read()
    new, how = mutate_parquet(data, rng)
    with open(target, "wb") as f:
        f.write(new)
    return "part-" + how


# ---------------------------------------------------------------------------------------------
# Running one command in a forked child.

def _fork_run(argv: list[str], cwd: str, stdin_path: str | None, timeout: int) -> tuple[int, str, str]:
    """(status, stdout, stderr): status the exit code, or -signal."""
    out_path, err_path = os.path.join(cwd, ".fuzz-stdout"), os.path.join(cwd, ".fuzz-stderr")
    pid = os.fork()
    if pid == 0:  # the child: becomes `sptool ARGV`
        try:
            os.chdir(cwd)
            tempfile.tempdir = os.path.join(cwd, ".fuzz-tmp")
            os.environ["TMPDIR"] = tempfile.tempdir
            fd_in = os.open(stdin_path or os.devnull, os.O_RDONLY)
            fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            for fd, target in ((fd_in, 0), (fd_out, 1), (fd_err, 2)):
                os.dup2(fd, target)
            # A host such as pytest may have replaced sys.std* with its own capture objects.
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(timeout)
            from sptool.cli import main

            main(["-q"] + argv)
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(out_path, "rb") as f:
        out = f.read().decode("utf-8", "replace")
    with open(err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    os.remove(out_path)
    os.remove(err_path)
    return code, out, err


def _fork_call(fn, *args):
    """fn(*args) in a forked child (it may use pyarrow's threads), its JSON result returned."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            result = fn(*args)
        except Exception as e:  # noqa: BLE001 - reported to the parent, as a result
            result = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(result, default=str).encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks) or b"null")
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# The NumPy oracle: entries as pyarrow reads them, reduced or densified by NumPy.

def _entries(path: str):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if os.path.isdir(path):
        tables = [pq.read_table(os.path.join(path, n)) for n in sorted(os.listdir(path)) if n.endswith(".parquet")]
        meta = json.loads(pq.read_metadata(os.path.join(path, sorted(
            n for n in os.listdir(path) if n.endswith(".parquet"))[0])).metadata[b"sptool"])
        table = pa.concat_tables(tables)
    elif path.endswith(".arrows"):
        with pa.ipc.open_stream(path) as r:
            meta = json.loads(r.schema.metadata[b"sptool"])
            table = r.read_all()
        shape = (json.loads(table.schema.metadata.get(b"sptool.trailer", b"{}")).get("shape")
                 if table.schema.metadata else None)
        meta["shape"] = meta.get("shape") if all(s is not None for s in meta.get("shape", [None])) else shape
    else:
        table = pq.read_table(path)
        meta = json.loads(pq.read_metadata(path).metadata[b"sptool"])
    K = meta.get("sparse_ndim", len(meta["shape"]))
    keys = np.stack([table.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1) if len(table) else \
        np.empty((0, K), dtype=np.int64)
    values = None
    if len(table):
        col = table.column("values").combine_chunks()
        while pa.types.is_list(col.type) or pa.types.is_fixed_size_list(col.type):  # hybrid: dense blocks
            col = col.flatten()
        values = np.asarray(col.to_numpy(zero_copy_only=False))
    return meta, keys, values


def oracle_check(path: str, case_dir: str) -> dict:
    """Compare todense and reduce --axis 0 with NumPy on the entries pyarrow reads."""
    import numpy as np

    meta, keys, values = _entries(path)
    if meta.get("value_type") not in ("float64", "float32", "int32", "int64") or values is None:
        return {"skipped": True}
    if len(keys) and len(np.unique(keys, axis=0)) != len(keys):
        return {"skipped": True}
    shape = tuple(meta["shape"])
    fill = meta.get("fill_value") or 0
    dense = np.full(shape, fill, dtype=np.float64)
    dense[tuple(keys.T)] = values.reshape(len(keys), *shape[keys.shape[1]:]) if len(keys) else 0
    problems = []
    npy = os.path.join(case_dir, "oracle.npy")
    got_code, _, err = _fork_run(["todense", path, "-o", npy], case_dir, None, 60)
    if got_code == 0:
        got = np.load(npy)
        if got.shape != shape or not np.allclose(got, dense, equal_nan=True):
            problems.append("todense differs from NumPy")
        os.remove(npy)
    else:
        problems.append(f"todense refused an input validate --deep accepts: {err.strip()}")
    if fill == 0 and keys.shape[1] == len(shape):
        red = os.path.join(case_dir, "oracle.parquet")
        code, _, err = _fork_run(["reduce", path, "--op", "sum", "--axis", "0", "-o", red], case_dir, None, 60)
        if code == 0:
            rmeta, rkeys, rvalues = _entries(red)
            got = np.zeros(tuple(rmeta["shape"]))
            if len(rkeys):
                np.add.at(got, tuple(rkeys.T), rvalues)
            if got.shape != dense.shape[1:] or not np.allclose(got, dense.sum(axis=0)):
                problems.append("reduce --axis 0 differs from NumPy")
            os.remove(red)
        else:
            problems.append(f"reduce refused an input validate --deep accepts: {err.strip()}")
    return {"problems": problems}


# ---------------------------------------------------------------------------------------------
# One case.

def _digest(path: str) -> str:
    h = hashlib.sha256()
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                p = os.path.join(root, name)
                h.update(os.path.relpath(p, path).encode())
                with open(p, "rb") as f:
                    h.update(f.read())
    else:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _listing(folder: str) -> set:
    out = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(root, name), folder))
    return out


def _remove(path: str):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def _expand(template, name, ndim):
    argv, stdin = [], None
    for a in template:
        if a == "<IN":
            stdin = name
        elif a == "IN":
            argv.append(name)
        elif a == "REV":
            argv.append(",".join(str(i) for i in reversed(range(ndim))))
        elif a == "ZEROS":
            argv.append(",".join(["0"] * ndim))
        elif a == "TWOS":
            argv.append(",".join(["2"] * ndim))
        else:
            argv.append(a)
    return argv, stdin


NDIM = {"t.parquet": 3, "t.arrows": 3, "parts": 3, "h.parquet": 1, "s.parquet": 2, "m.parquet": 2}


def classify(argv: list[str], code: int, err: str) -> list[tuple[str, str]]:
    """The failure categories of one run from its exit status (-N: killed by signal N) and stderr."""
    found = []
    if code == -signal.SIGALRM:
        found.append(("hang", err))
    elif code < 0:
        found.append(("signal", f"signal {-code}: {err}"))
    elif code not in (0, 1, 2):
        found.append(("exit", f"exit {code}: {err}"))
    if "Traceback" in err:
        found.append(("traceback", err))
    if code in (1, 2) and argv[0] != "validate":  # validate reports on stdout
        lines = [line for line in err.splitlines() if line.strip()]
        if len(lines) != 1 or not lines[0].startswith("Error:"):
            found.append(("message", err))
    return found


def leftovers(left: set, outputs: list[str], code: int) -> set:
    """What a run left in its directory (beyond the inputs) that it should not have: anything
    but the outputs it committed (none unless it succeeded)."""
    expected = set()
    if code == 0:
        for o in outputs:
            o = o.split("{")[0].rstrip("/")  # split's out-{i}.parquet: every piece
            expected |= {p for p in left if p.startswith(o)}
    return left - expected


def run_case(seed_dir: str, work: str, case: int, seed: int, timeout: int) -> list[dict]:
    rng = random.Random(f"{seed}-{case}")
    name = sorted(KINDS)[case % len(KINDS)]  # every input in turn: any run of len(KINDS) cases meets each
    kind = KINDS[name]
    case_dir = os.path.join(work, f"case-{case}")
    os.makedirs(os.path.join(case_dir, ".fuzz-tmp"))
    src = os.path.join(case_dir, name)
    if kind == "dir":
        shutil.copytree(os.path.join(seed_dir, name), src)
        how = mutate_dir(src, rng)
    else:
        with open(os.path.join(seed_dir, name), "rb") as f:
            data = f.read()
        mutate = {"parquet": mutate_parquet, "stream": mutate_stream, "text": mutate_text, "npy": mutate_npy}[kind]
        new, how = mutate(data, rng)
        with open(src, "wb") as f:
            f.write(new)
    before = _digest(src)
    inputs = _listing(case_dir)
    failures = []
    runs = 0

    def fail(category, argv, detail):
        failures.append({"case": case, "seed": seed, "input": name, "mutation": how, "category": category,
                         "command": argv, "detail": detail[-600:]})

    valid = None
    for template in COMMANDS[kind]:
        argv, stdin = _expand(template, name, NDIM.get(name, 2))
        code, out, err = _fork_run(argv, case_dir, src if stdin else None, timeout)
        runs += 1
        for category, detail in classify(argv, code, err):
            fail(category, argv, detail)
        if argv[:2] == ["validate", name] and len(argv) == 2:
            valid = code == 0
        outputs = [a for a in argv if a.startswith("out")]
        left = _listing(case_dir) - inputs - {".fuzz-tmp"}
        extra = leftovers(left, outputs, code)
        if extra:
            fail("leftover", argv, f"left behind: {sorted(extra)}")
        if (code == 0 and valid and argv[0] in OUTPUT_COMMANDS_CHECKED and outputs
                and outputs[0].endswith((".parquet", ".arrows", "/"))):
            vcode, _, verr = _fork_run(["validate", outputs[0]], case_dir, None, timeout)
            runs += 1
            if vcode != 0:
                fail("invalid-output", argv, verr)
        for p in left:
            if "/" not in p:
                _remove(os.path.join(case_dir, p))
        if _digest(src) != before:
            fail("modified", argv, "the input changed")
            break
    if kind in ("parquet", "stream", "dir"):
        vcode, _, _ = _fork_run(["validate", "--deep", name], case_dir, None, timeout)
        runs += 1
        if vcode == 0:
            result = _fork_call(oracle_check, src, case_dir) or {}
            runs += 2
            for p in result.get("problems", []):
                fail("wrong", ["todense/reduce", name], p)
            if "error" in result:
                fail("wrong", ["oracle", name], result["error"])
    shutil.rmtree(case_dir, ignore_errors=True)
    return runs, failures


def make_seeds(folder: str):
    os.makedirs(folder, exist_ok=True)
    subprocess.run([sys.executable, "-c", SEED_SCRIPT, folder], check=True)


def _preload():
    """Import what a command needs before forking, so each child starts warm, and keep pandas
    out as the ``sptool`` script does: otherwise every child imports it afresh, a second each."""
    from sptool.cli._without_pandas import keep_pandas_out

    keep_pandas_out()
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import rich.console  # noqa: F401  (the commands' console loads it lazily, half a second)

    import sptool  # noqa: F401
    from sptool.cli import COMMANDS as ALL
    from sptool.cli import load_command

    for name in {t[0] for ts in COMMANDS.values() for t in ts} & set(ALL):
        load_command(name)


def fuzz(seed: int, cases: int, work: str, *, timeout: int = 60, first: int = 0, progress=None) -> dict:
    seed_dir = os.path.join(work, "seeds")
    if not os.path.isdir(seed_dir):
        make_seeds(seed_dir)
    _preload()
    totals = {c: 0 for c in CATEGORIES}
    failures, runs = [], 0
    for case in range(first, first + cases):
        n, fs = run_case(seed_dir, work, case, seed, timeout)
        runs += n
        failures += fs
        for f in fs:
            totals[f["category"]] += 1
        if progress:
            progress(case, runs, len(failures))
    return {"seed": seed, "cases": cases, "first": first, "runs": runs, "failures_by_category": totals,
            "failures": failures}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--first", type=int, default=0, help="The first case number (to rerun one case).")
    ap.add_argument("--work", default=None, help="Scratch directory (default: a new temporary one).")
    ap.add_argument("--timeout", type=int, default=60, help="Seconds a command may run (a hang otherwise).")
    args = ap.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="sptool-fuzz-")
    os.makedirs(work, exist_ok=True)
    t0 = time.time()

    def progress(case, runs, nfail):
        if (case + 1) % 50 == 0:
            print(f"case {case + 1}: {runs} runs, {nfail} failures, {time.time() - t0:.0f} s", file=sys.stderr)

    report = fuzz(args.seed, args.cases, work, timeout=args.timeout, first=args.first, progress=progress)
    report["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(report, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
