"""Opening tensors for reading: a Parquet file, a directory of parts, or an IPC stream."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._memory import Budget, budget_of
from ..errors import FormatError, InputError, UsageError
from ..format import (
    METADATA_KEY,
    TRAILER_KEY,
    TensorMeta,
    check_schema,
    index_column,
    invariants_differ,
    load_json,
    parse_metadata,
    seamed_claims,
    shared_order,
    trailer_problem,
)
from ._anndata import HDF5_MAGIC, MatrixReader, is_anndata_store
from ._arrays import batch_columns, batch_keys, batch_values, make_batch, normalize_batch
from ._digest import DigestReader, digest_problem
from ._iso import IsoCheck
from ._prefetch import prefetch
from ._rowgroups import check_text, parquet_file, plan_chunks, read_chunks, read_failure_code
from ._scratch import scratch_dir
from ._url import is_remote, join_path, kind_of, listing, local_path, open_read, open_sequential

# What pyarrow raises on a corrupt or foreign file: any Arrow error, and the Python errors its
# footer and statistics accessors let through on garbled metadata.
READ_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError, EOFError)

PARQUET_MAGIC = b"PAR1"
STREAM_MAGIC = b"\xff\xff\xff\xff"


# The part names sptool writes; other *.parquet names are read too (and validate warns).
CANONICAL_PART_NAME = re.compile(r"^part-\d{6}(-[0-9a-f]+)?\.parquet$")

# What a stage of a pipe reads when the stage before it failed: nothing at all.
NO_INPUT_ON_STDIN = "no input on stdin: did the command before it fail?"

PART_DIRECTORY = ("a part directory holds the parts of one tensor, part-000000.parquet, part-000001.parquet "
                  "..., all with the same sptool metadata (as sptool writes for an output ending in /)")


def part_name(i: int) -> str:
    """The name of part ``i`` of a directory written by sptool (matches CANONICAL_PART_NAME)."""
    return f"part-{i:06d}.parquet"


def is_part_name(name: str) -> bool:
    return name.endswith(".parquet") and not name.startswith(("_", "."))


def list_parts(path: str) -> list[str]:
    return sorted(n for n, is_file in listing(path) if is_part_name(n) and is_file)


def sniff(path: str) -> str:
    """'parquet', 'stream', 'hdf5' (an .h5ad file) or 'unknown' from a file's first bytes."""
    with open_read(path) as f:
        head = f.read(len(HDF5_MAGIC))
    if head[:4] == PARQUET_MAGIC:
        return "parquet"
    if head[:4] == STREAM_MAGIC:
        return "stream"
    if head == HDF5_MAGIC:
        return "hdf5"
    return "unknown"


def locate(path: str) -> str:
    """What a tensor path names: 'stdin' ('-'), 'dir', 'anndata' (an AnnData .zarr store), or a
    file's kind by its first bytes ('parquet', 'stream', 'hdf5', 'unknown'); a missing or
    unreadable path is an InputError."""
    if path == "-":
        return "stdin"
    path = local_path(path)
    found = kind_of(path)
    if found is None:
        raise InputError("no such file or directory", path=path)
    if found == "dir":
        return "anndata" if not is_remote(path) and is_anndata_store(path) else "dir"
    try:
        return sniff(path)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=path) from None


def open_parquet(path: str) -> pq.ParquetFile:
    try:
        pf = parquet_file(path)
        pf.schema_arrow  # noqa: B018 - decoding the schema is part of opening
        return pf
    except READ_ERRORS as e:
        # Not Parquet at all (text, an empty file): unreadable, exit 2, as a missing file is.
        raise InputError(f"not a readable Parquet file ({_short(e)}) [E_NOT_PARQUET]", path=path) from None


