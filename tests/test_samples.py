"""The sample tensors in sample_data/: valid (or invalid exactly as intended), faithful to their
sources, and reproducible by sample_data/make_samples.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import sptool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "sample_data")
VALID = ["digits.parquet", "tensor3d.parquet", "unsorted.parquet", "rowsparse.parquet",
         "matrix_a.parquet", "matrix_b.parquet", "ids_words.parquet", "ids_numbers.parquet", "grad.parquet"]
INVALID_CODES = {"E_NOT_SORTED", "E_INDEX_OUT_OF_BOUNDS", "E_STATS_OUT_OF_BOUNDS"}


def sample(name: str) -> str:
    return os.path.join(SAMPLES, name)


def failed_codes(report) -> set[str]:
    return {p.code for p in report.problems if p.severity != "info"}


@pytest.mark.parametrize("name", VALID)
def test_valid_samples_validate_clean(name):
    report = sptool.validate(sample(name))
    assert report.valid, report.to_json()
    assert failed_codes(report) == set(), report.to_json()  # not even a warning


def test_invalid_sample_fails_with_exactly_the_intended_codes():
    report = sptool.validate(sample("invalid.parquet"))
    assert not report.valid
    assert failed_codes(report) == INVALID_CODES
    messages = {p.code: p.message for p in report.problems}
    assert messages["E_NOT_SORTED"].startswith("indices[3] = [1,0] is out of order")
    assert messages["E_INDEX_OUT_OF_BOUNDS"].startswith("indices[7] = [5,2] is out of bounds")
    # The footer statistics alone already prove the bound violation.
    meta_only = sptool.validate(sample("invalid.parquet"), metadata_only=True)
    assert failed_codes(meta_only) == {"E_STATS_OUT_OF_BOUNDS"}


def test_sample_claims():
    assert sptool.read(sample("tensor3d.parquet")).canonical
    assert sptool.read(sample("matrix_a.parquet")).canonical
    u = sptool.read(sample("unsorted.parquet"))
    assert u.sort_order == () and not u.unique
    keys = [tuple(r) for r in u.indices.tolist()]
    assert len(set(keys)) < len(keys), "unsorted.parquet should repeat coordinates"
    assert keys != sorted(keys)
    r = sptool.read(sample("rowsparse.parquet"))
    assert (r.shape, r.sparse_ndim, r.values.dtype, r.unique) == ((100, 8), 1, np.float32, False)
    assert len(np.unique(r.indices[:, 0])) < r.nnz
    a, b = sptool.read(sample("matrix_a.parquet")), sptool.read(sample("matrix_b.parquet"))
    assert a.shape == b.shape
    assert np.load(sample("dense_b.npy")).shape == (a.shape[1], 16)


def test_apply_samples_are_a_table_and_its_gradient():
    table = np.load(sample("embeddings.npy"))
    rows, values = np.load(sample("grad_rows.npy")), np.load(sample("grad_values.npy"))
    assert table.shape == (1000, 16) and table.dtype == np.float32 and values.shape == (len(rows), 16)
    assert len(np.unique(rows)) < len(rows), "the gradient should repeat some rows"
    dense = np.zeros_like(table)
    np.add.at(dense, rows, values)
    g = sptool.read(sample("grad.parquet"))
    assert g.sparse_ndim == 1 and np.array_equal(g.indices[:, 0], rows) and np.array_equal(g.to_dense(), dense)


def test_digits_is_sklearn_load_digits():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")  # scikit-learn is in the test extra
    data = sklearn_datasets.load_digits().data
    t = sptool.read(sample("digits.parquet"))
    assert t.shape == data.shape and t.canonical
    assert t.meta.dimension_names == ("image", "pixel")
    assert np.array_equal(t.to_dense(), data)
    assert t.nnz == np.count_nonzero(data)
    attrs = t.meta.attributes
    assert "load_digits" in attrs["source"] and attrs["package"].startswith("scikit-learn ")


def test_tns_matches_parquet():
    rows = np.loadtxt(sample("tensor3d.tns"), dtype=np.float64, ndmin=2)
    t = sptool.read(sample("tensor3d.parquet"))
    idx = rows[:, :3].astype(np.int64) - 1
    assert np.array_equal(idx + 1, rows[:, :3])
    dense = np.zeros(t.shape)
    np.add.at(dense, tuple(idx.T), rows[:, 3])
    assert np.array_equal(dense, t.to_dense())
    # Same entries, not merely the same sums: one line per stored entry, values exact.
    order = np.lexsort(idx.T[::-1])
    assert np.array_equal(idx[order], t.indices)
    assert np.array_equal(rows[order, 3], t.values)
    assert tuple(int(m) + 1 for m in idx.max(axis=0)) == t.shape  # FROSTT infers the shape


def _parquet_contents(path: str):
    table = pq.read_table(path)
    meta = json.loads(pq.read_metadata(path).metadata[b"sptool"])
    # digits.parquet records the scikit-learn version it was made with; another version may
    # make the same data, so that one field is not compared.
    meta.get("attributes", {}).pop("package", None)
    return table, meta


def test_make_samples_reproduces_the_files(tmp_path):
    pytest.importorskip("sklearn")
    script = os.path.join(SAMPLES, "make_samples.py")
    subprocess.run([sys.executable, script, str(tmp_path)], check=True, capture_output=True)
    committed = sorted(n for n in os.listdir(SAMPLES) if n.endswith((".parquet", ".tns", ".npy", ".svm")))
    assert sorted(os.listdir(tmp_path)) == committed
    for name in committed:
        old, new = sample(name), str(tmp_path / name)
        if name.endswith(".parquet"):
            (t_old, m_old), (t_new, m_new) = _parquet_contents(old), _parquet_contents(new)
            assert t_old.equals(t_new), name
            assert t_old.schema.equals(t_new.schema), name
            assert m_old == m_new, name
        elif name.endswith(".npy"):
            a, b = np.load(old), np.load(new)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        else:
            with open(old) as f_old, open(new) as f_new:
                assert f_old.read() == f_new.read(), name


def test_samples_folder_is_small():
    total = sum(os.path.getsize(sample(n)) for n in os.listdir(SAMPLES) if os.path.isfile(sample(n)))
    assert total < 2 * 1024 * 1024
