"""Reductions and joins: reduce and add against DuckDB, Polars and pydata sparse (on the 3-D
tensors and the wide 2-D int32 matrix); the structural commands (concat, split, reshape, retain,
slice) against their I/O floor; TensorFlow's cross_hashed (a per-row cross join), bincount and
segment_sum.  Registered into harness.BENCHMARKS on import.
"""

from __future__ import annotations

import os
import subprocess

import harness
import numpy as np
from harness import SEED, SIZES, Benchmark, Tool, out_path, python_tool, register, remove, sptool_tool
from inputs import prepare_2d_int32, prepare_add, prepare_validate

# -- structural commands against their I/O floor ---------------------------------------------------
# Each floor is pyarrow reading the same input(s) and writing the same output rows with sptool's
# writer settings: the cost of the I/O alone (target: sptool within 1.5x, i.e. ratio >= 0.67).

FLOOR_PRELUDE = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from sptool.format import TensorMeta
    from sptool.io.sink import parquet_writer_options

    def meta_of(path):
        return TensorMeta.from_dict(json.loads(pq.read_metadata(path).metadata[b"sptool"]))

    def write(table, path, meta):
        pq.write_table(table, path, row_group_size=131072, **parquet_writer_options(meta, table["values"]))
"""

FLOOR_CONCAT = FLOOR_PRELUDE + """
    a, b = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
    write(pa.concat_tables([a, b]), sys.argv[3], meta_of(sys.argv[1]))
"""

FLOOR_SPLIT = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    meta = meta_of(sys.argv[1])
    edges = np.linspace(0, meta.shape[0], 5).astype(int)
    i0 = t.column("indices_0")
    for i in range(4):
        piece = t.filter(pc.and_(pc.greater_equal(i0, int(edges[i])), pc.less(i0, int(edges[i + 1]))))
        write(piece, sys.argv[2].replace("{i}", str(i)), meta)
"""

FLOOR_SAME = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    write(t, sys.argv[2], meta_of(sys.argv[1]))
"""

FLOOR_RETAIN = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    write(t.filter(pc.greater(t.column("values"), 0)), sys.argv[2], meta_of(sys.argv[1]))
"""

FLOOR_SLICE = FLOOR_PRELUDE + """
    t = pq.read_table(sys.argv[1])
    lo, hi = int(sys.argv[3]), int(sys.argv[4])
    i0 = t.column("indices_0")
    t = t.filter(pc.and_(pc.greater_equal(i0, lo), pc.less(i0, hi)))
    t = t.set_column(0, "indices_0", pc.subtract(t.column(0), lo))
    write(t, sys.argv[2], meta_of(sys.argv[1]))
"""


def _prepare_structural(data: str, params: dict) -> dict:
    paths = prepare_validate(data, params)
    halves = [os.path.join(data, f"half-{params['validate_nnz']}-{i}.parquet") for i in range(2)]
    if not all(os.path.exists(h) for h in halves):
        pattern = os.path.join(data, f"half-{params['validate_nnz']}-{{i}}.parquet")
        subprocess.run(sptool_tool("split", paths["big"], "--axis", "0", "--num", "2", "-o", pattern).argv,
                       check=True)
    paths["halves"] = halves
    return paths


def _tools_concat(paths: dict, out: str) -> list[Tool]:
    a, b = out_path(out, "concat-sptool.parquet"), out_path(out, "concat-floor.parquet")
    return [sptool_tool("concat", *paths["halves"], "--axis", "0", "-o", a, outputs=[a]),
            python_tool("I/O floor: pyarrow read both + write", FLOOR_CONCAT, *paths["halves"], b, outputs=[b])]


