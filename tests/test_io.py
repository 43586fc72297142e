"""The I/O layer: round trips through every container, claims verified, atomic outputs."""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import DTYPES, dense_oracle, random_tensor

import sptool
from sptool.errors import DataError, FormatError, UsageError
from sptool.format import TensorMeta
from sptool.io import make_batch, open_sink, open_source, read_all


def _roundtrip(t, path):
    sptool.write(t, path)
    back = sptool.read(path)
    assert back.shape == t.shape
    np.testing.assert_array_equal(back.indices, t.indices)
    if t.values.dtype.kind == "f":
        np.testing.assert_array_equal(back.values.view(np.uint8), t.values.view(np.uint8))
    else:
        np.testing.assert_array_equal(back.values, t.values)
    # The file claims what the tensor knew without a sort (unsorted rows: no uniqueness promise).
    assert back.meta.sort_order == t.meta.sort_order and back.meta.unique == t.meta.unique
    return back


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("suffix", ["t.parquet", "t.arrows", "dir/"])
def test_roundtrip_value_types(tmp_path, rng, dtype, suffix):
    t = random_tensor(rng, (7, 5, 3), 40, dtype=dtype, duplicates=dtype != "bool")
    _roundtrip(t, os.path.join(tmp_path, suffix))
    assert sptool.validate(os.path.join(tmp_path, suffix)).valid


@pytest.mark.parametrize("block", [(4,), (2, 3)])
def test_roundtrip_hybrid(tmp_path, rng, block):
    t = random_tensor(rng, (9,) + block, 12, sparse_ndim=1, dtype="float32", duplicates=True)
    back = _roundtrip(t, str(tmp_path / "h.parquet"))
    np.testing.assert_allclose(back.to_dense(), dense_oracle(t))
    schema = pq.read_schema(tmp_path / "h.parquet")
    assert pa.types.is_fixed_size_list(schema.field("values").type)


def test_roundtrip_strings_and_binary(tmp_path):
    t = sptool.SparseTensor([[0, 1], [2, 0]], np.array(["ab", "ü"], dtype=object), (3, 2), value_type="string")
    back = _roundtrip(t, str(tmp_path / "s.parquet"))
    assert back.to_dense().tolist() == [["", "ab"], ["", ""], ["ü", ""]]
    b = sptool.SparseTensor([[1]], np.array([b"\x00\xff"], dtype=object), (2,), value_type="binary")
    assert sptool.read(sptool.write(b, str(tmp_path / "b.parquet")) and str(tmp_path / "b.parquet")).values[0] \
        == b"\x00\xff"


@pytest.mark.parametrize("shape,nnz", [((0, 4), 0), ((3, 4), 0), ((1,), 1), ((5, 0, 2), 0)])
def test_empty_and_zero_sized(tmp_path, rng, shape, nnz):
    t = random_tensor(rng, shape, nnz)
    for name in ("e.parquet", "e.arrows", "e/"):
        back = _roundtrip(t, os.path.join(tmp_path, name))
        np.testing.assert_array_equal(back.to_dense(), dense_oracle(t))
        assert sptool.validate(os.path.join(tmp_path, name)).valid


def test_fill_values_survive(tmp_path):
    for vt, fill in [("float64", float("nan")), ("float32", -0.0), ("int8", -128), ("complex64", 1 + 2j),
                     ("bool", True), ("uint64", 2**64 - 1)]:
        t = sptool.SparseTensor([[0]], np.array([1]).astype(np.dtype(vt) if vt != "bool" else bool), (3,),
                                fill_value=fill, value_type=vt)
        path = str(tmp_path / f"{vt}.parquet")
        sptool.write(t, path)
        got = sptool.read(path).fill_value
        if isinstance(fill, float) and fill != fill:
            assert got != got
        else:
            assert got == fill and str(got) == str(fill)