def _short(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def row_bytes(meta: TensorMeta) -> int:
    value_bytes = 32 if meta.value_type in ("string", "binary") else meta.dtype.itemsize
    return 8 * meta.sparse_ndim + value_bytes * max(meta.block_size, 1)


@dataclass
class Part:
    path: str
    file: pq.ParquetFile
    meta: TensorMeta  # the claims acted on (TensorMeta.trusted)
    stored: TensorMeta | None = None  # as the footer has them, where they differ


class TensorSource:
    """A tensor opened for streaming.  ``meta`` describes the whole tensor."""

    kind = "file"
    # Rows of the input ``path`` names that come before this source's first row: a piece of a
    # larger input (a cluster task's) counts the rows its errors name from there.
    start = 0

    def __init__(self, path: str, meta: TensorMeta, schema: pa.Schema):
        self.path = path
        self.meta = meta
        self.stored_meta = meta  # a file's claims as stored (meta: those trusted), which info reports
        self.schema = schema

    def batch_rows(self, budget: Budget | None) -> int:
        """Rows per batch read within ``budget`` (None: the default budget, read once here)."""
        return budget_of(budget).rows(row_bytes(self.meta))

    def iter_batches(self, batch_rows: int | None = None, *, budget: Budget | None = None) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def iter_prepared(self, prepare, batch_rows: int | None = None, *, budget: Budget | None = None
                      ) -> Iterator[tuple]:
        """(batch, prepare(batch)) pairs: prepare runs on the decoding threads where the source has
        them (a Parquet source), so a kernel that releases the GIL works beside the decoding."""
        for batch in self.iter_batches(batch_rows, budget=budget):
            yield batch, prepare(batch)

    def iter_arrays(self, batch_rows: int | None = None, *, budget: Budget | None = None):
        """Yield (keys (K, n) int64, values ndarray) per batch."""
        K = self.meta.sparse_ndim
        for batch in self.iter_batches(batch_rows, budget=budget):
            yield batch_keys(batch, K), batch_values(batch, self.meta)

    def iter_columns(self, batch_rows: int | None = None, *, budget: Budget | None = None):
        """Yield (the K index columns, values ndarray) per batch: iter_arrays without the copy of
        the columns into one (K, n) array."""
        K = self.meta.sparse_ndim
        for batch in self.iter_batches(batch_rows, budget=budget):
            yield batch_columns(batch, K), batch_values(batch, self.meta)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ParquetSource(TensorSource):
    def __init__(self, path: str, parts: list[Part], meta: TensorMeta, kind: str):
        super().__init__(path, meta, meta.arrow_schema())
        self.parts = parts
        self.kind = kind

    @property
    def num_row_groups(self) -> int:
        return sum(p.file.metadata.num_row_groups for p in self.parts)

    def part_batches(self, part: Part, batch_rows: int, *, groups=None, columns=None, prepare=None) -> Iterator:
        """One part's batches (of the row groups ``groups``, default all; of ``columns``, default
        all), decoded ahead on several threads; a decoding failure is E_READ_FAILED.  With
        ``prepare``, (batch, prepare(batch)) pairs (see read_chunks)."""
        md = part.file.metadata
        groups = range(md.num_row_groups) if groups is None else groups
        chunks = plan_chunks(md, groups, batch_rows)
        try:
            if chunks is None:
                batches = prefetch(map(check_text, part.file.iter_batches(
                    batch_size=batch_rows, row_groups=list(groups), columns=columns, use_threads=True)))
                if prepare is not None:
                    batches = ((b, prepare(b)) for b in batches)
            else:
                batches = read_chunks(part.path, part.file, chunks, batch_rows=batch_rows, columns=columns,
                                      prepare=prepare)
            yield from batches
        except READ_ERRORS as e:
            raise FormatError(f"cannot decode the data ({_short(e)}) [{read_failure_code(e)}]",
                              path=part.path) from None

    def iter_batches(self, batch_rows=None, *, budget=None):
        rows = batch_rows or self.batch_rows(budget)
        for part in self.parts:
            for batch in self.part_batches(part, rows):
                yield normalize_batch(batch, part.meta, self.schema, part.path)

    def iter_prepared(self, prepare, batch_rows=None, *, budget=None):
        rows = batch_rows or self.batch_rows(budget)
        for part in self.parts:
            def normalized(batch, meta=part.meta, path=part.path):
                batch = normalize_batch(batch, meta, self.schema, path)
                return batch, prepare(batch)

            for _, pair in self.part_batches(part, rows, prepare=normalized):
                yield pair


def edge_keys(path: str, K: int) -> tuple:
    """A Parquet part's first and last coordinates as it stores them (None, None when it is
    empty): the index columns of its first and last non-empty row groups only."""
    pf = open_parquet(path)
    filled = filled_groups(pf.metadata)
    if not filled:
        return None, None
    return _row_key(pf, filled[0], range(K), 0), _row_key(pf, filled[-1], range(K), -1)


def filled_groups(md, groups=None) -> list[int]:
    """The row groups of ``groups`` (default all) of a Parquet footer ``md`` that hold rows."""
    return [g for g in (range(md.num_row_groups) if groups is None else groups) if md.row_group(g).num_rows]


def index_bounds(md, group: int, dim: int) -> tuple[int, int] | None:
    """(min, max) of index column ``dim`` in row group ``group`` of footer ``md`` by its
    statistics; None without them."""
    st = md.row_group(group).column(dim).statistics
    return (int(st.min), int(st.max)) if st is not None and st.has_min_max else None


def _row_key(pf, group: int, dims, row: int) -> tuple:
    """The indices ``dims`` of the first (``row`` 0) or last (-1) row of row group ``group``: only
    those columns read, and for the first row only its first batch decoded."""
    columns = [index_column(d) for d in dims]
    if row == 0:
        table = next(pf.iter_batches(batch_size=1, row_groups=[group], columns=columns))
    else:
        table = pf.read_row_group(group, columns=columns)
        row = table.num_rows - 1
    return tuple(int(table.column(c)[row].as_py()) for c in columns)


def _seam(p: Part, q: Part, order: tuple) -> int:
    """How the last key of part ``p`` compares with the first key of ``q`` in ``order`` (each
    sorted so by its claim): -1 below, 0 equal, 1 above.  The leading dimension's statistics
    decide most seams (the last row of a sorted part holds the largest leading index of its last
    row group, the first row the smallest of its first); the two rows are read only where those
    are equal (a run of the leading index split between the parts)."""
    a, b = filled_groups(p.file.metadata)[-1], filled_groups(q.file.metadata)[0]
    hi, lo = index_bounds(p.file.metadata, a, order[0]), index_bounds(q.file.metadata, b, order[0])
    if hi is not None and lo is not None and hi[1] != lo[0]:
        return 1 if hi[1] > lo[0] else -1
    x, y = _row_key(p.file, a, order, -1), _row_key(q.file, b, order, 0)
    return (x > y) - (x < y)


def derived_claims(parts: list[Part]) -> tuple[tuple, bool]:
    """(sort_order, unique) of a part directory as a whole (SPEC section 7): its parts' common
    order, when every seam keeps it.  The parts' own claims are taken as the files state them,
    and the whole's are then trusted as a single file's are: where an op verifies a file's
    claim as the rows pass (stream.order.ClaimCheck), it verifies the whole's, seams included.
    A part whose edge rows cannot be read gives no claim: reading the rows reports the damage."""
    metas = [p.meta for p in parts]
    order = shared_order(metas)
    if len(parts) == 1 or not order:
        return seamed_claims(metas, [])
    filled = [p for p in parts if p.meta.nnz]
    seams = []
    try:
        for p, q in zip(filled, filled[1:]):
            seams.append(_seam(p, q, order))
            if seams[-1] > 0:
                break
    except READ_ERRORS:
        return (), False
    return seamed_claims(metas, seams)


def read_part(path: str) -> Part:
    pf = open_parquet(path)
    kv = pf.metadata.metadata or {}
    raw = kv.get(METADATA_KEY.encode())
    if raw is None:
        raise FormatError("no 'sptool' key in the Parquet metadata: not an sptool tensor [E_NO_SPTOOL_METADATA]",
                          path=path)
    meta = parse_metadata(raw, path=path)
    problems = [p for p in check_schema(pf.schema_arrow, meta) if p.severity in ("fatal", "error")]
    if problems:
        raise FormatError(f"{problems[0].message} [{problems[0].code}]", path=path)
    if meta.nnz != pf.metadata.num_rows:
        raise FormatError(
            f"metadata says nnz = {meta.nnz} but the file holds {pf.metadata.num_rows} rows [E_NNZ_MISMATCH]",
            path=path,
        )
    # A claim of unique rows in no full sort order is not acted on: no pass over the rows can
    # check it, and trusting a false one gave wrong results (sums of repeats left unsummed).
    return Part(path, pf, meta.trusted(), meta)




def dataset_meta(parts: list[Part], path: str) -> TensorMeta:
    first = parts[0].meta
    for p in parts[1:]:
        key = invariants_differ(first, p.meta)
        if key:
            raise FormatError(
                f"part {os.path.basename(p.path)} has {key} {getattr(p.meta, key)!r}, part "
                f"{os.path.basename(parts[0].path)} has {getattr(first, key)!r} [E_PART_METADATA_MISMATCH]",
                path=path,
            )
    nnz = sum(p.meta.nnz for p in parts)
    if len(parts) == 1:
        return first
    order, unique = derived_claims(parts)
    iso = first.iso and first_values_agree(parts)
    return first.with_(nnz=nnz, sort_order=order, unique=unique, iso=iso, attributes=first.attributes)


def first_values_agree(parts: list[Part]) -> bool:
    """Whether the first values of a directory's non-empty parts have one bit pattern: then, and
    only then, are the whole's values iso when every part's are (SPEC section 7).  A part whose
    first row cannot be read gives no claim: reading the rows reports the damage."""
    check = IsoCheck()
    try:
        for p in parts:
            filled = filled_groups(p.file.metadata)
            if not filled:
                continue
            batch = next(p.file.iter_batches(batch_size=1, row_groups=filled[:1]))
            first = normalize_batch(batch, p.meta, p.meta.arrow_schema(), p.path)
            if check.first_break(batch_values(first, p.meta)) >= 0:
                return False
    except READ_ERRORS:
        return False
    return True


def open_dataset(path: str, read_parts=None) -> ParquetSource:
    """A part directory as one source; ``read_parts(paths)`` gives its Parts in order (a cluster
    reads the footers in parallel), by default read here one after another.  Its order and
    uniqueness are those its parts and seams give the whole (derived_claims)."""
    path = local_path(path)
    names = list_parts(path)
    if not names:
        raise FormatError("the directory holds no part-*.parquet files [E_NO_PARTS]", path=path)
    paths = [join_path(path, n) for n in names]
    try:
        parts = read_parts(paths) if read_parts else [read_part(p) for p in paths]
        meta = dataset_meta(parts, path)
    except FormatError as e:
        if all(CANONICAL_PART_NAME.match(n) for n in names):
            raise  # sptool's parts, damaged: the error says which and how
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise FormatError(f"not a part directory: its .parquet files ({shown}) are not the parts of one tensor "
                          f"({e.message if e.path == path else e}); {PART_DIRECTORY}", path=path) from None
    src = ParquetSource(path, parts, meta, "dir")
    if len(parts) == 1 and parts[0].stored is not None:
        src.stored_meta = parts[0].stored
    return src


class DamagedBatch(ValueError):
    """A record batch that arrived whole but whose buffers contradict each other (E_READ_FAILED,
    where an error while reading means the stream was cut off)."""


def read_stream_batch(reader) -> tuple[pa.RecordBatch, object]:
    """The next (batch, custom metadata) of an IPC stream reader, its buffers checked in full
    (offsets within their data, children as long as their parents, valid UTF-8): a damaged
    batch raises DamagedBatch here, before any kernel or NumPy view reads past a buffer.
    StopIteration at the end of the stream; an Arrow error when the stream cannot be read."""
    batch, custom = reader.read_next_batch_with_custom_metadata()
    try:
        batch.validate(full=True)
    except pa.ArrowInvalid as e:
        raise DamagedBatch(_short(e)) from None
    return batch, custom


class StreamSource(TensorSource):
    """An Arrow IPC stream (stdin or a .arrows file), read once, front to back."""

    kind = "stream"

    def __init__(self, path: str, reader, meta: TensorMeta, promised_trailer: bool, digest=None):
        super().__init__(path, meta, meta.arrow_schema())
        self._reader = reader
        self._digest = digest  # a DigestReader under the reader, or None (sptool's own spool)
        self.promised_trailer = promised_trailer
        self.trailer: dict | None = None
        self.rows_read = 0
        self._used = False

    def _batches(self):
        if self._used:
            raise InputError("a stream can be read only once", path=self.path)
        self._used = True
        K = self.meta.sparse_ndim
        while True:
            crc = self._digest.crc if self._digest is not None else None
            try:
                batch, custom = read_stream_batch(self._reader)
            except StopIteration:
                break
            except DamagedBatch as e:
                raise FormatError(f"a record batch after row {self.rows_read} is corrupt ({e}) [E_READ_FAILED]",
                                  path=self.path) from None
            except READ_ERRORS as e:
                raise FormatError(f"the stream is cut off or corrupt ({_short(e)}) [E_STREAM_TRUNCATED]",
                                  path=self.path) from None
            if self.trailer is not None:
                raise FormatError("data after the trailer batch [E_TRAILER_CONFLICT]", path=self.path)
            if custom is not None and TRAILER_KEY.encode() in custom:
                self.trailer = _parse_trailer(custom[TRAILER_KEY.encode()], self.path)
                problem = trailer_problem(self.trailer, len(self.meta.shape))
                if problem:
                    raise FormatError(f"{problem} [E_TRAILER_CONFLICT]", path=self.path)
                problem = digest_problem(self.trailer, crc)
                if problem:
                    raise FormatError(f"{problem} [E_STREAM_DIGEST]", path=self.path)
                continue
            self.rows_read += batch.num_rows
            if batch.num_rows:
                keys = batch.columns[:K]
                if any(c.null_count for c in keys):
                    raise FormatError("an index column holds nulls [E_NULL_INDEX]", path=self.path)
                yield normalize_batch(batch, self.meta, self.schema, self.path)
        if self.promised_trailer and self.trailer is None:
            raise FormatError(
                f"the stream ended after {self.rows_read} rows without its trailer: it was cut off "
                "[E_STREAM_TRUNCATED]",
                path=self.path,
            )
        self._resolve()

    def _resolve(self):
        """Fill the header's unknowns (nnz, null extents) from the trailer."""
        if self.trailer is None:
            if self.meta.nnz is not None and self.meta.nnz != self.rows_read:
                raise FormatError(f"the header says nnz = {self.meta.nnz} but {self.rows_read} rows arrived "
                                  "[E_NNZ_MISMATCH]", path=self.path)
            if any(s is None for s in self.meta.shape):
                raise FormatError("the stream ended with unknown shape entries [E_STREAM_SHAPE_UNRESOLVED]",
                                  path=self.path)
            self.meta = self.meta.with_(nnz=self.rows_read)
            return
        t_nnz, t_shape = self.trailer.get("nnz"), self.trailer.get("shape")
        if t_nnz != self.rows_read:
            raise FormatError(f"trailer says nnz = {t_nnz} but {self.rows_read} rows arrived [E_NNZ_MISMATCH]",
                              path=self.path)
        if self.meta.nnz is not None and self.meta.nnz != t_nnz:
            raise FormatError(f"trailer nnz {t_nnz} contradicts header nnz {self.meta.nnz} [E_TRAILER_CONFLICT]",
                              path=self.path)
        shape = self.meta.shape
        if t_shape is not None:
            if len(t_shape) != len(shape) or any(a is not None and a != b for a, b in zip(shape, t_shape)):
                raise FormatError(f"trailer shape {t_shape} contradicts header shape {list(shape)} "
                                  "[E_TRAILER_CONFLICT]", path=self.path)
            shape = tuple(t_shape)
        if any(s is None for s in shape):
            raise FormatError("the stream ended with unknown shape entries [E_STREAM_SHAPE_UNRESOLVED]",
                              path=self.path)
        self.meta = self.meta.with_(nnz=t_nnz, shape=shape)

    def iter_batches(self, batch_rows=None, *, budget=None):
        # Batch sizes are the producer's; re-chunking would only add copies.
        return prefetch(self._batches())

    def close(self):
        self._reader = None


def _parse_trailer(raw: bytes, path: str) -> dict:
    try:
        t = load_json(raw, "trailer", strict=False)
        if not isinstance(t, dict):
            raise ValueError("not an object")
        return t
    except ValueError as e:
        raise FormatError(f"the trailer is not a JSON object ({e}) [E_TRAILER_CONFLICT]", path=path) from None


def open_stream(path: str) -> StreamSource:
    try:
        f = sys.stdin.buffer if path == "-" else open_sequential(path)  # owned by the reader; read ahead
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror}", path=path) from None
    name = "<stdin>" if path == "-" else path
    if path == "-" and sys.stdin.isatty():
        raise InputError("stdin is a terminal; pipe an Arrow IPC stream into sptool or name a file", path=name)
    digest = DigestReader(f)
    try:
        reader = pa.ipc.open_stream(digest)
    except READ_ERRORS as e:
        if path == "-" and digest.size == 0:
            raise InputError(NO_INPUT_ON_STDIN) from None
        raise FormatError(f"not an Arrow IPC stream ({_short(e)}) [E_STREAM_NOT_ARROW]", path=name) from None
    md = reader.schema.metadata or {}
    raw = md.get(METADATA_KEY.encode())
    if raw is None:
        raise FormatError("the stream schema has no 'sptool' metadata [E_NO_SPTOOL_METADATA]", path=name)
    meta = parse_metadata(raw, path=name, stream=True)
    problems = [p for p in check_schema(reader.schema, meta) if p.severity in ("fatal", "error")]
    if problems:
        raise FormatError(f"{problems[0].message} [{problems[0].code}]", path=name)
    promised = bool((load_json(raw).get("stream") or {}).get("trailer"))
    src = StreamSource(name, reader, meta.trusted(), promised, digest)  # what is trusted: see read_part
    src.stored_meta = meta
    return src