def _tools_split(paths: dict, out: str) -> list[Tool]:
    a, b = out_path(out, "split-sptool-{i}.parquet"), out_path(out, "split-floor-{i}.parquet")
    outs = lambda p: [p.replace("{i}", str(i)) for i in range(4)]  # noqa: E731
    return [sptool_tool("split", paths["big"], "--axis", "0", "--num", "4", "-o", a, outputs=outs(a)),
            python_tool("I/O floor: pyarrow read + write 4 pieces", FLOOR_SPLIT, paths["big"], b, outputs=outs(b))]


def _tools_reshape(paths: dict, out: str) -> list[Tool]:
    a, b = out_path(out, "reshape-sptool.parquet"), out_path(out, "reshape-floor.parquet")
    shape = f"{harness.SHAPE_3D[0] * harness.SHAPE_3D[1]},{harness.SHAPE_3D[2]}"
    return [sptool_tool("reshape", paths["big"], "--shape", shape, "-o", a, outputs=[a]),
            python_tool("I/O floor: pyarrow read + write", FLOOR_SAME, paths["big"], b, outputs=[b])]


def _tools_retain(paths: dict, out: str) -> list[Tool]:
    a, b = out_path(out, "retain-sptool.parquet"), out_path(out, "retain-floor.parquet")
    return [sptool_tool("retain", paths["big"], "--where", "values > 0", "-o", a, outputs=[a]),
            python_tool("I/O floor: pyarrow read + filter + write", FLOOR_RETAIN, paths["big"], b, outputs=[b])]


def _slice_box() -> tuple[int, int]:
    lo = harness.SHAPE_3D[0] // 2
    return lo, lo + max(harness.SHAPE_3D[0] // 100, 1)  # 1% of the leading dimension, all of the others


def _tools_slice(paths: dict, out: str) -> list[Tool]:
    a, b = out_path(out, "slice-sptool.parquet"), out_path(out, "slice-floor.parquet")
    lo, hi = _slice_box()
    start, size = f"{lo},0,0", f"{hi - lo},-1,-1"
    return [sptool_tool("slice", paths["big"], "--start", start, "--size", size, "-o", a, outputs=[a]),
            python_tool("pyarrow read whole file + filter + write", FLOOR_SLICE, paths["big"], b, str(lo), str(hi),
                        outputs=[b])]


def _check_slice(paths: dict, out: str) -> str | None:
    import sptool

    lo, hi = _slice_box()
    r = sptool.slice_(paths["big"], out_path(out, "slice-check.parquet"), start=(lo, 0, 0), size=(hi - lo, -1, -1))
    remove(out_path(out, "slice-check.parquet"))
    frac = r["bytes_read"] / r["bytes_total"]
    note = (f"read {r['row_groups_read']} of {r['row_groups_total']} row groups, "
            f"{r['bytes_read'] / 2**20:.1f} of {r['bytes_total'] / 2**20:.1f} MiB ({frac:.1%}; target < 10%)")
    return note if frac >= 0.10 else None, note


for _name, _desc, _tools in (
    ("concat", "concatenate two canonical halves along axis 0 (an append)", _tools_concat),
    ("split", "split a canonical 3-D tensor into 4 pieces along axis 0", _tools_split),
    ("reshape", "reshape a canonical 3-D tensor to 2-D (row order kept)", _tools_reshape),
    ("retain", "keep the entries with values > 0 (--where)", _tools_retain),
):
    register(Benchmark(_name, _desc, "sptool within 1.5x of the I/O floor (ratio >= 0.67)", _prepare_structural,
                       _tools))

register(Benchmark(
    "slice", "a box of 1% of the leading dimension from a row-major sorted file",
    "reads under 10% of the file's bytes (row-group pruning)", _prepare_structural, _tools_slice,
    check=_check_slice,
))

# -- reduce and add ----------------------------------------------------------------------------

PEER_REDUCE_DUCKDB = """
    import sys
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{sys.argv[1]}'").fetchall()]
    kept = ", ".join(n for n in names if n.startswith("indices_") and n != "indices_1")
    con.execute(f"COPY (SELECT {kept}, sum(values) AS values FROM '{sys.argv[1]}' "
                f"GROUP BY {kept}) TO '{sys.argv[2]}' (FORMAT parquet)")
"""

PEER_REDUCE_PYDATA = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sparse
    t = pq.read_table(sys.argv[1])
    shape = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sptool"])["shape"]
    coords = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)])
    s = sparse.COO(coords, t.column("values").to_numpy(), shape=shape, sorted=True, has_duplicates=False)
    r = s.sum(axis=1)
    pq.write_table(pa.table({"indices_0": r.coords[0], "indices_1": r.coords[1], "values": r.data}), sys.argv[2])
