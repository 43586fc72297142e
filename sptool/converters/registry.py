"""The formats convert reads and writes, in one table, and the format of an input or output
told from it: by --from/--to, by name (extension), or by an input's first bytes (magic).

A format is one module (its reader and writer) plus one ``Format`` entry in ``TABLE``; the
names (``FORMATS``, the CLI's --from/--to choices), the extensions, the magic bytes and the
text formats are all read off the table."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ..errors import InputError, UsageError
from ..io import PARQUET_MAGIC, STREAM_MAGIC, bare, is_anndata, kind_of, open_read
from .anndata import AnnDataReader, AnnDataWriter
from .binsparse import HDF5_MAGIC, BinsparseReader, BinsparseWriter
from .common import Options, Reader
from .compression import codec_of_name, without_codec
from .delimited import DelimitedReader, DelimitedWriter
from .jsonl import JsonlReader, JsonlWriter
from .mtx import MtxReader, mtx_writer
from .native import SptoolReader, SptoolWriter
from .npy import NpyReader
from .npz import NpzWriter
from .rowsparse import RowsWriter, npz_reader, rows_reader, torch_reader
from .sniff import SNIFF_BYTES, stdin_format, text_format
from .svmlight import SvmlightReader, SvmlightWriter
from .table import PlainTableWriter, arrow_reader, table_reader, table_writer
from .tfrecord import TFRecordReader, TFRecordWriter
from .tns import TnsReader, TnsWriter


@dataclass(frozen=True)
class Format:
    """One format convert knows.

    ``extensions``: lower-case, with the dot.  ``magic``: prefixes of a file's first bytes
    that identify it (a format without magic, plain text, is told by name or --from only).
    ``reader(src, opts)`` returns a ``common.Reader``; ``writer(dst, meta, opts,
    unique_claim=...)`` returns an object with ``write(keys, values)``, ``close()`` and
    ``abort()`` (and ``shape`` after close when it knows it), or is None when the format is not
    written batch by batch (.npy: through a memory map, in sptool.ops.convert).  ``streaming``:
    it can be read from stdin and written to stdout in one pass; an .npz archive needs random
    access and is held whole, a .npy file is memory-mapped.  ``text``: coordinate text, to
    which --index-base applies.  ``own_codecs``: compression suffixes the format's own reader
    and writer handle (TFRecord's GZIP), for a format that is not text.
    """

    name: str
    extensions: tuple[str, ...]
    magic: tuple[bytes, ...]
    reader: Callable[..., Reader]
    writer: Callable | None
    streaming: bool
    text: bool = False
    own_codecs: tuple[str, ...] = ()


TABLE: tuple[Format, ...] = (
    Format("sptool", (".parquet", ".arrows"), (PARQUET_MAGIC, STREAM_MAGIC), SptoolReader, SptoolWriter,
           streaming=True),
    Format("tns", (".tns",), (), TnsReader, TnsWriter, streaming=True, text=True),
    Format("mtx", (".mtx",), (b"%%MatrixMarket",), MtxReader, mtx_writer, streaming=True, text=True),
    Format("npz", (".npz",), (b"PK\x03\x04",), npz_reader, NpzWriter, streaming=False),
    Format("npy", (".npy",), (b"\x93NUMPY",), NpyReader, None, streaming=False),
    Format("csv", (".csv",), (), partial(DelimitedReader, fmt="csv"), partial(DelimitedWriter, fmt="csv"),
           streaming=True, text=True),
    Format("tsv", (".tsv",), (), partial(DelimitedReader, fmt="tsv"), partial(DelimitedWriter, fmt="tsv"),
           streaming=True, text=True),
    Format("svmlight", (".svm", ".svmlight", ".libsvm"), (), SvmlightReader, SvmlightWriter, streaming=True,
           text=True),
    Format("tfrecord", (".tfrecord", ".tfrecords"), (), TFRecordReader, TFRecordWriter, streaming=True,
           own_codecs=("gzip",)),
    Format("arrow", (".arrow", ".feather"), (b"ARROW1",), arrow_reader, partial(PlainTableWriter, fmt="arrow"),
           streaming=False),
    Format("jsonl", (".jsonl", ".ndjson"), (), JsonlReader, JsonlWriter, streaming=True, text=True),
    Format("rows", (), (), rows_reader, RowsWriter, streaming=False),
    Format("torch", (".pt", ".pth"), (), torch_reader, None, streaming=False),
    Format("binsparse", (".h5", ".hdf5", ".zarr"), (HDF5_MAGIC,), BinsparseReader, BinsparseWriter,
           streaming=False),
    # An HDF5 file or .zarr store whose root says encoding-type anndata is AnnData whatever its name
    # (_anndata_or); a .zarr output is AnnData with --to anndata only.
    Format("anndata", (".h5ad",), (), AnnDataReader, AnnDataWriter, streaming=False),
)

BY_NAME = {f.name: f for f in TABLE}
FORMATS = tuple(BY_NAME)
TEXT_FORMATS = tuple(f.name for f in TABLE if f.text)
EXTENSIONS = {ext: f.name for f in TABLE for ext in f.extensions}
_MAGIC = tuple((magic, f.name) for f in TABLE for magic in f.magic)


def _check_format(fmt: str, option: str) -> str:
    fmt = fmt.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UsageError(f"{option} {fmt!r} is not a format; use one of {', '.join(FORMATS)}")
    return fmt


def _by_name(path: str) -> str | None:
    """The format a path names: '-' and directories are sptool, else its extension (or None)."""
    ext = os.path.splitext(without_codec(path))[1].lower()
    if path == "-" or bare(path).endswith(("/", os.sep)) or (ext != ".zarr" and kind_of(path) == "dir"):
        return "sptool"  # a directory is a dataset of parts, unless it is a .zarr container
    return EXTENSIONS.get(ext)


def _compressible(fmt: str, path: str) -> str:
    """``fmt``, unless ``path`` names a compressed file of a format that is not text."""
    if codec_of_name(path) and fmt not in TEXT_FORMATS and codec_of_name(path) not in BY_NAME[fmt].own_codecs:
        raise UsageError(f"only text formats ({', '.join(TEXT_FORMATS)}) are read and written compressed, "
                         f"not {fmt}", path=path)
    return fmt


def _anndata_or(fmt: str, src: str) -> str:
    """``fmt``, or anndata for a binsparse-named input (HDF5, .zarr) whose root says anndata."""
    return "anndata" if fmt == "binsparse" and is_anndata(src) else fmt


def input_format(src: str, given: str | None = None) -> str:
    """The format of an input: --from, else its name, else its first bytes (stdin's, looked at
    without losing them)."""
    if given:
        return _compressible(_check_format(given, "--from"), src)
    if src == "-":
        return stdin_format(_MAGIC, FORMATS)
    named = _by_name(src)
    if named:
        return _compressible(_anndata_or(named, src), src)
    if kind_of(src) is None:
        raise InputError("no such file or directory", path=src)
    try:
        with open_read(src) as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=src) from None
    for magic, fmt in _MAGIC:
        if head.startswith(magic):
            return _anndata_or(fmt, src)
    found = text_format(head, complete=len(head) < SNIFF_BYTES)
    if found:
        return _compressible(found, src)
    raise UsageError(f"cannot tell the input format from the name or content; give --from "
                     f"({', '.join(FORMATS)})", path=src)


def output_format(dst: str, given: str | None = None) -> str:
    """The format of an output: --to, else its name ('-' and directories are sptool)."""
    if given:
        return _compressible(_check_format(given, "--to"), dst)
    named = _by_name(dst)
    if named:
        return _compressible(named, dst)
    raise UsageError(f"cannot tell the output format from the name; use an extension ({', '.join(EXTENSIONS)}), "
                     "a directory ending in /, - for stdout, or --to", path=dst)


def open_reader(src: str, fmt: str, opts: Options) -> Reader:
    if opts.table is not None and opts.table.index_columns is not None:
        return table_reader(src, fmt, opts)  # a plain table's named columns
    return BY_NAME[fmt].reader(src, opts)


def open_writer(dst: str, fmt: str, meta, unique_claim, opts: Options):
    if opts.table is not None and opts.table.plain:
        return table_writer(dst, fmt, meta, opts)
    writer = BY_NAME[fmt].writer
    if writer is None:
        raise UsageError(f"cannot write {fmt} here")  # npy goes through todense
    return writer(dst, meta, opts, unique_claim=unique_claim)
