"""Inputs cut into pieces on a Dask cluster (sptool.distributed.pieces): a single file spread
over several tasks by its row groups, errors naming the row counted from the start of the whole
input, and todense checking the order an input claims, as one machine does.  A 2-worker
LocalCluster, tiny row groups; the oracles are NumPy (the rows, the first row out of order),
pyarrow (the rows of each part) and Dask's own task stream (how many tasks ran), and each result
or error is compared with the single-machine command's."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_distributed import (
    SHAPE,
    _canonical_part,
    _first_out_of_order,
    _no_leftovers,
    _read_all_k,
    _rows,
    _shuffled_copy,
    _write_parts,
    client,  # noqa: F401 - fixture: the session's cluster
    tiny,  # noqa: F401 - fixture
)

import sptool
import sptool.distributed

distributed = pytest.importorskip("distributed")

# Each per-piece op with arguments that map piece by piece, and its NumPy oracle on (indices,
# values): the rows it keeps and what they become.
PER_PIECE = {
    "reshape": ({"shape": (SHAPE[0] * SHAPE[1], SHAPE[2])},
                lambda i, v: (np.stack(np.unravel_index(np.ravel_multi_index(i.T, SHAPE),
                                                        (SHAPE[0] * SHAPE[1], SHAPE[2])), axis=1), v)),
    "expand_dims": ({"axis": 0}, lambda i, v: (np.insert(i, 0, 0, axis=1), v)),
    "retain": ({"where": "values > 0"}, lambda i, v: (i[v > 0], v[v > 0])),
    "map_values": ({"fn": "neg"}, lambda i, v: (i, -v)),
    "mul": ({}, lambda i, v: (i, v * 3)),
    "slice_": ({"start": [5, 0, 0], "size": [30, -1, -1]},
               lambda i, v: (i[(i[:, 0] >= 5) & (i[:, 0] < 35)] - [5, 0, 0], v[(i[:, 0] >= 5) & (i[:, 0] < 35)])),
}


def _operands(name, src):
    return [src, "3"] if name == "mul" else [src]


def _one_file(tmp_path, rng, n=2400):
    idx = _rows(rng, n)
    val = rng.integers(-50, 50, n).astype(np.int64)
    path = str(tmp_path / "one.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), path, batch_rows=100)
    return path, idx, val


def _tasks(stream, prefix: str) -> list:
    return [t for t in stream.data if str(t["key"]).startswith(prefix)]


@pytest.mark.parametrize("name", sorted(PER_PIECE))
def test_a_single_file_spreads_over_several_tasks(client, tiny, tmp_path, rng, name):  # noqa: F811
    src, idx, val = _one_file(tmp_path, rng)
    groups = pq.ParquetFile(src).metadata.num_row_groups
    assert groups >= 8
    kw, oracle = PER_PIECE[name]
    out, local = str(tmp_path / "out") + "/", str(tmp_path / "local.parquet")
    with distributed.get_task_stream(client) as stream:
        r = getattr(sptool.distributed, name)(*_operands(name, src), out, client=client, memory=tiny, **kw)
    getattr(sptool, name)(*_operands(name, src), local, memory=tiny, **kw)
    # Dask's record of what ran: several tasks, each writing one part, not one task for the file.
    tasks = _tasks(stream, "mapped_piece")
    assert len(tasks) == r["parts"] == len(os.listdir(out)) > 1
    K = 4 if name == "expand_dims" else 3 if name != "reshape" else 2
    want_i, want_v = oracle(idx, val)
    di, dv = _read_all_k(out, K)
    li, lv = _read_all_k(local, K)
    assert np.array_equal(di, want_i) and np.array_equal(dv, want_v)
    assert np.array_equal(di, li) and np.array_equal(dv, lv)
    dmeta, lmeta = sptool.open(out).meta, sptool.open(local).meta
    for key in ("shape", "sparse_ndim", "value_type", "fill_value", "nnz", "sort_order", "unique"):
        assert getattr(dmeta, key) == getattr(lmeta, key), key


def test_slice_of_a_single_file_reads_only_the_overlapping_row_groups(client, tiny, tmp_path, rng):  # noqa: F811
    idx = np.unique(_rows(rng, 4000), axis=0)  # canonical: row groups hold runs of index_0
    val = rng.integers(-50, 50, len(idx)).astype(np.int64)
    src = str(tmp_path / "sorted.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), src, batch_rows=100)
    md = pq.ParquetFile(src).metadata
    # pyarrow's statistics: the row groups whose index_0 range meets [20, 30).
    hit = [g for g in range(md.num_row_groups)
           if md.row_group(g).column(0).statistics.max >= 20 and md.row_group(g).column(0).statistics.min < 30]
    out = str(tmp_path / "out") + "/"
    with distributed.get_task_stream(client) as stream:
        r = sptool.distributed.slice_(src, out, start=[20, 0, 0], size=[10, -1, -1], client=client, memory=tiny)
    one = sptool.slice_(src, str(tmp_path / "local.parquet"), start=[20, 0, 0], size=[10, -1, -1], memory=tiny)
    assert 1 < len(_tasks(stream, "mapped_piece")) == r["parts"] <= len(hit)
    assert r["row_groups_read"] == one["row_groups_read"] == len(hit) and r["rows_in"] == one["rows_in"]
    assert r["rows_in"] == sum(md.row_group(g).num_rows for g in hit)
    inside = (idx[:, 0] >= 20) & (idx[:, 0] < 30)
    di, dv = _read_all_k(out, 3)
    assert np.array_equal(di, idx[inside] - [20, 0, 0]) and np.array_equal(dv, val[inside])


# -- errors name the row counted from the start of the whole input -----------------------------

def _break_index(path, row, value, *, row_group_size=150):
    """Index 1 of ``row`` of the file set to ``value`` (outside the shape), its sptool metadata
    kept, written by pyarrow in row groups of ``row_group_size``."""
    file = pq.ParquetFile(path)
    table = file.read()
    cols = table.column("indices_1").to_numpy().copy()
    cols[row] = value
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    pq.write_table(table.set_column(1, "indices_1", pa.array(cols)).replace_schema_metadata(kept), path,
                   row_group_size=row_group_size)


def _data_error(call) -> sptool.DataError:
    """The DataError ``call()`` raises, without its traceback: held by the test, the frames of the
    op it names would keep the op's reading threads (sptool-read, io._rowgroups) alive until the
    garbage collector finds the cycle, and a later test counts those threads."""
    try:
        call()
    except sptool.DataError as e:
        e.__traceback__ = None
        return e
    raise AssertionError(f"{call} raised no DataError")


@pytest.mark.parametrize("name", sorted(PER_PIECE) + ["todense"])
@pytest.mark.parametrize("layout", ["directory", "file"])
def test_an_error_names_the_row_from_the_start_of_the_input(client, tiny, tmp_path, rng, name, layout):  # noqa: F811
    n = 2400
    if layout == "directory":
        idx, val = _rows(rng, n), rng.integers(1, 50, n).astype(np.int64)  # positive: retain keeps every row
        src = _write_parts(tmp_path / "in", np.array_split(idx, 4), np.array_split(val, 4))
        bad_file, bad_row = os.path.join(src, "part-000002.parquet"), 400
        # pyarrow's count of the rows before the broken part.
        before = sum(pq.ParquetFile(os.path.join(src, f"part-{i:06d}.parquet")).metadata.num_rows for i in range(2))
    else:
        src, idx, val = _one_file(tmp_path, rng, n)
        val = np.abs(val) + 1
        sptool.write(sptool.SparseTensor(idx, val, SHAPE), src, batch_rows=100)
        bad_file, bad_row, before = src, 1730, 0  # in a later row group, so in a later piece
    _break_index(bad_file, bad_row, SHAPE[1] + 4)
    kw = PER_PIECE[name][0] if name != "todense" else {}
    ext = ".npy" if name == "todense" else ""
    on_cluster = _data_error(lambda: getattr(sptool.distributed, name)(
        *_operands(name, src), str(tmp_path / "out") + ("/" if not ext else ext), client=client, memory=tiny, **kw))
    on_one = _data_error(lambda: getattr(sptool, name)(
        *_operands(name, src), str(tmp_path / "local") + (ext or ".parquet"), memory=tiny, **kw))
    assert str(on_cluster) == str(on_one)
    assert f"indices[{before + bad_row}] = " in str(on_cluster) and on_cluster.path == src
    _no_leftovers(tmp_path, ["in" if layout == "directory" else "one.parquet"])


# -- todense checks the order an input claims ---------------------------------------------------

def _todense_both(client, tmp_path, src):  # noqa: F811 - the fixture's value
    """todense on the cluster and on one machine: (the cluster's error or array, one machine's)."""
    got = []
    for run, out in ((lambda o: sptool.distributed.todense(src, o, client=client, memory="16MiB"), "d.npy"),
                     (lambda o: sptool.todense(src, o, memory="16MiB"), "local.npy")):
        try:
            run(str(tmp_path / out))
            got.append(np.load(str(tmp_path / out)))
        except sptool.DataError as e:
            got.append(e)
    return got


def _lying_file(tmp_path, rng, swap):
    """A canonical file in row groups of 100 whose rows ``swap`` (a pair) are then swapped (for
    a pair of equal rows, that row made a repeat of the one before), its metadata still claiming
    canonical order: (path, its rows in stored order)."""
    idx = np.unique(_rows(rng, 3000), axis=0)
    val = rng.integers(-50, 50, len(idx)).astype(np.int64)
    good = str(tmp_path / "good.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), good)
    perm = np.arange(len(idx))
    if swap[0] != swap[1]:
        perm[list(swap)] = perm[[swap[1], swap[0]]]
    else:
        perm[swap[0]] = perm[swap[0] - 1]
    file = pq.ParquetFile(good)
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    src = str(tmp_path / "lying.parquet")
    pq.write_table(file.read().take(perm).replace_schema_metadata(kept), src, row_group_size=100)
    os.remove(good)
    assert sptool.open(src).meta.sort_order == (0, 1, 2) and pq.ParquetFile(src).metadata.num_row_groups > 8
    return src, idx[perm]


@pytest.mark.parametrize("name", ["reshape", "expand_dims", "map_values", "mul"])
@pytest.mark.parametrize("swap", [(1650, 1651), (2210, 2210)], ids=["out of order", "a repeat"])
def test_a_broken_claim_names_the_row_from_the_start_of_the_input(client, tiny, tmp_path, rng, name, swap):  # noqa: F811
    """A file claiming canonical order whose rows break it in a later piece: an op that maps row
    for row keeps the claim, its output refuses the row, and names it from the input's start."""
    src, stored = _lying_file(tmp_path, rng, swap)
    kw = PER_PIECE[name][0]
    with pytest.raises(sptool.DataError) as on_cluster:
        getattr(sptool.distributed, name)(*_operands(name, src), str(tmp_path / "out") + "/", client=client,
                                          memory=tiny, **kw)
    with pytest.raises(sptool.DataError) as on_one:
        getattr(sptool, name)(*_operands(name, src), str(tmp_path / "local.parquet"), memory=tiny, **kw)
    assert str(on_cluster.value) == str(on_one.value)
    row = swap[0] if swap[0] == swap[1] else _first_out_of_order(stored)  # NumPy's first row out of order
    assert f"indices[{row}] = " in str(on_cluster.value)
    _no_leftovers(tmp_path, ["lying.parquet"])


