"""Kill tests: real sptool processes stopped by SIGKILL, SIGINT and SIGTERM at several
moments of their work (a spill directory just made, a temporary output just made, a fixed delay).

After a catchable signal nothing is left behind at once.  After SIGKILL (which no process can
clean up after) the next run that writes to the same places removes the dead process's
temporaries and says so.  In every case the output path holds nothing or the complete result
(checked against NumPy), and the inputs are unchanged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from owners import dead_process, host_tag, start_ticks

import sptool

SPTOOL = [sys.executable, "-P", "-m", "sptool", "-q"]
# Small sorted runs, none kept in memory: the external sort spills from its first run.
SPILL_ENV = {"SPTOOL_RUN_ROWS": "20000", "SPTOOL_KEEP_BYTES": "0", "SPTOOL_BATCH_ROWS": "20000"}


def _files(folder) -> dict:
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(root, name)
            try:
                out[os.path.relpath(p, folder)] = os.path.getsize(p) if os.path.isfile(p) else None
            except FileNotFoundError:  # removed by the running command (a merged spill run) since the walk
                continue
    return out


def _digest(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kill-inputs")
    rng = np.random.default_rng(3)
    n = 300_000
    idx = np.stack([rng.integers(0, 400, n), rng.integers(0, 300, n), rng.integers(0, 50, n)], axis=1)
    idx = np.unique(idx, axis=0)
    rng.shuffle(idx)
    vals = rng.standard_normal(len(idx))
    t = sptool.SparseTensor(idx, vals, (400, 300, 50))
    sptool.write(t, str(folder / "big.parquet"))  # unsorted: reorder must sort it, spilling
    sptool.convert(str(folder / "big.parquet"), str(folder / "big.tns"))
    mat = np.unique(np.stack([rng.integers(0, 1500, 200_000), rng.integers(0, 1500, 200_000)], axis=1), axis=0)
    mvals = rng.standard_normal(len(mat))
    sptool.write(sptool.SparseTensor(mat, mvals, (1500, 1500)), str(folder / "mat.parquet"))
    dense = np.zeros((1500, 1500))
    dense[mat[:, 0], mat[:, 1]] = mvals
    return {"dir": folder, "idx": idx, "vals": vals, "dense": dense}


def _check_reorder(path, inputs):
    t = pq.read_table(str(path))
    got = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)], axis=1)
    order = np.lexsort((inputs["idx"][:, 0], inputs["idx"][:, 1], inputs["idx"][:, 2]))  # by axes 2, 1, 0
    assert np.array_equal(got, inputs["idx"][order])
    assert np.array_equal(t.column("values").to_numpy(), inputs["vals"][order])


def _check_convert(path, inputs):
    t = pq.read_table(str(path))
    got = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(3)], axis=1)
    assert np.array_equal(got, inputs["idx"]) and np.allclose(t.column("values").to_numpy(), inputs["vals"],
                                                              rtol=1e-15, atol=0)


def _check_todense(path, inputs):
    assert np.array_equal(np.load(str(path)), inputs["dense"])


def _entries(path, K=3):
    t = pq.read_table(str(path))
    return np.stack([t.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1), t.column("values").to_numpy()


def _check_reduce(path, inputs):
    """Sum over axis 2: NumPy's dense sums at the (i, j) that hold an entry, row-major."""
    idx, vals = inputs["idx"], inputs["vals"]
    dense = np.zeros((400, 300))
    np.add.at(dense, (idx[:, 0], idx[:, 1]), vals)
    kept = np.unique(idx[:, :2], axis=0)
    got, sums = _entries(path, 2)
    assert np.array_equal(got, kept)
    assert np.allclose(sums, dense[kept[:, 0], kept[:, 1]], rtol=1e-12, atol=1e-12)


def _check_add(path, inputs):
    """The tensor added to itself: every entry once, doubled, in row-major order."""
    order = np.lexsort(inputs["idx"].T[::-1])
    got, vals = _entries(path)
    assert np.array_equal(got, inputs["idx"][order])
    assert np.array_equal(vals, 2 * inputs["vals"][order])


def _check_split(folder, inputs):
    """Each piece present: the rows of its quarter of axis 0 (100 each), rebased, in input order."""
    for i in range(4):
        piece = folder / f"p-{i}.parquet"
        if not piece.exists():
            continue
        rows = (inputs["idx"][:, 0] >= 100 * i) & (inputs["idx"][:, 0] < 100 * (i + 1))
        got, vals = _entries(piece)
        assert np.array_equal(got, inputs["idx"][rows] - [100 * i, 0, 0])
        assert np.array_equal(vals, inputs["vals"][rows])


