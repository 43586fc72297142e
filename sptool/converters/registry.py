"""convert: move a tensor between sptool and the interchange formats, streaming where the
format allows.  Formats are told from names (or content), readers check their input before
any output exists, and every output appears whole or not at all."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import uuid

import numpy as np

from .._memory import resolve_budget
from ..errors import DataError, InputError, UsageError
from ..format import INT64_MAX, VARIABLE_WIDTH
from ..io import TensorSink, open_sink, open_source
from ..stream.dense import write_dense
from .common import Options, Reader, cast_or_fail, check_value_type, coerce_fill, parse_shape

FORMATS = ("sptool", "tns", "mtx", "npz", "npy", "csv", "tsv")
TEXT_FORMATS = ("tns", "mtx", "csv", "tsv")
EXTENSIONS = {
    ".parquet": "sptool", ".arrows": "sptool", ".tns": "tns", ".mtx": "mtx", ".npz": "npz", ".npy": "npy",
    ".csv": "csv", ".tsv": "tsv",
}
_MAGIC = ((b"PAR1", "sptool"), (b"\xff\xff\xff\xff", "sptool"), (b"%%MatrixMarket", "mtx"),
          (b"PK\x03\x04", "npz"), (b"\x93NUMPY", "npy"))


def _check_format(fmt: str, option: str) -> str:
    fmt = fmt.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UsageError(f"{option} {fmt!r} is not a format; use one of {', '.join(FORMATS)}")
    return fmt


def _by_name(path: str) -> str | None:
    """The format a path names: '-' and directories are sptool, else its extension (or None)."""
    if path == "-" or path.endswith(("/", os.sep)) or os.path.isdir(path):
        return "sptool"
    return EXTENSIONS.get(os.path.splitext(path)[1].lower())


def input_format(src: str, given: str | None = None) -> str:
    """The format of an input: --from, else its name, else its first bytes."""
    if given:
        return _check_format(given, "--from")
    named = _by_name(src)
    if named:
        return named
    if not os.path.exists(src):
        raise InputError("no such file or directory", path=src)
    try:
        with open(src, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=src) from None
    for magic, fmt in _MAGIC:
        if head.startswith(magic):
            return fmt
    raise UsageError(f"cannot tell the input format from the name or content; give --from "
                     f"({', '.join(FORMATS)})", path=src)


def output_format(dst: str, given: str | None = None) -> str:
    """The format of an output: --to, else its name ('-' and directories are sptool)."""
    if given:
        return _check_format(given, "--to")
    named = _by_name(dst)
    if named:
        return named
    raise UsageError(f"cannot tell the output format from the name; use an extension ({', '.join(EXTENSIONS)}), "
                     "a directory ending in /, - for stdout, or --to", path=dst)


# ---------------------------------------------------------------------------------------------
# sptool as a source and as a sink

class SptoolReader(Reader):
    def __init__(self, path: str, opts: Options):
        self.src = open_source(path)
        self.name = self.src.path
        self.memory = opts.memory
        m = self.src.meta
        vt = opts.value_type or m.value_type
        if vt != m.value_type and (vt in VARIABLE_WIDTH or m.value_type in VARIABLE_WIDTH):
            raise UsageError(f"{m.value_type} values cannot be converted to {vt}", path=self.name)
        if opts.fill_value is not None:
            fill = coerce_fill(opts.fill_value, vt)
        elif vt != m.value_type:
            fill = coerce_fill(m.fill_value, vt)
        else:
            fill = m.fill_value
        if opts.shape is not None and (len(opts.shape) != m.ndim or any(
                s is not None and s != o for s, o in zip(m.shape, opts.shape))):
            raise UsageError(f"--shape {list(opts.shape)} contradicts the tensor's shape {list(m.shape)}",
                             path=self.name)
        self.cast = vt != m.value_type
        self.meta = m.with_(value_type=vt, fill_value=fill, unique=False)
        self.unique_claim = True if m.unique else None
        self.complete = m.nnz is not None and all(s is not None for s in m.shape)

    def batches(self):
        dtype = self.meta.dtype
        for keys, values in self.src.iter_arrays(memory=self.memory):
            if self.cast:
                values = cast_or_fail(values, dtype, lambda r, o=self.rows_in: f"row {o + r}", self.name)
            self.rows_in += keys.shape[1]
            yield keys, values
        # A stream's unknown extents and nnz are resolved by its trailer.
        self.meta = self.meta.with_(shape=self.src.meta.shape, nnz=self.src.meta.nnz)

    def close(self):
        self.src.close()


class SptoolWriter:
    def __init__(self, dst: str, meta, unique_claim):
        self.sink: TensorSink = open_sink(dst, meta.with_(nnz=None, unique=unique_claim is True),
                                          unique_claim=unique_claim)

    def write(self, keys, values):
        self.sink.write(keys, values)

    def close(self):
        self.final = self.sink.close()
        self.shape = self.final.shape

    def abort(self):
        self.sink.abort()


# ---------------------------------------------------------------------------------------------

def open_reader(src: str, fmt: str, opts: Options) -> Reader:
    if fmt == "sptool":
        return SptoolReader(src, opts)
    if fmt == "tns":
        from .tns import TnsReader

        return TnsReader(src, opts)
    if fmt == "mtx":
        from .mtx import MtxReader

        return MtxReader(src, opts)
    if fmt in ("csv", "tsv"):
        from .delimited import DelimitedReader

        return DelimitedReader(src, opts, fmt)
    if fmt == "npz":
        from .npz import NpzReader

        return NpzReader(src, opts)
    from .npy import NpyReader

    return NpyReader(src, opts)


def open_writer(dst: str, fmt: str, meta, unique_claim, opts: Options):
    if fmt == "sptool":
        return SptoolWriter(dst, meta, unique_claim)
    if fmt == "tns":
        from .tns import TnsWriter

        return TnsWriter(dst, meta, opts)
    if fmt == "mtx":
        from .mtx import MtxWriter

        return MtxWriter(dst, meta, opts)
    if fmt in ("csv", "tsv"):
        from .delimited import DelimitedWriter

        return DelimitedWriter(dst, meta, opts, fmt)
    if fmt == "npz":
        from .npz import NpzWriter

        return NpzWriter(dst, meta, opts)
    raise UsageError(f"cannot write {fmt} here")  # npy goes through todense


class _Pump:
    """Moves every batch from a reader to a writer, tracking rows and the largest indices."""

    def __init__(self, reader: Reader, progress=None):
        self.reader = reader
        self.progress = progress
        self.rows = 0
        self.maxes = np.full(reader.meta.sparse_ndim, -1, dtype=np.int64)

    def run(self, writer):
        seen = 0
        with contextlib.closing(self.reader.batches()) as batches:
            for keys, values in batches:
                n = keys.shape[1]
                if n:
                    self.maxes = np.maximum(self.maxes, keys.max(axis=1))
                writer.write(keys, values)
                self.rows += n
                if self.progress is not None:
                    self.progress.advance(self.reader.rows_in - seen)
                    seen = self.reader.rows_in
        shape = self.shape(self.reader.meta)
        if any(s is None for s in self.reader.meta.shape) and math.prod(shape) > INT64_MAX:
            raise DataError(f"the largest indices give the shape {shape}, which has more than 2^63-1 elements",
                            path=self.reader.name)

    def shape(self, meta) -> list:
        return [int(self.maxes[k] + 1) if s is None else int(s) for k, s in enumerate(meta.shape)]


def _spool_path(near: str) -> str:
    folder = tempfile.gettempdir() if near == "-" else os.path.dirname(os.path.abspath(near))
    name = os.path.basename(near) if near != "-" else "stdout"
    return os.path.join(folder, f".{name}.spool-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet")


def _spool(reader: Reader, near: str, progress) -> tuple[str, _Pump]:
    """Write the reader's rows to a hidden sptool file next to the output; returns its path."""
    path = _spool_path(near)
    writer = SptoolWriter(path, reader.meta, reader.unique_claim)
    pump = _Pump(reader, progress)
    try:
        pump.run(writer)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return path, pump


