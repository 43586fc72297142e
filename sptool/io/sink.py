"""Writing tensors: a Parquet file, a directory of parts, or an IPC stream (stdout)."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import _checks, _kernels
from .._memory import ROW_GROUP_ROWS, Budget, budget_of
from .._messages import out_of_bounds, out_of_order, repeated
from .._threads import stop_pool
from ..errors import DataError, ResourceError, UsageError
from ..format import (
    CHECKSUMS_KEY,
    DIGEST_KEY,
    INT64_MAX,
    METADATA_KEY,
    TRAILER_KEY,
    VARIABLE_WIDTH,
    TensorMeta,
    index_column,
    version_for,
)
from ._arrays import batch_columns, batch_keys, batch_values, make_batch
from ._atomic import AtomicTarget, ClosesOrAborts
from ._digest import DigestWriter
from ._iso import IsoCheck
from ._stitch import StitchedWriter
from ._url import bare, is_remote, join_path, kind_of, local_path, located, open_output, total_size
from .source import part_name, row_bytes

# Rows per part file when writing a directory; parts of this size (about 8.4M rows) stay
# near 100-300 MiB for typical value types, in the range GeoParquet recommends.
PART_ROWS = 64 * ROW_GROUP_ROWS


_DICTIONARY_VALUE_TYPES = ("bool", "int8", "int16", "uint8", "uint16", "string", "binary")

# Fixed-width values written BYTE_STREAM_SPLIT (byte planes, then zstd) rather than PLAIN.
_SPLIT_VALUE_TYPES = ("float32", "float64", "int32", "int64")


def parquet_writer_options(meta: TensorMeta, sample=None) -> dict:
    """sptool's Parquet writer settings for a tensor (also the benchmarks' I/O floor); ``sample``,
    the first row group's values, chooses their codec (values_codec)."""
    K = meta.sparse_ndim
    # Every index column DELTA_BINARY_PACKED, sorted or not: bit-packed deltas beat dictionary
    # pages (which overflow on wide extents) and plain + zstd alike (docs/performance.md, "Parquet
    # writer settings"); DuckDB and Polars read them (tests/test_interop.py).
    encodings = {index_column(k): "DELTA_BINARY_PACKED" for k in range(K)}
    # Dictionary pages still pay for narrow or textual values; float and wide integer values are
    # split into byte planes, which zstd compresses better than interleaved bytes.
    dictionary = ["values"] if meta.value_type in _DICTIONARY_VALUE_TYPES else False
    if meta.value_type in _SPLIT_VALUE_TYPES and meta.block_size == 1:
        encodings["values"] = "BYTE_STREAM_SPLIT"
    return {
        "compression": column_compression(meta, sample),
        "sorting_columns": [pq.SortingColumn(int(d)) for d in meta.sort_order] or None,
        "write_page_index": True,
        "use_dictionary": dictionary,
        # A dictionary of many distinct values falls back to plain soon (past 8192 int64 values)
        # rather than after the default 1 MiB of dictionary page.
        "dictionary_pagesize_limit": 1 << 16,
        "column_encoding": encodings or None,
        "write_statistics": True,
        # A CRC-32 in every page header, so that flipped bits are caught on read (CHECKSUMS_KEY).
        "write_page_checksum": True,
    }


def column_compression(meta: TensorMeta, sample=None) -> dict:
    """The values compressed alone: the index columns' bit-packed deltas are near their entropy
    already, and zstd on them costs far more of the writer's CPU than the bytes it saves
    (docs/performance.md, "Parquet writer settings")."""
    codecs = {index_column(k): "none" for k in range(meta.sparse_ndim)}
    codec = values_codec(meta, sample)
    codecs.update((path, codec) for path in _leaf_paths(meta.arrow_schema().field("values")))
    return codecs


# Values whose byte planes zstd shrinks by less than this share get lz4_raw instead.
_ZSTD_MIN_SAVING = 0.15
# LZ4_RAW pages, by the one name every pyarrow from 16 on takes for them ("lz4_raw" only from 24).
LZ4_RAW = "lz4"
_SAMPLE_VALUES = 1 << 16


