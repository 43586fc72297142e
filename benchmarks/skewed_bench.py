"""Skewed index data beside uniform: reorder, reduce and add on tensors whose indices follow a
power law (as the degrees of nell-2, enron and delicious do), against the same peers as the
uniform rows (DuckDB, Polars, pydata sparse, the I/O floor), every tool on the same files.
Registered into run.py's BENCHMARKS by ``add_to(run)`` as reorder-zipf, reduce-zipf and add-zipf;
their shapes and sizes are the uniform rows' (run.SHAPE_REORDER, run.SHAPE_3D and --shape issue).

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


def add_to(run):
    """Register reorder-zipf, reduce-zipf and add-zipf in the run module ``run``."""

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

    run.register(run.Benchmark(
        "reorder-zipf", "reorder's job on indices of Zipf's law (exponent 1) along each dimension, same shape",
        "(no target yet) beside reorder's uniform rows", prepare_reorder, run._tools_reorder,
        check=run._check_reorder,
    ))
    run.register(run.Benchmark(
        "reduce-zipf", "reduce's job (sum over axis 1) on a canonical tensor of Zipf-law indices, same shape",
        "(no target yet) beside reduce's uniform rows", prepare_reduce, run._tools_reduce,
    ))
    run.register(run.Benchmark(
        "add-zipf", "add's job on two canonical tensors of Zipf-law indices, same shape",
        "(no target yet) beside add's uniform rows", prepare_add, run._tools_add,
    ))
    return ["reorder-zipf", "reduce-zipf", "add-zipf"]
