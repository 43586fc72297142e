"""sptool apply: every optimizer against a plain NumPy implementation over several steps (rows
repeated within a gradient, float32 and float64, multi-dimensional row blocks), the compiled
kernels against their NumPy reference, bad inputs leaving the table untouched, and real
processes killed with SIGKILL at many points leaving the table and its state entirely old or
entirely new."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from command_examples import env_with_sptool
from pty_terminal import BAR_GLYPH, cursor_restored, run_in_terminal
from references import journal as journal_reference
from references import optim as optim_reference
from references import tfrecord as tfrecord_reference

import sptool
from sptool import SparseTensor, _journal, _optim
from sptool.cli import cli

LR, EPS = {"sgd": 0.1, "adagrad": 0.05, "adam": 0.01}, {"adagrad": 1e-7, "adam": 1e-8}
B1, B2, ACC0 = 0.9, 0.999, 0.1
STATE_NAMES = {"sgd": (), "adagrad": ("accumulator",), "adam": ("m", "v")}


def numpy_optimizer(p0, grads, optimizer, lr, *, eps=None, beta1=B1, beta2=B2, acc0=ACC0, t0=0, state=None):
    """The oracle: the optimizers written out in float64 NumPy on whole arrays, as PyTorch's
    SparseAdam / Keras's Adagrad describe them: duplicates summed (np.add.at), then only the
    touched rows (and their state) change; t advances once per gradient."""
    p = p0.astype(np.float64)
    st = {k: v.astype(np.float64) for k, v in (state or {}).items()}
    if optimizer == "adagrad" and not st:
        st = {"accumulator": np.full_like(p, acc0)}
    if optimizer == "adam" and not st:
        st = {"m": np.zeros_like(p), "v": np.zeros_like(p)}
    for t, (rows, vals) in enumerate(grads, t0 + 1):
        g = np.zeros(p.shape, vals.dtype)  # repeated rows mean their sum in the value type (SPEC section 5)
        np.add.at(g, rows, vals)
        g = g.astype(np.float64)
        hit = np.unique(rows)
        gt = g[hit]
        if optimizer == "sgd":
            p[hit] -= lr * gt
        elif optimizer == "adagrad":
            st["accumulator"][hit] += gt * gt
            p[hit] -= lr * gt / (np.sqrt(st["accumulator"][hit]) + eps)
        else:
            st["m"][hit] = beta1 * st["m"][hit] + (1 - beta1) * gt
            st["v"][hit] = beta2 * st["v"][hit] + (1 - beta2) * gt * gt
            p[hit] -= lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) * st["m"][hit] / (np.sqrt(st["v"][hit]) + eps)
    return p, st


def gradient(rng, height, block, n, dtype, *, sort=False):
    rows = rng.integers(0, height, size=n)
    rows[: n // 4] = rows[n // 4: 2 * (n // 4)]  # a quarter of the rows repeated
    if sort:
        rows = np.sort(rows)
    else:
        rows = rows[rng.permutation(n)]
    vals = rng.standard_normal((n,) + tuple(block)).astype(dtype)
    return rows.astype(np.int64), vals


def write_gradient(path, rows, vals, height, *, sort_order=()):
    shape = (height,) + vals.shape[1:]
    sptool.write(SparseTensor(rows.reshape(-1, 1), vals, shape, sort_order=sort_order, unique=False), str(path))
    return str(path)


def tolerance(dtype):
    return {"rtol": 2e-4, "atol": 2e-6} if np.dtype(dtype) == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad", "adam"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("block", [(6,), (3, 4)])
def test_optimizer_matches_numpy_over_several_steps(tmp_path, monkeypatch, optimizer, dtype, block):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")  # many blocks and sorted runs on small data
    rng = np.random.default_rng(hash((optimizer, dtype, block)) % 2**32)
    height = 50
    p0 = rng.standard_normal((height,) + block).astype(dtype)
    table = tmp_path / "table.npy"
    np.save(table, p0)
    grads = [gradient(rng, height, block, 30, dtype, sort=(i == 1)) for i in range(3)]
    paths = [write_gradient(tmp_path / f"g{i}.parquet", r, v, height, sort_order=(0,) if i == 1 else ())
             for i, (r, v) in enumerate(grads)]
    state = str(tmp_path / "state") if optimizer != "sgd" else None
    kw = {"optimizer": optimizer, "lr": LR[optimizer], "state": state}
    r1 = sptool.apply(str(table), paths[:2], **kw)  # two steps in one call
    r2 = sptool.apply(str(table), paths[2:], **kw)  # and one more, from the saved state
    assert (r1["step"], r2["step"]) == ((2, 3) if state else (None, None))
    want, want_state = numpy_optimizer(p0, grads, optimizer, LR[optimizer], eps=EPS.get(optimizer))
    got = np.load(table)
    assert got.dtype == np.dtype(dtype) and got.shape == p0.shape
    np.testing.assert_allclose(got, want, **tolerance(dtype))
    for name in STATE_NAMES[optimizer]:
        np.testing.assert_allclose(np.load(os.path.join(state, f"{name}.npy")), want_state[name], **tolerance(dtype))
    untouched = np.setdiff1d(np.arange(height), np.concatenate([r for r, _ in grads]))
    assert np.array_equal(got[untouched], p0[untouched]), "untouched rows are never rewritten"
    assert r1["rows"] == len(np.unique(grads[0][0])) + len(np.unique(grads[1][0]))
    if state:
        assert json.load(open(os.path.join(state, "state.json")))["step"] == 3


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_rows_split_across_threads_match_numpy(tmp_path, monkeypatch, optimizer):
    """Gradients of thousands of rows (chunks cut into runs a thread, rows written into the maps
    by two threads, journal blocks written by a thread of their own), two in one call, one
    sorted, then a recovery that replays them: NumPy's result."""
    from sptool.rowsparse import journal as jr

    monkeypatch.setenv("SPTOOL_THREADS", "2")
    rng = np.random.default_rng(61)
    height, block = 20_000, (8,)
    p0 = rng.standard_normal((height,) + block).astype(np.float32)
    table = str(tmp_path / "table.npy")
    np.save(table, p0)
    grads = [gradient(rng, height, block, 9000, np.float32, sort=(i == 1)) for i in range(3)]
    paths = [write_gradient(tmp_path / f"g{i}.parquet", r, v, height, sort_order=(0,) if i == 1 else ())
             for i, (r, v) in enumerate(grads)]
    state = str(tmp_path / "state") if optimizer != "sgd" else None
    kw = {"optimizer": optimizer, "lr": LR[optimizer], "state": state}
    assert len(np.unique(grads[0][0])) > 2 * jr.PARALLEL_ROWS
    sptool.apply(table, paths[:2], **kw)
    sptool.apply(table, paths[2:], **kw)
    want, want_state = numpy_optimizer(p0, grads, optimizer, LR[optimizer], eps=EPS.get(optimizer))
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))
    for name in STATE_NAMES[optimizer]:
        np.testing.assert_allclose(np.load(os.path.join(state, f"{name}.npy")), want_state[name],
                                   **tolerance(np.float32))
    # The accumulated journal replayed by two threads onto the table as it was: the same result.
    _another_boot(tmp_path, monkeypatch)
    np.save(table, p0)
    for name in STATE_NAMES[optimizer]:
        np.save(os.path.join(state, f"{name}.npy"), np.zeros_like(p0))
    assert sptool.apply(table, recover=True)["recovered"] > 0
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))


@pytest.fixture
def synced(monkeypatch):
    """The files synced to disk (fsync, fdatasync), by path, in order.  A sync leaves no trace in
    the files themselves; the system calls are what a user sees of it (strace), so they are
    watched, passed through."""
    calls = []

    def watching(real):
        def watched(fd):
            path = os.readlink(f"/proc/self/fd/{fd}")
            if os.path.isfile(path):
                calls.append(path)
            return real(fd)

        return watched

    for name in ("fsync", "fdatasync"):
        monkeypatch.setattr(os, name, watching(getattr(os, name)))
    return calls


