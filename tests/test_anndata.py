"""AnnData files against anndata itself (the oracle, a test extra): files anndata writes, read by
sptool, equal the matrices anndata returns; files sptool writes are read back by anndata equal to
the input; files of before anndata 0.7 (written here with h5py, as anndata's legacy reader expects
them) read as anndata reads them; bad files are refused, naming the file, the key and the place."""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs, write_tensor

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


# ---------------------------------------------------------------------------------------------
# files sptool writes, read by anndata


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("order", ["canonical", "unsorted, repeats"])
def test_anndata_reads_back_what_sptool_writes(tmp_path, rng, dtype, order, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 16, 8)  # the row-major sort spills runs, even on this small input
    t = random_tensor(rng, (40, 30), 150, dtype=dtype, duplicates=order != "canonical", sort=order == "canonical")
    src = write_tensor(tmp_path, "t.parquet", t)
    path = str(tmp_path / "cells.h5ad")
    result = convert(src, path)
    a = _read_back(path)
    assert isinstance(a.X, sp.csr_matrix) and a.X.dtype == np.dtype(dtype) and a.shape == (40, 30)
    if order == "canonical" or np.dtype(dtype).kind != "f":
        np.testing.assert_array_equal(a.X.toarray(), dense_oracle(t))
    else:  # repeats summed in another order than the oracle's
        np.testing.assert_allclose(a.X.toarray(), dense_oracle(t), rtol=1e-6)
    assert a.X.has_canonical_format  # sorted, one entry per coordinate, as the input summed
    assert list(a.obs_names) == [str(i) for i in range(40)] and list(a.var_names) == [str(i) for i in range(30)]
    assert (any("sorted row-major" in n for n in result["notes"])) == (order != "canonical")
    with h5py.File(path) as f:  # the empty groups anndata writes, and the spec's attributes
        assert dict(f.attrs) == {"encoding-type": "anndata", "encoding-version": "0.1.0"}
        for name in ("layers", "obsm", "obsp", "varm", "varp", "uns"):
            assert f[name].attrs["encoding-type"] == "dict" and len(f[name]) == 0
    # And sptool reads its own file back as anndata does.
    np.testing.assert_array_equal(sptool.read(path).to_dense(), a.X.toarray())


@pytest.mark.parametrize("shape, rows", [((10, 6), [2, 3]), ((0, 6), []), ((7, 0), []), ((12, 4), [11])])
def test_empty_rows_keep_their_place(tmp_path, rng, shape, rows, tiny_batches):
    idx = np.array([[r, c] for r in rows for c in range(0, shape[1], 2)], dtype=np.int64).reshape(-1, 2)
    t = sptool.SparseTensor(idx, rng.standard_normal(len(idx)).astype(np.float32), shape)
    src = write_tensor(tmp_path, "t.parquet", t)
    path = str(tmp_path / "cells.h5ad")
    convert(src, path)
    a = _read_back(path)
    assert a.shape == shape and a.n_obs == shape[0] and a.n_vars == shape[1]
    np.testing.assert_array_equal(a.X.toarray(), t.to_dense())


def test_round_trip_through_parquet(tmp_path, rng, tiny_batches):
    a = ad.AnnData(X=_unsorted_csr(rng, (25, 40), 6))
    path, back, again = (str(tmp_path / n) for n in ("a.h5ad", "a.parquet", "b.h5ad"))
    a.write_h5ad(path)
    convert(path, back)
    convert(back, again)
    np.testing.assert_array_equal(_read_back(again).X.toarray(), a.X.toarray())
    # An .h5ad's other matrix straight into a new file: its X.
    a.layers["counts"] = a.X.tocsc().astype(np.int64)
    a.write_h5ad(path)
    convert(path, again, key="layers/counts")
    b = _read_back(again)
    assert b.X.dtype == np.int64
    np.testing.assert_array_equal(b.X.toarray(), a.layers["counts"].toarray())


@pytest.mark.parametrize("case", ["3-D", "hybrid", "strings", "fill value"])
def test_only_a_2d_tensor_of_numbers_is_written(tmp_path, rng, case):
    tensors = {
        "3-D": random_tensor(rng, (4, 5, 6), 10),
        "hybrid": random_tensor(rng, (4, 5, 3), 6, sparse_ndim=2),
        "strings": sptool.SparseTensor(np.array([[0, 1]]), np.array(["a"], dtype=object), (2, 2)),
        "fill value": random_tensor(rng, (4, 5), 6, fill_value=1.0),
    }
    src = write_tensor(tmp_path, "t.parquet", tensors[case])
    out = str(tmp_path / "cells.h5ad")
    result = _run(["convert", src, "-o", out], code=2)
    assert len(result.output.strip().splitlines()) == 1 and not os.path.exists(out)
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


