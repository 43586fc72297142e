"""map: apply an elementwise function to the stored values (TensorFlow's sparse map_values)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._memory import budget_of
from ..errors import FormatError, UsageError
from ..format import value_type_of_dtype
from ..io import batch_values, known_shape, open_input, schema_of, values_array
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import SummedSource
from ..tensor import SparseTensor

# name -> NumPy function.  Each maps 0 to 0 except the last row (exp ... logical_not); the
# fill check computes f(fill) itself.
FUNCTIONS = {
    "abs": np.absolute, "neg": np.negative, "sign": np.sign, "square": np.square, "sqrt": np.sqrt,
    "cbrt": np.cbrt, "expm1": np.expm1, "log1p": np.log1p, "sin": np.sin, "tan": np.tan, "tanh": np.tanh,
    "sinh": np.sinh, "arcsin": np.arcsin, "arctan": np.arctan, "arcsinh": np.arcsinh, "arctanh": np.arctanh,
    "ceil": np.ceil, "floor": np.floor, "round": np.round, "rint": np.rint, "trunc": np.trunc,
    "conj": np.conjugate, "real": np.real, "imag": np.imag, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg,
    "exp": np.exp, "cos": np.cos, "cosh": np.cosh, "log": np.log, "arccos": np.arccos,
    "reciprocal": lambda x: np.divide(1, x), "logical_not": np.logical_not,
}
# f(a) + f(b) == f(a + b): duplicates may stay as they are.
ADDITIVE = ("neg", "conj", "real", "imag")


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    try:
        eq = bool(a == b)
    except (TypeError, ValueError):
        return False
    return eq or bool(np.all(np.isnan(a)) and np.all(np.isnan(b))) if a.dtype.kind in "fc" else eq


def _result_type(fn, dtype: np.dtype, name: str, value_type: str) -> np.dtype:
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(fn(np.zeros(1, dtype=dtype))).dtype
        value_type_of_dtype(out)
    except (TypeError, ValueError, FormatError):
        raise UsageError(f"map --fn {name} does not apply to {value_type} values") from None
    return out


def map_values(path: str, output: str | None = None, *, fn: str, allow_fill_change: bool = False, memory=None,
               tmp_dir: str | None = None, progress=None) -> dict:
    """Apply ``fn`` to every stored value (TensorFlow's map_values): indices, order and
    uniqueness stay; the value type follows NumPy (sqrt of integers is float64, abs of complex
    is real).  Explicitly stored zeros are mapped too; cells with no stored entry are not.

    ``fn`` is one of FUNCTIONS.  The result must keep the meaning of unstored cells: when
    f(fill value) differs from the fill value (exp, cos, log, ... of a 0 fill) the call is
    refused unless ``allow_fill_change``, which makes f(fill value) the output's fill value,
    so the result is still f applied to every cell.

    Rows sharing a coordinate hold a sum, and f(a) + f(b) is not f(a + b) for most f: unless
    ``fn`` is additive (neg, conj, real, imag) the duplicates of a non-unique input are summed
    first, through the external sort when the rows are not fully sorted, and the output is
    then unique.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "m.parquet")
    >>> map_values("sample_data/tensor3d.parquet", out, fn="abs")["value_type"]
    'float64'
    """
    budget = budget_of(memory)
    if fn not in FUNCTIONS:
        raise UsageError(f"--fn must be one of {', '.join(FUNCTIONS)}, not {fn!r}")
    func = FUNCTIONS[fn]
    with open_input(path) as opened, known_shape(opened, tmp_dir) as src:
        meta = src.meta
        if meta.value_type in ("string", "binary"):
            raise UsageError(f"map needs numeric values, not {meta.value_type}")
        out_dtype = _result_type(func, meta.dtype, fn, meta.value_type)
        out_vt = value_type_of_dtype(out_dtype)
        fill_in = np.asarray(meta.fill_value, dtype=meta.dtype)
        with np.errstate(all="ignore"):
            mapped_fill = np.asarray(func(fill_in)).astype(out_dtype)
        common = np.result_type(meta.dtype, out_dtype)
        if _same(mapped_fill.astype(common), fill_in.astype(common)):
            kept = fill_in.real if fill_in.dtype.kind == "c" and out_dtype.kind != "c" else fill_in
            fill = kept.astype(out_dtype).item()  # the fill as it was (keeps 0.0 rather than -0.0)
        elif allow_fill_change:
            fill = mapped_fill.item()
        else:
            raise UsageError(f"--fn {fn} maps the fill value {meta.fill_value!r} to {mapped_fill.item()!r}, which "
                             "would change every unstored cell; pass --allow-fill-change to make that the output's "
                             "fill value")
        if fn not in ADDITIVE and not meta.unique:
            # f(a) + f(b) != f(a + b): duplicates are summed (in the value type) before f is applied.
            src = SummedSource(src, tmp_dir=tmp_dir)
        sink = run(MapValues(func, out_dtype, out_vt, fill), src, output, budget=budget, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows_in": meta.nnz, "rows_out": final.nnz, "value_type": final.value_type,
            "fill_value": final.fill_value, "unique": final.unique, "sort_order": list(final.sort_order)}


class MapValues(StreamOp):
    """f applied to every stored value, the indices unchanged."""

    def __init__(self, func, out_dtype: np.dtype, value_type: str, fill):
        self.func, self.out_dtype, self.value_type, self.fill = func, out_dtype, value_type, fill

    def plan(self, meta) -> Plan:
        self.meta, self.K = meta, meta.sparse_ndim
        self.out_meta = meta.with_(value_type=self.value_type, fill_value=self.fill, nnz=None, created_by=None)
        self.schema = schema_of(self.out_meta)
        # Row for row: the sink's errors (bounds included) name the input and its row.
        return Plan(self.out_meta, unique_claim=True if self.out_meta.unique else None, background=True,
                    row_for_row=True)

    def map(self, batch, keys):
        vals = _apply(self.func, batch_values(batch, self.meta), self.out_dtype)
        cols = list(batch.columns[: self.K]) + [values_array(vals, self.out_meta)]
        yield pa.RecordBatch.from_arrays(cols, schema=self.schema)


def _apply(func, values: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(func(values)).astype(out_dtype, copy=False)
