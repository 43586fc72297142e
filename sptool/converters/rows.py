"""What the one-row-per-line formats (svmlight, JSON lines) share: their options, a parsed
block's rows sorted with repeats summed, line numbers of rows, labels and qids beside the
tensor, and the writer that turns a row-major matrix into one line per row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._tfrecord import order_within_rows
from ..errors import ResourceError, UsageError
from ..format import TensorMeta
from ..io import check_dense_rows, open_npy, open_source, read_all
from ..stream.duplicates import combine_runs
from ..stream.values import runs
from .common import Options, check_not_hybrid, check_zero_fill
from .compression import codec_of_name
from .text import TextWriter, check_printable


@dataclass(frozen=True)
class ExampleOptions:
    """The options of convert for Example-style id/value formats (svmlight, JSON lines)."""

    zero_based: bool | None = None  # svmlight; None: scikit-learn's guess on input, one-based on output
    n_features: int | None = None
    labels: str | None = None  # .npy, or .parquet (a tensor)
    multilabel: bool = False  # svmlight
    query_id: str | None = None  # svmlight, .npy
    strict: bool = False  # svmlight
    ids_key: str = "ids"  # JSON lines
    values_key: str = "values"
    label_key: str = "label"

    def used(self) -> set[str]:
        """The options given a value other than their default."""
        default = ExampleOptions()
        return {k for k in self.__dataclass_fields__ if getattr(self, k) != getattr(default, k)}


OPTION_NAMES = {"zero_based": "--zero-based/--one-based", "n_features": "--vocab-size", "labels": "--labels",
                "multilabel": "--multilabel", "query_id": "--query-id", "strict": "--strict", "ids_key": "--ids",
                "values_key": "--values", "label_key": "--label-key"}


def example_options(opts: Options, fmt: str, allowed: set[str], direction: str) -> ExampleOptions:
    ex = opts.examples or ExampleOptions()
    if opts.index_base is not None:
        raise UsageError(f"{fmt} files take --zero-based or --one-based, not --index-base" if fmt == "svmlight"
                         else f"{fmt} ids are 0-based; --index-base does not apply")
    if opts.shape is not None:
        raise UsageError(f"{fmt} files take --vocab-size (the rows are the lines), not --shape")
    stray = ex.used() - allowed
    if stray:
        raise UsageError(f"{', '.join(sorted(OPTION_NAMES[n] for n in stray))} do not apply to {direction} {fmt}")
    return ex


def sorted_and_summed(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(2, n) keys of whole rows in row order, each row's ids sorted and repeats summed."""
    # The rows are already in order: only each row's ids need sorting, which the compiled
    # per-row sort the TFRecord reader uses does without a two-key lexsort of the whole block.
    counts = np.diff(runs(np.ascontiguousarray(keys[:1]), [0]))
    order = order_within_rows(counts, np.ascontiguousarray(keys[1]))
    if order is not None:
        keys, values = keys[:, order], values[order]
    new = np.ones(keys.shape[1], dtype=bool)
    new[1:] = (keys[0, 1:] != keys[0, :-1]) | (keys[1, 1:] != keys[1, :-1])
    starts = np.flatnonzero(new)
    if len(starts) < keys.shape[1]:
        values = combine_runs("sum", values, np.append(starts, keys.shape[1]))
        keys = keys[:, starts]
    return np.ascontiguousarray(keys), values


def data_line(data: bytes, first_line: int, row: int, comment: bytes | None = None) -> int:
    """The line number of the ``row``-th data line (0-based) of a block: lines not blank once a
    ``comment`` is cut off (for errors found after parsing)."""
    seen = -1
    for i, line in enumerate(data.split(b"\n")):
        if (line.split(comment, 1)[0] if comment else line).strip():
            seen += 1
            if seen == row:
                return first_line + i
    return first_line


# ---------------------------------------------------------------------------------------------
# writing


ROWS_PER_BLOCK = 1 << 20


def row_blocks(rows: np.ndarray, start: int, end: int):
    """(lo, hi, a, b): rows [lo, hi) of [start, end) in blocks of at most ROWS_PER_BLOCK, with the
    slice [a, b) of the sorted ``rows`` of the entries that fall in each."""
    for lo in range(start, end, ROWS_PER_BLOCK):
        hi = min(end, lo + ROWS_PER_BLOCK)
        a, b = np.searchsorted(rows, [lo, hi])
        yield lo, hi, int(a), int(b)


