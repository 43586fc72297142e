"""svmlight / libsvm through sptool convert, against scikit-learn's loader and writer
(load_svmlight_file, dump_svmlight_file) on its own test files and on generated ones, the
compiled parser against its plain-Python reference, and blocks cut inside lines."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor
from pty_terminal import cursor_restored, run_in_terminal
from references import svmlight as ref

import sptool
from sptool import _textparse as tp
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.convert import convert as convert_api


def _sklearn_datasets():
    # Imported by the tests that call it, not at collection, where it costs a second.
    return pytest.importorskip("sklearn.datasets")


def load_svmlight_file(*args, **kwargs):
    return _sklearn_datasets().load_svmlight_file(*args, **kwargs)


def dump_svmlight_file(*args, **kwargs):
    return _sklearn_datasets().dump_svmlight_file(*args, **kwargs)


@pytest.fixture(params=[None, 7, 200], ids=["default-blocks", "7-byte-blocks", "200-byte-blocks"])
def blocks(request, monkeypatch):
    """Text parsed in tiny blocks (the $SPTOOL_TEXT_BLOCK_BYTES tuning), so that block boundaries
    fall inside lines, words and numbers."""
    if request.param is not None:
        monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", str(request.param))
    return request.param


def _valid(path):
    report = sptool.validate(path)
    assert report.valid, report
    return path


def _read(path) -> sptool.SparseTensor:
    t = sptool.read(_valid(path))
    assert t.meta.sort_order == (0, 1) and t.meta.unique
    return t


def _same_matrix(t: sptool.SparseTensor, X):
    """The tensor holds exactly X's stored entries (explicit zeros included) and its shape."""
    X = sp.csr_array(X)
    X.sort_indices()
    assert tuple(t.shape) == X.shape
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    np.testing.assert_array_equal(t.indices[:, 0], rows)
    np.testing.assert_array_equal(t.indices[:, 1], X.indices)
    assert t.values.dtype == X.data.dtype
    np.testing.assert_array_equal(t.values, X.data)


def _copy(name, tmp_path, suffix=".svm") -> str:
    dst = str(tmp_path / (os.path.splitext(name)[0] + suffix))
    shutil.copy(os.path.join(os.path.dirname(_sklearn_datasets().__file__), "tests", "data", name), dst)
    return dst


# ---------------------------------------------------------------------------------------------
# the compiled parser against its reference


def _kernel(data: bytes, multilabel: bool) -> dict:
    nl, colons, commas = tp.count_svmlight(data)
    lines = nl + 1
    keys = np.zeros((2, colons + 1), np.int64)
    vals = np.zeros(colons + 1)
    labels = np.zeros(lines + commas + 1)
    lp = np.zeros(lines + 1, np.int64)
    qids = np.zeros(lines, np.int64)
    has_qid = np.zeros(lines, np.uint8)
    r = tp.parse_svmlight(data, multilabel, keys, vals, labels, lp, qids, has_qid)
    nrows, n, nlab, nlines, err, err_line, _off, min_id, max_id, first_unsorted = r
    out = {"rows": keys[0, :n].tolist(), "cols": keys[1, :n].tolist(), "vals": vals[:n].tolist(),
           "lines": nlines, "min_id": min_id if n else None, "max_id": max_id if n else None,
           "first_unsorted": first_unsorted, "qids": [int(q) if h else None for q, h in zip(qids, has_qid)][:nrows]}
    if multilabel:
        out["labels"] = [labels[lp[i]:lp[i + 1]].tolist() for i in range(nrows)]
    else:
        out["labels"] = labels[:nrows].tolist()
    names = {getattr(tp, k): k for k in dir(tp) if k.startswith("SV_")}
    out["error"] = None if err == tp.OK else (names[err], err_line)
    return out


