"""Plain tables: a Parquet file or directory, an Arrow IPC file (.arrow, .feather) or CSV/TSV text
with a header, as DuckDB, Polars, Spark or pandas write them, adopted as a tensor by naming its
index and value columns; and a tensor written as such a table, without sptool's metadata.

Reading streams in batches: a Parquet row group, an Arrow record batch or a block of text at a
time.  Index columns may have any integer type and are checked (no nulls, not negative, within
--shape); without --shape the extents are the largest indices plus one, found by the sink as
the rows pass.  The rows claim no order: the sptool writer finds out whether they are row-major
(and unique) as they pass.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .. import _kernels
from ..errors import DataError, InputError, UsageError
from ..format import INT64_MAX, TensorMeta, index_column, value_type_of_arrow
from ..io import READ_ERRORS, AtomicTarget, join_path, list_parts, locate, make_batch, parquet_file
from .common import Options, Reader, cast_or_fail, coerce_fill
from .compression import _Prefixed, open_binary, reading
from .text import chunk_bytes

DELIMITERS = {"csv": ",", "tsv": "\t"}
MAX_HEADER = 1 << 20


@dataclass(frozen=True)
class TableOptions:
    """convert's plain-table options: the columns a table's tensor is read from (names, or
    1-based positions), and the plain output with its column names."""

    index_columns: tuple[str, ...] | None = None
    values_column: str | None = None
    plain: bool = False
    dimension_names: tuple[str, ...] | None = None


def _names(value) -> tuple[str, ...] | None:
    if value is None:
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(str(p).strip() for p in parts)
    if not names or any(not n for n in names):
        raise UsageError(f"{value!r} must be a comma-separated list of column names or 1-based positions")
    return names


def table_options(index_columns=None, values_column=None, plain: bool = False, dimension_names=None):
    """The TableOptions of convert's keywords, or None when none is given."""
    if index_columns is None and values_column is None and not plain and dimension_names is None:
        return None
    if values_column is not None and index_columns is None and not plain:
        raise UsageError("--values-column needs --index-columns (the columns that hold the indices)")
    if dimension_names is not None and not plain:
        raise UsageError("--dimension-names names the index columns of a --plain output")
    return TableOptions(_names(index_columns), None if values_column is None else str(values_column).strip(),
                        bool(plain), _names(dimension_names))


# ---------------------------------------------------------------------------------------------
# reading

def _parquet_files(path: str) -> list[str]:
    kind = locate(path)
    if kind == "dir":
        files = [join_path(path, n) for n in list_parts(path)]
        if not files:
            raise InputError("the directory holds no *.parquet files", path=path)
        return files
    if kind != "parquet":
        raise InputError("not a Parquet file or a directory of them", path=path)
    return [path]


def _open_parquet(path: str) -> pq.ParquetFile:
    try:
        return parquet_file(path)
    except READ_ERRORS as e:
        raise InputError(f"not a readable Parquet file ({str(e).strip().splitlines()[0]})", path=path) from None


