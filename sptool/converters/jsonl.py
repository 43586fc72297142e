"""JSON lines of examples: ``{"ids": [...], "values": [...], "label": ...}`` per line, row r of
a [rows, V] matrix (keys named by --ids, --values and --label-key; other keys are ignored).

Each non-blank line is a row, its ids 0-based columns with the value at the same place;
unsorted or repeated ids are sorted and summed (the format's rule).  V is --vocab-size, or the
largest id + 1.  Labels (numbers) go to --labels when asked for.

Reading: blocks of whole lines (the text machinery's OpenedText: compressed input, stdin) are
parsed by pyarrow's JSON reader against a fixed schema, on the parse pool; a block it refuses
is read again line by line with Python's json module, only to name the line and the problem.
Writing: one object per row, ids and values printed by Arrow (shortest round-trip floats;
NaN and infinities as Python's json writes them).
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from ..errors import DataError, UsageError
from ..format import VALUE_TYPES, TensorMeta
from ..io import GrowingNpy, SideOutputs
from .common import Options, Reader, cast_or_fail, coerce_fill
from .rows import RowLinesWriter, data_line, example_options, sorted_and_summed
from .text import OpenedText, chunk_bytes, parsed_blocks, printable_columns

READ_OPTIONS = {"n_features", "labels", "ids_key", "values_key", "label_key"}
WRITE_OPTIONS = {"labels", "ids_key", "values_key", "label_key"}


def _parse(data: bytes, schema: pa.Schema):
    try:
        return pajson.read_json(io.BytesIO(data), read_options=pajson.ReadOptions(use_threads=False,
                                                                                  block_size=max(len(data), 1) + 1),
                                parse_options=pajson.ParseOptions(explicit_schema=schema,
                                                                  unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid as e:
        return e


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class JsonlReader(Reader):
    fmt = "jsonl"
    unique_claim = True

    def __init__(self, path: str, opts: Options):
        ex = self.ex = example_options(opts, "JSON lines", READ_OPTIONS, "reading")
        vt = opts.value_type or "float64"
        if vt in ("string", "binary") or vt.startswith("complex"):
            raise UsageError(f"JSON lines values are real numbers here; --dtype {vt} cannot hold them")
        if ex.n_features is not None and ex.n_features < 1:
            raise UsageError(f"--vocab-size must be 1 or more, not {ex.n_features}")
        if ex.labels is not None and not ex.labels.endswith(".npy"):
            raise UsageError("--labels must name a .npy file for JSON lines", path=ex.labels)
        if ex.ids_key == ex.values_key:
            raise UsageError(f"--ids and --values both name the key {ex.ids_key!r}")
        self.opts = opts
        self.text = OpenedText(path)
        self.name = self.text.name
        self.block = chunk_bytes(opts.budget)
        fields = [(ex.ids_key, pa.list_(pa.int64())), (ex.values_key, pa.list_(pa.float64()))]
        if ex.labels is not None:
            fields.append((ex.label_key, pa.float64()))
        self.schema = pa.schema(fields)
        self.meta = TensorMeta(shape=(None, ex.n_features), sparse_ndim=2, value_type=vt,
                               fill_value=coerce_fill(opts.fill_value, vt), sort_order=(0, 1), unique=False)
        self.rows = 0
        self.max_col = -1
        self.label_out = None
        self.sides = SideOutputs()

    def batches(self):
        ex = self.ex
        dtype = VALUE_TYPES[self.meta.value_type]
        if ex.labels is not None:
            self.label_out = self.sides.add(GrowingNpy(ex.labels, np.float64))
        parse = lambda d: _parse(d, self.schema)  # noqa: E731
        for data, table in parsed_blocks(self.text, self.block, parse, self.opts.budget.workers):
            first = self.text.line
            if isinstance(table, Exception):
                raise DataError(self._locate(data, first, table), path=self.name)
            self.text.line += data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            keys, values = self._entries(table, data, first)
            values = cast_or_fail(values, dtype, lambda r, k=keys, d=data, f=first: f"line {self._line(d, f, k, r)}",
                                  self.name)
            if keys.shape[1]:
                self.max_col = max(self.max_col, int(keys[1].max()))
            self.rows += table.num_rows
            yield keys, values
        n_features = ex.n_features
        self.meta = self.meta.with_(shape=(self.rows, n_features if n_features is not None else self.max_col + 1))

    def _line(self, data: bytes, first: int, keys: np.ndarray, entry: int) -> int:
        return data_line(data, first, int(keys[0, entry]) - self.rows)

    def _entries(self, table: pa.Table, data: bytes, first: int):
        ex = self.ex
        ids_col, vals_col = table.column(ex.ids_key).combine_chunks(), table.column(ex.values_key).combine_chunks()
        for col, key in ((ids_col, ex.ids_key), (vals_col, ex.values_key)):
            if col.null_count:
                row = int(np.argmax(col.is_null().to_numpy(zero_copy_only=False)))
                raise DataError(f"line {data_line(data, first, row)}: no {key!r} list", path=self.name)
        counts = pc.list_value_length(ids_col).to_numpy()
        if not np.array_equal(counts, pc.list_value_length(vals_col).to_numpy()):
            row = int(np.argmax(counts != pc.list_value_length(vals_col).to_numpy()))
            raise DataError(f"line {data_line(data, first, row)}: {ex.ids_key!r} and {ex.values_key!r} differ in "
                            "length", path=self.name)
        ids = pc.list_flatten(ids_col).to_numpy(zero_copy_only=False)
        values = pc.list_flatten(vals_col).to_numpy(zero_copy_only=False)
        if len(ids) and (pc.list_flatten(ids_col).null_count or pc.list_flatten(vals_col).null_count):
            raise DataError(self._locate(data, first, None), path=self.name)
        self.rows_in += len(ids)  # as written: repeats count before they are summed
        keys = np.empty((2, len(ids)), dtype=np.int64)
        keys[0] = np.repeat(np.arange(self.rows, self.rows + table.num_rows, dtype=np.int64), counts)
        keys[1] = ids
        if len(ids):
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or (ex.n_features is not None and high >= ex.n_features):
                at = int(np.argmax(ids < 0)) if low < 0 else int(np.argmax(ids >= ex.n_features))
                why = "is negative" if low < 0 else f"is past --vocab-size {ex.n_features}"
                raise DataError(f"line {self._line(data, first, keys, at)}: id {int(ids[at])} {why}", path=self.name)
            same = keys[0, 1:] == keys[0, :-1]
            if np.any(keys[1, 1:][same] <= keys[1, :-1][same]):
                keys, values = sorted_and_summed(keys, values)
        if self.label_out is not None:
            labels = table.column(ex.label_key).combine_chunks()
            if labels.null_count:
                row = int(np.argmax(labels.is_null().to_numpy(zero_copy_only=False)))
                raise DataError(f"line {data_line(data, first, row)}: no {ex.label_key!r} number", path=self.name)
            self.label_out.append(labels.to_numpy(zero_copy_only=False))
        return keys, values

    def _locate(self, data: bytes, first: int, error: Exception | None) -> str:
        """The first line Python's json module or the schema refuses, and why."""
        ex = self.ex
        for i, raw in enumerate(data.split(b"\n")):
            if not raw.strip():
                continue
            line = first + i
            try:
                obj = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                return f"line {line}: not JSON ({e})"
            if not isinstance(obj, dict):
                return f"line {line}: not a JSON object"
            for key, ok, what in ((ex.ids_key, _whole, "integers"), (ex.values_key, _number, "numbers")):
                items = obj.get(key)
                if not isinstance(items, list):
                    return f"line {line}: no {key!r} list"
                bad = next((x for x in items if not ok(x) or (what == "integers" and not -2**63 <= x < 2**63)), None)
                if bad is not None:
                    return f"line {line}: {key!r} holds {json.dumps(bad)}; it must hold {what} (64-bit for ids)"
            if self.label_out is not None and not _number(obj.get(ex.label_key)):
                return f"line {line}: no {ex.label_key!r} number"
        last = first + data.count(b"\n")
        return f"lines {first}-{last}: {error}"

    def commit(self):
        self.sides.commit()

    def close(self):
        self.sides.abort()
        self.text.close()


