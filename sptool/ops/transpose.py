"""transpose: permute the sparse dimensions (TensorFlow's sparse transpose), output row-major sorted."""

from __future__ import annotations

import pyarrow as pa

from .._args import whole_numbers
from .._memory import budget_of
from ..errors import UsageError
from ..format import TensorMeta
from ..io import known_shape, open_input, schema_of
from ..stream.axes import normalize_axes
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor


def normalize_perm(perm, K: int, ndim: int) -> tuple[int, ...]:
    """A permutation of the K sparse dimensions (default: reversed).  A full-rank perm of a
    hybrid tensor is accepted when it leaves the dense dimensions in place."""
    if perm is None:
        return tuple(range(K - 1, -1, -1))
    perm = list(whole_numbers(perm, "--perm"))
    if len(perm) == ndim and ndim > K:
        axes = normalize_axes(perm, ndim, "perm entry")
        if axes[K:] != list(range(K, ndim)):
            raise UsageError(f"perm {perm} moves a dense dimension: transpose permutes only the {K} sparse "
                             f"dimension(s) of a tensor with dense dimensions {list(range(K, ndim))}")
        perm = axes[:K]
    if len(perm) != K:
        raise UsageError(f"perm {perm} must list each of the {K} sparse dimensions exactly once")
    axes = normalize_axes(perm, K, "perm entry")
    if sorted(axes) != list(range(K)):
        raise UsageError(f"perm {perm} is not a permutation of the {K} sparse dimensions 0..{K - 1}")
    return tuple(axes)


class Transpose(StreamOp):
    """Rows read in the dimension order ``perm`` are row-major once their columns are permuted."""

    def __init__(self, perm=None):
        self.perm = perm

    def plan(self, meta: TensorMeta) -> Plan:
        K = meta.sparse_ndim
        self.perm = perm = normalize_perm(self.perm, K, meta.ndim)
        shape = tuple(meta.shape[p] for p in perm) + meta.dense_shape
        names = meta.dimension_names
        if names is not None:
            names = tuple(names[p] for p in perm) + tuple(names[K:])
        out_meta = meta.with_(shape=shape, sort_order=tuple(range(K)), nnz=None, dimension_names=names,
                              created_by=None)
        self.schema = schema_of(out_meta)
        self.columns = list(perm) + [K]
        return Plan(out_meta, order=perm, unique_claim=True if meta.unique else None)

    def map(self, batch, keys):
        yield pa.RecordBatch.from_arrays([batch.column(c) for c in self.columns], schema=self.schema)


def transpose(path: str, output: str | None = None, *, perm=None, memory=None, tmp_dir: str | None = None,
              progress=None) -> dict:
    """Permute the sparse dimensions: output dimension k is input dimension ``perm[k]``
    (TensorFlow's sparse transpose; default perm reversed).  Dense dimensions stay last.

    The output is row-major sorted, like TensorFlow's (which reorders); rows sharing a
    coordinate are kept, adjacent, in input order.  Sorting the output row-major is sorting the
    input by the dimension order ``perm``, so an input already in that order streams through.

    Memory: an external merge sort within ``memory``, spilling sorted runs to ``tmp_dir``.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> transpose("sample_data/tensor3d.parquet", out)["shape"]
    [20, 30, 40]
    """
    budget = budget_of(memory)
    with open_input(path) as opened, known_shape(opened, tmp_dir) as src:
        op = Transpose(perm)
        sink = run(op, src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "perm": list(op.perm), "unique": final.unique}
