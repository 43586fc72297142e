"""Linear algebra: todense, sparse @ dense (matmul), sparse @ sparse (spgemm against SciPy and
SuiteSparse:GraphBLAS, spgemm-memory under a --memory budget) and sampled-matmul.  Registered into
harness.BENCHMARKS on import.

spgemm and spgemm-zipf: every tool reads the same two Parquet matrices and writes the product to
Parquet (python-graphblas is a benchmark-only dependency: its row is left out when it is not
installed).

- spgemm: A and B square, uniform indices, sized so that the product has about 20M entries at
  --size medium (its row count and the product's entries are in the notes);
- spgemm-zipf: power-law indices, where SpGEMM libraries differ most: A's rows and columns and
  B's columns follow Zipf's law (inputs.zipf_indices), so output rows and columns range
  from empty to tens of thousands of entries; B's rows are uniform, so that the number of
  products stays near the uniform row's instead of growing with the square of the head.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
from harness import SEED, SIZES, Benchmark, Tool, out_path, python_tool, register, sptool_tool
from inputs import canonical_coords, distinct, write_sptool, zipf_indices

# -- todense ------------------------------------------------------------------------------------

PEER_TODENSE_SCIPY = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    path = sys.argv[1]
    shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
    t = pq.read_table(path)
    coo = sp.coo_array((t.column("values").to_numpy(),
                        (t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy())), shape=shape)
    np.save(sys.argv[2], coo.toarray())
"""


# The writing no dense output avoids: np.save of as many zeros (pages of no memory, so only the write).
FLOOR_TODENSE = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    shape = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sptool"])["shape"]
    np.save(sys.argv[2], np.zeros(shape))
"""


def _tools_todense(paths: dict, out: str) -> list[Tool]:
    src = paths["matrix"]
    a, b, c = (os.path.join(out, f"todense-{x}.npy") for x in ("sptool", "scipy", "floor"))
    return [
        sptool_tool("todense", src, "-o", a, outputs=[a]),
        python_tool("scipy coo_array.toarray + np.save", PEER_TODENSE_SCIPY, src, b, outputs=[b]),
        python_tool("I/O floor: np.save of np.zeros of the shape", FLOOR_TODENSE, src, c, outputs=[c]),
    ]


def _check_todense(paths: dict, out: str) -> str | None:
    a = np.load(os.path.join(out, "todense-sptool.npy"), mmap_mode="r")
    b = np.load(os.path.join(out, "todense-scipy.npy"), mmap_mode="r")
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"sptool wrote {a.dtype}{a.shape}, scipy {b.dtype}{b.shape}"
    step = 1 << 20
    fa, fb = a.reshape(-1), b.reshape(-1)
    for i in range(0, fa.size, step):
        if not np.array_equal(fa[i:i + step], fb[i:i + step]):
            return "sptool's dense array differs from scipy's"
    return None


def _prepare_todense(data: str, params: dict) -> dict:
    shape, n = params["dense_shape"], params["dense_nnz"]
    path = os.path.join(data, f"todense-{shape[0]}x{shape[1]}-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 2)
        coords = canonical_coords(rng, shape, n)
        write_sptool(path, coords, rng.standard_normal(n), shape)
    return {"matrix": path, "rows": n, "dense_bytes": int(np.prod(shape)) * 8}


register(Benchmark(
    "todense", "2-D float64 tensor to a dense .npy", "sptool at least as fast as scipy",
    _prepare_todense, _tools_todense, check=_check_todense,
))


def _prepare_todense_square(data: str, params: dict) -> dict:
    rows, cols, n = params["square_dense"]
    return _prepare_todense(data, {"dense_shape": (rows, cols), "dense_nnz": n})


# The case: 20000 x 20000 with 4M entries, a 3 GiB output (--size large; 800 MB at medium).
register(Benchmark(
    "todense-square", "square 2-D float64 matrix, 1% dense, to a dense .npy (3 GiB at --size large)",
    "ratio >= 1.25 against scipy", _prepare_todense_square, _tools_todense, check=_check_todense,
))


# -- sparse @ dense, and sparse @ sparse under --memory --------------------------------------

PEER_MATMUL_SCIPY = """
    import json, sys
    import numpy as np
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    t = pq.read_table(sys.argv[1])
    shape = json.loads(pq.read_metadata(sys.argv[1]).metadata[b"sptool"])["shape"]
    a = sp.coo_array((t.column("values").to_numpy(), (t.column("indices_0").to_numpy(),
                      t.column("indices_1").to_numpy())), shape=shape).tocsr()
    np.save(sys.argv[3], a @ np.load(sys.argv[2]))
