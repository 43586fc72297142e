"""Formats as other software writes them, checked against that software: FROSTT .tns with trailing
comments (NumPy's loadtxt, which reads '#' as a comment anywhere on a line), Matrix Market as
SciPy's mmread/mmwrite read and write it (SciPy's own test texts among the inputs), scipy.sparse
.npz files of every format save_npz writes, and inputs told by their content (scikit-learn's own
svmlight test files, text on stdin)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.io as sio
import scipy.sparse as sp
from click.testing import CliRunner

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.convert import convert


def _read(path):
    """(indices (n, K), values, meta) of a valid sptool output."""
    report = sptool.validate(str(path))
    assert report.valid, report
    t = sptool.read(str(path))
    return t.indices, t.values, t.meta


def _dense(path):
    """The dense array of an sptool output (duplicates summed)."""
    return sptool.read(str(path)).to_dense()


@pytest.fixture(params=[None, 9], ids=["default-blocks", "9-byte-blocks"])
def blocks(request, monkeypatch):
    """Text read in tiny blocks too, so that comments and numbers are cut across blocks."""
    if request.param is not None:
        monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", str(request.param))
    return request.param


# ---------------------------------------------------------------------------------------------
# FROSTT .tns: comments after the values


TNS_WITH_COMMENTS = """# a FROSTT tensor
1 1 1 1.5 # the first entry
2 3 1 -2.0\t# a tab, then a comment
3 2 4 7e-3 #no space
# a whole line
4 4 4 1e300
"""


def test_tns_trailing_comments_read_as_loadtxt_reads_them(tmp_path, blocks):
    src = tmp_path / "c.tns"
    src.write_text(TNS_WITH_COMMENTS)
    want = np.loadtxt(src, comments="#", ndmin=2)
    out = tmp_path / "c.parquet"
    assert convert(str(src), str(out))["shape"] == [4, 4, 4]
    idx, vals, _ = _read(out)
    np.testing.assert_array_equal(idx, want[:, :3].astype(np.int64) - 1)
    np.testing.assert_array_equal(vals, want[:, 3])


def test_tns_trailing_comment_on_the_first_line_sets_the_rank(tmp_path):
    (tmp_path / "r.tns").write_text("1 2 0.5 # i j value\n3 1 2.5\n")
    out = tmp_path / "r.parquet"
    assert convert(str(tmp_path / "r.tns"), str(out))["shape"] == [3, 2]
    assert _read(out)[0].tolist() == [[0, 1], [2, 0]]


def test_tns_extended_header_with_comments_and_wide_extents(tmp_path, blocks):
    # Extents as large as FROSTT's amazon-reviews in its first two dimensions; their product with
    # the third stays below 2^63 (a wider product is refused by the format today).
    dims = (4_821_207, 1_774_269, 1_000)
    src = tmp_path / "w.tns"
    src.write_text("# MLIR / TACO extended header\n3 3 # rank nnz\n"
                   f"{dims[0]} {dims[1]} {dims[2]}   # extents\n"
                   f"{dims[0]} 1 1 1.0 # the largest first index\n"
                   f"1 {dims[1]} 2 2.0\n"
                   f"2 2 {dims[2]} 3.0 # and the last\n")
    out = tmp_path / "w.parquet"
    assert convert(str(src), str(out))["shape"] == list(dims)
    idx, vals, meta = _read(out)
    assert meta.shape == dims
    assert idx.tolist() == [[dims[0] - 1, 0, 0], [0, dims[1] - 1, 1], [1, 1, dims[2] - 1]]
    assert vals.tolist() == [1.0, 2.0, 3.0]


def test_tns_bad_value_before_a_comment_is_named(tmp_path):
    (tmp_path / "b.tns").write_text("1 1 1.0 # fine\n2 2 x # not fine\n")
    with pytest.raises(DataError, match=r"line 2: field 3: value 'x' is not a number"):
        convert(str(tmp_path / "b.tns"), str(tmp_path / "b.parquet"))
    assert not (tmp_path / "b.parquet").exists()


# ---------------------------------------------------------------------------------------------
# Matrix Market, as SciPy reads and writes it


def _mmread_or_error(path):
    """SciPy's reading of a file: its matrix as a dense array, or the error it raises."""
    try:
        m = sio.mmread(str(path), spmatrix=False)
    except (ValueError, OverflowError) as e:
        return e
    return m if isinstance(m, np.ndarray) else m.toarray()


