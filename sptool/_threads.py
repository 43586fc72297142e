"""How many threads sptool's parallel steps use (decoding row groups, merging runs, SpMM,
parsing text): the cores this process may run on (its CPU affinity: taskset, a container's
cpuset, a Dask worker pinned to a core), at most 4, since each step's gain flattens beyond that
while its memory in flight grows with every thread."""

import os

_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
THREADS = max(1, min(4, _CORES or 1))


def stop_pool(pool) -> None:
    """Shut a thread pool down without joining its threads: the work not begun is cancelled, and
    the threads end on their own once their current task returns.  A caller that needs its work
    finished waits for that work's futures first, never for the threads.

    The reason: the pools are stopped in ``finally`` blocks, and an abandoned generator caught in
    a reference cycle (a failed task's traceback holds its frame) runs its ``finally`` inside a
    garbage collection.  CPython 3.11 can collect while it holds its lock on the list of threads
    (sys._current_frames, which Dask's profiler calls on every worker every 10 ms), a lock that
    an ending thread takes: a join there hangs for ever (a worker's event loop, seen in a test
    run).  Waiting on a future takes no such lock."""
    pool.shutdown(wait=False, cancel_futures=True)
