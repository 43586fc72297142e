"""group: iterate over runs of rows that share their coordinates on some dimensions."""

from __future__ import annotations

from collections.abc import Iterator

from .._args import whole_numbers
from .._memory import budget_of
from ..io import TensorSource, open_source
from ..stream.group import group_source, group_tensor
from ..tensor import SparseTensor


def group(tensor, dims, *, sort: bool = False, memory=None, tmp_dir: str | None = None) -> Iterator[tuple]:
    """Groups of rows sharing their coordinates on ``dims``: (group key, (m, K) indices, values)
    per group, in order (TensorFlow's C++ ``SparseTensor::group``).

    ``tensor`` is a SparseTensor, an open source (``sptool.open``) or a path.  The rows must be
    sorted with ``dims`` leading the sort order; ``sort=True`` sorts first (in memory for a
    SparseTensor, with the external sort within ``memory`` otherwise).  One group is held whole.

    Examples
    --------
    >>> [key for key, _, _ in group("sample_data/tensor3d.parquet", [0])][:3]
    [(0,), (1,), (2,)]
    """
    dims = whole_numbers(dims, "dims")
    budget = budget_of(memory)
    if isinstance(tensor, SparseTensor):
        yield from group_tensor(tensor, dims, sort=sort)
    elif isinstance(tensor, TensorSource):
        yield from group_source(tensor, dims, sort=sort, budget=budget, tmp_dir=tmp_dir)
    else:
        with open_source(tensor) as src:
            yield from group_source(src, dims, sort=sort, budget=budget, tmp_dir=tmp_dir)
