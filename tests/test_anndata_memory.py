"""Per-gene totals of an .h5ad at sptool's default --memory, as a user measures them: the
command's peak RSS against anndata's own (read_h5ad(f).X.sum(axis=0)), each in a child process
started by the same small launcher."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_memory import LAUNCHER, peak_rss

ad = pytest.importorskip("anndata")
h5py = pytest.importorskip("h5py")
sp = pytest.importorskip("scipy.sparse")

ANNDATA_SUM = """
import sys
import anndata as ad
import numpy as np
np.save(sys.argv[2], np.asarray(ad.read_h5ad(sys.argv[1]).X.sum(axis=0)).ravel())
"""


def _cells(path: str, cells: int, genes: int, per_row: int):
    """A CSR float32 .h5ad written by anndata: rows of Poisson(per_row) sorted, unique columns."""
    rng = np.random.default_rng(31)
    k = np.minimum(rng.poisson(per_row, size=cells), genes)
    indptr = np.concatenate([[0], np.cumsum(k)])
    j = np.arange(indptr[-1]) - np.repeat(indptr[:-1], k)
    c = genes / np.repeat(k, k)
    indices = (np.ceil(j * c) + np.floor(rng.random(len(j)) * np.floor(c))).astype(np.int32)
    data = rng.integers(1, 20, size=len(indices)).astype(np.float32)
    ad.AnnData(X=sp.csr_matrix((data, indices, indptr), shape=(cells, genes))).write_h5ad(path)


def test_per_gene_totals_at_the_default_memory_hold_a_quarter_of_anndatas_peak(tmp_path):
    path = str(tmp_path / "cells.h5ad")
    _cells(path, 240_000, 20_000, 100)  # about 24M entries, 190 MB
    ours = peak_rss(["reduce", path, "--op", "sum", "--axis", "0", "-o", "genes.npy"], tmp_path)
    p = subprocess.run([sys.executable, "-c", LAUNCHER, sys.executable, "-c", ANNDATA_SUM, path, "theirs.npy"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    code, theirs = json.loads(p.stdout)
    assert code == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "genes.npy"), np.load(tmp_path / "theirs.npy"), rtol=1e-5)
    assert 4 * ours <= theirs, f"peak RSS {ours >> 20} MiB, anndata's {theirs >> 20} MiB: more than a quarter"