def _random_lines(rng, n, multilabel):
    lines = []
    for i in range(n):
        kind = rng.integers(0, 10)
        if kind == 0:
            lines.append("# a comment: 1:2")
            continue
        if kind == 1:
            lines.append("   ")
            continue
        if multilabel:
            head = ",".join(repr(float(x)) for x in rng.integers(0, 5, rng.integers(0, 3)))
        else:
            head = repr(float(rng.standard_normal()))
        words = [head] if head else []
        if rng.random() < 0.3:
            words.append(f"qid:{int(rng.integers(-5, 100))}")
        ids = rng.choice(50, size=rng.integers(0, 6), replace=False)
        if rng.random() < 0.7:
            ids = np.sort(ids)
        words += [f"{i}:{float(v)!r}" for i, v in zip(ids, rng.standard_normal(len(ids)))]
        line = rng.choice([" ", "\t", "  "]).join(words)
        if rng.random() < 0.2:
            line += " # trailing 3:4"
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("multilabel", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_kernel_matches_reference(multilabel, seed):
    data = _random_lines(np.random.default_rng(seed), 60, multilabel)
    assert _kernel(data, multilabel) == ref.parse_svmlight(data, multilabel)


@pytest.mark.parametrize("line, code", [
    (b"x 1:2", "SV_LABEL"), (b"1 3", "SV_COLON"), (b"1 a:2", "SV_ID"), (b"1 1.5:2", "SV_ID"),
    (b"1 -1:2", "SV_NEGATIVE"), (b"1 1:x", "SV_VALUE"), (b"1 1:", "SV_VALUE"), (b"1 qid:a 1:2", "SV_QID"),
    (b"1 qid:1.5", "SV_QID"), (b"1 1:2 qid:3", "SV_ID"), (b"1,x 1:2", "SV_LABEL"),
])
def test_kernel_errors_match_reference(line, code):
    data = b"1 1:1\n# c\n" + line + b"\n2 2:2\n"
    multilabel = b"," in line
    got, want = _kernel(data, multilabel), ref.parse_svmlight(data, multilabel)
    assert got["error"] == want["error"] == (code, 2)


# ---------------------------------------------------------------------------------------------
# scikit-learn's own files, its loader as the oracle


@pytest.mark.parametrize("value_type", ["float64", "float32"])
@pytest.mark.parametrize("zero_based", [None, True, False])
def test_sklearn_classification_file(tmp_path, blocks, value_type, zero_based):
    src = _copy("svmlight_classification.txt", tmp_path)
    X, y = load_svmlight_file(src, dtype=np.dtype(value_type), zero_based="auto" if zero_based is None else zero_based)
    out, labels = str(tmp_path / "X.parquet"), str(tmp_path / "y.npy")
    convert_api(src, out, dtype=value_type, zero_based=zero_based, labels=labels)
    _same_matrix(_read(out), X)
    got = np.load(labels)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, y)


def test_labels_as_a_tensor(tmp_path, blocks):
    src = _copy("svmlight_classification.txt", tmp_path)
    _, y = load_svmlight_file(src)
    convert_api(src, str(tmp_path / "X.parquet"), labels=str(tmp_path / "y.parquet"))
    labels = _read_1d(str(tmp_path / "y.parquet"))
    np.testing.assert_array_equal(labels.indices[:, 0], np.arange(len(y)))  # every label stored, zeros too
    np.testing.assert_array_equal(labels.values, y)
    assert labels.shape == (len(y),)


def _read_1d(path):
    t = sptool.read(_valid(path))
    assert t.meta.sort_order == (0,) and t.meta.unique
    return t


def test_sklearn_multilabel_file(tmp_path, blocks):
    src = _copy("svmlight_multilabel.txt", tmp_path)
    X, y = load_svmlight_file(src, multilabel=True)
    out, labels = str(tmp_path / "X.parquet"), str(tmp_path / "y.parquet")
    convert_api(src, out, multilabel=True, labels=labels)
    _same_matrix(_read(out), X)
    ind = _read(labels)
    assert ind.values.dtype == bool and ind.shape[0] == len(y)
    want = {(r, int(label)) for r, row in enumerate(y) for label in row}
    assert set(map(tuple, ind.indices.tolist())) == want
    assert ind.shape[1] == max(label for _, label in want) + 1


