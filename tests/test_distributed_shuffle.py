"""The key ranges of sptool.distributed.ranges, run in this process: the sorted shuffle of the
distributed reorder (partition_sorted and SortedRange: every piece sorted in runs and sampled,
each range merged from the runs) against NumPy's stable lexsort of the whole input, and the
ranges of sorted operands (SortedKeyRange) and the seam filter of seamed.py against NumPy's masks."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest

import sptool
from sptool._memory import budget_of
from sptool.distributed.pieces import Piece
from sptool.distributed.ranges import (
    SortedKeyRange,
    SortedRange,
    _meeting,
    edge_splitters,
    partition_sorted,
    pooled_splitters,
    shuffled_name,
)
from sptool.stream.sort import KeyCodec

pytest.importorskip("distributed")

SHAPE = (40, 30, 20)


def _pieces(tmp_path, rng, sizes, shape=SHAPE):
    """Part files of random rows (repeats included), and their rows as one array."""
    idx_all, val_all, pieces, start = [], [], [], 0
    for i, n in enumerate(sizes):
        idx = np.stack([rng.integers(0, s // 3 if d == 0 else s, n) for d, s in enumerate(shape)], axis=1)
        val = rng.standard_normal(n)
        path = str(tmp_path / f"part-{i:06d}.parquet")
        sptool.write(sptool.SparseTensor(idx, val, shape), path, batch_rows=50)
        pieces.append(Piece(path, None, n, start, str(tmp_path)))
        idx_all.append(idx)
        val_all.append(val)
        start += n
    return pieces, np.concatenate(idx_all), np.concatenate(val_all)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1)])
def test_ranges_merged_from_sorted_runs_are_the_stable_sort(tmp_path, rng, order, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "40")
    monkeypatch.setenv("SPTOOL_RUN_ROWS", "70")  # several runs per piece
    monkeypatch.setenv("SPTOOL_MERGE_ROWS", "16")
    budget = budget_of("16MiB")
    pieces, idx, val = _pieces(tmp_path, rng, [300, 0, 451, 128])
    meta = sptool.open(pieces[0].path).meta
    codec = KeyCodec(meta.shape, order, 3)
    root = tmp_path / "shuffle"
    root.mkdir()
    results = [partition_sorted(p, i, order, str(root), 64, budget, meta) for i, p in enumerate(pieces)]
    runs = [runs for _, runs, _, _ in results]
    assert runs[1] == 0 and min(runs[0], runs[2], runs[3]) > 1, runs
    assert [rows for _, _, rows, _ in results] == [300, 0, 451, 128]
    assert not os.path.exists(root / shuffled_name(1))  # an empty piece writes nothing
    assert sorted(os.listdir(root)) == [shuffled_name(i) for i in (0, 2, 3)]  # no temporary left
    all_keys = np.sort(codec.encode(np.ascontiguousarray(idx.T)))
    for sample, *_ in results:  # each piece's sample is keys of that piece
        assert np.all(np.isin(sample, all_keys))
    splitters = pooled_splitters(results, 5)
    assert 1 < len(splitters) <= 4 and np.all(np.diff(splitters.astype(np.float64)) > 0)
    # The pooled sample's quantiles cut the input near evenly (exact quantiles of each run).
    sizes = np.diff(np.r_[0, np.searchsorted(all_keys, splitters), len(all_keys)])
    assert sizes.max() < 0.4 * len(all_keys), sizes
    files = [(str(root / shuffled_name(i)), r) for i, r in enumerate(runs) if r]
    got_idx, got_val = [], []
    for r in range(len(splitters) + 1):
        lo = splitters[r - 1:r] if r else None
        hi = splitters[r:r + 1] if r < len(splitters) else None
        src = SortedRange(files, lo, hi, meta.with_(sort_order=order), order)
        batches = list(src.iter_batches(budget=budget))
        gi = np.concatenate([np.stack([b.column(d).to_numpy() for d in range(3)], axis=1) for b in batches]
                            ) if batches else np.empty((0, 3), np.int64)
        keys = codec.encode(np.ascontiguousarray(gi.T))
        assert len(gi) == sizes[r] and np.all(np.diff(keys.astype(np.float64)) >= 0)
        got_idx.append(gi)
        got_val += [b.column(3).to_numpy() for b in batches]
    perm = np.lexsort([idx[:, d] for d in reversed(order)])  # stable: equal rows keep input order
    assert np.array_equal(np.concatenate(got_idx), idx[perm])
    assert np.array_equal(np.concatenate(got_val), val[perm])


def test_sorted_key_range_takes_the_rows_of_its_range(tmp_path, rng, monkeypatch):
    """SortedKeyRange (add of sorted operands) against NumPy's mask of the keys in [lo, hi):
    batches taken whole, skipped, or cut at an edge, over pieces that are runs of row groups."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "37")
    budget = budget_of("16MiB")
    n = 900
    idx = np.unique(np.stack([rng.integers(0, s, n) for s in SHAPE], axis=1), axis=0)  # sorted, unique
    val = rng.standard_normal(len(idx))
    path = str(tmp_path / "sorted.parquet")
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "60")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), path, batch_rows=60)
    meta = sptool.open(path).meta
    sizes = [g.num_rows for g in (pq.ParquetFile(path).metadata.row_group(i)
                                  for i in range(pq.ParquetFile(path).metadata.num_row_groups))]
    cut = len(sizes) // 2
    assert cut >= 2
    pieces = [Piece(path, tuple(range(cut)), sum(sizes[:cut])),
              Piece(path, tuple(range(cut, len(sizes))), sum(sizes[cut:]), sum(sizes[:cut]))]
    codec = KeyCodec(SHAPE, (0, 1, 2), 3)
    keys = codec.encode(np.ascontiguousarray(idx.T))
    splitters = keys[[5, 6, 200, 333, len(keys) - 2]]
    for r in range(len(splitters) + 1):
        lo = splitters[r - 1] if r else None
        hi = splitters[r] if r < len(splitters) else None
        src = SortedKeyRange(pieces, meta, codec, lo, hi)
        batches = list(src.iter_batches(budget=budget))
        got = np.concatenate([np.stack([b.column(d).to_numpy() for d in range(3)], axis=1) for b in batches])
        inside = (keys >= (lo if lo is not None else 0)) & (keys < hi if hi is not None else True)
        assert np.array_equal(got, idx[inside]), r
        assert np.array_equal(np.concatenate([b.column(3).to_numpy() for b in batches]), val[inside])


