"""The CI slice of the mutation fuzzer (tests/fuzz.py): a fixed seed, a few dozen cases, zero
failures; and the fuzzer's classifier checked on runs whose verdict is known."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import fuzz


def test_classifier_flags_what_the_issue_lists():
    assert fuzz.classify(["info", "x"], 0, "") == []
    assert fuzz.classify(["info", "x"], 2, "Error: x: not a readable Parquet file\n") == []
    assert [c for c, _ in fuzz.classify(["info", "x"], -signal.SIGABRT, "terminate called")] == ["signal"]
    assert [c for c, _ in fuzz.classify(["info", "x"], -signal.SIGALRM, "")] == ["hang"]
    internal = "Error: internal error: KeyError: 'x' (run with --debug for a traceback)\n"
    assert [c for c, _ in fuzz.classify(["info", "x"], 3, internal)] == ["exit"]
    tb = "Traceback (most recent call last):\n  File ...\nValueError: x\n"
    assert [c for c, _ in fuzz.classify(["info", "x"], 1, tb)] == ["traceback", "message"]
    assert [c for c, _ in fuzz.classify(["info", "x"], 1, "Error: a\nError: b\n")] == ["message"]
    # validate reports on stdout: an empty stderr is its normal refusal.
    assert fuzz.classify(["validate", "x"], 1, "") == []


def test_leftovers_are_what_a_run_did_not_commit():
    left = {"out.parquet", ".out.parquet.tmp-1-2-abcdef12", ".fuzz-tmp/sptool-sort-1-2-x"}
    assert fuzz.leftovers(left, ["out.parquet"], 0) == {".out.parquet.tmp-1-2-abcdef12", ".fuzz-tmp/sptool-sort-1-2-x"}
    assert fuzz.leftovers({"out.parquet"}, ["out.parquet"], 1) == {"out.parquet"}
    assert fuzz.leftovers({"out-0.parquet", "out-1.parquet"}, ["out-{i}.parquet"], 0) == set()


def test_fuzz_slice(tmp_path):
    """Each input kind once.  The fuzzer forks a child per command: run from a fresh process, not
    from pytest's, whose other threads (the session's Dask client, a read winding down) could hold
    a lock at the fork that the child then waits on for ever."""
    res = subprocess.run([sys.executable, fuzz.__file__, "--seed", "20261124", "--cases", str(len(fuzz.KINDS)),
                          "--work", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["runs"] > 4 * len(fuzz.KINDS)
    assert report["failures"] == [], [(f["category"], f["command"], f["detail"][:300]) for f in report["failures"][:3]]
