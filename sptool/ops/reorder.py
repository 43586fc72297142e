"""reorder: sort the rows by a dimension order, in bounded memory, optionally merging duplicates."""

from __future__ import annotations

from ..io import known_shape, open_sink, open_source
from ..stream.axes import normalize_order
from ..stream.duplicates import Deduplicator, check_policy
from ..stream.order import sorted_batches


def reorder(path: str, output: str | None, *, order=None, duplicates: str = "keep", memory=None,
            tmp_dir: str | None = None, progress=None) -> dict:
    """Sort a tensor's rows by ``order`` (default row-major: TensorFlow's reorder).

    ``duplicates``: keep (repeated coordinates stay adjacent, in input order), sum (the
    canonical form: PyTorch's coalesce), min, max, first, last, or error.  An external merge
    sort: memory stays within ``memory``, spilling sorted runs to ``tmp_dir``.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "sorted.parquet")
    >>> reorder("sample_data/unsorted.parquet", out, duplicates="sum")["canonical"]
    True
    """
    with open_source(path) as opened, known_shape(opened, tmp_dir) as src:
        meta = src.meta
        order = normalize_order(order, meta.sparse_ndim)
        check_policy(duplicates, meta)
        if progress:
            progress.set_total(meta.nnz)
        out_meta = meta.with_(sort_order=order, unique=duplicates != "keep", nnz=None)
        claim = True if duplicates != "keep" else None
        with open_sink(output, out_meta, unique_claim=claim) as sink:
            dedup = Deduplicator(duplicates, out_meta, sink.schema)
            for batch, keys in sorted_batches(src, order, memory=memory, tmp_dir=tmp_dir, progress=progress):
                for out in dedup.feed(batch.select(range(meta.sparse_ndim + 1)), keys):
                    sink.write_batch(out)
            for out in dedup.finish():
                sink.write_batch(out)
        final = sink.final_meta
    return {"rows_in": meta.nnz, "rows_out": final.nnz, "canonical": final.canonical, "unique": final.unique,
            "sort_order": list(final.sort_order)}