COMMANDS = {
    "reorder": (["reorder", "IN/big.parquet", "--perm", "2,1,0", "-o", "out.parquet", "--tmp-dir", "spill"],
                "out.parquet", _check_reorder),
    "convert": (["convert", "IN/big.tns", "-o", "out.parquet", "--shape", "400,300,50"], "out.parquet",
                _check_convert),
    "todense": (["todense", "IN/mat.parquet", "-o", "out.npy"], "out.npy", _check_todense),
    # 16 MiB: the (i, j) accumulators would not fit, so the rows are sorted by (i, j), spilling.
    "reduce": (["reduce", "IN/big.parquet", "--op", "sum", "--axis", "2", "-o", "out.parquet", "--tmp-dir",
                "spill", "--memory", "16MiB"], "out.parquet", _check_reduce),
    "add": (["add", "IN/big.parquet", "IN/big.parquet", "-o", "out.parquet", "--tmp-dir", "spill"], "out.parquet",
            _check_add),
    "split": (["split", "IN/big.parquet", "--axis", "0", "-n", "4", "-o", "p-{i}.parquet"],
              tuple(f"p-{i}.parquet" for i in range(4)), None),
}
# Commands run over a previous output, which must stay whole until the new one replaces it.
PREVIOUS = {"reduce", "add"}


def _start(cwd, argv, indir):
    env = {**os.environ, **SPILL_ENV, "TMPDIR": str(cwd / "spill"), "PYTHONFAULTHANDLER": "1"}
    args = [str(indir) + a[2:] if a.startswith("IN/") else a for a in argv]
    return subprocess.Popen(SPTOOL + args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _in_command(pid: int) -> bool:
    """Whether the command line's own signal handling is in place (it catches SIGTERM from then
    on): a signal before that lands in the interpreter's start-up, which no program controls."""
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _wait_for(proc, cwd, moment: str, timeout=120):
    """Return once ``moment`` has come: a spill directory or a temporary output exists, or a delay
    has passed since the command began; False if the process ended first."""
    start = time.monotonic()
    began = None
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            return False
        if began is None and _in_command(proc.pid):
            began = time.monotonic()
        names = set(_files(cwd))
        if moment == "spill" and any(n.startswith("spill/sptool-") for n in names):
            return True
        if moment == "temporary" and any(n.startswith((".out.", ".p-")) for n in names):
            return True
        if moment.startswith("delay") and began is not None and time.monotonic() - began >= float(moment[5:]):
            return True
        time.sleep(0.005)
    raise AssertionError(f"{moment} never came")


# Which of the outcomes a run of the test below covered, shown in pytest's summary (conftest.py):
# a signal races the command, so the paths a run reaches vary from machine to machine.
KILL_PATH = "kill path"


def _path_covered(reached: bool, code: int, err: str) -> str:
    if not reached or code == 0:
        return "finished before the signal"
    if code < 0:
        return "killed"
    if "interrupted; no output was written" in err:
        return "interrupted before the commit"
    return "interrupted after the commit"


MOMENTS = {"reorder": ["spill", "temporary", "delay0.3"], "convert": ["temporary", "delay0.6"],
           "todense": ["temporary", "delay0.1"], "reduce": ["spill", "temporary"], "add": ["spill", "delay0.8"],
           "split": ["temporary", "delay0.4"]}
CASES = [(c, m) for c in COMMANDS for m in MOMENTS[c]]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=["KILL", "INT", "TERM"])
@pytest.mark.parametrize(("command", "moment"), CASES, ids=[f"{c}-{m}" for c, m in CASES])
def test_killed_at_a_moment_then_run_again(tmp_path, inputs, command, moment, sig, record_property):
    argv, out, check = COMMANDS[command]
    outs = out if isinstance(out, tuple) else (out,)
    if check is None:  # several outputs: each one absent or whole
        check, out = (lambda _, inputs: _check_split(tmp_path, inputs)), outs[0]
    (tmp_path / "spill").mkdir()
    previous = b"PAR1 the previous output PAR1"
    if command in PREVIOUS:
        (tmp_path / out).write_bytes(previous)
    before = {p: _digest(inputs["dir"] / p) for p in ("big.parquet", "big.tns", "mat.parquet")}
    proc = _start(tmp_path, argv, inputs["dir"])
    reached = _wait_for(proc, tmp_path, moment)
    if reached:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    err = err.decode()
    left = _files(tmp_path)
    kept_previous = command in PREVIOUS and _digest(tmp_path / out) == previous
    if any((tmp_path / o).exists() for o in outs) and not kept_previous:  # finished before the signal landed
        check(tmp_path / out, inputs)
    record_property(KILL_PATH, _path_covered(reached, proc.returncode, err))
    if sig != signal.SIGKILL:
        assert "Traceback" not in err, err
        if proc.returncode != 0 and "interrupted; no output was written" in err:
            assert proc.returncode == 130, (proc.returncode, err)
            # nothing left, not even for the next run to sweep; a previous output untouched
            assert left == {"spill": None, **({out: len(previous)} if command in PREVIOUS else {})}, left
            assert command not in PREVIOUS or kept_previous
        elif proc.returncode != 0:
            # The signal landed after an output's commit: what is named is there, and whole
            # (checked above); nothing else is.
            assert proc.returncode == 130, (proc.returncode, err)
            named = err.strip().splitlines()[-1].removeprefix("sptool: interrupted after writing ")
            named = named.removesuffix(" (complete); nothing else was written").split(", ")
            assert named and set(named) <= set(outs) and all((tmp_path / n).exists() for n in named), err
            assert all(n == "spill" or n in named for n in left), (left, named)
    else:
        # 0: it finished between the last look and the signal (its output is checked above)
        assert proc.returncode in (0, -signal.SIGKILL) or not reached
    stale = {n for n in left if n != "spill" and n not in outs and "/" not in n[len("spill/"):]}
    # The next run, writing to the same places, sweeps the dead process's temporaries and says so.
    again = _start(tmp_path, argv, inputs["dir"])
    _, err2 = again.communicate(timeout=600)
    err2 = err2.decode()
    assert again.returncode == 0, err2
    for name in stale:
        assert f"removed {tmp_path / name}, left by an sptool process that is no longer running" in err2, (name, err2)
    assert set(_files(tmp_path)) - {"spill"} == set(outs), _files(tmp_path)
    check(tmp_path / out, inputs)
    assert {p: _digest(inputs["dir"] / p) for p in before} == before


