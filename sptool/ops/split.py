"""split: cut a tensor into N pieces along one dimension (TensorFlow's sparse.split), in one pass."""

from __future__ import annotations

import os
import re
import resource
import shutil

import numpy as np
import pyarrow as pa

from .._args import whole_number
from .._memory import Budget, budget_of, format_size
from .._vocabulary import renamed_keywords
from ..errors import ResourceError, UsageError
from ..format import TensorMeta
from ..io import (
    ClosesOrAborts,
    arrow_of,
    batch_keys,
    batch_values,
    known_shape,
    make_batch,
    open_input,
    open_sink,
    output_kind,
    row_bytes,
)
from ..stream.axes import normalize_axes
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor

_PLACEHOLDER = re.compile(r"\{i(:[^{}]*)?\}")


def piece_sizes(extent: int, num: int) -> list[int]:
    """TensorFlow's split sizes: the first ``extent % num`` pieces get one extra."""
    base, extra = divmod(extent, num)
    return [base + 1 if i < extra else base for i in range(num)]


def piece_paths(pattern: str, num: int) -> list[str]:
    """The output of each piece: ``{i}`` (or a format spec such as ``{i:03d}``) replaced by its number;
    None (no pattern) keeps every piece in memory."""
    if pattern is None:
        return [None] * num
    if not isinstance(pattern, str) or not _PLACEHOLDER.search(pattern):
        raise UsageError(f"the output pattern {pattern!r} must contain {{i}}, replaced by the piece number "
                         "(e.g. out/part-{i}.parquet)")
    try:
        paths = [_PLACEHOLDER.sub(lambda m, i=i: format(i, (m.group(1) or ":")[1:]), pattern) for i in range(num)]
    except ValueError as e:
        raise UsageError(f"bad format in the output pattern {pattern!r}: {e}") from None
    if len(set(paths)) != num:
        raise UsageError(f"the output pattern {pattern!r} gives the same name to two pieces")
    for p in paths:
        output_kind(p)
        if p == "-":
            raise UsageError("split writes files: the pattern cannot be '-'")
    return paths


def _check_open_files(num: int):
    """Every piece keeps a file open until the end: make sure the process may open that many."""
    need = num + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard == resource.RLIM_INFINITY or hard >= need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        return
    raise ResourceError(f"splitting into {num} pieces keeps {num} files open, over this process's limit of {hard} "
                        "(ulimit -n); split in stages instead")


WRITER_OVERHEAD = 6 << 20


@renamed_keywords("output", "num_split")
def split(path: str, output: str | None = None, *, axis: int, num_split: int, memory=None, progress=None):
    """Split a tensor into ``num_split`` pieces along ``axis`` (TensorFlow's sparse.split).

    The first ``shape[axis] % num`` pieces are one longer; indices along the axis are rebased
    to each piece.  ``output`` is a pattern naming the outputs, with ``{i}`` replaced by the piece
    number (``out/part-{i}.parquet``, ``out-{i}/`` for directories, ``{i:03d}`` to pad); with no
    ``output`` the pieces are returned, a list of ``SparseTensor``.  Each
    piece keeps the input's sort order and uniqueness.  One pass over the input, all pieces
    written at once; if anything fails no piece is left behind.

    For a hybrid tensor a dense axis may be split too: every row then goes to every piece
    with its block cut.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> r = split("sample_data/tensor3d.parquet", os.path.join(d, "p{i}.parquet"), axis=0, num_split=3)
    >>> [s[0] for s in r["shapes"]]
    [14, 13, 13]
    """
    axis, num = whole_number(axis, "--axis"), whole_number(num_split, "--num-split")
    budget = budget_of(memory)
    with open_input(path) as opened, known_shape(opened) as src:
        op = Split(output, axis, num, budget)
        pieces = run(op, src, None, budget=budget, progress=progress)
    if output is None:
        return [SparseTensor.from_sink(sink) for sink in pieces.sinks]
    finals = [s.final_meta for s in pieces.sinks]
    return {"outputs": op.paths, "rows_in": pieces.rows_in, "rows": [f.nnz for f in finals],
            "shapes": [list(f.shape) for f in finals], "sort_order": list(finals[0].sort_order),
            "unique": all(f.unique for f in finals)}


class Split(StreamOp):
    """Every batch routed, in stored order, to the pieces its rows belong to (_Pieces, the
    output: one sink a piece)."""

    def __init__(self, pattern: str, axis: int, num: int, budget: Budget):
        self.pattern, self.axis, self.num, self.budget = pattern, axis, num, budget

    def plan(self, meta: TensorMeta) -> Plan:
        rank = len(meta.shape)
        try:
            (axis,) = normalize_axes([self.axis], rank)
        except UsageError:
            raise UsageError(f"Input split_dim should be between {-rank} and {rank - 1} (the rank is {rank}), "
                             f"got {self.axis}") from None
        extent = meta.shape[axis]
        num = int(self.num)
        if not 1 <= num <= extent:
            raise UsageError(f"Input num_split should be between 1 and the splitting dimension size ({extent}), "
                             f"got {num}")
        self.paths = piece_paths(self.pattern, num)
        sizes = piece_sizes(extent, num)
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        metas = [meta.with_(shape=meta.shape[:axis] + (s,) + meta.shape[axis + 1:], nnz=None, created_by=None)
                 for s in sizes]
        _check_open_files(num)
        # Each open Parquet writer costs about this much beyond its buffered rows (encoders,
        # compression contexts, the page index; measured 5 MiB a piece), whatever its row groups.
        if num * WRITER_OVERHEAD > self.budget.total // 2:
            need = format_size(2 * num * WRITER_OVERHEAD)
            raise UsageError(f"splitting into {num} pieces keeps {num} writers open (about "
                             f"{format_size(WRITER_OVERHEAD)} each): raise --memory to at least {need}")
        self.pieces = (meta, axis, starts, metas)
        # Bounds checked on the input's rows as they are read: an error names the file, its row
        # and coordinates, and its shape (a piece's sink would name the rebased ones).
        return Plan(meta, unique_claim=True if meta.unique else None, bounds_checked=True)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        return _Pieces(self.paths, *self.pieces, unique_claim=plan.unique_claim, budget=budget)

    def map(self, batch, keys):
        yield batch


