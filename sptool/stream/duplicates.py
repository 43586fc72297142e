"""Rows that share a coordinate, once they are adjacent (sorted): the --duplicates policies, and
summing duplicates in the tensor's own value type.

The format says repeated coordinates mean their sum *in the value type* (logical OR for bool,
wrap-around for integers).  An op that converts values to a wider type (mul by a float .npy,
the mean of integers, a bool matrix times floats) and then lets duplicates accumulate would add
them in the wider type instead: True + True = 2, not True.  Such ops read through
``summed_if_promoted`` (stream/order.py), which sums duplicates in the value type first when that
can differ.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._messages import tuple_text
from ..errors import DataError, UsageError
from ..format import TensorMeta
from ..io import arrow_of, batch_keys, batch_values, make_batch
from .values import runs, segment

POLICIES = ("keep", "sum", "min", "max", "first", "last", "error")


def check_policy(policy: str, meta: TensorMeta):
    if policy not in POLICIES:
        raise UsageError(f"--duplicates must be one of {', '.join(POLICIES)}, not {policy!r}")
    vt = meta.value_type
    if policy == "sum" and vt in ("string", "binary"):
        raise UsageError(f"duplicates of a {vt} tensor cannot be summed; use first, last or error")
    if policy in ("min", "max") and (vt.startswith("complex") or vt in ("string", "binary")):
        raise UsageError(f"--duplicates {policy} needs ordered values; {vt} values have no order")


_UFUNCS = {"sum": np.add, "min": np.minimum, "max": np.maximum}
# Duplicates of bool values mean their logical OR (the format's sum); min and max are AND and OR.
_BOOL_UFUNCS = {"sum": np.logical_or, "min": np.logical_and, "max": np.logical_or}


def run_picks(policy: str, bounds: np.ndarray) -> np.ndarray:
    """The row each run keeps under first / last (``bounds``: the run offsets, then n)."""
    return bounds[:-1] if policy == "first" else bounds[1:] - 1


def combine_runs(policy: str, values: np.ndarray, bounds: np.ndarray, *, kernel: bool = False) -> np.ndarray:
    """One value per run of rows sharing a coordinate (``bounds``: the run offsets, then n), by a
    duplicates policy: sum (logical OR for bool), min, max, first or last.  The one place
    duplicates are combined: ``kernel=True`` for values laid out for the compiled kernels ((n, m)
    in values.kernel_dtype, bool as uint8), which reduce there; other layouts with NumPy."""
    if policy in ("first", "last"):
        return values[run_picks(policy, bounds)]
    if kernel:
        return segment(policy, values, bounds)
    ufunc = (_BOOL_UFUNCS if values.dtype == np.bool_ else _UFUNCS)[policy]
    with np.errstate(over="ignore"):
        return ufunc.reduceat(values, bounds[:-1], axis=0).astype(values.dtype, copy=False)


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
        bounds = np.append(starts, n)
        if self.policy in ("first", "last"):
            out = batch.take(arrow_of(run_picks(self.policy, bounds)))  # whole rows, any value type
        else:
            keys_arr = batch_keys(batch, self.meta.sparse_ndim)[:, starts]
            reduced = combine_runs(self.policy, batch_values(batch, self.meta), bounds)
            out = make_batch(keys_arr, reduced, self.meta, self.schema)
        self.rows_out += out.num_rows
        return out








def sum_duplicates(pairs, *, is_bool: bool = False):
    """Combine adjacent rows with equal coordinates by summing them (OR for bool values, given
    as uint8): (keys (K, n), values (n, m)) in, the same with unique adjacent coordinates out.
    The last coordinate of a batch is held back, as the next batch may continue it."""
    op = "max" if is_bool else "sum"
    carry = None
    for keys, vals in pairs:
        n = keys.shape[1]
        if n == 0:
            continue
        starts = runs(keys, range(keys.shape[0]))
        if len(starts) - 1 < n:
            keys = np.ascontiguousarray(keys[:, starts[:-1]])
            vals = combine_runs(op, vals, starts, kernel=True)
        if carry is not None:
            ck, cv = carry
            if np.array_equal(ck[:, 0], keys[:, 0]):
                vals = vals.copy()
                joined = np.ascontiguousarray(np.concatenate([cv[:1], vals[:1]]))
                vals[0] = combine_runs(op, joined, np.array([0, 2], dtype=np.int64), kernel=True)[0]
            else:
                yield ck, cv
        carry = (keys[:, -1:].copy(), vals[-1:].copy())
        if keys.shape[1] > 1:
            yield keys[:, :-1], vals[:-1]
    if carry is not None:
        yield carry