def test_sklearn_invalid_files(tmp_path):
    src = _copy("svmlight_invalid.txt", tmp_path)
    with pytest.raises(ValueError):
        load_svmlight_file(src)
    with pytest.raises(DataError, match=r"svmlight_invalid\.svm: line 1: the label 'python' is not a number"):
        convert_api(src, str(tmp_path / "X.parquet"))
    src = _copy("svmlight_invalid_order.txt", tmp_path)
    with pytest.raises(ValueError, match="sorted and unique"):
        load_svmlight_file(src)
    with pytest.raises(DataError, match=r"line 1: feature ids are not sorted and unique \(--strict"):
        convert_api(src, str(tmp_path / "X.parquet"), strict=True)
    assert not (tmp_path / "X.parquet").exists()
    # Without --strict the line is sorted; scikit-learn reads the sorted line as the oracle.
    (tmp_path / "sorted.svm").write_text("-1 2:-5.2 5:2.5 15:1.5\n")
    convert_api(src, str(tmp_path / "X.parquet"))
    _same_matrix(_read(str(tmp_path / "X.parquet")), load_svmlight_file(str(tmp_path / "sorted.svm"))[0])


# ---------------------------------------------------------------------------------------------
# generated files: dump_svmlight_file with every option


def _random_matrix(rng, n_rows, n_cols, density=0.1, dtype=np.float64, first_col=True):
    X = sp.random_array((n_rows, n_cols), density=density, random_state=rng, format="csr", dtype=dtype)
    X = X.toarray()
    X[rng.integers(0, n_rows, 3)] = 0  # empty rows keep their place
    if not first_col:
        X[:, 0] = 0
    return X


@pytest.mark.parametrize("zero_based_file", [True, False])
@pytest.mark.parametrize("flag", [None, "match"])
@pytest.mark.parametrize("value_type", ["float64", "float32"])
def test_generated_files_match_sklearn(tmp_path, rng, blocks, zero_based_file, flag, value_type):
    X = _random_matrix(rng, 40, 25, dtype=np.dtype(value_type))
    X[5, 3] = 0.0
    y = rng.standard_normal(40)
    qid = rng.integers(0, 5, 40)
    path = str(tmp_path / "g.svmlight")
    dump_svmlight_file(X, y, path, zero_based=zero_based_file, query_id=qid, comment="made by the test")
    zb = zero_based_file if flag else None
    Xs, ys, qs = load_svmlight_file(path, dtype=np.dtype(value_type), query_id=True,
                                    zero_based="auto" if zb is None else zb)
    out = str(tmp_path / "X.parquet")
    result = convert_api(path, out, zero_based=zb, labels=str(tmp_path / "y.npy"),
                         query_id=str(tmp_path / "q.npy"), dtype=value_type)
    _same_matrix(_read(out), Xs)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), ys)
    q = np.load(tmp_path / "q.npy")
    assert q.dtype == np.int64
    np.testing.assert_array_equal(q, qs)
    detected = "one" if zb is None and Xs.shape[1] == X.shape[1] and not zero_based_file else None
    if detected:
        assert result["notes"] == ["ids one-based (detected: the smallest id is above 0)"]


def test_generated_multilabel_files(tmp_path, rng, blocks):
    X = _random_matrix(rng, 30, 12)
    y = (rng.random((30, 6)) < 0.3).astype(int)  # dump_svmlight_file takes an indicator matrix
    path = str(tmp_path / "m.libsvm")
    dump_svmlight_file(X, y, path, multilabel=True, zero_based=False)
    Xs, ys = load_svmlight_file(path, multilabel=True)
    convert_api(path, str(tmp_path / "X.parquet"), multilabel=True, labels=str(tmp_path / "y.parquet"))
    _same_matrix(_read(str(tmp_path / "X.parquet")), Xs)
    ind = _read(str(tmp_path / "y.parquet"))
    assert set(map(tuple, ind.indices.tolist())) == {(r, int(v)) for r, row in enumerate(ys) for v in row}
    assert ind.shape[0] == 30