def test_shape_extent_past_int64_refused(tmp_path):
    """An extent must be an int64; the extents' product may pass 2^63 - 1 (format 1.1)."""
    with pytest.raises(DataError, match="extent past 2"):
        sptool.SparseTensor([[0, 0]], [1.0], (2**63, 2))
    assert sptool.SparseTensor([[0, 0]], [1.0], (2**62 + 1, 2)).shape == (2**62 + 1, 2)


def test_big_shape_entries_exact(tmp_path):
    shape = (2**60 + 3, 7)
    t = sptool.SparseTensor([[2**60 + 2, 6]], [1.0], shape)
    sptool.write(t, str(tmp_path / "big.parquet"))
    assert sptool.read(str(tmp_path / "big.parquet")).shape == shape


def test_directory_parts_and_row_groups(tmp_path, rng):
    t = random_tensor(rng, (50, 40), 1500, sort=True)
    meta = t.meta
    with open_sink(os.path.join(tmp_path, "ds/"), meta, part_rows=400) as sink:
        for s in range(0, t.nnz, 333):
            sink.write(np.ascontiguousarray(t.keys[:, s:s + 333]), t.values[s:s + 333])
    parts = sorted(os.listdir(tmp_path / "ds"))
    assert parts == [f"part-{i:06d}.parquet" for i in range(-(-t.nnz // 400))]
    for p in parts:
        md = pq.read_metadata(tmp_path / "ds" / p)
        assert md.num_rows <= 400
        assert md.row_group(0).sorting_columns[0].column_index == 0
    src = open_source(str(tmp_path / "ds"))
    idx, vals, m = read_all(src)
    np.testing.assert_array_equal(idx, t.indices)
    assert m.nnz == t.nnz
    assert sptool.validate(str(tmp_path / "ds")).valid


def test_row_group_cap(tmp_path, monkeypatch, rng):
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "100")
    t = random_tensor(rng, (30, 30), 450, sort=True)
    sptool.write(t, str(tmp_path / "rg.parquet"))
    md = pq.read_metadata(tmp_path / "rg.parquet")
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert sizes == [100] * (t.nnz // 100) + ([t.nnz % 100] if t.nnz % 100 else [])


def test_sink_verifies_claims(tmp_path):
    meta = TensorMeta(shape=(4, 4), sparse_ndim=2, value_type="float64", sort_order=(0, 1), unique=True)
    keys = np.array([[0, 1, 1], [3, 0, 0]], dtype=np.int64)
    with pytest.raises(DataError, match=r"indices\[2\] = \[1,0\] is repeated"):
        with open_sink(str(tmp_path / "x.parquet"), meta) as sink:
            sink.write(keys, np.ones(3))
    assert not os.path.exists(tmp_path / "x.parquet") and os.listdir(tmp_path) == []
    with pytest.raises(DataError, match="out of bounds"):
        with open_sink(str(tmp_path / "y.parquet"), meta) as sink:
            sink.write(np.array([[0], [4]], dtype=np.int64), np.ones(1))
    # detect mode: unique found true for strictly increasing rows, false otherwise
    for rows, expect in (([[0, 1], [1, 2]], True), ([[0, 0], [1, 1]], False)):
        with open_sink(str(tmp_path / "z.parquet"), meta, unique_claim=None) as sink:
            sink.write(np.array(rows, dtype=np.int64), np.ones(2))
        assert sptool.read(str(tmp_path / "z.parquet")).unique is expect
        assert sptool.validate(str(tmp_path / "z.parquet")).valid


@pytest.mark.parametrize("rows", [[[0, 1, 1, 2], [3, 0, 0, 1]], [[0, 2, 1, 3], [3, 0, 0, 1]],
                                  [[0, 1, 2, 3], [1, 0, 2, 3]]], ids=["repeat", "out-of-order", "sorted"])
def test_a_sorts_codes_are_checked_as_the_rows_would_be(tmp_path, rows):
    """A batch handed over with its packed keys (a sort's codes, row-major in a 4 x 4 shape) is
    refused for the same row as when its index columns are checked, and written alike when sorted."""
    meta = TensorMeta(shape=(4, 4), sparse_ndim=2, value_type="float64", sort_order=(0, 1), unique=True)
    keys = np.array(rows, dtype=np.int64)
    batch = make_batch(keys, np.arange(4.0), meta, meta.arrow_schema())
    codes = (keys[0] * 4 + keys[1]).astype(np.uint64)
    errors, read = [], []
    for name, extra in (("columns.parquet", ()), ("codes.parquet", (codes,))):
        try:
            with open_sink(str(tmp_path / name), meta, unique_claim=True) as sink:
                sink.write_batch(batch, *extra)
            errors.append(None)
            read.append(sptool.read(str(tmp_path / name)))
        except DataError as e:
            errors.append(str(e).replace(name, "X"))
    assert errors[0] == errors[1]
    if errors[0] is None:
        assert np.array_equal(read[1].indices, keys[:, np.lexsort(keys[::-1])].T) and read[1].unique
    else:
        assert "indices[" in errors[0] and os.listdir(tmp_path) == []


def test_shape_inferred_at_close(tmp_path):
    meta = TensorMeta(shape=(None, 3), sparse_ndim=2, value_type="int64")
    for name in ("inf.parquet", "inf.arrows"):
        with open_sink(str(tmp_path / name), meta, unique_claim=False) as sink:
            sink.write(np.array([[5, 2], [0, 1]], dtype=np.int64), np.array([1, 2]))
        assert sptool.read(str(tmp_path / name)).shape == (6, 3)
        assert sptool.validate(str(tmp_path / name)).valid


def test_output_may_name_input(tmp_path, rng):
    t = random_tensor(rng, (6, 6), 10)
    path = str(tmp_path / "same.parquet")
    sptool.write(t, path)
    src = sptool.read(path)
    sptool.write(sptool.SparseTensor(src.indices, src.values * 2, src.shape), path)
    np.testing.assert_allclose(sptool.read(path).values, t.values * 2)


def test_refuses_to_replace_a_foreign_directory(tmp_path, rng):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("precious")
    with pytest.raises(UsageError, match="refusing to replace"):
        sptool.write(random_tensor(rng, (3,), 2), str(tmp_path / "home"))
    assert (tmp_path / "home" / "notes.txt").read_text() == "precious"


def test_unknown_output_extension(tmp_path, rng):
    with pytest.raises(UsageError, match="cannot tell the output format"):
        sptool.write(random_tensor(rng, (3,), 2), str(tmp_path / "x.csvv"))


def _stream_bytes(tmp_path, t) -> bytes:
    sptool.write(t, str(tmp_path / "s.arrows"))
    return (tmp_path / "s.arrows").read_bytes()


def test_truncated_stream_detected(tmp_path, rng):
    t = random_tensor(rng, (20, 20), 100)
    data = _stream_bytes(tmp_path, t)
    reader = pa.ipc.open_stream(data)
    # Rebuild the stream without its trailer: cut at a batch boundary, which pyarrow reads as complete.
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, reader.schema) as w:
        while True:
            try:
                b, md = reader.read_next_batch_with_custom_metadata()
            except StopIteration:
                break
            if b.num_rows:
                w.write_batch(b)
    cut = tmp_path / "cut.arrows"
    cut.write_bytes(sink.getvalue().to_pybytes())
    with pytest.raises(FormatError, match="E_STREAM_TRUNCATED"):
        sptool.read(str(cut))
    assert "E_STREAM_TRUNCATED" in sptool.validate(str(cut)).codes
    # a cut in the middle of a message
    mid = tmp_path / "mid.arrows"
    mid.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError):
        sptool.read(str(mid))
    assert not sptool.validate(str(mid)).valid


def test_batches_cross_boundaries(tmp_path, rng):
    t = random_tensor(rng, (40, 40, 4), 900, duplicates=True)
    sptool.write(t, str(tmp_path / "b.parquet"))
    src = open_source(str(tmp_path / "b.parquet"))
    sizes = [b.num_rows for b in src.iter_batches(batch_rows=7)]
    assert sum(sizes) == t.nnz and max(sizes) == 7


# -- the multi-threaded row-group reader (sptool/io/_rowgroups.py) ----------------------------

def _many_row_groups(path, rng, rows=1000, group=37):
    table = pa.table({"a": rng.integers(0, 1 << 40, rows), "b": rng.standard_normal(rows)})
    pq.write_table(table, path, row_group_size=group)
    return table


def test_plan_chunks_groups_consecutive_row_groups(tmp_path, rng):
    from sptool.io._rowgroups import plan_chunks

    _many_row_groups(tmp_path / "g.parquet", rng)
    md = pq.read_metadata(tmp_path / "g.parquet")
    assert md.num_row_groups == 28
    chunks = plan_chunks(md, range(28), batch_rows=150, threads=2)  # about 75 rows per chunk
    assert [r for c in chunks for r in c] == list(range(28))
    assert all(sum(md.row_group(r).num_rows for r in c) <= 75 or len(c) == 1 for c in chunks)
    assert plan_chunks(md, [0, 1, 5, 6], batch_rows=10**6, threads=2) == [[0, 1], [5, 6]]
    # A row group over max(batch_rows, the sptool row-group cap) is left to a batch-at-a-time reader.
    big = pa.table({"a": np.arange(140_000)})
    pq.write_table(big, tmp_path / "big.parquet", row_group_size=140_000)
    assert plan_chunks(pq.read_metadata(tmp_path / "big.parquet"), [0], batch_rows=1000) is None


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("batch_rows", [1, 50, 100_000])
def test_read_chunks_matches_pyarrow(tmp_path, rng, threads, batch_rows):
    from sptool.io._rowgroups import plan_chunks, read_chunks

    path = str(tmp_path / "g.parquet")
    table = _many_row_groups(path, rng)
    pf = pq.ParquetFile(path)
    chunks = plan_chunks(pf.metadata, range(pf.metadata.num_row_groups), batch_rows, threads)
    batches = list(read_chunks(path, pf, chunks, batch_rows=batch_rows, columns=["b"], threads=threads))
    assert max(b.num_rows for b in batches) <= batch_rows
    got = pa.Table.from_batches(batches)
    assert got.column_names == ["b"] and got.column("b").equals(table.column("b"))


def test_read_chunks_stops_cleanly(tmp_path, rng):
    import threading

    from sptool.io._rowgroups import plan_chunks, read_chunks

    path = str(tmp_path / "g.parquet")
    table = _many_row_groups(path, rng)
    pf = pq.ParquetFile(path)
    # Only this read's threads: an earlier test's abandoned read may still be winding down.
    before = set(threading.enumerate())
    it = read_chunks(path, pf, plan_chunks(pf.metadata, range(28), 40, 2), batch_rows=40, threads=2)
    first = next(it)
    assert first.column("a").equals(table.column("a").slice(0, first.num_rows).combine_chunks())
    assert [t for t in set(threading.enumerate()) - before if t.name.startswith("sptool-read")]  # it read on threads
    it.close()
    # Not joined (sptool._threads.stop_pool), the read's threads end on their own, at once.
    for _ in range(1000):
        if not [t for t in set(threading.enumerate()) - before if t.name.startswith("sptool-read")]:
            break
        time.sleep(0.01)
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("sptool-read")]


