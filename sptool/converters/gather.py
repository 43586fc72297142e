"""The writers of formats held whole in memory (.npz, binsparse): rows gathered batch by batch,
checked against --memory as they come, then concatenated once."""

from __future__ import annotations

import numpy as np

from .._memory import format_size
from ..errors import ResourceError
from ..format import TensorMeta
from ..io import row_bytes
from .common import Options


class GatheringWriter:
    """``what`` names the output in the refusal ("a .npz archive"); ``value_dtype`` is the dtype
    values are stored as (float16 as float32 where the format has no float16)."""

    what = "the output"

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, *, what: str | None = None):
        self.what = what or self.what
        self.meta = meta
        self.dst = dst
        self.budget = opts.budget
        self.row_bytes = row_bytes(meta) * 3  # the rows, their concatenation, the writer's copy
        if meta.nnz is not None:
            self._check(meta.nnz)
        self.keys: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.rows = 0

    @property
    def value_dtype(self) -> np.dtype:
        return np.dtype(np.float32) if self.meta.value_type == "float16" else self.meta.dtype

    def _check(self, rows: int):
        need = rows * self.row_bytes
        if need > self.budget.usable:
            raise ResourceError(
                f"{self.what} is written from memory; {rows} entries need about {format_size(need)}, more "
                f"than the {format_size(self.budget.usable)} that --memory {format_size(self.budget.total)} leaves "
                "for data; raise --memory", path=self.dst)

    def write(self, keys, values):
        self.rows += keys.shape[1]
        self._check(self.rows)
        self.keys.append(np.array(keys, dtype=np.int64))
        self.values.append(np.asarray(values))

    def resolve_shape(self, shape):
        """Extents a reader knows only at the end (svmlight's rows, empty last rows included)."""
        self.meta = self.meta.with_(shape=tuple(shape))

    def gathered(self) -> tuple[np.ndarray, np.ndarray, tuple]:
        """(keys (K, n), values as ``value_dtype``, shape with open extents as max + 1)."""
        K = self.meta.sparse_ndim
        keys = np.concatenate(self.keys, axis=1) if self.keys else np.empty((K, 0), dtype=np.int64)
        dtype = self.value_dtype
        values = np.concatenate(self.values).astype(dtype) if self.values else np.empty(0, dtype=dtype)
        shape = tuple(int(keys[k].max()) + 1 if s is None and keys.shape[1] else (s or 0)
                      for k, s in enumerate(self.meta.shape))
        return keys, values, shape