def values_codec(meta: TensorMeta, sample=None) -> str:
    """zstd where it pays, lz4_raw where the values are near noise (on random floats zstd saves a
    tenth of the bytes for nearly half the encoding CPU: docs/performance.md).  The first row
    group's first values (``sample``), split into byte planes as the writer splits them, are
    compressed with zstd once: below a 15% saving the file gets lz4_raw, else zstd.  Other value
    types, or no sample: zstd."""
    if sample is None or meta.value_type not in _SPLIT_VALUE_TYPES or meta.block_size != 1:
        return "zstd"
    if not (pa.types.is_floating(sample.type) or pa.types.is_integer(sample.type)):
        return "zstd"  # a hybrid tensor's blocks of one element: a nested leaf
    if isinstance(sample, pa.ChunkedArray):
        sample = sample.slice(0, _SAMPLE_VALUES).combine_chunks()
    values = np.ascontiguousarray(sample.slice(0, _SAMPLE_VALUES).to_numpy(zero_copy_only=False))
    if not len(values):
        return "zstd"
    planes = values.view(np.uint8).reshape(len(values), values.itemsize).T.tobytes()
    packed = pa.compress(planes, codec="zstd", asbytes=False)
    return "zstd" if packed.size <= (1 - _ZSTD_MIN_SAVING) * len(planes) else LZ4_RAW


@functools.lru_cache(maxsize=64)
def _leaf_paths(field: pa.Field) -> tuple[str, ...]:
    """The Parquet column paths a field is written as (a complex or block value is several or
    nested leaves, and pyarrow takes per-column settings by leaf path), as pyarrow names them."""
    buf = pa.BufferOutputStream()
    pq.write_table(pa.schema([field]).empty_table(), buf)
    schema = pq.read_metadata(pa.BufferReader(buf.getvalue())).schema
    return tuple(schema.column(i).path for i in range(len(schema)))


def footer_entries(meta: TensorMeta) -> dict:
    """The key-value entries sptool adds to a Parquet footer when it closes the file."""
    return {METADATA_KEY: meta.to_json(), CHECKSUMS_KEY: "crc32"}


def output_kind(dst: str | None) -> str:
    if dst is None:
        return "memory"
    if dst == "-":
        return "stream"
    dst = local_path(dst)
    if bare(dst).endswith(("/", os.sep)) or kind_of(dst) == "dir":
        return "dir"
    if bare(dst).endswith(".parquet"):
        return "file"
    if bare(dst).endswith(".arrows"):
        return "stream-file"
    raise UsageError(
        "cannot tell the output format: name a .parquet file, a directory (ending in /), "
        "a .arrows stream file, or - for stdout",
        path=dst,
    )


def schema_of(meta: TensorMeta) -> pa.Schema:
    """The Arrow schema a sink writes for ``meta`` (a dimension of unknown extent as 0 until known)."""
    return meta.with_(shape=tuple(s if s is not None else 0 for s in meta.shape)).arrow_schema()


def check_shape(shape):
    known = [s for s in shape if s is not None]
    if any(s < 0 for s in known):
        raise DataError(f"shape {list(shape)} has a negative dimension")
    if any(s > INT64_MAX for s in known):
        raise DataError(f"shape {list(shape)} has an extent past 2^63-1")


