"""Plain NumPy versions of the row copies in sptool/_journal.pyx, with the same signatures.

Used only as the test oracle; the library always runs the compiled loops.  ``release`` (giving
pages of a map back) changes no value, so it is accepted and ignored here.
"""

from __future__ import annotations

import numpy as np


def _check(height, rows):
    if len(rows) and (rows.min() < 0 or rows.max() >= height):
        raise ValueError("row id outside the map")
    if np.any(np.diff(rows) < 0):
        raise ValueError("row ids must be sorted")


def gather_rows(src, rows, out, release=0):
    _check(src.shape[0], rows)
    out[:] = src[rows]


def scatter_rows(dst, rows, src, release=0):
    _check(dst.shape[0], rows)
    dst[rows] = src
