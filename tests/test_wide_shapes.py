"""Tensors whose extents multiply past 2^63 - 1 (format 1.1): FROSTT's six largest tensors' extents,
SPLATT's med5.tns, a matrix of 10^10 x 10^10 and TensorFlow's SparseReorderTest.testShapeOverflow,
with a few random entries each.  Every command is checked against NumPy on the index tuples (a
stable lexsort, sums by np.unique), through every path: in memory, spilled (tiny runs and merge
slices through the tuning variables), an Arrow stream, and a Dask cluster."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sptool
from sptool.cli import cli
from sptool.errors import SptoolError

# FROSTT's published extents (frostt.io): every tensor of the corpus whose extents multiply past 2^63 - 1.
FROSTT = {
    "amazon-reviews": (4_821_207, 1_774_269, 1_805_187),
    "delicious": (532_924, 17_262_471, 2_480_308, 1_443),
    "flickr": (319_686, 28_153_045, 1_607_191, 731),
    "nell-1": (2_902_330, 2_143_368, 25_495_389),
    "reddit-2015": (8_211_298, 176_962, 8_116_559),
    "lbnl-network": (1_605, 4_198, 1_631, 4_209, 868_131),
}
# SPLATT's tests/tensors/med5.tns (the largest index of each mode: 100,000 entries, 1-based).
MED5 = (60_114, 83_826, 23_034, 1_132, 100)
TEN_TO_TEN = (10**10, 10**10)
SHAPES = {**FROSTT, "med5": MED5, "1e10-matrix": TEN_TO_TEN}
WIDE = ["amazon-reviews", "delicious", "lbnl-network", "reddit-2015"]  # 65, 78, 68 and 64 bits of key
# Tiny batches, runs, merge slices, row groups and matmul slabs: every sort spills and merges in a tree.
SPILL = {"SPTOOL_BATCH_ROWS": "37", "SPTOOL_RUN_ROWS": "53", "SPTOOL_MERGE_ROWS": "16", "SPTOOL_ROW_GROUP_ROWS": "41",
         "SPTOOL_KEEP_BYTES": "0", "SPTOOL_FAN_IN": "3", "SPTOOL_PARALLEL_ROWS": "8", "SPTOOL_SLAB_ENTRIES": "60"}


# -- data and the NumPy oracle ---------------------------------------------------------------------

def entries(rng, shape, n=400, *, dups: int = 40):
    """n random entries of ``shape``, ``dups`` of them repeating earlier coordinates, indices at the
    extents' edges included; small integer values in float64, so every sum is exact."""
    idx = np.stack([rng.integers(0, s, n) for s in shape], axis=1).astype(np.int64)
    idx[:2] = 0
    idx[2:4] = np.asarray(shape) - 1
    if dups:
        idx[n - dups:] = idx[rng.integers(0, n - dups, dups)]
    return idx, rng.integers(-50, 50, n).astype(np.float64)


def canonical(idx, vals):
    """Row-major order, one entry per coordinate, repeats summed."""
    coords, inverse = np.unique(idx, axis=0, return_inverse=True)
    sums = np.zeros(len(coords))
    np.add.at(sums, inverse.reshape(-1), vals)
    return coords, sums


def stable_sorted(idx, vals, order):
    perm = np.lexsort(idx[:, order[::-1]].T)
    return idx[perm], vals[perm]


def write(tmp_path, name, idx, vals, shape, **kw):
    path = str(tmp_path / name)
    sptool.write(sptool.SparseTensor(idx, vals, shape, **kw), path)
    return path


def rows_of(path):
    t = sptool.read(path)
    return t.indices, t.values, t


def same(got_idx, got_vals, want_idx, want_vals):
    assert got_idx.shape == want_idx.shape
    assert np.array_equal(got_idx, want_idx)
    assert np.array_equal(got_vals, want_vals)


@pytest.fixture(params=["memory", "spilled"])
def path_kind(request, monkeypatch):
    if request.param == "spilled":
        for k, v in SPILL.items():
            monkeypatch.setenv(k, v)
    return request.param


# -- the format: written as 1.1.0, read, validated -----------------------------------------------------