"""


PEER_REDUCE_POLARS = """
    import sys
    import polars as pl
    frame = pl.scan_parquet(sys.argv[1])
    kept = [c for c in frame.collect_schema().names() if c.startswith("indices_") and c != "indices_1"]
    frame.group_by(kept).agg(pl.col("values").sum()).sink_parquet(sys.argv[2])
"""


def tools_reduce(paths: dict, out: str) -> list[Tool]:
    src = paths["big"]
    a, b, c, d = (out_path(out, f"reduce-{x}.parquet") for x in ("sptool", "duckdb", "pydata", "polars"))
    tools = [sptool_tool("reduce", src, "--op", "sum", "--axis", "1", "-o", a, outputs=[a]),
             python_tool("duckdb GROUP BY to Parquet (2 threads)", PEER_REDUCE_DUCKDB, src, b, outputs=[b]),
             python_tool("polars group_by().sum() to Parquet", PEER_REDUCE_POLARS, src, d, outputs=[d])]
    if paths.get("ndim", 3) == 3:
        tools.append(python_tool("pydata sparse COO.sum(axis=1)", PEER_REDUCE_PYDATA, src, c, outputs=[c]))
    return tools


register(Benchmark(
    "reduce", "sum over axis 1 of a canonical 3-D float64 tensor, file to file",
    "ratio >= 2.5 against DuckDB, >= 3.3 against Polars, >= 3 against pydata sparse",
    prepare_validate, tools_reduce,
))

PEER_ADD_DUCKDB = """
    import sys
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{sys.argv[1]}'").fetchall()]
    keys = [n for n in names if n.startswith("indices_")]
    pick = ", ".join(f"coalesce(a.{k}, b.{k}) AS {k}" for k in keys)
    order = ", ".join(str(i + 1) for i in range(len(keys)))
    con.execute(f\"\"\"COPY (SELECT {pick}, coalesce(a.values, 0) + coalesce(b.values, 0) AS values
                        FROM '{sys.argv[1]}' a FULL OUTER JOIN '{sys.argv[2]}' b USING ({", ".join(keys)})
                        ORDER BY {order}) TO '{sys.argv[3]}' (FORMAT parquet)\"\"\")
"""

PEER_ADD_PYDATA = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sparse
    def load(path):
        t = pq.read_table(path)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        coords = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)])
        return sparse.COO(coords, t.column("values").to_numpy(), shape=shape, sorted=True, has_duplicates=False)
    r = load(sys.argv[1]) + load(sys.argv[2])
    cols = {f"indices_{k}": r.coords[k] for k in range(3)}
    pq.write_table(pa.table({**cols, "values": r.data}), sys.argv[3])
"""

PEER_ADD_POLARS = """
    import sys
    import polars as pl
    a, b = pl.scan_parquet(sys.argv[1]), pl.scan_parquet(sys.argv[2])
    keys = [c for c in a.collect_schema().names() if c.startswith("indices_")]
    total = pl.col("values").fill_null(0) + pl.col("values_b").fill_null(0)
    (a.join(b, on=keys, how="full", coalesce=True, suffix="_b").select(*keys, total.alias("values"))
     .sort(keys).sink_parquet(sys.argv[3]))
"""


