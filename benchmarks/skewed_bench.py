"""Skewed index data beside uniform: reorder, reduce, add, matmul and convert on tensors whose
indices follow a power law (as the degrees of nell-2, enron and delicious do), against the same
peers as the uniform rows (DuckDB, Polars, pydata sparse, the I/O floor, SciPy, pyarrow.csv),
every tool on the same files.  Registered into run.py's BENCHMARKS by ``add_to(run)``:

- reorder-zipf, reduce-zipf, add-zipf and convert-tns-zipf: the shapes and sizes of run.py's
  uniform rows reorder, reduce, add and convert-tns (run.SHAPE_REORDER, run.SHAPE_3D, --shape issue);
- matmul-uniform and matmul-zipf: a rows x 100,000 matrix @ a dense 100,000 x 16, the same shape and
  entry count for both (MATMUL: 20M entries at --size large; run.py's matmul row has 10M).

reduce-zipf, add-zipf and convert-tns-zipf check sptool's output entry by entry against a peer's.

The indices: along each dimension of extent E independently, rank r = floor((E + 1)^u) - 1 with
u uniform in [0, 1), so P(r) is about proportional to 1 / (r + 1) (Zipf's law, exponent 1: half
the entries lie among the first sqrt(E) ranks), and rank r sits at index r * SCATTER mod E, so
that the heavy indices are spread over the extent as a real tensor's are, not all at its start.
"""

from __future__ import annotations

import os

import numpy as np

# Odd and prime, above every extent used: r -> r * SCATTER mod E is one-to-one on [0, E).
SCATTER = 2_654_435_761
SEED = 7_919
# Per size: rows, columns and entries of the matmul benchmarks' sparse matrix.
MATMUL = {"small": (100_000, 100_000, 1_000_000), "medium": (250_000, 100_000, 5_000_000),
          "large": (1_000_000, 100_000, 20_000_000)}
MATMUL_K = 16


def zipf_indices(rng: np.random.Generator, extent: int, n: int) -> np.ndarray:
    """``n`` indices in [0, extent) of Zipf's law (exponent 1), scattered over the extent."""
    rank = np.floor(np.exp(rng.random(n) * np.log1p(extent))).astype(np.int64) - 1
    np.clip(rank, 0, extent - 1, out=rank)
    if extent < SCATTER:
        return rank * SCATTER % extent
    return rank  # (an extent this large: the ranks, unscattered, to stay within int64)


def zipf_coords(rng: np.random.Generator, shape, n: int) -> np.ndarray:
    """(K, n) int64 coordinates, each dimension's of :func:`zipf_indices`, with repeats."""
    return np.stack([zipf_indices(rng, int(s), n) for s in shape])


def canonical_zipf(rng: np.random.Generator, shape, n: int, distinct) -> np.ndarray:
    """``n`` distinct coordinates of Zipf's law in row-major order, as an (n, K) int64 array (the
    shape's product within int64): draws, their repeats dropped (``distinct``), topped up until
    ``n`` remain."""
    def draw(m):
        return np.ravel_multi_index(tuple(zipf_coords(rng, shape, m)), shape)

    flat = distinct(draw(n))
    fresh = len(flat) / n  # the share of draws that were new: the head fills up first
    while len(flat) < n:
        draws = int((n - len(flat)) / max(fresh, 0.01) * 1.2) + 16
        before = len(flat)
        flat = distinct(np.concatenate([flat, draw(draws)]))
        fresh = (len(flat) - before) / draws
    flat = np.sort(flat[rng.choice(len(flat), size=n, replace=False)])
    return np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)


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