def _agrees_with_scipy(src, tmp_path):
    """sptool reads ``src`` as SciPy does: the same matrix, or an error (exit 1) where SciPy fails."""
    want = _mmread_or_error(src)
    out = tmp_path / "out.parquet"
    if isinstance(want, Exception):
        with pytest.raises(DataError):
            convert(str(src), str(out))
        assert not out.exists()
        return want
    convert(str(src), str(out))
    got = _dense(out)
    assert got.shape == want.shape
    if want.dtype.kind == "f" and got.dtype == np.bool_:  # a pattern matrix: SciPy gives 1.0
        got = got.astype(want.dtype)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    return want


_SCIPY_TEXTS = ["_32bit_integer_dense_example", "_32bit_integer_sparse_example", "_64bit_integer_dense_example",
                "_64bit_integer_sparse_general_example", "_64bit_integer_sparse_symmetric_example",
                "_64bit_integer_sparse_skew_example", "_over64bit_integer_dense_example",
                "_over64bit_integer_sparse_example", "_general_example", "_hermitian_example", "_skew_example",
                "_symmetric_example", "_symmetric_pattern_example", "_empty_lines_example"]


@pytest.mark.parametrize("name", _SCIPY_TEXTS)
def test_mtx_scipys_own_test_texts(tmp_path, name, blocks):
    scipy_tests = pytest.importorskip("scipy.io.tests.test_mmio")  # shipped with SciPy's wheels
    src = tmp_path / "m.mtx"
    src.write_text(getattr(scipy_tests, name))
    _agrees_with_scipy(src, tmp_path)


# The texts of SciPy's tests written inline in a test function (test_bad_number_of_*_header_fields,
# test_gh11389, test_gh18123), and arrays of every symmetry as the format lays them out.
_INLINE_TEXTS = {
    "array-size-line-of-three": "%%MatrixMarket matrix array real general\n  3  3 999\n"
                                + "".join(f"{v}.0\n" for v in range(1, 10)),
    "coordinate-size-line-of-four": "%%MatrixMarket matrix coordinate real general\n  5  5  8 999\n"
                                    "1 1 1.0\n2 2 10.5\n3 3 0.015\n1 4 6.0\n4 2 250.5\n4 4 -280.0\n"
                                    "4 5 33.32\n5 5 12.0\n",
    "no-final-newline": "%%MatrixMarket matrix coordinate complex symmetric\n 1 1 1\n"
                        "1 1 -2.1846000000000e+02  0.0000000000000e+00",
    "banner-after-a-blank": " %%MatrixMarket matrix coordinate real general\n5 5 3\n2 3 1.0\n3 4 2.0\n3 5 3.0\n",
    "array-general": "%%MatrixMarket matrix array real general\n% column-major\n3 2\n1\n0\n-2.5\n4\n0\n6e-3\n",
    "array-symmetric": "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n",
    "array-skew": "%%MatrixMarket matrix array integer skew-symmetric\n3 3\n2\n-3\n5\n",
    "array-hermitian": "%%MatrixMarket matrix array complex hermitian\n2 2\n1 0\n2 3\n4 0\n",
    "array-integer": "%%MatrixMarket matrix array integer general\n1 3\n-9223372036854775808\n0\n7\n",
    "array-pattern": "%%MatrixMarket matrix array pattern general\n2 2\n",
    "array-too-few": "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
    "array-too-many": "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n5\n",
    "unsigned-coordinate": "%%MatrixMarket matrix coordinate unsigned-integer general\n2 2 3\n"
                           "1 1 18446744073709551615\n2 1 9223372036854775808\n2 2 3\n",
    "unsigned-array": "%%MatrixMarket matrix array unsigned-integer general\n2 2\n1\n18446744073709551615\n"
                      "3\n9223372036854775808\n",
    "unsigned-symmetric": "%%MatrixMarket matrix coordinate unsigned-integer symmetric\n3 3 2\n"
                          "2 1 18446744073709551614\n3 3 5\n",
    "unsigned-negative": "%%MatrixMarket matrix coordinate unsigned-integer general\n2 2 1\n2 1 -3\n",
    "unsigned-past-2^64": "%%MatrixMarket matrix coordinate unsigned-integer general\n2 2 1\n"
                          "2 1 18446744073709551616\n",
    "unsigned-skew": "%%MatrixMarket matrix coordinate unsigned-integer skew-symmetric\n2 2 1\n2 1 3\n",
}


