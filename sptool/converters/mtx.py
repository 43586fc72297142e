"""Matrix Market files (math.nist.gov/MatrixMarket/formats.html), read as scipy.io.mmread reads them.

Header ``%%MatrixMarket matrix <storage> <field> <symmetry>``: the banner word spelled exactly
so (SciPy refuses ``%%matrixmarket``), the words after it in any case.  ``%`` comment lines, a
size line (``rows columns entries`` for ``coordinate``, ``rows columns`` for ``array``), then
one entry per line: 1-based indices and the value, or for ``array`` the values alone, column by
column.  Fields: real and double (float64), integer (int64), unsigned-integer (uint64, SciPy's
field for unsigned arrays; values past 2^63 included), complex (complex128, two numbers) and
pattern (no value: bool, all true, ``iso``; coordinate only).  Format 1.0 has no ``structure``
key, so symmetric, skew-symmetric and hermitian files are expanded to both triangles on import,
as mmread does: each off-diagonal entry (i, j, v) also gives (j, i, v), (j, i, -v) or
(j, i, conj(v)).  An ``array`` file becomes a sparse tensor as a dense .npy does: the cells equal
to the fill value (0) are dropped.

Output is ``general``: ``coordinate``, or with ``--dense`` ``array`` (every cell, column by
column, the entries gathered within --memory and sorted first).
"""

from __future__ import annotations

import re

import numpy as np

from .. import _textparse as tp
from .._version import __version__
from ..errors import DataError, InputError, UsageError
from ..format import INT64_MAX, TensorMeta
from .common import Options, check_not_hybrid, check_zero_fill
from .gather import GatheringWriter
from .text import Layout, TextReader, TextWriter, check_printable, printable_columns

COMMENT = ord("%")
BANNER_WORD = "%%MatrixMarket"
FIELDS = {"real": "float64", "double": "float64", "integer": "int64", "unsigned-integer": "uint64",
          "complex": "complex128", "pattern": "bool"}
SYMMETRIES = ("general", "symmetric", "skew-symmetric", "hermitian")
_BANNER = "%%MatrixMarket matrix coordinate <field> <symmetry>"
_UINT = re.compile(rb"^\d+$")
# Cells of a dense output formatted at a time.
ARRAY_BLOCK = 1 << 16


