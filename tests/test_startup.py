"""``import sptool`` and the Python API leave the host process as it was: no garbage-collector
callback, freeze or switch, no import hook.  The ``sptool`` script sets up only its own process.
Each case runs in a fresh subprocess, as a user's program would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "sample_data", "unsorted.parquet")

# A user's program: what it can see of its own process before and after using sptool (the API,
# whose ops start thread pools, then the command line in-process through click's CliRunner).
HOST = """
import gc, json, sys

def state():
    return {"callbacks": len(gc.callbacks), "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
            "meta_path": [repr(f) for f in sys.meta_path]}

seen = {"before": state()}
import sptool
seen["import"] = state()
sptool.reorder(sys.argv[1], "api.parquet")
sptool.info("api.parquet")
seen["api"] = state()
from click.testing import CliRunner
from sptool.cli import cli
result = CliRunner().invoke(cli, ["reorder", sys.argv[1], "-o", "cli.parquet"])
assert result.exit_code == 0, result.output
seen["cli"] = state()
print(json.dumps(seen))
"""


def test_sptool_leaves_its_host_process_as_it_was(tmp_path):
    p = subprocess.run([sys.executable, "-c", HOST, SAMPLE], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout)
    assert seen["before"]["enabled"] and seen["before"]["frozen"] == 0
    for stage in ("import", "api", "cli"):
        assert seen[stage] == seen["before"], stage
    assert (tmp_path / "api.parquet").exists() and (tmp_path / "cli.parquet").exists()


def test_pandas_stays_importable_beside_the_command_line(tmp_path):
    """The command line keeps pandas out of the script's own process only: a program that runs
    it in-process can still import pandas afterwards."""
    pytest.importorskip("pandas")
    code = ("import sys; from click.testing import CliRunner; from sptool.cli import cli; "
            "r = CliRunner().invoke(cli, ['reorder', sys.argv[1], '-o', 'o.parquet']); "
            "assert r.exit_code == 0, r.output; import pandas; print(pandas.DataFrame({'a': [1]}).shape)")
    p = subprocess.run([sys.executable, "-c", code, SAMPLE], capture_output=True, text=True, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["(1,", "1)"]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two cores")
def test_threads_follow_the_cores_the_process_may_use():
    """A process pinned to one core (taskset, a container's cpuset, a pinned Dask worker) runs
    one thread per parallel step: the affinity the kernel reports, not the machine's cores."""
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
           "from sptool._threads import THREADS; print(THREADS, len(os.sched_getaffinity(0)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "1"]