def open_source(path: str) -> TensorSource:
    """Open a tensor for streaming: a .parquet file, a directory of parts, or '-' (stdin); a
    file:// URL names a local path, another URL (s3://...) a file or directory on that filesystem."""
    path = local_path(path)
    kind = locate(path)
    if kind == "dir":
        return open_dataset(path)
    if kind in ("hdf5", "anndata"):
        return AnnDataSource(path)
    if kind in ("stdin", "stream"):
        return open_stream(path)
    part = read_part(path)
    src = ParquetSource(path, [part], part.meta, "file")
    src.stored_meta = part.stored
    return src


class AnnDataSource(TensorSource):
    """A matrix of an AnnData file (an .h5ad file, or a .zarr store whose root says anndata): X,
    or the one ``key`` names; read in blocks by io/_anndata.py, its order and bounds checked as
    they are read."""

    kind = "anndata"

    def __init__(self, path: str, key: str = "X"):
        self.reader = MatrixReader(path, key)
        super().__init__(path, self.reader.meta, self.reader.meta.arrow_schema())

    def iter_arrays(self, batch_rows=None, *, budget=None):
        yield from self.reader.blocks(batch_rows or self.batch_rows(budget))
        self.meta = self.stored_meta = self.reader.meta  # a dense array's nnz is known now

    def iter_batches(self, batch_rows=None, *, budget=None):
        for keys, values in self.iter_arrays(batch_rows, budget=budget):
            yield make_batch(keys, values, self.meta, self.schema)

    def iter_columns(self, batch_rows=None, *, budget=None):
        for keys, values in self.iter_arrays(batch_rows, budget=budget):
            yield list(keys), values

    def matrices(self) -> list[dict]:
        """Every matrix of the file: key, layout, shape, nnz, value type (info lists them)."""
        return [m.describe() for m in self.reader.file.matrices()]

    def close(self):
        self.reader.close()


