"""sptool convert against independent oracles: NumPy (loadtxt, load, a dense loop) and scipy
(mmread/mmwrite, save_npz/load_npz), with chunks small enough to cut lines in half."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import scipy.io as sio
import scipy.sparse as sp
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor
from hypothesis import given, settings
from hypothesis import strategies as st

import sptool
from sptool import _textparse as tp
from sptool.cli import cli
from sptool.errors import DataError, InputError, ResourceError, UsageError
from sptool.ops.convert import convert as convert_api

# ---------------------------------------------------------------------------------------------
# helpers


def _valid(path):
    report = sptool.validate(path)
    assert report.valid, report
    return path


def convert(src, dst, **kw):
    """sptool.converters.convert, checking that every sptool output it writes is valid."""
    result = convert_api(src, dst, **kw)
    if result["to"] == "sptool" and dst != "-":
        _valid(dst)
    return result


def _read(path):
    """(indices (n, K), values, meta) of an sptool output, after validating it."""
    t = sptool.read(_valid(path))
    return t.indices, t.values, t.meta


def _fmt(v) -> str:
    """Python's shortest round-trip repr: the independent way to print a value."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    return repr(float(v))


def _write_tns(path, idx, vals, base=1, sep=" ", comment=None, newline="\n"):
    lines = [] if comment is None else [comment]
    for row, v in zip(idx, vals):
        fields = [str(int(i) + base) for i in row]
        if np.iscomplexobj(vals):
            fields += [_fmt(v.real), _fmt(v.imag)]
        else:
            fields.append(_fmt(v))
        lines.append(sep.join(fields))
    with open(path, "w", newline="") as f:
        f.write(newline.join(lines) + (newline if lines else ""))


def _listing(folder):
    return sorted(os.listdir(folder))


@pytest.fixture(params=[None, 7, 200], ids=["default-chunks", "7-byte-chunks", "200-byte-chunks"])
def chunks(request, monkeypatch):
    """Text read in tiny blocks, so that blocks end in the middle of lines and numbers."""
    if request.param is not None:
        monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", str(request.param))
    return request.param


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def workers(request, monkeypatch):
    monkeypatch.setenv("SPTOOL_THREADS", str(request.param))
    return request.param


# ---------------------------------------------------------------------------------------------
# the compiled parser


def _parse(data: bytes, nidx: int, vkind=tp.V_FLOAT, base=1, final=True, delim=0, comment=35):
    cap = tp.count_newlines(data) + 1
    idx = np.zeros((nidx, cap), dtype=np.int64)
    fval = np.zeros(cap * 2, dtype=np.float64)
    ival = np.zeros(cap, dtype=np.int64)
    r = tp.parse_lines(data, final, nidx, vkind, base, delim, comment, idx, fval, ival)
    return r, idx, fval, ival


def test_kernel_stops_at_a_partial_line():
    data = b"1 2 3.5\n# note\n\n4 5 -6e2\n7 8 9"
    (rows, consumed, lines, err, *_), idx, fval, _ = _parse(data, 2, final=False)
    assert (rows, err, lines) == (2, tp.OK, 4)
    assert consumed == data.index(b"7 8")  # the unfinished last line is left for the next call
    assert idx[:, :2].tolist() == [[0, 3], [1, 4]] and fval[:2].tolist() == [3.5, -600.0]
    (rows, consumed, lines, err, *_), idx, fval, _ = _parse(data, 2, final=True)
    assert (rows, consumed, lines) == (3, len(data), 5) and fval[2] == 9.0


def test_kernel_blanks_crlf_tabs_and_delimiters():
    r, idx, fval, _ = _parse(b"  1\t2   0.5 \r\n\t\r\n3 4 1e-3\r\n", 2)
    assert r[0] == 2 and r[3] == tp.OK and fval[:2].tolist() == [0.5, 1e-3]
    r, idx, fval, _ = _parse(b"0 , 1,2.5\n3,4 ,  -1\n", 2, base=0, delim=ord(","), comment=0)
    assert r[0] == 2 and idx[:, :2].tolist() == [[0, 3], [1, 4]] and fval[:2].tolist() == [2.5, -1.0]


@pytest.mark.parametrize("line, err, field", [
    (b"1 2", tp.ERR_FIELDS, 2), (b"1 2 3 4", tp.ERR_FIELDS, 3), (b"1 x 3", tp.ERR_INDEX, 1),
    (b"1 2.0 3", tp.ERR_INDEX, 1), (b"0 1 3", tp.ERR_BASE, 0), (b"-1 1 3", tp.ERR_BASE, 0),
    (b"1 99999999999999999999 3", tp.ERR_RANGE, 1), (b"1 1 abc", tp.ERR_VALUE, 2), (b"1 1 1.5.2", tp.ERR_VALUE, 2),
    (b"1 1 0x10", tp.ERR_VALUE, 2), (b"1 1 1e", tp.ERR_VALUE, 2),
])
def test_kernel_errors(line, err, field):
    r, *_ = _parse(b"1 1 1\n" + line + b"\n", 2)
    assert r[0] == 1 and r[3] == err and r[4] == 1 and r[5] == 6 and r[6] == field


