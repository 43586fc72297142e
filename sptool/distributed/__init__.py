"""sptool on a Dask cluster: the same operations over part directories on shared storage.

Dask (``distributed``) schedules the tasks, moves nothing but paths and small results, and
reruns the tasks of a lost worker; sptool decides the partitioning and its compiled kernels do
the work inside each task.  Every function here takes the op's own arguments plus ``client``
(a ``distributed.Client``; ``connect`` makes one) and writes a part directory.  This package
sits beside ``sptool.ops``; nothing below it imports it, and it is loaded only when a scheduler
is asked for, so ``import sptool`` and the command line never import Dask otherwise.
"""

from .cluster import connect, dashboard_link, require_distributed, scheduler_of
from .reorder import reorder

__all__ = ["connect", "dashboard_link", "require_distributed", "scheduler_of", "reorder"]
