"""What to do with rows that share a coordinate, once they are adjacent (sorted)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._messages import tuple_text
from ..errors import DataError, UsageError
from ..format import TensorMeta
from ..io._arrays import arrow_of, batch_keys, batch_values, make_batch

POLICIES = ("keep", "sum", "min", "max", "first", "last", "error")


def check_policy(policy: str, meta: TensorMeta):
    if policy not in POLICIES:
        raise UsageError(f"--duplicates must be one of {', '.join(POLICIES)}, not {policy!r}")
    vt = meta.value_type
    if policy == "sum" and vt in ("string", "binary"):
        raise UsageError(f"duplicates of a {vt} tensor cannot be summed; use first, last or error")
    if policy in ("min", "max") and (vt.startswith("complex") or vt in ("string", "binary")):
        raise UsageError(f"--duplicates {policy} needs ordered values; {vt} values have no order")


class Deduplicator:
    """Applies a policy to a stream of key-sorted batches, carrying a run of equal keys
    across batch boundaries so that every coordinate is decided once."""

    def __init__(self, policy: str, meta: TensorMeta, schema: pa.Schema):
        check_policy(policy, meta)
        self.policy = policy
        self.meta = meta
        self.schema = schema
        self.carry: tuple[pa.RecordBatch, np.ndarray] | None = None
        self.rows_out = 0

    def feed(self, batch: pa.RecordBatch, keys: np.ndarray):
        if self.policy == "keep":
            self.rows_out += batch.num_rows
            yield batch
            return
        if batch.num_rows == 0:
            return
        if self.carry is not None:
            # Only the rows continuing the carried key join it (not the whole batch: a copy).
            carried, ckeys = self.carry
            head = int(np.searchsorted(keys, ckeys[-1:], side="right")[0])
            if head:
                carried = pa.Table.from_batches([carried, batch.slice(0, head)]).combine_chunks().to_batches()[0]
                ckeys = np.concatenate([ckeys, keys[:head]])
                batch, keys = batch.slice(head), keys[head:]
            if batch.num_rows == 0:
                self.carry = (carried, ckeys)
                return
            self.carry = None
            yield self._reduce(carried, ckeys)
        # Hold back the last key's rows: the next batch may continue them.
        tail = int(np.searchsorted(keys, keys[-1], side="left"))
        self.carry = (batch.slice(tail), keys[tail:])
        if tail:
            yield self._reduce(batch.slice(0, tail), keys[:tail])

    def finish(self):
        if self.carry is not None and self.carry[0].num_rows:
            yield self._reduce(*self.carry)
        self.carry = None

    def _reduce(self, batch: pa.RecordBatch, keys: np.ndarray) -> pa.RecordBatch:
        n = len(keys)
        change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        starts = np.concatenate([[0], change]).astype(np.int64)
        if len(starts) == n:
            self.rows_out += n
            return batch
        if self.policy == "error":
            first = int(np.flatnonzero(np.diff(starts, append=n) > 1)[0])
            row = batch_keys(batch.slice(int(starts[first]), 1), self.meta.sparse_ndim)[:, 0]
            raise DataError(f"coordinate {tuple_text(row)} is repeated (--duplicates error)")
        if self.policy in ("first", "last"):
            pick = starts if self.policy == "first" else np.append(starts[1:], n) - 1
            out = batch.take(arrow_of(pick))
        else:
            K = self.meta.sparse_ndim
            keys_arr = batch_keys(batch, K)[:, starts]
            vals = batch_values(batch, self.meta)
            if self.meta.value_type == "bool":
                ufunc = np.logical_or if self.policy == "sum" else (np.logical_and if self.policy == "min"
                                                                    else np.logical_or)
            else:
                ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[self.policy]
            with np.errstate(over="ignore"):
                reduced = ufunc.reduceat(vals, starts, axis=0).astype(vals.dtype, copy=False)
            out = make_batch(keys_arr, reduced, self.meta, self.schema)
        self.rows_out += out.num_rows
        return out
