"""The TensorFlow-style messages that name an offending entry, spelled once."""

from __future__ import annotations

import numpy as np


def tuple_text(values) -> str:
    return "[" + ",".join(str(int(v)) for v in values) + "]"


def row_text(keys, i: int) -> str:
    """Row i of the index columns (a (K, n) array or a list of K columns) as TensorFlow prints
    an index tuple: [1,0]."""
    return tuple_text([col[i] for col in keys])


def out_of_bounds(at: int, keys: np.ndarray, i: int, shape) -> str:
    return f"indices[{at}] = {row_text(keys, i)} is out of bounds: need 0 <= index < {tuple_text(shape)}"


def out_of_order(at: int, keys: np.ndarray, i: int) -> str:
    return f"indices[{at}] = {row_text(keys, i)} is out of order"


def repeated(at: int, keys: np.ndarray, i: int) -> str:
    return f"indices[{at}] = {row_text(keys, i)} is repeated"
