"""FROSTT .tns: one entry per line, K 1-based indices then the value, separated by blanks.

``#`` starts a comment, on a line of its own or after the values.  The extended FROSTT header used by MLIR and TACO
(a ``rank nnz`` line, then a line of ``rank`` extents) is recognised when it cannot be read
as data: the first two data lines must be exactly ``r n`` and r extents, and the third must
hold r indices and a value.  (A two-line file ``2 0`` / ``a b`` could be either; it is read
as two 1-D entries.)  Complex values take two fields, real then imaginary.
"""

from __future__ import annotations

import re

from .. import _textparse as tp
from ..format import TensorMeta
from .common import Options, check_not_hybrid, check_zero_fill
from .text import Layout, TextReader, TextWriter, check_printable, printable_columns, value_kind

COMMENT = ord("#")
_UINT = re.compile(rb"^\d+$")


class TnsReader(TextReader):
    fmt = "tns"
    default_base = 1

    def _open(self):
        opts = self.opts
        vkind = value_kind(opts.value_type)
        nvals = 2 if vkind == tp.V_COMPLEX else 1
        self.value_type = opts.value_type or "float64"
        probe = Layout(1, tp.V_FLOAT, self.base, 0, COMMENT, trailing=True)
        lines = [(no, probe.without_comments(raw)) for no, raw in self.text.peek_data_lines(probe, 3, self.block)]
        header = _extended_header(lines, nvals)
        if header is not None:
            rank, nnz, dims, dims_line = header
            self.expected_rows = nnz
            while self.text.line <= dims_line:  # consume the two header lines and comments
                self.text.next_line(self.block)
            K = rank
            self.shape = self._shape_from_option(K, dims, f"in the header on line {dims_line}")
        else:
            K, _ = self._infer_rank(COMMENT, 0, nvals, trailing=True)
            if K is None:
                if opts.shape is None:
                    self._no_rank()
                K = len(opts.shape)
            self.shape = self._shape_from_option(K)
        self.layout = Layout(K, vkind, self.base, 0, COMMENT, trailing=True)


def _extended_header(lines: list, nvals: int):
    """(rank, nnz, dims, line of dims) if the first data lines are an extended header."""
    if len(lines) < 2:
        return None
    first, second = lines[0][1].split(), lines[1][1].split()
    if len(first) != 2 or not all(_UINT.match(f) for f in first):
        return None
    rank, nnz = int(first[0]), int(first[1])
    if rank < 1 or len(second) != rank or not all(_UINT.match(f) for f in second):
        return None
    if len(lines) >= 3:
        if len(lines[2][1].split()) != rank + nvals:
            return None
    elif rank == 2 and nvals == 1:
        return None  # ambiguous with a plain file of two 1-D entries: read it as data
    return rank, nnz, tuple(int(d) for d in second), lines[1][0]


class TnsWriter:
    """Writes .tns text: 1-based indices (or --index-base) and shortest round-trip values."""

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        check_not_hybrid(meta, "tns")
        check_zero_fill(meta, "tns")
        check_printable(meta, "a .tns file")
        self.meta = meta
        base = 1 if opts.index_base is None else opts.index_base
        self.out = TextWriter(dst, delimiter=" ", base=base)

    def write(self, keys, values):
        self.out.write(keys, printable_columns(values, self.meta.value_type, "a .tns file"))

    def close(self):
        self.out.close()

    def abort(self):
        self.out.abort()
