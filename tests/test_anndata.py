"""AnnData files against anndata itself (the oracle, a test extra): files anndata writes, read by
sptool, equal the matrices anndata returns; files sptool writes are read back by anndata equal to
the input; files of before anndata 0.7 (written here with h5py, as anndata's legacy reader expects
them) read as anndata reads them; bad files are refused, naming the file, the key and the place."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

import sptool
from sptool.cli import cli
from sptool.ops.convert import convert

ad = pytest.importorskip("anndata")
h5py = pytest.importorskip("h5py")


def _dense(m) -> np.ndarray:
    return m.toarray() if sp.issparse(m) else np.asarray(m)


def _sptool_dense(path, **kw) -> tuple[np.ndarray, sptool.SparseTensor]:
    """The dense form of what sptool reads: converted to Parquet (``kw``: convert's options), then
    read back whole."""
    out = os.path.join(os.path.dirname(path), "read.parquet")
    convert(path, out, **kw)
    t = sptool.read(out)
    assert sptool.validate(out).valid
    os.remove(out)
    return t.to_dense(), t


def _matrix(rng, shape, density, fmt, dtype):
    m = sp.random(*shape, density=density, format="csr", random_state=rng, dtype=np.float64)
    if np.dtype(dtype).kind in "iu":
        m.data = rng.integers(1, 50, size=m.nnz).astype(np.float64)
    m = m.astype(dtype)
    return m.asformat(fmt) if fmt != "dense" else m.toarray()


def _read_back(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata's notes on old formats and experimental zarr
        return ad.read_zarr(path) if path.endswith(".zarr") else ad.read_h5ad(path)


# ---------------------------------------------------------------------------------------------
# files anndata writes, read by sptool


@pytest.mark.parametrize("fmt", ["csr", "csc", "dense"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float64"])
def test_reads_x_as_anndata_returns_it(tmp_path, rng, fmt, dtype, tiny_batches):
    X = _matrix(rng, (40, 25), 0.2, fmt, dtype)
    path = str(tmp_path / "cells.h5ad")
    ad.AnnData(X=X).write_h5ad(path)
    expected = _dense(_read_back(path).X)
    dense, t = _sptool_dense(path)
    np.testing.assert_array_equal(dense, expected)
    # Integers stay integers, float32 stays float32; the order the layout gives is claimed.
    assert t.meta.value_type == dtype and t.shape == (40, 25)
    assert t.meta.sort_order == ((1, 0) if fmt == "csc" else (0, 1)) and t.meta.unique
    assert t.nnz == np.count_nonzero(expected)
    # Every command reads the .h5ad itself: sptool.read goes through the same source.
    direct = sptool.read(path)
    np.testing.assert_array_equal(direct.to_dense(), expected)


def test_reads_every_matrix_by_its_key(tmp_path, rng, tiny_batches):
    a = ad.AnnData(X=_matrix(rng, (30, 12), 0.3, "csr", "float32"))
    a.layers["counts"] = _matrix(rng, (30, 12), 0.3, "csc", "int64")
    a.obsm["X_pca"] = rng.standard_normal((30, 4)).astype(np.float32)
    a.varm["PCs"] = rng.standard_normal((12, 4))
    a.obsp["distances"] = _matrix(rng, (30, 30), 0.1, "csr", "float64")
    a.varp["corr"] = _matrix(rng, (12, 12), 0.2, "csc", "float64")
    a.raw = a.copy()
    path = str(tmp_path / "cells.h5ad")
    a.write_h5ad(path)
    back = _read_back(path)
    expected = {"X": back.X, "layers/counts": back.layers["counts"], "obsm/X_pca": back.obsm["X_pca"],
                "varm/PCs": back.varm["PCs"], "obsp/distances": back.obsp["distances"],
                "varp/corr": back.varp["corr"], "raw/X": back.raw.X, "raw/varm/PCs": back.raw.varm["PCs"]}
    for key, matrix in expected.items():
        dense, t = _sptool_dense(path, key=key)
        np.testing.assert_array_equal(dense, _dense(matrix), err_msg=key)
        assert t.meta.value_type == str(_dense(matrix).dtype), key
    info = sptool.info(path)
    listed = {m["key"]: m for m in info["matrices"]}
    assert set(listed) == set(expected)
    for key, matrix in expected.items():
        m = listed[key]
        assert m["shape"] == list(matrix.shape), key
        assert m["layout"] == (matrix.format if sp.issparse(matrix) else "dense"), key
        assert m["nnz"] == (matrix.nnz if sp.issparse(matrix) else None), key
        assert m["value_type"] == str(matrix.dtype), key


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_empty_rows_and_columns_and_no_rows(tmp_path, rng, fmt, tiny_batches):
    X = _matrix(rng, (20, 15), 0.3, "dense", "float32")
    X[[0, 1, 7, 19]] = 0  # empty rows, first and last among them
    X[:, [0, 5, 14]] = 0  # empty columns
    for shape, m in (((20, 15), X), ((0, 15), np.zeros((0, 15), np.float32)), ((20, 0), np.zeros((20, 0)))):
        path = str(tmp_path / f"cells-{shape[0]}-{shape[1]}.h5ad")
        ad.AnnData(X=sp.csr_matrix(m).asformat(fmt)).write_h5ad(path)
        dense, t = _sptool_dense(path)
        assert t.shape == shape
        np.testing.assert_array_equal(dense, _dense(_read_back(path).X))


def _write_sparse_group(f, name, m, *, encoding=True, legacy=False):
    """A scipy matrix as anndata's sparse group (or, ``legacy``, as anndata before 0.7 wrote it),
    its arrays exactly as given: unsorted or repeated indices kept."""
    g = f.create_group(name)
    if legacy:
        g.attrs["h5sparse_format"] = m.format
        g.attrs["h5sparse_shape"] = np.array(m.shape)
    elif encoding:
        g.attrs.update({"encoding-type": f"{m.format}_matrix", "encoding-version": "0.1.0",
                        "shape": np.array(m.shape)})
    g["data"], g["indices"], g["indptr"] = m.data, m.indices, m.indptr
    return g


def _unsorted_csr(rng, shape, nnz_per_row):
    """A CSR matrix whose column indices are shuffled within every row, some repeated."""
    rows, cols, data = [], [], []
    for r in range(shape[0]):
        c = rng.choice(shape[1], size=nnz_per_row, replace=False)
        c = np.concatenate([c, c[:1]]) if r % 3 == 0 else c  # a repeat in every third row
        rows.append(np.full(len(c), r))
        cols.append(c)
        data.append(rng.integers(1, 9, size=len(c)).astype(np.float32))
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in cols])])
    return sp.csr_matrix((np.concatenate(data), np.concatenate(cols), indptr), shape=shape)


def test_unsorted_indices_are_sorted_and_repeats_summed(tmp_path, rng, tiny_batches):
    m = _unsorted_csr(rng, (12, 30), 5)
    assert not m.has_sorted_indices
    path = str(tmp_path / "scanpy.h5ad")
    ad.AnnData(X=m).write_h5ad(path)
    with h5py.File(path) as f:  # anndata kept them as they were
        assert not np.all(np.diff(f["X/indices"][:5]) > 0)
    out = str(tmp_path / "x.parquet")
    result = convert(path, out)
    t = sptool.read(out)
    np.testing.assert_array_equal(t.to_dense(), _dense(_read_back(path).X))
    assert t.meta.canonical and t.nnz == m.nnz - 4  # four rows held one repeat each
    assert any("sorted as read" in n for n in result["notes"]) and any("summed" in n for n in result["notes"])


# ---------------------------------------------------------------------------------------------
# every command reads an .h5ad's X


@pytest.fixture
def cells(tmp_path_factory):
    rng = np.random.default_rng(7)
    X = _matrix(rng, (300, 80), 0.1, "csr", "float32")
    path = str(tmp_path_factory.mktemp("cells") / "cells.h5ad")
    ad.AnnData(X=X).write_h5ad(path)
    return path, X


def _run(args, code: int = 0):
    """The command line's result, whose exit code must be ``code``."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code, result.output
    return result


def test_commands_read_h5ad_directly(cells, tmp_path, tiny_batches):
    path, X = cells
    genes = str(tmp_path / "genes.npy")
    _run(["reduce", path, "--op", "sum", "--axis", "0", "-o", genes])
    np.testing.assert_allclose(np.load(genes), np.asarray(X.sum(axis=0)).ravel(), rtol=1e-5)
    some = str(tmp_path / "some.parquet")
    _run(["slice", path, "--start", "100,0", "--size", "50,-1", "-o", some])
    np.testing.assert_array_equal(sptool.read(some).to_dense(), X[100:150].toarray())
    assert "valid" in _run(["validate", path]).output
    result = _run(["info", "--json", path])
    doc = json.loads(result.output)
    assert doc["kind"] == "anndata" and doc["shape"] == [300, 80] and doc["nnz"] == X.nnz
    assert doc["matrices"] == [{"key": "X", "layout": "csr", "shape": [300, 80], "nnz": X.nnz,
                                "value_type": "float32", "encoding": "csr_matrix"}]


def test_spy_of_h5ad_is_spy_of_its_matrix(cells, tmp_path):
    pytest.importorskip("PIL")
    path, X = cells
    parquet = str(tmp_path / "x.parquet")
    sptool.write(sptool.SparseTensor(np.argwhere(X.toarray()), X.toarray()[X.toarray() != 0], X.shape), parquet)
    a, b = str(tmp_path / "a.png"), str(tmp_path / "b.png")
    _run(["spy", path, "-o", a])
    _run(["spy", parquet, "-o", b])
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()


def test_a_long_row_is_read_in_slices(tmp_path, rng, tiny_batches):
    """A row of more entries than four batches is read in slices when its indices are sorted, and
    refused (raise --memory) when sorting it would hold it whole."""
    m = sp.random(3, 200, density=0.5, format="csr", random_state=rng, dtype=np.float32)
    assert m.getnnz(axis=1).max() > 4 * tiny_batches
    path = str(tmp_path / "long.h5ad")
    ad.AnnData(X=m).write_h5ad(path)
    dense, _ = _sptool_dense(path)
    np.testing.assert_array_equal(dense, m.toarray())
    shuffled = str(tmp_path / "shuffled.h5ad")
    with h5py.File(shuffled, "w") as f:
        f.attrs.update({"encoding-type": "anndata", "encoding-version": "0.1.0"})
        m.indices[m.indptr[1]:m.indptr[2]] = m.indices[m.indptr[1]:m.indptr[2]][::-1]
        _write_sparse_group(f, "X", m)
    out = str(tmp_path / "x.parquet")
    result = _run(["convert", shuffled, "-o", out], code=2)
    assert "row 1 holds" in result.output and "raise --memory" in result.output and not os.path.exists(out)


# ---------------------------------------------------------------------------------------------
# files of before anndata 0.7 (no encoding-type), as its legacy reader reads them


def _legacy_file(path, rng):
    """A file laid out as anndata before 0.7 wrote it: h5sparse groups, data frames as compound
    datasets, raw as raw.X, obsm as one compound dataset, the neighbour graphs under uns."""
    X = _matrix(rng, (6, 4), 0.5, "csr", "float32")
    distances = _matrix(rng, (6, 6), 0.3, "csr", "float64")
    raw = _matrix(rng, (6, 5), 0.5, "csc", "float64")
    with h5py.File(path, "w") as f:
        _write_sparse_group(f, "X", X, legacy=True)
        f["obs"] = np.array([(f"c{i}".encode(),) for i in range(6)], dtype=[("index", "S4")])
        f["var"] = np.array([(f"g{i}".encode(),) for i in range(4)], dtype=[("index", "S4")])
        _write_sparse_group(f, "uns/neighbors/distances", distances, legacy=True)
        f["uns/neighbors/params/n_neighbors"] = 3
        _write_sparse_group(f, "raw.X", raw, legacy=True)
        f["raw.var"] = np.array([(f"r{i}".encode(),) for i in range(5)], dtype=[("index", "S4")])
        f["obsm"] = np.array([(row,) for row in rng.standard_normal((6, 2))], dtype=[("X_pca", "f8", (2,))])
        f["layers/counts"] = rng.integers(0, 5, size=(6, 4))


def test_reads_files_of_before_anndata_0_7(tmp_path, rng, tiny_batches):
    path = str(tmp_path / "old.h5ad")
    _legacy_file(path, rng)
    a = _read_back(path)
    expected = {"X": a.X, "obsp/distances": a.obsp["distances"], "raw/X": a.raw.X, "obsm/X_pca": a.obsm["X_pca"],
                "layers/counts": a.layers["counts"]}
    for key, matrix in expected.items():
        dense, t = _sptool_dense(path, key=key)
        np.testing.assert_array_equal(dense, _dense(matrix), err_msg=key)
        assert t.meta.value_type == str(matrix.dtype), key
    listed = {m["key"]: m for m in sptool.info(path)["matrices"]}
    assert set(listed) == set(expected)
    assert listed["obsp/distances"]["stored_at"] == "uns/neighbors/distances"
    assert listed["raw/X"]["layout"] == "csc" and listed["raw/X"]["stored_at"] == "raw.X"
    np.testing.assert_array_equal(sptool.read(path).to_dense(), _dense(a.X))  # every command reads its X


# ---------------------------------------------------------------------------------------------
# bad files: an error naming the file, the key and the first bad place; nothing written


def _damaged(path, damage):
    with h5py.File(path, "r+") as f:
        damage(f)


def _decrease(f):
    f["X/indptr"][5] = f["X/indptr"][4] - 1


def _end_short(f):
    f["X/indptr"][-1] = f["X/indptr"][-1] - 1


def _past_shape(f):
    f["X/indices"][37] = 80


def _negative(f):
    f["X/indices"][3] = -1


def _no_shape(f):
    del f["X"].attrs["shape"]


def _no_indptr(f):
    del f["X/indptr"]


def _cut_indices(f):
    f["X/indices"].resize((f["X/indices"].shape[0] - 10,))


def _wrong_encoding(f):
    f["X"].attrs["encoding-type"] = "coo_matrix"


BAD = {
    "indptr decreasing": (_decrease, "E_READ_FAILED", ["indptr[5] = ", "below indptr[4]"]),
    "indptr not ending at nnz": (_end_short, "E_NNZ_MISMATCH", ["indptr[300] = 2399", "data holds 2400"]),
    "index past the shape": (_past_shape, "E_INDEX_OUT_OF_BOUNDS", ["indices[37] = 80", "[0, 80)"]),
    "negative index": (_negative, "E_INDEX_OUT_OF_BOUNDS", ["indices[3] = -1"]),
    "missing shape attribute": (_no_shape, "E_READ_FAILED", ["no 'shape' attribute"]),
    "missing dataset": (_no_indptr, "E_READ_FAILED", ["no dataset 'indptr'"]),
    "truncated dataset": (_cut_indices, "E_READ_FAILED", ["indices holds 2390 entries but data holds 2400"]),
    "not a matrix": (_wrong_encoding, "E_READ_FAILED", ["'coo_matrix' is not a matrix"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_files_are_refused(cells, tmp_path, case, tiny_batches):
    source, _ = cells
    path = str(tmp_path / "bad.h5ad")
    with open(source, "rb") as f, open(path, "wb") as g:
        g.write(f.read())
    damage, code, phrases = BAD[case]
    _damaged(path, damage)
    out = str(tmp_path / "x.parquet")
    result = _run(["convert", path, "-o", out], code=1)
    line = result.output.strip()
    assert line.startswith(f"Error: {path}: X: ") and "Traceback" not in line, line
    assert all(p in line for p in phrases), line
    assert not os.path.exists(out) and os.listdir(tmp_path) == ["bad.h5ad"]
    genes = str(tmp_path / "genes.npy")
    _run(["reduce", path, "--op", "sum", "--axis", "0", "-o", genes], code=1)
    assert not os.path.exists(genes)
    report = sptool.validate(path)
    assert not report.valid and report.codes == [code] and phrases[0] in report.problems[0].message


def test_a_cut_off_file_is_refused(cells, tmp_path):
    source, _ = cells
    path = str(tmp_path / "cut.h5ad")
    with open(source, "rb") as f, open(path, "wb") as g:
        g.write(f.read()[: os.path.getsize(source) // 2])
    out = str(tmp_path / "x.parquet")
    result = CliRunner().invoke(cli, ["convert", path, "-o", out])
    assert result.exit_code in (1, 2) and path in result.output and "Traceback" not in result.output
    assert not os.path.exists(out)
