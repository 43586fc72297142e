"""The ``sptool`` script loads its modules with Python's cyclic collector paused and then frozen;
the Python API's callers keep their collector as they set it.  The oracle is the interpreter's
own account: gc.callbacks (one call per collection) and gc.get_freeze_count().  Each case runs in
a subprocess, since freezing would change the test process's own collector."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample_data", "tensor3d.parquet")

# Runs the script's entry point on `sptool info SAMPLE`; reports, where the script leaves the
# process (os._exit), the collections run, the frozen objects and whether the collector is on.
SCRIPT_RUN = """
import gc, json, os, sys
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
if sys.argv[1] == "control":
    import sptool._collector
    sptool._collector.script_process = lambda: None
real_exit = os._exit
def leave(code):
    sys.stdout.flush()
    sys.stderr.write(json.dumps({"code": code, "collections": len(collections), "frozen": gc.get_freeze_count(),
                                 "enabled": gc.isenabled()}) + "\\n")
    real_exit(code)
os._exit = leave
import sptool.__main__
sys.argv = ["sptool", "info", sys.argv[2]]
sptool.__main__.run()
"""


def _run(code: str, *args, tmp_path) -> dict:
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p, json.loads(p.stderr.strip().splitlines()[-1])


def test_the_script_freezes_what_it_loads(tmp_path):
    script_p, script = _run(SCRIPT_RUN, "script", SAMPLE, tmp_path=tmp_path)
    control_p, control = _run(SCRIPT_RUN, "control", SAMPLE, tmp_path=tmp_path)
    assert script["code"] == control["code"] == 0
    assert script_p.stdout == control_p.stdout and "tensor3d" in script_p.stdout  # the same report
    assert script["enabled"] and control["enabled"]  # the command itself runs with the collector on
    assert control["frozen"] == 0 and script["frozen"] > 10_000
    assert control["collections"] > script["collections"] + 20, (script, control)


DISTRIBUTED_IMPORT = """
import gc, json, sys
import sptool._collector
if sys.argv[1] == "script":
    sptool._collector.script_process()
from sptool.distributed.cluster import require_distributed
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
require_distributed()
sys.stderr.write(json.dumps({"collections": len(collections), "frozen": gc.get_freeze_count(),
                             "enabled": gc.isenabled()}) + "\\n")
"""


def test_importing_distributed_in_the_script_and_in_a_callers_process(tmp_path):
    pytest.importorskip("distributed")
    _, script = _run(DISTRIBUTED_IMPORT, "script", tmp_path=tmp_path)
    _, caller = _run(DISTRIBUTED_IMPORT, "caller", tmp_path=tmp_path)
    assert script["enabled"] and caller["enabled"]
    assert script["collections"] <= 1 and script["frozen"] > 10_000, script
    # A caller's process is left as it was: its collector runs through the import, nothing frozen.
    assert caller["collections"] > 20 and caller["frozen"] == 0, caller


CALLER_OFF = """
import gc, json, sys
import sptool._collector
sptool._collector.script_process()
gc.disable()
with sptool._collector.paused_for_imports():
    import decimal
sys.stderr.write(json.dumps({"frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}) + "\\n")
"""


def test_a_collector_turned_off_stays_off(tmp_path):
    _, r = _run(CALLER_OFF, tmp_path=tmp_path)
    assert r == {"frozen": 0, "enabled": False}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two cores")
def test_threads_follow_the_cores_the_process_may_use():
    """A process pinned to one core (taskset, a container's cpuset, a pinned Dask worker) runs
    one thread per parallel step: the affinity the kernel reports, not the machine's cores."""
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
           "from sptool._threads import THREADS; print(THREADS, len(os.sched_getaffinity(0)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "1"]