def test_an_abandoned_read_collected_by_gc_does_not_wait_for_its_threads(tmp_path, rng):
    """A read abandoned in a reference cycle ends in a garbage collection, which may run where
    joining a thread hangs (CPython collects inside sys._current_frames, holding the lock an
    ending thread needs: a Dask worker's event loop hung so).  There its threads are told to
    stop, not waited for: here they are held busy, and the collection still returns at once."""
    import gc
    import threading

    from sptool.io._rowgroups import plan_chunks, read_chunks

    path = str(tmp_path / "g.parquet")
    _many_row_groups(path, rng)
    pf = pq.ParquetFile(path)
    gate, calls = threading.Event(), []

    def prepare(batch):
        calls.append(1)
        if len(calls) > 1:  # the first batch returns; the threads then stay busy until the gate opens
            gate.wait(60)
        return batch.num_rows

    gc.disable()  # only the collection below finalizes the read
    try:
        it = read_chunks(path, pf, plan_chunks(pf.metadata, range(28), 40, 2), batch_rows=40, threads=2,
                         prepare=prepare)
        first, rows = next(it)
        assert rows == first.num_rows
        cycle = [it]
        cycle.append(cycle)
        del it, cycle
        collector = threading.Thread(target=gc.collect)
        collector.start()
        collector.join(10)
        assert not collector.is_alive(), "the collection waited for the read's threads"
    finally:
        gc.enable()
        gate.set()