class OrderTracker:
    """Checks rows against a sort order across batches (one pass, compiled).

    With ``tolerate_repeats`` a repeated coordinate is no violation: the tracker notes it
    (``repeated``) and checks the rest of the rows, that batch's included, for order alone."""

    def __init__(self, sort_order: tuple, sparse_ndim: int, check_repeats: bool, *, tolerate_repeats: bool = False):
        self.order = np.asarray(sort_order, dtype=np.int64)
        self.full = len(sort_order) == sparse_ndim
        self.check_repeats = check_repeats and self.full
        self.tolerate_repeats = tolerate_repeats
        self.repeated = False
        self.prev = None
        self.offset = 0

    def check(self, cols) -> tuple[int, int]:
        """(global row, kind) of the first violation in this batch, or (-1, 0).

        ``cols``: the K index columns (a (K, n) array or a list of contiguous int64 arrays)."""
        cols = list(cols)
        n = len(cols[0]) if cols else 0
        if n == 0 or not len(self.order):
            self.offset += n  # rows still counted: other checks of the same rows name them by it
            return -1, 0
        row, kind = _kernels.columns_order_violation(cols, self.order, self.check_repeats, self.prev)
        if row >= 0 and kind == _kernels.REPEATED and self.tolerate_repeats:
            self.repeated, self.check_repeats = True, False
            row, kind = _kernels.columns_order_violation(cols, self.order, False, self.prev)
        self.prev = np.array([c[n - 1] for c in cols], dtype=np.int64)
        return self._advance(row, kind, n)

    def check_codes(self, codes: np.ndarray) -> tuple[int, int]:
        """The same for rows given as packed sort codes (uint64, increasing with the full order),
        as a sort or the merge join has them: one compiled comparison a row, no columns decoded."""
        n = len(codes)
        if n == 0:
            return -1, 0
        codes = np.ascontiguousarray(codes)
        has_prev, prev = self.prev is not None, 0 if self.prev is None else int(self.prev)
        row, kind = _checks.codes_order_violation(codes, self.check_repeats, has_prev, prev)
        if row >= 0 and kind == _kernels.REPEATED and self.tolerate_repeats:
            self.repeated, self.check_repeats = True, False
            row, kind = _checks.codes_order_violation(codes, False, has_prev, prev)
        self.prev = codes[-1]
        return self._advance(row, kind, n)

    def check_batch_codes(self, batch: pa.RecordBatch, codes: np.ndarray, sparse_ndim: int):
        """check_codes on a batch's rows: (global row, kind, that row's index columns as (K, 1)
        for the message) of the first violation, or (-1, 0, None)."""
        seen = self.offset
        at, kind = self.check_codes(codes)
        return at, kind, (batch_keys(batch.slice(at - seen, 1), sparse_ndim) if at >= 0 else None)

    def takes_codes(self, codes) -> bool:
        """Whether check_codes can stand for check on these rows: uint64 codes of the full
        order, and no earlier batch checked by its columns (whose last row is kept as columns)."""
        return (codes is not None and codes.dtype == np.uint64 and self.full
                and (self.prev is None or np.ndim(self.prev) == 0))

    def _advance(self, row: int, kind: int, n: int) -> tuple[int, int]:
        at = self.offset + row if row >= 0 else -1
        self.offset += n
        return at, kind


