"""Formats as other software writes them, checked against that software: FROSTT .tns with trailing
comments (NumPy's loadtxt, which reads '#' as a comment anywhere on a line), Matrix Market as
SciPy's mmread/mmwrite read and write it (SciPy's own test texts among the inputs), scipy.sparse
.npz files of every format save_npz writes, and inputs told by their content (scikit-learn's own
svmlight test files, text on stdin)."""

from __future__ import annotations

import numpy as np
import pytest

import sptool
from sptool.errors import DataError
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
