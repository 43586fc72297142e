"""todense: scatter a tensor into a dense .npy, written through a memory map."""

from __future__ import annotations

import numpy as np

from .._memory import budget_of
from ..format import scalar_of_value_type
from ..io import dense_returned, local_only, open_input
from ..stream.dense import write_dense


def local_npy(output: str) -> str:
    """``output`` as a local path (a file:// URL resolved); another filesystem's URL is refused
    before any row is read: the cells are written in place (on a cluster, by each task's
    pwrite), which an object store cannot do."""
    return local_only(output, "todense's -o", "the .npy is written in place through a memory map")


def default_value_of(value, meta):
    """``default_value`` (text from the command line, or a Python scalar) as a Python scalar of
    the tensor's value type; None keeps the tensor's fill value."""
    if value is None:
        return None
    scalar = scalar_of_value_type(value, meta.value_type, "--default-value")
    return scalar.item() if isinstance(scalar, np.generic) else scalar


def todense(path: str, output: str | None = None, *, default_value=None, validate: bool = True, memory=None,
            progress=None):
    """Write the dense form of a tensor to ``output`` (.npy): TensorFlow's to_dense, with
    duplicate coordinates summed as the format says.

    Memory: the output is a memory map, so it may be larger than ``memory``; the rows stream
    through in batches; so ``output`` is a local path (or a file:// URL), while the input may
    be a URL.  ``validate`` also checks the file's sort and uniqueness claims (bounds are
    always checked; an out-of-range index is an error naming the entry).  With no ``output`` the
    dense array is returned (a NumPy array, held in memory).

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> out = os.path.join(tempfile.mkdtemp(), "d.npy")
    >>> _ = todense("sample_data/tensor3d.parquet", out)
    >>> np.load(out).shape
    (40, 30, 20)
    """
    if output is None:
        return dense_returned(lambda npy: todense(path, npy, default_value=default_value, validate=validate,
                                                  memory=memory, progress=progress), "todense")
    output = local_npy(output)
    budget = budget_of(memory)
    with open_input(path) as src:
        default_value = default_value_of(default_value, src.meta)
        return write_dense(src, output, default_value=default_value, validate=validate, budget=budget,
                           progress=progress)
