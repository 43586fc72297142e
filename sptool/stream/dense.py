"""The dense form of a tensor as an engine op (Densify) and the .npy output it writes through
(io's DenseSink): todense, the .npy converter and the distributed todense share it."""

from __future__ import annotations

import numpy as np

from .._memory import Budget
from ..errors import UsageError
from ..format import TensorMeta
from ..io import DenseSink, check_dense_size, known_shape
from .engine import Plan, StreamOp, run
from .order import ClaimCheck


def dense_dtype(meta, width: int | None = None) -> np.dtype:
    if meta.value_type == "string":
        return np.dtype(f"<U{max(width or 1, 1)}")
    if meta.value_type == "binary":
        return np.dtype(f"S{max(width or 1, 1)}")
    return meta.dtype


def _string_width(src, budget) -> int:
    """The longest string or bytes value: a first pass over a re-readable source."""
    width = 1
    for _, vals in src.iter_arrays(budget=budget):
        if len(vals):
            width = max(width, max(len(v) for v in vals.reshape(-1)))
    return width


def sorts_first(meta: TensorMeta, nbytes: int, budget: Budget) -> bool:
    """Whether Densify sorts the rows row-major first (an output of ``nbytes`` bigger than half
    the budget, of rows not claimed row-major), checking then only the uniqueness claim, in the
    sorted order; otherwise the claims are checked in stored order."""
    return nbytes > budget.total // 2 and not meta.row_major


# What a broken order or uniqueness claim's error offers instead.
CLAIMS_NOTE = " (use --no-validate to densify anyway; duplicates are summed)"


class Densify(StreamOp):
    """The dense form of a tensor (duplicates summed) into a DenseSink: todense, and the .npy
    converter.  The rows go in stored order, or row-major through the sort when the output is
    bigger than half the budget, so that it is written front to back (random rows would touch,
    flush and re-read every page of the memory map in each batch)."""

    def __init__(self, fill, dtype: np.dtype, *, nbytes: int, budget: Budget, validate: bool, path=None):
        self.fill, self.dtype, self.nbytes, self.budget, self.validate = fill, dtype, nbytes, budget, validate
        self.path = path

    def plan(self, meta: TensorMeta) -> Plan:
        self.claims = meta
        sort = sorts_first(meta, self.nbytes, self.budget)
        self.in_order = sort or meta.row_major
        if sort:
            # Sorted rows are checked for the uniqueness claim in their new (row-major) order.
            self.claims = meta.with_(sort_order=tuple(range(meta.sparse_ndim)))
        # Bounds checked on the way in (sorted rows are, by the sort): an error names the input.
        # The claims are the sink's to check (with --no-validate, not at all).
        return Plan(meta=meta, order=tuple(range(meta.sparse_ndim)) if sort else None, bounds_checked=True,
                    check_claims=False)

    def map(self, batch, keys):
        yield batch

    def open_output(self, output, plan: Plan, *, budget: Budget):
        claims = self.claims
        check = ClaimCheck(claims, claims.sort_order, claims.unique, path=self.path, note=CLAIMS_NOTE)
        return DenseSink(output, plan.meta, fill=self.fill, dtype=self.dtype, budget=budget,
                         claims=check if self.validate else None, in_order=self.in_order, source=self.path)


def write_dense(src, output: str, *, default_value=None, validate: bool = True, budget: Budget,
                progress=None) -> dict:
    """The dense form of an opened source written to the .npy ``output`` (Densify); bounds
    always checked, order and uniqueness claims too with ``validate``."""
    if not output.endswith(".npy"):
        raise UsageError("todense writes a .npy file; name the output *.npy", path=output)
    with known_shape(src) as src:
        meta = src.meta
        width = None
        if meta.value_type in ("string", "binary"):
            if src.kind == "stream":
                raise UsageError("a string tensor from stdin cannot be densified (two passes are needed); "
                                 "write it to a file first", path=src.path)
            width = _string_width(src, budget)
        fill = meta.fill_value if default_value is None else default_value
        if width is not None:
            width = max(width, len(fill))
        dtype = dense_dtype(meta, width)
        nbytes = check_dense_size(meta.shape, dtype, output)
        op = Densify(fill, dtype, nbytes=nbytes, budget=budget, validate=validate, path=src.path)
        run(op, src, output, budget=budget, progress=progress)
    return {"rows": meta.nnz, "shape": list(meta.shape), "dtype": str(dtype), "bytes": nbytes}
