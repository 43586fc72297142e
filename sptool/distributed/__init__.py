"""sptool on a Dask cluster: the same operations over part directories on shared storage.

Dask (``distributed``) schedules the tasks, moves nothing but paths and small results, and
reruns the tasks of a lost worker; sptool decides the partitioning and its compiled kernels do
the work inside each task.  Every function here takes the op's own arguments plus ``client``
(a ``distributed.Client``; ``connect`` makes one) and writes a part directory (validate and
info return what the op returns).  This package sits above ``sptool.ops`` and calls their
pieces; no op imports it, and it is loaded only when a scheduler is asked for, so ``import
sptool`` and the command line never import Dask otherwise.

    >>> with sptool.distributed.connect("local:2") as client:          # doctest: +SKIP
    ...     sptool.distributed.reorder("big/", "sorted/", client=client)
"""

from .add import add
from .cluster import connect, dashboard_link, require_distributed, scheduler_of
from .concat import concat
from .convert import convert
from .footers import info
from .matmul import matmul
from .reduce import reduce
from .reorder import reorder
from .rowwise import div, expand_dims, map_values, mul, reshape, retain, transpose
from .slice import slice_
from .split import split
from .todense import todense
from .validate import validate

# The operations a command runs on a cluster when given --scheduler (cli/_cluster.py).
OPERATIONS = {"reorder": reorder, "add": add, "reduce": reduce, "concat": concat, "validate": validate,
              "info": info, "transpose": transpose, "reshape": reshape, "expand-dims": expand_dims,
              "retain": retain, "map": map_values, "mul": mul, "div": div,
              "slice": slice_, "split": split, "todense": todense,
              "convert": convert, "matmul": matmul}

__all__ = ["connect", "dashboard_link", "require_distributed", "scheduler_of", "OPERATIONS", "reorder", "add", "reduce",
           "concat", "validate", "info", "transpose", "reshape", "expand_dims", "retain", "map_values", "mul", "div",
           "slice_", "split", "todense", "convert",
           "matmul"]
