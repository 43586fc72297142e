"""info and head: what a tensor holds, from its footers (or a short read).

Reports read from metadata and footer statistics; info's pass over the rows (``scan``, a
histogram, a stream's extents) is a StreamOp that the engine drives and whose output is what it
counted.  head reads the first n rows and stops: a short read, not a pass."""

from __future__ import annotations

import math

import numpy as np

from .. import _kernels
from .._args import whole_number
from .._memory import Budget, budget_of, format_size
from .._vocabulary import renamed_keywords
from ..errors import DataError, UsageError
from ..format import encode_fill, index_column
from ..io import ClosesOrAborts, ParquetSource, file_size, open_input
from ..stream.axes import normalize_axes
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import claim_check


def info(path: str, *, scan: bool = False, histogram: int | None = None, memory=None, progress=None) -> dict:
    """Summary of a tensor: shape, nnz, density, types, order flags, per-dimension ranges and
    storage.  Reads only footers unless ``scan`` (which reads the index columns once).

    ``histogram``: a sparse axis whose distribution of stored entries per index (nnz per row
    for axis 0) is counted in the same one pass: ``out["histogram"]`` has the number of
    indices, the least, mean and most entries per index, and the indices in power-of-two bins
    of entry counts (0, 1, 2-3, 4-7, ...).  Duplicates count as stored.  It holds one counter
    per index of the axis, refused when over ``memory``.

    A row-sparse tensor (one sparse dimension, dense rows: SelectedRows) also gets
    ``out["row_sparse"]``: its stored rows, the block shape, the height, the distinct row ids
    and the fraction of the height they touch (repeated rows are counted once: a pass over the
    row ids, one byte per row of the height, unless the metadata says the rows are unique).

    Examples
    --------
    >>> info("sample_data/tensor3d.parquet")["shape"]
    [40, 30, 20]

    ``sptool.distributed.info`` reads the footers of a part directory on a Dask cluster.
    """
    return summary(path, open_input(path), scan=scan, histogram=histogram, memory=memory, progress=progress)


def summary(path, opened, *, scan: bool, histogram: int | None, memory, progress) -> dict:
    """info of ``path``, whose source ``opened`` (a context) gives: sptool.distributed.info's
    has the footers read on a cluster."""
    budget = budget_of(memory)
    with opened as src:
        meta = src.meta
        K = meta.sparse_ndim
        mins: list = [None] * K
        maxs: list = [None] * K
        out = {
            "path": path,
            "kind": src.kind,
            "shape": list(meta.shape),
            "sparse_ndim": K,
            "dense_shape": list(meta.dense_shape),
            "value_type": meta.value_type,
            # As the format encodes it: JSON-safe ("NaN", [re, im], base64 for binary).
            "fill_value": encode_fill(meta.fill_value, meta.value_type),
            "nnz": meta.nnz,
            "sort_order": list(meta.sort_order),
            "unique": src.stored_meta.unique,  # as stored, although an unverifiable one is not acted on
            "canonical": meta.canonical,
            "iso": meta.iso,
            "dimension_names": list(meta.dimension_names) if meta.dimension_names else None,
            "attributes": meta.attributes,
            "version": meta.version,
            "created_by": meta.created_by,
        }
        if isinstance(src, ParquetSource):
            mins, maxs = _footer_ranges(src, K)
            out["parts"] = len(src.parts)
            out["row_groups"] = src.num_row_groups
            out["bytes"] = sum(file_size(p.path) for p in src.parts)
        if hasattr(src, "matrices"):
            out["matrices"] = src.matrices()  # an AnnData file's every matrix; X is the one summarised
        counts = axis = None
        if histogram is not None:
            axis, counts = _histogram_counts(histogram, meta, budget)
        # A row-sparse tensor with repeated rows: which of the height's rows it touches, one
        # byte per row (left unknown when that is over --memory).
        height = meta.shape[0] if K == 1 and meta.hybrid else None
        touched = None
        if height is not None and not meta.unique and height <= budget.usable // 2:
            touched = np.zeros(height, dtype=np.bool_)
        # A stream's extents, and a dense AnnData X's entries, are known once read.
        if scan or src.kind == "stream" or meta.nnz is None or counts is not None or touched is not None:
            scan_ = _Scan(K, counts, axis, touched, height, src.path)
            run(scan_, src, None, budget=budget, progress=progress)
            mins, maxs = scan_.mins, scan_.maxs
            meta = src.meta  # a stream knows its final nnz and shape only now
            out["nnz"] = meta.nnz
            out["shape"] = list(meta.shape)
        cells = math.prod(meta.shape[:K])
        out["density"] = (meta.nnz / cells) if cells else 0.0
        out["min_index"] = mins
        out["max_index"] = maxs
        if out.get("bytes") is not None:
            out["bytes_per_entry"] = out["bytes"] / meta.nnz if meta.nnz else None
        if height is not None:
            out["row_sparse"] = _row_sparse(meta, touched)
        if counts is not None:
            out["histogram"] = _histogram(counts, axis, meta.dimension_names)
        return out