@pytest.mark.parametrize("name", list(SHAPES))
def test_write_read_validate_info(tmp_path, rng, name):
    shape = SHAPES[name]
    idx, vals = entries(rng, shape)
    path = write(tmp_path, "t.parquet", idx, vals, shape)
    meta = pq.read_metadata(path).metadata[b"sptool"]
    assert b'"version":"1.1.0"' in meta
    got_idx, got_vals, t = rows_of(path)
    same(got_idx, got_vals, idx, vals)
    assert t.shape == shape
    report = sptool.validate(path, deep=True)
    assert report.valid, report.as_dict()
    info = sptool.info(path, scan=True)
    assert info["shape"] == list(shape) and info["nnz"] == len(idx)


def test_a_1_0_file_past_int64_is_refused_and_a_1_1_one_read(tmp_path, rng):
    """What a 1.0 reader does with such a file, as this reader checks a file that declares 1.0.0:
    E_SHAPE_OVERFLOW, fatal; the same file declaring 1.1.0 is valid."""
    shape = FROSTT["nell-1"]
    idx, vals = entries(rng, shape, dups=0)
    for version, valid in (("1.0.0", False), ("1.1.0", True)):
        meta = sptool.TensorMeta(shape=shape, sparse_ndim=3, value_type="float64", nnz=len(idx))
        obj = {**meta.to_dict(), "version": version}
        table = pa.table({**{f"indices_{k}": idx[:, k] for k in range(3)}, "values": vals})
        path = str(tmp_path / f"v{version}.parquet")
        pq.write_table(table.replace_schema_metadata({"sptool": json.dumps(obj)}), path)
        report = sptool.validate(path)
        assert report.valid == valid, report.as_dict()
        codes = {p.code for p in report.problems}
        assert ("E_SHAPE_OVERFLOW" in codes) == (not valid)
        if not valid:
            with pytest.raises(SptoolError, match="2\\^63-1"):
                sptool.read(path)


def test_only_the_dense_dimensions_must_still_fit():
    """Under 1.1 the sparse extents' product is free; a row's dense block still fits int64."""
    from sptool.format import check_metadata

    def codes(shape, sparse_ndim):
        obj = sptool.TensorMeta(shape=shape, sparse_ndim=sparse_ndim, value_type="float64", nnz=0).to_dict()
        return [p.code for p in check_metadata(json.dumps(obj))[1]]

    assert math.prod(SHAPES["delicious"] + (4,)) > 2**63 - 1
    assert codes(SHAPES["delicious"] + (4,), 4) == []
    assert codes((4, 2**62, 4), 1) == ["E_SHAPE_OVERFLOW"]


# -- sorting and merging: reorder ------------------------------------------------------------------

@pytest.mark.parametrize("name", WIDE)
def test_reorder(tmp_path, rng, name, path_kind):
    shape = SHAPES[name]
    K = len(shape)
    idx, vals = entries(rng, shape)
    src = write(tmp_path, "a.parquet", idx, vals, shape)
    for order in (tuple(range(K)), tuple(reversed(range(K))), (1, 0) + tuple(range(2, K))):
        t = sptool.reorder(src, None, perm=order)
        same(t.indices, t.values, *stable_sorted(idx, vals, list(order)))
        assert t.shape == shape and t.sort_order == order
    t = sptool.reorder(src, None, duplicates="sum")
    same(t.indices, t.values, *canonical(idx, vals))
    assert t.canonical


def test_tensorflow_sparse_reorder_shape_overflow(tmp_path):
    """TensorFlow's SparseReorderTest.testShapeOverflow (sparse_reorder_op_test.py, GitHub issue
    45392): one entry at the origin of a 4096^6 tensor (72 bits of key) reorders to itself."""
    shape = (4096,) * 6
    src = write(tmp_path, "t.parquet", [[0] * 6], [0.0], shape)
    out = str(tmp_path / "o.parquet")
    sptool.reorder(src, out)
    t = sptool.read(out)
    assert t.shape == shape and t.indices.tolist() == [[0] * 6] and t.values.tolist() == [0.0]
    assert sptool.validate(out).valid


