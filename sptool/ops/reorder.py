"""reorder: sort the rows by a dimension order, in bounded memory, optionally merging duplicates."""

from __future__ import annotations

from .._args import whole_numbers
from .._memory import budget_of
from .._vocabulary import renamed_keywords
from ..io import known_shape, open_input
from ..stream.engine import run
from ..stream.reorder import Reorder
from ..tensor import SparseTensor


@renamed_keywords("perm")
def reorder(path: str, output: str | None = None, *, perm=None, duplicates: str = "keep", memory=None,
            tmp_dir: str | None = None, progress=None) -> dict:
    """Sort a tensor's rows by the dimension order ``perm`` (default row-major: TensorFlow's reorder);
    the rows come out in the order ``transpose(perm=perm)`` would give them.

    ``duplicates``: keep (repeated coordinates stay adjacent, in input order), sum (the
    canonical form: PyTorch's coalesce), min, max, first, last, or error.  An external merge
    sort: memory stays within ``memory``, spilling sorted runs to ``tmp_dir``.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "sorted.parquet")
    >>> reorder("sample_data/unsorted.parquet", out, duplicates="sum")["canonical"]
    True

    ``sptool.distributed.reorder`` runs the sort on a Dask cluster, writing a part directory.
    """
    order = None if perm is None else whole_numbers(perm, "--perm")
    budget = budget_of(memory)
    with open_input(path) as opened, known_shape(opened, tmp_dir) as src:
        rows_in = src.meta.nnz
        sink = run(Reorder(order, duplicates), src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows_in": rows_in, "rows_out": final.nnz, "canonical": final.canonical, "unique": final.unique,
            "sort_order": list(final.sort_order)}
