"""transpose: permute the sparse dimensions (TensorFlow's sparse transpose), output row-major sorted."""

from __future__ import annotations

import pyarrow as pa

from ..errors import UsageError
from ..io import known_shape, open_sink, open_source
from ..stream.axes import normalize_axes
from ..stream.order import sorted_batches


def normalize_perm(perm, K: int, ndim: int) -> tuple[int, ...]:
    """A permutation of the K sparse dimensions (default: reversed).  A full-rank perm of a
    hybrid tensor is accepted when it leaves the dense dimensions in place."""
    if perm is None:
        return tuple(range(K - 1, -1, -1))
    perm = list(perm)
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


def transpose(path: str, output: str | None, *, perm=None, memory=None, tmp_dir: str | None = None,
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
    with open_source(path) as opened, known_shape(opened, tmp_dir) as src:
        meta = src.meta
        K = meta.sparse_ndim
        perm = normalize_perm(perm, K, meta.ndim)
        shape = tuple(meta.shape[p] for p in perm) + meta.dense_shape
        names = meta.dimension_names
        if names is not None:
            names = tuple(names[p] for p in perm) + tuple(names[K:])
        out_meta = meta.with_(shape=shape, sort_order=tuple(range(K)), nnz=None, dimension_names=names,
                              created_by=None)
        if progress:
            progress.set_total(meta.nnz)
        with open_sink(output, out_meta, unique_claim=True if meta.unique else None) as sink:
            for batch, _ in sorted_batches(src, perm, memory=memory, tmp_dir=tmp_dir, progress=progress):
                cols = [batch.column(p) for p in perm] + [batch.column(K)]
                sink.write_batch(pa.RecordBatch.from_arrays(cols, schema=sink.schema))
        final = sink.final_meta
    return {"rows": final.nnz, "shape": list(final.shape), "perm": list(perm), "unique": final.unique}