def test_source_reads_many_row_groups_in_order(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (30, 20, 4), 400, duplicates=True)
    sptool.write(t, str(tmp_path / "m.parquet"))
    assert pq.read_metadata(tmp_path / "m.parquet").num_row_groups == 80  # row groups of 5 (the fixture)
    src = open_source(str(tmp_path / "m.parquet"))
    batches = list(src.iter_batches())
    assert max(b.num_rows for b in batches) <= 7
    keys = np.concatenate([np.stack([b.column(k).to_numpy() for k in range(3)]) for b in batches], axis=1)
    np.testing.assert_array_equal(keys, t.indices.T if t.indices.shape[1] == 3 else t.indices)


def test_corrupt_row_group_is_a_read_error(tmp_path, rng, tiny_batches):
    path = tmp_path / "c.parquet"
    t = random_tensor(rng, (300, 20), 200)
    sptool.write(t, str(path))  # row groups of 5 rows (the fixture)
    col = pq.ParquetFile(path).metadata.row_group(20).column(2)  # the values of a middle row group
    raw = bytearray(path.read_bytes())
    raw[col.data_page_offset + 8:col.data_page_offset + col.total_compressed_size] = \
        b"\xff" * (col.total_compressed_size - 8)
    path.write_bytes(bytes(raw))
    src = open_source(str(path))
    with pytest.raises(FormatError, match="E_READ_FAILED") as e:
        list(src.iter_batches())
    assert e.value.path == str(path)


