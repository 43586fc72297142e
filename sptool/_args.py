"""The public functions' checks of their scalar-integer, axis and shape-like arguments, in one
place: a value of the wrong type is a UsageError naming the argument, never a TypeError or
ValueError from deep inside an op.  Ranges (an axis within the rank, a size >= 1) are the ops'
own rules, checked where they are known; these checks are of the types only, and what an int
means is an int: a bool, a float (even 2.0) or text is refused, a NumPy integer is taken.
Dense operands (a .npy path or an array) are told apart here too, so that no number or list is
ever opened as a file name."""

from __future__ import annotations

import numbers
import operator
import os

import numpy as np

from .errors import UsageError


def _shown(value) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(value):
    """The int ``value`` stands for, or None when it is not one."""
    if isinstance(value, (bool, np.bool_, float, np.floating, complex, np.complexfloating, str, bytes)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def whole_number(value, name: str) -> int:
    """``value`` (an int or a NumPy integer) as an int; ``name`` is the argument's."""
    number = _whole(value)
    if number is None:
        raise UsageError(f"{name} must be a whole number, not {_shown(value)}")
    return number


def optional_whole_number(value, name: str) -> int | None:
    return None if value is None else whole_number(value, name)


def _items(value, name: str) -> list:
    """The elements of a list-like argument (a list, a tuple, a 1-D array), refusing anything else."""
    if isinstance(value, (str, bytes, dict, set)) or not hasattr(value, "__iter__") or (
            isinstance(value, np.ndarray) and value.ndim != 1):
        raise UsageError(f"{name} must be a list of whole numbers, not {_shown(value)}")
    return list(value)


def whole_numbers(value, name: str) -> tuple[int, ...]:
    """``value`` (a list, tuple or 1-D array of whole numbers: an order, a permutation, axes, a
    start) as a tuple of ints."""
    numbers = [_whole(v) for v in _items(value, name)]
    if any(n is None for n in numbers):
        raise UsageError(f"{name} must be a list of whole numbers, not {_shown(value)}")
    return tuple(numbers)


def axes_of(value, name: str) -> tuple[int, ...] | None:
    """An axis argument that takes one axis or several: None (every axis), a whole number or a
    list of them, as a tuple."""
    if value is None:
        return None
    if _whole(value) is not None:
        return (_whole(value),)
    return whole_numbers(value, name)


def shape_of(value, name: str, *, unknown: bool = False) -> tuple:
    """A shape: a list of extents >= 0 (None for an extent still unknown, with ``unknown``)."""
    items = _items(value, name)
    extents = [None if v is None and unknown else _whole(v) for v in items]
    if any(e is None for e, v in zip(extents, items) if v is not None or not unknown):
        raise UsageError(f"{name} must be a list of whole numbers, not {_shown(value)}")
    if any(e is not None and e < 0 for e in extents):
        raise UsageError(f"{name} {list(extents)} has a negative extent")
    return tuple(extents)


def array_or_path(value, name: str):
    """A dense operand: the path of a .npy file (a str or os.PathLike, as a str) or an array (a
    NumPy array as it is; a number or a list as np.asarray makes it, so that the op's own
    checks of rank and type name what is wrong).  Anything else is a UsageError naming the
    argument: a number is never taken for a file name."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, (numbers.Number, np.generic, list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:
            array = None
        if array is not None and array.dtype != object:
            return array
        raise UsageError(f"{name} must be a rectangular array of numbers, not {_shown(value)}")
    raise UsageError(f"{name} must be a .npy path or an array, not {type(value).__name__}")
