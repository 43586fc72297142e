"""Input data that more than one benchmark family makes: canonical coordinates, tensors written
with sptool's own writer, FROSTT .tns text, indices of Zipf's law, and the 3-D tensors of
validate, reorder and add (and their 2-D int32 twins).  Each file is written once per size into the
data directory and reused; the seeds are fixed, so every family reads the same bytes.

Indices of Zipf's law: along each dimension of extent E independently, rank r = floor((E + 1)^u) - 1
with u uniform in [0, 1), so P(r) is about proportional to 1 / (r + 1) (exponent 1: half the
entries lie among the first sqrt(E) ranks), and rank r sits at index r * SCATTER mod E, so that the
heavy indices are spread over the extent as a real tensor's are, not all at its start.
"""

from __future__ import annotations

import os
import subprocess

import harness
import numpy as np
from harness import SEED, sptool_tool

# Odd and prime, above every extent used: r -> r * SCATTER mod E is one-to-one on [0, E).
SCATTER = 2_654_435_761
# The second shape of the sort-based benchmarks: a wide, near-square matrix of int32 values.
SHAPE_2D = (300_000, 300_000)


def distinct(a: np.ndarray) -> np.ndarray:
    """np.unique(a) by a sort (numpy 2.4's np.unique took 5 s on 1M int64s where a sort takes 0.05 s)."""
    a = np.sort(a)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a


def canonical_coords(rng: np.random.Generator, shape, n: int) -> np.ndarray:
    """n distinct coordinates of ``shape`` in row-major order, as an (n, K) int64 array."""
    total = int(np.prod(shape))
    if n > total // 2:
        raise ValueError(f"{n} coordinates are too many for shape {shape}")
    # Draws with replacement that leave about 2% more than n distinct values.
    draws = int(-total * np.log1p(-n / total) * 1.02) + 16
    flat = distinct(rng.integers(0, total, size=draws))
    while len(flat) < n:
        flat = distinct(np.concatenate([flat, rng.integers(0, total, size=n - len(flat) + 16)]))
    flat = np.sort(flat[rng.choice(len(flat), size=n, replace=False)])
    return np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)


def write_sptool(path: str, coords: np.ndarray, values: np.ndarray, shape):
    import sptool

    t = sptool.SparseTensor(coords, values, shape, sort_order=tuple(range(len(shape))), unique=True)
    sptool.write(t, path)


def prepare_validate(data: str, params: dict) -> dict:
    n = params["validate_nnz"]
    path = os.path.join(data, f"validate-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED)
        coords = canonical_coords(rng, harness.SHAPE_3D, n)
        write_sptool(path, coords, rng.standard_normal(n), harness.SHAPE_3D)
    return {"big": path, "rows": n}


def write_tns(path: str, coords: np.ndarray, values: np.ndarray):
    """A 3-D FROSTT .tns at ``path`` of 0-based (n, 3) ``coords`` and their ``values``."""
    import pyarrow as pa
    import pyarrow.csv as csv

    coords = coords + 1
    table = pa.table([coords[:, 0], coords[:, 1], coords[:, 2], values], names=["i", "j", "k", "v"])
    tmp = path + ".tmp"
    # Arrow prints doubles in their shortest round-trip form, as FROSTT files usually are.
    csv.write_csv(table, tmp, csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    os.replace(tmp, path)


def prepare_reorder(data: str, params: dict) -> dict:
    from sptool.format import TensorMeta
    from sptool.io import open_sink

    n = params["reorder_nnz"]
    path = os.path.join(data, f"reorder-{n}.parquet")
    if not os.path.exists(path):
        rng = np.random.default_rng(SEED + 3)
        meta = TensorMeta(shape=harness.SHAPE_REORDER, sparse_ndim=3, value_type="float64")
        with open_sink(path, meta, unique_claim=False) as sink:
            for start in range(0, n, 1 << 21):
                m = min(1 << 21, n - start)
                keys = np.stack([rng.integers(0, d, size=m) for d in harness.SHAPE_REORDER]).astype(np.int64)
                sink.write(keys, rng.standard_normal(m))
    sorted_path = os.path.join(data, f"reorder-{n}-sorted.parquet")
    if not os.path.exists(sorted_path):
        subprocess.run(sptool_tool("reorder", path, "-o", sorted_path).argv, check=True)
    # The memory benchmark: --memory so small that the input is 8x the budget (rows of 32 bytes).
    budget = max(16 << 20, n * 32 // 8)
    return {"unsorted": path, "sorted": sorted_path, "rows": n, "budget": budget}


def prepare_add(data: str, params: dict) -> dict:
    n = params["add_nnz"]
    paths = {}
    for i, name in enumerate(("a", "b")):
        path = os.path.join(data, f"add-{n}-{name}.parquet")
        if not os.path.exists(path):
            rng = np.random.default_rng(SEED + 10 + i)
            coords = canonical_coords(rng, harness.SHAPE_3D, n)
            write_sptool(path, coords, rng.standard_normal(n), harness.SHAPE_3D)
        paths[name] = path
    paths["rows"] = n
    return paths


def prepare_2d_int32(kind: str):
    """The wide 2-D int32 shape of reorder (unsorted), reduce (canonical) and add (two canonical)."""
    def prepare(data: str, params: dict) -> dict:
        n = params["reorder_nnz" if kind == "reorder" else "validate_nnz" if kind == "reduce" else "add_nnz"]
        names = ("a", "b") if kind == "add" else ("x",)
        paths = {}
        for i, name in enumerate(names):
            path = os.path.join(data, f"{kind}-2d-int32-{n}-{name}.parquet")
            if not os.path.exists(path):
                rng = np.random.default_rng(SEED + 80 + i)
                values = rng.integers(-1000, 1000, n, dtype=np.int32)
                if kind == "reorder":
                    import sptool

                    coords = np.stack([rng.integers(0, d, n) for d in SHAPE_2D], axis=1)
                    sptool.write(sptool.SparseTensor(coords, values, SHAPE_2D), path)
                else:
                    write_sptool(path, canonical_coords(rng, SHAPE_2D, n), values, SHAPE_2D)
            paths[name] = path
        if kind == "reorder":
            paths = {"unsorted": paths["x"], "sorted": None}
        elif kind == "reduce":
            paths = {"big": paths["x"]}
        return {**paths, "rows": n, "ndim": 2}
    return prepare


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
