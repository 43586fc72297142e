"""read, open and write: moving tensors between files and memory."""

from __future__ import annotations

import numpy as np

from .._args import whole_number
from .._memory import budget_of
from ..errors import ResourceError, UsageError
from ..io import TensorSource, open_sink, open_source, read_all, row_bytes
from ..tensor import SparseTensor, refuse_repeats

# Holding N rows in memory costs the arrays plus the batches they are gathered from.
_READ_COPIES = 3


def open(path: str) -> TensorSource:  # noqa: A001 (mirrors the builtin on purpose: sptool.open)
    """Open a tensor for streaming: a .parquet file, a directory of parts, or '-' (stdin).

    Examples
    --------
    >>> with open("sample_data/tensor3d.parquet") as src:
    ...     sum(batch.num_rows for batch in src.iter_batches()) == src.meta.nnz
    True
    """
    return open_source(path)


def read(path: str, *, memory=None) -> SparseTensor:
    """Load a whole tensor into memory.  Refuses a tensor larger than ``memory``.

    Examples
    --------
    >>> t = read("sample_data/tensor3d.parquet")
    >>> t.shape
    (40, 30, 20)
    """
    with open_source(path) as src:
        budget = budget_of(memory)
        nnz = src.meta.nnz
        if nnz is not None and nnz * row_bytes(src.meta) * _READ_COPIES > budget.total:
            raise ResourceError(
                f"reading {nnz} entries into memory needs about {nnz * row_bytes(src.meta) * _READ_COPIES} "
                "bytes, over --memory; stream it with sptool.open instead, or raise the budget",
                path=path,
            )
        indices, values, meta = read_all(src, budget=budget)
        stored = src.stored_meta
        if stored.unique and not meta.unique:  # not acted on when streaming: checked here, and kept
            refuse_repeats(indices.T, meta.shape, path=src.path, says="the metadata says")
            meta = meta.with_(unique=True)
    return SparseTensor.from_meta(indices, values, meta)


def write(tensor: SparseTensor, path: str | None, *, batch_rows: int = 1 << 20):
    """Write a SparseTensor to a .parquet file, a directory (trailing /), a .arrows stream
    file, or '-' (stdout).  Returns the metadata written.

    Examples
    --------
    >>> import tempfile, os
    >>> t = SparseTensor([[0, 0], [1, 2]], [1.5, 2.5], shape=(2, 3))
    >>> meta = write(t, os.path.join(tempfile.mkdtemp(), "t.parquet"))
    >>> meta.canonical
    True
    """
    batch_rows = whole_number(batch_rows, "batch_rows")
    if batch_rows < 1:
        raise UsageError(f"batch_rows must be >= 1, not {batch_rows}")
    meta = tensor.meta
    keys = tensor.keys
    with open_sink(path, meta, unique_claim=True if meta.unique else False) as sink:
        for start in range(0, max(tensor.nnz, 1), batch_rows):
            stop = start + batch_rows
            sink.write(np.ascontiguousarray(keys[:, start:stop]), tensor.values[start:stop])
    return sink.final_meta