class MtxReader(TextReader):
    fmt = "mtx"
    default_base = 1

    @property
    def sparse_ndim(self) -> int:
        return 2  # an array file's lines hold values only; its two dimensions are the cells' places

    def _open(self):
        self.storage, field, symmetry = self._banner()
        self.field, self.symmetry = field, symmetry
        array = self.storage == "array"
        size, no = self._size_line(2 if array else 3)
        rows, cols = size[0], size[1]
        if array and rows * cols > INT64_MAX:
            raise DataError(f"line {no}: the size line's {rows} x {cols} is out of range: an array file lists every "
                            "cell, and rows x columns must be at most 2^63-1", path=self.name)
        if symmetry != "general" and rows != cols:
            raise DataError(f"line {no}: a {symmetry} matrix must be square, got {rows} x {cols}", path=self.name)
        self.expected_rows = _stored_cells(rows, cols, symmetry) if array else size[2]
        self._cells = 0  # values of an array file read so far
        self.shape = self._shape_from_option(2, (rows, cols), f"in the size line (line {no})")
        vkind = {"integer": tp.V_INT, "unsigned-integer": tp.V_INT, "complex": tp.V_COMPLEX,
                 "pattern": tp.V_NONE}.get(field, tp.V_FLOAT)
        self.value_type = self.opts.value_type or FIELDS[field]
        if self.value_type in ("string", "binary"):
            raise UsageError(f"--value-type {self.value_type} cannot hold Matrix Market values")
        self.iso = field == "pattern"
        self.layout = Layout(0 if array else 2, vkind, self.base, 0, COMMENT, unsigned=field == "unsigned-integer")

    def _banner(self) -> tuple[str, str, str]:
        """(storage, field, symmetry) of the header line, checked as SciPy checks it."""
        line = self.text.next_line(self.block)
        if line is None:
            raise DataError(f"the file is empty; expected the header line '{_BANNER}'", path=self.name)
        banner = line.decode("utf-8", "replace").strip()
        tokens = banner.split()
        if tokens and tokens[0] != BANNER_WORD and tokens[0].lower() == BANNER_WORD.lower():
            raise DataError(f"line 1: the banner is spelled {tokens[0]!r}; Matrix Market (and SciPy) want exactly "
                            f"'{BANNER_WORD}'", path=self.name)
        if not tokens or tokens[0] != BANNER_WORD:
            raise DataError(f"line 1: expected the header '{_BANNER}', got {banner[:80]!r}", path=self.name)
        if len(tokens) != 5:
            raise DataError(f"line 1: expected the header '{_BANNER}' (5 words), got {banner[:80]!r}",
                            path=self.name)
        obj, storage, field, symmetry = (t.lower() for t in tokens[1:])
        if obj != "matrix":
            raise InputError(f"line 1: only 'matrix' objects are supported, not {obj!r}", path=self.name)
        if storage not in ("coordinate", "array"):
            raise DataError(f"line 1: unknown storage {storage!r}; expected 'coordinate' or 'array'", path=self.name)
        if field not in FIELDS:
            raise DataError(f"line 1: unknown field {field!r}; expected {', '.join(FIELDS)}", path=self.name)
        if symmetry not in SYMMETRIES:
            raise DataError(f"line 1: unknown symmetry {symmetry!r}; expected {', '.join(SYMMETRIES)}",
                            path=self.name)
        if storage == "array" and field == "pattern":
            raise DataError("line 1: an 'array' file cannot be 'pattern' (it lists every cell's value)",
                            path=self.name)
        if symmetry == "skew-symmetric" and field in ("pattern", "unsigned-integer"):
            raise DataError(f"line 1: the field {field!r} cannot be skew-symmetric (its mirrored values are negated)",
                            path=self.name)
        if symmetry == "hermitian" and field != "complex":
            symmetry = "symmetric"  # the conjugate of a real value is the value itself
        return storage, field, symmetry

    def _size_line(self, words: int) -> tuple[tuple[int, ...], int]:
        """The numbers of the size line (after the comments), and its line number."""
        while True:
            line = self.text.next_line(self.block)
            if line is None:
                raise DataError("the file ends before the size line", path=self.name)
            s = line.strip()
            if s and not s.startswith(b"%"):
                break
        no = self.text.line - 1
        parts = s.split()
        what = "rows columns entries" if words == 3 else "rows columns"
        if len(parts) != words or not all(_UINT.match(p) for p in parts):
            raise DataError(f"line {no}: expected the size line '{what}', got "
                            f"{s.decode('utf-8', 'replace')[:80]!r}", path=self.name)
        size = tuple(int(p) for p in parts)
        if max(size) > INT64_MAX:
            raise DataError(f"line {no}: the size line {' '.join(map(str, size))} is out of range: each number must "
                            "be at most 2^63-1", path=self.name)
        return size, no

    def expand(self, keys: np.ndarray, values: np.ndarray):
        if self.storage == "array":
            keys, values = self._cells_of(values)
        if self.symmetry == "general":
            return keys, values
        off = keys[0] != keys[1]
        mirror_keys = keys[::-1, off]
        mirror = values[off]
        if self.symmetry == "skew-symmetric":
            mirror = -mirror
        elif self.symmetry == "hermitian":
            mirror = np.conj(mirror)
        return np.concatenate([keys, mirror_keys], axis=1), np.concatenate([values, mirror])

    def _cells_of(self, values: np.ndarray):
        """The next values of an array file with their (row, column), those equal to the fill dropped."""
        start = self._cells
        self._cells += len(values)
        if self._cells > self.expected_rows:
            raise DataError(f"the file holds more than the {self.expected_rows} values its size line promises",
                            path=self.name)
        keys = array_cells(np.arange(start, self._cells, dtype=np.int64), self.shape[0], self.symmetry)
        fill = self.meta.fill_value
        keep = ~np.isnan(values) if fill != fill else values != fill
        return np.ascontiguousarray(keys[:, keep]), values[keep]


def _stored_cells(rows: int, cols: int, symmetry: str) -> int:
    """How many values an array file lists: all, or one triangle (skew: without the diagonal)."""
    if symmetry == "general":
        return rows * cols
    below = rows * (rows - 1) // 2
    return below if symmetry == "skew-symmetric" else below + rows


