"""eye: a sparse identity matrix, written in batches (TensorFlow's sparse eye)."""

from __future__ import annotations

import numpy as np

from .._memory import ROW_GROUP_ROWS, budget_of
from ..errors import UsageError
from ..format import VALUE_TYPES, TensorMeta
from ..io import open_sink
from ..tensor import SparseTensor

BATCH_ROWS_MAX = 8 * ROW_GROUP_ROWS


def eye(num_rows: int, num_columns: int | None = None, output: str | None = None, *, dtype: str = "float32",
        memory=None, progress=None) -> dict:
    """A [num_rows, num_columns] matrix with ones on the main diagonal (TensorFlow's sparse
    eye): min(num_rows, num_columns) entries, canonical.  ``num_columns`` defaults to
    ``num_rows``; ``dtype`` is a value type (default float32, as in TensorFlow; bool gives
    True).  Rows are generated and written in batches sized by ``memory``, so any size streams
    in bounded memory.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "eye.parquet")
    >>> eye(3, 5, out)["rows"]
    3
    """
    try:
        n = int(num_rows)
        m = n if num_columns is None else int(num_columns)
    except (TypeError, ValueError):
        raise UsageError("eye needs integer sizes") from None
    if n < 0 or m < 0:
        raise UsageError(f"eye needs non-negative sizes, not {n} x {m}")
    if dtype not in VALUE_TYPES or dtype in ("string", "binary"):
        kinds = [t for t in VALUE_TYPES if t not in ("string", "binary")]
        raise UsageError(f"--dtype must be one of {', '.join(kinds)}, not {dtype!r}")
    k = min(n, m)
    budget = budget_of(memory)
    batch_rows = min(budget.rows(16 + np.dtype(VALUE_TYPES[dtype]).itemsize), BATCH_ROWS_MAX)
    meta = TensorMeta(shape=(n, m), sparse_ndim=2, value_type=dtype, sort_order=(0, 1), unique=True, nnz=k)
    if progress:
        progress.set_total(k)
    ones = np.ones(min(k, batch_rows), dtype=VALUE_TYPES[dtype])
    with open_sink(output, meta, unique_claim=True, budget=budget) as sink:
        for start in range(0, k, batch_rows):
            stop = min(start + batch_rows, k)
            diag = np.arange(start, stop, dtype=np.int64)
            sink.write(np.stack([diag, diag]), ones[: stop - start])
            if progress:
                progress.advance(stop - start)
    if output is None:
        return SparseTensor.from_sink(sink)
    return {"rows": sink.final_meta.nnz, "shape": [n, m], "value_type": dtype, "output": output}