def test_kernel_floats_are_correctly_rounded(rng):
    bits = rng.integers(0, 2**63 - 1, 20000, dtype=np.int64) | (rng.integers(0, 2, 20000).astype(np.int64) << 63)
    x = bits.view(np.float64)
    x = x[np.isfinite(x)]
    words = [repr(float(v)) for v in x] + [f"{v:.19e}" for v in x[:2000]] + [f"{v:.25e}" for v in x[:2000]]
    words += [f"{int(m)}e{int(e)}" for m, e in zip(rng.integers(1, 2**62, 3000), rng.integers(-340, 320, 3000))]
    words += ["5e-324", "2.4703282292062328e-324", "2.2250738585072011e-308", "1.7976931348623157e308",
              "1e23", "9007199254740993", "-0", "-0.0", ".5", "5.", "+3", "1E5", "inf", "-inf", "nan", "1e-400",
              "0.000000000000000000000000000001", "123456789012345678901234567890e-5"]
    data = "".join(f"1 {w}\n" for w in words).encode()
    r, _, fval, _ = _parse(data, 1)
    assert r[3] == tp.OK and r[0] == len(words)
    want = np.array([float(w) for w in words])
    got = fval[: len(words)]
    same = (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [words[i] for i in np.flatnonzero(~same)[:5]]


def _reference_parse(text: str, nidx: int):
    """The kernel's grammar in plain Python: (rows, values) or ("error", line number)."""
    rows, values = [], []
    for no, line in enumerate(text.split("\n")):
        s = line.strip(" \t\r")
        if not s or s[0] == "#":
            continue
        fields = s.split()
        try:
            if len(fields) != nidx + 1:
                raise ValueError
            idx = [int(f) for f in fields[:nidx]]
            if any(i < 1 or i > 2**63 - 1 for i in idx) or any("_" in f for f in fields):
                raise ValueError
            values.append(float(fields[nidx]))
        except ValueError:
            return "error", no
        rows.append([i - 1 for i in idx])
    return rows, values


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789 \t\r.e+-#", max_size=30), max_size=12))
def test_kernel_agrees_with_a_python_reference(lines):
    text = "\n".join(lines)
    want = _reference_parse(text, 2)
    r, idx, fval, _ = _parse(text.encode(), 2)
    if want[0] == "error":
        assert r[3] != tp.OK and r[4] == want[1]
    else:
        assert r[3] == tp.OK, (text, r)
        assert idx[:, : r[0]].T.tolist() == want[0]
        assert fval[: r[0]].tolist() == want[1]


def test_kernel_integer_and_complex_values():
    r, _, _, ival = _parse(b"1 9223372036854775807\n2 -9223372036854775808\n3 1e3\n4 -7.0\n", 1, tp.V_INT)
    assert r[3] == tp.OK and ival[:4].tolist() == [2**63 - 1, -(2**63), 1000, -7]
    r, *_ = _parse(b"1 1.5\n", 1, tp.V_INT)
    assert r[3] == tp.ERR_VALUE
    r, _, fval, _ = _parse(b"1 1 0.5 -2\n2 2 3 4e1\n", 2, tp.V_COMPLEX)
    assert r[0] == 2 and fval[:4].view(np.complex128).tolist() == [0.5 - 2j, 3 + 40j]
    r, idx, *_ = _parse(b"% c\n1 2\n3 4\n", 2, tp.V_NONE, comment=ord("%"))
    assert r[0] == 2 and idx[:, :2].tolist() == [[0, 2], [1, 3]]


# ---------------------------------------------------------------------------------------------
# .tns


def test_tns_import_matches_loadtxt(tmp_path, rng, chunks, workers):
    n = 400
    idx = np.stack([rng.integers(0, s, n) for s in (13, 7, 5)], axis=1)
    idx[n // 2 :] = idx[: n - n // 2]  # duplicates
    vals = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    path = tmp_path / "x.tns"
    _write_tns(path, idx, vals, sep=" \t ", comment="# made by the test", newline="\r\n")
    with open(path, "ab") as f:
        f.write(b"\n# trailing comment\n\n1 1 1 2.5")  # blank lines, no final newline
    out = str(tmp_path / "x.parquet")
    summary = convert(str(path), out)
    assert summary["rows"] == n + 1 and summary["from"] == "tns" and summary["to"] == "sptool"
    want = np.loadtxt(path, comments="#", ndmin=2)
    got_idx, got_vals, meta = _read(out)
    np.testing.assert_array_equal(got_idx, want[:, :3].astype(np.int64) - 1)
    assert got_vals.view(np.int64).tolist() == want[:, 3].view(np.int64).tolist()  # bit for bit
    assert meta.shape == (13, 7, 5) or meta.shape == tuple(int(m) for m in want[:, :3].max(axis=0))
    assert meta.sort_order == () and not meta.unique  # text claims nothing


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "int8", "uint8", "bool",
                                   "complex128", "complex64"])
@pytest.mark.parametrize("case", ["random", "empty", "one", "duplicates"])
def test_tns_round_trip(tmp_path, rng, dtype, case):
    nnz = {"random": 60, "empty": 0, "one": 1, "duplicates": 60}[case]
    t = random_tensor(rng, (6, 5, 4), nnz, dtype=dtype, duplicates=case == "duplicates")
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    convert(src, str(tmp_path / "t.tns"))
    text = (tmp_path / "t.tns").read_text()
    if nnz:  # the text is what NumPy reads, 1-based
        want = np.loadtxt(tmp_path / "t.tns", ndmin=2, dtype=np.float64 if dtype != "uint8" else np.int64)
        np.testing.assert_array_equal(want[:, :3] - 1, t.indices)
    else:
        assert text == ""
    back = str(tmp_path / "back.parquet")
    convert(str(tmp_path / "t.tns"), back, dtype=dtype, shape=(6, 5, 4))
    idx, vals, meta = _read(back)
    assert meta.shape == (6, 5, 4) and meta.value_type == dtype
    np.testing.assert_array_equal(idx, t.indices)
    assert vals.dtype == t.values.dtype
    assert vals.tobytes() == t.values.tobytes()  # exact: shortest round-trip text


def test_tns_float_bits_survive(tmp_path, rng):
    bits = rng.integers(0, 2**63 - 1, 3000, dtype=np.int64)
    x = bits.view(np.float64)
    x = x[np.isfinite(x)]
    x[:4] = [0.0, -0.0, 5e-324, 1.7976931348623157e308]
    t = sptool.SparseTensor(np.arange(len(x))[:, None], x, (len(x),))
    sptool.write(t, str(tmp_path / "x.parquet"))
    convert(str(tmp_path / "x.parquet"), str(tmp_path / "x.tns"))
    first = (tmp_path / "x.tns").read_text().splitlines()[0]
    assert first == "1 0"
    convert(str(tmp_path / "x.tns"), str(tmp_path / "y.parquet"))
    assert _read(str(tmp_path / "y.parquet"))[1].view(np.int64).tolist() == x.view(np.int64).tolist()


def test_tns_shape_and_index_base(tmp_path):
    path = tmp_path / "s.tns"
    path.write_text("1 2 3.0\n4 1 1.5\n")
    out = str(tmp_path / "s.parquet")
    assert convert(str(path), out)["shape"] == [4, 2]
    assert convert(str(path), out, shape="10,20")["shape"] == [10, 20]
    assert _read(out)[2].shape == (10, 20)
    assert convert(str(path), out, index_base=0)["shape"] == [5, 3]
    assert _read(out)[0].tolist() == [[1, 2], [4, 1]]
    with pytest.raises(DataError, match=r"s\.tns: line 2: index 4 in field 1 is out of bounds for shape \[3, 3\]"):
        convert(str(path), out, shape=(3, 3))
    with pytest.raises(UsageError, match="has 3 dimensions but the first line holds 2 indices"):
        convert(str(path), out, shape=(3, 3, 3))