def test_no_fsync_matches_numpy_and_never_waits_for_the_disk(tmp_path, synced):
    rng = np.random.default_rng(5)
    height, block = 60, (4,)
    p0 = rng.standard_normal((height,) + block).astype(np.float32)
    table = tmp_path / "table.npy"
    np.save(table, p0)
    state = str(tmp_path / "state")
    sptool.apply(str(table), [write_gradient(tmp_path / "g0.parquet", *gradient(rng, height, block, 20, np.float32),
                                             height)], optimizer="adam", lr=0.01, state=state)  # creates the state
    p1 = np.load(table)
    s1 = {n: np.load(os.path.join(state, f"{n}.npy")) for n in ("m", "v")}
    grads = [gradient(rng, height, block, 25, np.float32) for _ in range(2)]
    paths = [write_gradient(tmp_path / f"g{i + 1}.parquet", r, v, height) for i, (r, v) in enumerate(grads)]
    synced.clear()
    r = sptool.apply(str(table), paths, optimizer="adam", lr=0.01, state=state, fsync=False)
    assert synced == [] and r["step"] == 3
    want, want_state = numpy_optimizer(p1, grads, "adam", 0.01, eps=EPS["adam"], t0=1, state=s1)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))
    for n in ("m", "v"):
        np.testing.assert_allclose(np.load(os.path.join(state, f"{n}.npy")), want_state[n], **tolerance(np.float32))
    assert not (tmp_path / ".table.npy.journal").exists()
    # The default waits for the disk: the journal and the table and state files.
    sptool.apply(str(table), paths[:1], optimizer="adam", lr=0.01, state=state)
    assert synced


def test_float32_gradient_onto_float64_table_and_vector_table(tmp_path):
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal(40)  # a 1-D table: scalar "rows"
    np.save(tmp_path / "t.npy", p0)
    rows, vals = gradient(rng, 40, (), 25, np.float32)
    path = write_gradient(tmp_path / "g.parquet", rows, vals, 40)
    sptool.apply(str(tmp_path / "t.npy"), [path], optimizer="adagrad", lr=0.3, state=str(tmp_path / "s"),
                 initial_accumulator=0.5, eps=1e-3)
    want, _ = numpy_optimizer(p0, [(rows, vals)], "adagrad", 0.3, eps=1e-3, acc0=0.5)
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), want, rtol=1e-9)


def test_row_copies_match_their_numpy_reference(tmp_path):
    """The journal's compiled row copies (sptool/_journal.pyx) against NumPy indexing
    (journal_reference.py), on a shared file map that gives its pages back as the copy passes
    them (the file must still hold every row written) and on plain arrays."""
    rng = np.random.default_rng(5)
    N, m = 5000, 24
    rows = np.sort(rng.choice(N, 700, replace=False)).astype(np.int64)
    data = rng.standard_normal((N, m)).astype(np.float32)
    np.save(tmp_path / "a.npy", data)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r+")
    view = mapped.view(np.uint8)
    got, want = np.empty((len(rows), m * 4), np.uint8), np.empty((len(rows), m * 4), np.uint8)
    _journal.gather_rows(view, rows, got, 4096)
    journal_reference.gather_rows(data.view(np.uint8), rows, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got.view(np.float32), data[rows])
    new = rng.standard_normal((len(rows), m)).astype(np.float32)
    _journal.scatter_rows(view, rows, new.view(np.uint8), 4096)
    expect = data.copy()
    journal_reference.scatter_rows(expect, rows, new)
    del view, mapped
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), expect)  # read back from the file, not the map
    plain = data.copy()
    _journal.scatter_rows(plain.view(np.uint8), rows, new.view(np.uint8))
    np.testing.assert_array_equal(plain, expect)
    for fn in (_journal.gather_rows, journal_reference.gather_rows):
        with pytest.raises(ValueError):
            fn(data.view(np.uint8), rows[::-1].copy(), want)  # unsorted
        with pytest.raises(ValueError):
            fn(data.view(np.uint8), np.array([N], np.int64), want[:1])  # past the end


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_match_their_numpy_reference(dtype):
    rng = np.random.default_rng(11)
    N, m, n = 64, 5, 20
    rows = np.sort(rng.choice(N, n, replace=False)).astype(np.int64)
    grad = rng.standard_normal((n, m)).astype(dtype)
    base = rng.standard_normal((N, m)).astype(dtype)
    state = (rng.random((N, m)) + 0.1).astype(dtype)
    cases = [("sgd_rows", 0, (0.1,)), ("adagrad_rows", 1, (0.05, 1e-7)), ("adam_rows", 2, (0.003, 0.9, 0.999, 1e-8))]
    for name, n_state, scalars in cases:
        a = [base.copy()] + [state.copy() for _ in range(n_state)]
        b = [x.copy() for x in a]
        old = [x[rows] for x in a]
        getattr(_optim, name)(*a, rows, grad, *old, *scalars)
        getattr(optim_reference, name)(*b, rows, grad, *old, *scalars)
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-6 if dtype == np.float32 else 1e-14, err_msg=name)
        assert not np.array_equal(a[0], base), name
        # In place: a block of rows as both the table (rows 0 .. n-1) and the old contents.
        blocks = [base[rows].copy()] + [state[rows].copy() for _ in range(n_state)]
        getattr(_optim, name)(*blocks, np.arange(n, dtype=np.int64), grad, *blocks, *scalars)
        for x, y in zip(blocks, b):
            np.testing.assert_allclose(x, y[rows], rtol=1e-6 if dtype == np.float32 else 1e-14, err_msg=name)
    with pytest.raises(ValueError, match="outside"):
        _optim.sgd_rows(base, np.array([N], np.int64), grad[:1], grad[:1], 0.1)
    with pytest.raises(ValueError, match="must be"):
        _optim.sgd_rows(base, rows, grad, grad[:-1], 0.1)


def _crafted(tmp_path, height, block, bad):
    """A gradient file claiming sorted rows whose first (bad < 0) or last row id is outside
    [0, height): written with pyarrow over a valid file's metadata, as no sptool writer would."""
    rng = np.random.default_rng(5)
    rows = np.sort(rng.integers(0, height, 40))
    vals = rng.standard_normal((40,) + block).astype(np.float32)
    good = write_gradient(tmp_path / "good.parquet", rows, vals, height, sort_order=(0,))
    t = pq.read_table(good)
    ids = t.column("indices_0").to_numpy().copy()
    ids[0 if bad < 0 else -1] = bad
    meta = pq.read_metadata(good).metadata[b"sptool"]
    t = t.set_column(0, "indices_0", pa.array(ids)).replace_schema_metadata({b"sptool": meta})
    path = str(tmp_path / f"bad{bad}.parquet")
    pq.write_table(t, path, row_group_size=8)
    return path


def _bad_cases(tmp_path):
    rng = np.random.default_rng(9)
    np.save(tmp_path / "t.npy", rng.standard_normal((30, 4)).astype(np.float32))
    r, v = gradient(rng, 30, (4,), 12, np.float32)
    ok = write_gradient(tmp_path / "ok.parquet", r, v, 30)
    wide = write_gradient(tmp_path / "wide.parquet", r, rng.standard_normal((12, 5)).astype(np.float32), 30)
    f64 = write_gradient(tmp_path / "f64.parquet", r, v.astype(np.float64), 30)
    tall = write_gradient(tmp_path / "tall.parquet", r, v, 31)
    (tmp_path / "text.npy").write_text("not an array\n")
    np.save(tmp_path / "int.npy", np.zeros((30, 4), np.int64))
    np.save(tmp_path / "other.npy", np.zeros((20, 4), np.float32))
    sptool.apply(str(tmp_path / "other.npy"), [write_gradient(tmp_path / "o.parquet", r % 20, v, 20)],
                 optimizer="adam", lr=0.1, state=str(tmp_path / "other-state"))
    t = str(tmp_path / "t.npy")
    return {
        "block shape": ([t, wide, "--lr", "0.1"], "rows are [5] but the table's rows are [4]"),
        "height": ([t, tall, "--lr", "0.1"], "height 31 is not the table's 30 rows"),
        "precision": ([t, f64, "--lr", "0.1"], "float64 gradient values would lose precision in a float32 table"),
        "not npy": ([str(tmp_path / "text.npy"), ok, "--lr", "0.1"], "not a plain .npy"),
        "int table": ([str(tmp_path / "int.npy"), ok, "--lr", "0.1"], "float32 or float64"),
        "state of another table": ([t, ok, "--lr", "0.1", "--optimizer", "adam", "--state",
                                    str(tmp_path / "other-state")], "belongs to another table"),
        "row id past the height": ([t, ok, _crafted(tmp_path, 30, (4,), 30), "--lr", "0.1"],
                                   "indices[39] = [30] is out of bounds"),
        "negative row id": ([t, ok, _crafted(tmp_path, 30, (4,), -1), "--lr", "0.1"],
                            "indices[0] = [-1] is out of bounds"),
    }


