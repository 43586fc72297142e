"""Rows that share a coordinate, once they are adjacent (sorted): the --duplicates policies, and
summing duplicates in the tensor's own value type.

The format says repeated coordinates mean their sum *in the value type* (logical OR for bool,
wrap-around for integers).  An op that converts values to a wider type (mul by a float .npy,
the mean of integers, a bool matrix times floats) and then lets duplicates accumulate would add
them in the wider type instead: True + True = 2, not True.  Such ops read through
``summed_if_promoted``, which sums duplicates in the value type first when that can differ.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._memory import Budget, budget_of
from .._messages import tuple_text
from ..errors import DataError, UsageError
from ..format import TensorMeta
from ..io import TensorSource, arrow_of, batch_keys, batch_values, make_batch
from .order import ordered_batches
from .values import _UFUNC, as_kernel, from_kernel, kernel_dtype, runs, segment

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


class SummedSource(TensorSource):
    """``src`` with every coordinate once (rows sorted row-major unless already in a full order)."""

    kind = "summed"

    def __init__(self, src: TensorSource, *, tmp_dir: str | None = None):
        meta = src.meta
        K = meta.sparse_ndim
        self.order = meta.sort_order if len(meta.sort_order) == K else tuple(range(K))
        # Sums of different numbers of equal values differ: an iso claim does not survive.
        super().__init__(src.path, meta.with_(sort_order=self.order, unique=True, nnz=None, iso=False), src.schema)
        self.src = src
        self.tmp_dir = tmp_dir

    def iter_batches(self, batch_rows=None, *, budget: Budget | None = None):
        meta = self.src.meta
        kdtype = kernel_dtype(meta.dtype)
        batches = ordered_batches(self.src, self.order, budget=budget_of(budget), tmp_dir=self.tmp_dir, path=self.path)
        pairs = ((keys, as_kernel(batch_values(b, meta), keys.shape[1], kdtype)) for keys, b in batches)
        for keys, vals in sum_duplicates(pairs, is_bool=meta.value_type == "bool"):
            yield make_batch(keys, from_kernel(vals, meta.dtype, meta.dense_shape), self.meta, self.schema)


def summed_if_promoted(src: TensorSource, dtype, *, tmp_dir: str | None = None) -> TensorSource:
    """``src`` itself when accumulating its values in ``dtype`` gives the format's answer (the rows
    are unique, or ``dtype`` is the value type and not bool); otherwise a SummedSource."""
    meta = src.meta
    if meta.unique or meta.value_type in ("string", "binary"):
        return src
    if np.dtype(dtype) == meta.dtype and meta.value_type != "bool":
        return src
    return SummedSource(src, tmp_dir=tmp_dir)




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
            vals = segment(op, vals, starts)
        if carry is not None:
            ck, cv = carry
            if np.array_equal(ck[:, 0], keys[:, 0]):
                vals = vals.copy()
                with np.errstate(all="ignore"):
                    vals[0] = _UFUNC[op](cv[0], vals[0])
            else:
                yield ck, cv
        carry = (keys[:, -1:].copy(), vals[-1:].copy())
        if keys.shape[1] > 1:
            yield keys[:, :-1], vals[:-1]
    if carry is not None:
        yield carry