def test_reorder_of_all_extents(tmp_path, rng, monkeypatch):
    """Every tensor of the list, spilled, in the order of its last dimension first."""
    for k, v in SPILL.items():
        monkeypatch.setenv(k, v)
    for name, shape in SHAPES.items():
        idx, vals = entries(rng, shape, 150, dups=20)
        src = write(tmp_path, f"{name}.parquet", idx, vals, shape)
        order = tuple(reversed(range(len(shape))))
        t = sptool.reorder(src, None, perm=order)
        same(t.indices, t.values, *stable_sorted(idx, vals, list(order)))


# -- add, reduce -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", WIDE)
def test_add(tmp_path, rng, name, path_kind):
    shape = SHAPES[name]
    ia, va = entries(rng, shape)
    ib, vb = entries(rng, shape)
    ib[:100] = ia[:100]  # shared coordinates
    a, b = write(tmp_path, "a.parquet", ia, va, shape), write(tmp_path, "b.parquet", ib, vb, shape)
    want = canonical(np.concatenate([ia, ib]), np.concatenate([va, vb]))
    t = sptool.add(a, b, None)
    same(t.indices, t.values, *want)
    assert t.canonical and t.shape == shape
    # With a threshold (the join that is not fused): sums under it vanish where both sides have the entry.
    both = {tuple(r) for r in canonical(ia, va)[0]} & {tuple(r) for r in canonical(ib, vb)[0]}
    keep = np.array([not (abs(v) < 20 and tuple(r) in both) for r, v in zip(*want)])
    t = sptool.add(a, b, None, thresh=20)
    same(t.indices, t.values, want[0][keep], want[1][keep])