@pytest.mark.parametrize("case", ["block shape", "height", "precision", "not npy", "int table",
                                  "state of another table", "row id past the height", "negative row id"])
def test_bad_input_leaves_the_table_untouched(tmp_path, monkeypatch, case):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "4")  # the crafted rows fail after earlier blocks were applied
    args, message = _bad_cases(tmp_path)[case]
    before = {p: digest(p) for p in (args[0], str(tmp_path / "other-state" / "m.npy"))}
    r = CliRunner().invoke(cli, ["-q", "apply", *args])
    assert r.exit_code == 1, r.output
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert {p: digest(p) for p in before} == before
    # The setup's own apply on other.npy keeps its committed journal until a later checkpoint.
    left = [n for n in os.listdir(tmp_path) if (n.endswith(".journal") and n != ".other.npy.journal") or ".tmp-" in n]
    assert not left


def test_bad_input_after_blocks_appended_to_a_kept_journal_leaves_it_as_it_was(tmp_path, monkeypatch):
    """An apply that fails after appending blocks to the journal earlier applies left (a row id
    past the height in a later batch of a sorted gradient) truncates the journal back to those
    applies, byte for byte; the next apply adds to it and the table is NumPy's."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "4")
    rng = np.random.default_rng(31)
    p0 = rng.standard_normal((30, 4)).astype(np.float32)
    table, journal = str(tmp_path / "t.npy"), str(tmp_path / ".t.npy.journal")
    np.save(table, p0)
    g1, g2 = (gradient(rng, 30, (4,), 12, np.float32) for _ in range(2))
    sptool.apply(table, [write_gradient(tmp_path / "g1.parquet", *g1, 30)], lr=0.1)
    kept, mid = open(journal, "rb").read(), digest(table)
    r = CliRunner().invoke(cli, ["-q", "apply", table, _crafted(tmp_path, 30, (4,), 30), "--lr", "0.1"])
    assert r.exit_code == 1 and "indices[39] = [30] is out of bounds" in r.output, r.output
    assert open(journal, "rb").read() == kept and digest(table) == mid
    assert sptool.apply(table, [write_gradient(tmp_path / "g2.parquet", *g2, 30)], lr=0.1)["recovered"] is None
    assert _parse_journal(journal) == (2, [True, True], False)
    want, _ = numpy_optimizer(p0, [g1, g2], "sgd", 0.1)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))


def test_other_optimizer_state_is_refused(tmp_path):
    np.save(tmp_path / "t.npy", np.ones((10, 2), np.float32))
    g = write_gradient(tmp_path / "g.parquet", np.array([1, 1, 3]), np.ones((3, 2), np.float32), 10)
    sptool.apply(str(tmp_path / "t.npy"), [g], optimizer="adagrad", lr=0.1, state=str(tmp_path / "s"))
    r = CliRunner().invoke(cli, ["-q", "apply", str(tmp_path / "t.npy"), g, "--optimizer", "adam", "--lr", "0.1",
                                 "--state", str(tmp_path / "s")])
    assert r.exit_code == 1 and "belongs to --optimizer adagrad, not adam" in r.output


def test_adam_needs_a_state_and_lr_is_required(tmp_path):
    np.save(tmp_path / "t.npy", np.ones((10, 2), np.float32))
    g = write_gradient(tmp_path / "g.parquet", np.array([1]), np.ones((1, 2), np.float32), 10)
    r = CliRunner().invoke(cli, ["apply", str(tmp_path / "t.npy"), g, "--optimizer", "adam", "--lr", "1"])
    assert r.exit_code == 2 and "--state" in r.output
    r = CliRunner().invoke(cli, ["apply", str(tmp_path / "t.npy"), g])
    assert r.exit_code == 2 and "--lr is required" in r.output
    assert np.array_equal(np.load(tmp_path / "t.npy"), np.ones((10, 2), np.float32))


# --- crash safety: real processes killed with SIGKILL -------------------------------------

def _crash_setup(tmp_path, optimizer):
    rng = np.random.default_rng(21)
    height, block = 400, (8,)
    p0 = rng.standard_normal((height,) + block).astype(np.float32)
    np.save(tmp_path / "t.npy", p0)
    grads = [gradient(rng, height, block, 120, np.float32) for _ in range(2)]
    paths = [write_gradient(tmp_path / f"g{i}.parquet", r, v, height) for i, (r, v) in enumerate(grads)]
    state = str(tmp_path / "state")
    # One step first, so that the state holds something the crash could tear.
    first = write_gradient(tmp_path / "first.parquet", *gradient(rng, height, block, 60, np.float32), height)
    sptool.apply(str(tmp_path / "t.npy"), [first], optimizer=optimizer, lr=0.01, state=state)
    old_state = {n: np.load(os.path.join(state, f"{n}.npy")) for n in STATE_NAMES[optimizer]}
    old = (np.load(tmp_path / "t.npy"), old_state, 1)
    p_new, s_new = numpy_optimizer(old[0], grads, optimizer, 0.01, eps=EPS.get(optimizer), t0=1, state=old_state)
    return paths, state, old, (p_new, s_new, 3)


def _outcome(tmp_path, state, optimizer, old, new):
    """'old' or 'new', asserting the table, state arrays and step are wholly one of them."""
    table = np.load(tmp_path / "t.npy")
    arrays = {n: np.load(os.path.join(state, f"{n}.npy")) for n in STATE_NAMES[optimizer]}
    step = json.load(open(os.path.join(state, "state.json")))["step"]
    if step == old[2]:
        assert np.array_equal(table, old[0])
        for n in arrays:
            assert np.array_equal(arrays[n], old[1][n]), n
        return "old"
    assert step == new[2]
    np.testing.assert_allclose(table, new[0], **tolerance(np.float32))
    for n in arrays:
        np.testing.assert_allclose(arrays[n], new[1][n], **tolerance(np.float32))
    return "new"


# --no-fsync keeps the same order of writes without waiting for the disk: a killed process
# (not a power loss) must still leave all old or all new.
@pytest.mark.parametrize("optimizer, extra", [("adam", ()), ("adagrad", ()), ("adam", ("--no-fsync",))])
def test_sigkill_at_many_points_leaves_all_old_or_all_new(tmp_path, optimizer, extra):
    seen = []
    rng = np.random.default_rng(99)
    env = env_with_sptool()
    env.update(SPTOOL_BATCH_ROWS="16", SPTOOL_APPLY_PAUSE="0.05")  # a pause at every step
    for trial in range(8):
        work = tmp_path / f"trial{trial}"
        work.mkdir()
        paths, state, old, new = _crash_setup(work, optimizer)
        journal = work / ".t.npy.journal"
        cmd = [os.path.join(os.path.dirname(sys.executable), "sptool"), "-q", "apply", str(work / "t.npy"), *paths,
               "--optimizer", optimizer, "--lr", "0.01", "--state", state, *extra]
        # The setup's own apply left the journal: the transaction has begun once it changes.
        before = _stamp(journal)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while _stamp(journal) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        # Kill at once (as the journal first changes: its first block, or without fsync the earlier
        # journal's checkpoint and removal; a pause follows either), at points
        # spread over the transaction (its pauses and the commit), and after it ended.
        time.sleep(0.0 if trial == 0 else rng.uniform(0, 0.3) if trial < 7 else 5.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if trial == 7:
            assert proc.returncode == 0, proc.stderr.read()  # it finished before the kill
        r = CliRunner().invoke(cli, ["-q", "apply", str(work / "t.npy"), "--recover"])
        assert r.exit_code == 0, r.output
        assert not journal.exists()
        seen.append(_outcome(work, state, optimizer, old, new))
    assert "old" in seen and "new" in seen, seen


def _stamp(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def _parse_journal(path):
    """(committed transactions, whether each was applied by this boot, whether an uncommitted
    transaction follows them)."""
    from sptool.rowsparse.journal import _parse

    _, txns, cut, _, _ = _parse(open(path, "rb").read())
    return len(txns), [t.applied for t in txns], cut


def _paused_apply(args, env, phase):
    """A real sptool process stopped at ``phase`` (SPTOOL_APPLY_PAUSE=PHASE=SECONDS), then SIGKILLed."""
    env = {**env, "SPTOOL_BATCH_ROWS": "16", "SPTOOL_APPLY_PAUSE": f"{phase}=60"}
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "sptool"), "-q", "apply", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stderr.readline().decode()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert line == f"paused at {phase}\n", line + proc.stderr.read().decode()


# Killed in each phase of the redo journal: while blocks are appended and once the last one is
# (no commit record: the table was never touched, the journal is discarded), after the
# commit record and while the rows are written into the table (the journal is replayed), and
# while a recovery replays it; then a second apply with another gradient, checked against NumPy
# from the old or the new contents.
@pytest.mark.parametrize("phase", ["appended", "journaled", "committed", "written", "written+recovery"])
def test_sigkill_in_each_phase_then_a_second_apply(tmp_path, phase):
    paths, state, old, new = _crash_setup(tmp_path, "adam")
    table, journal = tmp_path / "t.npy", tmp_path / ".t.npy.journal"
    rng = np.random.default_rng(7)
    third = gradient(rng, 400, (8,), 90, np.float32)
    g3 = write_gradient(tmp_path / "g3.parquet", *third, 400)
    env = env_with_sptool()
    sptool.apply(str(table), recover=True)  # the setup's own journal checkpointed: old[0] is durable
    before = digest(table)
    _paused_apply([str(table), *paths, "--optimizer", "adam", "--lr", "0.01", "--state", state], env,
                  phase.split("+")[0])
    committed = phase not in ("appended", "journaled")
    assert _parse_journal(journal) == ((1, [False], False) if committed else (0, [], True))
    assert (digest(table) == before) == (phase not in ("written", "written+recovery")), \
        "the table is touched only after the commit record"
    if phase == "written+recovery":  # a recovery killed while it replays: replayed again later
        _paused_apply([str(table), "--recover"], env, "written")
        assert _parse_journal(journal) == (1, [False], False)
    r = CliRunner().invoke(cli, ["apply", str(table), g3, "--optimizer", "adam", "--lr", "0.01", "--state", state])
    assert r.exit_code == 0, r.output
    done = committed
    assert ("finished an interrupted apply" if done else "discarded an interrupted apply") in r.output, r.output
    base_p, base_s, t0 = (new[0], new[1], 3) if done else (old[0], old[1], 1)
    want, want_state = numpy_optimizer(base_p, [third], "adam", 0.01, eps=1e-8, t0=t0, state=base_s)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))
    for n in ("m", "v"):
        np.testing.assert_allclose(np.load(os.path.join(state, f"{n}.npy")), want_state[n], **tolerance(np.float32))
    assert json.load(open(os.path.join(state, "state.json")))["step"] == t0 + 1
    # This apply's own journal: committed and applied, kept for the applies that follow.
    assert _parse_journal(journal) == (1, [True], False)


def _journal_block_rows(journal, k: int) -> np.ndarray:
    """The row ids of the k-th block of the journal's first transaction."""
    from sptool.rowsparse.journal import _parse

    raw = open(journal, "rb").read()
    pos, n = _parse(raw).txns[0].blocks[k]
    return np.frombuffer(raw[pos:pos + 8 * n], np.int64)


