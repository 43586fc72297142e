"""Coordinate text, read chunk by chunk and written batch by batch.

Reading: the bytes are cut into blocks of whole lines (about ``chunk_bytes`` each), the
blocks are parsed by the compiled kernel in sptool/_textparse.pyx on a small thread pool
(it releases the GIL), and the results come back in file order, so a file of any size
converts in bounded memory.  Line numbers in error messages are counted across blocks.

Writing: index and value columns are formatted by Arrow's CSV writer, which prints floats
in their shortest round-trip form (as repr does), so text output reads back bit for bit.
"""

from __future__ import annotations

import os
import re
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .. import _kernels
from .. import _textparse as tp
from .._memory import Budget
from ..errors import DataError, InputError, UsageError
from ..format import VALUE_TYPES, TensorMeta
from ..io import AtomicTarget, arrow_of, open_output
from .common import Options, Reader, cast_or_fail, coerce_fill
from .compression import open_binary, reading, writing

# Chunk size: a block in flight holds its text plus at most about 4x as many bytes of parsed
# arrays (8 bytes per field of a line of >= 2 bytes per field), and up to workers + 2 blocks
# are in flight, so 1/64 of the budget keeps parsing well inside --memory.  Above 8 MiB a
# block gains no speed (measured: 4-8 MiB blocks parse at full speed).
CHUNK_MIN = 64 << 10
CHUNK_MAX = 8 << 20
# A "line" longer than this is almost certainly not coordinate text.
MAX_LINE = 1 << 20
UINT64_END = 1 << 64