def array_cells(pos: np.ndarray, rows: int, symmetry: str) -> np.ndarray:
    """(2, n) (row, column) of the values at positions ``pos`` of an array file with ``rows`` rows:
    column-major over the whole matrix, or over the lower triangle (skew: below the diagonal)."""
    if symmetry == "general":
        return np.stack([pos % rows, pos // rows])
    skip = 1 if symmetry == "skew-symmetric" else 0  # the diagonal is not stored
    # Column j starts at S(j) = j (rows - skip) - j (j - 1) / 2: the largest j with S(j) <= pos.
    a = rows - skip + 0.5
    col = np.floor(a - np.sqrt(np.maximum(a * a - 2.0 * pos, 0.0))).astype(np.int64)

    def start(j):
        return j * (rows - skip) - j * (j - 1) // 2

    while np.any(low := start(col) > pos):  # the float estimate, corrected to the exact column
        col[low] -= 1
    while np.any(high := start(col + 1) <= pos):
        col[high] += 1
    return np.stack([col + skip + (pos - start(col)), col])


def field_of(meta: TensorMeta) -> str:
    vt = meta.value_type
    if vt.startswith("complex"):
        return "complex"
    if vt.startswith("float"):
        return "real"
    if vt == "bool":
        return "pattern" if meta.iso else "integer"
    # As scipy.io.mmwrite: 'unsigned-integer' (SciPy's own field) for uint32 and uint64, 'integer',
    # which every Matrix Market reader knows, for the smaller unsigned types.
    return "unsigned-integer" if vt in ("uint32", "uint64") else "integer"


def check_matrix(meta: TensorMeta):
    """Refuse, before any work, a tensor that a .mtx file cannot hold."""
    if meta.ndim != 2:
        check_not_hybrid(meta, "mtx")
        raise UsageError(f"a .mtx file holds a matrix; the tensor has {meta.ndim} dimensions {list(meta.shape)}")
    check_not_hybrid(meta, "mtx")
    check_zero_fill(meta, "mtx")
    check_printable(meta, "a .mtx file")


class MtxWriter:
    """Writes a ``general`` coordinate file; needs the final shape and nnz before the first row.

    A bool tensor whose values are all true (``iso``) becomes ``pattern``; any other bool
    tensor is written as ``integer`` 0/1.
    """

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        check_matrix(meta)
        self.meta = meta
        self.field = field_of(meta)
        base = 1 if opts.index_base is None else opts.index_base
        self.out = TextWriter(dst, delimiter=" ", base=base)
        self._started = False
        self._start(None)

    def _start(self, first_value):
        if self.field == "pattern" and first_value is not None and not first_value:
            self.field = "integer"  # iso, but every value is false
        m, n = self.meta.shape
        self.out.header = (f"%%MatrixMarket matrix coordinate {self.field} general\n"
                           f"% written by sptool {__version__}\n{m} {n} {self.meta.nnz}\n")

    def write(self, keys, values):
        if not self._started and len(values):
            self._started = True
            self._start(values[0])
        cols = [] if self.field == "pattern" else printable_columns(values, self.meta.value_type, "a .mtx file")
        self.out.write(keys, cols)

    def close(self):
        self.out.close()

    def abort(self):
        self.out.abort()


class MtxArrayWriter(GatheringWriter):
    """Writes a dense ``array`` file (--dense): every cell, column by column.  The entries are
    gathered (within --memory), sorted into column-major order with repeated coordinates summed,
    then the cells are written block by block, zero where no entry is."""

    what = "a dense .mtx file"

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        check_matrix(meta)
        super().__init__(dst, meta, opts)
        self.field = "integer" if meta.value_type == "bool" else field_of(meta)
        self.out = None

    def close(self):
        keys, values, shape = self.gathered()
        rows, cols = shape
        cells, values = _column_major_sums(keys, values, rows)
        header = (f"%%MatrixMarket matrix array {self.field} general\n% written by sptool {__version__}\n"
                  f"{rows} {cols}\n")
        self.out = TextWriter(self.dst, delimiter=" ", base=0, header=header)
        try:
            for begin in range(0, rows * cols, ARRAY_BLOCK):
                end = min(begin + ARRAY_BLOCK, rows * cols)
                block = np.zeros(end - begin, dtype=values.dtype)
                lo, hi = np.searchsorted(cells, [begin, end])
                block[cells[lo:hi] - begin] = values[lo:hi]
                self.out.write(np.empty((0, len(block)), dtype=np.int64),
                               printable_columns(block, self.meta.value_type, self.what))
            self.out.close()
        except BaseException:
            self.out.abort()
            raise
        self.shape = shape

    def abort(self):
        if self.out is not None:
            self.out.abort()


def _column_major_sums(keys: np.ndarray, values: np.ndarray, rows: int):
    """(cell numbers in column-major order, their values), a repeated coordinate's values summed."""
    cells = keys[1] * rows + keys[0]
    order = np.argsort(cells, kind="stable")
    cells, values = cells[order], values[order]
    if len(cells) > 1 and np.any(repeated := cells[1:] == cells[:-1]):
        starts = np.flatnonzero(np.concatenate([[True], ~repeated]))
        cells, values = cells[starts], np.add.reduceat(values, starts)
    return cells, values


def mtx_writer(dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
    """The writer of a .mtx output: ``coordinate``, or ``array`` with --dense."""
    writer = MtxArrayWriter if opts.dense else MtxWriter
    return writer(dst, meta, opts, unique_claim=unique_claim)