@pytest.mark.parametrize("name", list(_INLINE_TEXTS))
def test_mtx_reads_as_scipy_reads(tmp_path, name, blocks):
    src = tmp_path / "m.mtx"
    src.write_text(_INLINE_TEXTS[name])
    _agrees_with_scipy(src, tmp_path)


def test_mtx_symmetric_must_be_square(tmp_path):
    # SciPy's default reader (fast_matrix_market) reads this one as a 2 x 3 matrix of three values and
    # has crashed the process on it; its pure-Python reader (scipy.io._mmio) refuses it, as the format does.
    src = tmp_path / "n.mtx"
    src.write_text("%%MatrixMarket matrix array real symmetric\n2 3\n1\n2\n3\n4\n5\n")
    mmio = pytest.importorskip("scipy.io._mmio")
    with pytest.raises((ValueError, IndexError)):
        mmio.mmread(str(src))
    with pytest.raises(DataError, match=r"line 2: a symmetric matrix must be square, got 2 x 3"):
        convert(str(src), str(tmp_path / "n.parquet"))


@pytest.mark.parametrize("banner", ["%%MatrixMarket", "%%matrixmarket", "%%MATRIXMARKET", "%%MatrixMarketX",
                                    "%% MatrixMarket", "%%Matrixmarket"])
@pytest.mark.parametrize("words", ["matrix coordinate real general", "MATRIX Coordinate REAL General"])
def test_mtx_banner_is_spelled_as_scipy_requires(tmp_path, banner, words):
    src = tmp_path / "b.mtx"
    src.write_text(f"{banner} {words}\n2 2 1\n1 2 3.5\n")
    want = _agrees_with_scipy(src, tmp_path)
    if isinstance(want, Exception):
        with pytest.raises(DataError, match=r"line 1: .*'%%MatrixMarket"):
            convert(str(src), str(tmp_path / "b.parquet"))


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("dense", [False, True], ids=["coordinate", "array"])
def test_mtx_unsigned_written_by_scipy_reads_as_scipy_reads_it(tmp_path, dtype, dense):
    info = np.iinfo(dtype)
    a = np.array([[0, info.max, 1], [info.max - 1, 0, 2 ** (info.bits - 1)]], dtype=dtype)
    src = tmp_path / "u.mtx"
    sio.mmwrite(str(src), a if dense else sp.coo_array(a))
    want = _agrees_with_scipy(src, tmp_path)  # uint64 for SciPy's 'unsigned-integer' (uint32 and uint64)
    assert want.dtype == (np.uint64 if sio.mminfo(str(src))[4] == "unsigned-integer" else np.int64)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int16", "uint64", "complex128", "bool"])
