"""The optimizer steps of a row-sparse apply: each gradient's rows summed per row id first
(sorted_batches with duplicates="sum", the engine's MergeAdd); the gradients merged side by side
over ranges of row ids; each range's rows gathered from the table and state, updated by the
compiled kernel (sptool/_optim.pyx) in a buffer, and appended, new, to the redo journal
(journal.py).  The transaction commits by a commit record that vouches for the blocks and one sync
of the journal; only then are the rows written into the table and state, without waiting for their
writeback (SIGINT and SIGTERM held meanwhile).  Applies accumulate in the journal until one finds it
past the journal limit (or older than the OS's writeback delay, or the table changed since) and
checkpoints it first: fdatasync of the table and state, the rows written again first if the system
crashed since; ``recover`` checkpoints it at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import signal
import sys
import time

import numpy as np
import pyarrow as pa

from .. import _optim
from .._commits import committed
from ..errors import DataError, InputError, Interrupted, ShapeMismatch, UsageError
from ..io import batch_keys, batch_values, open_input, open_npy, release, sibling_name
from ..stream.order import sorted_batches
from .journal import (
    FAULT_AROUND,
    RELEASE,
    HeldSignals,
    RowJournal,
    Workers,
    applied_here,
    as_rows,
    gather,
    journal_path,
    recover_journal,
    reusable,
    write_durably,
)

OPTIMIZERS = ("sgd", "adagrad", "adam")
STATE_ARRAYS = {"sgd": (), "adagrad": ("accumulator",), "adam": ("m", "v")}
DEFAULT_EPS = {"adagrad": 1e-7, "adam": 1e-8}
STATE_FORMAT = "sptool.apply-state"
STATE_FILE = "state.json"
# Seconds to sleep at each step of a transaction (after each journal block, after the last one
# before the commit record, after the commit record, after each block written into the table):
# a test hook, so that the crash tests can kill a process at every step of a small job.
PAUSE_ENV = "SPTOOL_APPLY_PAUSE"
WORK_BYTES = 8 << 20  # the most the update's blocks hold at once (rows, copies, pages written through the maps)
GRADIENT_BUDGET = 128 << 20
GRADIENT_MIN = 32 << 20  # the least a gradient's sort gets (at most half the budget above that)
# The journal's default bound: the larger of this and JOURNAL_SHARE of the table and state.
JOURNAL_MIN = 256 << 20
JOURNAL_SHARE = 1 / 8



def apply_steps(table: str, gradients: list, *, optimizer: str, lr, state, initial_accumulator: float, eps,
                beta1: float, beta2: float, recover: bool, fsync: bool, limit: int | None, tmp_dir, budget,
                progress) -> dict:
    """The optimizer's steps from ``gradients`` onto ``table``, in order, all or nothing (ops.apply
    says how), once the journal an earlier apply left is finished; with ``recover``, only that.
    Returns the op's summary dict."""
    with _locked(table), Workers(budget.workers) as workers:
        work = min(budget.usable // 4, WORK_BYTES)
        # A journal this boot wrote whole is kept for this apply to continue (or checkpoint,
        # once it knows the state): nothing to finish.
        kept = fsync and not recover and applied_here(journal_path(table))
        recovered = None if kept else recover_journal(journal_path(table), durable=fsync, budget_bytes=work,
                                                      pause=_pause, workers=workers)
        if recover:
            if gradients:
                raise UsageError("--recover only finishes or discards an interrupted apply; give no gradients with it")
            return {"table": table, "recovered": recovered, "rows": 0, "rows_in": 0, "step": None}
        if not gradients:
            raise UsageError("give one or more gradients to apply (or --recover)")
        params = _params(optimizer, lr, eps, beta1, beta2, initial_accumulator)
        arr = np.load(table, mmap_mode="r+")
        with contextlib.ExitStack() as stack:
            sources = [stack.enter_context(open_input(g)) for g in gradients]
            for g, src in zip(gradients, sources):
                _check_gradient(src.meta, arr, g if isinstance(g, str) else src.path)
            if progress:
                progress.set_total(sum(src.meta.nnz or 0 for src in sources) or None)
            st = _open_state(state, optimizer, table, arr, initial_accumulator)
            return _transaction(table, arr, sources, st, params, budget, tmp_dir, progress, recovered, fsync, limit,
                                workers)


def _params(optimizer, lr, eps, beta1, beta2, initial_accumulator) -> dict:
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, not {optimizer!r}")
    if lr is None:
        raise UsageError("--lr is required")
    eps = DEFAULT_EPS.get(optimizer) if eps is None else eps
    checks = {"--lr": lr, "--eps": eps, "--beta1": beta1, "--beta2": beta2,
              "--initial-accumulator": initial_accumulator}
    for name, value in checks.items():
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name} must be a finite number, not {value!r}")
    if not (0 <= beta1 < 1 and 0 <= beta2 < 1):
        raise UsageError(f"--beta1 and --beta2 must lie in [0, 1), not {beta1} and {beta2}")
    if eps is not None and eps < 0 or initial_accumulator < 0:
        raise UsageError("--eps and --initial-accumulator must be >= 0")
    return {"optimizer": optimizer, "lr": float(lr), "eps": eps, "beta1": beta1, "beta2": beta2}


