"""Skewed index data beside uniform: reorder, reduce, add, matmul and convert on tensors whose
indices follow a power law (as the degrees of nell-2, enron and delicious do), against the same
peers as the uniform rows (DuckDB, Polars, pydata sparse, the I/O floor, SciPy, pyarrow.csv),
every tool on the same files.  Registered into harness.BENCHMARKS on import:

- reorder-zipf, reduce-zipf, add-zipf and convert-tns-zipf: the shapes and sizes of the uniform
  rows reorder, reduce, add and convert-tns (harness.SHAPE_REORDER, harness.SHAPE_3D, --shape issue);
- matmul-uniform and matmul-zipf: a rows x 100,000 matrix @ a dense 100,000 x 16, the same shape and
  entry count for both (MATMUL: 20M entries at --size large; linalg.py's matmul row has 10M).

reduce-zipf, add-zipf and convert-tns-zipf check sptool's output entry by entry against a peer's.
The indices are inputs.zipf_indices's (Zipf's law, exponent 1, along each dimension).
"""
from __future__ import annotations

import os

import harness
import numpy as np
from converters import check_tns, convert_missing, tools_tns
from harness import SIZES, Benchmark, register, sptool_tool
from inputs import canonical_coords, canonical_zipf, distinct, write_sptool, write_tns, zipf_coords
from linalg import check_matmul, tools_matmul
from reductions import tools_add, tools_reduce
from sorting import check_reorder, tools_reorder

SEED = 7_919
# Per size: rows, columns and entries of the matmul benchmarks' sparse matrix.
MATMUL = {"small": (100_000, 100_000, 1_000_000), "medium": (250_000, 100_000, 5_000_000),
          "large": (1_000_000, 100_000, 20_000_000)}
MATMUL_K = 16


def same_entries(ours: str, theirs: str, what: str) -> str | None:
    """Whether the Parquet tensors ``ours`` (sptool's, in row-major order) and ``theirs`` (a peer's,
    in any order) hold the same entries: indices equal, values within rounding (sums may be
    added in another order)."""
    import pyarrow.parquet as pq

    a, b = pq.read_table(ours), pq.read_table(theirs)
    if a.num_rows != b.num_rows:
        return f"{what}: sptool wrote {a.num_rows:,} entries, the peer {b.num_rows:,}"

    def keys(table):  # a peer's reduce keeps its columns' names (indices_0, indices_2): by position
        return sorted((c for c in table.column_names if c.startswith("indices_")), key=lambda c: int(c[8:]))

    if len(keys(a)) != len(keys(b)):
        return f"{what}: sptool wrote {len(keys(a))} index columns, the peer {len(keys(b))}"
    b = b.sort_by([(k, "ascending") for k in keys(b)])
    for k, j in zip(keys(a), keys(b)):
        if not np.array_equal(a.column(k).to_numpy(), b.column(j).to_numpy()):
            return f"{what}: column {k} differs from the peer's (or sptool's rows are not in row-major order)"
    if not np.allclose(a.column("values").to_numpy(), b.column("values").to_numpy(), rtol=1e-9, atol=1e-9):
        return f"{what}: the values differ from the peer's"
    return None


def _check_against_peer(stem: str, peers=("duckdb", "polars")):
    """A check: sptool's output ``<stem>-sptool.parquet`` against the first peer's that ran."""
    def check(paths, out):
        ours = os.path.join(out, f"{stem}-sptool.parquet")
        for peer in peers:
            theirs = os.path.join(out, f"{stem}-{peer}.parquet")
            if os.path.exists(theirs):
                return same_entries(ours, theirs, f"{stem} against {peer}")
        return None
    return check


for _size, _shape in MATMUL.items():
    SIZES[_size]["skewed_matmul"] = _shape


