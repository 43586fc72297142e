"""Sorting rows by a dimension order with a duplicates policy, as an engine op (reorder's work,
and, as ``Combine``, the step that combines reduce's partial results on a cluster)."""

from __future__ import annotations

from ..format import TensorMeta
from .axes import normalize_order
from .duplicates import COMBINING, check_policy
from .engine import Plan, StreamOp


class Reorder(StreamOp):
    """Rows sorted by ``order`` with the ``duplicates`` policy applied to rows sharing a coordinate."""

    def __init__(self, order=None, duplicates: str = "keep"):
        self.order = order
        self.duplicates = duplicates
        self.dedup = None

    def check(self, meta: TensorMeta) -> None:
        normalize_order(self.order, meta.sparse_ndim)
        check_policy(self.duplicates, meta)

    def plan(self, meta: TensorMeta) -> Plan:
        self.check(meta)
        order = normalize_order(self.order, meta.sparse_ndim)
        # Sums of different numbers of equal values differ: iso values do not stay so when summed.
        out_meta = meta.with_(sort_order=order, unique=self.duplicates != "keep", nnz=None,
                              iso=meta.iso and self.duplicates != "sum")
        self.columns = range(meta.sparse_ndim + 1)
        return Plan(out_meta, order=order, duplicates=self.duplicates,
                    unique_claim=True if self.duplicates != "keep" else None, keyed_rows=True)

    def map(self, batch, keys):
        yield batch.select(self.columns)  # without the sort's key column


class Combine(Reorder):
    """Partial results meeting at one coordinate combined by ``how`` (sum, max, min or prod), in
    row-major order: the combine step of an op whose partials are reductions (reduce)."""

    def __init__(self, how: str):
        super().__init__(None, how)

    def check(self, meta: TensorMeta) -> None:
        check_policy(self.duplicates, meta, COMBINING)