@pytest.mark.parametrize("where", ["inside a piece", "at a seam between pieces", "a repeat"])
def test_todense_refuses_a_file_whose_rows_break_its_claim(client, tmp_path, rng, where):  # noqa: F811
    """The file is cut into pieces of consecutive row groups (the task stream says several): the
    first row breaking the claim, inside a piece or first in one, is the single machine's error."""
    swap = {"inside a piece": (1650, 1651), "at a seam between pieces": (1499, 1500), "a repeat": (2210, 2210)}[where]
    src, stored = _lying_file(tmp_path, rng, swap)
    with distributed.get_task_stream(client) as stream:
        on_cluster, on_one = _todense_both(client, tmp_path, src)
    assert len(_tasks(stream, "claim_piece")) > 1
    assert isinstance(on_cluster, sptool.DataError) and str(on_cluster) == str(on_one)
    row = swap[0] if where == "a repeat" else _first_out_of_order(stored)  # NumPy's first row out of order
    assert f"indices[{row}] = " in str(on_cluster) and "sort_order [0, 1, 2]" in str(on_cluster)
    assert on_cluster.path == src
    _no_leftovers(tmp_path, ["lying.parquet"])


def test_todense_of_a_directory_with_a_lying_part(client, tmp_path, rng):  # noqa: F811
    """A directory claims an order as a whole only where its seams keep it (formats/SPEC.md
    section 7): here the lying part's first row group reaches below the first part's last row,
    so neither machine trusts, or checks, a part's claim: both write the right sums."""
    d = tmp_path / "in"
    d.mkdir()
    first = _canonical_part(str(d / "part-000000.parquet"), rng, 500)
    good = _canonical_part(str(tmp_path / "good.parquet"), rng, 900)
    perm = rng.permutation(len(good))
    _shuffled_copy(str(tmp_path / "good.parquet"), str(d / "part-000001.parquet"), perm)
    on_cluster, on_one = _todense_both(client, tmp_path, str(d) + "/")
    idx = np.concatenate([first, good[perm]])
    _, val = _read_all_k(str(d) + "/", 3)
    want = np.zeros(SHAPE, dtype=np.int64)
    np.add.at(want, tuple(idx.T), val)
    assert np.array_equal(on_cluster, want) and np.array_equal(on_one, want)


