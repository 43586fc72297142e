"""add: sparse + sparse (the engine's streaming merge join, sparse out) and sparse + dense (a
dense .npy out).

Value types: the operands' types are combined by NumPy promotion (``np.result_type``): int32 +
float32 gives float64, bool + int8 gives int8, and a tensor plus itself keeps its type.
TensorFlow instead requires equal types; promotion gives the same answer whenever they are.
"""

from __future__ import annotations

import numpy as np

from .. import _linalg, _widekeys
from .._memory import budget_of
from ..errors import UsageError
from ..format import TensorMeta, number_of, value_type_of_dtype
from ..io import (
    DenseSink,
    batch_keys,
    batch_values,
    check_inputs,
    is_npy,
    is_zero,
    known_shape,
    make_batch,
    open_input,
    open_operands,
    schema_of,
)
from ..stream.binary import (
    JoinOp,
    check_dense_shape,
    is_dense_path,
    numeric_dtype,
    open_dense,
    promote,
    require_zero_fill,
    run_join,
    scalar,
)
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import SummedSource, summed_if_promoted
from ..tensor import SparseTensor

# ---------------------------------------------------------------------------------------------
# sparse + sparse: the merge join's combine step


class Sum(JoinOp):
    """a + b at each coordinate of the union; ``thresh`` drops small sums where both sides have
    the coordinate (every output entry with ``prune``)."""

    what = "add"

    def __init__(self, thresh, prune: bool):
        self.thresh, self.prune = thresh, prune
        self.fused = _linalg.merge_add if thresh is None else None
        self.fused_wide = _widekeys.merge_add if thresh is None else None

    def out_fill(self, fa, fb, dtype):
        return _sum_fill(fa, fb, dtype)

    def combine(self, ga, gb, has_a, has_b, fa, fb):
        n = len(ga)
        out = ga + gb
        # A one-sided entry is copied as it is (TensorFlow's rule), so -0.0 + a zero fill stays -0.0.
        shape = (n,) + (1,) * (out.ndim - 1)
        if is_zero(fb) and not has_b.all():
            np.copyto(out, ga, where=~has_b.reshape(shape))
        if is_zero(fa) and not has_a.all():
            np.copyto(out, gb, where=~has_a.reshape(shape))
        if self.thresh is None:
            return out, None
        # Magnitudes in float64 for integers: np.abs of the most negative int is itself negative.
        below = np.abs(out.astype(np.float64) if out.dtype.kind in "iu" else out) < self.thresh
        if below.ndim > 1:
            below = below.reshape(n, -1).all(axis=1)
        keep = ~below if self.prune else ~(below & has_a & has_b)
        return out, keep


# ---------------------------------------------------------------------------------------------
# sparse + dense

def add_dense(sparse_path: str, dense_path: str, output, *, memory=None, progress=None) -> dict:
    """sparse + dense (either order) → dense .npy: the dense operand copied into the output's
    memory map in slabs, then the sparse rows added in place (duplicates accumulate)."""
    if not is_npy(output):
        raise UsageError("sparse + dense gives a dense array: name the output *.npy with -o", path=output)
    budget = budget_of(memory)
    dense = open_dense(dense_path)
    with open_input(sparse_path) as opened, known_shape(opened) as src:
        meta = src.meta
        numeric_dtype(meta, sparse_path, "add")
        require_zero_fill(meta, sparse_path, "sparse + dense add")
        check_dense_shape(meta.shape, dense.shape)
        dtype = promote(meta.dtype, dense.dtype)
        src = summed_if_promoted(src, dtype)  # duplicates sum in the value type, before the cast
        if progress:
            progress.set_total(meta.nnz)
        out_meta = meta.with_(value_type=value_type_of_dtype(dtype), fill_value=scalar(0, dtype))
        with DenseSink(output, out_meta, fill=out_meta.fill_value, budget=budget, initial=dense,
                       source=src.path) as sink:
            for keys, vals in src.iter_arrays(budget=budget):
                with np.errstate(all="ignore"):
                    sink.write(keys, vals)
                if progress:
                    progress.advance(keys.shape[1])
        nbytes = sink.nbytes
    return {"rows": meta.nnz, "shape": list(meta.shape), "dtype": str(dtype), "bytes": nbytes}


# ---------------------------------------------------------------------------------------------
# sparse + a number

class _Values(StreamOp):
    """Each stored value cast to the result type, plus ``number`` when given; the indices and
    their order pass through.  With a number the rows are unique (their duplicates were summed
    first)."""

    def __init__(self, dtype: np.dtype, *, number=None):
        self.dtype, self.number = dtype, number

    def plan(self, meta: TensorMeta) -> Plan:
        self.meta_in = meta
        self.meta = meta.with_(value_type=value_type_of_dtype(self.dtype), fill_value=scalar(0, self.dtype),
                               nnz=None, created_by=None)
        self.schema = schema_of(self.meta)
        return Plan(self.meta, unique_claim=True if self.number is not None else None)

    def map(self, batch, keys):
        values = batch_values(batch, self.meta_in).astype(self.dtype, copy=False)
        if self.number is not None:
            with np.errstate(all="ignore"):
                values = np.add(values, self.number, dtype=self.dtype)
        yield make_batch(batch_keys(batch, self.meta.sparse_ndim), values, self.meta, self.schema)