class TableReader(Reader):
    """A tensor read from the index and value columns of a plain table (``fmt``: parquet, arrow,
    csv or tsv)."""

    def __init__(self, path: str, opts: Options, fmt: str):
        table = opts.table
        if table is None or table.index_columns is None:
            raise UsageError("a plain table needs --index-columns (and usually --values-column) to be read as a "
                             "tensor", path=path)
        self.opts, self.fmt, self.path = opts, fmt, path
        self.name = "<stdin>" if path == "-" else path
        self.budget = opts.budget
        self._closers: list = []
        self.nnz = None
        self._open_table(path, fmt)
        names = self.schema.names
        self.index = [self._column(c, names) for c in table.index_columns]
        self.value = self._column(table.values_column, names) if table.values_column else None
        chosen = self.index + ([self.value] if self.value is not None else [])
        if len(set(chosen)) != len(chosen):
            raise UsageError("--index-columns and --values-column name the same column twice", path=self.name)
        self.index_names = [names[i] for i in self.index]
        K = len(self.index)
        if fmt not in DELIMITERS:  # text is parsed as int64 from the start
            for i, name in zip(self.index, self.index_names):
                self._check_index_type(self.schema.field(i).type, name)
        vt = self._checked_value_type(opts.value_type or self._value_type())
        shape = opts.shape
        if shape is not None and len(shape) != K:
            raise UsageError(f"--shape {list(shape)} has {len(shape)} dimensions but --index-columns names {K} "
                             "columns", path=self.name)
        dimension_names = tuple(self.index_names) if len(set(self.index_names)) == K else None
        self.meta = TensorMeta(shape=tuple(shape) if shape is not None else (None,) * K, sparse_ndim=K, value_type=vt,
                               fill_value=coerce_fill(opts.fill_value, vt), nnz=self.nnz, sort_order=(),
                               unique=False, dimension_names=dimension_names)
        self.unique_claim = None  # found out as the rows pass, with their order
        self.complete = shape is not None and self.nnz is not None

    def _open_table(self, path: str, fmt: str) -> None:
        """The table's files (Parquet: their row count too) and its schema."""
        if fmt == "parquet":
            paths = _parquet_files(path)
            self.files = [_open_parquet(f) for f in paths]
            self.schema = self.files[0].schema_arrow
            for f, pf in zip(paths[1:], self.files[1:]):
                if pf.schema_arrow.names != self.schema.names:
                    raise DataError(f"{os.path.basename(f)} has the columns {pf.schema_arrow.names}, the first file "
                                    f"{self.schema.names}", path=path)
            self.nnz = sum(pf.metadata.num_rows for pf in self.files)
        elif fmt == "arrow":
            try:
                source = pa.OSFile(path)  # plain reads: pages of a memory map would count in RSS
                self._closers.append(source)
                self.ipc = pa.ipc.open_file(source)
            except READ_ERRORS as e:
                raise InputError(f"not a readable Arrow IPC file ({str(e).strip().splitlines()[0]})",
                                 path=path) from None
            self.schema = self.ipc.schema
        else:
            self.schema = self._csv_header(path, fmt)

    def _checked_value_type(self, vt: str) -> str:
        """The value type to read the values column as, refused where a table cannot give it."""
        if self.fmt in DELIMITERS and vt.startswith("complex"):
            raise UsageError(f"a {self.fmt.upper()} table's values are read as real numbers, not {vt}",
                             path=self.name)
        if vt in ("string", "binary"):
            raise UsageError(f"--values-column must hold numbers or booleans to be read from a table, not {vt}",
                             path=self.name)
        return vt

    # -- columns ---------------------------------------------------------------------------
    def _column(self, spec: str, names: list[str]) -> int:
        """A column's position from its name, or from its 1-based position when no column has that name."""
        if names.count(spec) == 1:
            return names.index(spec)
        if names.count(spec) > 1:
            raise UsageError(f"the table has {names.count(spec)} columns named {spec!r}; give its 1-based position",
                             path=self.name)
        if spec.isdigit() and 1 <= int(spec) <= len(names):
            return int(spec) - 1
        raise UsageError(f"the table has no column {spec!r}; its columns are {', '.join(names)}", path=self.name)

    def _check_index_type(self, dtype: pa.DataType, name: str):
        if pa.types.is_dictionary(dtype):
            dtype = dtype.value_type
        if not pa.types.is_integer(dtype):
            raise DataError(f"index column {name!r} holds {dtype}, not integers", path=self.name)

    def _value_type(self) -> str:
        if self.value is None:
            return "bool"  # a pattern: every listed coordinate holds True (as a .mtx pattern)
        if self.fmt in DELIMITERS:
            return "float64"  # as the other text formats; types inferred per block could change midway
        dtype = self.schema.field(self.value).type
        if pa.types.is_dictionary(dtype):
            dtype = dtype.value_type
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            return "string"
        if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
            return "binary"
        value_type = value_type_of_arrow(dtype)
        if value_type is None:
            raise UsageError(f"--values-column {self.schema.names[self.value]!r} holds {dtype}, which is not a "
                             "number or a boolean; give --value-type to convert it", path=self.name)
        return value_type

    # -- CSV / TSV -------------------------------------------------------------------------
    def _csv_header(self, path: str, fmt: str) -> pa.Schema:
        """The header's column names (read here, byte by byte, so that the text reader starts at
        the first data line); every column typed as text until chosen."""
        raw, owned, _ = open_binary(path, "the table")
        if owned:
            self._closers.append(raw)
        self.text = reading(raw, path, self.name)
        if self.text is not raw:
            self._closers.insert(0, self.text)
        line = bytearray()
        while len(line) < MAX_HEADER:
            c = self.text.read(1)
            if not c or c == b"\n":
                break
            line += c
        text = line.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r")
        if not text.strip():
            raise DataError("the file has no header line naming its columns", path=self.name)
        names = [n.strip() for n in next(csv.reader([text], delimiter=DELIMITERS[fmt]))]
        return pa.schema([pa.field(n, pa.string()) for n in names])

    def _csv_batches(self):
        fmt = self.fmt
        ncols = len(self.schema.names)
        internal = [f"c{i}" for i in range(ncols)]  # positions, whatever the header says (repeats too)
        wanted = [internal[i] for i in self.index] + ([internal[self.value]] if self.value is not None else [])
        # Cells stay text here and are parsed per column in batches(), where a bad one can be
        # found and named by its row (pyarrow's own conversion error does not say where).
        types = {name: pa.string() for name in wanted}
        try:
            # pyarrow's reader may close what it reads; the wrapper leaves the file to close().
            reader = pacsv.open_csv(
                _Prefixed(b"", self.text),
                read_options=pacsv.ReadOptions(column_names=internal, block_size=chunk_bytes(self.budget)),
                parse_options=pacsv.ParseOptions(delimiter=DELIMITERS[fmt]),
                convert_options=pacsv.ConvertOptions(include_columns=wanted, column_types=types),
            )
            yield from reader
        except pa.ArrowInvalid as e:
            raise DataError(f"cannot read the {fmt.upper()} table: {_arrow_message(e)}", path=self.name) from None

    # -- batches -----------------------------------------------------------------------------
    def _raw_batches(self):
        cols = self.index + ([self.value] if self.value is not None else [])
        if self.fmt == "parquet":
            rows = self.budget.rows(8 * (len(cols) + 1))
            for pf in self.files:
                names = [pf.schema_arrow.names[i] for i in cols]
                try:
                    for batch in pf.iter_batches(batch_size=rows, columns=names, use_threads=True):
                        yield batch.select(names) if batch.schema.names != names else batch
                except READ_ERRORS as e:
                    raise DataError(f"cannot read the Parquet table: {_arrow_message(e)}", path=self.name) from None
        elif self.fmt == "arrow":
            for i in range(self.ipc.num_record_batches):
                try:
                    batch = self.ipc.get_batch(i)
                except READ_ERRORS as e:
                    raise DataError(f"cannot read the Arrow file: {_arrow_message(e)}", path=self.name) from None
                yield batch.select(cols)
        else:
            yield from self._csv_batches()

    def batches(self):
        K = self.meta.sparse_ndim
        dtype = self.meta.dtype
        bounds = np.asarray(self.opts.shape if self.opts.shape is not None else [INT64_MAX] * K, dtype=np.int64)
        for batch in self._raw_batches():
            n = batch.num_rows
            if n == 0:
                continue
            first = self.rows_in
            keys = np.empty((K, n), dtype=np.int64)
            for k in range(K):
                keys[k] = self._indices(batch.column(k), self.index_names[k], first)
            row, dim = _kernels.first_out_of_bounds(keys, bounds)
            if row >= 0:
                raise DataError(f"{self._row(first + row)}: index {int(keys[dim, row])} in column "
                                f"{self.index_names[dim]!r} is outside --shape {list(self.opts.shape)}",
                                path=self.name)
            if self.value is None:
                values = np.ones(n, dtype=bool)
            else:
                values = self._values(batch.column(K), first, dtype)
            self.rows_in += n
            yield keys, values

    def _row(self, row: int) -> str:
        """Where a 0-based data row is: its row number, and its line in text."""
        return f"row {row + 1}" + (f" (line {row + 2})" if self.fmt in DELIMITERS else "")

    def _parsed(self, arr, to_type: pa.DataType, what: str, first: int):
        """Text cells (blanks around them allowed) as ``to_type``; the first that does not parse
        is an error naming its row, found by halving the batch."""
        arr = pc.utf8_trim_whitespace(arr)
        try:
            return pc.cast(arr, to_type)
        except pa.ArrowInvalid:
            lo, hi = 0, len(arr)  # the first bad cell is in [lo, hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                try:
                    pc.cast(arr.slice(lo, mid - lo), to_type)
                    lo = mid
                except pa.ArrowInvalid:
                    hi = mid
            raise DataError(f"{self._row(first + lo)}: {what} holds {arr[lo].as_py()!r}, which does not read as "
                            f"{to_type}", path=self.name) from None

    def _non_null(self, arr, what: str, first: int):
        if arr.null_count:
            at = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
            raise DataError(f"{self._row(first + at)}: {what} is empty (null)", path=self.name)
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        return arr.to_numpy(zero_copy_only=False)

    def _indices(self, arr, name: str, first: int) -> np.ndarray:
        if self.fmt in DELIMITERS:
            arr = self._parsed(arr, pa.int64(), f"index column {name!r}", first)
        col = self._non_null(arr, f"index column {name!r}", first)
        if col.dtype.kind == "u" and col.dtype.itemsize == 8:
            big = np.flatnonzero(col > INT64_MAX)
            if len(big):
                raise DataError(f"{self._row(first + int(big[0]))}: index {int(col[big[0]])} in column {name!r} does "
                                "not fit in a 64-bit signed integer", path=self.name)
        elif col.dtype.kind == "i":
            negative = np.flatnonzero(col < 0)
            if len(negative):
                raise DataError(f"{self._row(first + int(negative[0]))}: index {int(col[negative[0]])} in column "
                                f"{name!r} is negative", path=self.name)
        return col

    def _values(self, arr, first: int, dtype) -> np.ndarray:
        name = self.schema.names[self.value]
        if self.fmt in DELIMITERS:
            arr = self._parsed(arr, pa.bool_() if dtype == np.bool_ else pa.from_numpy_dtype(dtype),
                               f"value column {name!r}", first)
        values = self._non_null(arr, f"value column {name!r}", first)
        return cast_or_fail(values, dtype, lambda r: self._row(first + r), self.name)

    def close(self):
        for c in self._closers:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - closing an input must not mask the real error
                pass
        self._closers = []


