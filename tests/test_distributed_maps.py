"""Per-part maps on a Dask cluster (sptool.distributed.rowwise): transpose, reshape, expand_dims,
retain, map, mul and div on a 2-worker LocalCluster with tiny parts, unsorted rows, duplicates,
a skewed key and an empty part.  The oracle is NumPy (column permutations, ravel/unravel of the
linear index, masks, ufuncs, a stable lexsort, sums with np.add.at); each result is also the
single-machine command's, row for row and in order, with the same metadata."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from command_examples import ROOT
from pty_terminal import cursor_restored, run_in_terminal
from test_distributed import (
    SHAPE,
    _dataset,
    _no_leftovers,
    _oracle_sorted,
    _oracle_summed,
    _part_metas,
    _read_all_k,
    _unique_parts,
    client,  # noqa: F401 - fixture: the session's cluster
    tiny,  # noqa: F401 - fixture
)

import sptool
import sptool.distributed
from sptool.cli import cli

META_KEYS = ("shape", "sparse_ndim", "value_type", "fill_value", "iso", "dimension_names", "nnz")


def _same_as_local(dist_out, local_out, K):
    """The part directory and the single-machine file hold the same rows in the same order (bit
    for bit), with the same dataset metadata; the parts' own claims are returned."""
    di, dv = _read_all_k(dist_out, K)
    li, lv = _read_all_k(local_out, K)
    assert np.array_equal(di, li) and np.array_equal(dv.view(np.uint8), lv.view(np.uint8))
    dmeta, lmeta = sptool.open(dist_out).meta, sptool.open(local_out).meta
    for key in META_KEYS:
        assert getattr(dmeta, key) == getattr(lmeta, key), key
    return di, dv


def _both(tmp_path, name, operands: list, *, client, **kw):  # noqa: F811 - the fixture's value
    """``name`` of ``operands`` run on the cluster (into out/) and on one machine (into
    local.parquet): (the cluster's summary, the two outputs)."""
    out, local = str(tmp_path / "out") + "/", str(tmp_path / "local.parquet")
    r = getattr(sptool.distributed, name)(*operands, out, client=client, **kw)
    getattr(sptool, name)(*operands, local, **kw)
    return r, out, local


@pytest.mark.parametrize("perm", [None, (1, 2, 0)])
@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_transpose_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, perm, kind):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng, skew=0.7 if kind == "skewed" else 0.0, dup_pool=600)
    r, out, local = _both(tmp_path, "transpose", [src], perm=perm, memory=tiny, client=client)
    p = list(perm or (2, 1, 0))
    oi, ov = _oracle_sorted(idx[:, p], val, (0, 1, 2))  # stable: rows sharing a coordinate keep input order
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, oi) and np.array_equal(dv, ov)
    assert r["perm"] == p and r["rows"] == len(idx) and r["parts"] > 1 and r["workers"] == 2
    assert r["shape"] == [SHAPE[d] for d in p]
    assert all(m.sort_order == (0, 1, 2) and not m.unique for m in _part_metas(out))
    _no_leftovers(tmp_path, ["in", "out", "local.parquet"])


@pytest.mark.parametrize("layout", ["unsorted", "canonical"])
def test_reshape_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, layout):  # noqa: F811
    if layout == "canonical":
        src, idx, val = _unique_parts(tmp_path, rng, n=2500)
    else:
        src, idx, val = _dataset(tmp_path, rng, dup_pool=500)
    new = (SHAPE[0] * SHAPE[1], 5, -1)
    r, out, local = _both(tmp_path, "reshape", [src], shape=new, memory=tiny, client=client)
    full = (SHAPE[0] * SHAPE[1], 5, SHAPE[2] // 5)
    want = np.stack(np.unravel_index(np.ravel_multi_index(idx.T, SHAPE), full), axis=1)
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, want) and np.array_equal(dv, val)
    assert r["shape"] == list(full) and r["rows"] == len(idx) and r["parts"] > 1
    # Each part claims what one machine claims for its rows (as a file of its own): reshape keeps a
    # row-major order, so the parts of a canonical input stay canonical (an empty part is sorted
    # and unique whatever the input).
    want_claims = ((0, 1, 2), True) if layout == "canonical" else ((), False)
    assert all((m.sort_order, m.unique) == want_claims for m in _part_metas(out) if m.nnz)


