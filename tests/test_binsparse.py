"""binsparse files against independent oracles: the binsparse reference package (its own
writers and its parser), scipy.sparse and NumPy; the raw descriptor keys the package ignores
(structure, index_base) written with h5py."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor
from pty_terminal import cursor_restored, run_in_terminal

import sptool
from sptool.cli import cli
from sptool.errors import DataError, ResourceError, UsageError
from sptool.ops.convert import convert

bsp = pytest.importorskip("binsparse")
h5py = pytest.importorskip("h5py")
from binsparse.conversions.numpy import from_numpy  # noqa: E402
from binsparse.conversions.scipy import from_scipy, to_scipy  # noqa: E402


def _dense(path):
    t = sptool.read(path)
    assert sptool.validate(path).valid
    return t, t.to_dense()


def _package_dense(path):
    """The dense form of a binsparse file as the package parses it (its level tree, NumPy only)."""
    tensor = bsp.load_binsparse(path, alias=False)
    level, coords = tensor.level, []
    while isinstance(level, bsp.SparseLevel):  # the root sparse levels this module writes
        assert level.pointers_to_next is None or len(coords) == 0
        coords.extend(np.asarray(ix) for ix in level.indices)
        level = level.level
    values = np.asarray(level.values)
    fill = tensor.fill_value if tensor.fill else 0
    out = np.full(tensor.shape, fill, dtype=values.dtype)
    out[tuple(coords)] = values
    return tensor, out


def _scipy_matrix(rng, fmt):
    return sp.random_array((30, 20), density=0.2, random_state=rng, format=fmt)


# ---------------------------------------------------------------------------------------------
# files the package writes, read back


@pytest.mark.parametrize("ext", [".h5", ".hdf5", ".npz"])
@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
@pytest.mark.parametrize("alias", [None, False])
def test_reads_the_package_scipy_files(tmp_path, rng, ext, fmt, alias, tiny_batches):
    m = _scipy_matrix(rng, fmt)
    path = str(tmp_path / f"m{ext}")
    bsp.save_binsparse(from_scipy(m), path, alias=alias)
    out = str(tmp_path / "m.parquet")
    convert(path, out, from_format="binsparse" if ext == ".npz" else None)
    t, dense = _dense(out)
    np.testing.assert_array_equal(dense, m.toarray())
    assert t.nnz == m.nnz and t.meta.value_type == "float64" and t.shape == (30, 20)
    # The order the stored levels promise, verified by the sink: csc is column-major.
    assert t.meta.sort_order == ((1, 0) if fmt == "csc" else (0, 1))


def test_reads_dcsr_and_dcsc(tmp_path, rng, tiny_batches):
    m = _scipy_matrix(rng, "lil")
    m[3] = 0  # an empty row (and so, most likely, some empty columns)
    m = m.tocsr()
    for cls, major in ((bsp.DCSRMatrix, m.tocsr()), (bsp.DCSCMatrix, m.tocsc())):
        nonempty = np.flatnonzero(np.diff(major.indptr))
        ptr = np.concatenate([[0], major.indptr[1:][nonempty]])
        tensor = cls((30, 20), major.nnz, indices_0=nonempty, pointers_to_1=ptr, indices_1=major.indices,
                     values=major.data)
        path = str(tmp_path / f"{cls.format}.h5")
        bsp.save_binsparse(tensor, path)
        convert(path, str(tmp_path / f"{cls.format}.parquet"))
        np.testing.assert_array_equal(_dense(str(tmp_path / f"{cls.format}.parquet"))[1], m.toarray())


@pytest.mark.parametrize("shape", [(7,), (5, 4), (3, 4, 2)])
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint64", "bool", "complex128"])
def test_reads_the_package_dense_files(tmp_path, rng, shape, dtype):
    a = (rng.standard_normal(shape) * 10).astype(dtype) if dtype != "complex128" else \
        rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    path = str(tmp_path / "d.h5")
    bsp.save_binsparse(from_numpy(a), path)
    out = str(tmp_path / "d.parquet")
    convert(path, out)
    t, dense = _dense(out)
    np.testing.assert_array_equal(dense, a)  # DVEC / DMATR / dense custom: every element stored
    assert t.nnz == a.size and t.values.dtype == a.dtype


@pytest.mark.parametrize("ext", [".h5", ".npz"])
def test_reads_iso_complex_and_bool_values_in_slices(tmp_path, rng, ext, tiny_batches):
    m = _scipy_matrix(rng, "csr")
    for name, values in (("iso", np.broadcast_to(np.float32(3.5), (m.nnz,))),  # the package stores one value
                         ("complex", m.data + 1j * rng.standard_normal(m.nnz)),
                         ("bool", m.data > 0.5)):
        path = str(tmp_path / f"{name}{ext}")
        bsp.save_binsparse(bsp.CSRMatrix(m.shape, m.nnz, pointers_to_1=m.indptr, indices_1=m.indices,
                                         values=values), path)
        out = str(tmp_path / f"{name}.parquet")
        convert(path, out, from_format="binsparse")
        want = sp.csr_array((np.asarray(values), m.indices, m.indptr), shape=m.shape).toarray()
        t, dense = _dense(out)
        np.testing.assert_array_equal(dense, want)
        assert t.values.dtype == np.asarray(values).dtype and t.nnz == m.nnz


def test_out_of_bounds_index_is_an_error(tmp_path):
    path = str(tmp_path / "oob.h5")
    bsp.save_binsparse(bsp.COORMatrix((3, 3), 2, indices_0=np.array([0, 1]), indices_1=np.array([1, 5]),
                                      values=np.ones(2)), path)
    for out in ("x.parquet", "x.tns"):  # a text writer would print any index it got
        with pytest.raises(DataError, match=r"oob\.h5: indices\[1\] = \[1,5\] is out of bounds"):
            convert(path, str(tmp_path / out))
    assert sorted(os.listdir(tmp_path)) == ["oob.h5"]


def test_reads_dmatc(tmp_path, rng):
    a = rng.standard_normal((4, 3))
    path = str(tmp_path / "c.h5")
    bsp.save_binsparse(bsp.DMATCMatrix((4, 3), 12, values=a.reshape(-1, order="F")), path)
    convert(path, str(tmp_path / "c.parquet"))
    np.testing.assert_array_equal(_dense(str(tmp_path / "c.parquet"))[1], bsp.conversions.to_numpy(
        bsp.load_binsparse(path)))


# ---------------------------------------------------------------------------------------------
# writing, and round trips


@pytest.mark.parametrize("shape", [(40,), (9, 7), (6, 5, 4)])
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool", "complex128", "float32"])
def test_export_reads_back_in_the_package(tmp_path, rng, shape, dtype, tiny_batches):
    t = random_tensor(rng, shape, 30, dtype=dtype, duplicates=True)  # unsorted, with repeats
    sptool.write(t, str(tmp_path / "t.parquet"))
    path = str(tmp_path / "t.bsp.h5")
    result = convert(str(tmp_path / "t.parquet"), path)
    assert result["to"] == "binsparse"
    assert any("canonical" in n for n in result["notes"])
    tensor, dense = _package_dense(path)
    want = dense_oracle(t)
    # Repeats are summed in another order than the oracle's loop: floats agree to rounding.
    eps = 8 * np.finfo(want.dtype).eps if want.dtype.kind in "fc" else 0
    same = np.testing.assert_array_equal if want.dtype.kind in "biu" else \
        lambda a, b: np.testing.assert_allclose(a, b, rtol=eps, atol=eps)
    same(dense, want)
    assert tensor.shape == shape and dense.dtype == want.dtype
    with h5py.File(path) as f:
        assert json.loads(f.attrs["binsparse"])["binsparse"]["format"] == {1: "CVEC", 2: "COOR"}.get(len(shape),
                                                                                                    "custom")
    if len(shape) == 2:
        same(to_scipy(bsp.load_binsparse(path)).toarray(), want)
    keys = np.unique(t.indices, axis=0)  # sorted unique coordinates: the canonical pattern
    assert tensor.number_of_stored_values == len(keys)


@pytest.mark.parametrize("ext", [".h5", ".npz"])
@pytest.mark.parametrize("shape, fill", [((12, 9), 0.0), ((12, 9), 2.5), ((4, 5, 6), -1.0)])
def test_canonical_round_trip_is_lossless(tmp_path, rng, ext, shape, fill):
    t = random_tensor(rng, shape, 25, dtype="float32", sort=True, fill_value=fill)
    sptool.write(t, str(tmp_path / "t.parquet"))
    path = str(tmp_path / f"t{ext}")
    result = convert(str(tmp_path / "t.parquet"), path, to_format="binsparse")
    assert not any("canonical" in n for n in result["notes"])
    tensor = bsp.load_binsparse(path)
    assert tensor.fill and tensor.fill_value == np.float32(fill)
    convert(path, str(tmp_path / "back.parquet"), from_format="binsparse")
    back = sptool.read(str(tmp_path / "back.parquet"))
    np.testing.assert_array_equal(back.indices, t.indices)
    np.testing.assert_array_equal(back.values, t.values)
    assert back.values.dtype == np.float32 and back.shape == shape and back.fill_value == fill


def test_npz_is_scipy_unless_named_binsparse(tmp_path, rng):
    t = random_tensor(rng, (9, 7), 20, sort=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "scipy.npz"))
    np.testing.assert_array_equal(sp.load_npz(str(tmp_path / "scipy.npz")).toarray(), dense_oracle(t))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "bsp.npz"), to_format="binsparse")
    np.testing.assert_array_equal(to_scipy(bsp.load_binsparse(str(tmp_path / "bsp.npz"))).toarray(),
                                  dense_oracle(t))


def test_zarr_container(tmp_path, rng):
    pytest.importorskip("zarr")
    t = random_tensor(rng, (6, 5, 4), 30, sort=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "t.zarr"))
    np.testing.assert_array_equal(_package_dense(str(tmp_path / "t.zarr"))[1], dense_oracle(t))
    convert(str(tmp_path / "t.zarr"), str(tmp_path / "back.parquet"))
    np.testing.assert_array_equal(_dense(str(tmp_path / "back.parquet"))[1], dense_oracle(t))


# ---------------------------------------------------------------------------------------------
# the keys the package ignores, and refusals


def _rewrite_descriptor(path, **keys):
    with h5py.File(path, "r+") as f:
        desc = json.loads(f.attrs["binsparse"])
        desc["binsparse"].update(keys)
        f.attrs["binsparse"] = json.dumps(desc)


def test_structure_is_refused(tmp_path, rng):
    m = sp.tril(_scipy_matrix(rng, "coo")[:20, :20]).tocoo()
    path = str(tmp_path / "sym.h5")
    bsp.save_binsparse(from_scipy(m), path)
    _rewrite_descriptor(path, structure="symmetric_lower")
    result = CliRunner().invoke(cli, ["convert", path, "-o", str(tmp_path / "x.parquet")])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].endswith(
        "sym.h5: structure 'symmetric_lower' (one triangle stored) is not supported; only general matrices are read")
    assert "Traceback" not in result.output and not os.path.exists(tmp_path / "x.parquet")


def test_index_base_one_is_honoured(tmp_path, rng, tiny_batches):
    m = _scipy_matrix(rng, "csr").tocoo()  # canonical: row-major
    path = str(tmp_path / "one.h5")
    bsp.save_binsparse(bsp.COORMatrix(m.shape, m.nnz, indices_0=m.row + 1, indices_1=m.col + 1, values=m.data),
                       path)
    _rewrite_descriptor(path, index_base=1)
    result = convert(path, str(tmp_path / "one.parquet"))
    np.testing.assert_array_equal(_dense(str(tmp_path / "one.parquet"))[1], m.toarray())
    assert any("one-based" in n for n in result["notes"])
    csr = m.tocsr()  # pointers are offsets, not indices: only indices_1 moves
    bsp.save_binsparse(bsp.CSRMatrix(m.shape, m.nnz, pointers_to_1=csr.indptr, indices_1=csr.indices + 1,
                                     values=csr.data), path)
    _rewrite_descriptor(path, index_base=1)
    convert(path, str(tmp_path / "csr.parquet"))
    np.testing.assert_array_equal(_dense(str(tmp_path / "csr.parquet"))[1], m.toarray())
    nonempty = np.flatnonzero(np.diff(csr.indptr))  # DCSR: the stored row numbers move too
    dcsr = bsp.DCSRMatrix(m.shape, m.nnz, indices_0=nonempty + 1,
                          pointers_to_1=np.concatenate([[0], csr.indptr[1:][nonempty]]),
                          indices_1=csr.indices + 1, values=csr.data)
    for alias in (None, False):  # DCSR read in slices; as custom levels, parsed whole by the package
        bsp.save_binsparse(dcsr, path, alias=alias)
        _rewrite_descriptor(path, index_base=1)
        convert(path, str(tmp_path / "dcsr.parquet"))
        np.testing.assert_array_equal(_dense(str(tmp_path / "dcsr.parquet"))[1], m.toarray())
    _rewrite_descriptor(path, index_base=2)
    with pytest.raises(DataError, match="index_base 2 is not 0 or 1"):
        convert(path, str(tmp_path / "x.parquet"))


def test_spec_version_without_patch_reads(tmp_path, rng):
    m = _scipy_matrix(rng, "csr")
    path = str(tmp_path / "v.h5")
    bsp.save_binsparse(from_scipy(m), path)
    _rewrite_descriptor(path, version="0.1")  # the spec's own spelling, which the package refuses
    with pytest.raises(ValueError):
        bsp.load_binsparse(path)
    convert(path, str(tmp_path / "v.parquet"))
    np.testing.assert_array_equal(_dense(str(tmp_path / "v.parquet"))[1], m.toarray())


@pytest.mark.parametrize("rows", [[2, 0], [1, 1]], ids=["unsorted", "repeated"])
def test_unsorted_coor_is_an_error(tmp_path, rows, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "1")  # the two entries fall in two slices
    path = str(tmp_path / "bad.h5")
    bsp.save_binsparse(bsp.COORMatrix((3, 3), 2, indices_0=np.array(rows), indices_1=np.array([0, 0]),
                                      values=np.ones(2)), path)
    result = CliRunner().invoke(cli, ["convert", path, "-o", str(tmp_path / "x.parquet")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"bad.h5: indices[1] = [{rows[1]},0] is {'repeated' if rows[0] == rows[1] else 'out of order'}" in \
        result.output
    assert sorted(os.listdir(tmp_path)) == ["bad.h5"]


@pytest.mark.parametrize("alias", [None, False], ids=["sliced", "whole"])
def test_bad_pointers_are_an_error(tmp_path, alias):
    path = str(tmp_path / "ptr.h5")
    bsp.save_binsparse(bsp.CSRMatrix((2, 3), 3, pointers_to_1=np.array([0, 2, 1]), indices_1=np.array([0, 1, 2]),
                                     values=np.ones(3)), path, alias=alias)
    with pytest.raises(DataError, match=r"ptr\.h5: pointers_to_1\[2\] = 1 is below pointers_to_1\[1\] = 2"):
        convert(path, str(tmp_path / "x.parquet"))
    assert sorted(os.listdir(tmp_path)) == ["ptr.h5"]


def test_not_binsparse(tmp_path):
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f["x"] = np.ones(3)
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "plain.h5"), "-o", str(tmp_path / "x.parquet")])
    assert result.exit_code == 1 and "no 'binsparse' descriptor" in result.output


def test_memory_is_checked_where_it_is_held(tmp_path, rng, monkeypatch):
    n = 600_000
    t = random_tensor(rng, (n, 2), n, sort=True)
    sptool.write(t, str(tmp_path / "big.parquet"))
    with pytest.raises(ResourceError, match="written from memory"):
        convert(str(tmp_path / "big.parquet"), str(tmp_path / "x.npz"), to_format="binsparse", memory="16MiB")
    # HDF5 is appended to batch by batch: the same tensor writes within 16 MiB.
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "50000")
    convert(str(tmp_path / "big.parquet"), str(tmp_path / "ok.h5"), memory="16MiB")
    back = to_scipy(bsp.load_binsparse(str(tmp_path / "ok.h5")))
    np.testing.assert_array_equal(back.row, t.indices[:, 0])
    np.testing.assert_array_equal(back.col, t.indices[:, 1])
    np.testing.assert_array_equal(back.data, t.values)
    big = bsp.COORMatrix((n, 1), n, indices_0=np.arange(n), indices_1=np.zeros(n, dtype=np.int64), values=np.ones(n))
    bsp.save_binsparse(big, str(tmp_path / "big.npz"))
    with pytest.raises(ResourceError, match="loaded whole"):
        convert(str(tmp_path / "big.npz"), str(tmp_path / "x.parquet"), from_format="binsparse", memory="16MiB")
    # An HDF5 COO is read in slices: within 16 MiB.
    bsp.save_binsparse(big, str(tmp_path / "big.h5"))
    convert(str(tmp_path / "big.h5"), str(tmp_path / "ok.parquet"), memory="16MiB")
    back = sptool.read(str(tmp_path / "ok.parquet"))
    np.testing.assert_array_equal(back.indices[:, 0], np.arange(n))
    assert back.nnz == n and not back.indices[:, 1].any() and (back.values == 1).all()
    assert not any(n.startswith(("x.", ".x")) for n in os.listdir(tmp_path))


def test_without_the_package_says_how_to_install(tmp_path, rng, monkeypatch):
    sptool.write(random_tensor(rng, (4, 4), 5), str(tmp_path / "t.parquet"))
    monkeypatch.setitem(sys.modules, "binsparse", None)  # import binsparse now raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'sptool\[binsparse\]'"):
        convert(str(tmp_path / "t.parquet"), str(tmp_path / "t.h5"))
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "t.h5")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / "t.h5")


def test_canonicalising_note_in_a_terminal(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "..", "sample_data", "unsorted.parquet")
    code, output = run_in_terminal(["sptool", "convert", src, "-o", str(tmp_path / "u.h5")], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0, text
    assert "canonical" in text and "binsparse" in text and cursor_restored(output)
    t = sptool.read(src)
    np.testing.assert_array_equal(_package_dense(str(tmp_path / "u.h5"))[1], dense_oracle(t))
