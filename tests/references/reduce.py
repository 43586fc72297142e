"""Plain NumPy versions of the kernels in sptool/_reduce.pyx, with the same signatures.

Used only as the test oracle (tests/test_reduce_kernels.py); the library always runs the
compiled kernels.
"""

from __future__ import annotations

import numpy as np


def run_starts(keys, dims, out):
    keys = np.asarray(keys)
    n = keys.shape[1]
    if n == 0:
        out[0] = 0
        return 0
    sub = keys[list(dims)]
    change = np.flatnonzero((sub[:, 1:] != sub[:, :-1]).any(axis=0)) + 1
    starts = np.concatenate([[0], change, [n]])
    out[: len(starts)] = starts
    return len(starts) - 1


def group_cells(columns, n, bounds, n_group, strides, width, cells, starts):
    """``columns`` is a list of int64 arrays, as the kernel takes them."""
    keys = np.stack(columns) if len(columns) else np.zeros((0, n), np.int64)
    bad = np.flatnonzero(((keys < 0) | (keys >= np.asarray(bounds)[:, None])).any(axis=0))
    if len(bad):
        return -(int(bad[0]) + 1)
    g = run_starts(keys, range(n_group), starts)
    group = np.repeat(np.arange(g), np.diff(starts[: g + 1])) if n else np.zeros(0, np.int64)
    cells[:n] = group * width + (keys * np.asarray(strides)[:, None]).sum(axis=0)
    return g


def group_block_sum(columns, n, bounds, strides, extents, values, head, head_counts, tail, tail_counts, keys, vals,
                    counts_out):
    cols = np.stack(columns)
    E = len(head_counts)
    bounds = np.asarray(bounds)
    cells = (cols[1:] * np.asarray(strides)[1:, None]).sum(axis=0)
    lead_bad = (cols[0] < 0) | (cols[0] >= bounds[0])
    down = np.concatenate([[False], cols[0][1:] < cols[0][:-1]])
    rest_bad = ((cols[1:] < 0) | (cols[1:] >= bounds[1:, None])).any(axis=0)
    outside = (cells < 0) | (cells >= E)
    for i in np.flatnonzero(lead_bad | down | rest_bad | outside)[:1]:
        return (int(i) if lead_bad[i] or (rest_bad[i] and not down[i]) else -2 - int(i)), 0
    values = np.asarray(values)
    lead = cols[0]
    first, last = lead[0], lead[-1]
    ends = ((lead == first, head, head_counts), ((lead == last) & (lead != first), tail, tail_counts))
    for mask, acc, counts in ends:
        np.add.at(acc, cells[mask], values[mask])
        np.add.at(counts, cells[mask], 1)
    middle = (lead != first) & (lead != last)
    slot = (lead[middle] - first) * E + cells[middle]
    touched, inverse, rows = np.unique(slot, return_inverse=True, return_counts=True)
    g = len(touched)
    sums = np.zeros((g,) + values.shape[1:], dtype=values.dtype)
    np.add.at(sums, inverse.reshape(-1), values[middle])
    keys[0, :g] = first + touched // E
    if len(extents):
        keys[1:, :g] = np.unravel_index(touched % E, tuple(extents))
    vals[:g] = sums
    counts_out[:g] = rows
    return -1, g


def compact_cells(counts, lo, hi, width, first, extents, acc, keys, vals, counts_out):
    if width <= 0 or lo % width or hi % width:
        raise ValueError("lo and hi must be multiples of width within the accumulator")
    touched = lo + np.flatnonzero(np.asarray(counts)[lo:hi])
    g = len(touched)
    if g > len(counts_out):
        raise IndexError("more touched slots than the outputs hold")
    keys[0, :g] = first + touched // width
    if len(extents):
        keys[1:, :g] = np.unravel_index(touched % width, tuple(extents))
    vals[:g] = np.asarray(acc)[touched]
    counts_out[:g] = np.asarray(counts)[touched]
    return g

def _segments(values, starts, ufunc, out):
    starts = np.asarray(starts)
    if len(starts) > 1:
        with np.errstate(all="ignore"):
            out[:] = ufunc.reduceat(np.asarray(values), starts[:-1], axis=0)


def segment_sum(values, starts, out):
    _segments(values, starts, np.add, out)


def segment_prod(values, starts, out):
    _segments(values, starts, np.multiply, out)


def segment_max(values, starts, out):
    _segments(values, starts, np.maximum, out)


def segment_min(values, starts, out):
    _segments(values, starts, np.minimum, out)


def segment_softmax(values, starts, out):
    values = np.asarray(values)
    for a, b in zip(starts[:-1], starts[1:]):
        block = values[a:b]
        with np.errstate(all="ignore"):
            e = np.exp(block - block.max(axis=0))
            out[a:b] = e / e.sum(axis=0)


def _scatter(cells, base, values, acc, counts, ufunc):
    offsets = np.asarray(cells) - base
    if len(offsets) and (offsets.min() < 0 or offsets.max() >= len(counts)):
        raise IndexError("a cell is outside the accumulator")
    values = np.asarray(values)
    with np.errstate(all="ignore"):
        for i, o in enumerate(offsets):
            acc[o] = values[i] if counts[o] == 0 and ufunc is not np.add else ufunc(acc[o], values[i])
            counts[o] += 1


def scatter_sum(cells, base, values, acc, counts):
    _scatter(cells, base, values, acc, counts, np.add)


def scatter_prod(cells, base, values, acc, counts):
    _scatter(cells, base, values, acc, counts, np.multiply)


def scatter_max(cells, base, values, acc, counts):
    _scatter(cells, base, values, acc, counts, np.maximum)


def scatter_min(cells, base, values, acc, counts):
    _scatter(cells, base, values, acc, counts, np.minimum)
