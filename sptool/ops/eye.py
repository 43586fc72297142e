"""eye: a sparse identity matrix, written in batches (TensorFlow's sparse eye)."""

from __future__ import annotations

import numpy as np

from .._args import whole_number
from .._memory import ROW_GROUP_ROWS, Budget, budget_of
from ..errors import UsageError
from ..format import VALUE_TYPES, TensorMeta
from ..stream.engine import Plan, StreamOp, run
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
    n = whole_number(num_rows, "num_rows")
    m = n if num_columns is None else whole_number(num_columns, "num_columns")
    if n < 0 or m < 0:
        raise UsageError(f"eye needs non-negative sizes, not {n} x {m}")
    if dtype not in VALUE_TYPES or dtype in ("string", "binary"):
        kinds = [t for t in VALUE_TYPES if t not in ("string", "binary")]
        raise UsageError(f"--dtype must be one of {', '.join(kinds)}, not {dtype!r}")
    budget = budget_of(memory)
    sink = run(Eye(n, m, dtype), [], output, budget=budget, progress=progress)
    if output is None:
        return SparseTensor.from_sink(sink)
    return {"rows": sink.final_meta.nnz, "shape": [n, m], "value_type": dtype, "output": output}


class Eye(StreamOp):
    """The diagonal made in batches sized by the budget: an op with no input."""

    def __init__(self, n: int, m: int, dtype: str):
        self.n, self.m, self.dtype = n, m, dtype

    def plan(self) -> Plan:
        meta = TensorMeta(shape=(self.n, self.m), sparse_ndim=2, value_type=self.dtype, sort_order=(0, 1),
                          unique=True, nnz=min(self.n, self.m))
        return Plan(meta, unique_claim=True, pieces=True)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        k = plan.meta.nnz
        batch_rows = min(budget.rows(16 + np.dtype(VALUE_TYPES[self.dtype]).itemsize), BATCH_ROWS_MAX)
        ones = np.ones(min(k, batch_rows), dtype=VALUE_TYPES[self.dtype])
        for start in range(0, k, batch_rows):
            stop = min(start + batch_rows, k)
            diag = np.arange(start, stop, dtype=np.int64)
            yield (np.stack([diag, diag]), ones[: stop - start]), None
            if progress:
                progress.advance(stop - start)

    def map(self, piece, keys):
        yield piece