def test_a_live_process_temporaries_are_not_swept(tmp_path, inputs):
    """A second run beside a running one leaves the running one's temporaries alone (its PID is
    alive), and both finish with the complete result."""
    argv, out, check = COMMANDS["reorder"]
    (tmp_path / "spill").mkdir()
    first = _start(tmp_path, argv, inputs["dir"])
    assert _wait_for(first, tmp_path, "spill")
    second = _start(tmp_path, [a if a != "out.parquet" else "second.parquet" for a in argv], inputs["dir"])
    _, err2 = second.communicate(timeout=600)
    _, err1 = first.communicate(timeout=600)
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert b"removed" not in err2
    check(tmp_path / out, inputs)
    check(tmp_path / "second.parquet", inputs)
    assert set(_files(tmp_path)) == {"spill", out, "second.parquet"}


def test_the_sweep_keeps_what_it_does_not_own(tmp_path):
    """Only names sptool makes, of a process that is gone, are removed: a live PID's, a foreign
    file that looks alike, and a hidden file of the user's stay."""
    from sptool.io import sibling_name, sweep

    pid, start = dead_process()
    mine = sibling_name(str(tmp_path / "x.parquet"), "tmp")
    keep = [os.path.basename(mine), ".x.parquet.tmp-notapid", ".bashrc", "sptool-sort-notes.txt"]
    for name in keep:
        (tmp_path / name).write_text("keep")
    gone = [f".x.parquet.tmp-{host_tag()}-{pid}-{start}-0123abcd", f"sptool-sort-{host_tag()}-{pid}-{start}-abc_123"]
    (tmp_path / gone[0]).write_text("stale")
    (tmp_path / gone[1]).mkdir()
    (tmp_path / gone[1] / "run-000000.arrow").write_text("stale")
    assert sorted(sweep(str(tmp_path))) == sorted(gone)
    assert sorted(os.listdir(tmp_path)) == sorted(keep)