"""


def _prepare_matmul(data: str, params: dict) -> dict:
    m, k, n = params["matmul"]
    path = os.path.join(data, f"matmul-{m}x{k}-{n}.parquet")
    dense = os.path.join(data, f"matmul-dense-{k}x16.npy")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 20)
        coords = canonical_coords(rng, (m, k), n)
        write_sptool(path, coords, rng.standard_normal(n), (m, k))
    if not os.path.exists(dense):
        np.save(dense, np.random.default_rng(SEED + 21).standard_normal((k, 16)))
    return {"a": path, "b": dense, "rows": n}


def tools_matmul(paths: dict, out: str) -> list[Tool]:
    o1, o2 = out_path(out, "matmul-sptool.npy"), out_path(out, "matmul-scipy.npy")
    return [sptool_tool("matmul", paths["a"], paths["b"], "-o", o1, outputs=[o1]),
            python_tool("scipy load + tocsr + @ + np.save", PEER_MATMUL_SCIPY, paths["a"], paths["b"], o2,
                        outputs=[o2])]


def check_matmul(paths: dict, out: str) -> str | None:
    a, b = np.load(out_path(out, "matmul-sptool.npy")), np.load(out_path(out, "matmul-scipy.npy"))
    return None if np.allclose(a, b) else "sptool's product differs from scipy's"


register(Benchmark(
    "matmul", "sparse (rows x 100k) @ dense (100k x 16), to a dense .npy",
    "sptool at least as fast as scipy (ratio >= 1)", _prepare_matmul, tools_matmul, check=check_matmul,
))


PEER_SPGEMM_SCIPY = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp
    def load(path):
        t = pq.read_table(path)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        return sp.coo_array((t.column("values").to_numpy(), (t.column("indices_0").to_numpy(),
                             t.column("indices_1").to_numpy())), shape=shape).tocsr()
    c = (load(sys.argv[1]) @ load(sys.argv[2])).tocoo()
    c.sum_duplicates()
    pq.write_table(pa.table({"indices_0": c.row.astype(np.int64), "indices_1": c.col.astype(np.int64),
                             "values": c.data}), sys.argv[3])
"""