class _locked:
    """An exclusive lock on the table for the whole command (a second apply on it is refused),
    after checking that it is a plain float32/float64 .npy."""

    def __init__(self, table: str):
        try:
            arr = open_npy(table)
        except InputError as e:
            if not os.path.exists(table):
                raise
            raise DataError(f"the table is not a plain .npy array: {e.message}", path=table) from None
        if arr.dtype not in (np.float32, np.float64) or not arr.dtype.isnative:
            raise DataError(f"the table must be float32 or float64 in native byte order, not {arr.dtype.str}",
                            path=table)
        if arr.ndim < 1 or (arr.ndim > 1 and not arr.flags.c_contiguous):
            raise DataError("the table must be a C-ordered array with at least one dimension", path=table)
        self.table = table

    def __enter__(self):
        self.fd = os.open(self.table, os.O_RDONLY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise UsageError("another sptool apply is updating this table", path=self.table) from None

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the lock
        return False


def _check_gradient(meta, arr: np.ndarray, where):
    rows_shape = list(arr.shape[1:])
    if meta.sparse_ndim != 1:
        raise ShapeMismatch(f"a gradient must be row-sparse (one sparse dimension), not {meta.sparse_ndim} of "
                            f"shape {list(meta.shape)}", path=where)
    if list(meta.dense_shape) != rows_shape:
        raise ShapeMismatch(f"the gradient's rows are {list(meta.dense_shape)} but the table's rows are "
                            f"{rows_shape}", path=where)
    if meta.shape[0] is not None and meta.shape[0] != arr.shape[0]:
        raise ShapeMismatch(f"the gradient's height {meta.shape[0]} is not the table's {arr.shape[0]} rows",
                            path=where)
    if meta.value_type in ("string", "binary") or not np.can_cast(meta.dtype, arr.dtype, "safe"):
        raise DataError(f"{meta.value_type} gradient values would lose precision in a {arr.dtype} table",
                        path=where)
    if meta.fill_value not in (0, False):
        raise DataError(f"the gradient's fill value is {meta.fill_value!r}: it would update every row; "
                        "a row-sparse gradient has fill value 0", path=where)


class _State:
    """The optimizer state: its arrays (name -> (path, memory map)), its JSON (with the step
    count) and the path of that JSON, or no directory at all (sgd without --state)."""

    def __init__(self, directory, doc, arrays):
        self.dir = directory
        self.doc = doc
        self.arrays = arrays

    @property
    def step(self) -> int:
        return self.doc["step"] if self.doc else 0

    def json_after(self, steps: int) -> str:
        return json.dumps({**self.doc, "step": self.doc["step"] + steps}, indent=1) + "\n"


def _open_state(directory, optimizer, table, arr, initial):
    names = STATE_ARRAYS[optimizer]
    if directory is None:
        if names:
            raise UsageError(f"--optimizer {optimizer} keeps state between steps; give --state DIR")
        return _State(None, None, {})
    directory = os.fspath(directory)
    doc_path = os.path.join(directory, STATE_FILE)
    ident = {"table": os.path.realpath(table), "shape": list(arr.shape), "dtype": arr.dtype.name}
    if not os.path.exists(doc_path):
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise UsageError("--state must be a directory", path=directory)
        os.makedirs(directory, exist_ok=True)
        for name in names:  # the arrays first: the JSON's presence says the state is whole
            _create_array(os.path.join(directory, f"{name}.npy"), arr, initial if name == "accumulator" else 0.0)
        doc = {"format": STATE_FORMAT, "version": 1, "optimizer": optimizer, **ident, "step": 0,
               "arrays": list(names)}
        if optimizer == "adagrad":
            doc["initial_accumulator"] = initial
        write_durably(doc_path, (json.dumps(doc, indent=1) + "\n").encode())
    try:
        with open(doc_path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read the state ({e})", path=doc_path) from None
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        raise DataError("not an sptool apply state", path=doc_path)
    if doc.get("optimizer") != optimizer:
        raise DataError(f"the state belongs to --optimizer {doc.get('optimizer')}, not {optimizer}", path=directory)
    for key, want in ident.items():
        if doc.get(key) != want:
            raise DataError(f"the state belongs to another table: its {key} is {doc.get(key)}, this table's is "
                            f"{want}", path=directory)
    arrays = {}
    for name in names:
        path = os.path.join(directory, f"{name}.npy")
        try:
            a = np.load(path, mmap_mode="r+")
        except (OSError, ValueError) as e:
            raise DataError(f"cannot open the state array ({e})", path=path) from None
        if a.shape != arr.shape or a.dtype != arr.dtype:
            raise DataError(f"the state array has shape {list(a.shape)} {a.dtype}, the table "
                            f"{list(arr.shape)} {arr.dtype}", path=path)
        arrays[name] = (path, a)
    return _State(directory, doc, arrays)


def _create_array(path: str, like: np.ndarray, value: float):
    """A new .npy of ``like``'s shape and type, every element ``value``, written whole before it
    takes its name."""
    tmp = sibling_name(path, "tmp")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=like.dtype, shape=like.shape)
    if value:
        flat = as_rows(out)
        step = max(1, (64 << 20) // max(flat.shape[1] * flat.dtype.itemsize, 1))
        for lo in range(0, flat.shape[0], step):
            flat[lo:lo + step] = value
            release(out)
    out.flush()
    del out
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _pause(where: str, before=None):
    """The test hook: SECONDS pauses at every step; STEP=SECONDS only at that step, saying so on
    stderr (so that a test kills the process exactly there), ``before()`` called first (the
    step's work finished, as the test expects it)."""
    delay = os.environ.get(PAUSE_ENV)
    if not delay:
        return
    if "=" in delay:
        at, _, delay = delay.partition("=")
        if at != where:
            return
        if before:
            before()
        sys.stderr.write(f"paused at {where}\n")
        sys.stderr.flush()
    elif before:
        before()
    time.sleep(float(delay))


def _transaction(table, arr, sources, st: _State, params, budget, tmp_dir, progress, recovered, durable,
                 limit, workers: Workers) -> dict:
    rows_of = as_rows(arr)
    arrays = {"table": (table, arr), **st.arrays}
    files = {os.path.join(st.dir, STATE_FILE): st.json_after(len(sources))} if st.dir else {}
    kernel = getattr(_optim, f"{params['optimizer']}_rows")
    maps = [rows_of, *(as_rows(a) for _, a in st.arrays.values())]
    m = rows_of.shape[1]
    width = m * arr.dtype.itemsize
    scalars = [_scalars(params, st.step + i + 1) for i in range(len(sources))]
    # The working set: larger blocks gain nothing measurable, and a budget of a GiB held 400 MiB
    # of rows and mapped pages at once (measured).
    work = min(budget.usable // 4, WORK_BYTES)
    # Rows are gathered from the maps by a compiled loop that gives their pages back as it passes
    # them (pread of row runs kept no pages but cost twice the CPU).  A chunk (its rows in each
    # array, in two sets: one being written to the journal; each gradient's rows) is computed and
    # journaled at a time, beside the pages each thread's copy holds (docs/performance.md, "apply").
    chunk = max(64, (work - workers.ways * (RELEASE + FAULT_AROUND)) // (8 + (2 * len(maps) + len(sources)) * width))
    # Each gradient is read and summed within its share of the budget, at most GRADIENT_BUDGET
    # (bigger batches gain little; a row group read whole held about 4 times its size) and within
    # half the budget (at --memory 64MiB a whole-budget sort share nearly doubled the peak RSS).
    share = budget.share(len(sources))
    share = share.with_total(min(share.total, GRADIENT_BUDGET, max(GRADIENT_MIN, budget.total // 2)))
    streams = [_summed(src, share, tmp_dir, progress, m, arr.dtype) for src in sources]
    path = journal_path(table)
    if limit is None:
        limit = max(JOURNAL_MIN, int(JOURNAL_SHARE * sum(a.nbytes for _, a in arrays.values())))
    append = durable and reusable(path, arrays, files, limit)
    if not append and os.path.exists(path):
        recovered = recover_journal(path, durable=durable, budget_bytes=work, workers=workers)  # the checkpoint
    # The blocks are written by a thread of their own while the next chunk is computed.
    journal = RowJournal(path, arrays, files, durable=durable, append=append, background=workers.pool is not None)
    held = HeldSignals()
    touched = 0
    # The chunks' rows, one buffer per map, reused (fresh pages cost a fault and zeroing each): two
    # sets, one being written to the journal while the other is computed.
    sets = [[], []]
    try:
        for k, (ids, parts) in enumerate(_merged(streams, chunk)):
            bufs = sets[k % 2]
            if not bufs or len(bufs[0]) < len(ids):
                bufs[:] = [np.empty((max(len(ids), chunk), m), arr.dtype) for _ in maps]
            rows = [b[:len(ids)] for b in bufs]
            # Runs of the chunk's rows side by side on the workers (each only reads the maps).
            olds = workers.map(functools.partial(_update, maps, ids, rows, parts, journal, kernel, scalars),
                               workers.cuts(len(ids)))
            old = [np.concatenate(c) if len(olds) > 1 else c[0] for c in zip(*olds)]
            touched += sum(len(pos) for pos, _ in parts)
            journal.append(ids, rows, old)
            _pause("appended", journal.wait)
        # From the commit record on, Ctrl-C and SIGTERM wait until the rows are written (memory
        # copies): the command then stops saying the update was applied, not that it failed.
        journal.commit(pause=_pause, before_record=held.hold)
    except BaseException:
        held.release()
        journal.discard()
        raise
    try:
        _pause("committed")
        # Committed: from here a crash is finished by the next apply (or --recover), not undone.
        journal.apply(work, pause=_pause, workers=workers)
    finally:
        held.release()
    committed(table)  # updated in place: a signal from here on must not be told "nothing written"
    if held.signum is not None:
        name = signal.Signals(held.signum).name
        raise Interrupted(f"{name} arrived after the update was committed: it was applied in full first "
                          f"({touched:,} rows{f', step {st.step + len(sources)}' if st.dir else ''}), then sptool "
                          "stopped", held.signum, path=table)
    return {"table": table, "optimizer": params["optimizer"], "gradients": len(sources), "rows": touched,
            "rows_in": sum(src.meta.nnz or 0 for src in sources), "step": st.step + len(sources) if st.dir else None,
            "state": st.dir, "recovered": recovered}


def _update(maps, ids, rows, parts, journal, kernel, scalars, run) -> list:
    """The rows ids[lo:hi] of a chunk (``run``): gathered from the maps into their places in
    ``rows``, their old contents' checksums taken (returned), then updated by the kernel from
    each gradient's rows there (``parts``)."""
    lo, hi = run
    sub = [r[lo:hi] for r in rows]
    gather(maps, ids[lo:hi], sub)
    old = journal.checksums(ids[lo:hi], sub)  # before the kernel overwrites them
    for (pos, grad), args in zip(parts, scalars):
        a, b = np.searchsorted(pos, (lo, hi))
        if b - a == hi - lo:
            # Every row of the run, in order: updated in place (the kernel reads each element
            # before it writes it).
            kernel(*sub, np.arange(hi - lo, dtype=np.int64), grad[a:b], *sub, *args)
        elif b > a:
            # The kernel updates sub[...][at] of the run, from their current contents.
            at = pos[a:b] - lo
            kernel(*sub, at, grad[a:b], *(r[at] for r in sub), *args)
    return old


def _summed(src, budget, tmp_dir, progress, m, dtype):
    """(row ids, their gradient rows (n, m) in ``dtype``) of a gradient, sorted, repeats summed."""
    for batch, _ in sorted_batches(src, (0,), budget=budget, tmp_dir=tmp_dir, progress=progress, duplicates="sum"):
        ids = np.ascontiguousarray(batch_keys(batch, 1)[0], dtype=np.int64)
        if len(ids):
            out = ids, np.ascontiguousarray(batch_values(batch, src.meta).reshape(len(ids), m), dtype=dtype)
            del batch
            # Arrow's allocator keeps what the reader's threads freed: given back before the
            # update's own buffers are taken (peak RSS 260 -> 226 MiB on the apply-adam
            # benchmark, no measurable time).
            pa.default_memory_pool().release_unused()
            yield out


def _merged(streams, chunk: int):
    """The gradients side by side over ranges of row ids: (the range's touched ids, sorted,
    and for each gradient in order (positions of its rows among those ids, its rows)), at most
    ``chunk`` rows of each gradient at a time.  A range ends at the smallest last id any
    gradient has pending, so no later batch holds a row of it."""
    pending = [next(s, None) for s in streams]
    empty = (np.empty(0, np.int64), None)
    while any(p is not None for p in pending):
        bound = min(p[0][min(chunk, len(p[0])) - 1] for p in pending if p is not None)
        takes = []
        for k, p in enumerate(pending):
            if p is None:
                takes.append(empty)
                continue
            cut = int(np.searchsorted(p[0], bound, side="right"))
            takes.append((p[0][:cut], p[1][:cut]))
            pending[k] = (p[0][cut:], p[1][cut:]) if cut < len(p[0]) else next(streams[k], None)
        if len(takes) == 1:
            ids = takes[0][0]
            yield ids, [(np.arange(len(ids), dtype=np.int64), takes[0][1])]
        else:
            ids = np.unique(np.concatenate([t[0] for t in takes]))
            yield ids, [(np.searchsorted(ids, t[0]).astype(np.int64), t[1]) for t in takes]


def _scalars(params: dict, t: int) -> tuple:
    """The kernel's scalar arguments at step ``t``."""
    lr = params["lr"]
    if params["optimizer"] == "sgd":
        return (lr,)
    if params["optimizer"] == "adagrad":
        return (lr, params["eps"])
    b1, b2 = params["beta1"], params["beta2"]
    step_size = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
    return (step_size, b1, b2, params["eps"])