def test_read_chunks_prepares_on_the_decoding_threads(tmp_path, rng):
    import threading

    from sptool.io._rowgroups import plan_chunks, read_chunks

    path = str(tmp_path / "g.parquet")
    table = _many_row_groups(path, rng)
    pf = pq.ParquetFile(path)
    seen = set()

    def prepare(batch):
        seen.add(threading.current_thread().name)
        return int(batch.column("a").to_numpy().sum())

    chunks = plan_chunks(pf.metadata, range(28), 60, 2)
    pairs = list(read_chunks(path, pf, chunks, batch_rows=60, threads=2, prepare=prepare))
    assert all(p == int(b.column("a").to_numpy().sum()) for b, p in pairs)
    assert pa.Table.from_batches([b for b, _ in pairs]).column("a").equals(table.column("a"))
    assert seen and all(name.startswith("sptool-read") for name in seen)


def test_outputs_make_missing_directories_and_a_failure_removes_them(tmp_path, rng):
    t = random_tensor(rng, (6, 5), 12)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    for out in ("new/deeper/x.parquet", "new2/parts/", "new3/d.npy"):
        target = f"{tmp_path}/{out}"  # pathlib would drop a directory's trailing slash
        if out.endswith(".npy"):
            sptool.todense(src, target)
            np.testing.assert_array_equal(np.load(target), t.to_dense())
        else:
            sptool.reorder(src, target)
            assert np.array_equal(sptool.read(target).indices, t.indices[np.lexsort(t.indices.T[::-1])])
    bad = sptool.SparseTensor(np.array([[0, 0], [0, 0]]), np.array([1.0, 2.0]), (2, 2))
    with pytest.raises(sptool.DataError):
        sptool.reorder(bad, str(tmp_path / "gone" / "deep" / "x.parquet"), duplicates="error")
    assert not (tmp_path / "gone").exists(), "a failed command leaves no directory behind"