def test_expand_dims_matches_numpy_and_one_machine(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _unique_parts(tmp_path, rng, n=2000)
    r, out, local = _both(tmp_path, "expand_dims", [src], axis=1, memory=tiny, client=client)
    di, dv = _same_as_local(out, local, 4)
    assert np.array_equal(di, np.insert(idx, 1, 0, axis=1)) and np.array_equal(dv, val)
    assert r["shape"] == [SHAPE[0], 1, SHAPE[1], SHAPE[2]] and r["sparse_ndim"] == 4
    assert all(m.sort_order == (0, 1, 2, 3) and m.unique for m in _part_metas(out))


def test_retain_where_matches_numpy_and_one_machine(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng, dup_pool=700, skew=0.3)
    where = "values > 0 and indices_1 % 2 == 0"
    r, out, local = _both(tmp_path, "retain", [src], where=where, memory=tiny, client=client)
    keep = (val > 0) & (idx[:, 1] % 2 == 0)
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, idx[keep]) and np.array_equal(dv, val[keep])
    assert r["rows_in"] == len(idx) and r["rows_out"] == keep.sum()
    with pytest.raises(sptool.UsageError, match="not --mask"):
        sptool.distributed.retain(src, str(tmp_path / "o2") + "/", mask=np.ones(len(idx), bool), client=client)
    _no_leftovers(tmp_path, ["in", "out", "local.parquet"])


@pytest.mark.parametrize("fn,ufunc", [("neg", np.negative), ("abs", np.abs), ("square", np.square)])
def test_map_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, fn, ufunc):  # noqa: F811
    """neg is additive: mapped piece by piece, in input order.  abs and square of a tensor with
    repeated coordinates sum the repeats first: by key ranges, in row-major order, as one machine."""
    src, idx, val = _dataset(tmp_path, rng, dup_pool=400, values="float")
    r, out, local = _both(tmp_path, "map_values", [src], fn=fn, memory=tiny, client=client)
    di, dv = _same_as_local(out, local, 3)
    if fn == "neg":
        assert np.array_equal(di, idx) and np.array_equal(dv, -val)
    else:
        keys, sums = _oracle_summed(idx, val)
        assert np.array_equal(di, keys) and np.allclose(dv, ufunc(sums), rtol=1e-12, atol=1e-12)
        assert all(m.unique and m.sort_order == (0, 1, 2) for m in _part_metas(out))
    assert r["rows_in"] == len(idx) and r["value_type"] == "float64" and r["parts"] > 1


def test_mul_and_div_by_a_dense_operand_and_a_number(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng, dup_pool=500)  # int64 values, repeated coordinates
    dense = rng.integers(1, 9, (1, SHAPE[1], SHAPE[2])).astype(np.int64)
    npy = str(tmp_path / "d.npy")
    np.save(npy, dense)
    # int64 * int64: no promotion, so piece by piece, in input order.
    r, out, local = _both(tmp_path, "mul", [src, npy], memory=tiny, client=client)
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, idx) and np.array_equal(dv, val * dense[0, idx[:, 1], idx[:, 2]])
    assert r["broadcast_shape"] == [1, SHAPE[1], SHAPE[2]] and r["rows"] == len(idx)
    # int64 / int64 is float64: the repeats are summed (in int64) first, by key ranges, row-major.
    os.rename(out, str(tmp_path / "mul-out"))
    os.remove(local)
    r, out, local = _both(tmp_path, "div", [src, npy], memory=tiny, client=client)
    di, dv = _same_as_local(out, local, 3)
    keys, sums = _oracle_summed(idx, val)
    assert np.array_equal(di, keys) and np.array_equal(dv, sums / dense[0, keys[:, 1], keys[:, 2]])
    os.rename(out, str(tmp_path / "div-out"))
    os.remove(local)
    r, out, local = _both(tmp_path, "mul", [src, "2"], memory=tiny, client=client)
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, idx) and np.array_equal(dv, val * 2)
    assert r["parts"] > 1 and r["workers"] == 2


