"""Waiting for a round of tasks: results in submission order, progress fed as each task
completes, the peak worker memory noted, and the whole round cancelled at the first failure."""

from __future__ import annotations


def follow(client, futures: list, outcome, *, progress=None, rows=None) -> list:
    """The results of ``futures`` (each task returns a tuple whose last item is its worker's peak
    memory), in order; a task that fails raises its own error (an sptool error keeps its exit
    code) after the others are cancelled.  ``rows``: each task's rows for the progress, a list
    or a function of the task's result (rows known only once it ran)."""
    from distributed import as_completed

    index = {f.key: i for i, f in enumerate(futures)}
    results = [None] * len(futures)
    try:
        for future in as_completed(futures):
            result = future.result()
            i = index[future.key]
            results[i] = result
            outcome.peak_worker_memory = max(outcome.peak_worker_memory, result[-1])
            if progress and rows is not None:
                progress.advance(rows(result) if callable(rows) else rows[i])
    except BaseException:
        client.cancel(futures)
        raise
    outcome.workers = max(outcome.workers, len(client.scheduler_info().get("workers", {})))
    return results
