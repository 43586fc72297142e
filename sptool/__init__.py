"""sptool: streaming tools and a Parquet format for n-dimensional COO sparse tensors.

The Python API mirrors the command line: each command is a function here with the same
semantics and keyword arguments named like the options.  Inputs are paths, open sources
(``sptool.open``) or in-memory ``SparseTensor`` objects; an op given no output returns its result
as a ``SparseTensor`` (``"-"`` writes an Arrow stream to stdout, as the command line does).
Functions are imported on first use (PEP 562), so that `import sptool` and the command line
start quickly.
"""

import importlib
import importlib.util

from ._version import __version__
from .errors import DataError, FormatError, InputError, ResourceError, ShapeMismatch, SptoolError, UsageError

# The compiled kernels are mandatory: a checkout without them fails here, not at first use.
# They are found, not imported: importing them loads numpy, which the command line defers
# until it has set up the process (sptool/cli/__init__.py, main).
_missing = [m for m in ("_kernels", "_linalg", "_reduce", "_textparse", "_tfrecord", "_cross", "_widekeys")
            if importlib.util.find_spec(f"{__name__}.{m}") is None]
if _missing:  # pragma: no cover - exercised only by a broken build
    raise ImportError(
        f"sptool's compiled kernels ({', '.join(_missing)}) are not built. Install with "
        "'pip install .' (needs a C compiler and Cython), or for a checkout run "
        "'python setup.py build_ext --inplace'."
    )

KERNELS = "compiled"

# public name -> module that defines it
_API = {
    "FORMAT_VERSION": "format", "TensorMeta": "format", "SparseTensor": "tensor", "Report": "report",
    "read": "ops.readwrite", "open": "ops.readwrite", "write": "ops.readwrite",
    "validate": "ops.validate", "info": "ops.info", "head": "ops.info", "todense": "ops.todense",
    "convert": "ops.convert", "reorder": "ops.reorder", "concat": "ops.concat", "split": "ops.split",
    "slice_": "ops.slice", "reshape": "ops.reshape", "transpose": "ops.transpose",
    "reset_shape": "ops.reset_shape", "retain": "ops.retain", "fill_empty_rows": "ops.fill_empty_rows",
    "expand_dims": "ops.expand_dims", "group": "ops.group", "add": "ops.add", "maximum": "ops.maximum",
    "minimum": "ops.maximum",
    "mul": "ops.mul", "div": "ops.mul", "matmul": "ops.matmul", "reduce": "ops.reduce",
    "softmax": "ops.softmax", "to_indicator": "ops.to_indicator", "map_values": "ops.map_values", "eye": "ops.eye",
    "spy": "ops.spy",
    "merge": "ops.merge",
    "cross": "ops.cross", "cross_hashed": "ops.cross", "bincount": "ops.bincount",
    "segment_sum": "ops.segment", "segment_mean": "ops.segment", "segment_sqrt_n": "ops.segment",
    "sampled_matmul": "ops.sampled_matmul",
    "apply": "ops.apply",
}

__all__ = [
    "__version__", "KERNELS", "SptoolError", "DataError", "FormatError", "InputError", "ResourceError",
    "ShapeMismatch", "UsageError", *_API,
]


def __getattr__(name):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'sptool' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_API))