def test_inferred_shape_may_pass_int64_max(tmp_path):
    """A FROSTT file's extents may multiply past 2^63 - 1 (format 1.1): the shape is inferred as it is."""
    (tmp_path / "o.tns").write_text(f"{2**40} {2**40} {2**40} 1.0\n")
    convert(str(tmp_path / "o.tns"), str(tmp_path / "o.parquet"))
    t = sptool.read(str(tmp_path / "o.parquet"))
    assert t.shape == (2**40,) * 3 and t.indices.tolist() == [[2**40 - 1] * 3]


def test_tns_extended_header(tmp_path):
    path = tmp_path / "h.tns"
    path.write_text("# extended FROSTT\n2 3\n4 5\n1 1 1.0\n2 3 2.0\n4 5 3.0\n")
    out = str(tmp_path / "h.parquet")
    assert convert(str(path), out)["shape"] == [4, 5]
    assert _read(out)[0].tolist() == [[0, 0], [1, 2], [3, 4]]
    path.write_text("2 4\n4 5\n1 1 1.0\n")
    with pytest.raises(DataError, match="the header promises 4 entries but the file holds 1"):
        convert(str(path), out)
    path.write_text("2 4\n4 5\n")  # ambiguous: read as two entries of a vector
    assert convert(str(path), out)["shape"] == [4]
    path.write_text("1 2\n7\n3 1.0\n5 2.0\n")  # rank 1 header
    assert convert(str(path), out)["shape"] == [7]


def test_tns_needs_shape_when_empty(tmp_path):
    (tmp_path / "e.tns").write_text("# nothing\n\n")
    with pytest.raises(UsageError, match="number of dimensions is unknown; give --shape"):
        convert(str(tmp_path / "e.tns"), str(tmp_path / "e.parquet"))
    assert convert(str(tmp_path / "e.tns"), str(tmp_path / "e.parquet"), shape="3,4")["rows"] == 0
    idx, vals, meta = _read(str(tmp_path / "e.parquet"))
    assert meta.shape == (3, 4) and meta.nnz == 0


def test_long_file_streams_in_small_blocks(tmp_path, rng, monkeypatch):
    """Many blocks on the thread pool: the result is the file, in order, whatever the block size."""
    monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", "4096")
    monkeypatch.setenv("SPTOOL_THREADS", "3")
    n = 30000
    idx = np.stack([rng.integers(0, s, n) for s in (50, 40, 30)], axis=1)
    vals = rng.standard_normal(n)
    _write_tns(tmp_path / "l.tns", idx, vals)
    convert(str(tmp_path / "l.tns"), str(tmp_path / "l.parquet"), memory="16MiB")
    got_idx, got_vals, _ = _read(str(tmp_path / "l.parquet"))
    np.testing.assert_array_equal(got_idx, idx)
    np.testing.assert_array_equal(got_vals, vals)
    (tmp_path / "l.tns").write_text((tmp_path / "l.tns").read_text() + "1 1 1 1 1\n")
    with pytest.raises(DataError, match=rf"l\.tns: line {n + 1}: expected 4 fields"):
        convert(str(tmp_path / "l.tns"), str(tmp_path / "m.parquet"))
    assert not (tmp_path / "m.parquet").exists()


# ---------------------------------------------------------------------------------------------
# .mtx


def _mm_file(path, field, symmetry, rng, n=12):
    a = sp.random_array((n, n), density=0.3, random_state=rng, format="coo").toarray()
    if field == "integer":
        a = np.round(a * 100).astype(np.int64)
    elif field == "complex":
        a = a + 1j * sp.random_array((n, n), density=0.3, random_state=rng).toarray()
    elif field == "pattern":
        a = (a != 0).astype(np.float64)
    if symmetry == "symmetric":
        a = np.tril(a) + np.tril(a, -1).T
    elif symmetry == "skew-symmetric":
        a = np.tril(a, -1) - np.tril(a, -1).T
    elif symmetry == "hermitian":
        a = np.tril(a, -1) + np.tril(a, -1).conj().T + np.diag(np.diag(a).real)
    sio.mmwrite(str(path), sp.coo_array(a), field=field, symmetry=symmetry)
    return sio.mmread(str(path)).toarray()


@pytest.mark.parametrize("field, symmetry", [
    ("real", "general"), ("integer", "general"), ("complex", "general"), ("pattern", "general"),
    ("real", "symmetric"), ("integer", "symmetric"), ("pattern", "symmetric"), ("complex", "symmetric"),
    ("real", "skew-symmetric"), ("integer", "skew-symmetric"), ("complex", "hermitian"),
])
def test_mtx_import_matches_mmread(tmp_path, rng, field, symmetry, chunks):
    want = _mm_file(tmp_path / "m.mtx", field, symmetry, rng)
    out = str(tmp_path / "m.parquet")
    convert(str(tmp_path / "m.mtx"), out)
    idx, vals, meta = _read(out)
    assert meta.value_type == {"real": "float64", "integer": "int64", "complex": "complex128",
                               "pattern": "bool"}[field]
    assert meta.iso == (field == "pattern") and meta.sort_order == ()
    if field == "pattern":
        assert vals.all()
    dense = sptool.read(out).to_dense()
    np.testing.assert_array_equal(dense, want.astype(dense.dtype))


def test_mtx_symmetric_with_diagonal_in_skew(tmp_path):
    """A skew-symmetric file that (against the spec) stores a diagonal entry: kept once, as scipy does."""
    (tmp_path / "k.mtx").write_text("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 5\n3 3 1\n")
    convert(str(tmp_path / "k.mtx"), str(tmp_path / "k.parquet"))
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "k.parquet")).to_dense(),
                                  sio.mmread(str(tmp_path / "k.mtx")).toarray())


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int16", "complex128", "bool"])
def test_mtx_export_matches_mmread(tmp_path, rng, dtype):
    t = random_tensor(rng, (9, 11), 40, dtype=dtype, duplicates=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "t.mtx"))
    head = (tmp_path / "t.mtx").read_text().splitlines()[0]
    assert head.endswith(" general") and head.split()[3] == {"f": "real", "i": "integer", "c": "complex",
                                                             "b": "integer"}[np.dtype(dtype).kind]
    got = sio.mmread(str(tmp_path / "t.mtx")).toarray()
    want = dense_oracle(t)
    if dtype == "bool":  # written as integer 0/1: scipy sums repeated entries where bool ORs them
        np.testing.assert_array_equal(got != 0, want)
    else:  # scipy sums duplicates in float64, the oracle in the value type
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-15)
    convert(str(tmp_path / "t.mtx"), str(tmp_path / "back.parquet"), dtype=dtype)
    _, vals, _ = _read(str(tmp_path / "back.parquet"))
    assert vals.tobytes() == t.values.tobytes()


