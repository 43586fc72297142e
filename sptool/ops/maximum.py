"""maximum and minimum: element-wise over the union of two sparse tensors' coordinates
(TensorFlow's sparse.maximum / sparse.minimum), a streaming merge join like add's."""

from __future__ import annotations

import numpy as np

from .._memory import budget_of
from ..errors import UsageError
from ..io import check_inputs, is_npy, open_operands
from ..stream.binary import JoinOp, promote, run_join, scalar
from ..tensor import SparseTensor


class Extreme(JoinOp):
    """maximum or minimum of the two sides at each coordinate of the union; a side without the
    coordinate holds its fill (0 unless the file says otherwise)."""

    def __init__(self, ufunc, what: str):
        self.ufunc, self.what = ufunc, what

    def out_dtype(self, ma, mb):
        for m in (ma, mb):
            if m.value_type.startswith("complex"):
                raise UsageError(f"{self.what} needs real values; {m.value_type} values have no order")
        return promote(ma.dtype, mb.dtype)

    def out_fill(self, fa, fb, dtype):
        return scalar(self.ufunc(np.asarray(fa, dtype=dtype), np.asarray(fb, dtype=dtype)), dtype)

    def combine(self, ga, gb, has_a, has_b, fa, fb):
        return self.ufunc(ga, gb), None


def _extreme(ufunc, what, a, b, output, memory, tmp_dir, progress):
    check_inputs([a, b])
    for p in (a, b):
        if is_npy(p):
            raise UsageError(f"{what} takes two sparse tensors; a dense .npy operand is not supported", path=p)
    with open_operands([a, b], tmp_dir) as (sa, sb):
        r = run_join(Extreme(ufunc, what), sa, sb, output, budget=budget_of(memory), tmp_dir=tmp_dir,
                     progress=progress)
    return SparseTensor.from_sink(r) if output is None else r


def maximum(a: str, b: str, output: str | None = None, *, memory=None, tmp_dir: str | None = None,
            progress=None) -> dict:
    """Element-wise maximum of two sparse tensors (TensorFlow's sparse.maximum).

    The output holds the union of the operands' coordinates; a coordinate missing on one side
    counts as that side's fill value (0 by default, as in TensorFlow), so max(-3, implicit 0) = 0
    *is* stored.  Nothing is pruned.  Shapes must be equal; the output is canonical with A's
    shape.  Real value types only (complex is refused); NaN propagates (NumPy's maximum); bool
    is logical OR.  Duplicates within an operand are summed first (the format's rule); unsorted
    operands are sorted first, in bounded memory.  Types follow NumPy promotion.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "max.parquet")
    >>> maximum("sample_data/matrix_a.parquet", "sample_data/matrix_b.parquet", out)["canonical"]
    True
    """
    return _extreme(np.maximum, "maximum", a, b, output, memory, tmp_dir, progress)


def minimum(a: str, b: str, output: str | None = None, *, memory=None, tmp_dir: str | None = None,
            progress=None) -> dict:
    """Element-wise minimum of two sparse tensors (TensorFlow's sparse.minimum): as ``maximum``,
    with min(3, implicit 0) = 0 stored.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "min.parquet")
    >>> minimum("sample_data/matrix_a.parquet", "sample_data/matrix_b.parquet", out)["shape"]
    [200, 150]
    """
    return _extreme(np.minimum, "minimum", a, b, output, memory, tmp_dir, progress)