def test_cli_transpose_and_map_on_the_scheduler(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng)
    out = str(tmp_path / "t") + "/"
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "transpose", src, "--perm", "2,0,1",
                                   "-o", out, "--memory", tiny])
    assert res.exit_code == 0, res.output
    assert "2 workers" in res.output and "peak worker memory" in res.output and "shape [30, 50, 40]" in res.output
    assert np.array_equal(_read_all_k(out, 3)[0], _oracle_sorted(idx[:, [2, 0, 1]], val, (0, 1, 2))[0])
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "map", src, "--fn", "neg",
                                   "-o", str(tmp_path / "m") + "/"])
    assert res.exit_code == 0 and "int64, fill value 0" in res.output, res.output
    assert np.array_equal(_read_all_k(str(tmp_path / "m"), 3)[1], -val)
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "reshape", src, "--shape", "60,-1",
                                   "-o", str(tmp_path / "r.parquet")])
    assert res.exit_code == 2 and "directory of parts" in res.output
    assert "Cluster: given --scheduler" in CliRunner().invoke(cli, ["retain", "--help"]).output


# -- slice: parts and row groups pruned by their statistics, the rest sliced part by part ---------

def test_slice_prunes_parts_and_matches_numpy_and_one_machine(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _unique_parts(tmp_path, rng, n=6000, parts=8)  # parts of consecutive rows: few hold the box
    start, size = [10, 0, 5], [5, -1, 10]
    r, out, local = _both(tmp_path, "slice_", [src], start=start, size=size, memory=tiny, client=client)
    lo, hi = np.array(start), np.array([15, SHAPE[1], 15])
    inside = np.all((idx >= lo) & (idx < hi), axis=1)
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, idx[inside] - lo) and np.array_equal(dv, val[inside])
    one = sptool.slice_(src, str(tmp_path / "again.parquet"), start=start, size=size, memory=tiny)
    for key in ("row_groups_read", "row_groups_total", "bytes_read", "bytes_total", "shape", "rows_out"):
        assert r[key] == one[key], key
    # The parts whose index_0 range misses [10, 15) are not read: pyarrow's own statistics say which.
    hit = [n for n in sorted(os.listdir(src))
           if pq.ParquetFile(os.path.join(src, n)).metadata.num_rows
           and pq.read_table(os.path.join(src, n), columns=["indices_0"]).column(0).to_numpy().max() >= 10
           and pq.read_table(os.path.join(src, n), columns=["indices_0"]).column(0).to_numpy().min() < 15]
    # Their row groups, in runs of consecutive groups, are the parts (several per file: a file spreads
    # over the workers).
    assert len(hit) < 8 and r["parts"] >= len(hit) and r["row_groups_read"] < r["row_groups_total"]
    assert all(m.sort_order == (0, 1, 2) and m.unique for m in _part_metas(out))


def test_slice_of_unsorted_parts_and_an_empty_box(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng, dup_pool=900)
    r, out, local = _both(tmp_path, "slice_", [src], start=[3, 4, 0], size=[20, 9, -1], memory=tiny, client=client)
    inside = np.all((idx >= [3, 4, 0]) & (idx < [23, 13, SHAPE[2]]), axis=1)
    di, dv = _same_as_local(out, local, 3)
    assert np.array_equal(di, idx[inside] - [3, 4, 0]) and np.array_equal(dv, val[inside])
    one = sptool.slice_(src, str(tmp_path / "again.parquet"), start=[3, 4, 0], size=[20, 9, -1], memory=tiny)
    assert r["parts"] > 1 and r["rows_in"] == one["rows_in"] and r["row_groups_read"] == one["row_groups_read"]
    empty = str(tmp_path / "empty") + "/"
    r = sptool.distributed.slice_(src, empty, start=[0, 0, 0], size=[0, -1, -1], client=client)
    assert r["rows_out"] == 0 and r["shape"] == [0, SHAPE[1], SHAPE[2]] and r["parts"] == 1
    assert sptool.open(empty).meta.shape == (0, SHAPE[1], SHAPE[2])
    with pytest.raises(sptool.UsageError, match="start"):
        sptool.distributed.slice_(src, str(tmp_path / "bad") + "/", start=[0, 0], size=[1, 1], client=client)
    assert not os.path.exists(tmp_path / "bad")


# -- split: every input part split by its own task, its shares moved into the output directories ---

