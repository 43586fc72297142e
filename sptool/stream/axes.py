"""Axis arguments: negative values count from the end, as in TensorFlow."""

from __future__ import annotations

from .._args import whole_numbers
from ..errors import UsageError


def normalize_axes(axes, ndim: int, what: str = "axis") -> list[int]:
    """Axes as non-negative ints; negative ones count from the end (TensorFlow's rule)."""
    out = []
    for a in whole_numbers(axes, what):
        if not -ndim <= a < ndim:
            raise UsageError(f"{what} {a} is out of range for {ndim} dimensions (valid: {-ndim}..{ndim - 1})")
        out.append(a % ndim)
    return out


def normalize_order(order, K: int) -> tuple[int, ...]:
    if order is None:
        return tuple(range(K))
    order = normalize_axes(order, K, "dimension")
    if sorted(order) != list(range(K)):
        raise UsageError(f"--perm {list(order)} must list each of the {K} sparse dimensions exactly once")
    return tuple(order)
