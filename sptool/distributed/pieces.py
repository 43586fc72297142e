"""Inputs cut into pieces a worker reads on its own: the parts of a directory, and runs of row
groups of a file (or of a directory's few parts).  A piece is a path on storage every worker sees
plus row-group numbers, so a task carries a few bytes, never data.  A stream (stdin, an Arrow
stream file) is first read once by the driver into a Parquet copy on that storage, and cut the
same way; errors name the stream, and count rows from the start of the whole input."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from .._memory import Budget
from ..errors import UsageError
from ..format import TensorMeta
from ..io import (
    ParquetSource,
    TensorSource,
    batch_keys,
    locate,
    open_sink,
    open_source,
    remove_path,
    sibling_name,
)

# A single file is cut into at least this many pieces per worker (when it has the row groups),
# so a worker that finishes early takes more.
PIECES_PER_WORKER = 2

# Copies the driver made of a stream (stdin, an Arrow stream file) -> the name errors give the
# input, as the single machine names it.
_COPIED: dict[str, str] = {}


def operand_name(path: str) -> str:
    """What errors call the input at ``path``: the stream it is the driver's copy of, or itself."""
    return _COPIED.get(path, path)


@dataclass(frozen=True)
class Piece:
    path: str  # a Parquet file
    groups: tuple[int, ...] | None  # its row groups in this piece; None: all of them
    rows: int
    start: int = 0  # the rows before the piece in its operand, which errors count from
    operand: str | None = None  # the operand's path, which errors name (None: ``path``)


def pieces_of(path: str, workers: int) -> list[Piece]:
    """The pieces of a Parquet tensor path, in row order: each part of a directory (or file),
    cut into runs of its row groups when there are fewer parts than PIECES_PER_WORKER per worker."""
    with open_source(path) as src:
        stretches, start = [], 0
        for p in src.parts:
            md = p.file.metadata
            stretches.append((p.path, list(range(md.num_row_groups)),
                              [md.row_group(g).num_rows for g in range(md.num_row_groups)], start))
            start += md.num_rows
    return runs_of(stretches, workers, operand_name(path))


