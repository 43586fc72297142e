"""svmlight / libsvm text: ``label [qid:Q] id:value id:value ... [# comment]``, one row per line.

Read as scikit-learn's ``load_svmlight_file`` reads it: a [rows, features] matrix whose rows are
the data lines (a line with no features is an empty row that keeps its place), explicit zeros
kept as entries, comments (whole-line and trailing) and blank lines skipped, ``qid:`` only as
the first feature, with ``multilabel`` a comma-separated (possibly empty) label list per line.
Where scikit-learn refuses a line whose ids are unsorted or repeated, they are sorted and the
repeats summed (the format's rule); ``strict`` refuses them as scikit-learn does.  The labels
and qids go to their own files (``labels``, ``query_id``).

The index base, when not given, is scikit-learn's guess: one-based when the smallest id in the
whole file is above 0.  That needs the whole file, which a stream does not have before writing,
so the parsed blocks are held back (within a share of --memory) until an id 0 decides zero-based
or the end of the file decides.  Past that share the ids are taken as one-based and written so;
an id 0 later proves the guess wrong, and a named file is then read again from the start as
zero-based (``IndexBaseRestart``); only stdin, which cannot be read twice, fails and asks for
--zero-based.  Real one-based files never restart, zero-based files only when their first id 0
comes after that share of the file; a separate pre-scan would instead read every file twice.

Written back one line per row with its label (0 without ``labels``), its qid, and the entries
of a canonical row-major tensor, one-based unless ``zero_based``; values in their shortest
round-trip form (by Arrow's formatter), so that scikit-learn reads back the same matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _textparse as tp
from ..errors import DataError, UsageError
from ..format import VALUE_TYPES, TensorMeta
from ..io import GrowingNpy, SideOutputs, TensorSink, open_sink
from .common import Options, Reader, cast_or_fail, coerce_fill
from .rows import ExampleOptions, RowLinesWriter, data_line, example_options, sorted_and_summed
from .text import OpenedText, chunk_bytes, parsed_blocks, printable_columns

READ_OPTIONS = {"zero_based", "n_features", "labels", "multilabel", "query_id", "strict"}
WRITE_OPTIONS = {"zero_based", "labels", "query_id"}
COMMENT = b"#"


class IndexBaseRestart(Exception):
    """The ids were taken as one-based past the held-back share of the file, and an id 0 came:
    the file is zero-based and has to be read again from the start."""


_ERRORS = {
    tp.SV_LABEL: "the label {word!r} is not a number",
    tp.SV_COLON: "the feature {word!r} has no colon (expected id:value)",
    tp.SV_ID: "the feature id in {word!r} is not an integer",
    tp.SV_NEGATIVE: "the feature id in {word!r} is negative",
    tp.SV_VALUE: "the feature value in {word!r} is not a number",
    tp.SV_QID: "the qid in {word!r} is not an integer",
    tp.SV_RANGE: "a number in {word!r} does not fit in a 64-bit integer",
}


@dataclass
class Block:
    """One parsed block: entries with block-local rows and ids as written, and per row its label(s)
    and qid."""

    data: bytes
    first_line: int
    row0: int  # the number of its first row in the file
    keys: np.ndarray  # (2, n): row in the file, id as written
    values: np.ndarray
    nrows: int
    labels: np.ndarray
    label_ptr: np.ndarray | None  # multilabel: ends of each row's labels
    qids: np.ndarray
    has_qid: np.ndarray
    min_id: int
    max_id: int
    first_unsorted: int  # 0-based line in the block, -1 if none


def _parse(data: bytes, multilabel: bool):
    newlines, colons, commas = tp.count_svmlight(data, multilabel)
    lines = newlines + 1
    keys = np.empty((2, colons + 1), dtype=np.int64)
    values = np.empty(colons + 1, dtype=np.float64)
    labels = np.empty(lines + (commas if multilabel else 0) + 1, dtype=np.float64)
    label_ptr = np.empty(lines + 1, dtype=np.int64)
    qids = np.empty(lines, dtype=np.int64)
    has_qid = np.empty(lines, dtype=np.uint8)
    result = tp.parse_svmlight(data, multilabel, keys, values, labels, label_ptr, qids, has_qid)
    return result, keys, values, labels, label_ptr, qids, has_qid


class SvmlightReader(Reader):
    fmt = "svmlight"
    unique_claim = True

    def __init__(self, path: str, opts: Options):
        svm = self.svm = example_options(opts, "svmlight", READ_OPTIONS, "reading")
        self.path = path
        self.opts = opts
        vt = opts.value_type or "float64"
        if vt in ("string", "binary") or vt.startswith("complex"):
            raise UsageError(f"svmlight values are real numbers; --value-type {vt} cannot hold them")
        if svm.n_features is not None and svm.n_features < 1:
            raise UsageError(f"--vocab-size must be 1 or more, not {svm.n_features}")
        self._check_sidecars(svm)
        self.text = OpenedText(path)
        self.name = self.text.name
        self.block = chunk_bytes(opts.budget)
        # Parsed blocks held back while the index base is undecided: text plus about 6 bytes of
        # arrays per byte, within an eighth of the budget.
        self.hold_bytes = opts.budget.usable // 8
        self.meta = TensorMeta(shape=(None, svm.n_features), sparse_ndim=2, value_type=vt,
                               fill_value=coerce_fill(opts.fill_value, vt), sort_order=(0, 1), unique=False)
        self.rows = 0
        self.max_col = -1
        self.base = None if svm.zero_based is None else (0 if svm.zero_based else 1)
        self.base_note = "given"
        self.sidecars = SideOutputs()
        self.n_labels = 0  # multilabel: the largest label + 1
        self.notes: list[str] = []

    def _check_sidecars(self, svm: ExampleOptions):
        if svm.labels is not None:
            if not svm.labels.endswith((".npy", ".parquet")):
                raise UsageError("--labels must name a .npy or .parquet file", path=svm.labels)
            if svm.multilabel and svm.labels.endswith(".npy"):
                raise UsageError("multilabel labels are a sparse [rows, labels] indicator: give --labels "
                                 "L.parquet", path=svm.labels)
        if svm.query_id is not None and not svm.query_id.endswith(".npy"):
            raise UsageError("--query-id must name a .npy file", path=svm.query_id)

    def _open_sidecars(self):
        svm = self.svm
        self.label_out = self.qid_out = None
        if svm.labels is not None:
            if svm.labels.endswith(".npy"):
                self.label_out = GrowingNpy(svm.labels, np.float64)
            elif svm.multilabel:
                meta = TensorMeta(shape=(None, None), sparse_ndim=2, value_type="bool", fill_value=False,
                                  sort_order=(0, 1), unique=False)
                self.label_out = open_sink(svm.labels, meta, unique_claim=None, budget=self.opts.budget)
            else:
                meta = TensorMeta(shape=(None,), sparse_ndim=1, value_type="float64", fill_value=0.0,
                                  sort_order=(0,), unique=True)
                self.label_out = open_sink(svm.labels, meta, unique_claim=True, budget=self.opts.budget)
            commit = self._commit_labels if isinstance(self.label_out, TensorSink) else None
            self.sidecars.add(self.label_out, commit)
        if svm.query_id is not None:
            self.qid_out = self.sidecars.add(GrowingNpy(svm.query_id, np.int64))

    def _commit_labels(self):
        out = self.label_out
        out.resolve_shape((self.rows,) if out.meta.sparse_ndim == 1 else (self.rows, self.n_labels))
        out.close()

    # -- parsing ------------------------------------------------------------------------------

    def _blocks(self):
        """Parsed blocks in file order, their rows numbered across the file."""
        multilabel = self.svm.multilabel
        parse = lambda d: _parse(d, multilabel)  # noqa: E731
        for data, parsed in parsed_blocks(self.text, self.block, parse, self.opts.budget.workers):
            result, keys, values, labels, label_ptr, qids, has_qid = parsed
            nrows, n, nlab, lines, err, err_line, err_offset, min_id, max_id, first_unsorted = result
            first = self.text.line
            if err != tp.OK:
                word = data[err_offset:].split(None, 1)[0].split(b"#", 1)[0] if err_offset < len(data) else b""
                what = _ERRORS.get(err, "cannot parse the line (error {word})")
                raise DataError(f"line {first + err_line}: {what.format(word=word.decode('utf-8', 'replace'))}",
                                path=self.name)
            self.text.line += lines
            keys = keys[:, :n]
            keys[0] += self.rows
            row0 = self.rows
            self.rows += nrows
            yield Block(data, first, row0, keys, values[:n], nrows, labels[:nlab],
                        label_ptr[: nrows + 1] if multilabel else None, qids[:nrows], has_qid[:nrows].view(bool),
                        min_id, max_id, first_unsorted)

    @staticmethod
    def line_of(block: Block, row: int) -> int:
        """The line of row ``row`` (numbered in the file) of a block."""
        return data_line(block.data, block.first_line, row - block.row0, COMMENT)

    def _sidecar_rows(self, block: Block):
        """Write a block's labels and qids."""
        svm = self.svm
        row0 = block.row0
        if svm.query_id is not None and block.nrows:
            missing = np.flatnonzero(~block.has_qid)
            if len(missing):
                line = data_line(block.data, block.first_line, int(missing[0]), COMMENT)
                raise DataError(f"line {line}: no qid, but --query-id asks for one on every line", path=self.name)
            self.qid_out.append(block.qids)
        if self.label_out is None:
            return
        if isinstance(self.label_out, GrowingNpy):
            self.label_out.append(block.labels)
        elif svm.multilabel:
            labels = block.labels
            whole = np.isfinite(labels) & (labels >= 0) & (labels == np.trunc(labels)) & (labels < 2.0**62)
            if not whole.all():
                bad = int(np.argmin(whole))
                row = int(np.searchsorted(block.label_ptr, bad, side="right")) - 1
                line = data_line(block.data, block.first_line, row, COMMENT)
                raise DataError(f"line {line}: label {labels[bad]!r} is not a non-negative integer, so it cannot be "
                                "a column of the label indicator", path=self.name)
            if len(labels):
                self.n_labels = max(self.n_labels, int(labels.max()) + 1)
            rows = np.repeat(np.arange(row0, row0 + block.nrows, dtype=np.int64), np.diff(block.label_ptr))
            self.label_out.write(np.stack([rows, labels.astype(np.int64)]), np.ones(len(labels), dtype=bool))
        else:
            self.label_out.write(np.arange(row0, row0 + block.nrows, dtype=np.int64)[None, :], block.labels)

    def _canonical(self, block: Block):
        """The block's entries with each row's ids sorted and repeats summed (or refused)."""
        keys, values = block.keys, block.values
        if block.first_unsorted < 0:
            return keys, values
        if self.svm.strict:
            raise DataError(f"line {block.first_line + block.first_unsorted}: feature ids are not sorted and "
                            "unique (--strict refuses them, as scikit-learn does)", path=self.name)
        return sorted_and_summed(keys, values)

    # -- the index base -------------------------------------------------------------------------

    def _decided(self):
        """Blocks as they come, with the index base decided before the first leaves."""
        held, held_bytes = [], 0
        guessed = False
        for block in self._blocks():
            if self.base is None:
                if block.min_id == 0:
                    self.base, self.base_note = 0, f"detected: id 0 on line {self._first_zero_line(block)}"
                else:
                    held.append(block)
                    held_bytes += len(block.data) * 7
                    if held_bytes <= self.hold_bytes:
                        continue
                    self.base, self.base_note, guessed = 1, "assumed: no id 0 in the first part of the input", True
                yield from held
                held = []
                if self.base == 1:
                    continue
            elif guessed and block.min_id == 0:
                if self.path == "-":
                    raise DataError(f"line {self._first_zero_line(block)}: id 0 in a file whose ids were taken as "
                                    "one-based (no id 0 in its first part); stdin cannot be read again: give "
                                    "--zero-based", path=self.name)
                raise IndexBaseRestart()
            yield block
        if self.base is None:
            # scikit-learn: one-based when there are ids and the smallest is above 0.
            any_ids = any(b.keys.shape[1] for b in held)
            self.base = 1 if any_ids else 0
            self.base_note = "detected: the smallest id is above 0" if any_ids else "detected: no ids"
        yield from held

    def _first_zero_line(self, block: Block) -> int:
        return self.line_of(block, int(block.keys[0, int(np.argmin(block.keys[1]))]))

    # -- the reader -----------------------------------------------------------------------------

    def batches(self):
        self._open_sidecars()
        for keys, values in self._converted():
            if keys.shape[1]:
                self.max_col = max(self.max_col, int(keys[1].max()))
            yield keys, values
        n_features = self.svm.n_features
        # scikit-learn: the largest id + 1, and 1 for a file without ids.
        n_cols = n_features if n_features is not None else max(self.max_col + 1, 1)
        self.meta = self.meta.with_(shape=(self.rows, n_cols))
        self.notes.append(f"ids {'zero' if self.base == 0 else 'one'}-based ({self.base_note})")

    def _converted(self):
        """Each block's entries sorted, based, checked against --vocab-size and cast."""
        n_features = self.svm.n_features
        dtype = VALUE_TYPES[self.meta.value_type]
        for block in self._decided():
            self._sidecar_rows(block)
            self.rows_in += block.keys.shape[1]  # as written: repeats count before they are summed
            keys, values = self._canonical(block)
            if self.base:
                keys[1] -= self.base  # the block's own arrays, not shared with anything
                if keys.shape[1] and keys[1].min() < 0:
                    row = int(keys[0, int(np.argmin(keys[1]))])
                    raise DataError(f"line {self.line_of(block, row)}: id 0 in a one-based file (--one-based)",
                                    path=self.name)
            if n_features is not None and keys.shape[1] and block.max_id - self.base >= n_features:
                at = int(np.argmax(keys[1] >= n_features))
                raise DataError(f"line {self.line_of(block, int(keys[0, at]))}: id {int(keys[1, at]) + self.base} "
                                f"is past --vocab-size {n_features} ({'zero' if self.base == 0 else 'one'}-based ids)",
                                path=self.name)
            values = cast_or_fail(values, dtype, lambda r, b=block, k=keys: f"line {self.line_of(b, int(k[0, r]))}",
                                  self.name)
            yield keys, values

    def commit(self):
        """The labels and qids are moved into place once the tensor is."""
        self.sidecars.commit()

    def close(self):
        self.sidecars.abort()
        self.text.close()


