"""The AnnData benchmarks: sptool reading an .h5ad beside anndata itself, registered into
harness.BENCHMARKS on import, or run on their own:

    python benchmarks/anndata_bench.py [--size small|medium|large] [--repeat N]

The data is a CSR .h5ad of float32 counts written by anndata (write_h5ad, as scanpy users have
them): at --size medium the issue's 200,000 cells x 20,000 genes with 20M entries.  Each tool runs
in a fresh process through run.py's launcher (its wall time includes start-up and imports, and its
peak RSS is its own).

- anndata-reduce: per-gene totals.  sptool reduce --axis 0, at its default --memory and at
  --memory 64MiB, against read_h5ad(f).X.sum(axis=0) and against the chunked loop over
  read_h5ad(f, backed="r") that anndata documents (chunked_X).  The notes give each peer's time
  and peak RSS over each sptool row's (the goals: time >= 2x and 3x, RSS >= 4x).
- anndata-convert: the .h5ad's X to Parquet against read_h5ad alone.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from harness import SIZES, Benchmark, python_tool, register, sptool_tool

HERE = os.path.dirname(os.path.abspath(__file__))

# (cells, genes, entries) per size; medium is the file.
SHAPES = {"small": (20_000, 20_000, 2_000_000), "medium": (200_000, 20_000, 20_000_000),
          "large": (400_000, 20_000, 40_000_000)}

# Written by anndata, from a CSR matrix built with NumPy: scipy.sparse.random draws 20M positions
# of 4e9 far too slowly.  Row i holds a Poisson number of entries (mean entries/cells, at most
# the genes), each row's columns sorted and unique: entry j of a row of k lies among the floor(c)
# columns from ceil(j * c), c = genes / k.
MAKE = """
import sys
import anndata as ad
import numpy as np
import scipy.sparse as sp
path, cells, genes, entries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(20)
k = np.minimum(rng.poisson(entries / cells, size=cells), genes)
indptr = np.concatenate([[0], np.cumsum(k)])
j = np.arange(indptr[-1]) - np.repeat(indptr[:-1], k)
c = genes / np.repeat(k, k)
indices = (np.ceil(j * c) + np.floor(rng.random(len(j)) * np.floor(c))).astype(np.int32)
del j, c
data = rng.integers(1, 20, size=len(indices)).astype(np.float32)
X = sp.csr_matrix((data, indices, indptr), shape=(cells, genes))
ad.AnnData(X=X).write_h5ad(path + ".tmp")
import os
os.replace(path + ".tmp", path)
"""

PEER_SUM = """
    import sys
    import anndata as ad
    import numpy as np
    np.save(sys.argv[2], np.asarray(ad.read_h5ad(sys.argv[1]).X.sum(axis=0)).ravel())
"""

# anndata's documented way to go through a file larger than memory: backed mode, X in chunks of
# rows (AnnData.chunked_X, its default chunk of 1000 rows).
PEER_BACKED = """
    import sys
    import anndata as ad
    import numpy as np
    adata = ad.read_h5ad(sys.argv[1], backed="r")
    total = np.zeros(adata.n_vars)
    for chunk, start, end in adata.chunked_X():
        total += np.asarray(chunk.sum(axis=0)).ravel()
    np.save(sys.argv[2], total)
"""

PEER_READ = """
    import sys
    import anndata as ad
    ad.read_h5ad(sys.argv[1])
"""


def _missing() -> str | None:
    import importlib.util

    absent = [m for m in ("anndata", "h5py") if importlib.util.find_spec(m) is None]
    return f"{' and '.join(absent)} not installed (pip install anndata h5py)" if absent else None


def _prepare(data: str, params: dict) -> dict:
    cells, genes, entries = params["anndata"]
    path = os.path.join(data, f"cells-{cells}x{genes}-{entries}.h5ad")
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-c", MAKE, path, str(cells), str(genes), str(entries)], check=True)
    import h5py

    with h5py.File(path) as f:
        nnz = int(f["X/data"].shape[0])
    return {"h5ad": path, "rows": nnz}


for _size, _shape in SHAPES.items():
    SIZES[_size]["anndata"] = _shape


def _genes(out, tool):
    return os.path.join(out, f"anndata-genes-{tool}.npy")


def _tools_reduce(paths, out):
    f = paths["h5ad"]
    # The goals hold at the default --memory; --memory 64MiB beside it shows what a small budget changes.
    small = sptool_tool("--memory", "64MiB", "reduce", f, "--op", "sum", "--axis", "0", "-o",
                        _genes(out, "sptool-64MiB"), outputs=[_genes(out, "sptool-64MiB")])
    small.name = "sptool --memory 64MiB"
    return [sptool_tool("reduce", f, "--op", "sum", "--axis", "0", "-o", _genes(out, "sptool"),
                        outputs=[_genes(out, "sptool")]),
            small,
            python_tool("anndata read_h5ad(f).X.sum(axis=0)", PEER_SUM, f, _genes(out, "sum"),
                        outputs=[_genes(out, "sum")]),
            python_tool("anndata backed='r', chunked_X() loop", PEER_BACKED, f, _genes(out, "backed"),
                        outputs=[_genes(out, "backed")])]


def _check_reduce(paths, out):
    ours = np.load(_genes(out, "sptool"))
    for peer in ("sptool-64MiB", "sum", "backed"):
        if not np.allclose(ours, np.load(_genes(out, peer)), rtol=1e-5):
            return f"sptool's per-gene sums differ from anndata's ({peer})"
    return None


def _report_reduce(paths, rows):
    """Each peer's median time and peak RSS over each sptool row's."""
    ours = [r for r in rows if r["tool"].startswith("sptool") and r["median"]]
    notes = []
    for peer in (r for r in rows if not r["tool"].startswith("sptool") and r["median"]):
        notes.append(f"{peer['tool']}: " + "; ".join(
            f"over {r['tool']}: time {peer['median'] / r['median']:.2f}x, "
            f"peak RSS {peer['max_rss'] / r['max_rss']:.2f}x" for r in ours))
    return notes


def _tools_convert(paths, out):
    parquet = os.path.join(out, "anndata-X.parquet")
    return [sptool_tool("convert", paths["h5ad"], "-o", parquet, outputs=[parquet]),
            python_tool("anndata read_h5ad (no output)", PEER_READ, paths["h5ad"])]


def _check_convert(paths, out):
    import pyarrow.parquet as pq

    rows = pq.read_metadata(os.path.join(out, "anndata-X.parquet")).num_rows
    return None if rows == paths["rows"] else f"sptool wrote {rows} entries, the file holds {paths['rows']}"


register(Benchmark(
    "anndata-reduce", "per-gene totals of a CSR float32 .h5ad written by anndata (reduce --op sum --axis 0)",
    "sptool (default --memory) at least 2x faster than read_h5ad(f).X.sum(axis=0) (ratio >= 2) at no more "
    "than a quarter of its peak RSS; at least 3x faster than the backed chunked_X loop (ratio >= 3)",
    _prepare, _tools_reduce, skip=_missing, check=_check_reduce, report=_report_reduce,
))
register(Benchmark(
    "anndata-convert", "the X of a CSR float32 .h5ad written by anndata to a Parquet file",
    "sptool at least as fast as anndata.read_h5ad alone (ratio >= 1)",
    _prepare, _tools_convert, skip=_missing, check=_check_convert,
))


if __name__ == "__main__":
    sys.modules["anndata_bench"] = sys.modules[__name__]  # run.py's import of this module: this one, not a second copy
    import run

    sys.exit(run.main_of("anndata-", "anndata.json", sys.argv[1:]))