def test_mtx_pattern_round_trip_and_text_source(tmp_path):
    (tmp_path / "p.mtx").write_text("%%MatrixMarket matrix coordinate pattern general\n% c\n3 4 3\n1 1\n3 4\n2 2\n")
    convert(str(tmp_path / "p.mtx"), str(tmp_path / "p.parquet"))
    convert(str(tmp_path / "p.parquet"), str(tmp_path / "q.mtx"))
    assert "coordinate pattern general" in (tmp_path / "q.mtx").read_text()
    np.testing.assert_array_equal(sio.mmread(str(tmp_path / "q.mtx")).toarray(),
                                  sio.mmread(str(tmp_path / "p.mtx")).toarray())
    # a text source has no nnz up front: the .mtx is staged through a hidden file, then removed
    (tmp_path / "m.tns").write_text("1 1 2.5\n3 2 -1\n")
    before = _listing(tmp_path)
    convert(str(tmp_path / "m.tns"), str(tmp_path / "m.mtx"))
    assert _listing(tmp_path) == sorted(before + ["m.mtx"])
    np.testing.assert_array_equal(sio.mmread(str(tmp_path / "m.mtx")).toarray(), [[2.5, 0], [0, 0], [0, -1]])


@pytest.mark.parametrize("content, kind, message", [
    ("", DataError, "the file is empty"),
    ("%%MatrixMarket matrix array pattern general\n2 2\n", DataError, "line 1: an 'array' file cannot be 'pattern'"),
    ("%%MatrixMarket matrix coordinate reel general\n", DataError, "line 1: unknown field 'reel'"),
    ("%%MatrixMarket matrix coordinate real sideways\n", DataError, "line 1: unknown symmetry 'sideways'"),
    ("%%MatrixMarket matrix coordinate real\n", DataError, "line 1: expected the header"),
    ("hello\n", DataError, "line 1: expected the header"),
    ("%%MatrixMarket matrix coordinate real general\n%\n2 x 3\n", DataError, "line 3: expected the size line"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 2\n", DataError,
     "the header promises 3 entries but the file holds 2"),
    ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 3 1\n", DataError,
     r"line 3: index 3 in field 2 is out of bounds for shape \[2, 2\]"),
    ("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1\n", DataError,
     r"line 3: expected 4 fields \(2 indices and a real and an imaginary part\), got 3"),
    ("%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n", DataError, "must be square"),
])
def test_mtx_errors(tmp_path, content, kind, message):
    (tmp_path / "bad.mtx").write_text(content)
    with pytest.raises(kind, match=message):
        convert(str(tmp_path / "bad.mtx"), str(tmp_path / "bad.parquet"))
    assert _listing(tmp_path) == ["bad.mtx"]


# ---------------------------------------------------------------------------------------------
# .npz


@pytest.mark.parametrize("kind", ["coo", "coo-matrix", "coo-3d", "coo-1d", "csr", "csr-unsorted", "csc",
                                  "coo-int32", "coo-empty"])
def test_npz_import_matches_load_npz(tmp_path, rng, kind):
    shape = {"coo-3d": (6, 5, 4), "coo-1d": (30,)}.get(kind, (20, 15))
    density = 0.0 if kind == "coo-empty" else 0.2
    if len(shape) == 2:
        m = sp.random_array(shape, density=density, random_state=rng, format="coo")
    else:
        dense = np.where(rng.random(shape) < 0.3, rng.standard_normal(shape), 0.0)
        m = sp.coo_array(dense)
    if kind == "coo-int32":
        m = sp.coo_array((np.round(m.data * 100).astype(np.int32), m.coords), shape=shape)
    if kind == "coo-matrix":
        m = sp.coo_matrix(m)
    if kind.startswith("csr"):
        m = m.tocsr()
        if kind == "csr-unsorted":
            for r in range(m.shape[0]):  # reverse each row's columns
                lo, hi = m.indptr[r], m.indptr[r + 1]
                m.indices[lo:hi] = m.indices[lo:hi][::-1].copy()
                m.data[lo:hi] = m.data[lo:hi][::-1].copy()
            m.has_sorted_indices = False
    if kind == "csc":
        m = m.tocsc()
    sp.save_npz(str(tmp_path / "m.npz"), m)
    out = str(tmp_path / "m.parquet")
    convert(str(tmp_path / "m.npz"), out)
    idx, vals, meta = _read(out)
    want = sp.load_npz(str(tmp_path / "m.npz")).toarray()
    assert meta.shape == tuple(shape) and meta.value_type == str(want.dtype)
    np.testing.assert_array_equal(sptool.read(out).to_dense(), want)
    expected_order = {"csr": (0, 1), "csr-unsorted": (0,), "csc": (1, 0)}.get(kind)
    if expected_order is not None:
        assert meta.sort_order == expected_order


@pytest.mark.parametrize("shape", [(9, 7), (6, 5, 4), (40,)])
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool", "complex64", "float16"])
def test_npz_export_matches_oracle(tmp_path, rng, shape, dtype):
    t = random_tensor(rng, shape, 30, dtype=dtype, duplicates=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "t.npz"))
    m = sp.load_npz(str(tmp_path / "t.npz"))
    assert m.shape == shape and m.nnz == t.nnz
    want = dense_oracle(t)
    if dtype == "float16":  # stored as float32, where scipy sums the duplicates
        np.testing.assert_allclose(m.toarray(), want, rtol=1e-2)
    else:
        np.testing.assert_array_equal(m.toarray(), want.astype(m.dtype))
    convert(str(tmp_path / "t.npz"), str(tmp_path / "back.parquet"))
    _valid(str(tmp_path / "back.parquet"))


