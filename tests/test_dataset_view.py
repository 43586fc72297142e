"""A part directory read as one tensor on one machine (formats/SPEC.md section 7): the parts'
common order holds for the whole where no seam goes down, uniqueness where every seam goes up
(the leading index's statistics decide most seams, the rows at a seam are read where they tie),
and what an op then trusts of the whole it verifies as the rows pass.  NumPy is the oracle: the
concatenated rows' row-major codes."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest

import sptool
from sptool.errors import DataError
from sptool.io import open_sink

SHAPE = (40, 30, 20)


def _codes(idx):
    return (idx[:, 0] * SHAPE[1] + idx[:, 1]) * SHAPE[2] + idx[:, 2]


def _part(path, idx, val, statistics=True):
    """A part of small row groups (so that a seam lies between a last and a first row group of
    many), claiming what its own rows hold (the sink detects it); without ``statistics``, its
    row groups are rewritten without them (so every seam is decided by reading its rows)."""
    meta = sptool.SparseTensor(np.empty((0, 3), np.int64), np.empty(0), SHAPE).meta
    with open_sink(str(path), meta.with_(nnz=None)) as sink:
        sink.row_group_rows = 16
        sink.write(np.ascontiguousarray(idx.T), val)
    if not statistics:
        f = pq.ParquetFile(path)
        kept = {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"}
        table = f.read().replace_schema_metadata(kept)
        pq.write_table(table, path, row_group_size=16, write_statistics=False)
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).statistics is None


def _canonical(rng, n):
    idx = np.unique(np.stack([rng.integers(0, s, n) for s in SHAPE], axis=1), axis=0)
    return idx, rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))


def _layout(rng, layout):
    """Pieces of one canonical tensor, cut and rearranged as ``layout`` says."""
    idx, val = _canonical(rng, 3000)
    lead = idx[:, 0]
    if layout == "apart":  # cut between leading indices: the statistics decide every seam
        cuts = [int(np.searchsorted(lead, v)) for v in (10, 20, 30)]
    else:  # cut inside runs of a leading index: the seams' rows are read
        cuts = [len(idx) // 4 + 3, len(idx) // 2 + 5, 3 * len(idx) // 4 + 1]
        assert all(lead[c - 1] == lead[c] for c in cuts)  # each seam ties on the leading index
    pieces = list(zip(np.split(idx, cuts), np.split(val, cuts)))
    if layout == "repeat":  # part 2 begins with part 1's last row: sorted, not unique
        (a, av), (b, bv) = pieces[1], pieces[2]
        pieces[2] = (np.concatenate([a[-1:], b]), np.concatenate([av[-1:], bv]))
    elif layout == "down":  # two parts swapped: a seam goes down (the statistics say so)
        pieces[1], pieces[2] = pieces[2], pieces[1]
    elif layout == "down_tied":  # the same leading index on both sides of a seam, the rest going down
        (a, av), (b, bv) = pieces[1], pieces[2]
        tie = a[-1, 0]
        moved = b[:, 0] == tie
        assert moved.any() and (a[:, 0] == tie).sum() > 1
        keep = a[:, 0] != tie
        pieces[1] = (np.concatenate([a[keep], b[moved]]), np.concatenate([av[keep], bv[moved]]))
        pieces[2] = (np.concatenate([a[~keep], b[~moved]]), np.concatenate([av[~keep], bv[~moved]]))
        pieces[1] = tuple(x[np.argsort(_codes(pieces[1][0]), kind="stable")] for x in pieces[1])
        pieces[2] = tuple(x[np.argsort(_codes(pieces[2][0]), kind="stable")] for x in pieces[2])
    elif layout == "empty":  # an empty part between two others
        pieces.insert(2, (idx[:0], val[:0]))
    return pieces


@pytest.mark.parametrize("statistics", [True, False], ids=["statistics", "no-statistics"])
@pytest.mark.parametrize("layout", ["apart", "tied", "repeat", "down", "down_tied", "empty"])
def test_claims_of_the_whole_are_numpys(tmp_path, rng, layout, statistics):
    pieces = _layout(rng, layout)
    d = tmp_path / "in"
    d.mkdir()
    for i, (idx, val) in enumerate(pieces):
        _part(d / f"part-{i:06d}.parquet", idx, val, statistics)
    assert all(sptool.open(str(d / p)).meta.canonical for p in os.listdir(d) if sptool.open(str(d / p)).meta.nnz)
    idx = np.concatenate([p[0] for p in pieces])
    steps = np.diff(_codes(idx))
    meta = sptool.open(str(d) + "/").meta
    assert (meta.sort_order == (0, 1, 2)) == bool(np.all(steps >= 0))
    assert meta.unique == bool(np.all(steps > 0))
    assert meta.canonical == bool(np.all(steps > 0))
    # An op gives NumPy's result whatever the claims (trusted and checked, or sorted):
    out = str(tmp_path / "sum.parquet")
    sptool.reduce(str(d) + "/", out, op="sum", axis=1)
    got = sptool.read(out)
    want = np.zeros((SHAPE[0], SHAPE[2]))
    np.add.at(want, (idx[:, 0], idx[:, 2]), np.concatenate([p[1] for p in pieces]))
    assert np.array_equal(got.to_dense(), want)


def test_a_part_whose_claim_lies_is_caught_by_the_op_that_trusts_it(tmp_path, rng):
    """The whole's order is taken from the parts' claims: a part whose rows break its own claim
    (its seams in order) is an error naming the row, as the same part alone would be."""
    idx, val = _canonical(rng, 2000)
    cut = int(np.searchsorted(idx[:, 0], 20))
    d = tmp_path / "in"
    d.mkdir()
    _part(d / "part-000000.parquet", idx[:cut], val[:cut])
    _part(tmp_path / "good.parquet", idx[cut:], val[cut:])
    file = pq.ParquetFile(tmp_path / "good.parquet")
    rows = file.read()
    n = rows.num_rows
    perm = np.r_[0, n - 2, np.arange(1, n - 2), n - 1]  # first and last rows kept: the statistics agree
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    pq.write_table(rows.take(perm).replace_schema_metadata(kept), d / "part-000001.parquet", row_group_size=16)
    assert sptool.open(str(d) + "/").meta.canonical  # as its parts and seams say
    with pytest.raises(DataError, match="out of order.*although the metadata says sort_order"):
        sptool.add(str(d) + "/", str(d) + "/", str(tmp_path / "a.parquet"))
    assert not (tmp_path / "a.parquet").exists()


def test_a_float_sum_does_not_depend_on_the_batches(tmp_path, rng):
    """A sorted input is reduced in one pass whose batches depend on --memory (and on how a
    cluster cuts the input): each coordinate's rows are still added one after another, in input
    order, as NumPy's unbuffered np.add.at adds them."""
    n = 400_000
    idx = np.unique(np.stack([rng.integers(0, 50, n), rng.integers(0, 4000, n), rng.integers(0, 20, n)], axis=1),
                    axis=0)
    val = rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))
    path = str(tmp_path / "in.parquet")
    sptool.write(sptool.SparseTensor(idx, val, (50, 4000, 20)), path)
    want = np.zeros((50, 20))
    np.add.at(want, (idx[:, 0], idx[:, 2]), val)
    for memory in ("16MiB", "40MiB", "1GiB"):
        out = str(tmp_path / f"r-{memory}.parquet")
        sptool.reduce(path, out, op="sum", axis=1, memory=memory)
        got = sptool.read(out).to_dense()
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), memory
