"""The iso claim (formats/SPEC.md section 5): every scalar element of ``values`` (every row, every
block position; a complex value with both its components) has the same bit pattern."""

from __future__ import annotations

import numpy as np


def scalar_elements(values: np.ndarray) -> np.ndarray:
    """The scalar elements of an (n,) or (n, *block) values array in row-major order: numbers as
    their bit patterns (so NaN equals NaN and -0.0 differs from 0.0), a complex128 value as a row
    of its 16 bytes; strings and bytes as they are."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.dtype == object:
        return flat
    size = flat.dtype.itemsize
    if size in (1, 2, 4, 8):
        return flat.view(np.dtype(f"u{size}"))
    return flat.view(np.uint8).reshape(len(flat), size)


class IsoCheck:
    """One iso claim followed across batches: each batch's elements are compared with the first
    element seen.  Rows are numbered by the caller (``at``, the number of a batch's first row),
    so a reader names its input's rows and a writer its output's."""

    def __init__(self):
        self.first = None
        self.first_at = 0

    def first_break(self, values: np.ndarray, at: int = 0) -> int:
        """The first row of ``values`` holding an element that differs from the first one seen
        (taken from this batch when none was), or -1."""
        n = len(values)
        elements = scalar_elements(values)
        if not n or not len(elements):
            return -1
        if self.first is None:
            self.first, self.first_at = elements[:1].copy(), at
        differ = elements != self.first
        if differ.ndim > 1:
            differ = differ.any(axis=1)
        bad = np.flatnonzero(differ)
        return int(bad[0]) // (len(elements) // n) if len(bad) else -1

    def broken(self, at: int) -> str:
        return f"values[{at}] differs from values[{self.first_at}], although the metadata says iso true"