def _prepare_reorder(data, params):
    from sptool.format import TensorMeta
    from sptool.io import open_sink

    n = params["reorder_nnz"]
    path = os.path.join(data, f"reorder-zipf-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED)
        meta = TensorMeta(shape=harness.SHAPE_REORDER, sparse_ndim=3, value_type="float64")
        with open_sink(path, meta, unique_claim=False) as sink:
            for start in range(0, n, 1 << 21):
                m = min(1 << 21, n - start)
                sink.write(zipf_coords(rng, harness.SHAPE_REORDER, m), rng.standard_normal(m))
    sorted_path = os.path.join(data, f"reorder-zipf-{n}-sorted.parquet")
    if not os.path.exists(sorted_path):
        import subprocess

        subprocess.run(sptool_tool("reorder", path, "-o", sorted_path).argv, check=True)
    return {"unsorted": path, "sorted": sorted_path, "rows": n}


def _canonical(data, name, n, seed):
    path = os.path.join(data, f"{name}-zipf-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(seed)
        coords = canonical_zipf(rng, harness.SHAPE_3D, n, distinct)
        write_sptool(path, coords, rng.standard_normal(n), harness.SHAPE_3D)
    return path


def _prepare_reduce(data, params):
    n = params["validate_nnz"]
    return {"big": _canonical(data, "reduce", n, SEED + 1), "rows": n}


def _prepare_add(data, params):
    n = params["add_nnz"]
    return {"a": _canonical(data, "add-a", n, SEED + 2), "b": _canonical(data, "add-b", n, SEED + 3), "rows": n}


def _prepare_tns(data, params):
    n = params["tns_lines"]
    path = os.path.join(data, f"convert-zipf-{n}.tns")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 4)
        write_tns(path, canonical_zipf(rng, harness.SHAPE_3D, n, distinct), rng.standard_normal(n))
    return {"tns": path, "rows": n}


def _check_tns(paths, out):
    return check_tns(paths, out) or _check_against_peer("convert", ("arrow",))(paths, out)


def _prepare_matmul(dist):
    def prepare(data, params):
        m, k, n = params["skewed_matmul"]
        path = os.path.join(data, f"matmul-{dist}-{m}x{k}-{n}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED + 5)
            coords = canonical_zipf(rng, (m, k), n, distinct) if dist == "zipf" else \
                canonical_coords(rng, (m, k), n)
            write_sptool(path, coords, rng.standard_normal(n), (m, k))
        dense = os.path.join(data, f"matmul-skewed-dense-{k}x{MATMUL_K}.npy")
        if not os.path.exists(dense):
            np.save(dense, np.random.default_rng(SEED + 6).standard_normal((k, MATMUL_K)))
        return {"a": path, "b": dense, "rows": n}
    return prepare


register(Benchmark(
    "reorder-zipf", "reorder's job on indices of Zipf's law (exponent 1) along each dimension, same shape",
    "(no target yet) beside reorder's uniform rows", _prepare_reorder, tools_reorder,
    check=check_reorder,
))
register(Benchmark(
    "reduce-zipf", "reduce's job (sum over axis 1) on a canonical tensor of Zipf-law indices, same shape",
    "(no target yet) beside reduce's uniform rows", _prepare_reduce, tools_reduce,
    check=_check_against_peer("reduce"),
))
register(Benchmark(
    "add-zipf", "add's job on two canonical tensors of Zipf-law indices, same shape",
    "(no target yet) beside add's uniform rows", _prepare_add, tools_add,
    check=_check_against_peer("add"),
))
register(Benchmark(
    "convert-tns-zipf", "convert-tns's job on a .tns of Zipf-law indices, same shape and lines",
    "(no target yet) beside convert-tns", _prepare_tns, tools_tns, skip=convert_missing,
    check=_check_tns,
))
for _dist in ("uniform", "zipf"):
    register(Benchmark(
        f"matmul-{_dist}", f"sparse (rows x 100k, {_dist} indices) @ dense (100k x {MATMUL_K}), to a dense .npy",
        "(no target yet) zipf beside uniform", _prepare_matmul(_dist), tools_matmul, check=check_matmul,
    ))
