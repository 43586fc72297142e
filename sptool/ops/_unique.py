"""A source whose repeated coordinates are summed first, in the tensor's own value type.

The format says repeated coordinates mean their sum *in the value type* (logical OR for bool,
wrap-around for integers).  An op that converts values to a wider type (mul by a float .npy,
the mean of integers, a bool matrix times floats) and then lets duplicates accumulate would add
them in the wider type instead: True + True = 2, not True.  Such ops read through
``summed_if_promoted``, which sums duplicates in the value type first when that can differ.
"""

from __future__ import annotations

import numpy as np

from ..io._arrays import batch_values, make_batch
from ..io.source import TensorSource
from .reduce import as_kernel, from_kernel, kernel_dtype, ordered_batches, sum_duplicates


class SummedSource(TensorSource):
    """``src`` with every coordinate once (rows sorted row-major unless already in a full order)."""

    kind = "summed"

    def __init__(self, src: TensorSource, *, tmp_dir: str | None = None):
        meta = src.meta
        K = meta.sparse_ndim
        self.order = meta.sort_order if len(meta.sort_order) == K else tuple(range(K))
        # Sums of different numbers of equal values differ: an iso claim does not survive.
        super().__init__(src.path, meta.with_(sort_order=self.order, unique=True, nnz=None, iso=False), src.schema)
        self.src = src
        self.tmp_dir = tmp_dir

    def iter_batches(self, batch_rows=None, *, memory=None):
        meta = self.src.meta
        kdtype = kernel_dtype(meta.dtype)
        batches = ordered_batches(self.src, self.order, memory=memory, tmp_dir=self.tmp_dir, path=self.path)
        pairs = ((keys, as_kernel(batch_values(b, meta), keys.shape[1], kdtype)) for keys, b in batches)
        for keys, vals in sum_duplicates(pairs, is_bool=meta.value_type == "bool"):
            yield make_batch(keys, from_kernel(vals, meta.dtype, meta.dense_shape), self.meta, self.schema)


def summed_if_promoted(src: TensorSource, dtype, *, tmp_dir: str | None = None) -> TensorSource:
    """``src`` itself when accumulating its values in ``dtype`` gives the format's answer (the rows
    are unique, or ``dtype`` is the value type and not bool); otherwise a SummedSource."""
    meta = src.meta
    if meta.unique or meta.value_type in ("string", "binary"):
        return src
    if np.dtype(dtype) == meta.dtype and meta.value_type != "bool":
        return src
    return SummedSource(src, tmp_dir=tmp_dir)