def tools_add(paths: dict, out: str) -> list[Tool]:
    a, b = paths["a"], paths["b"]
    o1, o2, o3, o4 = (out_path(out, f"add-{x}.parquet") for x in ("sptool", "duckdb", "pydata", "polars"))
    tools = [sptool_tool("add", a, b, "-o", o1, outputs=[o1]),
             python_tool("duckdb FULL OUTER JOIN + coalesce, ordered", PEER_ADD_DUCKDB, a, b, o2, outputs=[o2]),
             python_tool("polars full join + fill_null, sorted", PEER_ADD_POLARS, a, b, o4, outputs=[o4])]
    if paths.get("ndim", 3) == 3:
        tools.append(python_tool("pydata sparse a + b", PEER_ADD_PYDATA, a, b, o3, outputs=[o3]))
    return tools


register(Benchmark(
    "add", "sparse + sparse of two canonical 3-D float64 tensors, file to file",
    "ratio >= 2.5 against DuckDB, >= 5 against Polars, >= 3 against pydata sparse",
    prepare_add, tools_add,
))

register(Benchmark(
    "reduce-2d-int32", "sum over axis 1 of a canonical 300k x 300k int32 matrix, file to file",
    "sptool at least as fast as DuckDB and Polars", prepare_2d_int32("reduce"), tools_reduce,
))
register(Benchmark(
    "add-2d-int32", "sparse + sparse of two canonical 300k x 300k int32 matrices, file to file",
    "sptool at least as fast as DuckDB and Polars", prepare_2d_int32("add"), tools_add,
))

# -- cross-hashed and bincount --------------------------------------------------------

# Rows of the [batch, ids] inputs per size; --size medium is the 1M rows.
for _size, _rows in {"small": 100_000, "medium": 1_000_000, "large": 2_000_000}.items():
    SIZES[_size]["cross_rows"] = _rows
CROSS_VOCAB = 1_000  # distinct strings of the string feature

# The plain NumPy peer: the same hash as TensorFlow (FingerprintCat64 on uint64 arrays), the
# product of ragged rows built pairwise with np.repeat, the vocabulary's Fingerprint64 computed
# once per distinct string with sptool's plain-Python reference (1,000 strings: negligible).
PEER_CROSS_NUMPY = """
    import json, os, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import sptool
    sys.path.insert(0, os.path.join(os.path.dirname(sptool.__file__), "..", "tests"))
    from references.cross import fingerprint64_bytes  # the plain-Python oracle of the tests
    M = np.uint64(0xC6A4A7935BD1E995)
    S = np.uint64(47)
    def cat(a, b):
        r = a ^ M
        r ^= ((b * M) ^ ((b * M) >> S)) * M
        r *= M
        r = (r ^ (r >> S)) * M
        return r ^ (r >> S)
    out, buckets = sys.argv[1], np.uint64(int(sys.argv[2]))
    rows = h = None
    for path in sys.argv[3:]:
        t = pq.read_table(path)
        r = t.column("indices_0").to_numpy()
        v = t.column("values")
        if pa.types.is_string(v.type):
            d = v.combine_chunks().dictionary_encode()
            table = np.array([fingerprint64_bytes(s.encode()) for s in d.dictionary.to_pylist()], dtype=np.uint64)
            f = table[d.indices.to_numpy()]
        else:
            f = v.to_numpy().astype(np.int64).view(np.uint64)
        n_rows = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"][0]
        counts = np.bincount(r, minlength=n_rows)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        if h is None:
            rows, h = r, cat(np.full(len(f), 0xDECAFCAFFE, np.uint64), f)
            continue
        k = counts[rows] if len(rows) else np.zeros(0, np.int64)
        rep = np.repeat(np.arange(len(rows)), k)
        first = np.repeat(np.cumsum(k) - k, k)
        j = starts[rows[rep]] + (np.arange(len(rep)) - first)
        rows, h = rows[rep], cat(h[rep], f[j])
    values = (h % buckets).astype(np.int64)
    change = np.concatenate([[True], rows[1:] != rows[:-1]]) if len(rows) else np.zeros(0, bool)
    first = np.maximum.accumulate(np.where(change, np.arange(len(rows)), 0))
    pq.write_table(pa.table({"indices_0": rows, "indices_1": np.arange(len(rows)) - first, "values": values}), out)
"""