class MemorySource(TensorSource):
    """A tensor held in memory as (K, n) keys and values, read in batches like a file (an
    in-memory SparseTensor handed to an op)."""

    kind = "memory"

    def __init__(self, meta: TensorMeta, keys: np.ndarray, values: np.ndarray, path: str = "<memory>"):
        super().__init__(path, meta.with_(nnz=keys.shape[1]), meta.arrow_schema())
        self.keys, self.values = keys, values

    def iter_batches(self, batch_rows=None, *, budget=None):
        rows = batch_rows or self.batch_rows(budget)
        n = self.keys.shape[1]
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            yield make_batch(self.keys[:, start:stop], self.values[start:stop], self.meta, self.schema)


@contextlib.contextmanager
def open_input(tensor):
    """An op's input as a source: a path (opened here and closed after), an open TensorSource
    (used as it is, left open for its owner), or anything with ``as_source()`` (a SparseTensor)."""
    if isinstance(tensor, TensorSource):
        yield tensor
    elif hasattr(tensor, "as_source"):
        yield tensor.as_source()
    elif isinstance(tensor, (str, os.PathLike)):
        with open_source(os.fspath(tensor)) as src:
            yield src
    else:
        raise UsageError(f"expected a path, an open source or a SparseTensor, not {type(tensor).__name__}")


