"""reorder against NumPy's stable lexsort, through spilled runs and across batch boundaries."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import WatchedFolder, dense_oracle, random_tensor, small_runs

import sptool
from sptool.errors import DataError, UsageError
from sptool.ops.reorder import reorder
from sptool.stream import sort as _sort


@pytest.fixture(params=[0, 2500, 1 << 30], ids=["all-spilled", "some-kept", "all-kept"])
def tiny_runs(monkeypatch, request):
    """Force many small runs and small merge slices, whatever --memory says, and merge rounds of
    8 rows or more on several threads; every sorted run spilled, the first one or two kept in
    memory (a run of 97 rows takes about 1.6 kB), or all kept."""
    small_runs(monkeypatch, 64, 13)
    monkeypatch.setenv("SPTOOL_PARALLEL_ROWS", "8")
    monkeypatch.setenv("SPTOOL_KEEP_BYTES", str(request.param))


def _stable_order(idx: np.ndarray, order) -> np.ndarray:
    return np.lexsort(idx[:, list(order)].T[::-1])


@pytest.mark.parametrize("order", [None, (1, 0, 2), (2, 1, 0), (-1, 0, 1)])
@pytest.mark.parametrize("dtype", ["float64", "int32", "complex64", "bool"])
def test_keep_matches_stable_lexsort(tmp_path, rng, tiny_runs, order, dtype):
    t = random_tensor(rng, (13, 11, 7), 900, dtype=dtype, duplicates=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), perm=order)
    o = [d % 3 for d in (order or (0, 1, 2))]
    perm = _stable_order(t.indices, o)
    s = sptool.read(str(tmp_path / "out.parquet"))
    np.testing.assert_array_equal(s.indices, t.indices[perm])
    np.testing.assert_array_equal(s.values, t.values[perm])
    assert s.sort_order == tuple(o) and not s.unique
    assert sptool.validate(str(tmp_path / "out.parquet")).valid


@pytest.mark.parametrize("policy", ["sum", "min", "max", "first", "last"])
def test_duplicate_policies(tmp_path, rng, tiny_runs, policy):
    t = random_tensor(rng, (9, 8, 2), 700, sparse_ndim=2, dtype="float64", duplicates=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), duplicates=policy)
    s = sptool.read(str(tmp_path / "out.parquet"))
    assert s.canonical and sptool.validate(str(tmp_path / "out.parquet")).valid
    groups: dict = {}
    for i, c in enumerate(map(tuple, t.indices)):
        groups.setdefault(c, []).append(t.values[i])
    want = {c: {"sum": np.sum(v, axis=0), "min": np.min(v, axis=0), "max": np.max(v, axis=0),
                "first": v[0], "last": v[-1]}[policy] for c, v in groups.items()}
    assert [tuple(c) for c in s.indices] == sorted(want)
    for c, v in zip(map(tuple, s.indices), s.values):
        np.testing.assert_allclose(v, want[c])
    if policy == "sum":
        np.testing.assert_allclose(s.to_dense(), dense_oracle(t))


def test_error_policy_names_the_coordinate(tmp_path):
    t = sptool.SparseTensor([[2, 1], [0, 0], [2, 1]], [1.0, 2.0, 3.0], (3, 3))
    sptool.write(t, str(tmp_path / "in.parquet"))
    with pytest.raises(DataError, match=r"coordinate \[2,1\] is repeated"):
        reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), duplicates="error")
    assert not os.path.exists(tmp_path / "out.parquet")


def test_bad_order_and_policy_for_type(tmp_path):
    t = sptool.SparseTensor([[0, 1]], np.array(["a"], dtype=object), (2, 2))
    sptool.write(t, str(tmp_path / "s.parquet"))
    with pytest.raises(UsageError, match="exactly once"):
        reorder(str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"), perm=(0, 0))
    with pytest.raises(UsageError, match="cannot be summed"):
        reorder(str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"), duplicates="sum")
    reorder(str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"), perm=(1, 0))
    assert sptool.read(str(tmp_path / "o.parquet")).values.tolist() == ["a"]


def test_spill_dir_removed_on_success_and_failure(tmp_path, rng, tiny_runs):
    spill = tmp_path / "spill"
    spill.mkdir()
    t = random_tensor(rng, (30, 30), 600, duplicates=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"), tmp_dir=str(spill))
    assert os.listdir(spill) == []

    class CtrlCAtTheMerge:  # a caller's progress bar, and Ctrl-C as the merge of the spilled runs begins
        def set_total(self, total):
            pass

        def advance(self, rows):
            pass

        def phase(self, label, total=None):
            assert os.listdir(spill) and label.startswith("merging"), label
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        reorder(str(tmp_path / "in.parquet"), str(tmp_path / "o2.parquet"), tmp_dir=str(spill),
                progress=CtrlCAtTheMerge())
    assert os.listdir(spill) == []
    assert sorted(os.listdir(tmp_path)) == ["in.parquet", "o.parquet", "spill"]  # no output, no hidden temp file


def test_sorted_input_streams_through(tmp_path, rng, monkeypatch):
    small_runs(monkeypatch, 16, 16)  # a sort would spill its runs
    spill = WatchedFolder(tmp_path / "spill")
    t = random_tensor(rng, (20, 20), 300, sort=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"), duplicates="sum", tmp_dir=spill.path)
    assert sptool.read(str(tmp_path / "o.parquet")).canonical and not spill.touched
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "o.parquet"), perm=(1, 0), tmp_dir=spill.path)
    assert spill.touched  # the same watch sees a sort


def test_wide_keys_path(tmp_path, rng, tiny_runs):
    shape = (3,) * 40 if False else (3,) * 39  # 39 dims of 2 bits: wider than one uint64 key
    t = random_tensor(rng, shape, 300, duplicates=True)
    assert not _sort.KeyCodec(shape, range(39)).packed
    sptool.write(t, str(tmp_path / "w.parquet"))
    reorder(str(tmp_path / "w.parquet"), str(tmp_path / "o.parquet"))
    s = sptool.read(str(tmp_path / "o.parquet"))
    np.testing.assert_array_equal(s.indices, t.indices[_stable_order(t.indices, range(39))])


def test_empty_and_pipes(tmp_path, rng):
    t = random_tensor(rng, (4, 0), 0)
    sptool.write(t, str(tmp_path / "e.parquet"))
    r = reorder(str(tmp_path / "e.parquet"), str(tmp_path / "o.arrows"), duplicates="sum")
    assert r["rows_out"] == 0 and sptool.validate(str(tmp_path / "o.arrows")).valid


def test_partial_order_keeps_every_column(tmp_path, rng, tiny_runs):
    from sptool._memory import budget_of
    from sptool.io import open_source
    from sptool.stream.order import sorted_batches

    t = random_tensor(rng, (9, 7, 5), 400, duplicates=True)
    sptool.write(t, str(tmp_path / "p.parquet"))
    with open_source(str(tmp_path / "p.parquet")) as src:
        batches = [b for b, _ in sorted_batches(src, (1,), budget=budget_of(None))]
    got = np.concatenate([np.stack([b.column(k).to_numpy() for k in range(3)], axis=1) for b in batches])
    perm = np.argsort(t.indices[:, 1], kind="stable")
    np.testing.assert_array_equal(got, t.indices[perm])


def test_merge_tree_when_runs_exceed_fan_in(tmp_path, rng, tiny_runs, monkeypatch):
    monkeypatch.setenv("SPTOOL_FAN_IN", "3")
    t = random_tensor(rng, (40, 30, 20), 3000, duplicates=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    spill = tmp_path / "spill"
    spill.mkdir()
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), duplicates="sum", tmp_dir=str(spill))
    s = sptool.read(str(tmp_path / "out.parquet"))
    assert s.canonical and os.listdir(spill) == []
    np.testing.assert_allclose(s.to_dense(), dense_oracle(t))


@pytest.fixture
def in_memory_sort(monkeypatch, tmp_path):
    """Small read batches and slices of 64 rows (buckets of 16), so the in-memory sort crosses
    every batch, bucket and slice boundary; and a --tmp-dir watched, which the in-memory sort
    leaves alone and the external sort spills into."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "50")
    monkeypatch.setenv("SPTOOL_MERGE_ROWS", "64")
    return WatchedFolder(tmp_path / "spill")