def test_split_into_part_directories_matches_numpy_and_one_machine(client, tiny, tmp_path, rng):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng, dup_pool=800, skew=0.4)
    num, axis, memory = 3, 1, "64MiB"  # three open writers need more than tiny (the batches stay tiny)
    r = sptool.distributed.split(src, str(tmp_path / "out-{i}") + "/", axis=axis, num_split=num, memory=memory,
                                 client=client)
    sptool.split(src, str(tmp_path / "local-{i}.parquet"), axis=axis, num_split=num, memory=memory)
    bounds = np.r_[0, np.cumsum([14, 13, 13])]  # TensorFlow's sizes for 40 in 3: the first one longer
    for i in range(num):
        keep = (idx[:, axis] >= bounds[i]) & (idx[:, axis] < bounds[i + 1])
        want = idx[keep].copy()
        want[:, axis] -= bounds[i]
        di, dv = _same_as_local(str(tmp_path / f"out-{i}"), str(tmp_path / f"local-{i}.parquet"), 3)
        assert np.array_equal(di, want) and np.array_equal(dv, val[keep])
        assert r["rows"][i] == keep.sum() and r["shapes"][i] == [SHAPE[0], bounds[i + 1] - bounds[i], SHAPE[2]]
    assert r["outputs"] == [str(tmp_path / f"out-{i}") + "/" for i in range(num)] and r["parts"] == 6
    assert sorted(os.listdir(tmp_path)) == ["in"] + [f"local-{i}.parquet" for i in range(num)] + \
        [f"out-{i}" for i in range(num)]
    with pytest.raises(sptool.UsageError, match="directory of parts"):
        sptool.distributed.split(src, str(tmp_path / "p{i}.parquet"), axis=0, num_split=2, client=client)
    with pytest.raises(sptool.UsageError, match="num_split"):
        sptool.distributed.split(src, str(tmp_path / "q{i}") + "/", axis=0, num_split=99, client=client)
    assert not any(n.startswith(("p", "q", ".")) for n in os.listdir(tmp_path))


# -- todense: key ranges are runs of cells, each task writes its own into the preallocated .npy -----

@pytest.mark.parametrize("values", ["float", "int"])
def test_todense_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, values):  # noqa: F811
    src, idx, val = _dataset(tmp_path, rng, dup_pool=700, skew=0.5, values=values)
    out, local = str(tmp_path / "d.npy"), str(tmp_path / "local.npy")
    r = sptool.distributed.todense(src, out, memory=tiny, client=client)
    sptool.todense(src, local, memory=tiny)
    want = np.zeros(SHAPE, dtype=val.dtype)
    np.add.at(want, tuple(idx.T), val)  # duplicates summed, in input order
    got = np.load(out)
    assert got.dtype == val.dtype and got.shape == SHAPE
    assert np.array_equal(got.view(np.uint8), np.load(local).view(np.uint8))  # one machine's sums, bit for bit
    assert np.array_equal(got, want) if values == "int" else np.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert r["parts"] > 1 and r["workers"] == 2 and r["bytes"] == want.nbytes
    _no_leftovers(tmp_path, ["in", "d.npy", "local.npy"])


def test_todense_on_a_cluster_refuses_a_nonzero_fill(client, tmp_path, rng):  # noqa: F811
    src, _, _ = _dataset(tmp_path, rng)
    with pytest.raises(sptool.UsageError, match="fill value"):
        sptool.distributed.todense(src, str(tmp_path / "d.npy"), default_value=1, client=client)
    with pytest.raises(sptool.UsageError, match=r"\.npy"):
        sptool.distributed.todense(src, str(tmp_path / "d.parquet"), client=client)
    _no_leftovers(tmp_path, ["in"])
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "todense", src, "-o",
                                   str(tmp_path / "c.npy")])
    assert res.exit_code == 0 and "2 workers" in res.output, res.output
    assert np.load(str(tmp_path / "c.npy")).shape == SHAPE


# -- convert: one task per input file, each into its part -----------------------------------------

def _write_tns(path, idx, val):
    """FROSTT text written by NumPy: 1-based indices, then the value."""
    np.savetxt(path, np.column_stack([idx + 1, val]), fmt=["%d"] * idx.shape[1] + ["%.17g"])


