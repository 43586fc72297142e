"""Sparse x sparse matmul (SpGEMM) against the libraries a user would pick: SciPy and
SuiteSparse:GraphBLAS (python-graphblas, a benchmark-only dependency: the row leaves it out when
it is not installed).  Every tool reads the same two Parquet matrices and writes the product to
Parquet.  Registered into run.py's BENCHMARKS by ``add_to(run)`` as spgemm and spgemm-zipf:

- spgemm: A and B square, uniform indices, sized so that the product has about 20M entries at
  --size medium (its row count and the product's entries are in the notes);
- spgemm-zipf: power-law indices, where SpGEMM libraries differ most: A's rows and columns and
  B's columns follow Zipf's law (skewed_bench.zipf_indices), so output rows and columns range
  from empty to tens of thousands of entries; B's rows are uniform, so that the number of
  products stays near the uniform row's instead of growing with the square of the head.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

SEED = 4_099
# Per size: (the matrices' extent, entries drawn for each of A and B), uniform and Zipf.
SPGEMM = {"small": (200_000, 900_000), "medium": (500_000, 3_200_000), "large": (700_000, 5_300_000)}
SPGEMM_ZIPF = {"small": (200_000, 1_300_000), "medium": (500_000, 4_500_000), "large": (700_000, 7_000_000)}

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


def _matrix(run, path: str, rows: np.ndarray, cols: np.ndarray, extent: int, rng) -> int:
    """A canonical extent x extent float64 matrix of the distinct (rows, cols) at ``path``; its entries."""
    flat = run._distinct(rows * extent + cols)
    coords = np.stack([flat // extent, flat % extent], axis=1)
    run._write_sptool(path, coords, rng.standard_normal(len(flat)), (extent, extent))
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


def add_to(run):
    """Register spgemm and spgemm-zipf in the run module ``run``."""
    from skewed_bench import zipf_indices

    for size in run.SIZES:
        run.SIZES[size]["spgemm_uniform"], run.SIZES[size]["spgemm_zipf"] = SPGEMM[size], SPGEMM_ZIPF[size]

    def prepare(kind):
        def make(data, params):
            extent, n = params[f"spgemm_{kind}"]
            paths = {"extent": extent}
            for name, seed in (("a", SEED), ("b", SEED + 1)):
                path = os.path.join(data, f"spgemm-{kind}-{name}-{extent}-{n}.parquet")
                if not os.path.exists(path):
                    rng = np.random.default_rng(seed)
                    if kind == "uniform":
                        rows, cols = rng.integers(0, extent, n), rng.integers(0, extent, n)
                    elif name == "a":
                        rows, cols = zipf_indices(rng, extent, n), zipf_indices(rng, extent, n)
                    else:
                        rows, cols = rng.integers(0, extent, n), zipf_indices(rng, extent, n)
                    _matrix(run, path, rows, cols, extent, rng)
                paths[name], paths[f"nnz_{name}"] = path, _entries(path)
            paths["rows"] = paths["nnz_a"] + paths["nnz_b"]
            return paths
        return make

    def tools(paths, out):
        o1, o2, o3 = (run._out(out, f"spgemm-{x}.parquet") for x in ("sptool", "scipy", "graphblas"))
        paths["product"] = o1
        a, b = paths["a"], paths["b"]
        found = [run.sptool_tool("matmul", a, b, "-o", o1, outputs=[o1]),
                 run.python_tool("scipy load + tocsr + @ + write (in memory)", run.PEER_SPGEMM_SCIPY, a, b, o2,
                                 outputs=[o2])]
        if not graphblas_missing():
            found.append(run.python_tool("SuiteSparse:GraphBLAS (python-graphblas) @ + write", PEER_SPGEMM_GRAPHBLAS,
                                         a, b, o3, outputs=[o3]))
        return found

    def check(paths, out):
        import pyarrow.parquet as pq

        def entries(name):
            t = pq.read_table(run._out(out, f"spgemm-{name}.parquet"))
            i, j, v = (t.column(c).to_numpy() for c in ("indices_0", "indices_1", "values"))
            order = np.lexsort((j, i))
            return i[order], j[order], v[order]

        mine = entries("sptool")
        note = _product_size(paths)
        peers = ["scipy"] + ([] if graphblas_missing() else ["graphblas"])
        if graphblas_missing():
            note += "; python-graphblas is not installed: no GraphBLAS row"
        for peer in peers:
            theirs = entries(peer)
            same = len(mine[0]) == len(theirs[0]) and all(np.array_equal(x, y) for x, y in zip(mine[:2], theirs[:2]))
            if not same or not np.allclose(mine[2], theirs[2]):
                return f"sptool's product differs from {peer}'s", note
        return None, note

    run.register(run.Benchmark(
        "spgemm", "sparse @ sparse, both square with uniform indices (about 20M product entries at --size medium), "
        "Parquet to Parquet", "(no target yet) beside SciPy and SuiteSparse:GraphBLAS", prepare("uniform"), tools,
        check=check,
    ))
    run.register(run.Benchmark(
        "spgemm-zipf", "sparse @ sparse with Zipf-law indices (A's rows and columns, B's columns), Parquet to Parquet",
        "(no target yet) beside SciPy and SuiteSparse:GraphBLAS", prepare("zipf"), tools, check=check,
    ))
    return ["spgemm", "spgemm-zipf"]