def _footer_ranges(src: ParquetSource, K: int) -> tuple[list, list]:
    """Each dimension's smallest and largest index from the row groups' statistics ("unknown"
    where a non-empty row group has none; None where every row group is empty)."""
    mins: list = [None] * K
    maxs: list = [None] * K
    for part in src.parts:
        md = part.file.metadata
        names = part.file.schema_arrow.names
        for r in range(md.num_row_groups):
            rg = md.row_group(r)
            if rg.num_rows == 0:
                continue
            for k in range(K):
                st = rg.column(names.index(index_column(k))).statistics
                if st is None or not st.has_min_max:
                    mins[k] = maxs[k] = "unknown"
                    continue
                if mins[k] == "unknown":
                    continue
                mins[k] = int(st.min) if mins[k] is None else min(mins[k], int(st.min))
                maxs[k] = int(st.max) if maxs[k] is None else max(maxs[k], int(st.max))
    return mins, maxs


def _histogram_counts(histogram: int, meta, budget) -> tuple[int, np.ndarray]:
    """--histogram's axis and its zeroed counts, one per index, refused when over --memory."""
    (axis,) = normalize_axes([histogram], meta.sparse_ndim, "--histogram axis")
    extent = meta.shape[axis]
    if extent is None or extent * 8 > budget.usable:
        raise UsageError(f"--histogram {histogram} counts entries for each of the {extent} indices of that "
                         f"axis ({format_size((extent or 0) * 8)}), over --memory; raise --memory")
    return axis, np.zeros(extent, dtype=np.int64)


def _row_sparse(meta, touched) -> dict:
    """A row-sparse tensor's rows, block, height and the rows it touches (None when unknown)."""
    distinct = meta.nnz if meta.unique else (int(touched.sum()) if touched is not None else None)
    return {"rows": meta.nnz, "block": list(meta.dense_shape), "height": meta.shape[0],
            "distinct_rows": distinct,
            "touched": distinct / meta.shape[0] if distinct is not None and meta.shape[0]
            else (0.0 if distinct is not None else None)}