class _Pieces(ClosesOrAborts):
    """The pieces' sinks, written together and committed all or none: a batch's rows go to
    the pieces holding them; if anything fails, no piece is left behind."""

    def __init__(self, paths, meta: TensorMeta, axis: int, starts: np.ndarray, metas, *, unique_claim, budget):
        self.meta, self.axis, self.starts, self.metas = meta, axis, starts, metas
        self.router = _route_dense if axis >= meta.sparse_ndim else _route_sparse
        self.rows_in = 0
        self.sinks, self.done = [], []
        num = len(paths)
        try:
            for p, m in zip(paths, metas):
                sink = open_sink(p, m, unique_claim=unique_claim, budget=budget)
                # N sinks each buffer up to a row group before writing it; the budget's half
                # (the other is for the batch being routed and the one prefetched) is shared
                # by them, so smaller row groups when there are many pieces.
                per_sink = budget.total // (2 * num * 3)  # the pending batches, their concatenation, the encoder
                sink.row_group_rows = max(1, min(sink.row_group_rows, per_sink // row_bytes(m)))
                self.sinks.append(sink)
        except BaseException:
            self.abort()
            raise

    def write_batch(self, batch: pa.RecordBatch):
        self.rows_in += batch.num_rows
        self.router(batch, self.meta, self.axis, self.starts, self.sinks, self.metas)

    def close(self):
        # Every piece is finished before any is moved into place, so a failure (or Ctrl-C) while
        # writing leaves the previous files at those paths as they were; only the renames
        # themselves remain, back to back.
        try:
            for sink in self.sinks:
                sink.close(commit=False)
            for sink in self.sinks:
                sink.commit()
                self.done.append(sink)
        except BaseException:
            self.abort()
            raise

    def abort(self):
        for sink in self.sinks:
            if sink not in self.done:
                sink.abort()
        for sink in self.done:
            _remove(sink.dst)


def _route_sparse(batch: pa.RecordBatch, meta: TensorMeta, axis: int, starts: np.ndarray, sinks, metas):
    """Each row to the piece holding its index along the axis, rebased; input order kept."""
    col = batch.column(axis).to_numpy(zero_copy_only=False)
    n = len(col)
    piece = np.searchsorted(starts[1:-1], col, side="right")
    perm = None
    if n > 1 and np.any(piece[1:] < piece[:-1]):
        # A stable sort keeps each piece's rows in input order (a subsequence stays sorted).
        perm = np.argsort(piece, kind="stable")
        piece = piece[perm]
    bounds = np.searchsorted(piece, np.arange(len(sinks) + 1), side="left")
    for i in np.flatnonzero(bounds[1:] > bounds[:-1]):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        rg = sinks[i].row_group_rows
        if perm is None and lo == 0 and hi == n and n <= rg:
            sinks[i].write_batch(_rebased(batch, axis, col - starts[i]))
            continue
        # Copies of at most a row group each: a slice would keep the whole input batch alive
        # in the sink's buffer, N batches for N pieces.
        for a in range(lo, hi, rg):
            rows = perm[a:min(a + rg, hi)] if perm is not None else np.arange(a, min(a + rg, hi))
            sinks[i].write_batch(_rebased(batch.take(arrow_of(rows)), axis, col[rows] - starts[i]))


def _rebased(batch: pa.RecordBatch, axis: int, index: np.ndarray) -> pa.RecordBatch:
    cols = list(batch.columns)
    cols[axis] = arrow_of(index)
    return pa.RecordBatch.from_arrays(cols, schema=batch.schema)


def _route_dense(batch: pa.RecordBatch, meta: TensorMeta, axis: int, starts: np.ndarray, sinks, metas):
    """A dense axis: every row to every piece, its block cut to the piece."""
    K = meta.sparse_ndim
    keys = batch_keys(batch, K)
    values = batch_values(batch, meta)
    cut = [slice(None)] * values.ndim
    for i, sink in enumerate(sinks):
        cut[1 + axis - K] = slice(int(starts[i]), int(starts[i + 1]))
        rg = sink.row_group_rows
        for a in range(0, len(values), rg):
            k = np.ascontiguousarray(keys[:, a:a + rg])
            cut[0] = slice(a, a + rg)
            sink.write_batch(make_batch(k, np.ascontiguousarray(values[tuple(cut)]), metas[i], sink.schema))


def _remove(dst: str):
    if os.path.isdir(dst):
        shutil.rmtree(dst, ignore_errors=True)
    elif os.path.exists(dst):
        os.remove(dst)
