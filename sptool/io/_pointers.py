"""The pointer arrays of compressed sparse matrices (CSR's indptr, binsparse's pointers_to_1),
checked once for every format that stores one."""

from __future__ import annotations

import numpy as np


def pointer_problem(ptr: np.ndarray, name: str, *, offset: int = 0, first: int | None = None,
                    last: int | None = None) -> str | None:
    """What is wrong with ``ptr``, the pointers ``name[offset : offset + len(ptr)]``: the first of
    not starting at ``first``, decreasing, and not ending at ``last`` (each end checked when
    given), naming the position; None when nothing is."""
    if first is not None and len(ptr) and ptr[0] != first:
        return f"{name}[{offset}] = {ptr[0]}, not {first}"
    down = np.flatnonzero(ptr[1:] < ptr[:-1])
    if len(down):
        at = offset + int(down[0]) + 1
        return f"{name}[{at}] = {ptr[down[0] + 1]} is below {name}[{at - 1}] = {ptr[down[0]]}: {name} never decreases"
    if last is not None and len(ptr) and ptr[-1] != last:
        return f"{name}[{offset + len(ptr) - 1}] = {ptr[-1]}, but there are {last} entries"
    return None
