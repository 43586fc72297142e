"""Reaching a Dask cluster: an existing scheduler (tcp://HOST:PORT) or a LocalCluster of N worker
processes that sptool starts and stops itself (local:N).

``distributed`` is imported here and nowhere above this package, and only when a scheduler is
asked for: the command line and ``import sptool`` never load Dask otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re

from ..errors import SchedulerUnreachable, UsageError

ENV_VAR = "SPTOOL_SCHEDULER"
# What a worker imports before its first task, given ``dask worker --preload sptool.distributed.cluster``
# (and in the workers of local:N): sptool's task modules, and pandas, which pyarrow's to_numpy
# imports on its first call whenever pandas is installed (0.25-0.3 CPU s in a worker's first
# task, measured; the command line keeps it out of its own process, but a worker may run other
# people's tasks, which may want it).
PRELOAD = ["sptool.distributed.ranges", "sptool.distributed.seamed", "sptool.distributed.reduce",
           "sptool.distributed.add", "sptool.distributed.reorder", "pandas"]
INSTALL_HINT = 'install the optional Dask support with: pip install "sptool[dask]"'
_LOCAL = re.compile(r"^local:(\d+)$")


def scheduler_of(given: str | None) -> str | None:
    """The scheduler asked for: ``given`` (--scheduler), else $SPTOOL_SCHEDULER, else None."""
    spec = given or os.environ.get(ENV_VAR) or None
    if spec is not None and not (_LOCAL.match(spec) or "://" in spec):
        where = f"--scheduler {spec}" if given else f"${ENV_VAR}={spec}"
        raise UsageError(f"{where}: expected tcp://HOST:PORT (a running scheduler) or local:N "
                         "(a local cluster of N worker processes)")
    return spec


def require_distributed():
    """The ``distributed`` module, or a UsageError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise UsageError(f"running on a cluster needs Dask's 'distributed' package; {INSTALL_HINT}") from None
    return distributed


@contextlib.contextmanager
def connect(spec: str):
    """A ``distributed.Client`` for ``spec``: 'tcp://HOST:PORT' connects to a running scheduler,
    'local:N' starts a LocalCluster of N single-threaded worker processes, stopped on the way out
    whatever happens."""
    distributed = require_distributed()
    local = _LOCAL.match(spec)
    if local is None:
        try:
            client = distributed.Client(spec, timeout=os.environ.get("SPTOOL_CONNECT_TIMEOUT", "20s"))
        except (OSError, TimeoutError) as e:
            raise SchedulerUnreachable(f"cannot reach the scheduler {spec}: {e}") from None
        with client:
            yield client
        return
    workers = int(local.group(1))
    if workers < 1:
        raise UsageError("--scheduler local:N needs N >= 1 worker processes")
    # One thread per worker: sptool's kernels use their own threads within a task's --memory.
    with keep_restarted_workers():
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", preload=[__name__],
                                           silence_logs=logging.ERROR)
        with cluster, distributed.Client(cluster) as client:
            yield client


def keep_restarted_workers():
    """Dask config for a LocalCluster's lifetime: a killed worker's nanny starts a new process at
    once, but the cluster also closes that nanny for good when, 'lost-worker-timeout' (15 s) after
    a worker left, no worker of its name is registered; a worker killed twice 15 s apart is caught
    restarting by the first kill's timer and lost (seen in CI, made again by hand).  An hour keeps
    the restart: the nanny, not that timer, is what brings a local worker back."""
    import dask

    return dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"})


def dask_setup(worker=None) -> None:
    """Dask's preload hook (``--preload sptool.distributed.cluster``): PRELOAD imported as the
    worker starts, not in the first job's tasks.  The worker's process is otherwise left as Dask
    set it up (its allocator's settings are the environment's: docs/performance.md)."""
    import importlib

    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError:  # pandas is no dependency of sptool
            pass


def dashboard_link(client) -> str | None:
    """The dashboard's address when the scheduler serves one."""
    try:
        return client.dashboard_link if "dashboard" in client.scheduler_info(n_workers=0).get("services", {}) else None
    except Exception:  # noqa: BLE001 - a missing link is not worth failing a job for
        return None


def worker_count(client) -> int:
    # The count alone: the scheduler otherwise sends every worker's description.
    info = client.scheduler_info(n_workers=0)
    return info.get("n_workers", len(info.get("workers", {})))