# ---------------------------------------------------------------------------------------------
# writing


class SvmlightWriter(RowLinesWriter):
    """``label [qid:Q] id:value ...`` per row, ids one-based unless --zero-based."""

    what = "svmlight"
    empty_line = b"0\n"

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        ex = example_options(opts, "svmlight", WRITE_OPTIONS, "writing")
        super().__init__(dst, meta, opts, ex)
        self.base = 0 if ex.zero_based else 1
        self.qids = self._sidecar(ex.query_id, "--query-id", "iu")

    def format_lines(self, start, end, counts, offsets, ids, values):
        (column,) = printable_columns(values, self.meta.value_type, "an svmlight file")
        words = pc.binary_join_element_wise(pc.cast(pa.array(ids + self.base), pa.string()),
                                            pc.cast(pa.array(column), pa.string()), ":")
        features = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), words), " ")
        head = self.labels_text(start, end)
        if head is None:
            head = pa.array(np.zeros(end - start, dtype=np.int8)).cast(pa.string())
        if self.qids is not None:
            qids = pc.cast(pa.array(np.asarray(self.qids[start:end], dtype=np.int64)), pa.string())
            head = pc.binary_join_element_wise(head, pc.binary_join_element_wise("qid", qids, ":"), " ")
        lines = pc.if_else(pa.array(counts > 0), pc.binary_join_element_wise(head, features, " "), head)
        if isinstance(self.labels, pa.Array):  # multilabel: a row of no labels starts with its features
            lines = pc.if_else(pc.equal(pc.binary_length(head), 0), features, lines)
            empty = pc.equal(pc.binary_length(lines), 0).to_numpy(zero_copy_only=False)
            if empty.any():
                raise DataError(f"row {start + int(np.argmax(empty))} has no labels and no entries, which svmlight "
                                "cannot write (scikit-learn skips an empty line)", path=self.out.dst)
        return lines