def test_convert_many_files_on_a_cluster(client, tmp_path, rng):  # noqa: F811
    files = []
    for i in range(5):
        n = int(rng.integers(0, 300)) if i != 2 else 0  # one empty file
        idx = np.stack([rng.integers(0, s, n) for s in SHAPE], axis=1).reshape(-1, 3)
        files.append((idx, rng.standard_normal(n)))
        _write_tns(tmp_path / f"f{i}.tns", *files[-1])
    out = str(tmp_path / "out") + "/"
    shape = list(SHAPE)
    r = sptool.distributed.convert(str(tmp_path / "f*.tns"), out, shape=shape, client=client)
    gi, gv = _read_all_k(out, 3)
    assert np.array_equal(gi, np.concatenate([f[0] for f in files])) and np.array_equal(gv, np.concatenate(
        [f[1] for f in files]))
    assert r["parts"] == 5 and r["rows"] == sum(len(f[1]) for f in files) and r["shape"] == shape
    for i in range(5):  # part i is file i as one machine converts it
        local = str(tmp_path / f"local{i}.parquet")
        sptool.convert(str(tmp_path / f"f{i}.tns"), local, shape=shape)
        assert all(np.array_equal(a, b) for a, b in zip(_read_all_k(os.path.join(out, f"part-{i:06d}.parquet"), 3),
                                                        _read_all_k(local, 3)))
        assert sptool.open(os.path.join(out, f"part-{i:06d}.parquet")).meta.shape == sptool.open(local).meta.shape
    with pytest.raises(sptool.DataError, match="give --shape"):  # each file's largest index differs
        sptool.distributed.convert(str(tmp_path / "f[0134].tns"), str(tmp_path / "o2") + "/", client=client)
    with pytest.raises(sptool.UsageError, match="--labels"):
        sptool.distributed.convert(str(tmp_path / "f*.tns"), str(tmp_path / "o3") + "/", labels="l.npy",
                                   client=client)
    with pytest.raises(sptool.InputError, match="no file matches"):
        sptool.distributed.convert(str(tmp_path / "none*.tns"), str(tmp_path / "o4") + "/", client=client)
    assert not any(n.startswith(("o2", "o3", "o4", ".")) for n in os.listdir(tmp_path)), os.listdir(tmp_path)
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "convert", str(tmp_path / "f*.tns"),
                                   "--shape", "50,40,30", "-o", str(tmp_path / "cli") + "/"])
    assert res.exit_code == 0 and "5 parts, 2 workers" in res.output, res.output


# -- matmul: the sparse operand by key ranges of output rows; a dense product into the shared .npy --

def _matrix_parts(path, rng, shape, n, parts, values):
    idx = np.stack([rng.integers(0, s, n) for s in shape], axis=1)
    idx = idx[rng.integers(0, n // 3, n)]  # repeated coordinates
    val = rng.standard_normal(n) if values == "float" else rng.integers(-9, 9, n).astype(np.int64)
    os.makedirs(path)
    for i, rows in enumerate(np.array_split(np.arange(n), parts)):
        sptool.write(sptool.SparseTensor(idx[rows], val[rows], shape), os.path.join(path, f"part-{i:06d}.parquet"))
    dense = np.zeros(shape, dtype=val.dtype)
    np.add.at(dense, tuple(idx.T), val)
    return str(path) + "/", dense


@pytest.mark.parametrize("values,dense_type,adjoint_a,adjoint_b", [
    ("float", np.float64, False, False), ("float", np.float64, True, False), ("int", np.int64, False, True),
    ("int", np.float32, False, False),  # int64 x float32 is float64: A's repeats are summed first
])
def test_matmul_sparse_dense_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, values, dense_type,  # noqa: F811
                                                           adjoint_a, adjoint_b):
    src, a = _matrix_parts(tmp_path / "a", rng, (60, 45), 1500, 5, values)
    a_op = a.T if adjoint_a else a
    b = (rng.standard_normal((7, a_op.shape[1])) * 4).astype(dense_type)
    if not adjoint_b:
        b = np.ascontiguousarray(b.T)
    np.save(tmp_path / "b.npy", b)
    out, local = str(tmp_path / "ab.npy"), str(tmp_path / "local.npy")
    kw = dict(adjoint_a=adjoint_a, adjoint_b=adjoint_b, memory=tiny)
    r = sptool.distributed.matmul(src, str(tmp_path / "b.npy"), out, client=client, **kw)
    sptool.matmul(src, str(tmp_path / "b.npy"), local, **kw)
    got, want = np.load(out), a_op @ (b.T if adjoint_b else b)
    assert got.dtype == np.load(local).dtype and np.array_equal(got.view(np.uint8), np.load(local).view(np.uint8))
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9) if got.dtype.kind == "f" else np.array_equal(got, want)
    assert r["shape"] == list(want.shape) and r["parts"] > 1 and r["workers"] == 2
    _no_leftovers(tmp_path, ["a", "b.npy", "ab.npy", "local.npy"])