def _prepare_spgemm(data: str, params: dict) -> dict:
    m, k, n, nnz_a, nnz_b, budget = params["spgemm"]
    paths = {"budget": budget, "rows": nnz_a + nnz_b}
    for name, shape, nnz, seed in (("a", (m, k), nnz_a, 30), ("b", (k, n), nnz_b, 31)):
        path = os.path.join(data, f"spgemm-{name}-{shape[0]}x{shape[1]}-{nnz}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED + seed)
            write_sptool(path, canonical_coords(rng, shape, nnz), rng.standard_normal(nnz), shape)
        paths[name] = path
    return paths


def _tools_spgemm(paths: dict, out: str) -> list[Tool]:
    o1, o2 = out_path(out, "spgemm-sptool.parquet"), out_path(out, "spgemm-scipy.parquet")
    return [sptool_tool("matmul", paths["a"], paths["b"], "-o", o1, "--memory", paths["budget"], outputs=[o1]),
            python_tool("scipy load + tocsr + @ + write (in memory)", PEER_SPGEMM_SCIPY, paths["a"], paths["b"], o2,
                        outputs=[o2])]


def _check_spgemm(paths: dict, out: str) -> str | None:
    import pyarrow.parquet as pq

    a, b = pq.read_table(out_path(out, "spgemm-sptool.parquet")), pq.read_table(out_path(out, "spgemm-scipy.parquet"))
    same = a.num_rows == b.num_rows and all(
        np.array_equal(a.column(c).to_numpy(), b.column(c).to_numpy()) for c in ("indices_0", "indices_1"))
    close = same and np.allclose(a.column("values").to_numpy(), b.column("values").to_numpy())
    note = f"product of {a.num_rows:,} entries; B as CSR needs about {_csr_bytes(paths) / 2**20:.0f} MiB"
    return (None if close else "sptool's product differs from scipy's"), note


def _csr_bytes(paths: dict) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(paths["b"]).num_rows * 24 * 2


register(Benchmark(
    "spgemm-memory", "sparse @ sparse with B over half of --memory (B taken in slabs), to a sparse tensor",
    "peak RSS at most the --memory budget + 150 MB; product equal to scipy's", _prepare_spgemm, _tools_spgemm,
    check=_check_spgemm,
))


# -- sparse @ sparse beside SciPy and SuiteSparse:GraphBLAS ----------------------------------
SPGEMM_SEED = 4_099
# Per size: (the matrices' extent, entries drawn for each of A and B), uniform and Zipf.
SPGEMM = {"small": (200_000, 900_000), "medium": (500_000, 3_200_000), "large": (700_000, 5_300_000)}
SPGEMM_ZIPF = {"small": (200_000, 1_300_000), "medium": (500_000, 4_500_000), "large": (700_000, 7_000_000)}
for _size in SIZES:
    SIZES[_size]["spgemm_uniform"], SIZES[_size]["spgemm_zipf"] = SPGEMM[_size], SPGEMM_ZIPF[_size]

PEER_SPGEMM_GRAPHBLAS = """
    import json, sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import graphblas as gb
    def load(path):
        t = pq.read_table(path)
        shape = json.loads(pq.read_metadata(path).metadata[b"sptool"])["shape"]
        return gb.Matrix.from_coo(t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy(),
                                  t.column("values").to_numpy(), nrows=shape[0], ncols=shape[1])
    c = (load(sys.argv[1]) @ load(sys.argv[2])).new()
    rows, cols, vals = c.to_coo()
    pq.write_table(pa.table({"indices_0": rows.astype(np.int64), "indices_1": cols.astype(np.int64),
                             "values": vals}), sys.argv[3])
"""


def graphblas_missing() -> bool:
    return importlib.util.find_spec("graphblas") is None


def _matrix(path: str, rows: np.ndarray, cols: np.ndarray, extent: int, rng) -> int:
    """A canonical extent x extent float64 matrix of the distinct (rows, cols) at ``path``; its entries."""
    flat = distinct(rows * extent + cols)
    coords = np.stack([flat // extent, flat % extent], axis=1)
    write_sptool(path, coords, rng.standard_normal(len(flat)), (extent, extent))
    return len(flat)


def _entries(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def _product_size(paths: dict) -> str:
    import pyarrow.parquet as pq

    out = paths.get("product")
    n = pq.read_metadata(out).num_rows if out and os.path.exists(out) else None
    return f"A and B {paths['extent']:,} square, {paths['nnz_a']:,} and {paths['nnz_b']:,} entries; " + \
        (f"the product {n:,} entries" if n is not None else "no product written")


def _prepare_square(kind):
    def make(data, params):
        extent, n = params[f"spgemm_{kind}"]
        paths = {"extent": extent}
        for name, seed in (("a", SPGEMM_SEED), ("b", SPGEMM_SEED + 1)):
            path = os.path.join(data, f"spgemm-{kind}-{name}-{extent}-{n}.parquet")
            if not os.path.exists(path):
                rng = np.random.default_rng(seed)
                if kind == "uniform":
                    rows, cols = rng.integers(0, extent, n), rng.integers(0, extent, n)
                elif name == "a":
                    rows, cols = zipf_indices(rng, extent, n), zipf_indices(rng, extent, n)
                else:
                    rows, cols = rng.integers(0, extent, n), zipf_indices(rng, extent, n)
                _matrix(path, rows, cols, extent, rng)
            paths[name], paths[f"nnz_{name}"] = path, _entries(path)
        paths["rows"] = paths["nnz_a"] + paths["nnz_b"]
        return paths
    return make


def _tools_spgemm_peers(paths, out):
    o1, o2, o3 = (out_path(out, f"spgemm-{x}.parquet") for x in ("sptool", "scipy", "graphblas"))
    paths["product"] = o1
    a, b = paths["a"], paths["b"]
    found = [sptool_tool("matmul", a, b, "-o", o1, outputs=[o1]),
             python_tool("scipy load + tocsr + @ + write (in memory)", PEER_SPGEMM_SCIPY, a, b, o2,
                         outputs=[o2])]
    if not graphblas_missing():
        found.append(python_tool("SuiteSparse:GraphBLAS (python-graphblas) @ + write", PEER_SPGEMM_GRAPHBLAS,
                                 a, b, o3, outputs=[o3]))
    return found


def _spgemm_entries(out, name):
    import pyarrow.parquet as pq

    t = pq.read_table(out_path(out, f"spgemm-{name}.parquet"))
    i, j, v = (t.column(c).to_numpy() for c in ("indices_0", "indices_1", "values"))
    order = np.lexsort((j, i))
    return i[order], j[order], v[order]


def _check_spgemm_peers(paths, out):
    mine = _spgemm_entries(out, "sptool")
    note = _product_size(paths)
    peers = ["scipy"] + ([] if graphblas_missing() else ["graphblas"])
    if graphblas_missing():
        note += "; python-graphblas is not installed: no GraphBLAS row"
    for peer in peers:
        theirs = _spgemm_entries(out, peer)
        same = len(mine[0]) == len(theirs[0]) and all(np.array_equal(x, y) for x, y in zip(mine[:2], theirs[:2]))
        if not same or not np.allclose(mine[2], theirs[2]):
            return f"sptool's product differs from {peer}'s", note
    return None, note


register(Benchmark(
    "spgemm", "sparse @ sparse, both square with uniform indices (about 20M product entries at --size medium), "
    "Parquet to Parquet", "(no target yet) beside SciPy and SuiteSparse:GraphBLAS", _prepare_square("uniform"),
    _tools_spgemm_peers, check=_check_spgemm_peers,
))
register(Benchmark(
    "spgemm-zipf", "sparse @ sparse with Zipf-law indices (A's rows and columns, B's columns), Parquet to Parquet",
    "(no target yet) beside SciPy and SuiteSparse:GraphBLAS", _prepare_square("zipf"), _tools_spgemm_peers,
    check=_check_spgemm_peers,
))


# sampled-matmul: the 10M mask entries with k = 64 at --size medium, in two shapes (a
# square 20k x 20k mask, and a tall 100k x 5k one), where the dense product is still computable
# in row blocks: the peer a user would write.
for _size, _nnz in {"small": 1_000_000, "medium": 10_000_000, "large": 20_000_000}.items():
    SIZES[_size]["sddmm"] = _nnz
SDDMM_SHAPES = {"square": (20_000, 20_000), "tall": (100_000, 5_000)}
SDDMM_K = 64

PEER_SDDMM_NUMPY = """
    import sys
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pq.read_table(sys.argv[1])
    i, j = t.column("indices_0").to_numpy(), t.column("indices_1").to_numpy()
    v = t.column("values").to_numpy()
    a, b = np.load(sys.argv[2], mmap_mode="r"), np.load(sys.argv[3])
    out = np.empty(len(v), np.float32)
    block = max(1, (256 << 20) // (b.shape[1] * 4))  # 256 MB of dense product at a time
    starts = np.searchsorted(i, np.arange(0, a.shape[0] + block, block))
    for n, r0 in enumerate(range(0, a.shape[0], block)):
        lo, hi = starts[n], starts[n + 1]
        product = a[r0: r0 + block] @ b
        out[lo:hi] = product[i[lo:hi] - r0, j[lo:hi]] + v[lo:hi]
    pq.write_table(pa.table({"indices_0": i, "indices_1": j, "values": out}), sys.argv[4])
"""


def _prepare_sddmm(shape_name: str):
    def prepare(data: str, params: dict) -> dict:
        m, n = SDDMM_SHAPES[shape_name]
        nnz = min(params["sddmm"], m * n // 10)
        names = {k: os.path.join(data, f"sddmm-{shape_name}-{k}-{nnz}.{ext}")
                 for k, ext in (("mask", "parquet"), ("a", "npy"), ("b", "npy"))}
        if not all(os.path.exists(p) for p in names.values()):
            rng = np.random.default_rng(SEED + 70)
            write_sptool(names["mask"], canonical_coords(rng, (m, n), nnz),
                         rng.standard_normal(nnz, dtype=np.float32), (m, n))
            np.save(names["a"], rng.standard_normal((m, SDDMM_K), dtype=np.float32))
            np.save(names["b"], rng.standard_normal((SDDMM_K, n), dtype=np.float32))
        return {**names, "rows": nnz}
    return prepare


def _tools_sddmm(paths: dict, out: str) -> list[Tool]:
    o1, o2 = out_path(out, "sddmm-sptool.parquet"), out_path(out, "sddmm-numpy.parquet")
    return [sptool_tool("sampled-matmul", paths["mask"], paths["a"], paths["b"], "-o", o1, outputs=[o1]),
            python_tool("NumPy dense product in row blocks + gather", PEER_SDDMM_NUMPY, paths["mask"], paths["a"],
                        paths["b"], o2, outputs=[o2])]


def _check_sddmm(paths: dict, out: str) -> str | None:
    import pyarrow.parquet as pq

    a, b = pq.read_table(out_path(out, "sddmm-sptool.parquet")), pq.read_table(out_path(out, "sddmm-numpy.parquet"))
    for col in ("indices_0", "indices_1"):
        if not np.array_equal(a.column(col).to_numpy(), b.column(col).to_numpy()):
            return f"sampled-matmul: column {col} differs from NumPy's"
    ok = np.allclose(a.column("values").to_numpy(), b.column("values").to_numpy(), rtol=1e-4, atol=1e-3)
    return None if ok else "sampled-matmul: values differ from NumPy's dense product"


for _shape in SDDMM_SHAPES:
    register(Benchmark(
        f"sampled-matmul-{_shape}", f"alpha * (A @ B) at a {_shape} float32 mask's entries, k = {SDDMM_K}, to Parquet",
        "sptool at least 2x faster than NumPy's dense product in row blocks + gather (ratio >= 2)",
        _prepare_sddmm(_shape), _tools_sddmm, check=_check_sddmm,
    ))