def test_npz_refusals(tmp_path, rng):
    np.savez(tmp_path / "nokeys.npz", format=b"csr", shape=np.array([2, 2]), data=np.ones(2))
    with pytest.raises(DataError, match=r"nokeys\.npz: missing keys indices, indptr for format 'csr'"):
        convert(str(tmp_path / "nokeys.npz"), str(tmp_path / "x.parquet"))
    np.savez(tmp_path / "lil.npz", format=b"lil", shape=np.array([2, 2]), data=np.ones(2))
    with pytest.raises(InputError, match="scipy format 'lil' is not supported; save it as coo, csr, csc, bsr"):
        convert(str(tmp_path / "lil.npz"), str(tmp_path / "x.parquet"))
    big = sp.coo_array((np.ones(600_000), (np.arange(600_000), np.zeros(600_000, dtype=np.int64))),
                       shape=(600_000, 1))
    sp.save_npz(str(tmp_path / "big.npz"), big)
    with pytest.raises(ResourceError, match="loaded whole"):
        convert(str(tmp_path / "big.npz"), str(tmp_path / "x.parquet"), memory="16MiB")
    sptool.write(random_tensor(rng, (600_000, 2), 600_000), str(tmp_path / "big.parquet"))
    with pytest.raises(ResourceError, match="written from memory"):
        convert(str(tmp_path / "big.parquet"), str(tmp_path / "x.npz"), memory="16MiB")
    assert not any(n.startswith(("x.", ".x")) for n in os.listdir(tmp_path))

_COO = dict(format="coo", shape=np.array([2, 3]), row=np.array([0]), col=np.array([1]), data=np.array([1.0]))
_ROWS = dict(rows=np.array([0, 1]), values=np.ones((2, 3)), height=np.array(4))
ODD_NPZ = {  # what scipy.sparse.load_npz refuses (a shape that is no integers), or cuts to an int (0.5 -> 0)
    "text-shape": ({**_COO, "shape": np.array(["2", "x"])}, "shape"),
    "float-shape": ({**_COO, "shape": np.array([2.5, 3])}, "shape"),
    "complex-shape": ({**_COO, "shape": np.array([2 + 0j, 3])}, "shape"),
    "uint64-shape": ({**_COO, "shape": np.array([2**64 - 1, 3], np.uint64)}, "shape"),
    "float-row": ({**_COO, "row": np.array([0.5])}, "row"),
    "float-indptr": (dict(format="csr", shape=np.array([2, 3]), indptr=np.array([0, 1.0, 1]), indices=np.array([1]),
                          data=np.array([1.0])), "indptr"),
    "text-height": ({**_ROWS, "height": np.array("x")}, "height"),
    "complex-height": ({**_ROWS, "height": np.array(4 + 0j)}, "height"),
    "float-dense-shape": (dict(indices=np.array([0, 1]), values=np.ones((2, 3)), dense_shape=np.array([4, 3.0])),
                          "dense_shape"),
}


@pytest.mark.parametrize("name", list(ODD_NPZ))
def test_npz_arrays_that_are_no_integers_are_refused(tmp_path, name):
    """A shape, index, pointer or height array must hold integers: not an internal error (text),
    nor a value cut to an int (2.5, 0.5), but exit 1 naming the file and the array."""
    arrays, key = ODD_NPZ[name]
    src = str(tmp_path / "in.npz")
    np.savez(src, **arrays)
    r = CliRunner().invoke(cli, ["-q", "convert", src, "-o", str(tmp_path / "out.parquet")])
    assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
    assert src in r.output and f"{key} " in r.output, r.output
    assert _listing(tmp_path) == ["in.npz"]


# ---------------------------------------------------------------------------------------------
# .npy


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16", "uint8", "bool", "complex128"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_import_keeps_what_differs_from_fill(tmp_path, rng, monkeypatch, dtype, order):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")  # slices of 7 cells cut rows in the middle
    shape = (5, 4, 3)
    dense = np.where(rng.random(shape) < 0.4, rng.integers(1, 9, shape), 0).astype(dtype)
    np.save(tmp_path / "d.npy", np.asarray(dense, order=order))
    out = str(tmp_path / "d.parquet")
    convert(str(tmp_path / "d.npy"), out)
    idx, vals, meta = _read(out)
    assert meta.shape == shape and meta.value_type == dtype and meta.unique
    assert meta.sort_order == ((0, 1, 2) if order == "C" else (2, 1, 0))
    assert len(vals) == np.count_nonzero(dense)
    np.testing.assert_array_equal(sptool.read(out).to_dense(), dense)


@pytest.mark.parametrize("fill", [7.0, float("nan")])
def test_npy_fill_value(tmp_path, rng, fill):
    dense = rng.standard_normal((6, 8))
    dense[rng.random((6, 8)) < 0.5] = fill
    np.save(tmp_path / "f.npy", dense)
    convert(str(tmp_path / "f.npy"), str(tmp_path / "f.parquet"), fill_value=fill)
    _, vals, meta = _read(str(tmp_path / "f.parquet"))
    assert len(vals) == np.count_nonzero(~((dense == fill) | (np.isnan(dense) & np.isnan(fill))))
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "f.parquet")).to_dense(), dense)
    convert(str(tmp_path / "f.parquet"), str(tmp_path / "g.npy"))  # export: todense, fill restored
    np.testing.assert_array_equal(np.load(tmp_path / "g.npy"), dense)


def test_npy_export_from_text_and_default_value(tmp_path):
    (tmp_path / "a.tns").write_text("1 1 2.5\n2 3 -1\n1 1 0.5\n")
    convert(str(tmp_path / "a.tns"), str(tmp_path / "a.npy"), fill_value=9.0)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), [[3.0, 9, 9], [9, 9, -1]])
    assert _listing(tmp_path) == ["a.npy", "a.tns"]  # the staging file is gone


def _code_units(units, dtype="<U2") -> np.ndarray:
    """A str array holding the UTF-32 units given, valid or not, as a file written by other
    software (or damaged) may hold them."""
    return np.frombuffer(np.asarray(units, dtype=np.dtype(dtype[0] + "u4")).tobytes(), dtype=dtype)


def _npy_entries(arr: np.ndarray, fill) -> dict:
    """The oracle: each element of ``arr`` that is not ``fill``, by its coordinate, as NumPy reads it."""
    return {tuple(int(i) for i in ix): arr[tuple(ix)].item() for ix in np.argwhere(arr != fill)}