def _power_loss(rng, files, durable, keep=()):
    """Each 4 KiB page of each file left as the page cache had it or as the disk last held it
    (``durable``: path -> bytes), the pages holding the offsets in ``keep`` (path -> offsets) as
    the page cache had them (written back before the power went)."""
    for f in files:
        cache, disk = np.frombuffer(open(f, "rb").read(), np.uint8), np.frombuffer(durable[f], np.uint8)
        page = np.arange(len(cache)) // 4096
        written = rng.random(page.max() + 1) < 0.5
        written[[o // 4096 for o in keep.get(f, ())]] = True
        with open(f, "r+b") as out:
            out.write(np.where(written[page], cache, disk).tobytes())


@pytest.mark.parametrize("replaced", [False, True])
def test_kills_and_power_losses_in_turn_end_all_new_never_in_a_refusal(tmp_path, replaced):
    """A real apply SIGKILLed while it writes rows into the table (the row it was copying torn),
    a power loss, the next recovery's replay SIGKILLed while it rewrites rows (a second torn row
    in the same array), another power loss: the journal vouches for both torn rows (its
    "replay began" record says a second copy was interrupted), so the recovery after that
    finishes the apply exactly (NumPy's result), where it used to refuse.  A table replaced by
    np.save before that recovery is still refused, nothing written into it."""
    paths, state, old, new = _crash_setup(tmp_path, "adam")
    table, journal = str(tmp_path / "t.npy"), str(tmp_path / ".t.npy.journal")
    files = [table, os.path.join(state, "m.npy"), os.path.join(state, "v.npy")]
    sptool.apply(table, recover=True)  # the setup's journal checkpointed: this is what the disk holds
    disk = {f: open(f, "rb").read() for f in files + [os.path.join(state, "state.json")]}
    env, rng = env_with_sptool(), np.random.default_rng(17)
    row = 8 * 4
    header = len(disk[table]) - 400 * row

    def tear(at: int, second_half: bytes):
        # The copy of this row stopped halfway: its first half new, the rest what was there.
        with open(table, "r+b") as out:
            out.seek(header + at * row + row // 2)
            out.write(second_half)

    _paused_apply([table, *paths, "--optimizer", "adam", "--lr", "0.01", "--state", state], env, "written")
    first = _journal_block_rows(journal, 0)  # written into the table before the kill
    assert len(first) >= 3
    # The kill caught the copy of the block's last row halfway (its rows are copied in order).
    r1 = int(first[-1])
    tear(r1, disk[table][header + r1 * row + row // 2:header + (r1 + 1) * row])
    _power_loss(rng, files, disk, keep={table: [header + r1 * row]})
    with open(os.path.join(state, "state.json"), "wb") as out:
        out.write(disk[os.path.join(state, "state.json")])  # its rename not durable either
    lost = {f: open(f, "rb").read() for f in files}
    torn1 = lost[table][header + r1 * row:header + (r1 + 1) * row]
    assert torn1 != disk[table][header + r1 * row:header + (r1 + 1) * row]

    _paused_apply([table, "--recover"], env, "written")  # the replay killed after its first block
    assert _parse_journal(journal) == (1, [False], False)
    # ... in fact halfway through its first row, r0: the rows after it (r1 among them) as they were.
    r0 = int(first[0])
    replayed = open(table, "rb").read()
    with open(table, "r+b") as out:
        out.write(lost[table])
    with open(table, "r+b") as out:
        out.seek(header + r0 * row)
        out.write(replayed[header + r0 * row:header + r0 * row + row // 2])
    now = open(table, "rb").read()
    assert now[header + r0 * row:header + (r0 + 1) * row] not in (
        replayed[header + r0 * row:header + (r0 + 1) * row], disk[table][header + r0 * row:header + (r0 + 1) * row])
    assert now[header + r1 * row:header + (r1 + 1) * row] == torn1  # still torn: two torn rows in one array
    _power_loss(rng, files, lost, keep={table: [header + r0 * row, header + r1 * row]})
    if replaced:
        other = np.random.default_rng(3).standard_normal((400, 8)).astype(np.float32)
        np.save(table, other)
    untouched = {f: digest(f) for f in files}
    r = CliRunner().invoke(cli, ["apply", table, "--recover"])
    if replaced:
        assert r.exit_code == 1 and f"Error: {table}: no longer holds what the journal" in r.output, r.output
        assert {f: digest(f) for f in files} == untouched
        return
    assert r.exit_code == 0 and "finished an interrupted apply" in r.output, r.output
    assert not os.path.exists(journal)
    assert _outcome(tmp_path, state, "adam", old, new) == "new"


def test_durable_applies_accumulate_in_one_journal_until_a_checkpoint(tmp_path, synced):
    """Applies accumulate; the journal is checkpointed (synced, removed) when it reaches
    --journal-limit, when it is older than the OS's writeback delay, and by --recover; the
    table after all of them is NumPy's."""
    from sptool.rowsparse import journal as jr

    rng = np.random.default_rng(12)
    p0 = rng.standard_normal((80, 4)).astype(np.float32)
    table = str(tmp_path / "t.npy")
    np.save(table, p0)
    grads = [gradient(rng, 80, (4,), 30, np.float32) for _ in range(6)]
    paths = [write_gradient(tmp_path / f"g{i}.parquet", r, v, 80) for i, (r, v) in enumerate(grads)]
    journal = tmp_path / ".t.npy.journal"
    def table_syncs():  # the journal's own appends are synced too; the table only at a checkpoint
        return synced.count(os.path.realpath(table))

    assert sptool.apply(table, paths[:1], optimizer="sgd", lr=0.1)["recovered"] is None
    r = sptool.apply(table, paths[1:2], optimizer="sgd", lr=0.1)
    assert r["recovered"] is None and table_syncs() == 0  # appended: the table not waited for
    assert _parse_journal(journal) == (2, [True, True], False)
    size = os.path.getsize(journal)
    r = CliRunner().invoke(cli, ["apply", table, paths[2], "--lr", "0.1", "--journal-limit", str(size + 1)])
    assert r.exit_code == 0 and "checkpointed" not in r.output and _parse_journal(journal)[0] == 3, r.output
    r = CliRunner().invoke(cli, ["apply", table, paths[3], "--lr", "0.1", "--journal-limit", str(size + 1)])
    assert r.exit_code == 0 and "checkpointed the journal" in r.output, r.output  # past the limit: synced first
    assert table_syncs() == 1 and _parse_journal(journal) == (1, [True], False)
    old = time.time() - jr.writeback_age() - 1  # older than the writeback delay: checkpointed
    os.utime(journal, (old, old))
    assert sptool.apply(table, paths[4:5], optimizer="sgd", lr=0.1)["recovered"] == 0
    assert table_syncs() == 2 and _parse_journal(journal) == (1, [True], False)
    sptool.apply(table, paths[5:], optimizer="sgd", lr=0.1)
    r = sptool.apply(table, recover=True)
    assert r["recovered"] == 0 and not journal.exists() and table_syncs() == 3
    assert sptool.apply(table, recover=True)["recovered"] is None
    want, _ = numpy_optimizer(p0, grads, "sgd", 0.1)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))


def test_apply_progress_in_a_terminal(tmp_path):
    rng = np.random.default_rng(4)
    np.save(tmp_path / "t.npy", rng.standard_normal((300, 8)).astype(np.float32))
    rows, vals = gradient(rng, 300, (8,), 200, np.float32)
    write_gradient(tmp_path / "g.parquet", rows, vals, 300)
    env_line = "SPTOOL_BATCH_ROWS=20 SPTOOL_APPLY_PAUSE=0.05"
    code, output = run_in_terminal(["bash", "-c", f"{env_line} sptool apply t.npy g.parquet --lr 0.1"], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0, text
    assert BAR_GLYPH in output and cursor_restored(output), text
    assert f"updated {len(np.unique(rows))} rows of t.npy (sgd, 1 gradient(s))" in text


def test_torn_journal_tail_is_ignored_and_a_committed_one_replayed(tmp_path, monkeypatch):
    from sptool.rowsparse import journal as jr

    rng = np.random.default_rng(8)
    original = rng.standard_normal((20, 3))
    np.save(tmp_path / "a.npy", original)
    doc = tmp_path / "s.json"
    doc.write_text("old\n")
    arr = np.load(tmp_path / "a.npy", mmap_mode="r+")
    path = str(tmp_path / "j")
    blocks = [(np.array([2, 5, 7]), rng.standard_normal((3, 3))), (np.array([9, 11]), rng.standard_normal((2, 3)))]
    want = original.copy()  # the oracle: NumPy's own assignment of the new rows
    for rows, new in blocks:
        want[rows] = new
    j = jr.RowJournal(path, {"a": (str(tmp_path / "a.npy"), arr)}, {str(doc): "new\n"})
    header_end = os.path.getsize(path)
    for rows, new in blocks:
        j.append(rows, [new])
    assert np.array_equal(np.load(tmp_path / "a.npy"), original), "nothing written before the commit"
    j.commit()
    committed = open(path, "rb").read()
    j.apply(1 << 20)
    applied = open(path, "rb").read()
    del arr
    assert np.array_equal(np.load(tmp_path / "a.npy"), want) and doc.read_text() == "new\n"

    def recover(data):
        np.save(tmp_path / "a.npy", original)
        doc.write_text("old\n")
        with open(path, "wb") as f:
            f.write(data)
        n = jr.recover_journal(path)
        assert not os.path.exists(path)
        return n

    for cut in range(header_end, len(committed) + 1):  # a tail torn anywhere before the whole commit record
        whole = cut == len(committed)
        assert recover(committed[:cut]) == (5 if whole else -1), cut
        assert np.array_equal(np.load(tmp_path / "a.npy"), want if whole else original), cut
        assert doc.read_text() == ("new\n" if whole else "old\n")
    for cut in range(len(jr.MAGIC)):  # cut inside the magic: nothing to do
        assert recover(jr.MAGIC[:cut]) == -1
    flipped = bytearray(committed)
    flipped[header_end + 30] ^= 1  # a block's payload damaged: its CRC and the commit record's refuse it
    assert recover(bytes(flipped)) == -1 and np.array_equal(np.load(tmp_path / "a.npy"), original)
    # The blocks and the record are synced together: a power loss during that sync can keep the
    # record but not a block (its page still zeros on disk), which the record does not vouch for.
    lost = bytearray(committed)
    lost[header_end:header_end + 64] = bytes(64)
    assert recover(bytes(lost)) == -1 and np.array_equal(np.load(tmp_path / "a.npy"), original)
    assert doc.read_text() == "old\n"
    # The "applied" record of this boot: the page cache holds the rows, only synced, not rewritten...
    assert recover(applied) == 0 and np.array_equal(np.load(tmp_path / "a.npy"), original)
    # ...but a record from another boot (an OS crash since) is replayed.
    _another_boot(tmp_path, monkeypatch)
    assert recover(applied) == 5 and np.array_equal(np.load(tmp_path / "a.npy"), want)


def test_docs_row_sparse_tour(tmp_path):
    from command_examples import ROOT, fenced_blocks, in_workdir

    (block,) = [b for b in fenced_blocks(ROOT / "docs" / "row-sparse.md") if "sptool apply" in b]
    p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", in_workdir(block, tmp_path)], cwd=tmp_path,
                       env=env_with_sptool(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows, vals = np.load(ROOT / "sample_data/grad_rows.npy"), np.load(ROOT / "sample_data/grad_values.npy")
    distinct = len(np.unique(rows))
    assert f"row-sparse  200 rows of [16]; {distinct} distinct, {distinct / 1000:.3g} of the height" in p.stdout
    assert f"# row-sparse: 200 rows of [16]; {distinct} distinct, {distinct / 1000:.3g}" in block  # the comment holds
    want, _ = numpy_optimizer(np.load(ROOT / "sample_data/embeddings.npy"), [(rows, vals)] * 3, "adam", 0.01,
                              eps=1e-8)
    np.testing.assert_allclose(np.load(tmp_path / "emb.npy"), want, **tolerance(np.float32))
    assert json.load(open(tmp_path / "emb-adam" / "state.json"))["step"] == 3


# --- the journal's check of the table before a replay, and signals after the commit --------

def test_row_piece_checksums_match_google_crc32c_and_their_reference():
    import google_crc32c

    from sptool import _tfrecord

    rng = np.random.default_rng(31)
    for width, piece, start in [(40, 64, 128), (256, 4096, 128), (9000, 4096, 80), (8, 8, 0)]:
        ids = np.sort(rng.choice(500, 60, replace=False)).astype(np.int64)
        old = rng.integers(0, 256, (60, width), dtype=np.uint8)
        pieces = (piece - 1 + width - 1) // piece + 1
        got = _tfrecord.crc32c_pieces(old, ids, start, piece, pieces)
        # The oracle: each row cut at the multiples of piece of its file offset, each piece's CRC-32C.
        want = np.zeros((60, pieces), np.uint32)
        for i, row in enumerate(ids):
            first = start + int(row) * width
            cuts = sorted({first, first + width, *range(-(-first // piece) * piece, first + width, piece)})
            for j, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
                want[i, j] = google_crc32c.value(old[i, a - first:b - first].tobytes())
        assert np.array_equal(got, want), (width, piece)
        assert np.array_equal(tfrecord_reference.crc32c_pieces(old, ids, start, piece, pieces), want)
        new = rng.integers(0, 256, (60, width), dtype=np.uint8)
        # A mix of old and new, cut where a page of the file ends (a torn writeback): matched.
        page_of = (start + ids[:, None] * width + np.arange(width)) // piece
        cur = np.where(page_of % 2 == 1, new, old)
        for fn in (_tfrecord.first_unmatched_row, tfrecord_reference.first_unmatched_row):
            assert fn(cur, new, want, ids, start, piece) == -1
            bad = cur.copy()
            bad[17, width // 2] ^= 0x40  # a byte neither old nor new
            assert fn(bad, new, want, ids, start, piece) == 17
    with pytest.raises(ValueError, match="pieces"):
        _tfrecord.crc32c_pieces(old, ids, 0, 4, 1)


def _monday(tmp_path):
    """An adam apply whose journal is kept (committed and applied, this boot), with the table
    and state files before and after it, and the NumPy oracle of after."""
    rng = np.random.default_rng(41)
    height, block = 300, (64,)  # 256-byte rows after a 128-byte header: every 16th row straddles a page
    np.save(tmp_path / "t.npy", rng.standard_normal((height,) + block).astype(np.float32))
    state = str(tmp_path / "state")
    first = gradient(rng, height, block, 80, np.float32)
    sptool.apply(str(tmp_path / "t.npy"), [write_gradient(tmp_path / "g0.parquet", *first, height)],
                 optimizer="adam", lr=0.01, state=state)
    sptool.apply(str(tmp_path / "t.npy"), recover=True)  # checkpointed: the state exists, no journal
    files = [str(tmp_path / "t.npy"), *(os.path.join(state, f"{n}.npy") for n in ("m", "v")),
             os.path.join(state, "state.json")]
    before = {f: open(f, "rb").read() for f in files}
    old_state = {n: np.load(os.path.join(state, f"{n}.npy")) for n in ("m", "v")}
    grad = gradient(rng, height, block, 200, np.float32)
    sptool.apply(str(tmp_path / "t.npy"), [write_gradient(tmp_path / "g1.parquet", *grad, height)],
                 optimizer="adam", lr=0.01, state=state)
    after = {f: open(f, "rb").read() for f in files}
    want = numpy_optimizer(np.load(io.BytesIO(before[files[0]])), [grad], "adam", 0.01, eps=1e-8, t0=1,
                           state=old_state)
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), want[0], **tolerance(np.float32))
    rng2 = np.random.default_rng(42)
    tuesday = gradient(rng2, height, block, 50, np.float32)
    g2 = write_gradient(tmp_path / "g2.parquet", *tuesday, height)
    return files, before, after, state, g2, tuesday


def _another_boot(tmp_path, monkeypatch):
    """An OS crash and a reboot since the journal was written: no test can reboot the machine,
    so the journal is shown another boot id file."""
    from sptool.rowsparse import journal as jr

    other = tmp_path / "boot_id"
    other.write_text("00000000-0000-0000-0000-000000000000\n")
    monkeypatch.setattr(jr, "BOOT_ID", str(other))


def test_a_replaced_table_is_refused_not_replayed_into(tmp_path, monkeypatch):
    """Monday's apply keeps its journal; a reboot; the user overwrites the table in place with
    another array of the same shape; Tuesday's apply must not replay Monday's rows into it."""
    files, before, after, state, g2, tuesday = _monday(tmp_path)
    table, journal = files[0], str(tmp_path / ".t.npy.journal")
    _another_boot(tmp_path, monkeypatch)
    inode = os.stat(table).st_ino
    replaced = np.random.default_rng(5).standard_normal((300, 64)).astype(np.float32)
    np.save(table, replaced)  # in place: same name, same inode, same shape and type
    assert os.stat(table).st_ino == inode
    untouched = {f: digest(f) for f in files + [journal]}
    args = ["apply", table, g2, "--optimizer", "adam", "--lr", "0.01", "--state", state]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    line = r.output.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert line.startswith(f"Error: {table}: no longer holds what the journal {journal}"), line
    assert f"remove {journal}" in line and "nothing was touched" in line
    assert {f: digest(f) for f in untouched} == untouched, "the table, its state and the journal byte-untouched"
    r = CliRunner().invoke(cli, ["apply", table, "--recover"])
    assert r.exit_code == 1 and {f: digest(f) for f in untouched} == untouched
    # The documented way out: remove the journal; then the new table is updated as it stands,
    # from the state Monday left (step 2).
    moments = {n: np.load(os.path.join(state, f"{n}.npy")) for n in ("m", "v")}
    os.remove(journal)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    want, _ = numpy_optimizer(replaced, [tuesday], "adam", 0.01, eps=1e-8, t0=2, state=moments)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))


def test_a_replaced_state_array_is_refused_too(tmp_path, monkeypatch):
    files, before, after, state, _, _ = _monday(tmp_path)
    _another_boot(tmp_path, monkeypatch)
    np.save(files[2], np.zeros((300, 64), np.float32))  # v.npy reset by hand
    untouched = {f: digest(f) for f in files}
    r = CliRunner().invoke(cli, ["apply", files[0], "--recover"])
    assert r.exit_code == 1 and f"Error: {files[2]}: no longer holds what the journal" in r.output, r.output
    assert {f: digest(f) for f in untouched} == untouched


@pytest.mark.parametrize("mix", ["untorn old", "untorn new", "alternate pages", "random pages"])
def test_a_torn_writeback_is_replayed_to_exactly_the_new_state(tmp_path, monkeypatch, mix):
    """After a power loss each page of the table and state is old or new (pages are written
    back whole, rows straddling pages torn between them): Tuesday's apply replays Monday's
    journal to exactly Monday's result."""
    files, before, after, state, _, _ = _monday(tmp_path)
    _another_boot(tmp_path, monkeypatch)
    rng = np.random.default_rng(hash(mix) % 2**32)
    for f in files[:3]:
        old, new = np.frombuffer(before[f], np.uint8), np.frombuffer(after[f], np.uint8)
        page = np.arange(len(old)) // 4096
        pick = {"untorn old": page < 0, "untorn new": page >= 0, "alternate pages": page % 2 == 1,
                "random pages": rng.random(page.max() + 1)[page] < 0.5}[mix]
        torn = np.where(pick, new, old)
        assert mix.startswith("untorn") or not (np.array_equal(torn, old) or np.array_equal(torn, new))
        with open(f, "r+b") as out:  # in place, as writeback does
            out.write(torn.tobytes())
    with open(files[3], "wb") as out:
        out.write(before[files[3]])  # the state.json's rename not durable either
    r = CliRunner().invoke(cli, ["apply", files[0], "--recover"])
    assert r.exit_code == 0 and "finished an interrupted apply" in r.output, r.output
    for f in files:
        assert open(f, "rb").read() == after[f], f


@pytest.mark.parametrize("rows_torn", [1, 2])
def test_a_row_torn_by_a_kill_while_copying_is_replayed(tmp_path, monkeypatch, rows_torn):
    """SIGKILL while apply copies rows into the table leaves the row it was copying half old,
    half new inside one page: the replay finishes the apply exactly.  Two such rows in one array
    cannot come from one copy loop, so that table is taken as changed since and refused."""
    files, before, after, state, _, _ = _monday(tmp_path)
    _another_boot(tmp_path, monkeypatch)
    old, new = np.frombuffer(before[files[0]], np.uint8), np.frombuffer(after[files[0]], np.uint8)
    row_bytes, header = 64 * 4, len(old) - 300 * 64 * 4
    changed = np.flatnonzero((old != new)[header:].reshape(300, row_bytes).any(axis=1))
    # rows wholly inside one 4 KiB page, so the tear is inside a piece, not at a page boundary
    inside = [r for r in changed if (header + r * row_bytes) // 4096 == (header + (r + 1) * row_bytes - 1) // 4096]
    torn = new.copy()
    for r in inside[:rows_torn]:
        lo = header + r * row_bytes
        torn[lo + row_bytes // 2:lo + row_bytes] = old[lo + row_bytes // 2:lo + row_bytes]  # second half not copied
        assert not np.array_equal(torn[lo:lo + row_bytes], new[lo:lo + row_bytes])
        assert not np.array_equal(torn[lo:lo + row_bytes], old[lo:lo + row_bytes])
    with open(files[0], "r+b") as out:
        out.write(torn.tobytes())
    r = CliRunner().invoke(cli, ["apply", files[0], "--recover"])
    if rows_torn == 1:
        assert r.exit_code == 0 and "finished an interrupted apply" in r.output, r.output
        for f in files:
            assert open(f, "rb").read() == after[f], f
    else:
        assert r.exit_code == 1 and f"Error: {files[0]}: no longer holds what the journal" in r.output, r.output
        assert open(files[0], "rb").read() == torn.tobytes()


@pytest.mark.parametrize("rows", [1, 3])
def test_a_table_replaced_under_a_small_interrupted_apply_is_refused(tmp_path, rows):
    """An apply committed but killed before it wrote a row, its table then replaced by another of
    the same shape: recovery must not write into the new table, however few rows the journal
    holds (one unmatched row is allowed only when other journaled rows match)."""
    from sptool.rowsparse.journal import RowJournal, journal_path, recover_journal

    t = str(tmp_path / "t.npy")
    np.save(t, np.zeros((100, 8), np.float32))
    a = np.load(t, mmap_mode="r+")
    j = RowJournal(journal_path(t), {"table": (t, a)}, {}, durable=False)
    j.append(np.arange(5, 5 + rows), [np.full((rows, 8), 7, np.float32)])
    j.commit()
    os.close(j.fd)
    del a  # killed after the commit, before any row was written
    replaced = np.random.default_rng(3).random((100, 8)).astype(np.float32)
    np.save(t, replaced)  # same name, same shape and type
    with pytest.raises(sptool.DataError, match="no longer holds what the journal"):
        recover_journal(journal_path(t), durable=False)
    assert np.array_equal(np.load(t), replaced)


def _three_applies(tmp_path):
    """Three adam applies accumulated in one journal (gradients over 300 rows: many rows in
    more than one), the table, state arrays and state.json before and after each, and NumPy's
    result after all three."""
    rng = np.random.default_rng(43)
    height, block = 300, (64,)  # 256-byte rows after a 128-byte header: every 16th row straddles a page
    p0 = rng.standard_normal((height,) + block).astype(np.float32)
    table, state = str(tmp_path / "t.npy"), str(tmp_path / "state")
    np.save(table, p0)
    files = [table, *(os.path.join(state, f"{n}.npy") for n in ("m", "v")), os.path.join(state, "state.json")]
    grads = [gradient(rng, height, block, 150, np.float32) for _ in range(3)]
    sptool.apply(table, [write_gradient(tmp_path / "g0.parquet", *gradient(rng, height, block, 40, np.float32),
                                        height)], optimizer="adam", lr=0.01, state=state)
    sptool.apply(table, recover=True)  # a durable start: the state exists, no journal
    moments = {n: np.load(os.path.join(state, f"{n}.npy")) for n in ("m", "v")}
    base = np.load(table)
    versions = [{f: open(f, "rb").read() for f in files}]
    for i, g in enumerate(grads):
        r = sptool.apply(table, [write_gradient(tmp_path / f"g{i + 1}.parquet", *g, height)], optimizer="adam",
                         lr=0.01, state=state)
        assert r["recovered"] is None  # appended to the journal
        versions.append({f: open(f, "rb").read() for f in files})
    assert _parse_journal(tmp_path / ".t.npy.journal") == (3, [True, True, True], False)
    want, want_state = numpy_optimizer(base, grads, "adam", 0.01, eps=1e-8, t0=1, state=moments)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))
    for n in ("m", "v"):
        np.testing.assert_allclose(np.load(os.path.join(state, f"{n}.npy")), want_state[n], **tolerance(np.float32))
    return files, versions


def _pages_of_versions(files, versions, rng, first: bool = False):
    """A power loss: each page of each file any of the versions it went through (the first
    only, ``first``), written in place, as writeback does."""
    for f in files:
        stack = np.stack([np.frombuffer(v[f], np.uint8) for v in versions])
        page = np.arange(stack.shape[1]) // 4096
        pick = np.zeros(page.max() + 1, np.int64) if first else rng.integers(0, len(versions), page.max() + 1)
        with open(f, "r+b") as out:
            out.write(stack[pick[page], np.arange(stack.shape[1])].tobytes())


@pytest.mark.parametrize("mix", ["all first", "random pages"])
def test_several_applies_torn_by_a_power_loss_replay_to_exactly_the_last(tmp_path, monkeypatch, mix):
    """A power loss after three accumulated applies: each page of the table and state is any of
    the four versions it went through (written back whenever the OS chose), state.json the
    first; the next boot's recovery replays the three in order to exactly the last version,
    rows in several applies included (each of their pieces may be of any of them)."""
    files, versions = _three_applies(tmp_path)
    _another_boot(tmp_path, monkeypatch)
    _pages_of_versions(files[:3], versions, np.random.default_rng(3), first=mix == "all first")
    with open(files[3], "wb") as out:
        out.write(versions[0][files[3]])
    r = CliRunner().invoke(cli, ["apply", files[0], "--recover"])
    assert r.exit_code == 0 and "finished an interrupted apply" in r.output, r.output
    for f in files:
        assert open(f, "rb").read() == versions[-1][f], f
    assert not (tmp_path / ".t.npy.journal").exists()


# The check before a replay goes a range of row ids at a time within its budget: at 3 KB, a
# range a row of these 256-byte rows (a block's rows cut across many ranges).
SMALL_CHECK = 3000


@pytest.mark.parametrize("budget", [None, SMALL_CHECK])
def test_a_table_replaced_under_several_applies_is_refused_after_a_crash(tmp_path, monkeypatch, budget):
    from sptool.rowsparse.journal import journal_path, recover_journal

    files, versions = _three_applies(tmp_path)
    _another_boot(tmp_path, monkeypatch)
    np.save(files[0], np.random.default_rng(6).standard_normal((300, 64)).astype(np.float32))
    untouched = {f: digest(f) for f in files + [str(tmp_path / ".t.npy.journal")]}
    if budget:
        with pytest.raises(sptool.DataError, match="no longer holds what the journal"):
            recover_journal(journal_path(files[0]), budget_bytes=budget)
    else:
        r = CliRunner().invoke(cli, ["apply", files[0], "--recover"])
        assert r.exit_code == 1 and f"Error: {files[0]}: no longer holds what the journal" in r.output, r.output
    assert {f: digest(f) for f in untouched} == untouched


def test_several_torn_applies_are_checked_and_replayed_a_range_of_rows_at_a_time(tmp_path, monkeypatch):
    """As above with a check budget of a row a range: the torn pages still replay to exactly
    the last version."""
    from sptool.rowsparse.journal import journal_path, recover_journal

    files, versions = _three_applies(tmp_path)
    _another_boot(tmp_path, monkeypatch)
    _pages_of_versions(files[:3], versions, np.random.default_rng(8))
    assert recover_journal(journal_path(files[0]), budget_bytes=SMALL_CHECK) > 0
    for f in files[:3]:
        assert open(f, "rb").read() == versions[-1][f], f


def test_a_large_journal_recovers_within_memory(tmp_path):
    """A journal of three committed, never applied transactions of 2M rows each (6M row ids,
    120 MB: the old check held every id at once, sorted) is checked and replayed by
    ``--memory 64MiB apply --recover`` within the stated figure (--memory + 256 MiB, peak RSS
    of the child process), to NumPy's result: each row the last transaction's that wrote it."""
    from test_memory import OVERHEAD, peak_rss

    from sptool.rowsparse.journal import RowJournal, journal_path

    rng = np.random.default_rng(23)
    height, per_txn, block = 2_500_000, 2_000_000, 250_000
    table = str(tmp_path / "t.npy")
    want = rng.standard_normal(height).astype(np.float32)
    np.save(table, want)
    mapped = np.load(table, mmap_mode="r+")
    for k in range(3):
        rows = np.sort(rng.choice(height, per_txn, replace=False)).astype(np.int64)
        vals = rng.standard_normal(per_txn).astype(np.float32)
        j = RowJournal(journal_path(table), {"table": (table, mapped)}, {}, durable=False, append=k > 0)
        for lo in range(0, per_txn, block):
            j.append(rows[lo:lo + block], [vals[lo:lo + block, None]])
        j.commit()
        os.close(j.fd)  # killed after the commit, before any row was written
        want[rows] = vals
    del mapped
    assert os.path.getsize(journal_path(table)) > 100 << 20
    rss = peak_rss(["--memory", "64MiB", "apply", table, "--recover"], tmp_path)
    assert rss <= (64 << 20) + OVERHEAD, f"peak RSS {rss >> 20} MiB"
    assert not os.path.exists(journal_path(table))
    np.testing.assert_array_equal(np.load(table), want)


def test_a_table_replaced_between_two_applies_of_one_boot_starts_a_new_journal(tmp_path, monkeypatch):
    """Monday's apply keeps its journal; the user overwrites the table in place (same inode,
    same shape) in the same boot; Tuesday's apply does not add to Monday's journal (whose rows
    belong to the table replaced) but checkpoints it as the table stands and starts a new one:
    after a power loss that tears Tuesday's pages, the recovery replays Tuesday's update alone,
    onto the replaced table, to NumPy's result."""
    from sptool.rowsparse import journal as jr

    files, before, after, state, g2, tuesday = _monday(tmp_path)
    table, journal = files[0], str(tmp_path / ".t.npy.journal")
    inode = os.stat(table).st_ino
    replaced = np.random.default_rng(5).standard_normal((300, 64)).astype(np.float32)
    arrays = {"table": (table, np.load(table, mmap_mode="r")),
              **{n: (os.path.join(state, f"{n}.npy"), np.load(os.path.join(state, f"{n}.npy"), mmap_mode="r"))
                 for n in ("m", "v")}}
    assert jr.reusable(journal, arrays, {files[3]: ""}, 1 << 30)  # before: Tuesday would append
    np.save(table, replaced)
    assert os.stat(table).st_ino == inode
    assert not jr.reusable(journal, arrays, {files[3]: ""}, 1 << 30)
    moments = {n: np.load(os.path.join(state, f"{n}.npy")) for n in ("m", "v")}
    start = {f: open(f, "rb").read() for f in files}
    r = CliRunner().invoke(cli, ["apply", table, g2, "--optimizer", "adam", "--lr", "0.01", "--state", state])
    assert r.exit_code == 0 and "checkpointed the journal" in r.output, r.output
    assert _parse_journal(journal) == (1, [True], False)  # Tuesday's alone
    want, want_state = numpy_optimizer(replaced, [tuesday], "adam", 0.01, eps=1e-8, t0=2, state=moments)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))
    done = {f: open(f, "rb").read() for f in files}
    _another_boot(tmp_path, monkeypatch)
    for f in files[:3]:  # every other page still as it was before Tuesday's apply
        old, new = np.frombuffer(start[f], np.uint8), np.frombuffer(done[f], np.uint8)
        page = np.arange(len(new)) // 4096
        with open(f, "r+b") as out:
            out.write(np.where(page % 2 == 0, old, new).tobytes())
    r = CliRunner().invoke(cli, ["apply", table, "--recover"])
    assert r.exit_code == 0 and "finished an interrupted apply" in r.output, r.output
    for f in files[:3]:
        assert open(f, "rb").read() == done[f], f
    np.testing.assert_allclose(np.load(os.path.join(state, "m.npy")), want_state["m"], **tolerance(np.float32))


def test_a_state_removed_between_two_applies_starts_afresh(tmp_path):
    """The user resets the optimizer by removing --state between two applies of one boot: the
    journal (over the old state's arrays) is checkpointed, the state created anew."""
    rng = np.random.default_rng(17)
    p0 = rng.standard_normal((50, 4)).astype(np.float32)
    table, state = str(tmp_path / "t.npy"), str(tmp_path / "st")
    np.save(table, p0)
    g1, g2 = (gradient(rng, 50, (4,), 30, np.float32) for _ in range(2))
    sptool.apply(table, [write_gradient(tmp_path / "g1.parquet", *g1, 50)], optimizer="adam", lr=0.01, state=state)
    mid = np.load(table)
    shutil.rmtree(state)
    r = sptool.apply(table, [write_gradient(tmp_path / "g2.parquet", *g2, 50)], optimizer="adam", lr=0.01,
                     state=state)
    assert r["recovered"] == 0 and r["step"] == 1
    want, _ = numpy_optimizer(mid, [g2], "adam", 0.01, eps=1e-8)
    np.testing.assert_allclose(np.load(table), want, **tolerance(np.float32))


def _signalled_apply(tmp_path, phase, signum):
    paths, state, old, new = _crash_setup(tmp_path, "adam")
    table = tmp_path / "t.npy"
    sptool.apply(str(table), recover=True)
    before = digest(table)
    env = {**env_with_sptool(), "SPTOOL_BATCH_ROWS": "16", "SPTOOL_APPLY_PAUSE": f"{phase}=1"}
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "sptool"), "apply", str(table), *paths,
                             "--optimizer", "adam", "--lr", "0.01", "--state", state], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stderr.readline().decode()
    assert line == f"paused at {phase}\n", line
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode(), state, old, new, before


# Ctrl-C or SIGTERM once the commit record is written (at the commit, and while the rows are
# written into the table): the update is finished, and the command says so with 130 / 143.
@pytest.mark.parametrize("phase, signum", [("committed", signal.SIGINT), ("committed", signal.SIGTERM),
                                           ("written", signal.SIGINT)])
def test_a_signal_after_the_commit_finishes_the_update_and_says_so(tmp_path, phase, signum):
    code, err, state, old, new, _ = _signalled_apply(tmp_path, phase, signum)
    assert code == 128 + signum, err
    name = signal.Signals(signum).name
    assert f"{name} arrived after the update was committed: it was applied in full first" in err, err
    assert "step 3" in err and "Traceback" not in err
    assert _outcome(tmp_path, state, "adam", old, new) == "new"
    assert _parse_journal(tmp_path / ".t.npy.journal") == (1, [True], False)  # kept, as after any durable apply


def test_a_signal_before_the_commit_still_aborts_with_nothing_written(tmp_path):
    code, err, state, old, new, before = _signalled_apply(tmp_path, "journaled", signal.SIGINT)
    assert code == 130 and "interrupted; no output was written" in err, err
    assert digest(tmp_path / "t.npy") == before and not (tmp_path / ".t.npy.journal").exists()
    assert _outcome(tmp_path, state, "adam", old, new) == "old"


def test_a_signal_after_the_commit_in_a_terminal(tmp_path):
    """SIGTERM while paused after the commit record, in a terminal: the bar goes, the cursor
    comes back, and the one line says the update was applied; exit 143."""
    rng = np.random.default_rng(14)
    p0 = rng.standard_normal((300, 8)).astype(np.float32)
    np.save(tmp_path / "t.npy", p0)
    rows, vals = gradient(rng, 300, (8,), 200, np.float32)
    write_gradient(tmp_path / "g.parquet", rows, vals, 300)
    script = ("SPTOOL_BATCH_ROWS=20 SPTOOL_APPLY_PAUSE=committed=5 sptool apply t.npy g.parquet --lr 0.1 & pid=$!; "
              "until grep -qa CMT3 .t.npy.journal 2>/dev/null; do sleep 0.05; done; "
              "kill -TERM $pid; wait $pid; echo exit=$?")
    code, output = run_in_terminal(["bash", "-c", script], cwd=tmp_path)
    text = output.decode("utf-8", "replace")
    assert code == 0 and "exit=143" in text, text
    assert "SIGTERM arrived after the update was committed: it was applied in full first" in text, text
    assert cursor_restored(output), text
    want, _ = numpy_optimizer(p0, [(rows, vals)], "sgd", 0.1)
    np.testing.assert_allclose(np.load(tmp_path / "t.npy"), want, **tolerance(np.float32))