class RowLinesWriter:
    """One line per row of a canonical (row-major, unique) 2-D tensor, empty rows included;
    ``format_lines`` makes the lines of a run of rows.  Labels (and qids) come from files beside
    the tensor."""

    needs_row_major = True  # rows whole and in order within each write (convert's RowMajorReader)
    what = ""
    empty_line = b"\n"  # an empty row's line, the shortest

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, ex: ExampleOptions):
        if meta.ndim != 2:
            check_not_hybrid(meta, self.what)
            raise UsageError(f"a {self.what} file holds a matrix; the tensor has {meta.ndim} dimensions "
                             f"{list(meta.shape)}")
        check_not_hybrid(meta, self.what)
        check_zero_fill(meta, self.what)
        check_printable(meta, f"a {self.what} file")
        if meta.value_type.startswith("complex"):
            raise UsageError(f"{self.what} values are real numbers; a complex tensor cannot be written as one")
        self.meta = meta
        self.n_rows = int(meta.shape[0])
        if not codec_of_name(dst):
            check_dense_rows(self.n_rows, len(self.empty_line), dst, f"a {self.what} file")
        self.budget = opts.budget
        self.labels = self._tensor_labels(ex.labels) if (ex.labels or "").endswith(".parquet") else \
            self._sidecar(ex.labels, "--labels", "f")
        self.out = TextWriter(dst, delimiter=" ", base=0)
        self.next_row = 0

    def _sidecar(self, path: str | None, option: str, kinds: str) -> np.ndarray | None:
        if path is None:
            return None
        if not path.endswith(".npy"):
            raise UsageError(f"{option} must name a .npy file{' or an sptool tensor' if option == '--labels' else ''} "
                             f"when writing {self.what}", path=path)
        arr = open_npy(path)
        if arr.ndim != 1 or len(arr) != self.n_rows:
            raise UsageError(f"{option} must hold one number per row ({self.n_rows}), not shape {list(arr.shape)}",
                             path=path)
        if arr.dtype.kind not in kinds + "iub":
            raise UsageError(f"{option} holds {arr.dtype} values, not numbers of the right kind", path=path)
        return arr

    def _tensor_labels(self, path: str):
        """Labels from an sptool tensor, held in memory (a number or a few per row): a 1-D
        [rows] tensor gives one label a row (0 where it has no entry), a 2-D bool [rows, labels]
        indicator the comma-separated multilabel lists (an Arrow string array)."""
        with open_source(path) as src:
            meta = src.meta
            rows = meta.nnz if meta.nnz is not None else self.n_rows
            if rows * 24 > self.budget.usable:
                raise ResourceError(f"--labels is held in memory; its {rows} entries need more than --memory "
                                    "leaves", path=path)
            indices, values, meta = read_all(src, self.budget)
        if meta.ndim not in (1, 2) or meta.shape[0] != self.n_rows or meta.hybrid:
            raise UsageError(f"--labels must be a [{self.n_rows}] tensor or a [{self.n_rows}, labels] indicator, "
                             f"not shape {list(meta.shape)}", path=path)
        if meta.ndim == 1:
            if meta.value_type in ("string", "binary") or meta.value_type.startswith("complex"):
                raise UsageError(f"--labels holds {meta.value_type} values, not real numbers", path=path)
            labels = np.zeros(self.n_rows)
            np.add.at(labels, indices[:, 0], values.astype(np.float64))
            return labels
        if self.what != "svmlight":
            raise UsageError(f"multilabel indicators are written to svmlight only, not {self.what}", path=path)
        keep = values.astype(bool) if meta.value_type != "bool" else values
        indices = np.unique(indices[keep], axis=0)  # row-major, each label once
        counts = np.bincount(indices[:, 0], minlength=self.n_rows)
        offsets = np.zeros(self.n_rows + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        words = pc.cast(pa.array(indices[:, 1]), pa.string())
        return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), words), ",")

    def labels_text(self, start: int, end: int) -> pa.Array | None:
        """The labels of rows [start, end) as text (None without labels)."""
        if self.labels is None:
            return None
        if isinstance(self.labels, pa.Array):
            return self.labels[start:end]
        return pc.cast(pa.array(np.asarray(self.labels[start:end])), pa.string())

    def write(self, keys: np.ndarray, values: np.ndarray):
        if keys.shape[1]:
            self._lines(keys, values, int(keys[0, -1]) + 1)

    def _lines(self, keys: np.ndarray, values: np.ndarray, end: int):
        """Lines for rows [next_row, end): the entries given, and empty rows between them, in
        blocks of at most ROWS_PER_BLOCK rows (a long run of empty rows is not built at once)."""
        for lo, hi, a, b in row_blocks(keys[0], self.next_row, end):
            self._block(keys[:, a:b], values[a:b], lo, hi)

    def _block(self, keys: np.ndarray, values: np.ndarray, start: int, end: int):
        counts = np.bincount(keys[0] - start, minlength=end - start)
        offsets = np.zeros(end - start + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        lines = self.format_lines(start, end, counts, offsets, keys[1], values)
        text = pc.binary_join_element_wise(lines, pa.scalar("\n"), "")
        offsets = np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1, offset=text.offset * 4)
        self.out.f.write(memoryview(text.buffers()[2])[offsets[0]: offsets[-1]])
        self.out.rows += len(text)
        self.next_row = end

    def format_lines(self, start: int, end: int, counts: np.ndarray, offsets: np.ndarray, ids: np.ndarray,
                     values: np.ndarray) -> pa.Array:
        raise NotImplementedError

    def close(self):
        self._lines(np.empty((2, 0), dtype=np.int64), np.empty(0, dtype=self.meta.dtype), self.n_rows)
        self.out.close()

    def abort(self):
        self.out.abort()
