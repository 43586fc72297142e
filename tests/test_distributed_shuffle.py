"""The sorted shuffle of the distributed reorder (sptool.distributed.ranges: partition_sorted and
SortedRange), run in this process: every piece sorted in runs and cut at the splitters, each
range merged from the runs, against NumPy's stable lexsort of the whole input."""

from __future__ import annotations

import os

import numpy as np
import pytest

import sptool
from sptool._memory import budget_of
from sptool.distributed.pieces import Piece
from sptool.distributed.ranges import SortedRange, partition_sorted, pooled_splitters, shuffled_name
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
    results = [partition_sorted(p, i, order, str(root), 64, budget) for i, p in enumerate(pieces)]
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