def add_to(run):
    """Register reorder-zipf, reduce-zipf, add-zipf, convert-tns-zipf, matmul-uniform and matmul-zipf
    in the run module ``run``."""
    for size, shape in MATMUL.items():
        run.SIZES[size]["skewed_matmul"] = shape

    def prepare_reorder(data, params):
        from sptool.format import TensorMeta
        from sptool.io import open_sink

        n = params["reorder_nnz"]
        path = os.path.join(data, f"reorder-zipf-{n}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED)
            meta = TensorMeta(shape=run.SHAPE_REORDER, sparse_ndim=3, value_type="float64")
            with open_sink(path, meta, unique_claim=False) as sink:
                for start in range(0, n, 1 << 21):
                    m = min(1 << 21, n - start)
                    sink.write(zipf_coords(rng, run.SHAPE_REORDER, m), rng.standard_normal(m))
        sorted_path = os.path.join(data, f"reorder-zipf-{n}-sorted.parquet")
        if not os.path.exists(sorted_path):
            import subprocess

            subprocess.run(run.sptool_tool("reorder", path, "-o", sorted_path).argv, check=True)
        return {"unsorted": path, "sorted": sorted_path, "rows": n}

    def canonical(data, name, n, seed):
        path = os.path.join(data, f"{name}-zipf-{n}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(seed)
            coords = canonical_zipf(rng, run.SHAPE_3D, n, run._distinct)
            run._write_sptool(path, coords, rng.standard_normal(n), run.SHAPE_3D)
        return path

    def prepare_reduce(data, params):
        n = params["validate_nnz"]
        return {"big": canonical(data, "reduce", n, SEED + 1), "rows": n}

    def prepare_add(data, params):
        n = params["add_nnz"]
        return {"a": canonical(data, "add-a", n, SEED + 2), "b": canonical(data, "add-b", n, SEED + 3), "rows": n}

    def prepare_tns(data, params):
        n = params["tns_lines"]
        path = os.path.join(data, f"convert-zipf-{n}.tns")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED + 4)
            run._write_tns(path, canonical_zipf(rng, run.SHAPE_3D, n, run._distinct), rng.standard_normal(n))
        return {"tns": path, "rows": n}

    def check_tns(paths, out):
        return run._check_tns(paths, out) or _check_against_peer("convert", ("arrow",))(paths, out)

    def prepare_matmul(dist):
        def prepare(data, params):
            m, k, n = params["skewed_matmul"]
            path = os.path.join(data, f"matmul-{dist}-{m}x{k}-{n}.parquet")
            if not os.path.exists(path):
                rng = np.random.default_rng(SEED + 5)
                coords = canonical_zipf(rng, (m, k), n, run._distinct) if dist == "zipf" else \
                    run._canonical_coords(rng, (m, k), n)
                run._write_sptool(path, coords, rng.standard_normal(n), (m, k))
            dense = os.path.join(data, f"matmul-skewed-dense-{k}x{MATMUL_K}.npy")
            if not os.path.exists(dense):
                np.save(dense, np.random.default_rng(SEED + 6).standard_normal((k, MATMUL_K)))
            return {"a": path, "b": dense, "rows": n}
        return prepare

    run.register(run.Benchmark(
        "reorder-zipf", "reorder's job on indices of Zipf's law (exponent 1) along each dimension, same shape",
        "(no target yet) beside reorder's uniform rows", prepare_reorder, run._tools_reorder,
        check=run._check_reorder,
    ))
    run.register(run.Benchmark(
        "reduce-zipf", "reduce's job (sum over axis 1) on a canonical tensor of Zipf-law indices, same shape",
        "(no target yet) beside reduce's uniform rows", prepare_reduce, run._tools_reduce,
        check=_check_against_peer("reduce"),
    ))
    run.register(run.Benchmark(
        "add-zipf", "add's job on two canonical tensors of Zipf-law indices, same shape",
        "(no target yet) beside add's uniform rows", prepare_add, run._tools_add,
        check=_check_against_peer("add"),
    ))
    run.register(run.Benchmark(
        "convert-tns-zipf", "convert-tns's job on a .tns of Zipf-law indices, same shape and lines",
        "(no target yet) beside convert-tns", prepare_tns, run._tools_tns, skip=run._convert_missing,
        check=check_tns,
    ))
    for dist in ("uniform", "zipf"):
        run.register(run.Benchmark(
            f"matmul-{dist}", f"sparse (rows x 100k, {dist} indices) @ dense (100k x {MATMUL_K}), to a dense .npy",
            "(no target yet) zipf beside uniform", prepare_matmul(dist), run._tools_matmul, check=run._check_matmul,
        ))
    return ["reorder-zipf", "reduce-zipf", "add-zipf", "convert-tns-zipf", "matmul-uniform", "matmul-zipf"]