def test_mtx_dense_output_reads_back_in_scipy(tmp_path, rng, dtype):
    dense = rng.integers(-3, 4, size=(5, 4)) * (rng.random((5, 4)) < 0.5)
    if dtype == "uint64":
        dense = np.abs(dense).astype(np.uint64) * np.uint64(2**61)
    elif dtype == "complex128":
        dense = dense + 1j * rng.integers(-2, 3, size=(5, 4))
    elif dtype.startswith("float"):
        dense = dense * np.pi
    dense = dense.astype(dtype)
    np.save(tmp_path / "d.npy", dense)
    convert(str(tmp_path / "d.npy"), str(tmp_path / "d.parquet"))
    result = convert(str(tmp_path / "d.parquet"), str(tmp_path / "d.mtx"), dense=True)
    assert result["to"] == "mtx" and result["shape"] == [5, 4]
    assert sio.mminfo(str(tmp_path / "d.mtx"))[3] == "array"
    back = sio.mmread(str(tmp_path / "d.mtx"))
    assert isinstance(back, np.ndarray)
    # Floats are written in their own type's shortest round-trip form: float32 values come back exactly
    # as float32.
    np.testing.assert_array_equal(back.astype(dense.dtype) if dense.dtype.kind == "f" else back,
                                  dense if dense.dtype.kind == "f" else dense.astype(back.dtype))
    field_type = {"b": np.int64, "i": np.int64, "u": np.uint64, "f": np.float64, "c": np.complex128}
    assert back.dtype == field_type[dense.dtype.kind]


def test_mtx_dense_output_from_text_with_duplicates(tmp_path):
    # Unsorted text with a repeated coordinate: the cell holds the sum, as SciPy's toarray gives it.
    (tmp_path / "t.tns").write_text("3 2 1.5\n1 1 2.0\n3 2 0.25\n2 3 -1.0\n")
    convert(str(tmp_path / "t.tns"), str(tmp_path / "t.mtx"), dense=True, shape="3,4")
    want = sp.coo_array(([1.5, 2.0, 0.25, -1.0], ([2, 0, 2, 1], [1, 0, 1, 2])), shape=(3, 4)).toarray()
    np.testing.assert_array_equal(sio.mmread(str(tmp_path / "t.mtx")), want)


def test_mtx_dense_is_refused_for_other_outputs(tmp_path):
    with pytest.raises(UsageError, match="--dense"):
        convert("sample_data/digits.parquet", str(tmp_path / "d.tns"), dense=True)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int64])
def test_mtx_integer_output_has_the_field_scipy_writes(tmp_path, dtype):
    info = np.iinfo(dtype)
    values = np.array([info.max, info.max - 1, 5], dtype=dtype)
    m = sp.coo_array((values, ([0, 1, 2], [2, 0, 1])), shape=(3, 3))
    sp.save_npz(tmp_path / "u.npz", m)
    convert(str(tmp_path / "u.npz"), str(tmp_path / "u.mtx"))
    sio.mmwrite(str(tmp_path / "scipy.mtx"), m)
    assert sio.mminfo(str(tmp_path / "u.mtx"))[4] == sio.mminfo(str(tmp_path / "scipy.mtx"))[4]
    back = sio.mmread(str(tmp_path / "u.mtx"), spmatrix=False)
    np.testing.assert_array_equal(back.toarray(), m.toarray())


# ---------------------------------------------------------------------------------------------
# scipy.sparse .npz: every format save_npz writes


def _sparse_of(kind: str, rng) -> sp.sparray:
    dense = rng.integers(-4, 5, size=(6, 8)).astype(np.float64) * (rng.random((6, 8)) < 0.4)
    if kind == "bsr":
        return sp.bsr_array(dense, blocksize=(2, 4))  # blocks keep their explicit zeros
    if kind == "bsr-unsorted":
        return _reversed_within_rows(sp.bsr_array(dense, blocksize=(3, 2)))
    if kind == "dia":
        return sp.dia_array(dense)
    if kind == "dia-short":  # data narrower than the matrix, and offsets past its corners
        data = rng.integers(1, 9, size=(4, 5)).astype(np.int32)
        data[1, 2] = 0  # a stored zero: not an entry, as dia's tocoo drops it
        return sp.dia_array((data, [0, -2, 3, 9]), shape=(6, 8))
    return getattr(sp, f"{kind}_array")(dense)