def test_todense_of_a_canonical_file_checks_and_writes(client, tmp_path, rng):  # noqa: F811
    src, idx, val = _one_file(tmp_path, rng)
    sptool.reorder(src, str(tmp_path / "sorted.parquet"), duplicates="sum")
    on_cluster, on_one = _todense_both(client, tmp_path, str(tmp_path / "sorted.parquet"))
    want = np.zeros(SHAPE, dtype=np.int64)
    np.add.at(want, tuple(idx.T), val)
    assert np.array_equal(on_cluster, want) and np.array_equal(on_one, want)


# -- split commits its output directories all or none ------------------------------------------

@pytest.mark.parametrize("fault", ["moving an old output aside", "after the first new output is in place"])
def test_split_commits_its_outputs_all_or_none(client, tiny, tmp_path, rng, monkeypatch, fault):  # noqa: F811
    """Outputs of an earlier split are there; a rename fails part way through the commit (an
    injected OSError): every output still holds its earlier rows (pyarrow reads them), and no
    staging or moved-aside directory is left.  The same job without the fault replaces them all."""
    pattern = str(tmp_path / "out-{i}") + "/"
    outputs = [str(tmp_path / f"out-{i}") for i in range(3)]
    old, _, _ = _one_file(tmp_path, rng, 600)
    sptool.distributed.split(old, pattern, axis=0, num_split=3, client=client, memory="64MiB")
    before = [_read_all_k(o + "/", 3) for o in outputs]
    (tmp_path / "new").mkdir()
    src, idx, val = _one_file(tmp_path / "new", rng, 900)
    real_rename = os.rename

    def failing_rename(a, b):
        name = os.path.basename(os.path.abspath(a))
        if fault == "moving an old output aside" and os.path.abspath(a) == outputs[2] or \
                fault != "moving an old output aside" and name.startswith(".out-1.tmp-"):
            raise OSError(5, "injected fault", a)
        return real_rename(a, b)

    # A rename that fails on the file system's side: nothing a test does to the files makes one.
    with monkeypatch.context() as patched, pytest.raises(OSError, match="injected fault"):
        patched.setattr(os, "rename", failing_rename)
        sptool.distributed.split(src, pattern, axis=0, num_split=3, client=client, memory="64MiB")
    for o, (bi, bv) in zip(outputs, before):
        gi, gv = _read_all_k(o + "/", 3)
        assert np.array_equal(gi, bi) and np.array_equal(gv, bv)
    _no_leftovers(tmp_path, ["new", "one.parquet", "out-0", "out-1", "out-2"])
    r = sptool.distributed.split(src, pattern, axis=0, num_split=3, client=client, memory="64MiB")
    bounds = np.r_[0, np.cumsum([17, 17, 16])]  # TensorFlow's sizes for 50 in 3: the first ones longer
    for i, o in enumerate(outputs):
        keep = (idx[:, 0] >= bounds[i]) & (idx[:, 0] < bounds[i + 1])
        gi, gv = _read_all_k(o + "/", 3)
        assert np.array_equal(gi, idx[keep] - [bounds[i], 0, 0]) and np.array_equal(gv, val[keep])
        assert r["rows"][i] == keep.sum()
    _no_leftovers(tmp_path, ["new", "one.parquet", "out-0", "out-1", "out-2"])


