"""What every converter shares: options, the reader interface and value casting."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .._memory import Budget
from ..errors import DataError, UsageError
from ..format import VALUE_TYPES, TensorMeta, default_fill
from ..io import is_zero


@dataclass(frozen=True)
class Options:
    shape: tuple | None = None
    value_type: str | None = None
    fill_value: object = None
    index_base: int | None = None
    key: str | None = None  # --key: the matrix of an AnnData input (default X)
    budget: Budget | None = None  # resolved once by sptool.ops.convert
    examples: object = None  # rows.ExampleOptions: the options of svmlight and JSON lines
    tfrecord: object = None  # converters.tfrecord.TFRecordOptions, for TFRecord input or output
    table: object = None  # converters.table.TableOptions: plain-table columns and output
    rows: object = None  # converters.rowsparse.RowsOptions: a row-sparse input from two .npy files
    dense: bool = False  # --dense: a Matrix Market output in the dense 'array' format


def parse_shape(shape) -> tuple | None:
    """--shape as a tuple of ints, from "10,20,30" or a sequence."""
    if shape is None:
        return None
    if isinstance(shape, str):
        parts = [p for p in shape.replace(" ", "").split(",") if p]
        try:
            shape = [int(p) for p in parts]
        except ValueError:
            raise UsageError(f"--shape {shape!r} must be a comma-separated list of integers, e.g. 10,20,30") \
                from None
    shape = tuple(int(s) for s in shape)
    if not shape or any(s < 0 for s in shape):
        raise UsageError(f"--shape {list(shape)} must list one or more non-negative extents")
    if any(s > 2**63 - 1 for s in shape):
        raise UsageError(f"--shape {list(shape)} has an extent past 2^63-1, which no int64 index reaches")
    return shape


def integer_array(value, what: str, path: str) -> np.ndarray:
    """An index, pointer or shape array read from a file, as int64: integers only, since a float
    or text there is a damaged or foreign file, not something to cut to an int."""
    arr = np.asarray(value)
    if arr.size and arr.dtype.kind not in "iu":
        raise DataError(f"{what} must hold integers, not {arr.dtype} values", path=path)
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > np.iinfo(np.int64).max:
        raise DataError(f"{what} holds {int(arr.max())}, past the int64 indices can be", path=path)
    return arr.astype(np.int64)


def check_value_type(value_type: str | None) -> str | None:
    if value_type is not None and value_type not in VALUE_TYPES:
        raise UsageError(f"unknown value type {value_type!r}; use one of {', '.join(VALUE_TYPES)}")
    return value_type


def coerce_fill(fill, value_type: str):
    """The fill value as a Python value of ``value_type``, refusing values it cannot hold."""
    if fill is None:
        return default_fill(value_type)
    dtype = VALUE_TYPES[value_type]
    if value_type in ("string", "binary"):
        return fill
    try:
        if value_type == "bool":
            if isinstance(fill, str) and fill.lower() in ("true", "false"):
                return fill.lower() == "true"
            out = bool(fill)
            if out != fill:
                raise ValueError
            return out
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            out = int(fill) if not isinstance(fill, float) or fill.is_integer() else None
            if out is None or not info.min <= out <= info.max:
                raise ValueError
            return out
        if dtype.kind == "f":
            if isinstance(fill, complex):
                if fill.imag != 0:
                    raise ValueError
                fill = fill.real
            return float(fill)
        return complex(fill)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"--fill-value {fill!r} is not a {value_type} value") from None


def check_zero_fill(meta: TensorMeta, fmt: str):
    if not is_zero(meta.fill_value) and meta.fill_value is not False:
        raise UsageError(
            f"the tensor's fill value is {meta.fill_value!r}, but .{fmt} files have no fill value "
            "(absent entries are zero), so the conversion would change the tensor; convert to .npy, "
            "or change the fill value first"
        )


def check_not_hybrid(meta: TensorMeta, fmt: str):
    if meta.hybrid:
        raise UsageError(
            f"the tensor has dense dimensions {list(meta.dense_shape)} (sparse_ndim {meta.sparse_ndim} of "
            f"{meta.ndim}); .{fmt} stores one scalar per coordinate; convert to .npy or sptool instead"
        )


class Reader:
    """A converter's input: metadata known up front, then batches of (keys (K, n), values).

    ``meta.shape`` entries may be None (inferred as max + 1 at the end) and ``meta.nnz`` is
    None unless known.  ``complete`` says both are final before the first batch, which the
    writers that need a header (.mtx) or a shape (.npy) rely on.  ``sort_order`` in ``meta``
    and ``unique_claim`` are claims for the sink to verify.
    """

    name = ""
    meta: TensorMeta
    unique_claim: bool | None = False
    complete = False
    rows_in = 0

    def batches(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        raise NotImplementedError

    def commit(self):
        """Called once the output is in place: a reader's own side outputs (labels) follow it."""

    def close(self):
        pass


class CastError(Exception):
    def __init__(self, row: int, message: str):
        self.row = row
        super().__init__(message)


def cast_values(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """values as ``dtype``; CastError(row) for the first value the type cannot hold.

    Narrowing to an integer type must be exact; float and complex targets round as usual
    (a finite value that overflows to infinity is an error); bool is ``value != 0``.
    """
    dtype = np.dtype(dtype)
    if values.dtype == dtype:
        return values
    if dtype.kind in "OUS":
        raise UsageError(f"numbers cannot be converted to {dtype}")
    if values.dtype.kind in "OUS":
        raise UsageError(f"{values.dtype} values cannot be converted to {dtype}")
    src = values
    if dtype == np.bool_:
        return src != 0
    if src.dtype.kind == "c" and dtype.kind != "c":
        ok = src.imag == 0
        if not ok.all():
            row, value = _first_bad(ok, src)
            raise CastError(row, f"value {value} has an imaginary part; {dtype} cannot hold it")
        src = src.real
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if src.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(src) & (src == np.trunc(src)) & (src >= float(info.min)) & \
                    (src < float(info.max) + 1.0)
        elif src.dtype.kind in "iu":
            ok = (src >= info.min) & (src <= info.max)
        else:
            ok = None
        if ok is not None and not ok.all():
            row, value = _first_bad(ok, src)
            raise CastError(row, f"value {value} is not a {dtype} value")
        return src.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        out = src.astype(dtype)
    if dtype.kind == "f" and src.dtype.kind in "fiu":
        ok = ~(np.isinf(out) & np.isfinite(src))
        if not ok.all():
            row, value = _first_bad(ok, src)
            raise CastError(row, f"value {value} overflows {dtype}")
    return out


def _first_bad(ok: np.ndarray, src: np.ndarray) -> tuple[int, object]:
    """(row, value) of the first False in ``ok`` (rows may hold dense blocks)."""
    flat = int(np.argmin(ok.reshape(-1)))
    block = max(1, ok.size // max(len(ok), 1))
    return flat // block, src.reshape(-1)[flat]


def cast_or_fail(values: np.ndarray, dtype, where, path: str) -> np.ndarray:
    """cast_values, turning a CastError into a DataError; ``where(row)`` names the row."""
    try:
        return cast_values(values, dtype)
    except CastError as e:
        raise DataError(f"{where(e.row)}: {e}", path=path) from None
