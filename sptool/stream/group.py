"""Iterating over runs of rows that share their coordinates on some dimensions.

TensorFlow's C++ SparseTensor::group: the rows must already be ordered with the grouping
dimensions leading the sort order; sptool refuses otherwise unless asked to sort (in memory
for a SparseTensor, with the external sort for a streaming source).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .._memory import Budget
from ..errors import UsageError
from ..io import batch_keys, batch_values
from .axes import normalize_axes
from .runs import whole_runs
from .values import runs


def group_order(dims, K: int, sort_order) -> tuple[tuple[int, ...], bool]:
    """(dims as non-negative ints, whether the rows are already ordered compatibly)."""
    dims = tuple(normalize_axes(dims, K, "group dimension"))
    if len(set(dims)) != len(dims):
        raise UsageError(f"group dimensions {list(dims)} repeat a dimension")
    return dims, tuple(sort_order[: len(dims)]) == dims


def _full_order(dims, K: int) -> tuple[int, ...]:
    """The sort used when asked to sort: the group dims, then the others (ties keep input order)."""
    return tuple(dims) + tuple(d for d in range(K) if d not in dims)


def _not_ordered(dims, sort_order) -> UsageError:
    return UsageError(
        f"grouping by dimensions {list(dims)} needs rows sorted with those dimensions first, but the sort "
        f"order is {list(sort_order)}; pass sort=True to sort first"
    )


def group_arrays(keys: np.ndarray, values: np.ndarray, dims) -> Iterator[tuple[tuple, np.ndarray, np.ndarray]]:
    """Groups of already-ordered (K, n) keys: (group key, (m, K) indices, values)."""
    bounds = runs(keys, dims)
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield tuple(int(keys[d, a]) for d in dims), keys[:, a:b].T, values[a:b]


def group_tensor(tensor, dims, *, sort: bool = False):
    dims, ordered = group_order(dims, tensor.sparse_ndim, tensor.sort_order)
    keys, values = tensor.keys, tensor.values
    if not ordered:
        if not sort:
            raise _not_ordered(dims, tensor.sort_order)
        perm = np.lexsort(keys[list(_full_order(dims, tensor.sparse_ndim))][::-1])
        keys, values = keys[:, perm], values[perm]
    yield from group_arrays(keys, values, dims)


def group_source(src, dims, *, sort: bool = False, budget: Budget, tmp_dir=None):
    """Groups of a streaming source, carrying a group that spans batches; bounded memory per
    group batch (a single group is held whole)."""
    from .order import sorted_batches

    meta = src.meta
    K = meta.sparse_ndim
    dims, ordered = group_order(dims, K, meta.sort_order)
    if not ordered and not sort:
        raise _not_ordered(dims, meta.sort_order)
    # A claimed order is passed through and checked as the rows pass (a group met twice would
    # be split), else the rows are sorted.
    pairs = ((batch_keys(b, K), batch_values(b, meta))
             for b, _ in sorted_batches(src, dims if ordered else _full_order(dims, K), budget=budget,
                                        tmp_dir=tmp_dir, keys=False))
    for keys, values in whole_runs(pairs, dims):
        yield from group_arrays(keys, values, dims)