# -- stdin: read once by the driver into a copy beside the output, then cut like a file --------

@pytest.mark.parametrize("command", [["reorder", "--perm", "2,0,1"], ["reshape", "--shape", "2000,-1"]])
def test_stdin_on_a_cluster_is_copied_once_and_cut_into_pieces(client, tiny, tmp_path, rng, command):  # noqa: F811
    from click.testing import CliRunner

    from sptool.cli import cli

    idx, val = _rows(rng, 2000), rng.standard_normal(2000)
    stream = str(tmp_path / "in.arrows")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), stream)
    data = open(stream, "rb").read()
    os.remove(stream)
    out, local = str(tmp_path / "out") + "/", str(tmp_path / "local.parquet")
    with distributed.get_task_stream(client) as tasks:
        res = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, *command, "-", "-o", out,
                                       "--memory", tiny], input=data)
    assert res.exit_code == 0, res.output
    one = CliRunner().invoke(cli, [*command, "-", "-o", local, "--memory", tiny], input=data)
    assert one.exit_code == 0, one.output
    K = 2 if command[0] == "reshape" else 3
    di, dv = _read_all_k(out, K)
    li, lv = _read_all_k(local, K)
    assert np.array_equal(di, li) and np.array_equal(dv, lv)
    if command[0] == "reorder":  # NumPy's stable sort by dimensions 2, 0, 1
        perm = np.lexsort([idx[:, 1], idx[:, 0], idx[:, 2]])
        assert np.array_equal(di, idx[perm]) and np.array_equal(dv, val[perm])
    else:
        assert np.array_equal(dv, val) and len(_tasks(tasks, "mapped_piece")) > 1
    _no_leftovers(tmp_path, ["out", "local.parquet"])  # the driver's copy of stdin is gone


# -- validate of one file: its rows checked by tasks, a run of row groups each ---------------------

RUN_ROWS = 1000  # 40 row groups of 100 rows, a chunk each at the tiny batch size: 4 runs (2 workers)


