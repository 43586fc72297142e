"""group (Python API): runs of rows sharing coordinates, in memory and streamed across batches."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tensor, small_runs

import sptool
from sptool.errors import UsageError


def _oracle(t, dims):
    """Groups by a dict over rows in a stable sort by dims then the other dims: key -> (indices, values)."""
    order = list(dims) + [d for d in range(t.sparse_ndim) if d not in dims]
    perm = np.lexsort(t.indices[:, order].T[::-1])
    out: dict = {}
    for i in perm:
        key = tuple(int(t.indices[i, d]) for d in dims)
        out.setdefault(key, ([], []))
        out[key][0].append(t.indices[i])
        out[key][1].append(t.values[i])
    return out


def _check(groups, t, dims):
    want = _oracle(t, dims)
    keys = []
    for key, idx, vals in groups:
        keys.append(key)
        np.testing.assert_array_equal(idx, np.array(want[key][0]).reshape(-1, t.sparse_ndim))
        np.testing.assert_array_equal(vals, np.array(want[key][1]).reshape(vals.shape))
    assert keys == sorted(want)


@pytest.mark.parametrize("dims", [[0], [0, 1], [-3]])
def test_group_sorted(rng, dims):
    t = random_tensor(rng, (6, 5, 4), 80, sort=True, duplicates=True)
    _check(t.group(dims), t, [d % 3 for d in dims])


def test_group_refuses_unordered_unless_sort(rng):
    t = random_tensor(rng, (6, 5, 4), 80, duplicates=True)
    with pytest.raises(UsageError, match="pass sort=True"):
        list(t.group([1]))
    _check(t.group([1], sort=True), t, [1])


def test_group_streams_across_batches(tmp_path, rng, tiny_batches, monkeypatch):

    small_runs(monkeypatch, 7, 5)
    t = random_tensor(rng, (5, 6, 3), 120, sparse_ndim=2, duplicates=True)
    sptool.write(t, str(tmp_path / "g.parquet"))
    with sptool.open(str(tmp_path / "g.parquet")) as src:
        with pytest.raises(UsageError):
            list(sptool.group(src, [1]))
    with sptool.open(str(tmp_path / "g.parquet")) as src:
        _check(sptool.group(src, [1], sort=True), t, [1])
    sptool.reorder(str(tmp_path / "g.parquet"), str(tmp_path / "s.parquet"))
    s = sptool.read(str(tmp_path / "s.parquet"))
    with sptool.open(str(tmp_path / "s.parquet")) as src:
        _check(sptool.group(src, [0]), s, [0])