def _arrow_message(e: Exception) -> str:
    return " ".join(str(e).split())


def table_reader(src: str, fmt: str, opts: Options) -> Reader:
    """The reader of a plain table in ``fmt`` (sptool's names: a Parquet file or directory is
    "sptool" by name)."""
    if fmt == "sptool":
        if src == "-" or src.endswith(".arrows"):
            raise UsageError("--index-columns reads a Parquet file or directory, an Arrow file (.arrow, .feather) "
                             "or CSV/TSV text, not an Arrow stream", path=src)
        fmt = "parquet"
    if fmt not in ("parquet", "arrow", *DELIMITERS):
        raise UsageError(f"--index-columns reads Parquet, Arrow (.arrow, .feather), CSV and TSV tables, not {fmt}",
                         path=src)
    return TableReader(src, opts, fmt)


def arrow_reader(src: str, opts: Options) -> Reader:
    """An Arrow IPC file's reader: its named columns, or sptool's own names when none are given."""
    if opts.table is None or opts.table.index_columns is None:
        names = _arrow_names(src)
        K = sum(1 for n in names if n.startswith("indices_"))
        if not K or [index_column(k) for k in range(K)] != names[:K]:
            raise UsageError("an Arrow file is read as a table: name its index columns with --index-columns "
                             "(and its values with --values-column)", path=src)
        opts = replace(opts, table=TableOptions(tuple(names[:K]), "values" if "values" in names else None))
    return TableReader(src, opts, "arrow")