@contextlib.contextmanager
def known_shape(src: TensorSource, tmp_dir: str | None = None):
    """A source whose shape is fully known: ``src`` itself, or, for a stream whose header left
    extents open until its trailer, a copy spooled to a temporary file on disk (not memory)."""
    if all(s is not None for s in src.meta.shape):
        yield src
        return
    with scratch_dir("spool", tmp_dir) as d:
        path = os.path.join(d, "spool.arrows")
        with pa.OSFile(path, "wb") as f:
            writer = None
            for batch in src.iter_batches():
                if writer is None:
                    writer = pa.ipc.new_stream(f, batch.schema)
                writer.write_batch(batch)
            meta = src.meta  # resolved by the trailer now that the stream has been read
            if writer is None:
                writer = pa.ipc.new_stream(f, src.schema)
            writer.close()
        # Read back with plain reads: pages of a memory map would stay in RSS and count against --memory.
        spooled = StreamSource(src.path, pa.ipc.open_stream(pa.OSFile(path)), meta, promised_trailer=False)
        yield spooled


def check_inputs(tensors):
    """A pipe can be read once: at most one operand may be stdin."""
    if sum(isinstance(t, str) and t == "-" for t in tensors) > 1:
        raise UsageError("at most one input may be '-' (stdin)")


@contextlib.contextmanager
def open_operands(tensors, tmp_dir: str | None = None):
    """Several operands opened side by side (paths, sources or SparseTensors, as open_input
    takes them), each with its shape known; closed together afterwards."""
    check_inputs(tensors)
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(known_shape(stack.enter_context(open_input(t)), tmp_dir)) for t in tensors]


def read_all(source: TensorSource, budget: Budget | None = None) -> tuple[np.ndarray, np.ndarray, TensorMeta]:
    """Every row of a source as ((n, K) indices, values, meta).  Holds the tensor in memory."""
    keys, vals = [], []
    for k, v in source.iter_arrays(budget=budget):
        keys.append(k)
        vals.append(v)
    meta = source.meta
    K = meta.sparse_ndim
    indices = np.concatenate(keys, axis=1).T.copy() if keys else np.empty((0, K), dtype=np.int64)
    if vals:
        values = np.concatenate(vals)
    else:
        values = np.empty((0,) + tuple(meta.dense_shape), dtype=meta.dtype)
    return indices, values, meta
