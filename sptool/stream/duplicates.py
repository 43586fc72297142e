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
from .runs import whole_key_runs, whole_runs
from .values import _UFUNC, as_kernel, from_kernel, kernel_dtype, runs, segment

POLICIES = ("keep", "sum", "min", "max", "first", "last", "error")
# Partial products meeting at one coordinate (reduce --op prod part by part) multiply: a policy
# the engine combines with, not one --duplicates offers.
COMBINING = POLICIES + ("prod",)


def check_policy(policy: str, meta: TensorMeta, allowed: tuple = POLICIES):
    if policy not in allowed:
        raise UsageError(f"--duplicates must be one of {', '.join(allowed)}, not {policy!r}")
    vt = meta.value_type
    if policy == "sum" and vt in ("string", "binary"):
        raise UsageError(f"duplicates of a {vt} tensor cannot be summed; use first, last or error")
    if policy in ("min", "max") and (vt.startswith("complex") or vt in ("string", "binary")):
        raise UsageError(f"--duplicates {policy} needs ordered values; {vt} values have no order")


# Duplicates of bool values mean their logical OR (the format's sum); min and max are AND and OR.
_BOOL_UFUNCS = {"sum": np.logical_or, "min": np.logical_and, "max": np.logical_or}


def run_picks(policy: str, bounds: np.ndarray) -> np.ndarray:
    """The row each run keeps under first / last (``bounds``: the run offsets, then n)."""
    return bounds[:-1] if policy == "first" else bounds[1:] - 1


def combine_runs(policy: str, values: np.ndarray, bounds: np.ndarray, *, kernel: bool = False) -> np.ndarray:
    """One value per run of rows sharing a coordinate (``bounds``: the run offsets, then n), by a
    duplicates policy: sum (logical OR for bool), min, max, prod, first or last.  The one place
    duplicates are combined: ``kernel=True`` for values laid out for the compiled kernels ((n, m)
    in values.kernel_dtype, bool as uint8), which reduce there; other layouts with NumPy."""
    if policy in ("first", "last"):
        return values[run_picks(policy, bounds)]
    if kernel:
        return segment(policy, values, bounds)
    ufunc = (_BOOL_UFUNCS if values.dtype == np.bool_ else _UFUNC)[policy]
    with np.errstate(over="ignore"):
        return ufunc.reduceat(values, bounds[:-1], axis=0).astype(values.dtype, copy=False)


def deduplicated(pairs, policy: str, meta: TensorMeta, schema: pa.Schema | None = None):
    """Batches of a stream of (batch, sort keys) pairs in key order with ``policy`` applied to
    the rows sharing a coordinate, every coordinate decided once (runs carried whole across
    batches)."""
    check_policy(policy, meta, COMBINING)
    if policy == "keep":
        for batch, _ in pairs:
            yield batch
        return
    schema = meta.arrow_schema() if schema is None else schema
    for keys, batch in whole_key_runs((keys, batch) for batch, keys in pairs):
        yield _apply(policy, batch, keys, meta, schema)


def _apply(policy: str, batch: pa.RecordBatch, keys: np.ndarray, meta: TensorMeta, schema) -> pa.RecordBatch:
    n = len(keys)
    change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate([[0], change]).astype(np.int64)
    if len(starts) == n:
        return batch
    if policy == "error":
        first = int(np.flatnonzero(np.diff(starts, append=n) > 1)[0])
        row = batch_keys(batch.slice(int(starts[first]), 1), meta.sparse_ndim)[:, 0]
        raise DataError(f"coordinate {tuple_text(row)} is repeated (--duplicates error)")
    bounds = np.append(starts, n)
    if policy in ("first", "last"):
        return batch.take(arrow_of(run_picks(policy, bounds)))  # whole rows, any value type
    keys_arr = batch_keys(batch, meta.sparse_ndim)[:, starts]
    values = batch_values(batch, meta)
    if meta.hybrid and values.dtype.kind in "iuf" and kernel_dtype(values.dtype) == values.dtype:
        # Dense blocks through the compiled segment reduction: ufunc.reduceat along the rows of a
        # 2-D array took 0.33 s for 100k rows of 64 float32 (a row-sparse gradient), measured.
        flat = combine_runs(policy, as_kernel(values, n, values.dtype), bounds, kernel=True)
        reduced = from_kernel(flat, values.dtype, meta.dense_shape)
    else:
        reduced = combine_runs(policy, values, bounds)
    return make_batch(keys_arr, reduced, meta, schema)


def sum_duplicates(pairs, *, is_bool: bool = False):
    """Combine rows with equal coordinates by summing them (OR for bool values, given as uint8):
    (keys (K, n), values (n, m)) sorted in a full order in, the same with every coordinate once
    out."""
    op = "max" if is_bool else "sum"
    for keys, vals in whole_runs(pairs, None):
        starts = runs(keys, range(keys.shape[0]))
        if len(starts) - 1 < keys.shape[1]:
            keys = np.ascontiguousarray(keys[:, starts[:-1]])
            vals = combine_runs(op, vals, starts, kernel=True)
        yield keys, vals