def _reversed_within_rows(m: sp.bsr_array) -> sp.bsr_array:
    """The same bsr matrix with the blocks of each block row stored in reverse (unsorted indices)."""
    order = np.concatenate([np.arange(a, b)[::-1] for a, b in zip(m.indptr[:-1], m.indptr[1:])])
    return sp.bsr_array((m.data[order], m.indices[order], m.indptr), shape=m.shape)


@pytest.mark.parametrize("kind", ["bsr", "bsr-unsorted", "dia", "dia-short"])
@pytest.mark.parametrize("matrix", [False, True], ids=["array", "matrix"])
def test_npz_bsr_and_dia_read_as_load_npz_gives_them(tmp_path, rng, kind, matrix):
    m = _sparse_of(kind, rng)
    if matrix:
        m = getattr(sp, f"{m.format}_matrix")(m)
    sp.save_npz(tmp_path / "m.npz", m)
    want = sp.load_npz(tmp_path / "m.npz").tocoo()  # SciPy's own entries: bsr keeps zeros, dia drops them
    out = tmp_path / "m.parquet"
    result = convert(str(tmp_path / "m.npz"), str(out))
    idx, vals, meta = _read(out)
    assert meta.shape == want.shape and meta.value_type == str(want.dtype)
    assert result["rows"] == want.nnz
    got = sorted(zip(map(tuple, idx.tolist()), vals.tolist()))
    assert got == sorted(zip(zip(want.row.tolist(), want.col.tolist()), want.data.tolist()))


def test_npz_refuses_what_load_npz_refuses(tmp_path):
    np.savez(tmp_path / "dup.npz", format=b"dia", shape=np.array([3, 3]), data=np.ones((2, 3)),
             offsets=np.array([1, 1]))
    with pytest.raises(ValueError):
        sp.load_npz(tmp_path / "dup.npz")
    with pytest.raises(DataError, match="offsets repeat"):
        convert(str(tmp_path / "dup.npz"), str(tmp_path / "dup.parquet"))
    np.savez(tmp_path / "odd.npz", format=b"bsr", shape=np.array([4, 4]), data=np.ones((1, 2, 2)),
             indices=np.array([0]), indptr=np.array([0, 1, 1, 1]))  # three block rows of two rows in four
    with pytest.raises(ValueError):
        sp.load_npz(tmp_path / "odd.npz")
    with pytest.raises(DataError, match="indptr is not a valid bsr pointer array"):
        convert(str(tmp_path / "odd.npz"), str(tmp_path / "odd.parquet"))
    assert sorted(os.listdir(tmp_path)) == ["dup.npz", "odd.npz"]


def test_npz_bsr_whose_shape_is_not_a_multiple_of_its_blocks(tmp_path):
    # load_npz takes it (the rows past the last whole block row are empty), so sptool does too.
    np.savez(tmp_path / "odd.npz", format=b"bsr", shape=np.array([5, 4]), data=np.arange(1.0, 5.0).reshape(1, 2, 2),
             indices=np.array([1]), indptr=np.array([0, 0, 1]))
    convert(str(tmp_path / "odd.npz"), str(tmp_path / "odd.parquet"))
    np.testing.assert_array_equal(_dense(tmp_path / "odd.parquet"), sp.load_npz(tmp_path / "odd.npz").toarray())


# ---------------------------------------------------------------------------------------------
# inputs told by their content: files of no known extension, and stdin


def _sklearn_data(name: str):
    """One of scikit-learn's own svmlight test files, as installed with it."""
    from importlib import resources

    try:
        path = resources.files("sklearn.datasets.tests.data") / name
    except ModuleNotFoundError:
        pytest.skip("scikit-learn's test data is not installed")
    if not path.is_file():
        pytest.skip("scikit-learn's test data is not installed")
    return path