class _Scan(StreamOp):
    """One pass over the index columns: each dimension's range, and when asked the entries per
    index of the histogram's axis and the rows a row-sparse tensor touches.  Its output is what
    it counted, kept on the op (the sink takes nothing)."""

    def __init__(self, K: int, counts, axis, touched, height, path):
        self.mins: list = [None] * K
        self.maxs: list = [None] * K
        self.counts, self.axis, self.touched, self.height, self.path = counts, axis, touched, height, path

    def plan(self, meta) -> Plan:
        self.shape = list(meta.shape)
        return Plan(meta, pieces=True)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        return _Counted()

    def read(self, src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        # The rows it reads are checked against the claims it reports from (unique rows: a
        # row-sparse tensor's distinct rows are its rows).
        claim = claim_check(src)
        for keys, _ in src.iter_arrays(budget=budget):
            if claim is not None:
                claim.check(keys)
            yield keys, None
            if progress:
                progress.advance(keys.shape[1])

    def map(self, keys, _):
        if keys.shape[1] == 0:
            return ()
        ranges = [_kernels.column_minmax(keys[k]) for k in range(len(self.mins))]
        for k, (lo, hi) in enumerate(ranges):
            self.mins[k] = lo if self.mins[k] is None else min(self.mins[k], lo)
            self.maxs[k] = hi if self.maxs[k] is None else max(self.maxs[k], hi)
        counts, axis = self.counts, self.axis
        if counts is not None:
            lo, hi = ranges[axis]
            if lo < 0 or hi >= len(counts):
                raise DataError(f"an index {lo if lo < 0 else hi} on dimension {axis} is outside the shape "
                                f"{self.shape}", path=self.path)
            # Only the batch's own index range: a whole-axis bincount per batch would cost
            # the axis's length every batch.
            counts[lo:hi + 1] += np.bincount(keys[axis] - lo, minlength=hi - lo + 1)
        if self.touched is not None:
            lo, hi = ranges[0]
            if lo < 0 or hi >= self.height:
                raise DataError(f"a row id {lo if lo < 0 else hi} is outside the height {self.height}",
                                path=self.path)
            self.touched[keys[0]] = True
        return ()

    def output_shape(self, *input_shapes):
        return None  # nothing written, nothing to resolve


class _Counted(ClosesOrAborts):
    """The output of an op that keeps what it finds: nothing is written."""

    def write(self, *piece):
        pass

    def close(self):
        pass

    def abort(self):
        pass


def _histogram(counts: np.ndarray, axis: int, names) -> dict:
    """Indices binned by their entry count: 0, then [2^(b-1), 2^b - 1] for b = 1, 2, ..."""
    bins = np.zeros(len(counts), dtype=np.int64)
    nonzero = counts > 0
    bins[nonzero] = np.floor(np.log2(counts[nonzero])).astype(np.int64) + 1
    per_bin = np.bincount(bins, minlength=1)
    table = [{"entries_from": 0 if b == 0 else 1 << (b - 1), "entries_to": 0 if b == 0 else (1 << b) - 1,
              "indices": int(n)} for b, n in enumerate(per_bin) if n]
    return {"axis": axis, "name": names[axis] if names else None, "indices": int(len(counts)),
            "entries": int(counts.sum()), "min": int(counts.min()) if len(counts) else 0,
            "max": int(counts.max()) if len(counts) else 0,
            "mean": float(counts.mean()) if len(counts) else 0.0, "bins": table}


@renamed_keywords("count")
def head(path: str, count: int = 10, *, memory=None) -> tuple[np.ndarray, np.ndarray, object]:
    """The first ``count`` stored entries as ((count, K) indices, values, meta), in file order.

    Examples
    --------
    >>> idx, vals, meta = head("sample_data/tensor3d.parquet", 3)
    >>> idx.shape
    (3, 3)
    """
    n = whole_number(count, "count")
    budget = budget_of(memory)
    with open_input(path) as src:
        keys_list, vals_list, got = [], [], 0
        if n > 0:
            for keys, vals in src.iter_arrays(batch_rows=max(n, 1024), budget=budget):
                take = min(n - got, keys.shape[1])
                keys_list.append(keys[:, :take])
                vals_list.append(vals[:take])
                got += take
                if got >= n:
                    break
        meta = src.meta
        K = meta.sparse_ndim
        idx = np.concatenate(keys_list, axis=1).T if keys_list else np.empty((0, K), dtype=np.int64)
        vals = np.concatenate(vals_list) if vals_list else np.empty((0,) + tuple(meta.dense_shape), meta.dtype)
        return idx, vals, meta