# ---------------------------------------------------------------------------------------------
# AnnData .zarr stores (zarr formats 2 and 3)


@pytest.fixture
def zarr_format():
    """Zarr format for anndata's writes, restored afterwards."""
    pytest.importorskip("zarr")
    before = ad.settings.zarr_write_format
    yield lambda fmt: setattr(ad.settings, "zarr_write_format", fmt)
    ad.settings.zarr_write_format = before


@pytest.mark.parametrize("fmt", [2, 3])
def test_reads_zarr_stores_as_anndata_returns_them(tmp_path, rng, fmt, zarr_format, tiny_batches):
    zarr_format(fmt)
    a = ad.AnnData(X=_matrix(rng, (30, 20), 0.2, "csr", "float32"))
    a.layers["counts"] = _matrix(rng, (30, 20), 0.2, "csc", "int64")
    a.obsm["X_pca"] = rng.standard_normal((30, 3))
    path = str(tmp_path / "cells.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a.write_zarr(path)
    assert os.path.exists(os.path.join(path, "zarr.json" if fmt == 3 else ".zattrs"))
    back = _read_back(path)
    for key, matrix in {"X": back.X, "layers/counts": back.layers["counts"], "obsm/X_pca": back.obsm["X_pca"]}.items():
        dense, t = _sptool_dense(path, key=key)
        np.testing.assert_array_equal(dense, _dense(matrix), err_msg=key)
        assert t.meta.value_type == str(matrix.dtype), key
    genes = str(tmp_path / "genes.npy")
    _run(["reduce", path, "--op", "sum", "--axis", "0", "-o", genes])  # every command reads its X
    np.testing.assert_allclose(np.load(genes), np.asarray(back.X.sum(axis=0)).ravel(), rtol=1e-5)
    assert [m["key"] for m in sptool.info(path)["matrices"]] == ["X", "layers/counts", "obsm/X_pca"]
    assert sptool.validate(path).valid


def test_zarr_written_with_to_anndata(tmp_path, rng, tiny_batches):
    pytest.importorskip("zarr")
    t = random_tensor(rng, (30, 20), 80, dtype="float32")
    src = write_tensor(tmp_path, "t.parquet", t)
    path = str(tmp_path / "cells.zarr")
    convert(src, path, to_format="anndata")
    a = _read_back(path)
    assert isinstance(a.X, sp.csr_matrix) and a.X.dtype == np.float32
    np.testing.assert_array_equal(a.X.toarray(), dense_oracle(t))
    assert list(a.obs_names) == [str(i) for i in range(30)]
    # A bare .zarr output stays binsparse, as before.
    bare = str(tmp_path / "bare.zarr")
    pytest.importorskip("binsparse")
    convert(src, bare)
    with open(os.path.join(bare, "zarr.json")) as f:
        assert "binsparse" in json.load(f)["attributes"]


def test_a_bad_zarr_store_is_refused(tmp_path, rng, zarr_format):
    zarr = pytest.importorskip("zarr")
    zarr_format(2)
    path = str(tmp_path / "cells.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ad.AnnData(X=_matrix(rng, (30, 20), 0.2, "csr", "float32")).write_zarr(path)
    indptr = zarr.open_array(os.path.join(path, "X", "indptr"), mode="r+")
    indptr[7] = indptr[6] - 1
    out = str(tmp_path / "x.parquet")
    result = _run(["convert", path, "-o", out], code=1)
    assert f"{path}: X: indptr[7] = " in result.output and not os.path.exists(out)


def test_min_dtype_indices(tmp_path, rng):
    """anndata may write indices in the smallest unsigned type that holds them (a setting)."""
    X = _matrix(rng, (30, 300), 0.1, "csr", "float32")
    path = str(tmp_path / "cells.h5ad")
    with ad.settings.override(write_csr_csc_indices_with_min_possible_dtype=True):
        ad.AnnData(X=X).write_h5ad(path)
    with h5py.File(path) as f:
        assert f["X/indices"].dtype == np.uint16
    np.testing.assert_array_equal(sptool.read(path).to_dense(), X.toarray())


# ---------------------------------------------------------------------------------------------
# --memory: a file several times the budget, streamed


def _big_h5ad(path: str, n_obs: int, n_vars: int, per_row: int) -> np.ndarray:
    """A CSR .h5ad of n_obs rows of ``per_row`` (or fewer) entries each, written in blocks of rows
    with h5py as anndata lays it out; returns its per-column sums (float64)."""
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 2 * per_row, size=n_obs)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    sums = np.zeros(n_vars)
    with h5py.File(path, "w") as f:
        f.attrs.update({"encoding-type": "anndata", "encoding-version": "0.1.0"})
        g = f.create_group("X")
        g.attrs.update({"encoding-type": "csr_matrix", "encoding-version": "0.1.0", "shape": [n_obs, n_vars]})
        g["indptr"] = indptr
        indices = g.create_dataset("indices", shape=(indptr[-1],), dtype=np.int32)
        data = g.create_dataset("data", shape=(indptr[-1],), dtype=np.float32)
        for r0 in range(0, n_obs, 20_000):
            k = counts[r0:r0 + 20_000]
            a, b = indptr[r0], indptr[r0 + len(k)]
            # Entry j of a row of k: a column among the floor(c) from ceil(j * c), c = n_vars / k, so
            # each row is sorted and unique.
            j = np.arange(b - a) - np.repeat(indptr[r0:r0 + len(k)] - a, k)
            c = n_vars / np.repeat(k, k)
            cols = (np.ceil(j * c) + np.floor(rng.random(b - a) * np.floor(c))).astype(np.int32)
            vals = rng.random(b - a, dtype=np.float32)
            indices[a:b], data[a:b] = cols, vals
            sums += np.bincount(cols, weights=vals, minlength=n_vars)
    return sums


def test_a_file_several_times_the_budget(tmp_path):
    from test_memory import OVERHEAD, peak_rss

    path = str(tmp_path / "big.h5ad")
    sums = _big_h5ad(path, 500_000, 20_000, 48)  # about 24M entries: 190 MB of data and indices
    budget = 64 << 20
    assert os.path.getsize(path) > 2.5 * budget
    for command in (["reduce", path, "--op", "sum", "--axis", "0", "-o", "genes.npy"],
                    ["convert", path, "-o", "cells.parquet"]):
        rss = peak_rss(["--memory", str(budget), *command], tmp_path)
        assert rss <= budget + OVERHEAD, f"{command[0]}: peak RSS {rss >> 20} MiB over --memory 64 MiB + 256 MiB"
    np.testing.assert_allclose(np.load(tmp_path / "genes.npy"), sums, rtol=1e-4)
    assert sptool.info(str(tmp_path / "cells.parquet"))["nnz"] == h5py.File(path)["X/data"].shape[0]


# ---------------------------------------------------------------------------------------------
# usage


def test_key_names_a_matrix_of_an_anndata_input(cells, tmp_path):
    path, _ = cells
    out = str(tmp_path / "x.parquet")
    result = _run(["convert", path, "--key", "layers/counts", "-o", out], code=1)
    assert "no matrix 'layers/counts'" in result.output and "its matrices: X" in result.output
    src = write_tensor(tmp_path, "t.parquet", random_tensor(np.random.default_rng(1), (4, 5), 6))
    result = _run(["convert", src, "--key", "X", "-o", str(tmp_path / "t.csv")], code=2)
    assert "--key picks a matrix of an AnnData input" in result.output
    assert not os.path.exists(out)


def test_without_h5py_the_message_names_the_extra(cells, tmp_path, monkeypatch):
    path, _ = cells
    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py now fails, as where it is not installed
    for args in (["convert", path, "-o", str(tmp_path / "x.parquet")], ["info", path]):
        result = _run(args, code=2)
        assert result.output.strip() == f"Error: {path}: AnnData files need h5py: pip install 'sptool[anndata]'"
    src = write_tensor(tmp_path, "t.parquet", random_tensor(np.random.default_rng(1), (4, 5), 6))
    out = str(tmp_path / "t.h5ad")
    result = _run(["convert", src, "-o", out], code=2)
    assert result.output.strip() == f"Error: {out}: AnnData files need h5py: pip install 'sptool[anndata]'"
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


def test_commands_on_a_cluster_read_h5ad(cells, tmp_path, cluster_client):
    """On a cluster the driver reads the .h5ad's X once into the job's scratch, which the workers
    read in pieces (as an Arrow stream file is)."""
    import sptool.distributed

    path, X = cells
    out = str(tmp_path) + "/genes/"
    sptool.distributed.reduce(path, out, op="sum", axis=[0], client=cluster_client)
    np.testing.assert_allclose(sptool.read(out).to_dense(), np.asarray(X.sum(axis=0)).ravel(), rtol=1e-5)
