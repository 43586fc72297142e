"""sptool: streaming tools and a Parquet format for n-dimensional COO sparse tensors.

The Python API mirrors the command line: each command is a function here with the same
semantics and keyword arguments named like the options.
"""

from ._version import __version__
from .errors import DataError, FormatError, InputError, ResourceError, SptoolError, UsageError
from .format import FORMAT_VERSION, TensorMeta

try:
    from . import _kernels  # noqa: F401  (the compiled kernels are mandatory)
except ImportError as e:  # pragma: no cover - exercised only by a broken build
    raise ImportError(
        "sptool's compiled kernels (sptool/_kernels.pyx) are not built. Install with "
        "'pip install .' (needs a C compiler and Cython), or for a checkout run "
        f"'python setup.py build_ext --inplace'. Original error: {e}"
    ) from e

from .convert import convert
from .ops.concat import concat
from .ops.expand_dims import expand_dims
from .ops.fill_empty_rows import fill_empty_rows
from .ops.info import head, info
from .ops.readwrite import open, read, write  # noqa: A004
from .ops.reorder import reorder
from .ops.reset_shape import reset_shape
from .ops.reshape import reshape
from .ops.retain import retain
from .ops.slice import slice_
from .ops.split import split
from .ops.todense import todense
from .ops.transpose import transpose
from .ops.validate import validate
from .report import Report
from .tensor import SparseTensor

KERNELS = "compiled"

__all__ = [
    "__version__", "FORMAT_VERSION", "KERNELS", "SparseTensor", "TensorMeta", "Report",
    "read", "open", "write", "validate", "info", "head", "todense", "reorder", "convert",
    "concat", "split", "slice_", "reshape", "transpose", "reset_shape", "retain", "fill_empty_rows", "expand_dims",
    "SptoolError", "DataError", "FormatError", "InputError", "ResourceError", "UsageError",
]