class TensorSink(ClosesOrAborts):
    """Writes batches, checking every claim it will put in the metadata.

    ``meta.sort_order``, ``meta.iso`` and ``unique_claim`` are claims made by the caller: the sink
    verifies them as rows pass (a broken claim is an error, never a false header); a uniqueness claim
    on rows in no full sort order cannot be checked in one pass and is the caller's guarantee.  ``unique=None``
    means "find out": the output is marked unique when the rows turned out strictly
    increasing in a full sort order.  Shape entries that are None are inferred as max + 1.
    ``detect_order`` (rows with no claimed order, written to a file, a directory or memory): the
    output is marked row-major, and unique when strictly so, if the rows turn out to be.
    ``light_producer``: the caller's own work per row is lighter than encoding it (the merge
    join), so row groups are encoded on every core rather than leaving one to the caller.
    """

    def __init__(self, dst: str | None, meta: TensorMeta, *, unique_claim=True, part_rows: int = PART_ROWS,
                 budget: Budget | None = None, detect_order: bool = False, light_producer: bool = False):
        self.dst = local_path(dst)
        self.light_producer = light_producer
        self.kind = output_kind(dst)
        check_shape(meta.shape)
        meta = meta.with_(created_by=None)  # an output is written by this sptool, whatever made its input
        if meta.value_type in VARIABLE_WIDTH and unique_claim is None:
            # String and binary tensors are unique by the spec (their repeats cannot be summed), so
            # the claim is made up front (a stream's header is written before any row) and verified.
            unique_claim = True
            meta = meta.with_(unique=True)
        self.meta = meta
        self.K = meta.sparse_ndim
        self.unique_claim = unique_claim  # True: verify; None: detect; False: no claim
        self.schema = schema_of(meta)
        self.rows = 0
        self._first_row, self._source = 0, None  # what errors count rows from, and name (count_from)
        self.maxes = np.full(self.K, -1, dtype=np.int64)
        # A claim of None is detected: a repeat only means the output is not unique.
        self.order = OrderTracker(meta.sort_order, self.K, check_repeats=unique_claim is not False,
                                  tolerate_repeats=unique_claim is None)
        self.still_unique = unique_claim is not False and len(meta.sort_order) == self.K
        self.iso = IsoCheck() if meta.iso else None
        # Found order: a row-major tracker while the rows keep that order (repeats noted).
        self._found = OrderTracker(tuple(range(self.K)), self.K, check_repeats=True, tolerate_repeats=True) \
            if detect_order and not meta.sort_order and self.kind in ("file", "dir", "memory") else None
        # Parts must agree on shape, so an inferred shape (known only at the end) means one part.
        self.part_rows = part_rows if all(s is not None for s in meta.shape) else 2**62
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.bytes_written = 0
        self.final_meta: TensorMeta | None = None
        rb = row_bytes(meta)
        self.row_group_rows = budget_of(budget).group_rows(rb)
        self._target = None
        self._writer = None
        self._io = None  # the writer thread, started with the first row group
        # Held while a row group is written: abort() takes it before closing the writer, so no
        # write is still encoding into it (Ctrl-C inside submit() can lose track of a queued
        # write, and a writer closed under a write is a SIGSEGV).
        self._write_lock = threading.Lock()
        self._aborted = False
        self._inflight: deque = deque()
        self._part_index = 0
        self._part_rows_written = 0
        self._part_paths: list[str] = []
        self._budget = budget
        self._open()

    # -- targets ------------------------------------------------------------------------------
    def _open(self):
        if self.kind == "memory":
            self._batches: list[pa.RecordBatch] = []
            self._limit = budget_of(self._budget).total
        elif self.kind == "stream":
            out = sys.stdout.buffer
            if out.isatty():
                raise UsageError("refusing to write binary Arrow data to a terminal; "
                                 "give an output file (-o FILE; output=PATH in Python) or a pipe")
            self._stream_open(out)
        elif self.kind == "stream-file":
            self._target = AtomicTarget(self.dst, is_dir=False, remote=True)
            self._file = open_output(self._target.tmp)
            self._stream_open(self._file)
        else:
            self._target = AtomicTarget(self.dst, is_dir=self.kind == "dir", remote=True)

    def _stream_open(self, out):
        header = self.meta.with_(nnz=None) if self.meta.nnz is None else self.meta
        md = {METADATA_KEY: header.to_json(stream=True)}
        schema = self.meta.arrow_schema(metadata=md) if all(s is not None for s in self.meta.shape) else None
        if schema is None:
            # Unknown extents go out as null; the trailer resolves them.
            d = header.with_(shape=tuple(s if s is not None else 0 for s in header.shape)).to_dict(stream=True)
            d["shape"], d["version"] = list(self.meta.shape), version_for(self.meta.shape)
            schema = self.schema.with_metadata({METADATA_KEY: json.dumps(d, separators=(",", ":"))})
        self._digest = DigestWriter(out)
        self._writer = pa.ipc.new_stream(self._digest, schema)

    def _parquet_writer(self, path: str, *, many: bool = False, sample=None):
        """A writer for one file: with ``many`` row groups to come and cores to spare, one that
        encodes them side by side (StitchedWriter: the same bytes); else pyarrow's, fed by the
        one writer thread (_submit_write).  ``sample``: the first values, for their codec."""
        budget = budget_of(self._budget)
        options = parquet_writer_options(self.meta, sample)
        # The one writer thread already overlaps encoding with the rest of the command, so
        # encoders are one fewer than the workers, leaving a core to the producer; unless the
        # producer is lighter than the writing (add's merge join), where every worker encodes
        # (docs/performance.md, "Parquet writer settings").
        encoders = budget.workers if self.light_producer else budget.workers - 1
        # A row group waiting to be appended holds its rows and then their encoded bytes: one
        # per encoder and one more, within an eighth of the budget (or no stitching).
        group_bytes = 2 * self.row_group_rows * row_bytes(self.meta)
        inflight = min(encoders + 1, budget.usable // (8 * group_bytes))
        if many and encoders >= 2 and inflight >= 2:
            return StitchedWriter(path, self.schema, options, workers=encoders, inflight=inflight)
        filesystem, inner = located(path)
        return pq.ParquetWriter(inner, self.schema, filesystem=filesystem, **options)

    # -- writing ------------------------------------------------------------------------------
    def write(self, keys: np.ndarray, values, maxes: np.ndarray | None = None) -> None:
        """Append rows given as (K, n) int64 keys and values (ndarray or Arrow array).

        ``maxes`` (the largest index of each dimension among these rows) comes from an op whose
        rows continue the promised order, unique and within the shape by construction, its
        inputs' claims already verified as they were read (cross): the sink then skips its
        per-row checks, which cost such an op as much as its own work.  An op vouches for all
        of its rows or none (the order check follows the rows it sees)."""
        batch = make_batch(keys, values, self.meta, self.schema)
        if maxes is None:
            self.write_batch(batch)
        elif batch.num_rows:
            self.maxes = np.maximum(self.maxes, maxes)
            self._append(batch)

    def write_batch(self, batch: pa.RecordBatch, codes: np.ndarray | None = None) -> None:
        """Append a record batch in the file schema.  ``codes``, from a sort: the rows' packed
        keys in the sink's order, each row's indices checked against the shape before it was
        packed (so unpacked, within it): the order is checked on them (one compiled pass) and
        the bounds not again."""
        if batch.num_rows == 0:
            return
        if self._takes_codes(codes) and len(codes) == batch.num_rows:
            self._check_codes(batch, codes)
        else:
            # The index columns as they are in the batch: checked in place, not copied.
            self._check(batch_columns(batch, self.K))
        self._append(batch)

    def _takes_codes(self, codes) -> bool:
        return (self.order.takes_codes(codes) and self._found is None
                and all(s is not None for s in self.meta.shape[: self.K]))

    def _check_codes(self, batch: pa.RecordBatch, codes: np.ndarray):
        at, kind, keys = self.order.check_batch_codes(batch, codes, self.K)
        if at >= 0:
            self._order_broken(at, kind, keys, 0)
        if self.order.repeated:
            self.still_unique = False

    def _append(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if self.iso is not None:
            at = self._first_row + self.rows
            row = self.iso.first_break(batch_values(batch, self.meta), at)
            if row >= 0:
                raise DataError(self.iso.broken(at + row), path=self._source)
        self.rows += n
        if self.kind == "memory":
            self.bytes_written += batch.nbytes
            if self.bytes_written > self._limit:
                raise ResourceError("the result is larger than --memory; give an output path to stream it to a file")
            self._batches.append(batch)
            return
        if self.kind in ("stream", "stream-file"):
            self._writer.write_batch(batch)
            return
        self._pending.append(batch)
        self._pending_rows += n
        if self._pending_rows >= self.row_group_rows:
            self._flush(final=False)

    def count_from(self, start: int, path: str | None) -> None:
        """Rows written row for row from the input ``path``, whose first is its row ``start`` (a
        piece of a larger input): this sink's errors name that input and count its rows."""
        self.order.offset = self._first_row = start
        self._source = path

    def _check(self, cols: list):
        n = len(cols[0])
        if n == 0:
            return
        shape = np.array([s if s is not None else np.iinfo(np.int64).max for s in self.meta.shape[: self.K]],
                         dtype=np.int64)
        row, dim = _kernels.columns_out_of_bounds(cols, shape)
        if row >= 0:
            raise DataError(out_of_bounds(self._first_row + self.rows + row, cols, row, self.meta.shape[: self.K]),
                            path=self._source)
        if any(s is None for s in self.meta.shape[: self.K]):
            self.maxes = np.maximum(self.maxes, _kernels.columns_max(cols))
        keys = cols
        if self._found is not None:
            self._detect(cols)
        at, kind = self.order.check(keys)
        if at >= 0:
            self._order_broken(at, kind, keys, at - (self.order.offset - n))
        if self.order.repeated:
            self.still_unique = False

    def _order_broken(self, at: int, kind: int, keys, local: int):
        if kind == _kernels.OUT_OF_ORDER:
            raise DataError(f"internal error: {out_of_order(at, keys, local)}, breaking the promised sort order "
                            f"{list(self.meta.sort_order)}", path=self._source)
        raise DataError(repeated(at, keys, local), path=self._source)

    def _detect(self, cols: list):
        """Follow whether the rows are still in row-major order (and strictly so)."""
        at, _ = self._found.check(cols)
        if at >= 0:
            self._found = None

    def _flush(self, final: bool):
        if not (self._pending_rows >= self.row_group_rows or (final and self._pending_rows)):
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        start, n = 0, table.num_rows
        # More than one row group to come: worth encoding them side by side.
        many = not final or n > self.row_group_rows
        while n - start >= self.row_group_rows or (final and n > start):
            take = min(self.row_group_rows, n - start)
            if self.kind == "dir":
                take = min(take, self.part_rows - self._part_rows_written)
            self._write_rows(table.slice(start, take), many)
            start += take
        rest = table.slice(start)
        # Copy the remainder (less than a row group): a slice would keep its parent batches alive.
        self._pending = [_copied(rest)] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def _write_rows(self, table: pa.Table, many: bool):
        if self._writer is None:
            if self.kind == "dir":
                path = join_path(self._target.tmp, part_name(self._part_index))
                self._part_paths.append(path)
                # Per-part uniqueness: a part is unique if the whole output is, so the part
                # claims follow the dataset's, checked by the same tracker.
            else:
                path = self._target.tmp
            self._writer = self._parquet_writer(path, many=many, sample=table.column(self.K))
            self._part_rows_written = 0
        if isinstance(self._writer, StitchedWriter):
            self._writer.write_table(table)  # queued on its own encoders
        else:
            self._submit_write(self._writer, table)
        self._part_rows_written += table.num_rows
        if self.kind == "dir" and self._part_rows_written >= self.part_rows:
            self._close_part()

    def _submit_write(self, writer, table: pa.Table):
        """Encode and write a row group on the writer thread, so that it overlaps the caller's
        work on the next rows; at most two row groups wait, which bounds the memory it holds."""
        if self._io is None:
            self._io = ThreadPoolExecutor(1, thread_name_prefix="sptool-write")
        while len(self._inflight) >= 2:
            self._inflight.popleft().result()
        self._inflight.append(self._io.submit(self._write_table, writer, table))

    def _write_table(self, writer, table: pa.Table):
        with self._write_lock:
            if not self._aborted:
                writer.write_table(table, row_group_size=table.num_rows)

    def _drain(self):
        while self._inflight:
            self._inflight.popleft().result()

    def _close_part(self):
        self._drain()
        meta = self._final(self._part_rows_written)
        self._writer.add_key_value_metadata(footer_entries(meta))
        self._writer.close()
        self._writer = None
        self._part_index += 1
        self._part_rows_written = 0

    def _final(self, nnz: int) -> TensorMeta:
        shape = tuple(int(self.maxes[k] + 1) if s is None else s for k, s in enumerate(self.meta.shape))
        if self.unique_claim is False:
            unique = False
        elif self.unique_claim is True:
            # Verified row by row under a full sort order; otherwise the caller's guarantee
            # (e.g. an in-memory SparseTensor that checked by sorting a copy).
            unique = True
        else:
            unique = self.rows <= 1 or (self.still_unique and len(self.meta.sort_order) == self.K)
        # The version the file declares (SPEC §9): the lowest its shape allows.
        version = version_for(shape)
        if self._found is not None:
            return self.meta.with_(shape=shape, nnz=nnz, sort_order=tuple(range(self.K)),
                                   unique=unique or not self._found.repeated, version=version)
        return self.meta.with_(shape=shape, nnz=nnz, unique=unique, version=version)

    def resolve_shape(self, shape):
        """Fill the extents left open (None) now that they are known, e.g. from a stream's trailer.

        Rows already written were only checked against the known extents, so the largest index
        seen on each open dimension is checked against the new extent here.
        """
        shape = tuple(shape)
        if len(shape) != len(self.meta.shape) or any(
            a is not None and a != b for a, b in zip(self.meta.shape, shape)
        ):
            raise DataError(f"shape {list(shape)} does not fill in {list(self.meta.shape)}")
        for k in range(self.K):
            if self.meta.shape[k] is None and self.maxes[k] >= shape[k]:
                raise DataError(f"an index {int(self.maxes[k])} on dimension {k} is outside the final extent "
                                f"{shape[k]}")
        self.meta = self.meta.with_(shape=shape)

    def close(self, *, commit: bool = True) -> TensorMeta:
        """Finish the output and move it into place (with ``commit=False``, leave that to
        ``commit()``: outputs written together are all finished before any is moved); returns the
        final metadata."""
        final = self._final(self.rows)
        check_shape(final.shape)  # an inferred shape (max + 1) may still overflow
        if self.kind == "memory":
            self.final_meta = final
            return final
        if self.kind in ("stream", "stream-file"):
            empty = pa.RecordBatch.from_arrays(
                [pa.array([], type=f.type) for f in self.schema], schema=self.schema
            )
            if not self._digest.size:
                # pyarrow sends the schema with the first batch: an empty tensor's goes out
                # here, so that the digest covers it.
                self._writer.write_batch(empty)
            trailer = {"nnz": self.rows, "shape": list(final.shape), DIGEST_KEY: self._digest.crc}
            self._writer.write_batch(empty, custom_metadata={TRAILER_KEY: json.dumps(trailer)})
            self._writer.close()
            if self.kind == "stream-file":
                self._file.close()
                if commit:
                    self._target.commit()
            else:
                sys.stdout.buffer.flush()
        else:
            self._flush(final=True)
            if self._writer is None and (self.kind == "file" or not self._part_paths):
                # An empty tensor is still one valid file (or one empty part).
                self._write_empty()
            self._drain()
            if self._io is not None:
                stop_pool(self._io)
            if self._writer is not None:
                if self.kind == "dir":
                    self._close_part()
                else:
                    self._writer.add_key_value_metadata(footer_entries(final))
                    self._writer.close()
                    self._writer = None
            self.bytes_written = _size(self._target.tmp)
            if commit:
                self._target.commit()
        self.final_meta = final
        return final

    def commit(self):
        """Move a finished output (``close(commit=False)``) into place."""
        if self._target is not None:
            self._target.commit()

    def _write_empty(self):
        path = self._target.tmp
        if self.kind == "dir":
            path = join_path(self._target.tmp, "part-000000.parquet")
            self._part_paths.append(path)
        self._writer = self._parquet_writer(path)
        self._writer.write_table(self.schema.empty_table())
        self._part_rows_written = 0

    def result(self) -> tuple[np.ndarray, np.ndarray, TensorMeta]:
        """An in-memory sink's tensor once closed: ((n, K) indices, values, final metadata)."""
        # Held once more at most: the indices are filled batch by batch into their (n, K) array,
        # the values column alone is made contiguous, and the batches go as they are read.
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        self._batches = []
        indices = np.empty((table.num_rows, self.K), dtype=np.int64)
        for k in range(self.K):
            at = 0
            for chunk in table.column(k).chunks:
                indices[at:at + len(chunk), k] = chunk.to_numpy()
                at += len(chunk)
        values = table.column(self.K)
        values = pa.concat_arrays(values.chunks) if values.num_chunks else pa.array([], type=values.type)
        del table
        names = [f.name for f in self.schema]
        only = pa.RecordBatch.from_arrays([pa.nulls(len(values))] * self.K + [values], names=names)
        return indices, batch_values(only, self.final_meta), self.final_meta

    def abort(self):
        if self.kind == "memory":
            self._batches = []
            return
        self._aborted = True
        with self._write_lock:
            pass  # a write under way has ended; one still queued will not start
        self._inflight.clear()
        if self._io is not None:
            stop_pool(self._io)
        try:
            if isinstance(self._writer, StitchedWriter):
                self._writer.abort()
            elif self._writer is not None:
                self._writer.close()
        except Exception:
            pass
        self._writer = None
        if self.kind == "stream-file":
            self._file.close()
        if self._target is not None:
            self._target.abort()


def _copied(table: pa.Table) -> pa.RecordBatch:
    """A compact copy of a table's rows (concat_arrays always allocates new buffers)."""
    cols = [pa.concat_arrays(col.chunks) for col in table.columns]
    return pa.RecordBatch.from_arrays(cols, schema=table.schema)


def _size(path: str) -> int:
    if is_remote(path):
        return total_size(path)
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))
    return os.path.getsize(path)


def open_sink(dst: str | None, meta: TensorMeta, **kw) -> TensorSink:
    return TensorSink(dst, meta, **kw)