def test_matmul_on_a_cluster_checks_operands_before_any_task(client, tmp_path, rng):  # noqa: F811
    src, a = _matrix_parts(tmp_path / "a", rng, (20, 10), 100, 2, "float")
    np.save(tmp_path / "b.npy", np.ones((11, 3)))
    with pytest.raises(sptool.ShapeMismatch, match="inner dimensions"):
        sptool.distributed.matmul(src, str(tmp_path / "b.npy"), str(tmp_path / "o.npy"), client=client)
    with pytest.raises(sptool.ShapeMismatch, match="inner dimensions"):
        sptool.distributed.matmul(str(tmp_path / "b.npy"), src, str(tmp_path / "o.npy"), client=client)
    with pytest.raises(sptool.ShapeMismatch, match="inner dimensions"):
        sptool.distributed.matmul(src, src, str(tmp_path / "o") + "/", client=client)
    with pytest.raises(sptool.UsageError, match="both operands are dense"):
        sptool.distributed.matmul(str(tmp_path / "b.npy"), str(tmp_path / "b.npy"), str(tmp_path / "o.npy"),
                                  client=client)
    with pytest.raises(sptool.UsageError, match="not stdin"):
        sptool.distributed.matmul(src, "-", str(tmp_path / "o") + "/", client=client)
    _no_leftovers(tmp_path, ["a", "b.npy"])


def _with_empty_part(path, shape, dtype):
    """An empty part appended to the directory at ``path``."""
    n = len([f for f in os.listdir(path) if f.endswith(".parquet")])
    sptool.write(sptool.SparseTensor(np.empty((0, 2), np.int64), np.empty(0, dtype), shape),
                 os.path.join(path, f"part-{n:06d}.parquet"))


@pytest.mark.parametrize("values,adjoint_a,adjoint_b,slabs", [
    ("float", False, False, False), ("float", True, True, False), ("int", False, True, False),
    ("float", False, False, True),  # B taken in slabs by every task: the slabs' products summed by the sort
])
def test_matmul_sparse_sparse_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, monkeypatch, values,  # noqa: F811
                                                            adjoint_a, adjoint_b, slabs):
    """Unsorted parts with repeated coordinates and an empty part: NumPy's dense product (exact
    for integers, within rounding for floats), the structural pattern (an entry wherever some
    A[i,k] B[k,j] exists) and the single-machine file bit for bit."""
    if slabs:
        monkeypatch.setenv("SPTOOL_SLAB_ENTRIES", "40")
    src_a, a = _matrix_parts(tmp_path / "a", rng, (60, 45), 1200, 5, values)
    a_op = a.T if adjoint_a else a
    k = a_op.shape[1]
    src_b, b = _matrix_parts(tmp_path / "b", rng, (50, k) if adjoint_b else (k, 50), 900, 3, values)
    b_op = b.T if adjoint_b else b  # real values: the adjoint is the transpose
    _with_empty_part(src_a, a.shape, a.dtype)
    out, local = str(tmp_path / "out") + "/", str(tmp_path / "local.parquet")
    kw = dict(adjoint_a=adjoint_a, adjoint_b=adjoint_b, memory=tiny)
    r = sptool.distributed.matmul(src_a, src_b, out, client=client, **kw)
    sptool.matmul(src_a, src_b, local, **kw)
    di, dv = _same_as_local(out, local, 2)
    want = a_op @ b_op
    pattern = _stored(src_a, a.shape, adjoint_a).astype(np.int64) @ _stored(src_b, b.shape, adjoint_b) > 0
    order = np.lexsort(di.T[::-1])
    assert np.array_equal(order, np.arange(len(di))) and len(np.unique(di, axis=0)) == len(di)  # canonical
    got = np.zeros(want.shape, dv.dtype)
    got[tuple(di.T)] = dv
    assert np.array_equal(np.argwhere(pattern), di)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9) if values == "float" else np.array_equal(got, want)
    assert r["shape"] == list(want.shape) and r["rows_out"] == len(di) and r["parts"] > 1 and r["workers"] == 2
    assert r["canonical"] and all(m.canonical for m in _part_metas(out))  # a directory claims no order itself
    _no_leftovers(tmp_path, ["a", "b", "out", "local.parquet"])