ODD_NPY = {
    "objects": lambda: np.array([1, "a", None], dtype=object),
    "structured": lambda: np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),
    "nested-structured": lambda: np.zeros(3, dtype=[("a", [("b", "<i4")])]),
    "void": lambda: np.zeros(3, dtype="V4"),
    "zero-d": lambda: np.array(5.0),
    "datetime": lambda: np.array(["2020-01-01", "NaT"], dtype="datetime64[D]"),
    "timedelta": lambda: np.array([1, 0], dtype="timedelta64[s]"),
    "above-0x10ffff": lambda: _code_units([[0x61, 0], [0x110000, 0], [0x62, 0x63]]),
    "surrogate": lambda: _code_units([[0, 0], [0x61, 0xD800], [0x62, 0]]),
    "big-endian-0xffffffff": lambda: _code_units([[0x61, 0], [0xFFFFFFFF, 0]], ">U2"),
    "float64-bytes-read-as-str": lambda: np.frombuffer(np.array([0.0, 1.5, -2.25, 1e300]).tobytes(), "<U2"),
    "long-double": lambda: np.array([0, 1.5], dtype=np.longdouble),
    "bytes": lambda: np.array([b"ab", b"", b"a\x00b", b"\xff\xfe"], dtype="S3"),
    "str-with-nul": lambda: np.array(["a\x00b", "", "\x00x", "yz"], dtype="<U3"),
    "empty-str-width": lambda: np.zeros((2, 2), dtype="<U0"),
    "complex": lambda: np.array([[0, 1 + 2j], [3j, 0]]),
    "fortran": lambda: np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "big-endian": lambda: np.array([0, 1.5, -2], dtype=">f8"),
    "half": lambda: np.array([0, 1.5], dtype=np.float16),
    "empty": lambda: np.zeros((0, 3)),
}


@pytest.mark.parametrize("name", list(ODD_NPY))
def test_odd_npy_inputs_convert_or_are_refused_in_one_line(tmp_path, name):
    """Whatever a .npy holds, convert writes NumPy's elements (but the fill) or refuses it in one
    line with exit 1 or 2: never an internal error."""
    arr = ODD_NPY[name]()
    src, out = str(tmp_path / "in.npy"), str(tmp_path / "out.parquet")
    np.save(src, arr, allow_pickle=True)
    r = CliRunner().invoke(cli, ["-q", "convert", src, "-o", out])
    assert r.exit_code in (0, 1, 2), r.output
    if r.exit_code:
        assert r.output.startswith("Error: ") and r.output.count("\n") == 1 and "internal error" not in r.output
        assert not os.path.exists(out)
        return
    idx, vals, meta = _read(out)
    fill = np.zeros((), dtype=arr.dtype).item()
    got = {tuple(int(i) for i in ix): v.item() if isinstance(v, np.generic) else v for ix, v in zip(idx, vals)}
    assert got == _npy_entries(arr, fill) and meta.shape == arr.shape


@pytest.mark.parametrize("name, element, unit", [("above-0x10ffff", [1], "0x110000"), ("surrogate", [1], "0xd800"),
                                                 ("big-endian-0xffffffff", [1], "0xffffffff")])
def test_a_str_npy_with_invalid_code_points_is_a_data_error(tmp_path, name, element, unit):
    src = str(tmp_path / "in.npy")
    np.save(src, ODD_NPY[name]())
    with pytest.raises(DataError, match=rf"element {re.escape(str(element))}: {unit} is not a Unicode code point") as e:
        convert_api(src, str(tmp_path / "out.parquet"))
    assert e.value.path == src and _listing(tmp_path) == ["in.npy"]


def test_npy_text_fill_values_and_value_types(tmp_path):
    """A bytes array's --fill-value is text (UTF-8) or bytes; numbers do not become text, nor text
    numbers: each refused as a usage error."""
    arr = ODD_NPY["bytes"]()
    src, out = str(tmp_path / "in.npy"), str(tmp_path / "out.parquet")
    np.save(src, arr)
    r = CliRunner().invoke(cli, ["-q", "convert", src, "-o", out, "--fill-value", "ab"])
    assert r.exit_code == 0, r.output
    t = sptool.read(out)
    assert dict(zip(map(tuple, t.indices.tolist()), t.values.tolist())) == _npy_entries(arr, b"ab")
    assert t.fill_value == b"ab"
    np.save(src, np.array([0.0, 1.5]))
    for args in (["--fill-value", "x"], ["--dtype", "string"]):
        r = CliRunner().invoke(cli, ["-q", "convert", src, "-o", out, *args])
        assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    np.save(src, np.array(["a", "b"]))
    r = CliRunner().invoke(cli, ["-q", "convert", src, "-o", out, "--fill-value", "1.5"])
    assert r.exit_code == 2 and "--fill-value" in r.output and r.output.count("\n") == 1, r.output


# ---------------------------------------------------------------------------------------------
# .csv / .tsv


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128"])
def test_csv_round_trip_against_loadtxt(tmp_path, rng, fmt, dtype, chunks):
    t = random_tensor(rng, (7, 6, 5), 50, dtype=dtype, duplicates=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / f"t.{fmt}"))
    delim = "," if fmt == "csv" else "\t"
    lines = (tmp_path / f"t.{fmt}").read_text().splitlines()
    cols = ["values.real", "values.imag"] if dtype.startswith("complex") else ["values"]
    assert lines[0] == delim.join(["indices_0", "indices_1", "indices_2"] + cols)
    table = np.loadtxt(tmp_path / f"t.{fmt}", delimiter=delim, skiprows=1, ndmin=2)
    np.testing.assert_array_equal(table[:, :3], t.indices)  # 0-based
    vals = table[:, 3] + 1j * table[:, 4] if dtype.startswith("complex") else table[:, 3]
    np.testing.assert_array_equal(vals, t.values)
    convert(str(tmp_path / f"t.{fmt}"), str(tmp_path / "back.parquet"), dtype=dtype, shape=(7, 6, 5))
    idx, back, _ = _read(str(tmp_path / "back.parquet"))
    np.testing.assert_array_equal(idx, t.indices)
    assert back.tobytes() == t.values.tobytes()


