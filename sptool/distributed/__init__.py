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

import importlib
import sys
import types
from collections.abc import Mapping

from .cluster import connect, dashboard_link, require_distributed, scheduler_of

# The operations, each imported on first use: a job needs one, and importing them all (convert
# brings the converters) cost the command line's driver 0.09 CPU s a job (Python's import of
# the package, measured).  name -> (module, function).
_FUNCTIONS = {"add": ("add", "add"), "concat": ("concat", "concat"), "convert": ("convert", "convert"),
              "info": ("footers", "info"), "matmul": ("matmul", "matmul"), "reduce": ("reduce", "reduce"),
              "reorder": ("reorder", "reorder"), "div": ("rowwise", "div"), "expand_dims": ("rowwise", "expand_dims"),
              "map_values": ("rowwise", "map_values"), "mul": ("rowwise", "mul"), "reshape": ("rowwise", "reshape"),
              "retain": ("rowwise", "retain"), "transpose": ("rowwise", "transpose"), "slice_": ("slice", "slice_"),
              "split": ("split", "split"), "todense": ("todense", "todense"), "validate": ("validate", "validate")}


def __getattr__(name: str):
    if name not in _FUNCTIONS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, function = _FUNCTIONS[name]
    fn = getattr(importlib.import_module(f".{module}", __name__), function)
    globals()[name] = fn
    return fn


class _Package(types.ModuleType):
    """This package, whose operation names stay bound to the functions: importing a submodule
    binds it to its package's attribute of the same name (``reduce``, ``add``...), which
    ``from .reduce import reduce`` used to rebind to the function."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and name in _FUNCTIONS:
            return  # the submodule stays reachable in sys.modules
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


class _Operations(Mapping):
    """Command name -> its function, imported when looked up."""

    _NAMES = {"reorder": "reorder", "add": "add", "reduce": "reduce", "concat": "concat", "validate": "validate",
              "info": "info", "transpose": "transpose", "reshape": "reshape", "expand-dims": "expand_dims",
              "retain": "retain", "map": "map_values", "mul": "mul", "div": "div", "slice": "slice_",
              "split": "split", "todense": "todense", "convert": "convert", "matmul": "matmul"}

    def __getitem__(self, command: str):
        return __getattr__(self._NAMES[command])

    def __iter__(self):
        return iter(self._NAMES)

    def __len__(self):
        return len(self._NAMES)


# The operations a command runs on a cluster when given --scheduler (cli/_cluster.py).
OPERATIONS = _Operations()

__all__ = ["connect", "dashboard_link", "require_distributed", "scheduler_of", "OPERATIONS",
           "reorder", "add", "reduce", "concat", "validate", "info", "transpose", "reshape", "expand_dims", "retain",
           "map_values", "mul", "div", "slice_", "split", "todense", "convert", "matmul"]
