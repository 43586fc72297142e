"""convert: move a tensor between sptool and the interchange formats, streaming where the
format allows.  Formats are told from names (or content) by the registry in sptool.converters,
readers check their input before any output exists, and every output appears whole or not at
all.

The rows move from a converter's Reader (a foreign format, not a TensorSource) to a format's
writer through _Pump, a StreamOp of no tensor operand that the engine drives; sptool to .npy
runs the engine's Densify.  What stays here is choosing the formats, and the spool a writer
needing whole rows in order (or mtx's size line) is fed through."""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from dataclasses import replace

import numpy as np

from .._args import optional_whole_number, shape_of
from .._memory import Budget, budget_of
from .._vocabulary import renamed_keywords
from ..converters import (
    EXTENSIONS,
    TEXT_FORMATS,
    Options,
    Reader,
    RowMajorReader,
    SptoolReader,
    SptoolWriter,
    check_value_type,
    input_format,
    open_reader,
    open_writer,
    output_format,
    parse_shape,
)
from ..converters.mtx import check_matrix
from ..converters.registry import BY_NAME
from ..converters.rows import OPTION_NAMES, ExampleOptions
from ..converters.rowsparse import RowsOptions
from ..converters.svmlight import IndexBaseRestart
from ..converters.table import table_options
from ..converters.tfrecord import tfrecord_options
from ..errors import UsageError
from ..io import ClosesOrAborts, is_remote, local_path, open_source, sibling_name
from ..stream.dense import write_dense
from ..stream.engine import Plan, StreamOp, run
from ..tensor import SparseTensor

_TEXT_EXTENSIONS = ", ".join(ext for ext, fmt in EXTENSIONS.items() if fmt in TEXT_FORMATS)

# Formats read or written through local files (a memory map, a zip archive's random access, HDF5 or
# Zarr, an Arrow IPC file's footer, a plain table's writer): a URL of another filesystem is refused
# for them.  sptool's own, the text formats and TFRecord stream through io, URLs included.
_LOCAL_FORMATS = ("npz", "npy", "rows", "torch", "binsparse", "arrow", "anndata")
_URL_FORMATS = "sptool tensors (.parquet, part directories, .arrows), text formats (" + _TEXT_EXTENSIONS + \
    ") and .tfrecord files"


def _check_url(name: str, fmt: str, what: str, plain: bool = False) -> None:
    """A URL of another filesystem refused for a format that goes through local files."""
    if is_remote(name) and (fmt in _LOCAL_FORMATS or plain):
        kind = "a plain table" if plain else f"{fmt} files"
        raise UsageError(f"convert {what} {kind} through local files only (a local path or a file:// URL); URLs of "
                         f"other filesystems are taken for {_URL_FORMATS}", path=name)