def test_values_are_read_as_python_float_reads_them(tmp_path, rng, blocks):
    """Shortest reprs, long fixed and exponent spellings, 19+ digit mantissas: bit for bit."""
    vals = np.concatenate([rng.standard_normal(300), rng.standard_normal(100) * 1e-300, rng.uniform(0, 1e9, 100)])
    texts = [repr(float(v)) for v in vals] + [f"{v:.25f}" for v in vals[:100]] + [f"{v:.12e}" for v in vals[:100]]
    texts += ["0.00000000123456789012", "1.00000000000000000001", "123456789.123456789123", "-0", "inf", "-inf",
              "1e-320", "+.5", "5.", "1E5"]
    path = tmp_path / "f.svm"
    path.write_text("".join(f"{j % 3} {j % 7 + 1}:{t}\n" for j, t in enumerate(texts)))
    convert_api(str(path), str(tmp_path / "f.parquet"), zero_based=False, vocab_size=7)
    t = _read(str(tmp_path / "f.parquet"))
    want = np.array([float(x) for x in texts])
    np.testing.assert_array_equal(t.values.view(np.uint64), want.view(np.uint64))
    _same_matrix(t, load_svmlight_file(str(path), zero_based=False, n_features=7)[0])


def test_to_npz_keeps_empty_last_rows(tmp_path):
    (tmp_path / "e.svm").write_text("1 2:1.5\n0 1:2\n1\n0 # empty\n")
    X, _ = load_svmlight_file(str(tmp_path / "e.svm"))
    convert_api(str(tmp_path / "e.svm"), str(tmp_path / "e.npz"))
    got = sp.load_npz(str(tmp_path / "e.npz"))
    assert got.shape == X.shape == (4, 2)
    np.testing.assert_array_equal(got.toarray(), X.toarray())


def test_compressed_input(tmp_path, rng, blocks):
    X = _random_matrix(rng, 50, 20)
    path = str(tmp_path / "c.svm")
    dump_svmlight_file(X, rng.integers(0, 2, 50), path)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        g.write(f.read())
    convert_api(path + ".gz", str(tmp_path / "X.parquet"))
    _same_matrix(_read(str(tmp_path / "X.parquet")), load_svmlight_file(path + ".gz")[0])


def test_from_svmlight_by_name(tmp_path, rng):
    X = _random_matrix(rng, 10, 8)
    path = str(tmp_path / "data.txt")
    dump_svmlight_file(X, np.zeros(10), path)
    assert convert_api(path, str(tmp_path / "by-content.parquet"))["from"] == "svmlight"  # told by its lines
    _same_matrix(_read(str(tmp_path / "by-content.parquet")), load_svmlight_file(path)[0])
    convert_api(path, str(tmp_path / "X.parquet"), from_format="svmlight")
    _same_matrix(_read(str(tmp_path / "X.parquet")), load_svmlight_file(path)[0])


def test_unsorted_and_repeated_ids_are_sorted_and_summed(tmp_path, rng, blocks):
    """Each row's entries shuffled and some split into two parts: the dense matrix is the oracle."""
    X = _random_matrix(rng, 30, 15, density=0.3)
    lines = []
    for row in X:
        words = []
        for j in np.flatnonzero(row):
            if rng.random() < 0.4:
                a = float(rng.standard_normal())
                words += [f"{j + 1}:{a!r}", f"{j + 1}:{float(row[j] - a)!r}"]
            else:
                words.append(f"{j + 1}:{float(row[j])!r}")
        rng.shuffle(words)
        lines.append(" ".join(["1"] + words))
    path = tmp_path / "u.svm"
    path.write_text("\n".join(lines) + "\n")
    convert_api(str(path), str(tmp_path / "X.parquet"), zero_based=False, vocab_size=15)
    t = _read(str(tmp_path / "X.parquet"))
    np.testing.assert_allclose(t.to_dense(), X, rtol=1e-12, atol=1e-12)
    assert t.nnz == np.count_nonzero(X)


def test_n_features(tmp_path, rng):
    X = _random_matrix(rng, 20, 10)
    path = str(tmp_path / "n.svm")
    dump_svmlight_file(X, np.zeros(20), path, zero_based=True)
    convert_api(path, str(tmp_path / "X.parquet"), vocab_size=30, zero_based=True)
    _same_matrix(_read(str(tmp_path / "X.parquet")), load_svmlight_file(path, n_features=30, zero_based=True)[0])
    with pytest.raises(ValueError):
        load_svmlight_file(path, n_features=5, zero_based=True)
    line = 1 + min(i for i, row in enumerate(X) if row[5:].any())
    with pytest.raises(DataError, match=rf"n\.svm: line {line}: id \d+ is past --vocab-size 5 \(zero-based"):
        convert_api(path, str(tmp_path / "Y.parquet"), vocab_size=5, zero_based=True)
    assert not (tmp_path / "Y.parquet").exists()


