"""Plain NumPy versions of the compiled kernels, with the same signatures.

Used only as the test oracle (tests/test_kernels.py); the library always runs the compiled
kernels, and a broken build fails at import instead of falling back to these.
"""

from __future__ import annotations

import numpy as np

ORDER_OK, OUT_OF_ORDER, REPEATED = 0, 1, 2


def first_out_of_bounds(keys, shape):
    keys = np.asarray(keys)
    bad = (keys < 0) | (keys >= np.asarray(shape)[:, None])
    rows = np.flatnonzero(bad.any(axis=0))
    if not len(rows):
        return -1, -1
    row = int(rows[0])
    return row, int(np.flatnonzero(bad[:, row])[0])


def first_order_violation(keys, order, check_repeats, prev=None):
    keys = np.asarray(keys)
    order = list(order)
    if not order or keys.shape[1] == 0:
        return -1, ORDER_OK
    if prev is not None:
        keys = np.concatenate([np.asarray(prev), keys], axis=1)
    sub = keys[order]
    for i in range(1, sub.shape[1]):
        a, b = tuple(sub[:, i - 1]), tuple(sub[:, i])
        if a > b or (a == b and check_repeats):
            return i - (1 if prev is not None else 0), OUT_OF_ORDER if a > b else REPEATED
    return -1, ORDER_OK


def linear_offsets(keys, strides, out):
    out[:] = (np.asarray(keys) * np.asarray(strides)[:, None]).sum(axis=0)


def scatter_add(offsets, values, out):
    np.add.at(out, offsets, values)


def scatter_or(offsets, values, out):
    np.bitwise_or.at(out, offsets, (np.asarray(values) != 0).astype(out.dtype))


def column_minmax(col):
    col = np.asarray(col)
    return int(col.min()), int(col.max())