@pytest.mark.parametrize("column", [[4, 4, 4], [5, 6, 7], [4, 4, 5, 6], [3, 4, 9, 4]])
@pytest.mark.parametrize("keep", [True, False])
def test_seam_filter_keeps_or_drops_the_rows_of_a_value(column, keep):
    """seamed._where (the rows of a seam's value, or the others, and where the value's rows end)
    against NumPy's mask."""
    import pyarrow as pa

    from sptool.distributed.seamed import _where

    col = np.array(column, dtype=np.int64)
    batch = pa.RecordBatch.from_arrays([pa.array(col), pa.array(np.arange(len(col), dtype=np.float64))],
                                       names=["indices_0", "values"])
    (got, kept), other, last_hit = _where(batch, col, 4, keep)
    mask = (col == 4) if keep else (col != 4)
    assert got.column(1).to_numpy().tolist() == np.flatnonzero(mask).astype(np.float64).tolist()
    assert kept.tolist() == col[mask].tolist()
    assert other == (np.flatnonzero(col != 4)[0] if (col != 4).any() else len(col))
    assert last_hit == (np.flatnonzero(col == 4)[-1] if (col == 4).any() else -1)


@pytest.mark.parametrize("sizes", [[100, 100, 100, 100], [5, 300, 0, 40, 40], [1000, 1, 1]])
@pytest.mark.parametrize("ranges", [1, 2, 4, 7])
def test_edge_splitters_begin_ranges_where_parts_begin(rng, sizes, ranges):
    """edge_splitters (add of sorted operands: splitters from the parts' edges, no sample) against
    NumPy: two operands cut into parts of sorted random keys; every splitter is a part's first
    key above the lowest, increasing, and each range's rows (NumPy's count of the keys in it) are
    within two of the widest part's rows of an equal share (the parts straddling its two ends);
    the pieces each range reads (_meeting) hold every key of the range."""
    keyed, keys_all = [], []
    for _ in range(2):
        keys = np.sort(rng.choice(10**6, sum(sizes), replace=False).astype(np.uint64))
        cuts = np.cumsum(sizes)[:-1]
        parts = [(f"p{len(keys_all)}-{i}", k[0], k[-1], len(k)) for i, k in enumerate(np.split(keys, cuts)) if len(k)]
        keyed.append(parts)
        keys_all.append(keys)
    both = np.sort(np.concatenate(keys_all))
    got = edge_splitters(keyed, ranges)
    begins = {a for operand in keyed for _, a, _, _ in operand}
    assert set(got.tolist()) <= begins and np.all(np.diff(got.astype(np.int64)) > 0)
    assert len(got) <= ranges - 1 and (not len(got) or got[0] > both[0])
    bounds = [None, *got, None]
    widest = max(n for operand in keyed for *_, n in operand)
    for r in range(len(got) + 1):
        lo, hi = bounds[r], bounds[r + 1]
        held = np.count_nonzero((both >= (lo if lo is not None else 0)) & (both < hi if hi is not None else True))
        assert abs(held - len(both) / (len(got) + 1)) <= 2 * widest
        for operand, keys in zip(keyed, keys_all):
            pieces = [Piece(path, None, n) for path, _, _, n in operand]
            met = {p.path for p in _meeting(pieces, operand, lo, hi)}
            inside = [path for path, a, z, _ in operand
                      if np.any((keys >= (lo if lo is not None else 0)) & (keys < hi if hi is not None else True) &
                                (keys >= a) & (keys <= z))]
            assert set(inside) <= met