@pytest.mark.parametrize("text", ["", "# nothing\n", "1\n0\n\n2 # only labels\n"])
def test_empty_file_and_files_without_ids(tmp_path, text):
    path = tmp_path / "e.svm"
    path.write_text(text)
    X, y = load_svmlight_file(str(path))
    convert_api(str(path), str(tmp_path / "e.parquet"), labels=str(tmp_path / "y.npy"))
    _same_matrix(_read(str(tmp_path / "e.parquet")), X)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y)


# ---------------------------------------------------------------------------------------------
# malformed lines: the file and the line, exit 1, nothing written


@pytest.mark.parametrize("bad, message", [
    ("1 3:1 4", r"the feature '4' has no colon"),
    ("1 3:1 x:2", r"the feature id in 'x:2' is not an integer"),
    ("1 3:1 4.5:2", r"the feature id in '4.5:2' is not an integer"),
    ("1 -3:1", r"the feature id in '-3:1' is negative"),
    ("1 3:abc", r"the feature value in '3:abc' is not a number"),
    ("1 qid:q 3:1", r"the qid in 'qid:q' is not an integer"),
    ("one 3:1", r"the label 'one' is not a number"),
    ("1 99999999999999999999:1", r"does not fit in a 64-bit integer"),
])
def test_malformed_lines(tmp_path, blocks, bad, message):
    good = "\n".join(f"{i % 2} {i % 5 + 1}:{i}.5" for i in range(40))
    path = tmp_path / "bad.svm"
    path.write_text(good + "\n# a comment\n\n" + bad + "\n1 1:1\n")
    with pytest.raises((ValueError, OverflowError)):
        load_svmlight_file(str(path), query_id=True)  # scikit-learn checks qids only when it keeps them
    r = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "X.parquet"), "--labels",
                                 str(tmp_path / "y.npy")])
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"Error: {path}: line 43: ") and r.output.count("\n") == 1, r.output
    assert re.search(message, r.output), r.output
    assert sorted(os.listdir(tmp_path)) == ["bad.svm"]


def test_one_based_flag_refuses_id_zero(tmp_path):
    path = tmp_path / "z.svm"
    path.write_text("1 1:1\n1 0:2\n")
    with pytest.raises(ValueError, match="Invalid index 0"):
        load_svmlight_file(str(path), zero_based=False)
    with pytest.raises(DataError, match=r"line 2: id 0 in a one-based file"):
        convert_api(str(path), str(tmp_path / "X.parquet"), zero_based=False)


def test_query_id_needs_a_qid_on_every_line(tmp_path):
    path = tmp_path / "q.svm"
    path.write_text("1 qid:1 1:1\n1 2:2\n")
    with pytest.raises(DataError, match=r"line 2: no qid, but --query-id asks for one"):
        convert_api(str(path), str(tmp_path / "X.parquet"), query_id=str(tmp_path / "q.npy"))
    assert sorted(os.listdir(tmp_path)) == ["q.svm"]


def test_svmlight_options_need_svmlight(tmp_path):
    with pytest.raises(UsageError, match="--vocab-size and --label-key apply to svmlight, JSON lines and TFRecord"):
        convert_api("sample_data/tensor3d.tns", str(tmp_path / "t.parquet"), vocab_size=3)
    with pytest.raises(UsageError, match="not --index-base"):
        convert_api("sample_data/digits.svm", str(tmp_path / "t.parquet"), index_base=1)


# ---------------------------------------------------------------------------------------------
# the index base decided late: a zero-based file whose first id 0 comes after the held-back part


def _late_zero_file(path, rng, rows=3000):
    X = _random_matrix(rng, rows, 40, density=0.2, first_col=False)
    X[-1, 0] = 7.0
    dump_svmlight_file(X, np.zeros(rows), str(path), zero_based=True)
    return X


