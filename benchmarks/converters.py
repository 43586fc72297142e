"""Reading and writing files: validate, text formats to Parquet and back (FROSTT .tns, svmlight,
TFRecord Examples), an in-memory SparseTensor written through the API, and validate and convert
through a filesystem URL against the plain path.  Registered into harness.BENCHMARKS on import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import harness
import numpy as np
from harness import SEED, Benchmark, Tool, out_path, python_tool, register, sptool_tool
from inputs import canonical_coords, prepare_validate, write_tns

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


register(Benchmark(
    "validate", "full validation of a canonical 3-D float64 tensor",
    "sptool within 1.5x of a plain pyarrow read_table", prepare_validate, _tools_validate,
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


def convert_missing() -> str | None:
    try:
        rc = subprocess.run(sptool_tool("convert", "--help").argv[:-1], capture_output=True).returncode
    except OSError:
        rc = 127
    return None if rc == 0 else "convert not available"


def tools_tns(paths: dict, out: str) -> list[Tool]:
    tns = paths["tns"]
    outs = [os.path.join(out, f"convert-{name}.parquet") for name in ("sptool", "arrow", "numpy")]
    return [
        sptool_tool("convert", tns, "-o", outs[0], outputs=[outs[0]]),
        python_tool("pyarrow.csv + write_table", PEER_TNS_ARROW, tns, outs[1], outputs=[outs[1]]),
        python_tool("numpy.loadtxt + write_table", PEER_TNS_NUMPY, tns, outs[2], outputs=[outs[2]]),
        Tool("I/O floor: cat the text", ["cat", tns], []),
        python_tool("I/O floor: pyarrow.csv parse only", FLOOR_TNS_PARSE, tns),
    ]


def check_tns(paths: dict, out: str) -> str | None:
    import pyarrow.parquet as pq

    path = os.path.join(out, "convert-sptool.parquet")
    if not os.path.exists(path):
        return "sptool convert wrote no output"
    rows = pq.read_metadata(path).num_rows
    return None if rows == paths["rows"] else f"sptool convert wrote {rows} rows, expected {paths['rows']}"


def _prepare_tns(data: str, params: dict) -> dict:
    n = params["tns_lines"]
    path = os.path.join(data, f"convert-{n}.tns")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 1)
        write_tns(path, canonical_coords(rng, harness.SHAPE_3D, n), rng.standard_normal(n))
    return {"tns": path, "rows": n}


register(Benchmark(
    "convert-tns", "FROSTT .tns text (3-D, 1-based indices) to a Parquet file", "(none set yet)",
    _prepare_tns, tools_tns, skip=convert_missing, check=check_tns,
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
    paths = prepare_validate(data, params)
    stream = paths["big"][: -len(".parquet")] + ".arrows"
    if not os.path.exists(stream):
        subprocess.run(sptool_tool("convert", paths["big"], "-o", stream).argv, check=True)
    return {**paths, "stream": stream}


register(Benchmark(
    "validate-url", "full validation of the validate tensor named by a sub:// URL, against its plain path",
    "ratio (URL time / plain time) <= 1.1", prepare_validate,
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
    "plain paths", "ratio (URL time / plain time) <= 1.1", _prepare_tns, _tools_tns_url, skip=convert_missing,
))


# -- svmlight -----------------------------------------------------------------------------------
# The benchmark: a generated ~200 MB svmlight file (at --size medium) to a Parquet file,
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


def write_svm_text(path: str, megabytes: int, per_row: int, n_features: int, seed: int):
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
            write_svm_text(path, mb, per_row, n_features, SEED + 7)
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
        ">= 5x sklearn, > 1x svmloader", _prepare_svm(_shape), _tools_svm, skip=convert_missing, check=_check_svm,
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
    "MB/s reported against the reading direction", _prepare_svm_write, _tools_svm_write, skip=convert_missing,
    check=_check_svm_write,
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
    a, b = out_path(out, "write-sptool.parquet"), out_path(out, "write-pyarrow.parquet")
    args = (paths["indices"], paths["values"], paths["shape"])
    return [python_tool("sptool (SparseTensor + sptool.write)", WRITE_SPTOOL, *args, a, outputs=[a]),
            python_tool("pyarrow write_table", WRITE_PYARROW, *args, b, outputs=[b])]


for _name, _shape, _sort, _desc in (
    ("write-unsorted", (1_000_000, 100_000), False, "SparseTensor(indices, values, shape) of unsorted entries, "
     "written to Parquet"),
    ("write-sorted", harness.SHAPE_REORDER, True, "SparseTensor of row-major entries (3-D), written to Parquet"),
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
TESTS = os.path.join(os.path.dirname(harness.HERE), "tests")

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
    return convert_missing()


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
    o = [out_path(out, f"tfrecord-{x}.parquet") for x in ("sptool", "protobuf", "tf")]
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

    got = pq.read_table(out_path(out, "tfrecord-sptool.parquet"))
    peer = pq.read_table(out_path(out, "tfrecord-protobuf.parquet"))
    same = all(np.array_equal(got.column(c).to_numpy(), peer.column(c).to_numpy())
               for c in ("indices_0", "indices_1", "values"))
    if same and _tensorflow_present():
        # TensorFlow's sparse_merge reorders with an unstable sort: a repeated id's values may come
        # in another order, so entries are compared with ties put in value order on both sides.
        tf_out = pq.read_table(out_path(out, "tfrecord-tf.parquet"))
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
    o = [out_path(out, f"write-{x}.tfrecord") for x in ("sptool", "protobuf")]
    return [sptool_tool("convert", paths["parquet"], "-o", o[0], "--ids", "ids", "--values", "values", outputs=[o[0]]),
            python_tool("protobuf SerializeToString loop + google-crc32c framing", PEER_TFRECORD_WRITE_PROTOBUF,
                        paths["parquet"], o[1], TESTS, str(paths["examples"]), outputs=[o[1]])]


def _check_tfrecord_write(paths: dict, out: str):
    sys.path.insert(0, TESTS)
    import tfrecord_oracle

    a, b = out_path(out, "write-sptool.tfrecord"), out_path(out, "write-protobuf.tfrecord")
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
