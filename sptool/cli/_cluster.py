"""--scheduler: which commands run on a Dask cluster, the note their help carries, and the client
a command runs under.  Dask is imported only once a scheduler is asked for (sptool.distributed)."""

from __future__ import annotations

import contextlib
import inspect
import os
from functools import partial

from ..errors import SchedulerUnreachable, UsageError
from ._options import COMMON_NOTE

# Commands with a distributed driver: the keys of sptool.distributed.OPERATIONS (not imported
# from there, so that the command line loads sptool.distributed only for a scheduler).
DISTRIBUTED = {"reorder", "reduce", "add", "validate", "info", "concat", "transpose", "reshape", "expand-dims",
               "retain", "map", "mul", "div", "slice",
               "split", "todense", "convert", "matmul"}
ENV_VAR = "SPTOOL_SCHEDULER"

RUNS_DISTRIBUTED = "Cluster: given --scheduler, runs on a Dask cluster (sptool help cluster)."
ONE_MACHINE = "Cluster: runs on one machine only; refuses --scheduler."


def asked(obj: dict) -> str | None:
    """The scheduler the command line asks for: --scheduler, else $SPTOOL_SCHEDULER."""
    return obj.get("scheduler") or os.environ.get(ENV_VAR) or None


def note_help(command):
    """Say in a command's help whether it runs on a cluster, and name the common options."""
    if command.help and "Cluster:" not in command.help:
        # Click 8.5 keeps a docstring as written and dedents it when formatting: an unindented
        # note appended to the raw text would stop that, so the text is dedented first.
        command.help = inspect.cleandoc(command.help) + "\n\n" + (
            RUNS_DISTRIBUTED if command.name in DISTRIBUTED else ONE_MACHINE) + " " + COMMON_NOTE


def refuse_unless_distributed(name: str, obj: dict):
    spec = asked(obj)
    if spec and name != "help" and name not in DISTRIBUTED:
        source = "--scheduler" if obj.get("scheduler") else f"${ENV_VAR}"
        raise UsageError(f"sptool {name} does not run on a cluster ({source} {spec}); the commands that do: "
                         f"{', '.join(sorted(DISTRIBUTED))}")


@contextlib.contextmanager
def cluster(obj: dict, quiet: bool):
    """The dask Client to run under (None without a scheduler), for the length of the command.

    Dask is imported at once (0.3 s; in the script with its modules frozen, before the command
    has objects of its own), but the client connects when the command first uses it: what the
    driver checks before its first task (the output's name, the inputs, their footers) is
    reported without waiting for the scheduler (up to the 20 s connect timeout when it does not
    answer).  The summary's seconds count from the command's start, connecting (and starting a
    local:N cluster) included."""
    spec = asked(obj)
    if not spec:
        yield None
        return
    from ..distributed import require_distributed, scheduler_of

    spec = scheduler_of(spec)
    require_distributed()
    with contextlib.ExitStack() as stack:
        yield _ConnectedOnUse(spec, quiet, stack)


class _ConnectedOnUse:
    """Stands for the command's client: the first attribute asked of it connects (and prints the
    dashboard's link), and the connection lasts as long as ``stack``.  A scheduler that did not
    answer is not asked again: every later use raises the same error."""

    def __init__(self, spec: str, quiet: bool, stack: contextlib.ExitStack):
        self._spec, self._quiet, self._stack, self._client, self._failed = spec, quiet, stack, None, None

    def __getattr__(self, name):
        if self._client is None:
            from ..distributed import connect, dashboard_link
            from ._console import err

            if self._failed is not None:
                raise SchedulerUnreachable(self._failed)
            try:
                client = self._stack.enter_context(connect(self._spec))
            except SchedulerUnreachable as e:
                self._failed = str(e)
                raise
            link = None if self._quiet else dashboard_link(client)  # a round trip: only to print it
            if link:
                err.print(f"Dask dashboard: {link}", highlight=False, markup=False)
            self._client = client
        return getattr(self._client, name)


# Commands that read stdin themselves on a cluster (on the driver), or refuse it (convert's inputs
# are files for its tasks); the others get it as a copy the driver makes (pieces.stdin_copied).
READS_STDIN_ITSELF = {"validate", "info", "convert"}


def operation(name: str, local, client):
    """What command ``name`` calls: its op ``local`` without a client, else sptool.distributed's
    function for it, bound to the client (same arguments; stdin, '-', read once by the driver
    into a copy beside the output, the last positional argument)."""
    if client is None:
        return local
    from ..distributed import OPERATIONS

    fn = partial(OPERATIONS[name], client=client)
    if name in READS_STDIN_ITSELF:
        return fn

    def with_stdin(*args, **kw):
        from .._memory import budget_of
        from ..distributed.pieces import stdin_copied

        near = args[-1] if args and isinstance(args[-1], str) else "-"
        with stdin_copied(args[:-1], near, budget_of(kw.get("memory"))) as inputs:
            return fn(*inputs, *args[-1:], **kw)

    return with_stdin


def run_job(name: str, local, opts: dict, obj: dict, *args, **kw):
    """Command ``name`` run under its progress bar: its op ``local``, or, given a scheduler, its
    cluster function; (the result, the Job for the summary line)."""
    from ._console import Job

    with cluster(obj, opts["quiet"]) as client:
        job = Job(name, quiet=opts["quiet"])
        try:
            return operation(name, local, client)(*args, progress=job, **kw), job
        finally:
            job.stop()


def cluster_extra(result: dict, before: str = "") -> str:
    """The summary line's account of a cluster run (nothing for a local one), after ``before``."""
    if not isinstance(result, dict) or "workers" not in result:
        return before
    from .._memory import format_size

    return ", ".join(filter(None, [before, f"{result['parts']} parts, {result['workers']} workers, peak worker "
                                           f"memory {format_size(result['peak_worker_memory'])}"]))