def test_late_zero_reads_the_file_again(tmp_path, rng, monkeypatch):
    monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", "4096")
    path = tmp_path / "late.svm"
    _late_zero_file(path, rng)
    assert os.path.getsize(path) > 200_000  # past what --memory 16MiB holds back (2 MiB / 7)
    X, _ = load_svmlight_file(str(path))  # auto: zero-based, since an id 0 occurs
    r = CliRunner().invoke(cli, ["--memory", "16MiB", "convert", str(path), "-o", str(tmp_path / "X.parquet"),
                                 "--labels", str(tmp_path / "y.npy")])
    assert r.exit_code == 0, r.output
    assert "ids zero-based (detected: an id 0 late in the file; read twice)" in r.output
    _same_matrix(_read(str(tmp_path / "X.parquet")), X)
    assert len(np.load(tmp_path / "y.npy")) == X.shape[0]
    assert f"({X.nnz:,} rows)" in r.output  # entries counted once, not once per read
    # the same to a dense .npy: the second read serves every output kind
    r = CliRunner().invoke(cli, ["--memory", "16MiB", "convert", str(path), "-o", str(tmp_path / "X.npy")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "X.npy"), X.toarray())
    # stdin cannot be read twice: an error that asks for --zero-based, and nothing written
    with open(path, "rb") as f:
        proc = subprocess.run([sys.executable, "-m", "sptool", "--memory", "16MiB", "convert", "-", "--from",
                               "svmlight", "-o", str(tmp_path / "S.parquet")], stdin=f, capture_output=True,
                              env={**os.environ, "SPTOOL_TEXT_BLOCK_BYTES": "4096"})
    assert proc.returncode == 1 and b"give --zero-based" in proc.stderr, proc.stderr
    assert not (tmp_path / "S.parquet").exists()


# ---------------------------------------------------------------------------------------------
# writing svmlight: scikit-learn reads it back


@pytest.mark.parametrize("zero_based", [None, True])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
def test_writer_read_back_by_sklearn(tmp_path, rng, tiny_batches, zero_based, dtype):
    t = random_tensor(rng, (30, 17), 120, dtype=dtype, duplicates=True)  # unsorted, repeated
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    labels = rng.standard_normal(30)
    qids = rng.integers(0, 4, 30)
    np.save(tmp_path / "y.npy", labels)
    np.save(tmp_path / "q.npy", qids)
    out = str(tmp_path / "out.svm")
    convert_api(src, out, labels=str(tmp_path / "y.npy"), query_id=str(tmp_path / "q.npy"), zero_based=zero_based)
    read_dtype = {"bool": np.float64, "int64": np.float64}.get(dtype, np.dtype(dtype))
    X, y, q = load_svmlight_file(out, dtype=read_dtype, query_id=True, zero_based=bool(zero_based),
                                 n_features=17)
    want = dense_oracle(t).astype(read_dtype)
    # Repeated coordinates are summed in another order than the oracle's loop: a rounding apart.
    np.testing.assert_allclose(X.toarray(), want, rtol={"float32": 1e-6, "float64": 1e-14}.get(dtype, 0))
    np.testing.assert_array_equal(y, labels)
    np.testing.assert_array_equal(q, qids)
    assert X.shape == (30, 17)


def test_writer_is_exact_on_canonical_input(tmp_path, rng):
    for dtype in ("float64", "float32"):
        t = random_tensor(rng, (40, 30), 300, dtype=dtype)
        vals = t.values.copy()
        extremes = [1e300, -1e-300, 5e-324] if dtype == "float64" else [3e38, -1e-38, 1e-45]
        vals[:5] = np.array(extremes + [np.inf, -0.0], dtype=dtype)
        t = sptool.SparseTensor(t.indices, vals, t.shape)
        sptool.write(t, str(tmp_path / "t.parquet"))
        convert_api(str(tmp_path / "t.parquet"), str(tmp_path / "o.svm"))
        X, _ = load_svmlight_file(str(tmp_path / "o.svm"), dtype=np.dtype(dtype), zero_based=False, n_features=30)
        X.sort_indices()
        order = np.lexsort(t.indices.T[::-1])
        assert X.nnz == t.nnz  # explicit zeros kept
        np.testing.assert_array_equal(np.repeat(np.arange(40), np.diff(X.indptr)), t.indices[order, 0])
        np.testing.assert_array_equal(X.indices, t.indices[order, 1])
        bits = np.uint64 if dtype == "float64" else np.uint32
        np.testing.assert_array_equal(X.data.view(bits), t.values[order].view(bits))  # bit for bit, -0.0 too


