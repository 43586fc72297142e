"""Shared fixtures: random tensors with the awkward cases (duplicates, unsorted, empty, hybrid)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.fs as pafs
import pytest

import sptool
from sptool import SparseTensor
from sptool.io import register_filesystem

DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint64", "uint8", "bool", "complex128", "complex64",
          "float16"]


def random_values(rng, n, dtype, block=()):
    size = (n,) + tuple(block)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(size) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -50), min(info.max, 50)
        return rng.integers(lo, hi + 1, size=size).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(size) + 1j * rng.standard_normal(size)).astype(dt)
    return rng.standard_normal(size).astype(dt)


def random_tensor(rng, shape, nnz, *, dtype="float64", sparse_ndim=None, duplicates=False, sort=False,
                  fill_value=None):
    """A SparseTensor with ``nnz`` rows; duplicates repeat earlier coordinates; unsorted unless sort."""
    K = len(shape) if sparse_ndim is None else sparse_ndim
    dims = shape[:K]
    if nnz and min(dims) == 0:
        nnz = 0
    idx = np.stack([rng.integers(0, d, size=nnz) for d in dims], axis=1) if nnz else np.empty((0, K), np.int64)
    if not duplicates and nnz:
        idx = np.unique(idx, axis=0)
        rng.shuffle(idx)
    elif duplicates and nnz > 2:
        idx[nnz // 2:] = idx[rng.integers(0, nnz // 2, size=nnz - nnz // 2)]
    if sort and len(idx):
        idx = idx[np.lexsort(idx.T[::-1])]
    vals = random_values(rng, len(idx), dtype, shape[K:])
    # Uniqueness is known by construction: claimed, as a caller who knows it would (SparseTensor
    # measures it for unsorted rows only by a sort, when asked).
    unique = (False if len(idx) > 2 else None) if duplicates else True
    return SparseTensor(idx, vals, shape, fill_value=fill_value, unique=unique)


def column_major(t: SparseTensor) -> SparseTensor:
    """``t`` (unique) with its rows in column-major order, claiming that order and unique rows:
    out of row-major order, yet claims a reader trusts, since one pass checks them (a claim of
    unique rows in no order is not acted on: TensorMeta.trusted)."""
    order = np.lexsort(t.indices.T)  # the last dimension first
    K = t.indices.shape[1]
    return SparseTensor(t.indices[order], t.values[order], t.shape, fill_value=t.fill_value,
                        sort_order=tuple(reversed(range(K))), unique=True)


def dense_oracle(t: SparseTensor, fill=None) -> np.ndarray:
    """Independent dense form: a Python loop over rows (sum rule for duplicates)."""
    fill = t.fill_value if fill is None else fill
    out = np.full(t.shape, fill, dtype=t.values.dtype)
    seen = set()
    for i, coord in enumerate(map(tuple, t.indices)):
        v = t.values[i]
        if coord in seen:
            with np.errstate(over="ignore"):
                out[coord] = (out[coord] | v) if t.values.dtype == bool else out[coord] + v
        else:
            out[coord] = v
            seen.add(coord)
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def tiny_batches(monkeypatch):
    """Read every source in batches of 7 rows, and write row groups of 5, so that ops cross
    batch and row-group boundaries on small data (and the multi-threaded row-group reader,
    sptool/io/_rowgroups.py, runs on every file written during the test)."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "5")
    return 7


def tiny_budget(total: int):
    """A budget of ``total`` bytes, below the 16 MiB that --memory accepts, with the tuning the
    fixtures set: what forces the external sort and the temporary files on small data."""
    from sptool._memory import budget_of

    return budget_of(None).with_total(total)


def small_runs(monkeypatch, run_rows: int, merge_rows: int):
    """Sorted runs of ``run_rows`` rows merged in slices of ``merge_rows``, whatever --memory says
    (the external sort's tuning, sptool._memory.Budget)."""
    monkeypatch.setenv("SPTOOL_RUN_ROWS", str(run_rows))
    monkeypatch.setenv("SPTOOL_MERGE_ROWS", str(merge_rows))


def write_tensor(tmp_path, name, t) -> str:
    """Write a SparseTensor under tmp_path; its path."""
    path = str(tmp_path / name)
    sptool.write(t, path)
    return path


def save_npy(tmp_path, name, arr) -> str:
    """Save a dense array under tmp_path; its path."""
    path = str(tmp_path / name)
    np.save(path, arr)
    return path


@pytest.fixture(autouse=True, scope="session")
def _temp_files_under_pytest(tmp_path_factory):
    """Whatever asks for the system temp directory during the tests (spilled sort runs, the
    subprocesses the README tests start) gets one of pytest's own instead."""
    import os
    import tempfile

    scratch = str(tmp_path_factory.mktemp("system-temp"))
    old_env, old_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = scratch, scratch
    yield scratch
    tempfile.tempdir = old_dir
    if old_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old_env


@pytest.fixture(scope="session")
def cluster_client():
    """One Dask cluster for every cluster test of the session (tests/test_distributed*.py and any
    other module that asks for it): a 2-worker LocalCluster of single-threaded processes, as
    ``--scheduler local:2`` starts, made when the first test asks for it (a run without cluster
    tests never starts one) and stopped at the end.  Starting one costs seconds of the load of
    two worker processes; a test that needs a fresh cluster (``local:N`` itself) starts its own.
    Command-line tests reach it with ``--scheduler`` and its ``scheduler.address``."""
    import logging

    distributed = pytest.importorskip("distributed")
    from sptool.distributed.cluster import keep_restarted_workers

    with keep_restarted_workers():
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", silence_logs=logging.ERROR)
        with cluster, distributed.Client(cluster) as client:
            yield client


@pytest.fixture
def store(tmp_path):
    """The scheme sub:// names paths inside tmp_path/store through pyarrow's SubTreeFileSystem."""
    root = tmp_path / "store"
    root.mkdir()
    register_filesystem("sub", pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem()))
    yield root
    register_filesystem("sub", None)


@pytest.fixture
def objstore(tmp_path):
    """obj:///ABS names local paths through a PyFileSystem over fsspec's local filesystem that
    behaves as S3 and GCS do (only objects under a prefix): its type name is S3's, so sptool
    moves a directory key by key, and a directory move fails; its moves are noted."""
    fsspec_local = pytest.importorskip("fsspec.implementations.local")

    class ObjectStoreLike(pafs.FSSpecHandler):
        moves: list = []

        def get_type_name(self):
            return "s3"

        def move(self, src, dest):
            if self.fs.isdir(src):
                raise OSError("an object store cannot move a directory")
            self.moves.append((os.path.basename(src), os.path.relpath(dest, tmp_path)))
            super().move(src, dest)

    handler = ObjectStoreLike(fsspec_local.LocalFileSystem())
    register_filesystem("obj", pafs.PyFileSystem(handler))
    yield handler
    register_filesystem("obj", None)