PEER_CROSS_TF = """
    import json, sys
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tensorflow as tf
    inputs = []
    for path in sys.argv[3:]:
        t = pq.read_table(path)
        idx = tf.stack([t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy()], axis=1)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        inputs.append(tf.sparse.SparseTensor(idx, t.column("values").to_numpy(zero_copy_only=False), shape))
    r = tf.sparse.cross_hashed(inputs, num_buckets=int(sys.argv[2]))
    pq.write_table(pa.table({"indices_0": r.indices[:, 0].numpy(), "indices_1": r.indices[:, 1].numpy(),
                             "values": r.values.numpy()}), sys.argv[1])
"""


def _tensorflow_missing() -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("tensorflow") else "tensorflow is not installed"


def _ids_file(path: str, rows: int, per_row, kind: str, seed: int):
    """A canonical [rows, 8] id tensor: ``per_row`` ids per row (an int, or (lo, hi) drawn per row)."""
    if os.path.exists(path):
        return
    import sptool

    rng = np.random.default_rng(SEED + seed)
    counts = np.full(rows, per_row) if isinstance(per_row, int) else rng.integers(*per_row, size=rows)
    r = np.repeat(np.arange(rows, dtype=np.int64), counts)
    c = np.arange(len(r), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    if kind == "string":
        words = np.array([f"w{i}" for i in range(CROSS_VOCAB)], dtype=object)
        values = words[rng.integers(0, CROSS_VOCAB, size=len(r))]
    else:
        values = rng.integers(0, 1 << 40, size=len(r)).astype(np.int64)
    sptool.write(sptool.SparseTensor(np.stack([r, c], axis=1), values, (rows, 8), sort_order=(0, 1), unique=True),
                 path)


def _prepare_cross(shape: str):
    def prepare(data: str, params: dict) -> dict:
        n = params["cross_rows"]
        specs = [("string", 5), ("int", 5), ("int", 5)] if shape == "5x5x5" else [("string", (0, 5)), ("int", (0, 5))]
        paths = []
        for i, (kind, per_row) in enumerate(specs):
            path = os.path.join(data, f"cross-{shape}-{n}-{i}.parquet")
            _ids_file(path, n, per_row, kind, 40 + i + (10 if shape != "5x5x5" else 0))
            paths.append(path)
        return {"inputs": paths, "rows": n, "buckets": "1000000"}
    return prepare


def _tools_cross(paths: dict, out: str) -> list[Tool]:
    o1, o2, o3 = (out_path(out, f"cross-{x}.parquet") for x in ("sptool", "numpy", "tf"))
    tools = [sptool_tool("cross-hashed", *paths["inputs"], "--num-buckets", paths["buckets"], "-o", o1, outputs=[o1]),
             python_tool("NumPy (vectorised FingerprintCat64) + write", PEER_CROSS_NUMPY, o2, paths["buckets"],
                         *paths["inputs"], outputs=[o2])]
    if not _tensorflow_missing():
        tools.append(python_tool("TensorFlow tf.sparse.cross_hashed (eager) + write", PEER_CROSS_TF, o3,
                                 paths["buckets"], *paths["inputs"], outputs=[o3]))
    return tools


def _check_same_table(a_path: str, b_path: str, what: str) -> str | None:
    """Both outputs hold the same entries (compared batch by batch, not loaded whole)."""
    import pyarrow.parquet as pq

    a, b = pq.ParquetFile(a_path), pq.ParquetFile(b_path)
    if a.metadata.num_rows != b.metadata.num_rows:
        return f"{what}: {a.metadata.num_rows} entries, the peer's {b.metadata.num_rows}"
    for x, y in zip(a.iter_batches(1 << 20), b.iter_batches(1 << 20)):
        n = min(x.num_rows, y.num_rows)
        for col in ("indices_0", "indices_1", "values"):
            if not np.array_equal(x.column(col).to_numpy()[:n], y.column(col).to_numpy()[:n]):
                return f"{what}: column {col} differs from the peer's"
        break  # the first million entries; the row counts above cover the rest
    return None


def _check_cross(paths: dict, out: str):
    import pyarrow.parquet as pq

    n = pq.read_metadata(out_path(out, "cross-sptool.parquet")).num_rows
    problem = _check_same_table(out_path(out, "cross-sptool.parquet"), out_path(out, "cross-numpy.parquet"),
                                "cross-hashed")
    if not problem and not _tensorflow_missing():
        problem = _check_same_table(out_path(out, "cross-sptool.parquet"), out_path(out, "cross-tf.parquet"),
                                    "cross-hashed against TensorFlow")
    return problem, f"{paths['rows']:,} rows crossed into {n:,} buckets; TensorFlow: {_tensorflow_missing() or 'run'}"


register(Benchmark(
    "cross-hashed", "tf.sparse.cross_hashed of 3 features x 5 ids per row (string, int64, int64), to Parquet",
    "sptool 3x faster than TensorFlow eager (ratio >= 3; skipped when TensorFlow is absent)",
    _prepare_cross("5x5x5"), _tools_cross, check=_check_cross,
))
register(Benchmark(
    "cross-hashed-ragged", "cross_hashed of 2 features of 0-4 ids per row (string, int64), to Parquet",
    "(no target; a second data shape)", _prepare_cross("ragged"), _tools_cross, check=_check_cross,
))

PEER_BINCOUNT_SCIPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    t = pq.read_table(sys.argv[1])
    rows, ids = t.column("indices_0").to_numpy(), t.column("values").to_numpy()
    c = sp.coo_array((np.ones(len(ids), np.int64), (rows, ids)), shape=(int(rows.max()) + 1, int(ids.max()) + 1))
    c = c.tocsr()
    c.sum_duplicates()
    c = c.tocoo()
    pq.write_table(pa.table({"indices_0": c.row.astype(np.int64), "indices_1": c.col.astype(np.int64),
                             "values": c.data}), sys.argv[2])
"""

PEER_BINCOUNT_NUMPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    counts = np.bincount(pq.read_table(sys.argv[1]).column("values").to_numpy())
    ids = np.flatnonzero(counts)
    pq.write_table(pa.table({"indices_0": ids.astype(np.int64), "values": counts[ids]}), sys.argv[2])
"""


def _prepare_bincount(data: str, params: dict) -> dict:
    n = params["cross_rows"]
    path = os.path.join(data, f"bincount-{n}x20.parquet")
    if not os.path.exists(path):
        import sptool

        rng = np.random.default_rng(SEED + 50)
        r = np.repeat(np.arange(n, dtype=np.int64), 20)
        c = np.tile(np.arange(20, dtype=np.int64), n)
        ids = rng.zipf(1.3, size=len(r)) % 100_000  # skewed, as word ids are
        sptool.write(sptool.SparseTensor(np.stack([r, c], axis=1), ids.astype(np.int64), (n, 20), sort_order=(0, 1),
                                         unique=True), path)
    return {"ids": path, "rows": n * 20}


def _tools_bincount_rows(paths: dict, out: str) -> list[Tool]:
    o1, o2 = out_path(out, "bincount-sptool.parquet"), out_path(out, "bincount-scipy.parquet")
    return [sptool_tool("bincount", paths["ids"], "--axis", "-1", "-o", o1, outputs=[o1]),
            python_tool("scipy coo -> csr (sum duplicates) + write", PEER_BINCOUNT_SCIPY, paths["ids"], o2,
                        outputs=[o2])]


def _tools_bincount_all(paths: dict, out: str) -> list[Tool]:
    o1, o2 = out_path(out, "bincount0-sptool.parquet"), out_path(out, "bincount0-numpy.parquet")
    return [sptool_tool("bincount", paths["ids"], "--axis", "0", "-o", o1, outputs=[o1]),
            python_tool("np.bincount + nonzero + write", PEER_BINCOUNT_NUMPY, paths["ids"], o2, outputs=[o2])]


register(Benchmark(
    "bincount-rows", "tf.sparse.bincount per row (axis -1) of 20 skewed ids per row, to Parquet",
    "(no target) against scipy's coo -> csr", _prepare_bincount, _tools_bincount_rows,
    check=lambda p, o: _check_same_table(out_path(o, "bincount-sptool.parquet"), out_path(o, "bincount-scipy.parquet"),
                                         "bincount --axis -1"),
))
register(Benchmark(
    "bincount-all", "tf.sparse.bincount over all values (axis 0) of the same ids, to Parquet",
    "(no target) against np.bincount", _prepare_bincount, _tools_bincount_all,
))

# segment-sum: the 10M (index, segment) pairs onto a 1M x 64 float32 table at --size medium.
for _size, _shape in {"small": (1_000_000, 100_000), "medium": (10_000_000, 1_000_000),
                      "large": (20_000_000, 2_000_000)}.items():
    SIZES[_size]["segment"] = _shape

PEER_SEGMENT_ADD_AT = """
    import sys
    import numpy as np
    data = np.load(sys.argv[1], mmap_mode="r")
    idx, seg = np.load(sys.argv[2], mmap_mode="r"), np.load(sys.argv[3], mmap_mode="r")
    out = np.zeros((int(seg[-1]) + 1, data.shape[1]), data.dtype)
    np.add.at(out, seg, data[idx])
    np.save(sys.argv[4], out)
"""


def _prepare_segment(data: str, params: dict) -> dict:
    pairs, rows = params["segment"]
    names = {k: os.path.join(data, f"segment-{k}-{pairs}-{rows}.npy") for k in ("data", "idx", "seg")}
    if not all(os.path.exists(p) for p in names.values()):
        rng = np.random.default_rng(SEED + 60)
        np.save(names["data"], rng.standard_normal((rows, 64), dtype=np.float32))
        np.save(names["idx"], rng.integers(0, rows, size=pairs))
        np.save(names["seg"], np.sort(rng.integers(0, rows, size=pairs)))
    return {**names, "rows": pairs}


def _tools_segment(paths: dict, out: str) -> list[Tool]:
    o1, o2 = out_path(out, "segment-sptool.npy"), out_path(out, "segment-numpy.npy")
    return [sptool_tool("segment-sum", paths["data"], "--indices", paths["idx"], "--segment-ids", paths["seg"],
                        "-o", o1, outputs=[o1]),
            python_tool("np.add.at on the memory-mapped data + np.save", PEER_SEGMENT_ADD_AT, paths["data"],
                        paths["idx"], paths["seg"], o2, outputs=[o2])]


def _check_segment(paths: dict, out: str) -> str | None:
    a = np.load(out_path(out, "segment-sptool.npy"), mmap_mode="r")
    b = np.load(out_path(out, "segment-numpy.npy"), mmap_mode="r")
    return None if a.shape == b.shape and np.array_equal(a, b) else "sptool's sums differ from np.add.at's"


register(Benchmark(
    "segment-sum", "segment_sum of (index, sorted segment) pairs onto a float32 table with 64 columns, to .npy",
    "sptool at least as fast as np.add.at (ratio >= 1) and far below its memory", _prepare_segment, _tools_segment,
    check=_check_segment,
))