@pytest.mark.parametrize("name", ["svmlight_classification.txt", "svmlight_multilabel.txt"])
@pytest.mark.parametrize("rename", [None, "noextension"])
def test_sklearns_svmlight_files_are_told_by_content(tmp_path, name, rename):
    from sklearn.datasets import load_svmlight_file

    src = _sklearn_data(name)
    if rename:
        (tmp_path / rename).write_bytes(src.read_bytes())
        src = tmp_path / rename
    multilabel = "multilabel" in name
    X, _ = load_svmlight_file(str(src), multilabel=multilabel)
    result = convert(str(src), str(tmp_path / "x.parquet"), multilabel=multilabel)
    assert result["from"] == "svmlight"
    np.testing.assert_array_equal(_dense(tmp_path / "x.parquet"), X.toarray())


def test_sklearns_invalid_svmlight_file_is_still_named_svmlight(tmp_path):
    # Its first line's label is 'python': still svmlight by its features, refused as scikit-learn refuses it.
    src = _sklearn_data("svmlight_invalid.txt")
    with pytest.raises(DataError, match="line 1: the label 'python' is not a number"):
        convert(str(src), str(tmp_path / "x.parquet"))


_BY_CONTENT = {
    "tns": "# a FROSTT tensor\n1 2 3 0.5\n2 1 1 -1.5 # trailing\n",
    "tns-extended": "3 2\n2 2 3\n1 2 3 0.5\n2 1 1 -1.5\n",
    "mtx": "%%MatrixMarket matrix coordinate real general\n% c\n2 3 2\n1 2 0.5\n2 1 -1.5\n",
    "csv": "indices_0,indices_1,values\n0,1,0.5\n1,0,-1.5\n",
    "csv-no-header": "0,1,0.5\n1,0,-1.5\n",
    "tsv": "indices_0\tindices_1\tvalues\n0\t1\t0.5\n1\t0\t-1.5\n",
    "jsonl": '{"ids": [1], "values": [0.5]}\n{"ids": [0], "values": [-1.5]}\n',
    "svmlight": "# features\n0 2:0.5\n1 1:-1.5\n",
}


def _expected_entries(kind: str) -> list:
    if kind.startswith("tns"):
        return [((0, 1, 2), 0.5), ((1, 0, 0), -1.5)]
    if kind == "svmlight":
        return [((0, 1), 0.5), ((1, 0), -1.5)]  # 1-based ids, as scikit-learn guesses for them
    return [((0, 1), 0.5), ((1, 0), -1.5)]


@pytest.mark.parametrize("kind", list(_BY_CONTENT))
@pytest.mark.parametrize("codec", [None, "gz"])
def test_text_formats_are_told_by_content_in_files_and_on_stdin(tmp_path, kind, codec):
    import gzip

    data = _BY_CONTENT[kind].encode()
    if codec:
        data = gzip.compress(data)
    fmt = kind.split("-")[0]
    (tmp_path / "in.txt").write_bytes(data)
    assert convert(str(tmp_path / "in.txt"), str(tmp_path / "f.parquet"))["from"] == fmt
    r = CliRunner().invoke(cli, ["-q", "convert", "-", "-o", str(tmp_path / "s.parquet")], input=data)
    assert r.exit_code == 0, r.output
    for out in ("f.parquet", "s.parquet"):
        idx, vals, _ = _read(tmp_path / out)
        assert sorted(zip(map(tuple, idx.tolist()), vals.tolist())) == _expected_entries(kind)


def test_an_arrow_stream_on_stdin_is_still_sptool(tmp_path):
    r = CliRunner().invoke(cli, ["-q", "convert", "sample_data/tensor3d.parquet", "-o", "-"])
    assert r.exit_code == 0
    back = CliRunner().invoke(cli, ["-q", "convert", "-", "-o", str(tmp_path / "t.parquet")], input=r.stdout_bytes)
    assert back.exit_code == 0, back.output
    np.testing.assert_array_equal(_dense(tmp_path / "t.parquet"), _dense("sample_data/tensor3d.parquet"))