def test_writer_without_labels_and_round_trip(tmp_path, rng):
    t = random_tensor(rng, (25, 9), 60, sort=True)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    convert_api(src, str(tmp_path / "o.svm.gz"))
    X, y = load_svmlight_file(str(tmp_path / "o.svm.gz"), zero_based=False, n_features=9)
    np.testing.assert_array_equal(X.toarray(), dense_oracle(t))
    np.testing.assert_array_equal(y, np.zeros(25))
    convert_api(str(tmp_path / "o.svm.gz"), str(tmp_path / "back.parquet"), zero_based=False, vocab_size=9)
    np.testing.assert_array_equal(_read(str(tmp_path / "back.parquet")).to_dense(), dense_oracle(t))


def test_writer_labels_from_tensors(tmp_path, rng):
    """Multilabel and 1-D tensor labels, as the reader writes them, make the same file again."""
    src = _copy("svmlight_multilabel.txt", tmp_path)
    convert_api(src, str(tmp_path / "X.parquet"), multilabel=True, labels=str(tmp_path / "y.parquet"))
    convert_api(str(tmp_path / "X.parquet"), str(tmp_path / "back.svm"), labels=str(tmp_path / "y.parquet"))
    (X, y), (Xb, yb) = load_svmlight_file(src, multilabel=True), load_svmlight_file(str(tmp_path / "back.svm"),
                                                                                  multilabel=True)
    np.testing.assert_array_equal(Xb.toarray(), X.toarray())
    assert yb == y
    src = _copy("svmlight_classification.txt", tmp_path)
    convert_api(src, str(tmp_path / "C.parquet"), labels=str(tmp_path / "c.parquet"))
    convert_api(str(tmp_path / "C.parquet"), str(tmp_path / "c.svm"), labels=str(tmp_path / "c.parquet"))
    (X, y), (Xb, yb) = load_svmlight_file(src), load_svmlight_file(str(tmp_path / "c.svm"))
    np.testing.assert_array_equal(Xb.toarray(), X.toarray())
    np.testing.assert_array_equal(yb, y)


def test_writer_refuses(tmp_path, rng):
    sptool.write(random_tensor(rng, (4, 5, 6), 10), str(tmp_path / "t3.parquet"))
    with pytest.raises(UsageError, match="holds a matrix"):
        convert_api(str(tmp_path / "t3.parquet"), str(tmp_path / "o.svm"))
    sptool.write(random_tensor(rng, (4, 5), 5), str(tmp_path / "t.parquet"))
    np.save(tmp_path / "short.npy", np.zeros(3))
    with pytest.raises(UsageError, match=r"one number per row \(4\)"):
        convert_api(str(tmp_path / "t.parquet"), str(tmp_path / "o.svm"), labels=str(tmp_path / "short.npy"))
    assert not (tmp_path / "o.svm").exists()


# ---------------------------------------------------------------------------------------------
# the command line, and in a terminal


def test_cli_summary_names_the_base(tmp_path):
    r = CliRunner().invoke(cli, ["convert", "sample_data/digits.svm", "-o", str(tmp_path / "d.parquet")])
    assert r.exit_code == 0, r.output
    assert "ids one-based (detected: the smallest id is above 0)" in r.output
    X, _ = load_svmlight_file("sample_data/digits.svm")
    _same_matrix(_read(str(tmp_path / "d.parquet")), X)


def test_sample_is_the_digits(tmp_path):
    from sklearn.datasets import load_digits

    X, y = load_svmlight_file("sample_data/digits.svm")
    d = load_digits()
    n = X.shape[0]
    np.testing.assert_array_equal(X.toarray(), d.data[:n, : X.shape[1]])
    assert not d.data[:n, X.shape[1]:].any()
    np.testing.assert_array_equal(y, d.target[:n])


