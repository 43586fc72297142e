"""How many threads sptool's parallel steps use (decoding row groups, merging runs, SpMM,
parsing text): the cores this process may run on (its CPU affinity: taskset, a container's
cpuset, a Dask worker pinned to a core), at most 4, since each step's gain flattens beyond that
while its memory in flight grows with every thread."""

import os

_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
THREADS = max(1, min(4, _CORES or 1))
