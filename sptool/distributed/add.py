"""add on a cluster: both operands shuffled into the same key ranges of the row-major order
(ranges.py), each range added by the single-machine add, so part i is the sum over range i."""

from __future__ import annotations

from functools import partial

from .._memory import budget_of
from ..errors import UsageError
from ..ops.add import add as add_one
from ..stream.binary import is_dense_path
from .ranges import on_ranges


def add(a: str, b: str | None = None, output: str | None = None, *, client, scalar=None, thresh=0,
        prune: bool = False, memory=None, tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.add`` of two sparse tensors on the Dask cluster of ``client``, written as a part
    directory whose parts are key ranges."""
    budget = budget_of(memory)
    if scalar is not None or b is None or is_dense_path(a) or is_dense_path(b):
        raise UsageError("on a cluster, add sums two sparse tensors (no --scalar or dense operand)")
    # The key: every sparse dimension, in order (on_ranges's default, from the footers it opens
    # anyway: no reading of a's footers of its own first).
    r = on_ranges(client, partial(add_one, thresh=thresh, prune=prune, memory=budget, tmp_dir=tmp_dir), [a, b],
                  output, memory=budget, progress=progress)
    return {**r, "dropped": sum(part["dropped"] for part in r.pop("results"))}