def test_in_a_terminal(tmp_path):
    shutil.copy("sample_data/digits.svm", tmp_path / "d.svm")
    code, output = run_in_terminal(["sptool", "convert", "d.svm", "-o", "d.parquet"], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0 and cursor_restored(output), text
    assert "ids one-based (detected" in text
    (tmp_path / "bad.svm").write_text("1 1:1\n1 2\n")
    code, output = run_in_terminal(["sptool", "convert", "bad.svm", "-o", "b.parquet"], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 1 and cursor_restored(output), text
    assert "bad.svm: line 2: the feature '2' has no colon" in text and "Traceback" not in text


# ---------------------------------------------------------------------------------------------
# bounded memory: a file four times larger than --memory 16MiB


def test_large_file_within_memory(tmp_path):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from test_memory import OVERHEAD, peak_rss

    rng = np.random.default_rng(5)
    rows, per_row = 300_000, 10
    ids = np.sort(rng.integers(1, 100_000, (rows, per_row)), axis=1) + np.arange(per_row)  # strictly increasing
    vals = rng.standard_normal((rows, per_row))
    words = pc.binary_join_element_wise(pc.cast(pa.array(ids.ravel()), pa.string()),
                                        pc.cast(pa.array(vals.ravel()), pa.string()), ":")
    lines = pc.binary_join(pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * per_row), words),
                           " ")
    path = tmp_path / "big.svm"
    with open(path, "w") as f:
        for chunk in range(0, rows, 50_000):
            f.write("".join(f"1 {line}\n" for line in lines[chunk:chunk + 50_000].to_pylist()))
    assert os.path.getsize(path) > 4 * (16 << 20)
    rss = peak_rss(["--memory", "16MiB", "convert", str(path), "-o", "big.parquet", "--labels", "y.npy"], tmp_path)
    assert rss < (16 << 20) + OVERHEAD, rss
    t = pq.read_table(tmp_path / "big.parquet")
    np.testing.assert_array_equal(t.column("indices_0").to_numpy(), np.repeat(np.arange(rows), per_row))
    np.testing.assert_array_equal(t.column("indices_1").to_numpy(), ids.ravel() - 1)
    np.testing.assert_array_equal(t.column("values").to_numpy(), vals.ravel())
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.ones(rows))


def test_rows_far_apart_are_written_in_blocks(tmp_path):
    """Entries more than a block of rows apart (the writer builds at most 2^20 lines at once):
    every empty row between them is written, as scikit-learn reads back."""
    from sklearn.datasets import load_svmlight_file

    rows = 3 * (1 << 20) + 5
    t = sptool.SparseTensor([[1, 2], [(1 << 20) + 7, 0], [rows - 1, 4]], [1.5, -2.0, 3.0], shape=(rows, 5))
    sptool.write(t, str(tmp_path / "t.parquet"))
    convert_api(str(tmp_path / "t.parquet"), str(tmp_path / "t.svm"), zero_based=True)
    X, y = load_svmlight_file(str(tmp_path / "t.svm"), n_features=5, zero_based=True)
    assert X.shape == (rows, 5) and (y == 0).all()
    np.testing.assert_array_equal(X.tocoo().row, t.indices[:, 0])
    np.testing.assert_array_equal(X.tocoo().col, t.indices[:, 1])
    np.testing.assert_array_equal(X.tocoo().data, t.values)


def test_rows_in_counts_pairs_as_written(tmp_path):
    """The summary's rows_in counts the id:value pairs of the file, repeats included (they are
    summed into one entry each, so rows can be fewer); both counted here from the text alone."""
    text = "1 qid:7 3:1 1:2 3:3 5:4\n0 qid:7 2:1\n# a comment 9:9\n1\n0 4:0 4:1 4:2\n"
    (tmp_path / "r.svm").write_text(text)
    pairs = [tok for line in text.splitlines() for tok in line.split("#")[0].split()[1:]
             if not tok.startswith("qid:")]
    distinct = sum(len({tok.split(":")[0] for tok in line.split("#")[0].split()[1:] if not tok.startswith("qid:")})
                   for line in text.splitlines())
    out = convert_api(str(tmp_path / "r.svm"), str(tmp_path / "r.parquet"))
    assert out["rows_in"] == len(pairs) == 8
    assert out["rows"] == distinct == 5