def test_csv_without_header_and_bad_header(tmp_path):
    (tmp_path / "a.csv").write_text("0,1,2.5\n3,0,1\n")
    assert convert(str(tmp_path / "a.csv"), str(tmp_path / "a.parquet"))["shape"] == [4, 2]
    (tmp_path / "w.csv").write_bytes(b"\xef\xbb\xbfindices_0,indices_1,values\r\n0,1,2.5\r\n3,0,1\r\n")  # Excel
    assert convert(str(tmp_path / "w.csv"), str(tmp_path / "w.parquet"))["shape"] == [4, 2]
    assert _read(str(tmp_path / "w.parquet"))[1].tolist() == [2.5, 1.0]
    (tmp_path / "b.csv").write_text("row,col,value\n0,1,2.5\n")
    with pytest.raises(DataError, match="line 1: expected the header 'indices_0,indices_1,values'"):
        convert(str(tmp_path / "b.csv"), str(tmp_path / "b.parquet"))
    (tmp_path / "c.csv").write_text("indices_0,values\n1,2\n-1,3\n")
    with pytest.raises(DataError, match=r"c\.csv: line 3: field 1: index -1 is less than 0"):
        convert(str(tmp_path / "c.csv"), str(tmp_path / "c.parquet"))


# ---------------------------------------------------------------------------------------------
# sptool to sptool, value types, claims


def test_sptool_to_sptool_keeps_claims_and_casts(tmp_path, rng):
    t = random_tensor(rng, (8, 7), 30, sort=True)
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "t.arrows"))
    convert(str(tmp_path / "t.arrows"), str(tmp_path / "d") + "/", dtype="float32")
    idx, vals, meta = _read(str(tmp_path / "d"))
    assert meta.canonical and meta.value_type == "float32"
    np.testing.assert_array_equal(vals, t.values.astype(np.float32))
    with pytest.raises(DataError, match=r"t\.parquet: row \d+: value .* is not a int8 value"):
        convert(str(tmp_path / "t.parquet"), str(tmp_path / "i.parquet"), dtype="int8")
    assert not (tmp_path / "i.parquet").exists()


def test_refusals(tmp_path, rng):
    t = random_tensor(rng, (4, 3, 2), 5, fill_value=1.5)
    sptool.write(t, str(tmp_path / "f.parquet"))
    with pytest.raises(UsageError, match="fill value is 1.5, but .tns files have no fill value"):
        convert(str(tmp_path / "f.parquet"), str(tmp_path / "f.tns"))
    with pytest.raises(UsageError, match="a .mtx file holds a matrix; the tensor has 3 dimensions"):
        convert(str(tmp_path / "f.parquet"), str(tmp_path / "f.mtx"), fill_value=0.0)
    h = random_tensor(rng, (4, 3), 3, sparse_ndim=1)
    sptool.write(h, str(tmp_path / "h.parquet"))
    with pytest.raises(UsageError, match="dense dimensions"):
        convert(str(tmp_path / "h.parquet"), str(tmp_path / "h.csv"))
    with pytest.raises(UsageError, match="cannot tell the output format"):
        convert(str(tmp_path / "h.parquet"), str(tmp_path / "h.xyz"))
    with pytest.raises(UsageError, match="--index-base applies to text formats"):
        convert(str(tmp_path / "h.parquet"), str(tmp_path / "h.npz"), index_base=0)
    assert _listing(tmp_path) == ["f.parquet", "h.parquet"]


def test_format_from_content(tmp_path):
    (tmp_path / "matrix.txt").write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 3\n")
    assert convert(str(tmp_path / "matrix.txt"), str(tmp_path / "m.parquet"))["from"] == "mtx"
    assert convert(str(tmp_path / "matrix.txt"), str(tmp_path / "m.out"), to_format="tns")["to"] == "tns"
    assert (tmp_path / "m.out").read_text() == "1 2 3\n"


# ---------------------------------------------------------------------------------------------
# command line: pipes, messages, exit codes


def test_cli_stdin_text_to_stdout_stream(tmp_path):
    runner = CliRunner()
    tns = b"# from a pipe\n1 1 1 0.5\n2 3 1 1e-300\n"
    result = runner.invoke(cli, ["-q", "convert", "-", "--from", "tns", "-o", "-"], input=tns)
    assert result.exit_code == 0, result.output
    (tmp_path / "s.arrows").write_bytes(result.stdout_bytes)
    idx, vals, meta = _read(str(tmp_path / "s.arrows"))
    assert idx.tolist() == [[0, 0, 0], [1, 2, 0]] and vals.tolist() == [0.5, 1e-300] and meta.shape == (2, 3, 1)
    # and the stream back to text on stdout
    back = runner.invoke(cli, ["-q", "convert", "-", "--to", "tns", "-o", "-"], input=result.stdout_bytes)
    assert back.exit_code == 0 and back.stdout_bytes == b"1 1 1 0.5\n2 3 1 1e-300\n"


def test_cli_summary_and_help(tmp_path):
    (tmp_path / "a.tns").write_text("1 2 3 4.5\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["convert", str(tmp_path / "a.tns"), "-o", str(tmp_path / "a.parquet"),
                                 "--dtype", "float32"])
    assert result.exit_code == 0
    assert "convert: read " in result.stderr and "(1 rows), wrote " in result.stderr and "nnz 1)" in result.stderr
    assert "float32" in result.stderr
    assert _read(str(tmp_path / "a.parquet"))[2].value_type == "float32"
    help_text = runner.invoke(cli, ["convert", "--help"]).output
    assert "Memory:" in help_text and "sptool convert sample_data/tensor3d.tns -o /tmp/tensor3d.parquet" in help_text


@pytest.mark.parametrize("content, args, code, message", [
    ("1 1 1 2.0\n1 2 3\n", [], 1, "Error: {p}: line 2: expected 4 fields (3 indices and a value), got 3"),
    ("1 1 1 2.0\n" * 16 + "0 1 1 1\n", [], 1,
     "Error: {p}: line 17: field 1: index 0 is less than 1, the index base (use --index-base 0 for 0-based files)"),
    ("1 1 1 2.0\n1 1 x 1\n", [], 1, "Error: {p}: line 2: field 3: index 'x' is not an integer"),
    ("1 1 1 2.0\n1 1 1 1,5\n", [], 1, "Error: {p}: line 2: field 4: value '1,5' is not a number"),
    ("1 1 1 2.5\n", ["--dtype", "int8"], 1, "Error: {p}: line 1: field 4: value '2.5' is not an integer"),
    ("1 1 1 300\n", ["--dtype", "int8"], 1, "Error: {p}: line 1: value 300 is not a int8 value"),
    ("1 1 1 2.5\n", ["--shape", "1,x"], 2, "Error: --shape '1,x' must be a comma-separated list of integers"),
    ("1 1 1 2.5\n", ["--dtype", "float128"], 2, "Error: unknown value type 'float128'"),
])
def test_cli_errors_are_one_line_and_leave_nothing(tmp_path, content, args, code, message):
    path = tmp_path / "x.tns"
    path.write_text(content)
    result = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "x.parquet")] + args)
    assert result.exit_code == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message.format(p=path)), lines
    assert _listing(tmp_path) == ["x.tns"]


