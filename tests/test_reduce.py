"""reduce against NumPy reductions of the dense oracle, over stored entries only."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor, small_runs, tiny_budget

import sptool
from sptool.cli import cli
from sptool.errors import DataError, UsageError
from sptool.ops.reduce import reduce


@pytest.fixture
def tiny_runs(monkeypatch):
    small_runs(monkeypatch, 64, 13)


def _mask(t):
    """Which cells of the logical tensor are stored (whole blocks for a hybrid tensor)."""
    K = t.sparse_ndim
    m = np.zeros(t.shape[:K], dtype=bool)
    if t.nnz:
        m[tuple(t.indices.T)] = True
    return np.broadcast_to(m.reshape(m.shape + (1,) * (len(t.shape) - K)), t.shape)


def oracle(t, op, axes, keepdims=False, empty=None):
    d = dense_oracle(t)
    mask = _mask(t)
    axes = tuple(range(d.ndim)) if axes is None else tuple(a % d.ndim for a in axes)
    kw = {"axis": axes, "keepdims": keepdims}
    with np.errstate(all="ignore"):
        if op == "sum":
            out = np.sum(d, where=mask, dtype=d.dtype, **kw)
        elif op == "prod":
            out = np.prod(d, where=mask, dtype=d.dtype, **kw)
        elif op in ("max", "min"):
            init = np.iinfo(d.dtype).min if d.dtype.kind in "iu" else -np.inf
            if d.dtype == bool:
                init = False if op == "max" else True
            elif op == "min":
                init = np.iinfo(d.dtype).max if d.dtype.kind in "iu" else np.inf
            out = (np.max if op == "max" else np.min)(d, where=mask, initial=init, **kw)
        elif op == "count":
            out = np.sum(mask, dtype=np.int64, **kw)
        else:
            acc = np.float64 if d.dtype.kind in "iu" else d.dtype
            out = (np.sum(d, where=mask, dtype=acc, **kw) / np.sum(mask, **kw)).astype(acc)
    out = np.asarray(out)
    if empty is None:
        empty = 0 if op == "count" else t.fill_value
    out[~np.asarray(np.any(mask, **kw))] = empty
    return out


def _check(got, want):
    assert got.shape == want.shape
    if want.dtype.kind in "fc":
        rtol = {np.float16: 1e-2, np.float32: 1e-3, np.complex64: 1e-3}.get(want.dtype.type, 1e-9)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def _run(tmp_path, t, op, axis, keepdims=False, dense=False, **kw):
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    out = str(tmp_path / ("out.npy" if dense else "out.parquet"))
    r = reduce(src, out, op=op, axis=axis, keepdims=keepdims, **kw)
    if dense:
        return np.load(out), r
    assert sptool.validate(out).valid
    s = sptool.read(out)
    assert s.canonical
    return s, r


CASES = [(0,), (1,), (2,), (-1,), (0, 2), (1, 2), (0, 1)]


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "mean", "count"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "complex128", "bool", "float16"])
def test_matches_numpy(tmp_path, rng, op, dtype):
    if (op in ("max", "min") and dtype.startswith("complex")) or (dtype == "bool" and op in ("sum", "prod", "mean")):
        with pytest.raises(UsageError):
            _run(tmp_path, random_tensor(rng, (3, 3), 3, dtype=dtype), op, None)
        return
    for duplicates in (False, True):
        t = random_tensor(rng, (7, 6, 5), 90, dtype=dtype, duplicates=duplicates, sort=duplicates)
        for axes in CASES:
            keepdims = axes == (1,)
            s, _ = _run(tmp_path, t, op, axes, keepdims=keepdims)
            want = oracle(t, op, axes, keepdims)
            assert s.shape == want.shape
            _check(s.to_dense(), want)
            stored = np.any(_mask(t), axis=tuple(a % 3 for a in axes), keepdims=keepdims)
            assert s.nnz == stored.sum()
        got, _ = _run(tmp_path, t, op, (0, 2), dense=True)
        _check(got, oracle(t, op, (0, 2)))
        value = reduce(str(tmp_path / "in.parquet"), op=op)
        _check(np.asarray(value), oracle(t, op, None))


@pytest.mark.parametrize("op", ["sum", "max", "mean", "count"])
def test_streaming_paths(tmp_path, rng, tiny_batches, tiny_runs, op, monkeypatch):
    """Single pass (sorted, dense accumulation of unsorted rows) and the external sort, on tiny
    batches and tiny sort runs, with duplicates straddling batch boundaries."""

    canonical = random_tensor(rng, (9, 8, 7), 300, sort=True)
    dups = random_tensor(rng, (9, 8, 7), 300, duplicates=True)
    sorted_dups = random_tensor(rng, (9, 8, 7), 300, duplicates=True, sort=True)
    for t in (canonical, dups, sorted_dups):
        for axes in [(1,), (0,), (2,), (0, 1), (1, 2)]:
            s, _ = _run(tmp_path, t, op, axes)
            _check(s.to_dense(), oracle(t, op, axes))
    # A tiny budget forces the external sort where the dense accumulator would be used.
    for t in (canonical, dups):
        for axes in [(1,), (0,)]:
            s, _ = _run(tmp_path, t, op, axes, memory=tiny_budget(64))
            _check(s.to_dense(), oracle(t, op, axes))


def test_middle_paths_dense_and_sorted(tmp_path, rng):
    """Many groups per batch: dense slots when groups are full, a sort by cell when sparse."""
    full = random_tensor(rng, (40, 5, 6), 900, sort=True)
    s, _ = _run(tmp_path, full, "max", (1,))
    _check(s.to_dense(), oracle(full, "max", (1,)))
    thin = random_tensor(rng, (300, 3, 2000), 500, sort=True)
    for op in ("sum", "min"):
        s, _ = _run(tmp_path, thin, op, (1,))
        _check(s.to_dense(), oracle(thin, op, (1,)))


@pytest.mark.parametrize("batch_rows", [None, "37", "500"])
def test_a_sum_over_groups_much_thinner_than_their_cells_adds_in_row_order(tmp_path, rng, monkeypatch, batch_rows):
    """About two rows a group against 256 cells a group (the compiled one-pass sum's sparse case),
    duplicates included: each cell is the sum of its rows taken in file order, NumPy's
    ``np.add.at`` bit for bit, however the rows are cut into batches."""
    if batch_rows:
        monkeypatch.setenv("SPTOOL_BATCH_ROWS", batch_rows)
    shape = (1500, 50, 256)
    flat = np.sort(rng.integers(0, np.prod(shape), 3000))
    idx = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    val = rng.standard_normal(len(idx)) * 10.0 ** rng.integers(-8, 8, len(idx))
    t = sptool.SparseTensor(idx, val, shape)
    s, _ = _run(tmp_path, t, "sum", (1,))
    want = np.zeros((shape[0], shape[2]))
    np.add.at(want, (idx[:, 0], idx[:, 2]), val)
    got = s.to_dense()
    assert s.nnz == len(np.unique(idx[:, [0, 2]], axis=0))
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("shape,nnz", [((4, 0, 3), 0), ((1, 1, 1), 1), ((5, 1, 3), 0), ((2, 9, 1), 4)])
def test_small_and_empty(tmp_path, rng, shape, nnz):
    t = random_tensor(rng, shape, nnz)
    for op in ("sum", "max", "count", "mean"):
        for axes in [(0,), (1,), (0, 2)]:
            s, _ = _run(tmp_path, t, op, axes)
            _check(s.to_dense(), oracle(t, op, axes))
            got, _ = _run(tmp_path, t, op, axes, keepdims=True, dense=True)
            _check(got, oracle(t, op, axes, keepdims=True))
        _check(np.asarray(reduce(str(tmp_path / "in.parquet"), op=op)), oracle(t, op, None))


def test_empty_value_and_fill(tmp_path, rng):
    t = random_tensor(rng, (6, 5, 4), 20, dtype="float64")
    got, _ = _run(tmp_path, t, "max", (0,), dense=True, empty_value=-7.5)
    _check(got, oracle(t, "max", (0,), empty=-7.5))
    s, _ = _run(tmp_path, t, "min", (0,), empty_value=float("nan"))
    assert np.isnan(s.fill_value)
    _check(s.to_dense(), oracle(t, "min", (0,), empty=np.nan))
    ti = random_tensor(rng, (6, 5), 10, dtype="int32")
    with pytest.raises(UsageError, match="does not fit"):
        _run(tmp_path, ti, "sum", (0,), empty_value=0.5)


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (1, 2), (0, 1), (-1,), None])
def test_hybrid(tmp_path, rng, tiny_batches, axes):
    """Sparse axes reduce whole blocks elementwise; dense axes reduce inside the blocks."""
    t = random_tensor(rng, (8, 5, 3, 2), 30, sparse_ndim=2, duplicates=True)
    for op in ("sum", "max", "count", "mean"):
        want = oracle(t, op, axes)
        if axes is None:
            _check(np.asarray(reduce(_write(tmp_path, t), op=op)), want)
            continue
        got, _ = _run(tmp_path, t, op, axes, dense=True)
        _check(got, want)
        s, _ = _run(tmp_path, t, op, axes, keepdims=True)
        _check(s.to_dense(), oracle(t, op, axes, keepdims=True))
        if any(d not in [a % 4 for a in axes] for d in (0, 1)):
            s, _ = _run(tmp_path, t, op, axes)
            _check(s.to_dense(), want)


def _write(tmp_path, t):
    path = str(tmp_path / "h.parquet")
    sptool.write(t, path)
    return path


def test_stdin_and_stream_output(tmp_path, rng):
    t = random_tensor(rng, (6, 5, 4), 40, duplicates=True)
    src = _write(tmp_path, t)
    sptool.write(t, str(tmp_path / "in.arrows"))
    s_out = str(tmp_path / "o.arrows")
    reduce(str(tmp_path / "in.arrows"), s_out, op="count", axis=[2])
    _check(sptool.read(s_out).to_dense(), oracle(t, "count", (2,)))
    assert reduce(src, op="count") == int(oracle(t, "count", None))


def test_errors(tmp_path, rng, monkeypatch):
    t = random_tensor(rng, (6, 5, 4), 20)
    src = _write(tmp_path, t)
    with pytest.raises(UsageError, match="out of range"):
        reduce(src, str(tmp_path / "o.parquet"), op="sum", axis=[3])
    with pytest.raises(UsageError, match="scalar"):
        reduce(src, str(tmp_path / "o.parquet"), op="sum")
    with pytest.raises(UsageError, match="--op"):
        reduce(src, op="median")
    h = random_tensor(rng, (6, 3), 5, sparse_ndim=1)
    hsrc = str(tmp_path / "h.parquet")
    sptool.write(h, hsrc)
    with pytest.raises(UsageError, match="no sparse dimension"):
        reduce(hsrc, str(tmp_path / "o.parquet"), op="sum", axis=[0])
    assert not os.path.exists(tmp_path / "o.parquet")
    # An index outside the shape is an error naming the row, whichever path reads it.
    bad = sptool.SparseTensor([[0, 0, 0], [9, 1, 1]], [1.0, 2.0], (10, 5, 4))
    sptool.write(bad, str(tmp_path / "bad.parquet"))
    import pyarrow.parquet as pq

    table = pq.read_table(str(tmp_path / "bad.parquet"))
    md = pq.read_metadata(str(tmp_path / "bad.parquet")).metadata
    meta = json.loads(md[b"sptool"])
    meta["shape"] = [5, 5, 4]
    with pq.ParquetWriter(str(tmp_path / "bad3.parquet"), table.schema) as w:
        w.write_table(table)
        w.add_key_value_metadata({"sptool": json.dumps(meta)})
    for axis in ([1], [0], [2]):
        with pytest.raises(DataError, match=r"indices\[1\] = \[9,1,1\] is out of bounds"):
            reduce(str(tmp_path / "bad3.parquet"), str(tmp_path / "o.parquet"), op="sum", axis=axis)
        with pytest.raises(DataError, match=r"indices\[1\] = \[9,1,1\] is out of bounds"):
            reduce(str(tmp_path / "bad3.parquet"), str(tmp_path / "o.parquet"), op="max", axis=axis)
        assert not os.path.exists(tmp_path / "o.parquet")
    with pytest.raises(DataError, match=r"\[9,1,1\] is out of bounds"):  # through the external sort
        reduce(str(tmp_path / "bad3.parquet"), str(tmp_path / "o.parquet"), op="sum", axis=[1],
               memory=tiny_budget(64))
    assert not os.path.exists(tmp_path / "o.parquet")


def test_cli(tmp_path, rng):
    t = random_tensor(rng, (6, 5, 4), 30, dtype="complex128")
    src = _write(tmp_path, t)
    runner = CliRunner()
    r = runner.invoke(cli, ["reduce", src, "--op", "max", "--axis", "0"])
    assert r.exit_code == 2 and "no order" in r.output and r.output.count("\n") == 1
    r = runner.invoke(cli, ["reduce", src, "--op", "sum", "--axis", "7", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 2 and "out of range" in r.output
    r = runner.invoke(cli, ["-q", "reduce", src, "--op", "count", "--json"])
    assert r.exit_code == 0 and json.loads(r.output) == {"value": int(oracle(t, "count", None))}
    r = runner.invoke(cli, ["-q", "reduce", src, "--op", "sum", "--json"])
    v = json.loads(r.output)["value"]
    np.testing.assert_allclose(complex(*v), oracle(t, "sum", None))
    out = str(tmp_path / "o.npy")
    r = runner.invoke(cli, ["-q", "reduce", src, "--op", "sum", "--axis", "0,-1", "--keepdims", "-o", out])
    assert r.exit_code == 0, r.output
    _check(np.load(out), oracle(t, "sum", (0, 2), keepdims=True))


def test_repeated_axis_is_a_usage_error():
    with pytest.raises(sptool.UsageError, match="repeats a dimension"):
        sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data",
                              "tensor3d.parquet")
        sptool.reduce(sample, op="sum", axis=[0, -3])


@pytest.mark.parametrize("op", ["max", "min", "prod", "count", "mean", "sum"])
def test_a_claim_of_unique_rows_that_lies_is_an_error_not_a_wrong_result(tmp_path, rng, op):
    """max, min, prod, count and mean see each coordinate once: a file claiming canonical rows
    that repeat one is refused at the first repeat (NumPy finds it), where it gave the reduction
    of the repeats; sum needs no claim and adds them, as NumPy does."""

    idx = np.unique(np.stack([rng.integers(0, 30, 400), rng.integers(0, 20, 400)], axis=1), axis=0)
    at = len(idx) // 2
    idx = np.insert(idx, at, idx[at - 1], axis=0)  # row ``at`` repeats the row before it
    val = rng.integers(1, 9, len(idx)).astype(np.int64)
    path = _claiming_canonical(tmp_path, idx, val, unique=True)
    codes = idx[:, 0] * 20 + idx[:, 1]
    first_repeat = int(np.flatnonzero(np.diff(codes) == 0)[0]) + 1
    out = tmp_path / "out.parquet"
    if op == "sum":
        sptool.reduce(path, str(out), op="sum", axis=1)
        want = np.zeros(30, dtype=np.int64)
        np.add.at(want, idx[:, 0], val)
        assert np.array_equal(sptool.read(str(out)).to_dense(), want)
        return
    with pytest.raises(DataError, match=rf"indices\[{first_repeat}\] = .* is repeated, although the metadata says"):
        sptool.reduce(path, str(out), op=op, axis=1)
    assert not out.exists()


def _claiming_canonical(tmp_path, idx, val, *, unique: bool) -> str:
    """A (30, 20) file of the rows ``idx``, ``val`` in that order whose metadata claims them
    sorted in (0, 1), and unique (canonical) if ``unique``, as sptool writes it for sorted rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "lies.parquet")
    good = np.unique(idx, axis=0)
    sptool.write(sptool.SparseTensor(good, np.ones(len(good), dtype=val.dtype), (30, 20)), path)
    f = pq.ParquetFile(path)
    kept = {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"}
    meta = json.loads(kept[b"sptool"])
    assert meta["sort_order"] == [0, 1] and meta["unique"]
    meta.update(nnz=len(idx), unique=unique, canonical=unique)
    kept[b"sptool"] = json.dumps(meta).encode()
    table = pa.table({"indices_0": idx[:, 0], "indices_1": idx[:, 1], "values": val}, schema=f.schema_arrow)
    pq.write_table(table.replace_schema_metadata(kept), path, row_group_size=64)
    return path


@pytest.mark.parametrize("op,axis,unique", [("sum", 1, True), ("sum", 1, False), ("max", 0, False),
                                            ("max", 1, False), ("count", 0, False), ("mean", 0, False),
                                            ("min", 1, True)])
def test_a_claimed_order_that_lies_is_an_error_naming_the_row(tmp_path, rng, op, axis, unique):
    """What a one-pass reduce relies on of a claimed order (groups of the leading kept dimension
    ending where it changes, duplicates summed where they meet) is checked as the rows pass: a
    file claiming sorted rows that are not is refused at NumPy's first row out of order, with the
    whole row, where it gave an internal error (the output out of order) or, for max over axis 0,
    the max of duplicates never summed."""
    idx = np.unique(np.stack([rng.integers(0, 30, 600), rng.integers(0, 20, 600)], axis=1), axis=0)
    idx = np.concatenate([idx, idx[:40]])  # the first 40 coordinates again at the end
    val = rng.integers(1, 9, len(idx)).astype(np.int64)
    path = _claiming_canonical(tmp_path, idx, val, unique=unique)
    codes = idx[:, 0] * 20 + idx[:, 1]
    row = int(np.flatnonzero(np.diff(codes) < 0)[0]) + 1
    out = tmp_path / "out.parquet"
    with pytest.raises(DataError, match=rf"indices\[{row}\] = \[{idx[row, 0]},{idx[row, 1]}\] is out of order, "
                                        r"although the metadata says sort_order \[0, 1\]"):
        sptool.reduce(path, str(out), op=op, axis=axis, memory="16MiB")
    assert not out.exists()