def _add_scalar(t, b, output, given, thresholded: bool, *, memory, tmp_dir=None, progress=None):
    """sparse + a number: the number added to every stored entry, after the rows sharing a
    coordinate are summed (in the tensor's value type, as the format sums them), since
    (a + x) + (b + x) is not (a + b) + x."""
    if b is not None:
        raise UsageError("give either a second operand or --scalar, not both")
    if given is None:
        raise UsageError("add needs a second operand (a tensor or a dense .npy) or --scalar NUMBER")
    if thresholded:
        raise UsageError("--thresh and --prune apply to sparse + sparse only, not to --scalar")
    number = number_of(given)
    if number is None:
        raise UsageError(f"--scalar must be a number (e.g. 2.5, -3, 1e-3, 2+1j), not {given!r}")
    with open_input(t) as opened, known_shape(opened, tmp_dir) as src:
        meta = src.meta
        numeric_dtype(meta, src.path, "add --scalar")
        require_zero_fill(meta, src.path, "add --scalar")
        # A number promotes as NumPy's Python scalars do (float32 + 2.5 stays float32), as mul's does.
        dtype = np.result_type(meta.dtype, number)
        if not meta.unique:
            src = SummedSource(src, tmp_dir=tmp_dir)
        sink = run(_Values(dtype, number=number), src, output, budget=memory, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        final = sink.final_meta
    return {"rows_in": meta.nnz, "rows_out": final.nnz, "dropped": 0, "shape": list(final.shape),
            "value_type": final.value_type, "canonical": final.canonical}


# ---------------------------------------------------------------------------------------------
# the command

def add(a: str, b: str | None = None, output: str | None = None, *, scalar=None, thresh=0, prune: bool = False,
        memory=None, tmp_dir: str | None = None, progress=None) -> dict:
    """Add two tensors (TensorFlow's sparse.add).

    sparse + sparse → sparse, canonical (row-major sorted, unique): a streaming merge join of the
    operands sorted row-major (an operand not sorted so is sorted externally first; duplicates
    within an operand are summed first).  Shapes must be equal.  ``thresh`` drops a sum whose
    magnitude is below it exactly where TensorFlow does: only at coordinates present in *both*
    operands (|a+b| < thresh is dropped; a NaN sum is kept); entries on one side only are always
    kept.  With ``prune`` the threshold applies to every output entry instead (the documented
    variant).  Explicit zeros are kept (thresh 0 keeps everything).  Non-zero fill values add too:
    a coordinate on one side only gets the other side's fill, and the output's fill is the sum.

    sparse + dense (a .npy, either order) → dense .npy at ``output``: shapes must be equal (no
    broadcasting); duplicates accumulate.  The sparse operand's fill value must be 0.

    sparse + a number (``scalar``, with no ``b``; a number or its text, as ``mul`` takes): the
    number is added to every stored entry, and positions not stored stay 0, so the result is
    as sparse as the input (not the dense ``T + x``).  Rows sharing a coordinate are summed
    first (sorting if they are not in order), since (a + x) + (b + x) is not (a + b) + x; the
    result is unique, in the input's order (row-major if it had to be sorted).  The fill value
    must be 0.  The value type is NumPy's promotion of the tensor's type and a Python number
    (float32 + 2.5 stays float32, int32 + 0.5 gives float64).

    Value types follow NumPy promotion (TensorFlow requires equal types; same result then).
    Integer sums wrap around.

    Memory: the sorts and the join stay within ``memory`` (half for each operand); a dense
    output is written through a memory map, so it may be larger than ``memory``.

    Examples
    --------
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "sum.parquet")
    >>> add("sample_data/matrix_a.parquet", "sample_data/matrix_b.parquet", out)["canonical"]
    True
    >>> add("sample_data/matrix_a.parquet", scalar=0.5).nnz
    600

    ``sptool.distributed.add`` runs sparse + sparse on a Dask cluster, writing a part directory.
    """
    budget = budget_of(memory)
    if scalar is not None or b is None:
        return _add_scalar(a, b, output, scalar, thresh or prune, memory=budget, tmp_dir=tmp_dir, progress=progress)
    check_inputs([a, b])
    dense_a, dense_b = is_dense_path(a), is_dense_path(b)
    if dense_a and dense_b:
        raise UsageError("both operands are dense (.npy); add needs at least one sparse tensor (use NumPy to add "
                         "two dense arrays)")
    if dense_a or dense_b:
        if thresh or prune:
            raise UsageError("--thresh and --prune apply to sparse + sparse only (sparse + dense is dense)")
        sparse_path, dense_path = (b, a) if dense_a else (a, b)
        return add_dense(sparse_path, dense_path, output, memory=budget, progress=progress)
    threshold = None
    if thresh or prune:
        try:
            threshold = float(thresh)
        except (TypeError, ValueError):
            raise UsageError(f"--thresh must be a real number, not {thresh!r}") from None
    with open_operands([a, b], tmp_dir) as (sa, sb):
        r = run_join(Sum(threshold, prune), sa, sb, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
    return SparseTensor.from_sink(r) if output is None else r


def _sum_fill(fa, fb, dtype):
    with np.errstate(all="ignore"):
        return scalar(np.asarray(fa).astype(dtype) + np.asarray(fb).astype(dtype), dtype)