def _file_to_validate(tmp_path, rng, change=None, *, iso=False, null_values=()):
    """A canonical file of 4,000 rows (NumPy's unique coordinates) in 40 row groups of 100, written
    by pyarrow with page checksums and its sptool metadata kept; ``change(columns)`` first edits its
    columns (NumPy arrays by name), and the rows ``null_values`` get a null value: (path, columns)."""
    idx = np.unique(_rows(rng, 6000), axis=0)[:4000]
    val = np.full(len(idx), 7, np.int64) if iso else rng.integers(-50, 50, len(idx)).astype(np.int64)
    good = str(tmp_path / "good.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE, iso=iso), good)
    file = pq.ParquetFile(good)
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    columns = {name: file.read().column(name).to_numpy().copy() for name in file.schema_arrow.names}
    if change:
        change(columns)
    mask = np.zeros(len(idx), bool)
    mask[list(null_values)] = True
    table = pa.table({name: pa.array(col, mask=mask if name == "values" else None) for name, col in columns.items()})
    src = str(tmp_path / "one.parquet")
    pq.write_table(table.replace_schema_metadata(kept), src, row_group_size=100, write_page_checksum=True)
    os.remove(good)
    assert pq.ParquetFile(src).metadata.num_row_groups == 40
    return src, columns


def _swap(columns, a, b):
    for col in columns.values():
        col[[a, b]] = col[[b, a]]


def _repeat(columns, row):
    for k in range(3):
        columns[f"indices_{k}"][row] = columns[f"indices_{k}"][row - 1]


def _damage_page(path, group, column="values"):
    """A byte near the end of a column chunk of row group ``group`` flipped: in its last page's
    data, whose checksum then no longer matches."""
    file = pq.ParquetFile(path)
    chunk = file.metadata.row_group(group).column(file.schema_arrow.names.index(column))
    at = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size - 2
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


def _indices(columns):
    return np.stack([columns[f"indices_{k}"] for k in range(3)], axis=1)


# case -> (change, file keywords, the code and row NumPy expects: None for a valid file)
VALIDATE_CASES = {
    "valid": (None, {}, None),
    "out of bounds in the third run": (lambda c: c["indices_1"].__setitem__(2 * RUN_ROWS + 345, SHAPE[1] + 4), {},
                                       ("E_INDEX_OUT_OF_BOUNDS", 2 * RUN_ROWS + 345)),
    "out of order at the seam of runs 2 and 3": (lambda c: _swap(c, 2 * RUN_ROWS - 1, 2 * RUN_ROWS), {},
                                                 ("E_NOT_SORTED", "numpy")),
    "a repeat at the seam of runs 3 and 4": (lambda c: _repeat(c, 3 * RUN_ROWS), {},
                                            ("E_DUPLICATE_COORDINATE", 3 * RUN_ROWS)),
    "values equal to the fill": (lambda c: c["values"].__setitem__(slice(None, None, 7), 0), {},
                                 ("I_EXPLICIT_FILL", None)),
    # The third run's first row differs: compared with the file's first value, not with itself.
    "iso broken where the third run starts": (lambda c: c["values"].__setitem__(2 * RUN_ROWS, 8), {"iso": True},
                                              ("E_ISO_VALUES_DIFFER", 2 * RUN_ROWS)),
    # A null value in the first batch: its rows (the first 50 differ from the rest) are not the
    # reference, the first batch without nulls is, and every later row equals it.
    "iso after a null in the first batch": (lambda c: c["values"].__setitem__(slice(0, 50), 9),
                                            {"iso": True, "null_values": [5]}, ("E_NULL_VALUE", 5)),
    "a damaged page in the second run": (None, {}, ("E_PAGE_CHECKSUM", 15 * 100)),
}


@pytest.mark.parametrize("case", list(VALIDATE_CASES))
def test_validate_of_one_file_checks_runs_of_row_groups_in_tasks(client, tiny, tmp_path, rng, case):  # noqa: F811
    """The footer on the driver, the rows by a task per run of row groups (Dask's task stream counts
    them), each run starting from the row before it: the report is the single machine's, problem
    for problem, and the rows it names are NumPy's (pyarrow's, for the damaged page)."""
    change, kw, want = VALIDATE_CASES[case]
    src, columns = _file_to_validate(tmp_path, rng, change, **kw)
    if case.startswith("a damaged page"):
        _damage_page(src, 15)
    with distributed.get_task_stream(client) as stream:
        dist = sptool.distributed.validate(src, memory=tiny, client=client).as_dict()
    local = sptool.validate(src, memory=tiny).as_dict()
    assert len(_tasks(stream, "scanned_run")) == 4
    assert dist == local
    checks = {c["code"]: c for c in dist["checks"]}
    assert dist["nnz"] == pq.ParquetFile(src).metadata.num_rows
    if want is None:
        assert dist["valid"] and not [c for c in dist["checks"] if c["severity"] in ("error", "fatal")]
        return
    code, row = want
    if row == "numpy":
        row = _first_out_of_order(_indices(columns))
    assert code in checks, list(checks)
    if code == "I_EXPLICIT_FILL":
        assert checks[code]["message"].startswith(f"{int(np.count_nonzero(columns['values'] == 0))} stored entries")
    elif code == "E_PAGE_CHECKSUM":  # the rows of the row groups before the damaged one, by pyarrow
        md = pq.ParquetFile(src).metadata
        assert checks[code]["location"]["row"] == sum(md.row_group(g).num_rows for g in range(15)) == row
    else:
        assert checks[code]["location"]["row"] == row
    if case == "iso after a null in the first batch":
        assert np.all(columns["values"][50:] == 7) and "E_ISO_VALUES_DIFFER" not in checks


def test_cli_validate_of_one_file_names_the_row_as_one_machine(client, tiny, tmp_path, rng):  # noqa: F811
    """A row outside the shape in the third run of row groups: the command on the cluster prints
    the single machine's message, its row counted from the start of the file, and exits 1."""
    from click.testing import CliRunner

    from sptool.cli import cli

    bad = 2 * RUN_ROWS + 345
    src, columns = _file_to_validate(tmp_path, rng, lambda c: c["indices_1"].__setitem__(bad, SHAPE[1] + 4))
    assert np.flatnonzero(_indices(columns)[:, 1] >= SHAPE[1]).tolist() == [bad]  # NumPy: the one bad row
    with distributed.get_task_stream(client) as stream:
        dist = CliRunner().invoke(cli, ["--scheduler", client.scheduler.address, "validate", src, "-m", tiny])
    local = CliRunner().invoke(cli, ["validate", src, "-m", tiny])
    assert len(_tasks(stream, "scanned_run")) == 4
    assert dist.exit_code == local.exit_code == 1, dist.output
    line = next(x for x in local.output.splitlines() if "E_INDEX_OUT_OF_BOUNDS" in x)
    assert f"indices[{bad}] = " in line and line in dist.output and "Traceback" not in dist.output


# -- reduce checks the claims its plans trust ---------------------------------------------------

def _reduce_both(client, tmp_path, src, op):  # noqa: F811 - the fixture's value
    """reduce over axis 1 on the cluster and on one machine: each one's DataError, or None."""
    got = []
    for run in (lambda: sptool.distributed.reduce(src, str(tmp_path / "out") + "/", op=op, axis=1, client=client,
                                                  memory="16MiB"),
                lambda: sptool.reduce(src, str(tmp_path / "local.parquet"), op=op, axis=1, memory="16MiB")):
        try:
            run()
            got.append(None)
        except sptool.DataError as e:
            got.append(e)
    return got


@pytest.mark.parametrize("op", ["max", "count"])
@pytest.mark.parametrize("where", ["at a seam between pieces", "inside a piece"])
def test_reduce_by_partials_checks_the_unique_rows_it_trusts(client, tmp_path, rng, op, where):  # noqa: F811
    """max and count split into partials per piece only where no coordinate has rows on two
    pieces, which the file's claim of unique rows says: a repeat, inside a piece or first in one,
    is the single machine's error at the repeat (where the cluster gave the max of the repeats)."""
    from sptool.distributed.pieces import pieces_of

    swap = {"at a seam between pieces": (1500, 1500), "inside a piece": (2210, 2210)}[where]
    src, stored = _lying_file(tmp_path, rng, swap)
    starts = [p.start for p in pieces_of(src, 2)]
    assert (swap[0] in starts) == (where == "at a seam between pieces")
    assert np.array_equal(stored[swap[0]], stored[swap[0] - 1])  # NumPy: the row repeats the one before
    with distributed.get_task_stream(client) as stream:
        on_cluster, on_one = _reduce_both(client, tmp_path, src, op)
    assert len(_tasks(stream, "claimed_task")) > 1
    assert isinstance(on_cluster, sptool.DataError) and str(on_cluster) == str(on_one)
    assert f"indices[{swap[0]}] = " in str(on_cluster) and "is repeated" in str(on_cluster)
    _no_leftovers(tmp_path, ["lying.parquet"])


def _rewritten(path, idx, val, claimed_from):
    """A part file holding the rows ``idx``, ``val`` in that order, whose sptool metadata is the
    one sptool writes for the rows ``claimed_from`` (canonical), row groups of 100."""
    sptool.write(sptool.SparseTensor(*claimed_from, SHAPE), path)
    file = pq.ParquetFile(path)
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    table = pa.table({**{f"indices_{d}": idx[:, d] for d in range(3)}, "values": val}, schema=file.schema_arrow)
    pq.write_table(table.replace_schema_metadata(kept), path, row_group_size=100)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("lie", ["the seam's value again later", "a lower value later"])
def test_reduce_where_the_pieces_stand_checks_the_order_it_cuts_by(client, tmp_path, rng, op, lie):  # noqa: F811
    """A directory sorted on a kept dimension is reduced where its pieces stand, each part cut
    where its first value ends, which an earlier piece's task reads (seamed.py).  A part whose
    rows break its order there (the seam's value again after greater rows, or a lower value
    after it) is the single machine's error at NumPy's first row out of order, counted from the
    directory's first row; the cut had moved the row to another task and written a result."""
    idx = np.unique(_rows(rng, 3000), axis=0)
    val = rng.integers(-50, 50, len(idx)).astype(np.int64)
    seam = np.flatnonzero(idx[:, 0] == 20)
    cut = seam[len(seam) // 2]  # the seam between the parts falls among the rows of indices_0 = 20
    d = tmp_path / "in"
    d.mkdir()
    _rewritten(str(d / "part-000000.parquet"), idx[:cut], val[:cut], (idx[:cut], val[:cut]))
    rows, vals = idx[cut:].copy(), val[cut:]
    if lie == "the seam's value again later":
        order = np.r_[1:700, 0, 700:len(rows)]  # the part's first row (indices_0 = 20) moved to row 699
        rows, vals = rows[order], vals[order]
    else:
        rows[700, 0] = 3
    _rewritten(str(d / "part-000001.parquet"), rows, vals, (idx[cut:], val[cut:]))
    stored = np.concatenate([idx[:cut], rows])
    with distributed.get_task_stream(client) as stream:
        on_cluster, on_one = _reduce_both(client, tmp_path, str(d) + "/", op)
    assert _tasks(stream, "seamed_task")
    assert isinstance(on_cluster, sptool.DataError) and str(on_cluster) == str(on_one)
    assert f"indices[{_first_out_of_order(stored)}] = " in str(on_cluster) and "out of order" in str(on_cluster)
    _no_leftovers(tmp_path, ["in"])


def _seamed_dir(tmp_path, rows_b_edit, *, nullable=False):
    """A directory of a canonical (40, 10) tensor in two parts of row groups of 20, the second
    part's rows edited by ``rows_b_edit(rows)`` (returning the rows, or (rows, null row)), its
    metadata still the canonical one: (path, all rows as stored)."""
    shape = (40, 10)
    idx = np.stack(np.unravel_index(np.arange(400), shape), axis=1)
    val = np.arange(400, dtype=np.int64)
    d = tmp_path / "in"
    d.mkdir()
    stored = []
    for i, (rows, vals) in enumerate(((idx[:205], val[:205]), (idx[205:], val[205:]))):
        path = str(d / f"part-00000{i}.parquet")
        sptool.write(sptool.SparseTensor(rows, vals, shape), path)
        file = pq.ParquetFile(path)
        kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
        null = None
        if i == 1:
            rows = rows_b_edit(rows.copy())
            rows, null = rows if isinstance(rows, tuple) else (rows, None)
        cols = [pa.array(rows[:, k], mask=None if null is None or k else np.arange(len(rows)) == null)
                for k in range(2)]
        schema = pa.schema([pa.field(f"indices_{k}", pa.int64(), nullable) for k in range(2)]
                           + [pa.field("values", pa.int64(), nullable)])
        pq.write_table(pa.table([*cols, pa.array(vals)], schema=schema).replace_schema_metadata(kept), path,
                       row_group_size=20)
        stored.append(rows)
    return str(d) + "/", np.concatenate(stored)


def _set_last_lead(rows):
    rows[-1, 0] = 45  # beyond the shape, still in order
    return rows


@pytest.mark.parametrize("case", ["an index beyond the shape", "a null index"])
def test_reduce_where_the_pieces_stand_refuses_a_bad_part_as_one_machine(client, tmp_path, case):  # noqa: F811
    """The seamed path's own checks (the seam's value, the leading dimension's order) do not stand in
    for the errors one machine gives: an index beyond the shape names its row (the task reads its
    input a second time for it), and a null index is E_NULL_INDEX, not a decoding failure."""
    edit = _set_last_lead if case == "an index beyond the shape" else (lambda rows: (rows, 30))
    src, stored = _seamed_dir(tmp_path, edit, nullable=case == "a null index")
    op = "sum" if case == "an index beyond the shape" else "max"  # sum: the reduced column left unread
    errors = []
    with distributed.get_task_stream(client) as stream:
        for run in (lambda: sptool.distributed.reduce(src, str(tmp_path / "out") + "/", op=op, axis=1,
                                                      client=client),
                    lambda: sptool.reduce(src, str(tmp_path / "local.parquet"), op=op, axis=1)):
            with pytest.raises(sptool.SptoolError) as e:
                run()
            errors.append(e.value)
    assert _tasks(stream, "seamed_task")
    assert type(errors[0]) is type(errors[1]) and str(errors[0]) == str(errors[1])
    if case == "an index beyond the shape":
        row = int(np.flatnonzero(stored[:, 0] >= 40)[0])  # NumPy's first row beyond the shape
        assert f"indices[{row}] = [45,9] is out of bounds" in str(errors[0])
    else:
        assert "E_NULL_INDEX" in str(errors[0])


def test_reduce_by_partials_names_the_first_break_when_a_piece_breaks_twice(client, tmp_path, rng):  # noqa: F811
    """A repeat at a piece's first row and another inside it: the first, at the seam, is the one
    one machine names (the failing piece's first row is still compared with the piece before)."""
    from sptool.distributed.pieces import pieces_of

    src, stored = _lying_file(tmp_path, rng, (1500, 1500))
    assert 1500 in [p.start for p in pieces_of(src, 2)]
    file = pq.ParquetFile(src)
    table = file.read()
    perm = np.arange(table.num_rows)
    perm[1505] = perm[1504]  # a second repeat, later in the same piece
    kept = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    pq.write_table(table.take(perm).replace_schema_metadata(kept), src, row_group_size=100)
    stored = stored[perm]
    repeats = np.flatnonzero(np.all(stored[1:] == stored[:-1], axis=1)) + 1  # NumPy: rows equal to the one before
    assert repeats[:2].tolist() == [1500, 1505]
    on_cluster, on_one = _reduce_both(client, tmp_path, src, "max")
    assert str(on_cluster) == str(on_one) and "indices[1500] = " in str(on_cluster)


def test_an_in_memory_claim_of_unique_rows_is_checked_before_it_is_acted_on(tmp_path, rng):
    """An in-memory tensor claiming unique rows in no order, one repeated: add refuses it at the
    repeat (NumPy's first row equal to an earlier one) instead of writing a file that claims unique
    rows and holds the repeat."""
    idx = np.unique(_rows(rng, 300), axis=0)
    rng.shuffle(idx)
    idx[120] = idx[50]
    t = sptool.SparseTensor(idx, np.ones(len(idx)), SHAPE, unique=True)
    with pytest.raises(sptool.DataError, match=r"indices\[120\] = .* is repeated, although the tensor says"):
        sptool.add(t, t, str(tmp_path / "o.parquet"))
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("name", ["transpose", "reorder"])
@pytest.mark.parametrize("swap", [(1650, 1651), (2210, 2210)], ids=["out of order", "a repeat"])
def test_an_op_on_key_ranges_refuses_a_broken_claim_as_one_machine(client, tiny, tmp_path, rng, name, swap):  # noqa: F811
    """Ops that shuffle rows into key ranges check the operand's claims as its pieces are cut, so a
    lying file is the single machine's error, naming the file and NumPy's row (the ranges' own
    checks had named a scratch file and a row counted within the range)."""
    src, stored = _lying_file(tmp_path, rng, swap)
    kw = {"perm": (2, 1, 0)} if name == "reorder" else {}
    with pytest.raises(sptool.DataError) as on_cluster:
        getattr(sptool.distributed, name)(src, str(tmp_path / "out") + "/", memory=tiny, client=client, **kw)
    with pytest.raises(sptool.DataError) as on_one:
        getattr(sptool, name)(src, str(tmp_path / "local.parquet"), memory=tiny, **kw)
    assert str(on_cluster.value) == str(on_one.value)
    row = swap[0] if swap[0] == swap[1] else _first_out_of_order(stored)
    assert f"indices[{row}] = " in str(on_cluster.value) and on_cluster.value.path == src
    _no_leftovers(tmp_path, ["lying.parquet"])


def test_info_reports_a_one_part_directorys_claims_as_stored_on_a_cluster(client, tmp_path, rng):  # noqa: F811
    """A claim of unique rows in no order is not acted on, but info reports it as the part stores
    it, whether its footer is read here or on the cluster."""
    idx = np.unique(_rows(rng, 300), axis=0)
    rng.shuffle(idx)
    d = tmp_path / "in"
    d.mkdir()
    sptool.write(sptool.SparseTensor(idx, np.ones(len(idx)), SHAPE, unique=True), str(d / "part-000000.parquet"))
    stored = pq.read_metadata(str(d / "part-000000.parquet")).metadata[b"sptool"]
    assert b'"unique":true' in stored and b'"sort_order":[]' in stored
    here = sptool.info(str(d) + "/")
    there = sptool.distributed.info(str(d) + "/", client=client)
    assert here["unique"] is True and there["unique"] is True and here["sort_order"] == there["sort_order"] == []