def _remove(path: str | None):
    if path and os.path.exists(path):
        os.remove(path)


def convert(src: str, dst: str, *, from_format: str | None = None, to_format: str | None = None,
            shape=None, value_type: str | None = None, fill_value=None, index_base: int | None = None,
            memory=None, progress=None) -> dict:
    """Convert a tensor between sptool and .tns, .mtx, .npz, .npy, .csv or .tsv.

    Parameters
    ----------
    src, dst : str
        Paths; the format comes from the extension (``.parquet``, ``.arrows``, a directory or
        ``-`` are sptool), or from ``from_format`` / ``to_format``.
    shape : sequence of int or str, optional
        The shape of a text input (default: max index + 1 per dimension).  For inputs that
        store a shape it must agree.
    value_type : str, optional
        The value type to write (default: the input's; float64 for .tns, .csv and .tsv).
        Narrowing to an integer type must be exact.
    fill_value : optional
        The output's fill value; for .npy input also the value whose elements are dropped;
        for .npy output the value of the cells no entry covers.
    index_base : {0, 1}, optional
        Index base of text inputs and outputs (default 1 for .tns and .mtx, 0 for .csv/.tsv).
    memory : str or int, optional
        The memory budget (default 1GiB or $SPTOOL_MEMORY).

    Returns a summary: ``{"input", "output", "from", "to", "rows_in", "rows", "shape",
    "value_type"}``.  ``rows`` can exceed ``rows_in`` when a symmetric .mtx is expanded.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> convert("sample_data/tensor3d.tns", out)["to"]
    'sptool'
    """
    src_fmt = input_format(src, from_format)
    dst_fmt = output_format(dst, to_format)
    if index_base is not None:
        if index_base not in (0, 1):
            raise UsageError(f"--index-base must be 0 or 1, not {index_base!r}")
        if src_fmt not in TEXT_FORMATS and dst_fmt not in TEXT_FORMATS:
            raise UsageError("--index-base applies to text formats (.tns, .mtx, .csv, .tsv) only")
    resolve_budget(memory)
    opts = Options(shape=parse_shape(shape), value_type=check_value_type(value_type), fill_value=fill_value,
                   index_base=index_base, memory=memory)
    if dst_fmt == "npy":
        return _to_npy(src, dst, src_fmt, opts, progress)
    first = reader = open_reader(src, src_fmt, opts)
    spool = None
    try:
        if dst_fmt == "mtx" and not reader.complete:
            from .mtx import check_matrix

            check_matrix(reader.meta)
            # The size line needs the final shape and nnz before the first entry.
            spool, _ = _spool(reader, dst, progress)
            reader = SptoolReader(spool, Options(memory=memory))
            progress = None
        meta = reader.meta
        writer = open_writer(dst, dst_fmt, meta, reader.unique_claim, opts)
        pump = _Pump(reader, progress)
        try:
            pump.run(writer)
            writer.close()
        except BaseException:
            writer.abort()
            raise
        out_shape = list(getattr(writer, "shape", None) or pump.shape(reader.meta))
    finally:
        first.close()
        if reader is not first:
            reader.close()
        _remove(spool)
    return {"input": src, "output": dst, "from": src_fmt, "to": dst_fmt, "rows_in": first.rows_in,
            "rows": pump.rows, "shape": out_shape, "value_type": meta.value_type}


def _to_npy(src: str, dst: str, src_fmt: str, opts: Options, progress) -> dict:
    if dst == "-":
        raise UsageError("a .npy file cannot be written to stdout (it is written through a memory map)")
    if not dst.endswith(".npy"):
        raise UsageError("a dense output must be named *.npy", path=dst)
    if src_fmt == "sptool" and src != "-" and opts.value_type is None and opts.shape is None:
        with open_source(src) as opened:
            result = write_dense(opened, dst, default_value=opts.fill_value, memory=opts.memory, progress=progress)
        rows = result["rows"]
        return {"input": src, "output": dst, "from": src_fmt, "to": "npy", "rows_in": rows, "rows": rows,
                "shape": result["shape"], "value_type": str(result["dtype"])}
    reader = open_reader(src, src_fmt, opts)
    spool = None
    try:
        spool, pump = _spool(reader, dst, progress)
        with open_source(spool) as opened:
            result = write_dense(opened, dst, memory=opts.memory)
    finally:
        reader.close()
        _remove(spool)
    return {"input": src, "output": dst, "from": src_fmt, "to": "npy", "rows_in": reader.rows_in,
            "rows": pump.rows, "shape": result["shape"], "value_type": str(result["dtype"])}