@pytest.mark.parametrize("content", [b"\x00\x01binary\xff", b"1\t2\t0.5\n2\t1\t1.5\n", b"hello world\n", b""],
                         ids=["binary", "tabs-without-a-header", "words", "empty"])
def test_what_cannot_be_told_names_from(tmp_path, content):
    (tmp_path / "x.dat").write_bytes(content)
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / "x.dat"), "-o", str(tmp_path / "x.parquet")])
    assert r.exit_code == 2 and "--from" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    if content:  # an empty stdin is an empty Arrow stream, as before
        r = CliRunner().invoke(cli, ["convert", "-", "-o", str(tmp_path / "x.parquet")], input=content)
        assert r.exit_code == 2 and "--from" in r.stderr and "<stdin>" in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["x.dat"]


def test_a_foreign_csv_header_names_the_table_options(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"row": [0, 2], "col": [1, 0], "value": [0.5, -1.5]})
    frame.to_csv(tmp_path / "p.csv", index=False)
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / "p.csv"), "-o", str(tmp_path / "p.parquet")])
    assert r.exit_code == 1 and "--index-columns row,col --values-column value" in r.stderr, r.stderr
    assert not (tmp_path / "p.parquet").exists()
    convert(str(tmp_path / "p.csv"), str(tmp_path / "p.parquet"), index_columns="row,col", values_column="value")
    idx, vals, _ = _read(tmp_path / "p.parquet")
    assert sorted(zip(map(tuple, idx.tolist()), vals.tolist())) == [((0, 1), 0.5), ((2, 0), -1.5)]


def test_a_pipe_from_a_slow_writer_is_told_and_read_whole(tmp_path):
    """A real pipe (stdin a buffered reader, looked at by peeking): the comment comes alone and the
    data later, so telling the format waits for more than the first read gives."""
    out = tmp_path / "p.parquet"
    proc = subprocess.Popen([sys.executable, "-P", "-m", "sptool", "-q", "convert", "-", "-o", str(out)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdin.write(b"# from a slow writer\n")
    proc.stdin.flush()
    time.sleep(0.5)
    proc.stdin.write(b"1 2 3 0.5 # first\n2 1 1 -1.5\n")
    proc.stdin.close()
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    idx, vals, _ = _read(out)
    assert sorted(zip(map(tuple, idx.tolist()), vals.tolist())) == _expected_entries("tns")
    stream = subprocess.run([sys.executable, "-P", "-m", "sptool", "-q", "convert", str(out), "-o", "-"],
                            capture_output=True, check=True).stdout
    back = subprocess.run([sys.executable, "-P", "-m", "sptool", "-q", "convert", "-", "--to", "tns", "-o", "-"],
                          input=stream, capture_output=True)
    assert back.returncode == 0 and back.stdout == b"1 2 3 0.5\n2 1 1 -1.5\n", back.stderr


# ---------------------------------------------------------------------------------------------
# docs/formats: one page a format, pointed at by the help


DOCS = os.path.join(os.path.dirname(__file__), "..", "docs", "formats")


def test_format_pages_name_only_options_that_exist_and_the_help_points_at_them():
    import re

    import click

    command = cli.get_command(click.Context(cli), "convert")
    options = {o for p in command.params for o in getattr(p, "opts", [])} | {"--one-based"}
    index = open(os.path.join(DOCS, "README.md"), encoding="utf-8").read()
    pages = re.findall(r"\]\(([a-z]+\.md)\)", index)
    assert len(pages) >= 5
    for page in pages:
        text = open(os.path.join(DOCS, page), encoding="utf-8").read()
        unknown = set(re.findall(r"`(--[a-z-]+)", text)) - options
        assert not unknown, (page, unknown)
    help_text = CliRunner().invoke(cli, ["convert", "--help"], terminal_width=200).output
    assert "docs/formats/" in help_text
    assert "load_svmlight_file" not in help_text  # the differences are told on the pages, not in the help too
