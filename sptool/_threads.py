"""How many threads sptool's parallel steps use (decoding row groups, merging runs, SpMM,
parsing text): the cores this process may run on (its CPU affinity: taskset, a container's
cpuset, a Dask worker pinned to a core), at most 4, since each step's gain flattens beyond that
while its memory in flight grows with every thread."""

import gc
import os
import threading

_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
THREADS = max(1, min(4, _CORES or 1))


def stop_pool(pool) -> bool:
    """Shut a thread pool down, waiting for its threads, except inside a garbage collection: an
    abandoned generator caught in a reference cycle (a failed task's traceback holds its frame)
    runs its ``finally`` there, and CPython 3.11 can collect while it holds its lock on the list
    of threads (sys._current_frames, which Dask's profiler calls on every worker every 10 ms), a
    lock that an ending thread takes: joining it then hangs for ever (a worker's event loop,
    seen in a test run).  There the threads are only told to stop, and wind down on their own.
    Whether the threads have ended."""
    wait = not getattr(_gc, "collecting", False)
    pool.shutdown(wait=wait, cancel_futures=True)
    return wait


_gc = threading.local()  # the collection under way in this thread, if any


def _note_collection(phase: str, info: dict) -> None:
    _gc.collecting = phase == "start"


gc.callbacks.append(_note_collection)