def test_a_second_interrupt_during_cleanup_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C while todense writes, and a second one landing inside the output's own cleanup
    (before it removed its temporary): the command line aborts what is still open."""
    from click.testing import CliRunner

    import sptool
    from sptool.cli import cli
    from sptool.io import AtomicTarget, DenseSink

    t = sptool.SparseTensor([[0, 1], [2, 0]], [1.0, 4.0], (3, 2))
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    before = sorted(os.listdir(tmp_path))

    def interrupted(self, *a):
        raise KeyboardInterrupt

    real_abort, calls = AtomicTarget.abort, []

    def abort_cut_short(self):
        calls.append(self.tmp)
        if len(calls) == 1:
            assert os.path.exists(self.tmp)  # the temporary exists when the cleanup is cut short
            raise KeyboardInterrupt
        real_abort(self)

    # A Ctrl-C at one exact instruction, twice: a signal from outside lands there only by chance.
    monkeypatch.setattr(DenseSink, "write", interrupted)
    monkeypatch.setattr(AtomicTarget, "abort", abort_cut_short)
    r = CliRunner().invoke(cli, ["todense", src, "-o", str(tmp_path / "out.npy")])
    assert r.exit_code == 130 and "interrupted; no output was written" in r.output
    assert len(calls) == 2 and sorted(os.listdir(tmp_path)) == before


def test_an_interrupt_while_the_output_closes_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C landing while a Parquet output is being closed (its last row groups drained, its
    footer written): the output aborts instead of staying half-written beside the target."""
    from click.testing import CliRunner

    import sptool
    from sptool.cli import cli
    from sptool.io import sink as sinks

    t = sptool.SparseTensor([[2, 1], [0, 0], [1, 1]], [1.0, 4.0, 2.0], (3, 2))
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    before = sorted(os.listdir(tmp_path))

    def interrupted(self):
        raise KeyboardInterrupt

    # A Ctrl-C inside the close, which lasts microseconds: a signal from outside lands there by chance.
    monkeypatch.setattr(sinks.TensorSink, "_drain", interrupted)
    r = CliRunner().invoke(cli, ["reorder", src, "-o", str(tmp_path / "out.parquet")])
    assert r.exit_code == 130 and "interrupted; no output was written" in r.output
    assert sorted(os.listdir(tmp_path)) == before
    with pytest.raises(KeyboardInterrupt):  # the API too, where no command line cleans up after it
        sptool.reorder(src, str(tmp_path / "out.parquet"))
    assert sorted(os.listdir(tmp_path)) == before


def test_an_error_raised_while_an_interrupt_unwinds_is_reported_as_the_interrupt(tmp_path, monkeypatch):
    """Ctrl-C cutting a cleanup short (a lock released in a ``finally`` it never took: "release
    unlocked lock", seen in a whole-suite run of reduce) ends the command as interrupted, exit 130,
    nothing left; not as an internal error."""
    from click.testing import CliRunner

    import sptool
    from sptool.cli import cli
    from sptool.io import sink as sinks

    t = sptool.SparseTensor([[2, 1], [0, 0], [1, 1]], [1.0, 4.0, 2.0], (3, 2))
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    before = sorted(os.listdir(tmp_path))

    def interrupted_cleanup(self):
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("release unlocked lock")

    # An error raised by a cleanup an interrupt cut short: no input makes one.
    monkeypatch.setattr(sinks.TensorSink, "_drain", interrupted_cleanup)
    r = CliRunner().invoke(cli, ["reorder", src, "-o", str(tmp_path / "out.parquet")])
    assert r.exit_code == 130 and "interrupted; no output was written" in r.output, r.output
    assert "internal error" not in r.output and sorted(os.listdir(tmp_path)) == before