class _Pump(StreamOp):
    """Every batch of a converter's reader into a format's writer, tracking rows and the largest
    indices: an op of no tensor operand (its input is a foreign format's Reader, not a
    TensorSource) whose output is the writer."""

    def __init__(self, reader: Reader, writer):
        self.reader, self.writer = reader, writer
        self.rows = 0
        self.maxes = np.full(reader.meta.sparse_ndim, -1, dtype=np.int64)

    def plan(self) -> Plan:
        return Plan(self.reader.meta, pieces=True)

    def progress_total(self, metas, plan: Plan) -> int | None:
        return self.reader.meta.nnz  # a Parquet input's rows; None from text, known only at the end

    def open_output(self, output, plan: Plan, *, budget: Budget):
        return _Writing(self.writer)

    def read(self, srcs, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        seen = 0
        with contextlib.closing(self.reader.batches()) as batches:
            for piece in batches:
                yield piece, None
                if progress is not None:
                    progress.advance(self.reader.rows_in - seen)
                    seen = self.reader.rows_in

    def map(self, piece, _):
        keys, values = piece
        n = keys.shape[1]
        if n:
            self.maxes = np.maximum(self.maxes, keys.max(axis=1))
        self.rows += n
        yield keys, values

    def finish(self):
        resolve = getattr(self.writer, "resolve_shape", None)
        if resolve is not None and all(s is not None for s in self.reader.meta.shape):
            resolve(self.reader.meta.shape)  # extents a reader knows only at the end (svmlight's rows)
        return ()

    def shape(self, meta) -> list:
        return [int(self.maxes[k] + 1) if s is None else int(s) for k, s in enumerate(meta.shape)]


class _Writing(ClosesOrAborts):
    """A format's writer as the engine's output: closed when every row is in, aborted on any
    failure."""

    def __init__(self, writer):
        self.writer = writer

    def write(self, keys, values):
        self.writer.write(keys, values)

    def close(self):
        self.writer.close()

    def abort(self):
        self.writer.abort()


def _pump(reader: Reader, writer, progress, budget: Budget) -> _Pump:
    """Move every row from the reader to the writer and close it; abort it on any failure."""
    pump = _Pump(reader, writer)
    run(pump, [], None, budget=budget, progress=progress)
    return pump


def _spool_path(near: str) -> str:
    """Beside the output; in the temporary directory for stdout and for another filesystem's URL
    (the spool is read back, and a round trip through the store would cost twice)."""
    away = near == "-" or is_remote(near)
    return sibling_name(os.path.join(tempfile.gettempdir(), "convert") if away else near, "spool", ".parquet")


def _spool(reader: Reader, near: str, progress, budget: Budget) -> tuple[str, _Pump]:
    """Write the reader's rows to a hidden sptool file next to the output; returns its path."""
    path = _spool_path(near)
    return path, _pump(reader, SptoolWriter(path, reader.meta, unique_claim=reader.unique_claim), progress, budget)


def _remove(path: str | None):
    if path and os.path.exists(path):
        os.remove(path)


def _check_format_options(src_fmt: str, dst_fmt: str, index_base, dense: bool, key) -> None:
    """--index-base, --dense and --key refused for formats they do not apply to."""
    if index_base is not None:
        if index_base not in (0, 1):
            raise UsageError(f"--index-base must be 0 or 1, not {index_base!r}")
        if src_fmt not in TEXT_FORMATS and dst_fmt not in TEXT_FORMATS:
            raise UsageError(f"--index-base applies to text formats ({_TEXT_EXTENSIONS}) only")
    if dense and dst_fmt != "mtx":
        raise UsageError(f"--dense writes Matrix Market's dense 'array' format (.mtx) only, not {dst_fmt}; a dense "
                         "NumPy array is written by naming a .npy output")
    if key is not None and src_fmt != "anndata":
        raise UsageError(f"--key picks a matrix of an AnnData input (.h5ad, an AnnData .zarr store), not of {src_fmt}")


def _example_options(src_fmt: str, dst_fmt: str, *, zero_based, vocab_size, labels, multilabel, query_id, strict,
                     ids, values, label_key) -> ExampleOptions:
    """The svmlight and JSON lines options of a convert between ``src_fmt`` and ``dst_fmt``,
    once the options of example files are refused for formats they do not apply to."""
    fmts = {src_fmt, dst_fmt}
    if labels is not None and not {"svmlight", "jsonl", "tfrecord"} & fmts:
        raise UsageError("--labels applies to svmlight, JSON lines and TFRecord files only")
    if (ids is not None or values is not None) and not {"jsonl", "tfrecord"} & fmts:
        raise UsageError("--ids and --values apply to JSON lines and TFRecord files only")
    examples = {"svmlight", "jsonl"} & fmts
    tfr = "tfrecord" in fmts
    if not (examples or tfr) and (vocab_size is not None or label_key is not None):
        raise UsageError("--vocab-size and --label-key apply to svmlight, JSON lines and TFRecord files only")
    ex = ExampleOptions(zero_based, vocab_size if examples else None, labels if examples else None, multilabel,
                        query_id, strict,
                        (ids if "jsonl" in fmts else None) or "ids", (values if "jsonl" in fmts else None) or "values",
                        (label_key if "jsonl" in fmts else None) or "label")
    if ex.used() and not examples:
        raise UsageError(f"{', '.join(sorted(OPTION_NAMES[n] for n in ex.used()))} apply to svmlight and JSON lines "
                         "files only")
    if labels is not None and fmts <= {"svmlight", "jsonl"}:
        raise UsageError("--labels cannot be both written and read in one convert; convert through sptool")
    return ex


@renamed_keywords("output", "dtype", "vocab_size", "label_key", "row_ids")
def convert(src: str | None, output: str | None = None, *, from_format: str | None = None,
            to_format: str | None = None, shape=None, dtype: str | None = None, fill_value=None,
            index_base: int | None = None, zero_based: bool | None = None, vocab_size: int | None = None,
            labels: str | None = None, multilabel: bool = False, query_id: str | None = None,
            strict: bool = False, ids: str | None = None, values: str | None = None, label_key: str | None = None,
            feature: str | None = None, compression: str | None = None, index_columns=None,
            values_column: str | None = None, plain: bool = False, dimension_names=None, row_ids: str | None = None,
            row_values: str | None = None, height: int | None = None, dense: bool = False, key: str | None = None,
            memory=None, progress=None):
    """Convert a tensor between sptool and .tns, .mtx, .npz, .npy, .csv, .tsv, svmlight JSON lines or
    .tfrecord, or binsparse (.h5, .hdf5, .zarr; .npz with ``to_format="binsparse"``), AnnData
    (.h5ad; .zarr with ``to_format="anndata"``, or whose root says anndata), or adopt a
    plain table (Parquet, Arrow .arrow/.feather, CSV/TSV with a header) as one.

    Parameters
    ----------
    src, output : str
        Paths; the format comes from the extension (``.parquet``, ``.arrows``, a directory or
        ``-`` are sptool), or from ``from_format`` / ``to_format``.  With no ``output`` the
        result is returned as a ``SparseTensor``.
    shape : sequence of int or str, optional
        The shape of a text input (default: max index + 1 per dimension).  For inputs that
        store a shape it must agree.
    dtype : str, optional
        The value type to write (default: the input's; float64 for .tns, .csv and .tsv).
        Narrowing to an integer type must be exact.
    fill_value : optional
        The output's fill value; for .npy input also the value whose elements are dropped;
        for .npy output the value of the cells no entry covers.
    index_base : {0, 1}, optional
        Index base of text inputs and outputs (default 1 for .tns and .mtx, 0 for .csv/.tsv).
    zero_based : bool, optional
        svmlight ids are 0-based (True) or 1-based (False).  Reading, None guesses as
        scikit-learn's ``load_svmlight_file`` does (1-based when the smallest id is above 0);
        writing, None is 1-based.
    vocab_size : int, optional
        svmlight, JSON lines or TFRecord (with ``ids``) input: the number of columns, scikit-learn's
        ``n_features`` (default: the largest id + 1; TFRecord: required).
    labels : str, optional
        svmlight labels: written to this ``.npy`` (float64) or ``.parquet`` (a 1-D tensor, or with
        ``multilabel`` a [rows, labels] bool indicator) when reading; read from this ``.npy`` when
        writing (default: no labels read; 0 written).  TFRecord: a .npy of one scalar per
        example, read from the feature ``label_key`` of an input, written into it for an output.
        JSON lines: the labels (``.npy`` when reading), read from or written to ``label_key``.
    multilabel : bool
        svmlight input lines start with comma-separated, possibly empty, label lists.
    query_id : str, optional
        svmlight ``qid:`` values: written to (reading) or read from (writing) this int64 ``.npy``.
    strict : bool
        svmlight input: refuse lines whose ids are not sorted and unique, as scikit-learn does
        (default: sort them and sum repeats).
    ids, values : str, optional
        JSON lines: the keys of a line's ids and values (default "ids", "values").
    label_key : str, optional
        JSON lines and TFRecord: the key (feature) of a record's label (default "label").
    ids, values, vocab_size : optional
        TFRecord input: the int64 feature of ids, the feature of their values (default: every
        id gets 1) and V, giving TensorFlow's ``sparse_merge`` [n_examples, V] tensor (an
        example's repeated ids stay separate entries).  TFRecord output: the feature names
        each row's column numbers and values are written under.
    feature : str, optional
        TFRecord input: one feature's values by position, TensorFlow's ``VarLenFeature``
        [n_examples, max_len] tensor (int64, float32, or bytes as binary).
    compression : {"none", "gzip", "zlib"}, optional
        TFRecord compression (default: from the name, .gz is GZIP, or for input the first bytes).
    index_columns, values_column : optional
        Read ``src`` as a plain table (a Parquet file or directory without sptool metadata, as
        DuckDB, Polars, Spark or pandas write it; an Arrow IPC file; CSV/TSV with a header):
        the columns holding the indices, one per sparse dimension, and the values (names, or
        1-based positions; no values column: every coordinate holds True).  Index columns of
        any integer type are checked: no nulls, not negative, within ``shape``.  Without
        ``shape`` the extents are the largest indices plus one.  The rows claim no order; the
        output is marked row-major (and unique) when they turn out to be.  They become the
        dimension names.
    plain, dimension_names : optional
        Write ``dst`` (.parquet, .arrow, .feather) as a plain table without sptool metadata, its
        index columns named ``dimension_names`` (default: the tensor's dimension names, else
        indices_k) and its values column ``values_column`` (default "values").
    row_ids, row_values, height : optional
        A row-sparse input (Paddle's SelectedRows) from two .npy files instead of ``src``
        (None): ``row_ids`` int [n] row ids in [0, height), ``row_values`` [n, d1, ...] their dense
        blocks, giving the [height, d1, ...] tensor with one sparse dimension.  An .npz holding
        ``rows``/``values``/``height`` or TensorFlow's ``indices``/``values``/``dense_shape``
        is read as one too, and ``to_format="rows"`` writes the first kind.
    dense : bool
        A Matrix Market output in the dense ``array`` format (every cell, column by column),
        as scipy.io.mmwrite writes a NumPy array, instead of ``coordinate``.
    key : str, optional
        The matrix of an AnnData input (.h5ad, or a .zarr store whose root says anndata): X by
        default, or ``layers/NAME``, ``raw/X``, ``obsm/NAME``, ``varm/NAME``, ``obsp/NAME``,
        ``varp/NAME``.  An AnnData output (.h5ad, or .zarr with ``to_format="anndata"``) holds
        a 2-D input as its X, in CSR.
    memory : str or int, optional
        The memory budget (default 1GiB or $SPTOOL_MEMORY).

    Returns
    -------
    dict
        A summary: ``{"input", "output", "from", "to", "rows_in", "rows", "shape",
        "value_type"}``.  ``rows`` can exceed ``rows_in`` when a symmetric .mtx is expanded.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> convert("sample_data/tensor3d.tns", out)["to"]
    'sptool'
    """
    if row_ids is not None and row_values is None and values is not None:
        warnings.warn("convert(): the blocks of a row-sparse input are now row_values", DeprecationWarning,
                      stacklevel=3)
        row_values, values = values, None
    value_type, dst = dtype, output
    src, dst = local_path(src), None if output is None else local_path(output)
    shape = shape if shape is None or isinstance(shape, str) else shape_of(shape, "--shape")
    index_base, vocab_size, height = (
        optional_whole_number(value, name) for value, name in (
            (index_base, "--index-base"), (vocab_size, "--vocab-size"), (height, "--height")))
    row_sparse = _row_sparse_input(src, row_ids, row_values, height)
    if row_sparse is not None:
        src, from_format = row_sparse.values, "rows"
    src_fmt = input_format(src, from_format)
    dst_fmt = _in_memory_format(to_format, plain) if dst is None else output_format(dst, to_format)
    _check_url(src, src_fmt, "reads")
    if dst is not None:
        _check_url(dst, dst_fmt, "writes", plain=plain)
    _check_format_options(src_fmt, dst_fmt, index_base, dense, key)
    budget = budget_of(memory)
    fmts = {src_fmt, dst_fmt}
    ex = _example_options(src_fmt, dst_fmt, zero_based=zero_based, vocab_size=vocab_size, labels=labels,
                          multilabel=multilabel, query_id=query_id, strict=strict, ids=ids, values=values,
                          label_key=label_key)
    tfr = "tfrecord" in fmts
    tfrecord = tfrecord_options(src_fmt, dst_fmt, ids=ids if tfr else None, values=values if tfr else None,
                                vocab_size=vocab_size if tfr else None, feature=feature,
                                labels=labels if tfr else None, label_feature=label_key if tfr else None,
                                compression=compression)
    opts = Options(shape=parse_shape(shape), value_type=check_value_type(value_type), fill_value=fill_value,
                   index_base=index_base, budget=budget, examples=ex, tfrecord=tfrecord,
                   table=table_options(index_columns, values_column, plain, dimension_names), rows=row_sparse,
                   dense=dense, key=key)
    to = _to_npy if dst_fmt == "npy" else _convert
    try:
        return to(src, dst, src_fmt, dst_fmt, opts, progress)
    except IndexBaseRestart:
        # svmlight ids taken as 1-based past the part held back proved 0-based: read it again.
        if progress is not None and hasattr(progress, "restart"):
            progress.restart()
        opts = replace(opts, examples=replace(ex, zero_based=True))
        return to(src, dst, src_fmt, dst_fmt, opts, progress, note="detected: an id 0 late in the file; read twice")


def _in_memory_format(to_format: str | None, plain: bool) -> str:
    """The format of a result returned rather than written: a SparseTensor, nothing else."""
    if plain or to_format not in (None, "sptool"):
        raise UsageError("with no output, convert returns a SparseTensor: name an output to write "
                         f"{'a plain table' if plain else to_format}")
    return "sptool"


def _row_sparse_input(src, rows, values, height) -> RowsOptions | None:
    """The --row-ids/--row-values/--height input, checked; None when SRC is given instead."""
    if rows is None and height is None:
        if src is None:
            raise UsageError("give an input: SRC, or --row-ids R.npy --row-values V.npy --height H")
        return None
    if src is not None:
        raise UsageError("give either SRC or --row-ids/--row-values/--height, not both")
    if rows is None or values is None or height is None:
        raise UsageError("a row-sparse input needs all of --row-ids R.npy, --row-values V.npy and --height H")
    if not isinstance(height, (int, np.integer)) or height < 0:
        raise UsageError(f"--height must be a whole number >= 0, not {height!r}")
    return RowsOptions(rows, values, int(height))


def _convert(src: str, dst: str, src_fmt: str, dst_fmt: str, opts: Options, progress, note=None) -> dict:
    budget = opts.budget
    first = reader = open_reader(src, src_fmt, opts)
    spool = None
    try:
        if dst_fmt == "mtx" and not reader.complete:
            check_matrix(reader.meta)
            # The size line needs the final shape and nnz before the first entry.
            spool, _ = _spool(reader, dst, progress, budget)
            reader = SptoolReader(spool, Options(budget=budget))
            progress = None
        elif getattr(writer_class := BY_NAME[dst_fmt].writer, "needs_row_major", False):
            # One line or record per row: rows come whole and in order, duplicates summed.
            if src_fmt != "sptool" or src == "-":
                spool, _ = _spool(reader, dst, progress, budget)
                progress = None
            reader = RowMajorReader(spool or src, replace(opts, shape=None, index_base=None),
                                    keep_duplicates=getattr(writer_class, "keeps_duplicates", False))
            if spool is None:  # the input itself, read again in order: it counts the rows in
                first.close()
                first = reader
        meta = reader.meta
        writer = open_writer(dst, dst_fmt, meta, reader.unique_claim, opts)
        pump = _pump(reader, writer, progress, budget)
        first.commit()
        out_shape = list(getattr(writer, "shape", None) or pump.shape(reader.meta))
    finally:
        first.close()
        if reader is not first:
            reader.close()
        _remove(spool)
    notes = [f"ids zero-based ({note})"] if note else getattr(first, "notes", [])
    notes = notes + getattr(writer, "notes", [])  # what a writer changed (binsparse: canonicalised)
    plain = opts.table is not None and opts.table.plain
    if dst is None:
        return SparseTensor.from_sink(writer.sink)
    return {"input": src, "output": dst, "from": src_fmt, "to": "plain table" if plain else dst_fmt,
            "rows_in": first.rows_in, "rows": pump.rows, "shape": out_shape, "value_type": meta.value_type,
            "notes": notes}


def _to_npy(src: str, dst: str, src_fmt: str, dst_fmt: str, opts: Options, progress, note=None) -> dict:
    if dst == "-":
        raise UsageError("a .npy file cannot be written to stdout (it is written through a memory map)")
    if not dst.endswith(".npy"):
        raise UsageError("a dense output must be named *.npy", path=dst)
    if src_fmt == "sptool" and src != "-" and opts.value_type is None and opts.shape is None:
        with open_source(src) as opened:
            result = write_dense(opened, dst, default_value=opts.fill_value, budget=opts.budget,
                                     progress=progress)
        rows = result["rows"]
        return {"input": src, "output": dst, "from": src_fmt, "to": "npy", "rows_in": rows, "rows": rows,
                "shape": result["shape"], "value_type": str(result["dtype"])}
    reader = open_reader(src, src_fmt, opts)
    spool = None
    try:
        spool, pump = _spool(reader, dst, progress, opts.budget)
        with open_source(spool) as opened:
            result = write_dense(opened, dst, budget=opts.budget)
        reader.commit()  # side outputs (labels) follow the output into place
    finally:
        reader.close()
        _remove(spool)
    notes = [f"ids zero-based ({note})"] if note else getattr(reader, "notes", [])
    return {"input": src, "output": dst, "from": src_fmt, "to": "npy", "rows_in": reader.rows_in,
            "rows": pump.rows, "shape": result["shape"], "value_type": str(result["dtype"]), "notes": notes}