def runs_of(stretches: list[tuple], workers: int, operand: str) -> list[Piece]:
    """Pieces of the operand ``operand`` from its ``stretches`` (file, consecutive row groups of
    it, their rows, the operand's row of their first), in row order: each stretch cut into runs of
    its groups, so that there are PIECES_PER_WORKER per worker when the groups allow.  A stretch
    of no group (an empty file) is one empty piece."""
    runs = -(-workers * PIECES_PER_WORKER // max(len(stretches), 1))
    pieces = []
    for name, groups, counts, start in stretches:
        n = max(1, min(len(counts), runs))
        bounds = [round(i * len(counts) / n) for i in range(n + 1)]
        before = [start + sum(counts[:a]) for a in bounds]
        pieces += [Piece(name, tuple(groups[a:b]), sum(counts[a:b]), at, operand)
                   for a, b, at in zip(bounds, bounds[1:], before) if b > a] or [Piece(name, None, 0, start, operand)]
    return pieces


def refuse_stdin(path) -> str:
    """What ``path`` names (io.locate); stdin is refused: workers cannot read the driver's pipe,
    and the driver reads an operand's header before the job starts."""
    if not isinstance(path, str):
        raise UsageError(f"on a cluster an input is a path every worker can read, not a {type(path).__name__}")
    kind = locate(path)
    if kind == "stdin":
        raise UsageError("on a cluster an input is a file or a directory, not stdin ('-'); write the stream to a "
                         ".arrows or .parquet file first")
    return kind


def shared_copy(path: str, spool: str, budget: Budget) -> str:
    """``path`` itself when workers can read it in pieces (a Parquet file or part directory);
    an Arrow stream file or an AnnData file (its X) is read once, here, into the Parquet file
    ``spool`` (on the job's shared scratch), which they can."""
    if refuse_stdin(path) not in ("stream", "hdf5", "anndata"):
        return path
    return _copy(path, spool, budget)


def _copy(path: str, spool: str, budget: Budget) -> str:
    """The stream at ``path`` ('-': stdin) read once into the Parquet file ``spool``."""
    with open_source(path) as src, open_sink(spool, src.meta.with_(nnz=None), budget=budget,
                                             unique_claim=True if src.meta.unique else False) as sink:
        for batch in src.iter_batches(budget=budget):
            sink.write_batch(batch)
        if any(s is None for s in sink.meta.shape):
            sink.resolve_shape(src.meta.shape)  # the stream's trailer has told the extents by now
        name = src.path
    _COPIED[spool] = name
    return spool


@contextlib.contextmanager
def stdin_copied(args: tuple, near: str, budget: Budget):
    """``args`` with stdin ('-', as an argument or in a list of them) replaced by a Parquet file
    the driver reads it into once, a hidden sibling of ``near`` (the job's output, on storage
    every worker sees) named after this process, so that a killed job's copy is swept; the copy
    is removed when the block ends.  Errors name it as the single machine names stdin."""
    if not any(a == "-" or isinstance(a, (list, tuple)) and "-" in a for a in args) or near == "-":
        yield args
        return
    spool = sibling_name(near, "stdin", ".parquet")

    def swapped(a):
        if isinstance(a, (list, tuple)):
            return [spool if x == "-" else x for x in a]
        return spool if a == "-" else a

    try:
        _copy("-", spool, budget)
        yield tuple(swapped(a) for a in args)
    finally:
        _COPIED.pop(spool, None)
        remove_path(spool)


class PieceSource(ParquetSource):
    """One piece opened as a source (on a worker): the file's rows in the piece's row groups,
    named as its operand, their rows counted from the operand's first (``start``), so that an
    error says what the single machine says of the whole input."""

    def __init__(self, piece: Piece):
        whole = open_source(piece.path)
        meta = whole.meta if piece.groups is None else whole.meta.with_(nnz=piece.rows)
        super().__init__(piece.operand or piece.path, whole.parts, meta, "file")
        self.groups = piece.groups
        self.start = piece.start

    def part_batches(self, part, batch_rows, *, groups=None, **kw):
        if self.groups is not None:  # never a row group outside the piece, whatever is asked for
            groups = self.groups if groups is None else [g for g in groups if g in self.groups]
        return super().part_batches(part, batch_rows, groups=groups, **kw)


class RowsSource(TensorSource):
    """A source's rows and nothing else (no footer to plan reads from): for an op that would
    plan its own reads from a file's row groups (slice's pruning), given a piece the driver
    has already pruned."""

    def __init__(self, src: TensorSource):
        super().__init__(src.path, src.meta, src.schema)
        self.src, self.start = src, src.start

    def iter_batches(self, batch_rows=None, *, budget=None):
        return self.src.iter_batches(batch_rows, budget=budget)


class ShuffledSource(TensorSource):
    """Arrow IPC files (the shuffled pieces of one key range) read one after another as one
    tensor of ``meta``: in name order, which is input order."""

    kind = "shuffled"

    def __init__(self, paths: list[str], meta: TensorMeta):
        super().__init__(paths[0] if paths else "<empty>", meta, meta.arrow_schema())
        self.paths = paths

    def with_meta(self, meta: TensorMeta) -> ShuffledSource:
        """The same rows claiming ``meta`` (claims a range of the input keeps)."""
        return ShuffledSource(self.paths, meta)

    def iter_batches(self, batch_rows=None, *, budget=None):
        for path in self.paths:
            with open_source(path) as src:
                yield from src.iter_batches(batch_rows, budget=budget)


class KeyRangeSource(TensorSource):
    """The rows of ``pieces`` (an operand sorted on the dimensions ``codec`` packs, in input
    order) whose keys lie in [lo, hi) (None: unbounded), read where they stand as one tensor of
    ``meta``: only the row groups whose statistics on the leading dimension allow such keys are
    decoded."""

    kind = "key range"

    def __init__(self, pieces: list[Piece], meta: TensorMeta, codec, lo, hi):
        super().__init__(pieces[0].path if pieces else "<empty>", meta.with_(nnz=None), meta.arrow_schema())
        self.pieces, self.codec, self.lo, self.hi = pieces, codec, lo, hi
        d0 = int(codec.order[0])
        self.dim, self.first, self.last = d0, _leading(codec, lo), _leading(codec, hi)

    def with_meta(self, meta: TensorMeta) -> KeyRangeSource:
        """The same rows claiming ``meta`` (as ShuffledSource.with_meta)."""
        return type(self)(self.pieces, meta, self.codec, self.lo, self.hi)

    def narrowed(self, piece: Piece) -> Piece | None:
        """``piece`` less the row groups whose statistics rule the range out (None: all of them)."""
        footer = open_source(piece.path).parts[0].file.metadata
        kept = tuple(g for g in (range(footer.num_row_groups) if piece.groups is None else piece.groups)
                     if self._may_hold(footer.row_group(g).column(self.dim).statistics))
        return Piece(piece.path, kept, piece.rows) if kept else None

    def iter_batches(self, batch_rows=None, *, budget=None):
        K = self.meta.sparse_ndim
        for piece in filter(None, map(self.narrowed, self.pieces)):
            for batch in PieceSource(piece).iter_batches(batch_rows, budget=budget):
                keys = self.codec.encode(batch_keys(batch, K))
                inside = np.ones(len(keys), dtype=bool)
                if self.lo is not None:
                    inside &= keys >= self.lo
                if self.hi is not None:
                    inside &= keys < self.hi
                if inside.all():
                    yield batch
                elif inside.any():
                    yield batch.filter(inside)

    def _may_hold(self, st) -> bool:
        if st is None or not st.has_min_max:
            return True
        return (self.first is None or st.max >= self.first) and (self.last is None or st.min <= self.last)


def _leading(codec, key) -> int | None:
    """The leading dimension's index in a key of ``codec`` (None for None)."""
    if key is None:
        return None
    if not codec.packed:
        return int(np.frombuffer(np.asarray(key).tobytes()[:8], dtype=">u8")[0])
    if not codec.widths[0]:
        return 0
    return int(np.uint64(key) >> np.uint64(codec.shifts[0]))