@pytest.mark.parametrize("order", [None, (2, 0, 1)])
@pytest.mark.parametrize("dtype", ["float64", "int32", "uint8"])
@pytest.mark.parametrize("shape", [(13, 11, 7), (1 << 20, 1 << 20, 1 << 12)])  # a sparse and a wide key range
def test_in_memory_sort_matches_stable_lexsort(tmp_path, rng, in_memory_sort, order, dtype, shape):
    t = random_tensor(rng, shape, 2000, dtype=dtype, duplicates=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), perm=order, tmp_dir=in_memory_sort.path)
    assert not in_memory_sort.touched
    o = list(order or (0, 1, 2))
    perm = _stable_order(t.indices, o)
    s = sptool.read(str(tmp_path / "out.parquet"))
    np.testing.assert_array_equal(s.indices, t.indices[perm])
    np.testing.assert_array_equal(s.values, t.values[perm])
    assert sptool.validate(str(tmp_path / "out.parquet")).valid


@pytest.mark.parametrize("policy", ["sum", "last", "error"])
def test_in_memory_sort_with_duplicate_policies(tmp_path, rng, in_memory_sort, policy):
    t = random_tensor(rng, (9, 8, 6), 1500, dtype="int32", duplicates=policy != "error")
    if policy == "error":  # unique coordinates: the policy passes them through
        _, first = np.unique(t.indices, axis=0, return_index=True)
        first = rng.permutation(first)  # unsorted, or the input would pass through unsorted
        t = sptool.SparseTensor(t.indices[first], t.values[first], t.shape)
    sptool.write(t, str(tmp_path / "in.parquet"))
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), duplicates=policy,
            tmp_dir=in_memory_sort.path)
    assert not in_memory_sort.touched
    s = sptool.read(str(tmp_path / "out.parquet"))
    coords, inverse = np.unique(t.indices, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if policy == "sum":
        want = np.bincount(inverse, weights=t.values, minlength=len(coords)).astype(np.int64)
    else:  # the last row of each coordinate in input order
        want = np.empty(len(coords), dtype=t.values.dtype)
        want[inverse] = t.values
    np.testing.assert_array_equal(s.indices, coords)
    np.testing.assert_array_equal(s.values.astype(np.int64), want.astype(np.int64))


@pytest.mark.parametrize("rows,in_memory", [(100_000, True), (150_000, False)])
def test_input_larger_than_the_budget_goes_to_the_external_sort(tmp_path, rng, in_memory_sort, monkeypatch,
                                                                rows, in_memory):
    # At --memory 16MiB (4 MiB usable) about 116k float64 rows may be sorted in memory; past that
    # the rows already held start the runs of the external sort.
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "8192")
    t = random_tensor(rng, (300, 200, 100), rows, duplicates=True)
    sptool.write(t, str(tmp_path / "in.parquet"))
    spill = in_memory_sort
    reorder(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"), memory="16MiB", tmp_dir=spill.path)
    assert spill.touched != in_memory
    perm = _stable_order(t.indices, (0, 1, 2))
    s = sptool.read(str(tmp_path / "out.parquet"))
    np.testing.assert_array_equal(s.indices, t.indices[perm])
    np.testing.assert_array_equal(s.values, t.values[perm])
    assert os.listdir(spill.path) == []


@pytest.mark.parametrize("seed", range(8))
def test_merge_keeps_ties_in_stream_order_across_slice_ends(seed):
    # A run of equal keys cut by the end of an earlier stream's slice: the later streams' rows
    # of that key must wait for the rest of it (they once went out in between).
    import pyarrow as pa

    from sptool._memory import budget_of

    rng = np.random.default_rng(seed)
    codec = _sort.KeyCodec((8,), (0,))
    streams, keys_all = [], []
    for s in range(int(rng.integers(2, 5))):
        keys = np.sort(rng.integers(0, 8, int(rng.integers(1, 40)))).astype(np.uint64)
        rows = np.arange(len(keys)) + 1000 * s  # which stream and row each one is
        cuts = np.sort(rng.integers(0, len(keys) + 1, 3))
        pieces = np.split(np.arange(len(keys)), cuts)
        streams.append([(pa.table({"row": rows[p]}), keys[p]) for p in pieces])
        keys_all.append((keys, rows))
    keys = np.concatenate([k for k, _ in keys_all])
    rows = np.concatenate([r for _, r in keys_all])
    got = list(_sort.merge_sorted(streams, codec, rows=int(rng.integers(1, 6)), budget=budget_of(None)))
    got_rows = np.concatenate([t.column("row").to_numpy() for t, _ in got])
    np.testing.assert_array_equal(got_rows, rows[np.argsort(keys, kind="stable")])
    np.testing.assert_array_equal(np.concatenate([k for _, k in got]), np.sort(keys))


def test_in_memory_sort_of_no_rows_and_of_one(tmp_path, in_memory_sort):
    from collections import deque

    import pyarrow as pa

    codec = _sort.KeyCodec((4, 5), (0, 1))
    schema = pa.schema([("indices_0", pa.int64()), ("indices_1", pa.int64()), ("values", pa.float32())])
    assert list(_sort.sort_in_memory(deque(), 0, codec, schema)) == []
    one = pa.record_batch([pa.array([2.5], pa.float32())], names=["values"])
    key = np.array([3 << 3 | 4], dtype=np.uint64)  # row (3, 4): 3 bits for dimension 1
    [(batch, keys)] = list(_sort.sort_in_memory(deque([(one, key)]), 1, codec, schema))
    assert batch.to_pydict() == {"indices_0": [3], "indices_1": [4], "values": [2.5]}
    np.testing.assert_array_equal(keys, key)