def test_cli_missing_input_and_npz_from_stdin(tmp_path):
    result = CliRunner().invoke(cli, ["convert", str(tmp_path / "nope.tns"), "-o", str(tmp_path / "n.parquet")])
    assert result.exit_code == 2 and "no such file" in result.stderr.lower()
    result = CliRunner().invoke(cli, ["convert", "-", "--from", "npz", "-o", str(tmp_path / "n.parquet")],
                                input=b"PK")
    assert result.exit_code == 2 and "cannot be read from stdin" in result.stderr
    assert _listing(tmp_path) == []


def test_sample_file_converts(tmp_path):
    sample = os.path.join(os.path.dirname(__file__), "..", "sample_data", "tensor3d.tns")
    if not os.path.exists(sample):
        pytest.skip("sample_data/tensor3d.tns not generated")
    out = str(tmp_path / "t.parquet")
    assert convert(sample, out)["shape"] == [40, 30, 20]
    want = np.loadtxt(sample, ndmin=2)
    idx, vals, _ = _read(out)
    np.testing.assert_array_equal(idx, want[:, :3] - 1)
    np.testing.assert_array_equal(vals, want[:, 3])


def test_a_text_file_named_npy_is_refused_in_sptools_words(tmp_path):
    fake = tmp_path / "x.npy"
    fake.write_text("1 2 3\n")
    objects = tmp_path / "o.npy"
    np.save(objects, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for path, reason in ((fake, "not a .npy file (it has no NumPy header)"),
                         (objects, "the .npy holds Python objects")):
        with pytest.raises(sptool.InputError, match=re.escape(reason)):
            convert(str(path), str(tmp_path / "out.parquet"))
        with pytest.raises(sptool.InputError, match=re.escape(reason)):
            sptool.mul(sptool.eye(3, 3, None), str(path), None)
    assert not (tmp_path / "out.parquet").exists()


def _compress(data: bytes, codec: str) -> bytes:
    """The oracle compressors: Python's own modules, and pyarrow's zstd (a standard frame)."""
    import bz2
    import gzip
    import lzma

    import pyarrow as pa

    return {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress,
            "zst": lambda b: pa.compress(b, codec="zstd", asbytes=True)}[codec](data)


@pytest.mark.parametrize("codec", ["gz", "bz2", "xz", "zst"])
def test_compressed_text_in_and_out(tmp_path, rng, codec):
    t = random_tensor(rng, (7, 6, 5), 60)
    lines = "".join(f"{i + 1} {j + 1} {k + 1} {float(v)!r}\n" for (i, j, k), v in zip(t.indices, t.values))
    src = tmp_path / f"t.tns.{codec}"
    src.write_bytes(_compress(lines.encode(), codec))
    convert(str(src), str(tmp_path / "t.parquet"), shape=(7, 6, 5))
    got = sptool.read(str(tmp_path / "t.parquet"))
    np.testing.assert_array_equal(got.to_dense(), dense_oracle(t))
    # On stdin the codec is told by the first bytes.
    r = CliRunner().invoke(cli, ["-q", "convert", "-", "--from", "tns", "--shape", "7,6,5", "-o",
                                 str(tmp_path / "s.parquet")], input=src.read_bytes())
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "s.parquet")).to_dense(), dense_oracle(t))
    # Written compressed when the output's name says so: the same text once decompressed.
    convert(str(tmp_path / "t.parquet"), str(tmp_path / "plain.tns"))
    convert(str(tmp_path / "t.parquet"), str(tmp_path / f"out.tns.{codec}"))
    import bz2
    import gzip
    import lzma

    import pyarrow as pa

    packed = (tmp_path / f"out.tns.{codec}").read_bytes()
    unpacked = {"gz": gzip.decompress, "bz2": bz2.decompress, "xz": lzma.decompress,
                "zst": lambda b: pa.CompressedInputStream(pa.BufferReader(b), "zstd").read()}[codec](packed)
    assert unpacked == (tmp_path / "plain.tns").read_bytes()


@pytest.mark.parametrize("codec,name", [("gz", "gzip"), ("bz2", "bz2"), ("xz", "xz"), ("zst", "zstd")])
def test_a_truncated_compressed_input_is_an_input_error(tmp_path, rng, codec, name):
    t = random_tensor(rng, (7, 6), 40)
    lines = "".join(f"{i + 1} {j + 1} {float(v)!r}\n" for (i, j), v in zip(t.indices, t.values))
    data = _compress(lines.encode(), codec)
    (tmp_path / f"cut.tns.{codec}").write_bytes(data[: len(data) // 2])
    r = CliRunner().invoke(cli, ["convert", str(tmp_path / f"cut.tns.{codec}"), "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and f"cannot decompress ({name})" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "o.parquet").exists()


def test_compression_is_for_text_formats_only(tmp_path):
    for dst in ("d.npz.gz", "d.parquet.gz", "d.npy.xz"):
        r = CliRunner().invoke(cli, ["convert", "sample_data/digits.parquet", "-o", str(tmp_path / dst)])
        assert r.exit_code == 2 and "only text formats (tns, mtx, csv, tsv, svmlight, jsonl)" in r.output, r.output
    assert list(tmp_path.iterdir()) == []


def test_text_blocks_survive_a_held_frame(tmp_path):
    """Dask's sampling profiler holds worker frames; a frame kept alive from inside the read must not
    keep a view of the block (a ``BufferError`` on resizing it was seen on a cluster)."""
    import sys

    from sptool.converters.text import OpenedText

    data = b"".join(b"%d %d 1.5\n" % (i, i) for i in range(1, 5000)) + b"7 7 2.5"  # no final newline
    path = tmp_path / "t.tns"
    path.write_bytes(data)
    held = []

    class Holding:
        def __init__(self, f):
            self.f = f

        def readinto(self, view):
            held.append(sys._getframe(1))  # what a profiler's stack sample keeps
            return self.f.readinto(view)

    text = OpenedText(str(path))
    text.f = Holding(text.f)
    assert b"".join(bytes(b) for b in text.blocks(4096)) == data  # the input, whole, as the oracle
    assert held