class JsonlWriter(RowLinesWriter):
    """``{"ids": [...], "values": [...], "label": ...}`` per row (the label only with --labels)."""

    what = "JSON lines"
    empty_line = b'{"ids": [], "values": []}\n'

    def __init__(self, dst: str, meta: TensorMeta, opts: Options, unique_claim=None):
        ex = example_options(opts, "JSON lines", WRITE_OPTIONS, "writing")
        super().__init__(dst, meta, opts, ex)
        self.keys = [json.dumps(k) for k in (ex.ids_key, ex.values_key, ex.label_key)]

    def format_lines(self, start, end, counts, offsets, ids, values):
        (column,) = printable_columns(values, self.meta.value_type, "a JSON lines file")
        text = pc.cast(pa.array(column), pa.string())
        if column.dtype.kind == "f":
            # Arrow prints -0.0 as "-0", which JSON readers take for the integer 0.
            text = pc.if_else(pc.equal(text, "-0"), "-0.0", text)
            if not np.isfinite(column).all():
                names = np.where(np.isnan(column), "NaN", np.where(column > 0, "Infinity", "-Infinity"))
                text = pc.if_else(pa.array(np.isfinite(column)), text, pa.array(names))
        listed = pa.ListArray.from_arrays(pa.array(offsets), pc.cast(pa.array(ids), pa.string()))
        id_text = pc.binary_join(listed, ", ")
        value_text = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), text), ", ")
        ids_key, values_key, label_key = self.keys
        parts = [pa.scalar("{" + ids_key + ": ["), id_text, pa.scalar("], " + values_key + ": ["), value_text]
        labels = self.labels_text(start, end)
        if labels is not None:
            labels = self._finite_labels(start, end, labels)
            parts += [pa.scalar("], " + label_key + ": "), labels, pa.scalar("}")]
        else:
            parts.append(pa.scalar("]}"))
        return pc.binary_join_element_wise(*parts, "")

    def _finite_labels(self, start: int, end: int, labels: pa.Array) -> pa.Array:
        values = np.asarray(self.labels[start:end], dtype=np.float64)
        if np.isfinite(values).all():
            return labels
        names = [json.dumps(float(v)) if not math.isfinite(v) else "" for v in values]
        return pc.if_else(pa.array(np.isfinite(values)), labels, pa.array(names))
