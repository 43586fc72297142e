"""CSV and TSV coordinate text: a header row ``indices_0,...,indices_{K-1},values``, then one
entry per row with 0-based indices.  Complex values are two columns, ``values.real`` and
``values.imag`` (the Parquet leaf names).  On input the header is optional: without it the
number of indices is the number of fields minus one (or the length of --shape).
"""

from __future__ import annotations

from .. import _textparse as tp
from ..errors import DataError, UsageError
from ..format import TensorMeta, index_column
from .common import Options, check_not_hybrid, check_zero_fill
from .text import Layout, TextReader, TextWriter, check_printable, printable_columns, value_kind

DELIMITERS = {"csv": ",", "tsv": "\t"}


def header_names(K: int, complex_values: bool) -> list[str]:
    values = ["values.real", "values.imag"] if complex_values else ["values"]
    return [index_column(k) for k in range(K)] + values


class DelimitedReader(TextReader):
    default_base = 0

    def __init__(self, path: str, opts: Options, fmt: str):
        self.fmt = fmt
        self.delim = ord(DELIMITERS[fmt])
        super().__init__(path, opts)

    def _open(self):
        opts = self.opts
        vkind = value_kind(opts.value_type)
        probe = Layout(1, tp.V_FLOAT, self.base, self.delim, 0)
        lines = self.text.peek_data_lines(probe, 1, self.block)
        K = None
        if lines and _is_header(lines[0][1], self.delim):
            no, raw = lines[0]
            names = [f.strip().strip('"') for f in raw.decode("utf-8", "replace").strip().split(chr(self.delim))]
            complex_values = names[-2:] == ["values.real", "values.imag"]
            K = len(names) - (2 if complex_values else 1)
            if K < 1 or names != header_names(K, complex_values):
                raise DataError(
                    f"line {no}: expected the header {','.join(header_names(max(K, 1), False))!r}, got "
                    f"{raw.decode('utf-8', 'replace').strip()!r}{_table_hint(names)}", path=self.name)
            if complex_values and vkind != tp.V_COMPLEX:
                if opts.value_type is not None:
                    raise UsageError(f"the file holds complex values; --dtype {opts.value_type} cannot "
                                     "hold them", path=self.name)
                vkind = tp.V_COMPLEX
            elif not complex_values and vkind == tp.V_COMPLEX:
                raise UsageError("complex values need two columns, values.real and values.imag",
                                 path=self.name)
            while self.text.line <= no:
                self.text.next_line(self.block)
        nvals = 2 if vkind == tp.V_COMPLEX else 1
        self.value_type = opts.value_type or ("complex128" if vkind == tp.V_COMPLEX else "float64")
        if K is None:
            K, _ = self._infer_rank(0, self.delim, nvals)
            if K is None:
                if opts.shape is None:
                    self._no_rank()
                K = len(opts.shape)
        self.shape = self._shape_from_option(K)
        self.layout = Layout(K, vkind, self.base, self.delim, 0)


def _table_hint(names: list[str]) -> str:
    """How to read a table of other column names (pandas', DuckDB's): name its columns."""
    if len(names) < 2 or not all(names):
        return ""
    return (f"; a table of other columns is read by naming them: --index-columns {','.join(names[:-1])} "
            f"--values-column {names[-1]}")


def _is_header(raw: bytes, delim: int) -> bool:
    first = raw.strip().split(bytes([delim]))[0].strip().strip(b'"')
    return bool(first) and not (first[:1].isdigit() or first[:1] in (b"-", b"+", b"."))


class DelimitedWriter:
    def __init__(self, dst: str, meta: TensorMeta, opts: Options, fmt: str, unique_claim=None):
        what = f"a .{fmt} file"
        check_not_hybrid(meta, fmt)
        check_zero_fill(meta, fmt)
        check_printable(meta, what)
        self.meta = meta
        self.what = what
        delim = DELIMITERS[fmt]
        names = header_names(meta.sparse_ndim, meta.value_type.startswith("complex"))
        base = 0 if opts.index_base is None else opts.index_base
        self.out = TextWriter(dst, delimiter=delim, base=base, header=delim.join(names) + "\n")

    def write(self, keys, values):
        self.out.write(keys, printable_columns(values, self.meta.value_type, self.what))

    def close(self):
        self.out.close()

    def abort(self):
        self.out.abort()