def _reduce_oracle(idx, vals, axes, op):
    coords, sums = canonical(idx, vals)  # every op sees the duplicates summed
    kept = [d for d in range(idx.shape[1]) if d not in axes]
    groups, inverse = np.unique(coords[:, kept], axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
    out = np.full(len(groups), {"sum": 0.0, "max": -np.inf, "min": np.inf}[op])
    ufunc.at(out, inverse, sums)
    return groups, out


@pytest.mark.parametrize("name", WIDE)
def test_reduce(tmp_path, rng, name, path_kind):
    shape = SHAPES[name]
    K = len(shape)
    idx, vals = entries(rng, shape)
    src = write(tmp_path, "a.parquet", idx, vals, shape)
    canonical_src = write(tmp_path, "c.parquet", *canonical(idx, vals), shape)
    for path in (src, canonical_src):
        for axis in range(K):
            t = sptool.reduce(path, None, op="sum", axis=axis)
            same(t.indices, t.values, *_reduce_oracle(idx, vals, [axis], "sum"))
        for op, axes in (("max", [0]), ("min", [K - 1, 1])):
            t = sptool.reduce(path, None, op=op, axis=axes)
            same(t.indices, t.values, *_reduce_oracle(idx, vals, axes, op))
        assert sptool.reduce(path, op="count") == len(canonical(idx, vals)[0])
        t = sptool.reduce(path, None, op="sum", axis=0, keepdims=True)
        groups, sums = _reduce_oracle(idx, vals, [0], "sum")
        same(t.indices, t.values, np.concatenate([np.zeros((len(groups), 1), np.int64), groups], axis=1), sums)


# -- structural commands --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", WIDE + ["1e10-matrix"])
def test_slice_concat_split_transpose(tmp_path, rng, name, path_kind):
    shape = SHAPES[name]
    K = len(shape)
    idx, vals = entries(rng, shape)
    src = write(tmp_path, "a.parquet", idx, vals, shape)
    start = [s // 4 for s in shape]
    size = [s // 2 for s in shape[:1]] + [-1] * (K - 1)
    t = sptool.slice_(src, None, start=start, size=size)
    inside = np.all(idx >= start, axis=1) & (idx[:, 0] < start[0] + size[0])
    same(t.indices, t.values, idx[inside] - start, vals[inside])
    assert t.shape == (size[0],) + tuple(s - b for s, b in zip(shape[1:], start[1:]))

    ib, vb = entries(rng, shape, 100, dups=0)
    other = write(tmp_path, "b.parquet", ib, vb, shape)
    for axis in range(K):
        t = sptool.concat([src, other], None, axis=axis)
        shifted = ib.copy()
        shifted[:, axis] += shape[axis]
        both = np.concatenate([idx, shifted]), np.concatenate([vals, vb])
        same(t.indices, t.values, *stable_sorted(*both, list(range(K))))
        assert t.shape[axis] == 2 * shape[axis]

    pieces = sptool.split(src, str(tmp_path / "piece-{i}.parquet"), axis=K - 1, num_split=3)
    extent = shape[K - 1]
    widths = [extent // 3 + (1 if i < extent % 3 else 0) for i in range(3)]  # TensorFlow's sparse split
    lo = 0
    for i, w in enumerate(widths):
        got = sptool.read(str(tmp_path / f"piece-{i}.parquet"))
        mask = (idx[:, K - 1] >= lo) & (idx[:, K - 1] < lo + w)
        want = idx[mask].copy()
        want[:, K - 1] -= lo
        same(got.indices, got.values, want, vals[mask])
        assert got.shape == shape[:K - 1] + (w,)
        lo += w
    assert pieces

    perm = tuple(reversed(range(K)))
    t = sptool.transpose(src, None, perm=perm)
    assert t.shape == tuple(shape[p] for p in perm)
    same(*_sorted(t.indices, t.values), *_sorted(idx[:, perm], vals))


def _sorted(idx, vals):
    perm = np.lexsort((vals,) + tuple(idx.T[::-1]))
    return idx[perm], vals[perm]


def _linear(idx, shape):
    out = []
    for row in idx.tolist():
        lin = 0
        for i, s in zip(row, shape):
            lin = lin * s + i
        out.append(lin)
    return out


def _unravel(lins, shape):
    rows = []
    for lin in lins:
        row = []
        for s in reversed(shape):
            lin, r = divmod(lin, s)
            row.append(r)
        rows.append(row[::-1])
    return np.array(rows, dtype=np.int64).reshape(-1, len(shape))


@pytest.mark.parametrize("name,new", [("amazon-reviews", (4_821_207 * 1_774_269, 1_805_187)),
                                      ("amazon-reviews", (-1, 1_774_269 * 1_805_187)),
                                      ("delicious", (532_924 * 17_262_471, 2_480_308, -1)),
                                      ("1e10-matrix", (10**5, 10**5, 10**5, 10**5)),
                                      ("huge", (2**60, 2**60, 2**40))])
def test_reshape(tmp_path, rng, name, new):
    """Row-major linear indices past 2^63 (in 128 bits) and past 2^128 (Python integers)."""
    shape = SHAPES.get(name, (2**40,) * 4)
    idx, vals = entries(rng, shape)
    src = write(tmp_path, "a.parquet", idx, vals, shape)
    t = sptool.reshape(src, None, shape=new)
    resolved = tuple(math.prod(shape) // -math.prod(new) if s == -1 else s for s in new)
    assert t.shape == resolved
    same(t.indices, t.values, _unravel(_linear(idx, shape), resolved), vals)


def test_reshape_refuses_an_extent_past_int64(tmp_path, rng):
    src = write(tmp_path, "a.parquet", *entries(rng, TEN_TO_TEN, 10, dups=0), TEN_TO_TEN)
    with pytest.raises(SptoolError, match="dimension 0, past 2\\^63-1"):
        sptool.reshape(src, None, shape=[-1])


def test_other_row_wise_commands(tmp_path, rng):
    shape = FROSTT["flickr"]
    idx, vals = entries(rng, shape)
    src = write(tmp_path, "a.parquet", idx, vals, shape)
    t = sptool.expand_dims(src, None, axis=1)
    assert t.shape == shape[:1] + (1,) + shape[1:]
    same(t.indices, t.values, np.insert(idx, 1, 0, axis=1), vals)
    t = sptool.retain(src, None, where="values > 0")
    same(t.indices, t.values, idx[vals > 0], vals[vals > 0])
    t = sptool.map_values(src, None, fn="abs")  # of the logical tensor: duplicates summed first
    coords, sums = canonical(idx, vals)
    same(t.indices, t.values, coords, np.abs(sums))
    t = sptool.reset_shape(src, None, shape=[s + 1 for s in shape])
    assert t.shape == tuple(s + 1 for s in shape)
    t = sptool.maximum(src, src, None)  # of a tensor and itself: its duplicates summed
    same(t.indices, t.values, *canonical(idx, vals))



# -- matmul ---------------------------------------------------------------------------------------------

def _product_oracle(ia, va, ib, vb, adjoint_a, adjoint_b):
    rows_of_k: dict = {}
    for (i, k), v in zip(ia.tolist(), va.tolist()):
        if adjoint_a:
            i, k = k, i
        rows_of_k.setdefault(k, []).append((i, v))
    out: dict = {}
    for (k, j), v in zip(ib.tolist(), vb.tolist()):
        if adjoint_b:
            k, j = j, k
        for i, x in rows_of_k.get(k, []):
            out[(i, j)] = out.get((i, j), 0.0) + x * v
    keys = sorted(out)
    return np.array(keys, dtype=np.int64).reshape(-1, 2), np.array([out[k] for k in keys])


@pytest.mark.parametrize("adjoint_a,adjoint_b", [(False, False), (False, True), (True, False)])
def test_matmul_sparse_sparse_of_1e10_columns(tmp_path, rng, path_kind, adjoint_a, adjoint_b):
    """B's 10^10 columns: a dense accumulator per thread would want 480 GB; the products are
    accumulated by sorting instead, and B's 10^10 rows are indexed by the rows it has."""
    n = 10**10
    ia, va = entries(rng, (3000, n), 300, dups=30)
    ib, vb = entries(rng, (n, 3000), 300, dups=30)
    ia[:, 1] = rng.integers(0, 400, 300) * 25_000_000  # inner indices that meet
    ib[:, 0] = rng.integers(0, 400, 300) * 25_000_000
    if adjoint_a:
        ia = ia[:, ::-1].copy()
    if adjoint_b:
        ib = ib[:, ::-1].copy()
    a = write(tmp_path, "a.parquet", ia, va, (n, 3000) if adjoint_a else (3000, n))
    b = write(tmp_path, "b.parquet", ib, vb, (3000, n) if adjoint_b else (n, 3000))
    # A x B^T and A^T x B meet on the 3000-wide side: the product has 10^10 rows or columns.
    t = sptool.matmul(b, a, None, adjoint_a=adjoint_b, adjoint_b=adjoint_a) if (adjoint_a or adjoint_b) \
        else sptool.matmul(a, b, None)
    want = _product_oracle(ib, vb, ia, va, adjoint_b, adjoint_a) if (adjoint_a or adjoint_b) \
        else _product_oracle(ia, va, ib, vb, False, False)
    same(t.indices, t.values, *want)
    assert t.canonical and len(want[1])


def test_matmul_of_two_1e10_matrices(tmp_path, rng, path_kind):
    shape = TEN_TO_TEN
    ia, va = entries(rng, shape, 200, dups=20)
    ib, vb = entries(rng, shape, 200, dups=20)
    ib[:100, 0] = ia[:100, 1]
    a, b = write(tmp_path, "a.parquet", ia, va, shape), write(tmp_path, "b.parquet", ib, vb, shape)
    t = sptool.matmul(a, b, None)
    same(t.indices, t.values, *_product_oracle(ia, va, ib, vb, False, False))
    assert t.shape == shape


# -- the stream path: Arrow IPC streams in and out, on the command line ------------------------------------

def run_cli(*args, input=None) -> bytes:
    r = CliRunner().invoke(cli, ["-q", *args], input=input)
    assert r.exit_code == 0, r.output
    return r.stdout_bytes


def read_stream(tmp_path, data: bytes, name: str):
    path = tmp_path / name
    path.write_bytes(data)
    t = sptool.read(str(path))
    return t.indices, t.values, t


@pytest.mark.parametrize("name", ["amazon-reviews", "lbnl-network"])
def test_stream_path(tmp_path, rng, name, path_kind):
    shape = SHAPES[name]
    K = len(shape)
    ia, va = entries(rng, shape)
    ib, vb = entries(rng, shape)
    a, b = write(tmp_path, "a.arrows", ia, va, shape), write(tmp_path, "b.arrows", ib, vb, shape)
    got = read_stream(tmp_path, run_cli("reorder", a, "--perm", ",".join(map(str, reversed(range(K)))), "-o", "-"),
                      "r.arrows")
    same(got[0], got[1], *stable_sorted(ia, va, list(range(K))[::-1]))
    summed = run_cli("add", "-", b, "-o", "-", input=open(a, "rb").read())
    got = read_stream(tmp_path, summed, "s.arrows")
    same(got[0], got[1], *canonical(np.concatenate([ia, ib]), np.concatenate([va, vb])))
    reduced = run_cli("reduce", "-", "--op", "sum", "--axis", "1", "-o", "-", input=summed)
    got = read_stream(tmp_path, reduced, "d.arrows")
    same(got[0], got[1], *_reduce_oracle(np.concatenate([ia, ib]), np.concatenate([va, vb]), [1], "sum"))
    assert CliRunner().invoke(cli, ["validate", "-"], input=summed).exit_code == 0


def test_stream_of_unknown_extents_declares_1_1(tmp_path, rng):
    """A .tns converted to a stream: the header cannot know the extents, so it declares 1.1.0; the
    trailer's shape passes 2^63 - 1, and the stream is valid."""
    shape = FROSTT["delicious"]
    idx, vals = entries(rng, shape, dups=0)
    text = "".join(" ".join(str(i + 1) for i in row) + f" {v:g}\n" for row, v in zip(idx.tolist(), vals.tolist()))
    (tmp_path / "d.tns").write_text(text)
    data = run_cli("convert", str(tmp_path / "d.tns"), "-o", "-")
    header = json.loads(pa.ipc.open_stream(data).schema.metadata[b"sptool"])
    assert header["version"] == "1.1.0" and header["shape"] == [None] * 4
    got = read_stream(tmp_path, data, "d.arrows")
    same(got[0], got[1], idx, vals)
    assert got[2].shape == shape
    assert CliRunner().invoke(cli, ["validate", "-"], input=data).exit_code == 0


# -- what is inherently dense refuses, saying why ------------------------------------------------------------

def test_dense_outputs_refuse_with_the_reason(tmp_path, rng):
    shape = FROSTT["amazon-reviews"]
    idx, vals = entries(rng, shape, 50, dups=0)
    src = write(tmp_path, "a.parquet", idx, vals, shape)
    matrix = write(tmp_path, "m.parquet", *entries(rng, TEN_TO_TEN, 50, dups=0), TEN_TO_TEN)
    tall_shape = (10**15, 10**10)  # a line, record or pointer a row: petabytes, more than any disk holds
    tall = write(tmp_path, "t.parquet", *entries(rng, tall_shape, 50, dups=0), tall_shape)
    rows = "for each of its 1000000000000000 rows"
    cases = [
        (["todense", src, "-o", str(tmp_path / "d.npy")], "a dense output of this tensor cannot exist"),
        (["reduce", src, "--op", "sum", "--axis", "0", "-o", str(tmp_path / "r.npy")], "dense array of shape"),
        (["fill-empty-rows", tall, "--default-value", "0", "-o", str(tmp_path / "f.parquet")],
         f"dense along dimension 0 (24 bytes or more {rows})"),
        (["info", matrix, "--histogram", "0"], "10000000000 indices"),
        (["convert", tall, "-o", str(tmp_path / "t.jsonl")], "a JSON lines file, dense along dimension 0 (26 bytes"),
        (["convert", tall, "-o", str(tmp_path / "t.svm"), "--to", "svmlight"], f"(2 bytes or more {rows})"),
        (["convert", tall, "-o", str(tmp_path / "t.tfrecord"), "--ids", "ids"], f"(16 bytes or more {rows})"),
    ]
    for args, why in cases:
        r = CliRunner().invoke(cli, args)
        assert r.exit_code in (1, 2), (args, r.output)
        assert why in r.output and "Traceback" not in r.output, r.output
        assert len([line for line in r.output.splitlines() if line.strip()]) == 1, r.output
    assert sorted(os.listdir(tmp_path)) == ["a.parquet", "m.parquet", "t.parquet"]
    with pytest.raises(SptoolError, match="dense along dimension 0"):
        sptool.fill_empty_rows(matrix, None, default_value=0)
    # Along a dimension of FROSTT's extents fill_empty_rows still runs: 4.8M rows fit.
    t = sptool.fill_empty_rows(src, None, default_value=0.0)
    assert t.nnz == shape[0] - len(np.unique(idx[:, 0])) + len(idx)
    assert np.array_equal(np.unique(t.indices[:, 0]), np.arange(shape[0]))


# -- the cluster path ------------------------------------------------------------------------------------

def _parts(tmp_path, name, idx, vals, shape, parts=3):
    d = tmp_path / name
    d.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(idx)), parts)):
        sptool.write(sptool.SparseTensor(idx[rows], vals[rows], shape), str(d / f"part-{i:06d}.parquet"))
    return str(d)


def _dir_rows(path, K):
    files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    return (np.stack([table.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1).reshape(-1, K),
            table.column("values").to_numpy())


@pytest.mark.parametrize("name", ["delicious", "1e10-matrix"])
def test_cluster(tmp_path, rng, name, cluster_client, monkeypatch):
    import sptool.distributed as dist

    for k, v in SPILL.items():
        monkeypatch.setenv(k, v)
    client, memory = cluster_client, "16MiB"
    shape = SHAPES[name]
    K = len(shape)
    ia, va = entries(rng, shape)
    ib, vb = entries(rng, shape)
    a, b = _parts(tmp_path, "a", ia, va, shape), _parts(tmp_path, "b", ib, vb, shape)

    def out(n):
        return str(tmp_path / n) + "/"

    order = tuple(reversed(range(K)))
    dist.reorder(a, out("r"), perm=order, client=client, memory=memory)
    same(*_dir_rows(out("r"), K), *stable_sorted(ia, va, list(order)))
    dist.add(a, b, out("s"), client=client, memory=memory)
    same(*_dir_rows(out("s"), K), *canonical(np.concatenate([ia, ib]), np.concatenate([va, vb])))
    dist.reduce(a, out("d"), op="sum", axis=[0], client=client, memory=memory)
    same(*_dir_rows(out("d"), K - 1), *_reduce_oracle(ia, va, [0], "sum"))
    dist.concat([a, b], out("c"), axis=K - 1, client=client, memory=memory)
    shifted = ib.copy()
    shifted[:, K - 1] += shape[K - 1]
    same(*_sorted(*_dir_rows(out("c"), K)), *_sorted(np.concatenate([ia, shifted]), np.concatenate([va, vb])))
    start, size = [s // 4 for s in shape], [s // 2 for s in shape]
    dist.slice_(a, out("l"), start=start, size=size, client=client, memory=memory)
    inside = np.all((ia >= start) & (ia < np.add(start, size)), axis=1)
    same(*_sorted(*_dir_rows(out("l"), K)), *_sorted(ia[inside] - start, va[inside]))
    dist.transpose(a, out("t"), perm=order, client=client, memory=memory)
    same(*_sorted(*_dir_rows(out("t"), K)), *_sorted(ia[:, list(order)], va))
    new = (shape[0] * shape[1],) + shape[2:] if K > 2 else (10**5, 10**15)
    dist.reshape(a, out("h"), shape=new, client=client, memory=memory)
    same(*_sorted(*_dir_rows(out("h"), len(new))), *_sorted(_unravel(_linear(ia, shape), new), va))
    dist.split(a, str(tmp_path / "p{i}") + "/", axis=0, num_split=2, client=client, memory="64MiB")
    halves = [_dir_rows(str(tmp_path / f"p{i}"), K) for i in range(2)]
    assert sum(len(h[0]) for h in halves) == len(ia)
    assert dist.validate(out("s"), client=client, deep=True).valid
    info = dist.info(out("s"), client=client, scan=True, memory=memory)
    assert info["shape"] == list(shape)
    if K == 2:
        ib2 = ib.copy()
        ib2[:100, 0] = ia[:100, 1]
        b2 = _parts(tmp_path, "b2", ib2, vb, shape)
        dist.matmul(a, b2, out("m"), client=client, memory=memory)
        same(*_dir_rows(out("m"), 2), *_product_oracle(ia, va, ib2, vb, False, False))