@pytest.mark.parametrize("cuts", [[300, 301, 600], [0, 450, 450, 900], [100, 200, 300, 400, 500, 600, 700, 800]])
def test_grouped_seam_tasks_read_every_row_once_in_order(tmp_path, rng, cuts):
    """seamed.grouped (a reduce task per worker over several pieces) against NumPy: parts of a
    tensor sorted on dimension 0, cut anywhere (inside a value's rows, empty parts); for any
    number of tasks, the tasks' sources (SeamedPiece) read, one after another, every row once
    in input order, and each value of dimension 0 whole in one task."""
    from sptool.distributed.pieces import pieces_of
    from sptool.distributed.seamed import SeamedPiece, grouped, piece_edges, seam_plan

    idx = np.unique(np.stack([rng.integers(0, s // (8 if d == 0 else 1), 1000) for d, s in enumerate(SHAPE)],
                             axis=1), axis=0)
    val = rng.standard_normal(len(idx))
    os.makedirs(tmp_path / "in")
    for i, (pi, pv) in enumerate(zip(np.split(idx, cuts), np.split(val, cuts))):
        sptool.write(sptool.SparseTensor(pi.reshape(-1, 3), pv, SHAPE), str(tmp_path / "in" / f"part-{i:06d}.parquet"))
    path = str(tmp_path / "in") + "/"
    pieces = pieces_of(path, 2)
    src = sptool.open(path)
    edges = piece_edges(src, pieces, 0)
    plan = seam_plan(pieces, edges)
    for tasks in range(1, len(plan) + 2):
        joined, rows = grouped(plan, [1] * len(plan), tasks)
        assert len(joined) <= tasks and sum(rows) == len(plan)
        sources = [SeamedPiece(spans, 0, src.meta, budget_of(None)) for spans in joined]
        read = [np.concatenate([np.stack([b.column(d).to_numpy() for d in range(3)], axis=1)
                                for b in s.iter_batches()] or [np.empty((0, 3))]) for s in sources]
        assert np.array_equal(np.concatenate(read), idx), tasks
        # Each task's rows follow the rows before it, which its errors count from.
        assert [s.start for s, r in zip(sources, read) if len(r)] == \
            [sum(map(len, read[:k])) for k, r in enumerate(read) if len(r)], tasks
        values = [set(r[:, 0].tolist()) for r in read]
        assert all(not (a & b) for i, a in enumerate(values) for b in values[i + 1:]), tasks