def test_an_interrupt_with_two_sorts_suspended_leaves_no_spill(tmp_path, inputs, record_property):
    """Ctrl-C once both of add's operands have spilled sorted runs, their sorts suspended in their
    generators (which nothing resumes; the process ends with os._exit, so no finalizer runs): the
    command line removes both scratch directories on its way out."""
    argv, out, check = COMMANDS["add"]
    spill = tmp_path / "spill"
    spill.mkdir()
    rows = pq.ParquetFile(inputs["dir"] / "big.parquet").metadata.num_rows
    runs = -(-rows // int(SPILL_ENV["SPTOOL_RUN_ROWS"]))
    proc = _start(tmp_path, argv, inputs["dir"])
    start = time.monotonic()

    def spilled() -> list[int]:
        """Run files of each sort so far: a sort that has spilled all of them is merging, its
        generator suspended between the join's requests."""
        try:
            sorts = [spill / n for n in os.listdir(spill) if n.startswith("sptool-sort-")]
            return [sum(f.startswith("run-") for f in os.listdir(d)) for d in sorts]
        except FileNotFoundError:  # a sort's directory went as it was listed
            return []

    reached = False
    while not reached and proc.poll() is None and time.monotonic() - start < 120:
        counts = spilled()
        reached = len(counts) == 2 and min(counts) >= runs
        time.sleep(0.005)
    assert reached, "add's two sorts were never seen both merging"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    err = err.decode()
    record_property(KILL_PATH, _path_covered(reached, proc.returncode, err))
    assert "Traceback" not in err and os.listdir(tmp_path / "spill") == [], (err, os.listdir(tmp_path / "spill"))
    if proc.returncode == 0:  # finished before the signal landed
        check(tmp_path / out, inputs)
    else:
        assert proc.returncode == 130 and "interrupted; no output was written" in err, err
        assert not (tmp_path / out).exists()


def test_a_spill_thread_still_writing_is_stopped_before_its_directory_goes(tmp_path, monkeypatch):
    """An interrupted command's cleanup removes a suspended sort's directory: a run the spill
    thread is still writing must be finished (or never begun) first, or the thread adds a file
    while the directory is being removed and the directory stays (seen as a leftover spill file
    after SIGTERM in reduce)."""
    import threading

    from sptool.io import remove_live_scratch
    from sptool.stream import sort as sorting

    writing, done = threading.Event(), []

    def slow_write(path, table):
        writing.set()
        time.sleep(0.3)  # still writing when the cleanup comes
        with open(path, "wb") as f:
            f.write(b"run")
        done.append(path)

    # A spill write still under way when the cleanup comes: held open, or the race goes either way.
    monkeypatch.setattr(sorting, "_write_ipc", slow_write)
    spill = tmp_path / "spill"
    spill.mkdir()
    store = sorting.RunStore(str(spill), keep=0)
    idx = np.array([[3, 1], [0, 2], [1, 0]])
    table = pa.table({"indices_0": idx[:, 0], "indices_1": idx[:, 1], "values": [1.0, 2.0, 3.0]})
    store.add_run(table, sorting.KeyCodec((4, 4), (0, 1)), 2)
    assert writing.wait(10)
    remove_live_scratch()  # the store is never closed: as when its generator is never resumed
    assert done and not any(t.name.startswith("sptool-spill") and t.is_alive() for t in threading.enumerate())
    assert os.listdir(spill) == []


def test_a_scratch_directory_made_as_the_signal_lands_is_removed(tmp_path, monkeypatch):
    """SIGTERM just after mkdtemp made a sort's directory, before it was registered (the kill
    test's "spill" moment sends the signal as soon as the directory appears): the cleanup finds
    it by its owner's name and removes it; another process's directory there is left alone."""
    import tempfile as tf

    from sptool.io import _scratch, remove_live_scratch

    spill = tmp_path / "spill"
    spill.mkdir()
    parent = os.getppid()
    other = spill / f"sptool-sort-{host_tag()}-{parent}-{start_ticks(parent)}-abc"  # a live process's, not ours
    other.mkdir()

    real = tf.TemporaryDirectory

    def made_then_interrupted(*args, **kwargs):
        made = real(*args, **kwargs)
        made._finalizer.detach()  # made, then the signal: nothing holds it
        raise KeyboardInterrupt

    # The signal between mkdtemp and the registration, a window of microseconds: made to land there.
    monkeypatch.setattr(_scratch.tempfile, "TemporaryDirectory", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        _scratch.scratch_dir("sort", str(spill))
    assert len(os.listdir(spill)) == 2
    remove_live_scratch()
    assert os.listdir(spill) == [other.name]


# -- a signal after the work is done -------------------------------------------------------------

INTERRUPTED = """
import os, signal, sys
import click
import numpy as np
import sptool
from sptool.cli import _console, main

def signalled_before(owner, name, when=lambda *a: True):
    # owner.name, with a SIGINT sent to this process first (as a Ctrl-C landing just then)
    original = getattr(owner, name)
    def wrapped(*a, **k):
        if when(*a):
            os.kill(os.getpid(), signal.SIGINT)
        return original(*a, **k)
    setattr(owner, name, wrapped)

case, argv = sys.argv[1], sys.argv[2:]
if not argv:
    rng = np.random.default_rng(0)
    idx = np.unique(rng.integers(0, 200, (3000, 2)), axis=0)
    sptool.write(sptool.SparseTensor(idx, rng.standard_normal(len(idx)), (200, 200)), "a.parquet")
if case == "summary":  # in the command, its output committed: as the summary line is printed
    signalled_before(_console.Job, "summary")
elif case == "close":  # after the command, as click closes the command line's context
    signalled_before(click.Context, "close", when=lambda ctx: ctx.parent is None)
elif case == "split":  # Ctrl-C between two pieces' commits: split removes the first again (all or none)
    from sptool.io import sink
    commits = []
    signalled_before(sink.TensorSink, "commit", when=lambda sink: commits.append(sink) or len(commits) == 2)
    argv = ["split", "a.parquet", "--axis", "0", "-n", "4", "-o", "p-{i}.parquet"]
elif case == "convert":  # Ctrl-C as the dense output is written, after convert's spool was committed
    sptool.convert("a.parquet", "a.tns")
    import sptool.ops.convert as convert
    signalled_before(convert, "write_dense")
    argv = ["convert", "a.tns", "-o", "out.npy"]
elif case == "apply":  # Ctrl-C after the table was updated in place, as the summary is printed
    np.save("table.npy", np.zeros((200, 4), np.float32))
    sptool.write(sptool.SparseTensor(np.array([[3], [7]]), np.ones((2, 4), np.float32), (200, 4)), "g.parquet")
    signalled_before(_console.Job, "summary")
    argv = ["apply", "table.npy", "g.parquet", "--optimizer", "sgd", "--lr", "0.5"]
else:  # a second Ctrl-C during the first one's cleanup
    import sptool.io as io
    from sptool.io import sink
    signalled_before(sink.TensorSink, "write_batch")
    signalled_before(io, "abort_live_targets")
    argv = ["reorder", "a.parquet", "--perm", "1,0", "-o", "out.parquet"]
sys.argv = ["sptool", "-q", *argv]
main()
"""


def _interrupted(tmp_path, case, *argv, env=None):
    return subprocess.run([sys.executable, "-P", "-c", INTERRUPTED, case, *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.mark.parametrize("when", ["summary", "close"])
def test_a_signal_after_the_commit_says_what_was_written(tmp_path, inputs, when):
    """Ctrl-C between the output's commit and the exit: inside the command it is an interruption
    that names the output, whole (not "no output was written"); once the command has returned it
    changes nothing (not click's "Aborted!", exit 1, after a command that succeeded)."""
    argv, out, check = COMMANDS["reorder"]
    (tmp_path / "spill").mkdir()
    args = [str(inputs["dir"]) + a[2:] if a.startswith("IN/") else a for a in argv]
    res = _interrupted(tmp_path, when, *args, env={**os.environ, **SPILL_ENV, "TMPDIR": str(tmp_path / "spill")})
    assert "Traceback" not in res.stderr and "Aborted" not in res.stderr, res.stderr
    if when == "summary":
        assert res.returncode == 130, res.stderr
        assert res.stderr.strip().splitlines()[-1] == \
            "sptool: interrupted after writing out.parquet (complete); nothing else was written", res.stderr
    else:
        assert res.returncode == 0, res.stderr
    check(tmp_path / out, inputs)
    assert _files(tmp_path) == {"spill": None, out: os.path.getsize(tmp_path / out)}


@pytest.mark.parametrize("case", ["split", "convert", "apply", "twice"])
def test_an_interruption_names_only_what_is_there(tmp_path, case):
    """What an interrupted command says it wrote is what the directory holds once it has exited:
    not split's first piece, removed again; not convert's spool; the table apply updated in place;
    and a second Ctrl-C during the cleanup still gives the interruption (130), not click's
    "Aborted!"."""
    res = _interrupted(tmp_path, case)
    assert res.returncode == 130 and "Traceback" not in res.stderr and "Aborted" not in res.stderr, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    inputs = {"a.parquet"} | ({"a.tns"} if case == "convert" else set()) | \
        ({"table.npy", "g.parquet", ".table.npy.journal"} if case == "apply" else set())  # applies accumulate there
    if case == "apply":
        assert last == "sptool: interrupted after writing table.npy (complete); nothing else was written", last
        want = np.zeros((200, 4), np.float32)
        want[[3, 7]] -= 0.5  # SGD, lr 0.5, gradient 1 in rows 3 and 7
        assert np.array_equal(np.load(tmp_path / "table.npy"), want)
    else:
        assert last == "sptool: interrupted; no output was written", last
    assert set(os.listdir(tmp_path)) == inputs