def _stored(path, shape, adjoint):
    """Where the tensor at ``path`` stores an entry (op'd by ``adjoint``), as a dense bool mask."""
    idx, _ = _read_all_k(path, 2)
    mask = np.zeros(shape, bool)
    mask[tuple(idx.T)] = True
    return mask.T if adjoint else mask


@pytest.mark.parametrize("values,dense_type,adjoint_a,adjoint_b", [
    ("float", np.float64, False, False), ("float", np.complex128, True, True), ("int", np.int64, False, True),
    ("int", np.float32, True, False),
])
def test_matmul_dense_sparse_matches_numpy_and_one_machine(client, tiny, tmp_path, rng, values, dense_type,  # noqa: F811
                                                           adjoint_a, adjoint_b):
    """A dense .npy times sparse parts (unsorted, repeated coordinates, an empty part): the same
    Fortran-order .npy as one machine, byte for byte, and NumPy's product."""
    src, b = _matrix_parts(tmp_path / "b", rng, (45, 60), 1500, 5, values)
    _with_empty_part(src, b.shape, b.dtype)
    b_op = b.T if adjoint_b else b
    a = (rng.standard_normal((7, b_op.shape[0])) * 4).astype(dense_type)
    if dense_type == np.complex128:
        a = a + 1j * rng.standard_normal(a.shape)
    a_stored = np.ascontiguousarray(a.conj().T) if adjoint_a else a
    np.save(tmp_path / "a.npy", a_stored)
    out, local = str(tmp_path / "ab.npy"), str(tmp_path / "local.npy")
    kw = dict(adjoint_a=adjoint_a, adjoint_b=adjoint_b, memory=tiny)
    r = sptool.distributed.matmul(str(tmp_path / "a.npy"), src, out, client=client, **kw)
    sptool.matmul(str(tmp_path / "a.npy"), src, local, **kw)
    with open(out, "rb") as f, open(local, "rb") as g:
        assert f.read() == g.read()  # header (Fortran order, dtype, shape) and data
    got, want = np.load(out), a @ b_op
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9) if got.dtype.kind in "fc" else np.array_equal(got, want)
    assert r["shape"] == list(want.shape) and r["parts"] > 1 and r["workers"] == 2
    _no_leftovers(tmp_path, ["b", "a.npy", "ab.npy", "local.npy"])


def test_cli_matmul_sparse_sparse_on_the_scheduler(client, tiny, tmp_path, rng):  # noqa: F811
    src_a, a = _matrix_parts(tmp_path / "a", rng, (30, 20), 400, 3, "int")
    src_b, b = _matrix_parts(tmp_path / "b", rng, (20, 25), 300, 2, "int")
    out = str(tmp_path / "out") + "/"
    res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "matmul", src_a, src_b, "-o", out])
    assert res.exit_code == 0 and "2 workers" in res.output, res.output
    idx, val = _read_all_k(out, 2)
    got = np.zeros((30, 25), np.int64)
    got[tuple(idx.T)] = val
    assert np.array_equal(got, a @ b) and np.array_equal(np.lexsort(idx.T[::-1]), np.arange(len(idx)))


def test_cli_map_and_todense_in_a_terminal(client, tmp_path):  # noqa: F811
    """Under a pseudo-terminal, a per-piece map and a .npy written by the tasks (--scheduler: the
    session's cluster): the bar is drawn and taken down, the summary names the workers."""
    out, dense = str(tmp_path / "m") + "/", str(tmp_path / "d.npy")
    address = client.scheduler.address
    code, output = run_in_terminal(["sptool", "--scheduler", address, "map", "sample_data/tensor3d.parquet",
                                    "--fn", "square", "-o", out], cwd=ROOT, timeout=120)
    text = output.decode("utf-8", "replace")
    assert code == 0 and cursor_restored(output), text
    assert "2 workers" in text and "float64, fill value" in text and "Traceback" not in text, text
    code, output = run_in_terminal(["sptool", "--scheduler", address, "todense", out, "-o", dense], cwd=ROOT,
                                   timeout=120)
    text = output.decode("utf-8", "replace")
    assert code == 0 and cursor_restored(output) and "2 workers" in text and "Traceback" not in text, text
    src = sptool.read(str(ROOT / "sample_data" / "tensor3d.parquet"))
    want = np.zeros(src.shape)
    np.add.at(want, tuple(src.indices.T), src.values)  # duplicates (if any) summed, then squared
    assert np.allclose(np.load(dense), want ** 2, rtol=1e-12, atol=0)