def test_a_repeat_does_not_hide_a_later_order_break_in_the_same_batch():
    """A sink detecting uniqueness (claim None) tolerates a repeat, but still checks the rows after
    it for order, in the same batch (NumPy's lexsort tells the rows are not sorted)."""
    from sptool.format import TensorMeta
    from sptool.io import open_sink

    keys = np.array([[0, 0, 0, 0], [0, 0, 1, 0]])
    assert not (np.lexsort(keys[::-1]) == np.arange(4)).all()
    sink = open_sink(None, TensorMeta(shape=(3, 3), sparse_ndim=2, value_type="float64", sort_order=(0, 1)),
                     unique_claim=None)
    with pytest.raises(sptool.DataError, match="out of order"):
        sink.write(keys, np.ones(4))
    sink.abort()
    ok = open_sink(None, TensorMeta(shape=(3, 3), sparse_ndim=2, value_type="float64", sort_order=(0, 1)),
                   unique_claim=None)
    ok.write(np.array([[0, 0, 0], [0, 0, 1]]), np.ones(3))
    ok.close()
    assert ok.final_meta.unique is False and ok.final_meta.sort_order == (0, 1)


@pytest.mark.parametrize("suffix", ["t.parquet", "t.arrows"])
@pytest.mark.parametrize("lies", [False, True])
def test_a_claim_of_unique_rows_in_no_order_is_checked_where_it_is_acted_on(tmp_path, rng, suffix, lies):
    """No streaming pass can check a claim of unique rows in no sort order, so the ops do not act
    on it (TensorMeta.trusted: their duplicates are summed, to the same logical tensor); info
    reports it as stored, and read, which holds every row, checks it: the claim is kept when true,
    and a repeat is an error at NumPy's first repeated row when not."""
    t = random_tensor(rng, (30, 20), 200)  # unique, unsorted
    idx, val = t.indices.copy(), t.values.copy()
    if lies:
        idx[150] = idx[40]  # row 150 repeats row 40: still claimed unique
    path = str(tmp_path / suffix)
    sptool.write(sptool.SparseTensor(idx, val, t.shape, unique=True), path)
    with open_source(path) as src:
        assert src.stored_meta.unique and not src.meta.unique and src.meta.sort_order == ()
    assert sptool.info(path)["unique"] is True
    # max sees each coordinate once: the repeat's rows summed first, as the format says.
    dense, present = np.zeros(t.shape), np.zeros(t.shape, dtype=bool)
    np.add.at(dense, tuple(idx.T), val)
    present[tuple(idx.T)] = True
    want = np.where(present.any(axis=1), np.where(present, dense, -np.inf).max(axis=1), 0.0)
    np.testing.assert_array_equal(sptool.reduce(path, op="max", axis=1).to_dense(), want)
    codes = idx[:, 0] * 20 + idx[:, 1]
    _, first = np.unique(codes, return_index=True)
    repeats = np.setdiff1d(np.arange(len(codes)), first)
    if not lies:
        assert len(repeats) == 0 and sptool.read(path).meta.unique
        return
    with pytest.raises(DataError, match=rf"indices\[{repeats[0]}\] = .* is repeated, although the metadata says "
                                        "unique true"):
        sptool.read(path)
