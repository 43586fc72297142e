"""Waiting for a round of tasks: results in submission order, progress fed as each task
completes, the peak worker memory noted, and the whole round cancelled at the first failure."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .cluster import worker_count


def follow(client, futures: list, outcome, *, progress=None, rows=None) -> list:
    """The results of ``futures`` (each task returns a tuple whose last item is its worker's peak
    memory, or None when it had nothing to do), in order; a task that fails raises its own error
    (an sptool error keeps its exit code) after the others are cancelled.  ``rows``: each task's
    rows for the progress, a list or a function of the task's result (rows known only once it
    ran)."""
    if not futures:  # nothing to wait for, nor to ask the scheduler about
        return []
    from distributed import as_completed

    index = {f.key: i for i, f in enumerate(futures)}
    results = [None] * len(futures)
    try:
        # Results fetched by the client's event loop as tasks finish, not one round trip each
        # after the loop hands over a future (8 of them cost a reduce's driver 0.15 s, profiled).
        # That loop is named, the futures' own: as_completed takes the default client's otherwise,
        # and with another client the default (a caller's two clients) it waited for ever on
        # tasks long done.
        for future, result in as_completed(futures, with_results=True, loop=futures[0].client.loop):
            i = index[future.key]
            results[i] = result
            if result is not None:
                outcome.peak_worker_memory = max(outcome.peak_worker_memory, result[-1])
            if progress and rows is not None:
                progress.advance(rows(result) if callable(rows) else rows[i])
    except BaseException:
        client.cancel(futures)
        settle(client, futures)
        raise
    outcome.workers = max(outcome.workers, worker_count(client))
    return results


def _executing(dask_worker) -> list[str]:
    """The keys of the tasks a worker is running now (run on each worker)."""
    return [str(ts.key) for ts in getattr(dask_worker.state, "executing", ())]


def settle(client, futures: list, timeout: float = 30.0) -> None:
    """Wait (up to ``timeout`` seconds) until no worker still runs one of ``futures``, cancelled
    after a failure: a cancelled task runs on to its end, and one still writing when the job
    removes its staging directory would leave files behind (or make the directory again)."""
    keys = {str(f.key) for f in futures}
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        try:
            running = client.run(_executing)
        except Exception:  # noqa: BLE001 - a worker gone or a version without the state: nothing to wait for
            return
        # Two quiet answers 0.1 s apart: a task given to a worker just before the cancel travels
        # on the scheduler's batched stream, which client.run's own request can overtake; a
        # worker that answers "nothing" may start that task next (a review's reading of
        # distributed, not seen happen).  The stream delivers within milliseconds.
        quiet = quiet + 1 if not keys.intersection(k for ks in running.values() for k in ks) else 0
        if quiet == 2:
            return
        time.sleep(0.1)


@dataclass
class Outcome:
    """What a distributed job did, for its summary."""

    rows_in: int = 0
    rows_out: int = 0
    parts: int = 0
    workers: int = 0
    peak_worker_memory: int = 0
    part_metas: list = field(default_factory=list)
    results: list = field(default_factory=list)  # what the op returned for each part

    def summary(self) -> dict:
        first = self.part_metas[0]
        return {"rows_in": self.rows_in, "rows_out": self.rows_out, "shape": list(first.shape),
                "value_type": first.value_type, "unique": all(m.unique for m in self.part_metas),
                "parts": self.parts, "workers": self.workers, "peak_worker_memory": self.peak_worker_memory,
                "results": self.results}