def chunk_bytes(budget: Budget) -> int:
    """Bytes of text read per block for a --memory budget (or its text_block_bytes tuning)."""
    if budget.text_block_bytes:
        return budget.text_block_bytes
    return int(min(max(budget.total // 64, CHUNK_MIN), CHUNK_MAX))


@dataclass(frozen=True)
class Layout:
    """How one data line looks: ``nidx`` indices then the value field(s) of ``vkind``."""

    nidx: int
    vkind: int
    base: int
    delim: int = 0  # 0: runs of blanks; else one delimiter byte
    comment: int = 0  # a line starting with this byte is skipped (0: none)
    trailing: bool = False  # the comment byte also ends the data of a line (FROSTT's '# ...' after values)
    unsigned: bool = False  # V_INT values are unsigned 64-bit (Matrix Market's unsigned-integer field)

    @property
    def nvals(self) -> int:
        return {tp.V_NONE: 0, tp.V_COMPLEX: 2}.get(self.vkind, 1)

    @property
    def nfields(self) -> int:
        return self.nidx + self.nvals

    def describe(self) -> str:
        vals = {0: "", 1: " and a value", 2: " and a real and an imaginary part"}[self.nvals]
        return f"{self.nidx} ind{'ex' if self.nidx == 1 else 'ices'}{vals}"

    def split(self, line: str) -> list[str]:
        if self.trailing and self.comment:
            line = line.split(chr(self.comment), 1)[0]
        if self.delim:
            return [f.strip() for f in line.split(chr(self.delim))]
        return line.split()

    def without_comments(self, data: bytes) -> bytes:
        """``data`` with every trailing comment cut off its line (newlines kept, so line numbers hold);
        the kernel skips only lines that start with the comment byte."""
        if not (self.trailing and self.comment) or self.comment not in data:
            return data
        return _comment_pattern(self.comment).sub(b"", data)

    def is_data(self, line: bytes) -> bool:
        """As the kernel decides: not blank (tab is blank unless it delimits) and not a comment."""
        s = line.strip(b" \r" if self.delim == 9 else b" \t\r")
        return bool(s) and (not self.comment or s[0] != self.comment)


def _comment_pattern(byte: int) -> re.Pattern:
    return re.compile(re.escape(bytes([byte])) + rb"[^\n]*")


class LineTooLong(Exception):
    """A line of more than MAX_LINE bytes (its number is told by parsed_blocks)."""


class OpenedText:
    """A binary text input (file or stdin) with a look-ahead buffer and a line counter."""

    def __init__(self, path: str):
        self._raw, self._owned, self.name = open_binary(path, "the text")
        self.f = reading(self._raw, path, self.name)
        self.pending = b""  # read but not yet consumed
        self.line = 1  # 1-based number of the first line in ``pending``
        self.eof = False
        self._started = False

    def fill(self, n: int) -> bool:
        """Read about n more bytes into ``pending``; False at end of input."""
        if self.eof:
            return False
        try:
            data = self.f.read(n)
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror}", path=self.name) from None
        if not data:
            self.eof = True
            return False
        if not self._started:
            self._started = True
            if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (Windows editors)
                data = data[3:]
        self.pending += data
        return True

    def next_line(self, block: int) -> bytes | None:
        """Take one whole line (without its newline) off ``pending``; None at end of input."""
        while True:
            at = self.pending.find(b"\n")
            if at >= 0:
                line, self.pending = self.pending[:at], self.pending[at + 1 :]
                self.line += 1
                return line
            if len(self.pending) > MAX_LINE:
                raise DataError(f"line {self.line}: longer than {MAX_LINE} bytes; is this a text file?",
                                path=self.name)
            if not self.fill(block):
                if not self.pending:
                    return None
                line, self.pending = self.pending, b""
                self.line += 1
                return line

    def peek_data_lines(self, layout_like: Layout, count: int, block: int) -> list[tuple[int, bytes]]:
        """Up to ``count`` (line number, text) of the next data lines, without consuming them."""
        found: list[tuple[int, bytes]] = []
        pos, line = 0, self.line
        while len(found) < count:
            at = self.pending.find(b"\n", pos)
            if at < 0:
                if len(self.pending) - pos > MAX_LINE:
                    raise DataError(f"line {line}: longer than {MAX_LINE} bytes; is this a text file?",
                                    path=self.name)
                if self.fill(block):
                    continue
                if pos < len(self.pending) and layout_like.is_data(self.pending[pos:]):
                    found.append((line, self.pending[pos:]))
                break
            text = self.pending[pos:at]
            if layout_like.is_data(text):
                found.append((line, text))
            pos, line = at + 1, line + 1
        return found

    def _read_into(self, view: memoryview) -> int:
        """Fill ``view`` from the input (fewer bytes only at the end); returns the count."""
        got = 0
        while got < len(view) and not self.eof:
            try:
                # Released at once, not when the frame goes: a sampling profiler (Dask's, on a
                # worker) may hold this frame, and a live view stops ``blocks`` resizing its buffer.
                with view[got:] as rest:
                    n = self.f.readinto(rest)
            except OSError as e:
                raise InputError(f"cannot read: {e.strerror}", path=self.name) from None
            if not n:
                self.eof = True
            else:
                got += n
        return got

    def blocks(self, block: int):
        """Yield buffers of whole lines (the last may lack its newline) until the end of input.

        Each block is a bytearray read straight from the file (it may be parsed on another
        thread while the next is read), reused once let go; only the partial last line is copied.  A line
        longer than MAX_LINE raises LineTooLong: its number is known once the blocks before it
        are parsed (parsed_blocks), so no pass here counts lines.
        """
        carry, self.pending = self.pending, b""
        lent: deque = deque()  # the last blocks yielded, oldest first
        while True:
            buf = _spare_block(lent, len(carry) + block)
            buf[: len(carry)] = carry
            with memoryview(buf) as whole, whole[len(carry) :] as tail:
                end = len(carry) + self._read_into(tail)
            if end == 0:
                return
            if self.eof:
                del buf[end:]
                carry = b""
            else:
                cut = buf.rfind(b"\n", 0, end)
                if cut < 0:
                    if end > MAX_LINE:
                        raise LineTooLong
                    carry = bytes(buf[:end])
                    continue
                carry = bytes(buf[cut + 1 : end])
                del buf[cut + 1 :]
            yield buf
            if self.eof:
                return
            lent.append(buf)
            if len(lent) > LENT_BLOCKS:
                lent.popleft()

    def close(self):
        if self.f is not self._raw:
            self.f.close()
        if self._owned:
            self._raw.close()


# Blocks remembered for reuse once parsed and let go: as many as are in flight on a few
# workers, so reuse holds no more memory than the blocks themselves.
LENT_BLOCKS = 6


def _spare_block(lent: deque, size: int) -> bytearray:
    """A buffer of ``size`` bytes: the oldest block lent out if no one holds it any more (its
    parse, its rows and their error messages are done with it), which saves a fresh buffer's
    zeroing and page faults; else a new one."""
    if not (lent and sys.getrefcount(lent[0]) == 2):  # the deque's reference and getrefcount's argument
        return bytearray(size)
    buf = lent.popleft()
    if len(buf) < size:
        buf.extend(bytes(size - len(buf)))  # by about a line: within the buffer's allocation
    else:
        del buf[size:]
    return buf


@dataclass
class Parsed:
    """One parsed block: keys (K, n) int64 and values, plus what is needed to name lines."""

    keys: np.ndarray
    values: np.ndarray | None  # None for pattern (no value field)
    data: bytes
    first_line: int


def _parse_block(data: bytes, layout: Layout):
    data = layout.without_comments(data)
    cap = tp.count_newlines(data) + 1
    idx = np.empty((layout.nidx, cap), dtype=np.int64)
    nv = layout.nvals
    fval = np.empty(cap * nv if layout.vkind in (tp.V_FLOAT, tp.V_COMPLEX) else 0, dtype=np.float64)
    ival = np.empty(cap if layout.vkind == tp.V_INT else 0, dtype=np.int64)
    result = tp.parse_lines(data, True, layout.nidx, layout.vkind, layout.base, layout.delim,
                            layout.comment, idx, fval, ival)
    if layout.unsigned and result[3] == tp.ERR_RANGE and result[6] >= layout.nidx:
        return _parse_wide_unsigned(data, layout)
    return result, idx, fval, ival, data


def _parse_wide_unsigned(data: bytes, layout: Layout):
    """A block holding unsigned values of 2^63 or more, past the kernel's int64: the kernel checks
    the lines with the values read as floats, then each value is read exactly here (such blocks
    are rare: the kernel reads every other block)."""
    result, idx, fval, _, data = _parse_block(data, replace(layout, vkind=tp.V_FLOAT, unsigned=False))
    rows, err = result[0], result[3]
    values = np.empty(rows, dtype=np.uint64)
    if err != tp.OK:
        return result, idx, fval, values, data
    row = offset = 0
    for no, line in enumerate(bytes(data).split(b"\n")):
        if layout.is_data(line):
            value = _exact_integer(layout.split(line.decode("ascii", "replace"))[layout.nidx])
            if value is None or not 0 <= value < UINT64_END:
                code = tp.ERR_VALUE if value is None else tp.ERR_RANGE
                return (row, 0, no, code, no, offset, layout.nidx), idx, fval, values, data
            values[row] = value
            row += 1
        offset += len(line) + 1
    return result, idx, fval, values, data


def _exact_integer(word: str) -> int | None:
    """An integer as the kernel reads one: digits, or a float spelling of an integer below 2^53."""
    try:
        return int(word)
    except ValueError:
        pass
    try:
        v = float(word)
    except ValueError:
        return None
    return int(v) if v.is_integer() and abs(v) <= 2**53 else None


def parsed_blocks(text: OpenedText, block: int, parse, workers: int):
    """Yield ``(data, parse(data))`` for the blocks of the rest of ``text`` in file order, the
    blocks parsed side by side on ``workers`` threads (``parse`` must release the GIL to gain).
    The caller adds each block's lines to ``text.line``, which names a line that is too long."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sptool-parse") if workers > 1 else None
    queue: deque = deque()
    too_long = False
    try:
        try:
            for data in text.blocks(block):
                queue.append((data, pool.submit(parse, data) if pool else None))
                while queue and (pool is None or len(queue) > workers):
                    data, fut = queue.popleft()
                    yield data, fut.result() if fut is not None else parse(data)
        except LineTooLong:
            too_long = True
        while queue:
            data, fut = queue.popleft()
            yield data, fut.result() if fut is not None else parse(data)
        if too_long:  # every line before it is counted now
            raise DataError(f"line {text.line}: longer than {MAX_LINE} bytes; is this a text file?", path=text.name)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def parse_text(text: OpenedText, layout: Layout, block: int, workers: int):
    """Yield Parsed blocks of the rest of ``text`` in file order."""
    for _data, parsed in parsed_blocks(text, block, lambda data: _parse_block(data, layout), workers):
        yield _finish(parsed, text, layout)


def _finish(parsed, text: OpenedText, layout: Layout) -> Parsed:
    result, idx, fval, ival, data = parsed  # the data as parsed: without trailing comments
    rows, _consumed, lines, err, err_line, err_offset, field = result
    first = text.line
    if err != tp.OK:
        raise DataError(f"line {first + err_line}: {_describe(data, err, err_offset, field, layout)}",
                        path=text.name)
    text.line += lines
    keys = idx[:, :rows]
    if layout.vkind == tp.V_FLOAT:
        values = fval[:rows]
    elif layout.vkind == tp.V_COMPLEX:
        values = fval[: 2 * rows].view(np.complex128)
    elif layout.vkind == tp.V_INT:
        values = ival[:rows]
    else:
        values = None
    parsed = Parsed(keys, values, data, first)
    if layout.unsigned and values is not None and values.dtype != np.uint64:
        parsed.values = _as_unsigned(parsed, layout, text.name)
    return parsed


def _as_unsigned(parsed: Parsed, layout: Layout, name: str) -> np.ndarray:
    """The int64 values the kernel read for an unsigned field, as uint64; a negative one is an error."""
    negative = np.flatnonzero(parsed.values < 0)
    if negative.size:
        row = int(negative[0])
        raise DataError(f"line {line_of_row(parsed, row, layout)}: "
                        f"{_outside_unsigned(layout, parsed.values[row])}", path=name)
    return parsed.values.view(np.uint64)


def _outside_unsigned(layout: Layout, text) -> str:
    return f"field {layout.nidx + 1}: value {text} is outside 0 to 2^64-1 (an unsigned-integer field)"


def _describe(data: bytes, err: int, offset: int, field: int, layout: Layout) -> str:
    end = data.find(b"\n", offset)
    line = data[offset : end if end >= 0 else len(data)].decode("utf-8", "replace").rstrip("\r")
    fields = layout.split(line)
    if err == tp.ERR_FIELDS or len(fields) != layout.nfields:
        return f"expected {layout.nfields} fields ({layout.describe()}), got {len(fields)}"
    text = fields[field] if field < len(fields) else ""
    kind = "index" if field < layout.nidx else "value"
    where = f"field {field + 1}"
    if not text:
        return f"{where} is empty"
    if err == tp.ERR_INDEX:
        return f"{where}: index {text!r} is not an integer"
    if err == tp.ERR_BASE:
        hint = "use --index-base 0 for 0-based files" if layout.base == 1 else "indices must not be negative"
        return f"{where}: index {text} is less than {layout.base}, the index base ({hint})"
    if err == tp.ERR_RANGE and kind == "value" and layout.unsigned:
        return _outside_unsigned(layout, text)
    if err == tp.ERR_RANGE:
        return f"{where}: {kind} {text} does not fit in a 64-bit integer"
    if err == tp.ERR_VALUE:
        what = "an integer" if layout.vkind == tp.V_INT else "a number"
        return f"{where}: value {text!r} is not {what}"
    return f"cannot parse the line (error {err})"


def line_of_row(parsed: Parsed, row: int, layout: Layout) -> int:
    """The line number holding data row ``row`` of a block (for errors found after parsing)."""
    seen = -1
    for i, line in enumerate(parsed.data.split(b"\n")):
        if layout.is_data(line):
            seen += 1
            if seen == row:
                return parsed.first_line + i
    return parsed.first_line


def check_bounds(parsed: Parsed, shape, layout: Layout, name: str):
    """A DataError naming the line of the first index outside a known shape."""
    K = layout.nidx
    if K == 0 or parsed.keys.shape[1] == 0 or any(s is None for s in shape[:K]):
        return
    bounds = np.asarray(shape[:K], dtype=np.int64)
    row, dim = _kernels.first_out_of_bounds(parsed.keys, bounds)
    if row >= 0:
        value = int(parsed.keys[dim, row]) + layout.base
        raise DataError(
            f"line {line_of_row(parsed, row, layout)}: index {value} in field {dim + 1} is out of bounds for "
            f"shape {list(shape)} (largest {layout.base + shape[dim] - 1} with index base {layout.base})",
            path=name,
        )


# ---------------------------------------------------------------------------------------------
# writing

class TextWriter:
    """Writes rows as delimited text to ``dst`` (atomically) or to stdout ('-')."""

    def __init__(self, dst: str, *, delimiter: str, base: int, header: str | None = None):
        self.dst = dst
        self.base = base
        self.delimiter = delimiter
        self.rows = 0
        self._target = None
        self.header = header
        if dst == "-":
            self._raw = sys.stdout.buffer
        elif _is_special(dst):
            # A device or pipe (/dev/null, a FIFO) is written in place: renaming a
            # temporary file over it would replace the device node.
            self._raw = open(dst, "wb")  # noqa: SIM115 (closed in close/abort)
        else:
            self._target = AtomicTarget(dst, is_dir=False, remote=True)
            self._raw = open_output(self._target.tmp)  # a URL: its filesystem's stream
        self.f = writing(self._raw, dst)
        self._writer = None
        self._options = pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none",
                                           batch_size=1 << 16)

    def write_header(self, text: str):
        self.f.write(text.encode())

    def write(self, keys: np.ndarray, columns: list[np.ndarray]):
        """Rows of (K, n) 0-based keys and value columns (already in a printable dtype)."""
        n = keys.shape[1]
        if self.header is not None:
            self.write_header(self.header)
            self.header = None
        if n == 0:
            return
        arrays = [arrow_of(np.ascontiguousarray(keys[k]) + self.base) for k in range(keys.shape[0])]
        arrays += [pa.array(c) for c in columns]
        batch = pa.RecordBatch.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])
        if self._writer is None:
            self.f.flush()
            self._writer = pacsv.CSVWriter(self.f, batch.schema, write_options=self._options)
        self._writer.write_batch(batch)
        self.rows += n

    def close(self):
        if self.header is not None:
            self.write_header(self.header)
            self.header = None
        if self._writer is not None:
            self._writer.close()
        if self.f is not self._raw:
            self.f.close()  # the compressor's last frame
        self._raw.flush()
        if self._raw is not sys.stdout.buffer:
            self._raw.close()
        if self._target is not None:
            self._target.commit()

    def abort(self):
        if self._raw is sys.stdout.buffer:
            return
        try:
            if self._writer is not None:
                self._writer.close()
            if self.f is not self._raw:
                self.f.close()
        except Exception:  # noqa: BLE001 - the partial output is being removed anyway
            pass
        self._raw.close()
        if self._target is not None:
            self._target.abort()


def _is_special(path: str) -> bool:
    """An existing path that is neither a regular file nor a directory (a device, a FIFO)."""
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def check_printable(meta: TensorMeta, what: str):
    if meta.value_type in ("string", "binary"):
        raise UsageError(f"{what} holds numbers only; a {meta.value_type} tensor cannot be written as one")


def printable_columns(values: np.ndarray, value_type: str, what: str) -> list[np.ndarray]:
    """Value columns for text: complex splits into real and imaginary, bool becomes 0/1."""
    if value_type.startswith("complex"):
        return [np.ascontiguousarray(values.real), np.ascontiguousarray(values.imag)]
    if value_type == "bool":
        return [values.astype(np.int8)]
    if value_type in ("string", "binary"):
        raise UsageError(f"{what} holds numbers only; a {value_type} tensor cannot be written as one")
    return [values]


# ---------------------------------------------------------------------------------------------
# the reader all text formats share

def value_kind(value_type: str | None) -> int:
    """How to parse the value field for an output value type (float64 when not given)."""
    if value_type is None:
        return tp.V_FLOAT
    if value_type in ("string", "binary"):
        raise UsageError(f"text files hold numbers; --value-type {value_type} is not supported for them")
    kind = VALUE_TYPES[value_type].kind
    # Integers are parsed as integers, so that values beyond 2^53 stay exact.
    return {"i": tp.V_INT, "u": tp.V_INT, "c": tp.V_COMPLEX}.get(kind, tp.V_FLOAT)


class TextReader(Reader):
    """Base of the .tns, .mtx, .csv and .tsv readers: ``_open`` reads the header (if any) and
    sets ``layout``, ``shape`` and ``value_type``; the data lines then stream in blocks."""

    fmt = ""
    default_base = 1
    iso = False
    expected_rows: int | None = None

    def __init__(self, path: str, opts: Options):
        self.opts = opts
        self.base = self.default_base if opts.index_base is None else opts.index_base
        self.text = OpenedText(path)
        self.name = self.text.name
        self.block = chunk_bytes(opts.budget)
        try:
            self._open()
        except BaseException:
            self.text.close()
            raise
        vt = self.value_type
        self.meta = TensorMeta(shape=self.shape, sparse_ndim=self.sparse_ndim, value_type=vt,
                               fill_value=coerce_fill(opts.fill_value, vt), sort_order=(), unique=False,
                               iso=self.iso)

    def _open(self):
        raise NotImplementedError

    @property
    def sparse_ndim(self) -> int:
        """The tensor's dimensions: one an index field, unless the file's lines hold values only."""
        return self.layout.nidx

    def _shape_from_option(self, K: int | None, found: tuple | None = None, what: str = "") -> tuple:
        shape = self.opts.shape
        if found is not None:
            if shape is not None and tuple(shape) != tuple(found):
                raise UsageError(f"--shape {list(shape)} contradicts the shape {list(found)} {what}", path=self.name)
            return tuple(found)
        if shape is not None:
            if K is not None and len(shape) != K:
                raise UsageError(f"--shape {list(shape)} has {len(shape)} dimensions but the first line holds {K} "
                                 "indices", path=self.name)
            return tuple(shape)
        return (None,) * K

    def _infer_rank(self, comment: int, delim: int, nvals: int, trailing: bool = False) -> tuple[int | None, list]:
        """The number of indices from the first data line (None when there is none)."""
        probe = Layout(1, tp.V_FLOAT, self.base, delim, comment, trailing)
        lines = self.text.peek_data_lines(probe, 1, self.block)
        if not lines:
            return None, lines
        no, raw = lines[0]
        n = len(probe.split(raw.decode("utf-8", "replace").strip()))
        if n <= nvals:
            raise DataError(f"line {no}: expected {nvals + 1} or more fields (indices, then the value), got {n}",
                            path=self.name)
        return n - nvals, lines

    def _no_rank(self):
        raise UsageError("the file holds no entries, so the number of dimensions is unknown; give --shape",
                         path=self.name)

    def batches(self):
        dtype = VALUE_TYPES[self.meta.value_type]
        layout = self.layout
        for parsed in parse_text(self.text, layout, self.block, self.opts.budget.workers):
            check_bounds(parsed, self.shape, layout, self.name)
            n = parsed.keys.shape[1]
            if parsed.values is None:
                values = np.ones(n, dtype=dtype)
            else:
                values = cast_or_fail(parsed.values, dtype,
                                      lambda r, p=parsed: f"line {line_of_row(p, r, layout)}", self.name)
            self.rows_in += n
            yield self.expand(parsed.keys, values)
        if self.expected_rows is not None and self.rows_in != self.expected_rows:
            raise DataError(f"the header promises {self.expected_rows} entries but the file holds {self.rows_in}",
                            path=self.name)

    def expand(self, keys: np.ndarray, values: np.ndarray):
        return keys, values

    def close(self):
        self.text.close()