def _arrow_names(path: str) -> list[str]:
    try:
        with pa.OSFile(path) as f:
            return pa.ipc.open_file(f).schema.names
    except READ_ERRORS as e:
        raise InputError(f"not a readable Arrow IPC file ({_arrow_message(e)})", path=path) from None


# ---------------------------------------------------------------------------------------------
# writing

class PlainTableWriter:
    """A tensor as a plain Parquet or Arrow IPC file: one column per sparse dimension (named by
    --dimension-names, else the tensor's dimension names, else indices_k) and the values column
    (--values-column, else "values"); no sptool metadata, so the shape and claims are not kept."""

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, fmt: str, unique_claim=None):
        if dst == "-" or dst.endswith(("/", os.sep)) or os.path.isdir(dst):
            raise UsageError("a plain table is written to one file (.parquet, .arrow or .feather)", path=dst)
        K = meta.sparse_ndim
        table = opts.table or TableOptions()
        names = list(table.dimension_names or meta.dimension_names or [index_column(k) for k in range(K)])
        names = [n if n else index_column(k) for k, n in enumerate(names)]
        if len(names) < K:
            raise UsageError(f"--dimension-names gives {len(names)} names for {K} sparse dimensions")
        names = names[:K] + [table.values_column or "values"]
        if len(set(names)) != len(names):
            raise UsageError(f"the output's column names must differ: {', '.join(names)}")
        self.meta = meta
        self.source_schema = meta.arrow_schema()
        self.schema = pa.schema([f.with_name(n) for f, n in zip(self.source_schema, names)])
        self.fmt = fmt
        self.target = AtomicTarget(dst, is_dir=False)
        try:
            if fmt == "arrow":
                self.sink = pa.OSFile(self.target.tmp, "wb")
                self.writer = pa.ipc.new_file(self.sink, self.schema)
            else:
                self.sink = None
                self.writer = pq.ParquetWriter(self.target.tmp, self.schema, compression="zstd")
        except BaseException:
            self.target.abort()
            raise
        self.group_rows = (opts.budget.group_rows(8 * (K + 1)) if opts.budget else None)

    def write(self, keys, values):
        batch = make_batch(keys, values, self.meta, self.source_schema)
        batch = pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        if self.fmt == "arrow":
            self.writer.write_batch(batch)
        else:
            self.writer.write_batch(batch, row_group_size=self.group_rows)

    def close(self):
        self.writer.close()
        if self.sink is not None:
            self.sink.close()
        self.target.commit()

    def abort(self):
        try:
            self.writer.close()
            if self.sink is not None:
                self.sink.close()
        except Exception:  # noqa: BLE001 - the partial output is being removed anyway
            pass
        self.target.abort()


def table_writer(dst: str, fmt: str, meta: TensorMeta, opts: Options):
    """The --plain writer for an output named as sptool (.parquet) or Arrow (.arrow, .feather)."""
    if fmt not in ("sptool", "arrow") or dst.endswith(".arrows"):
        raise UsageError("--plain writes a .parquet, .arrow or .feather file", path=dst)
    return PlainTableWriter(dst, meta, opts, "arrow" if fmt == "arrow" else "parquet")
