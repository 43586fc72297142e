"""reduce: sum, max, min, prod, mean or count over some axes (TensorFlow's reduce_sum / reduce_max).

The rows are reduced in one streaming pass whenever the input's order allows it: rows arrive
grouped by the leading kept dimensions of the sort order (the *prefix*), and within such a
group the other kept dimensions (the *rest*) are accumulated into one slot per coordinate, a
dense array of prod(rest extents) slots (compiled kernels in sptool/_reduce.pyx).  When that
array would not fit in a slice of the memory budget, the rows go through the external sort by
(kept dims, reduced dims) first and are reduced as runs of equal kept coordinates.

Duplicate coordinates are summed before any other reduction sees them (the format's rule):
max, min, prod, mean and count work on the logical tensor, so two rows at one coordinate
count once, with their sum as the value.
"""

from __future__ import annotations

import math

import numpy as np

from .._memory import Budget, budget_of
from .._messages import out_of_bounds
from ..errors import DataError, UsageError
from ..format import value_type_of_dtype
from ..io import (
    ClosesOrAborts,
    DenseSink,
    batch_columns,
    batch_keys,
    is_npy,
    known_shape,
    open_input,
    open_sink,
    output_kind,
)
from ..stream.axes import normalize_axes
from ..stream.bounds import vouched_maxes
from ..stream.duplicates import sum_duplicates
from ..stream.engine import Plan, StreamOp, run
from ..stream.group_reduce import GroupReducer
from ..stream.order import ClaimCheck, checked_batches, ordered_batches
from ..stream.reorder import Combine
from ..stream.values import _UFUNC, as_kernel, from_kernel, kernel_dtype, values_of_array
from ..tensor import SparseTensor

OPS = ("sum", "max", "min", "prod", "mean", "count")


# ---------------------------------------------------------------------------------------------
# the plan: axes, shapes, dtypes

def check_op(op: str, meta) -> None:
    if op not in OPS:
        raise UsageError(f"--op must be one of {', '.join(OPS)}, not {op!r}")
    vt = meta.value_type
    if vt in ("string", "binary") and op != "count":
        raise UsageError(f"reduce --op {op} needs numbers; {vt} values can only be counted (--op count)")
    if vt.startswith("complex") and op in ("max", "min"):
        raise UsageError(f"reduce --op {op} needs ordered values; {vt} values have no order")
    if vt == "bool" and op in ("sum", "prod", "mean"):
        raise UsageError(f"reduce --op {op} needs numbers; for bool values use max (any), min (all) or count")


def result_dtype(meta, op: str) -> np.dtype:
    if op == "count":
        return np.dtype(np.int64)
    if op == "mean" and meta.dtype.kind in "iu":
        return np.dtype(np.float64)
    return meta.dtype


class Axes:
    """The axes reduced and kept, and the result's shape, from the input's metadata."""

    def __init__(self, meta, op, axis, keepdims):
        N, K = meta.ndim, meta.sparse_ndim
        if axis is None:
            axes = set(range(N))
        else:
            listed = normalize_axes([axis] if np.isscalar(axis) else axis, N, "axis")
            if len(set(listed)) != len(listed):
                raise UsageError(f"--axis repeats a dimension: {list(axis)} (as in NumPy, each axis once)")
            axes = set(listed)
        self.axes = sorted(axes)
        self.kept = [d for d in range(K) if d not in axes]
        self.reduced = [d for d in range(K) if d in axes]
        self.dense_reduced = [d - K for d in self.axes if d >= K]
        self.keepdims = keepdims
        self.scalar = len(axes) == N and not keepdims
        shape = []
        for d in range(N):
            if d in axes:
                if keepdims:
                    shape.append(1)
            else:
                shape.append(int(meta.shape[d]))
        self.shape = tuple(shape)
        self.K_out = K if keepdims else len(self.kept)
        dense = list(meta.dense_shape)
        self.dense_in = tuple(dense)
        self.dense_out = tuple(1 if j in self.dense_reduced else e for j, e in enumerate(dense)
                               if keepdims or j not in self.dense_reduced)
        self.dense_factor = math.prod(dense[j] for j in self.dense_reduced)
        names = meta.dimension_names
        self.names = None if names is None else tuple(n for d, n in enumerate(names) if keepdims or d not in axes)


def empty_value_for(empty_value, op, meta, dtype: np.dtype):
    """The value of result cells that no stored entry reaches, in the result type."""
    if empty_value is None:
        value = 0 if op == "count" else meta.fill_value
    else:
        value = empty_value
    try:
        with np.errstate(all="ignore"):
            cast = np.asarray(value).astype(dtype)
        back = cast.astype(np.asarray(value).dtype) if not isinstance(value, str) else None
    except (ValueError, TypeError, OverflowError):
        cast, back = None, None
    ok = cast is not None and back is not None and (
        back == np.asarray(value) or (np.asarray(value).dtype.kind in "fc" and np.isnan(np.asarray(value)).all()
                                      and np.isnan(cast).all()))
    if not ok:
        what = "--empty-value" if empty_value is not None else "the fill value"
        raise UsageError(f"{what} {value!r} does not fit the result type {dtype}")
    return cast.reshape(()).item()


# ---------------------------------------------------------------------------------------------

def reduce(path: str, output: str | None = None, *, op: str, axis=None, keepdims: bool = False,
           empty_value=None, memory=None, tmp_dir: str | None = None, progress=None):
    """Reduce a tensor over ``axis`` (an int or a list; None: all axes) with ``op``: sum, max,
    min, prod, mean or count (TensorFlow's reduce_sum / reduce_max, plus the others).

    Every op sees the stored entries only (the fill value takes no part; TensorFlow's fill is
    0), after duplicates are summed: max, min and prod run over the distinct stored
    coordinates, ``count`` counts them, ``mean`` is sum / count.  sum and prod keep the value
    type (integers wrap), mean of integers is float64, count is int64; max and min need real
    values.  Reducing a dense dimension of a hybrid tensor reduces inside the blocks.

    Output: ``output`` ending in .npy gets the dense result (TensorFlow's default), where
    cells no entry reaches hold ``empty_value`` (default: the tensor's fill value, 0 for
    count); any other output gets a sparse tensor with one entry per non-empty group
    (TensorFlow's output_is_sparse), canonical, with ``empty_value`` as its fill value.  With
    every axis reduced and no ``keepdims`` the result is a scalar, returned (and no output is
    written unless it is a .npy); otherwise a summary dict is returned.

    Memory: one streaming pass when the kept dimensions lead the input's sort order, or when
    the rest of them have few enough coordinates to accumulate densely within ``memory``;
    otherwise an external sort (spilling to ``tmp_dir``) first.

    Examples
    --------
    >>> reduce("sample_data/unsorted.parquet", op="count")  # distinct stored coordinates
    100
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "r.parquet")
    >>> reduce("sample_data/tensor3d.parquet", out, op="max", axis=[0, -1])["shape"]
    [30]

    ``sptool.distributed.reduce`` runs it on a Dask cluster, to a sparse part directory.
    """
    dense_out = is_npy(output)
    if output == "-" and (axis is None and not keepdims):
        output = None  # a scalar result goes to stdout as text
    if output is not None and not dense_out and output != "-":
        output_kind(output)
    with open_input(path) as opened, known_shape(opened, tmp_dir) as src:
        return _reduce_source(src, output, dense_out, op=op, axis=axis, keepdims=keepdims, empty_value=empty_value,
                              budget=budget_of(memory), tmp_dir=tmp_dir, progress=progress)


def _reduce_source(src, output, dense_out: bool, *, op, axis, keepdims, empty_value, budget: Budget, tmp_dir,
                   progress):
    check_op(op, src.meta)
    if op == "mean" and kernel_dtype(src.meta.dtype, op) != kernel_dtype(src.meta.dtype):
        # The mean of integers is taken in float64: sum their duplicates in the value type first.
        from ..stream.order import summed_if_promoted

        src = summed_if_promoted(src, kernel_dtype(src.meta.dtype, op), tmp_dir=tmp_dir)
    step = Reduction(op, axis, keepdims, empty_value, dense_out, output is not None)
    sink = run(step, src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
    axes = step.axes
    if axes.scalar and not dense_out:
        return sink.value
    if output is None:
        return SparseTensor.from_sink(sink)
    return {"op": op, "axes": axes.axes, "rows_in": src.meta.nnz, "rows_out": step.rows_out,
            "shape": list(axes.shape), "value_type": value_type_of_dtype(step.dtype), "output": output}


class Reduction(StreamOp):
    """reduce as the engine runs it: the plan picks the axes, the result type and the output;
    the read feeds the rows to a GroupReducer (in one streaming pass, or through the external
    sort first: see the module docstring); each reduced piece is mapped to output entries."""

    def __init__(self, op: str, axis, keepdims: bool, empty_value, dense_out: bool, writes: bool):
        self.op, self.axis, self.keepdims, self.empty_value, self.dense_out = op, axis, keepdims, empty_value, dense_out
        self.writes = writes  # to an output (not returned): a scalar cannot be
        self.rows_out = 0
        self.vouches = False  # the sink takes each piece's maxes instead of checking its rows

    def plan(self, meta) -> Plan:
        op = self.op
        self.axes = axes = Axes(meta, op, self.axis, self.keepdims)
        self.dtype = dtype = result_dtype(meta, op)
        self.kdtype = kernel_dtype(meta.dtype, op) if op != "count" else np.dtype(np.uint8)
        self.empty = empty = empty_value_for(self.empty_value, op, meta, dtype)
        if axes.scalar and not self.dense_out and self.writes:
            raise UsageError("reducing every dimension gives a scalar, which is printed (or returned); "
                             "omit -o, write a .npy, or pass --keepdims")
        if not axes.scalar and axes.K_out == 0 and not self.dense_out:
            raise UsageError("reducing every sparse dimension leaves no sparse dimension for a sparse result; "
                             "write a .npy or pass --keepdims")
        out_meta = meta.with_(shape=axes.shape, sparse_ndim=axes.K_out, value_type=value_type_of_dtype(dtype),
                              fill_value=empty, nnz=None, sort_order=tuple(range(axes.K_out)), unique=True,
                              iso=False, dimension_names=axes.names, created_by=None)
        scalar = axes.scalar and not self.dense_out
        return Plan(out_meta, unique_claim=True, pieces=True, background=not scalar)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        if self.axes.scalar and not self.dense_out:
            return _ScalarWriter(self.empty)
        if self.dense_out:
            return DenseSink(output, plan.meta.with_(dimension_names=None), fill=self.empty, budget=budget)
        # The reducer's pieces are row-major, unique and within the shape by construction: one
        # entry per group, the groups in the order of the rows that _reduced checks as they pass.
        self.vouches = True
        return open_sink(output, plan.meta, unique_claim=True, budget=budget)

    def read(self, src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        for piece in _reduced(src, self, budget, tmp_dir, progress):
            yield piece, None

    def map(self, piece, keys):
        yield self._entries(piece)

    def finish(self):
        for piece in self.reducer.finish():
            yield self._entries(piece)

    def _entries(self, piece):
        keys, vals = _finish_piece(piece, self.op, self.axes, self.dtype, self.kdtype)
        self.rows_out += keys.shape[1]
        return (keys, vals, vouched_maxes(keys)) if self.vouches else (keys, vals)


class Reduce:
    """reduce part by part, to a sparse result (a cluster's partial reductions): each part is
    reduced on its own (``map_part``), then the partials' entries at one kept coordinate are
    combined through the engine's sort (``combine``): summed for sum and count, and by the op
    itself for max, min and prod.

    sum splits this way for any parts: it is linear in the entries, so a coordinate whose
    duplicates lie on several parts still adds up.  max, min, prod and count see the logical
    tensor (duplicates summed first), which needs each coordinate's rows on one part: they split
    when the caller promises the dataset's rows are unique (``unique``: known from how the
    dataset was made, or from validate --deep; a part's own claim covers that part only).  A
    mean of partial means is not the mean: reduce sum and count part by part and divide."""

    def __init__(self, op: str, axis=None, keepdims: bool = False, empty_value=None, *, unique: bool = False):
        self.op, self.axis, self.keepdims, self.empty_value = op, axis, keepdims, empty_value
        self.unique = unique

    def check(self, meta) -> None:
        check_op(self.op, meta)
        if self.op == "mean" or (self.op != "sum" and not self.unique):
            raise UsageError(f"reduce --op {self.op} does not run part by part: it needs each coordinate's "
                             "duplicates on one part (only sum adds up across parts)")
        plan = Axes(meta, self.op, self.axis, self.keepdims)
        if plan.scalar or plan.K_out == 0:
            raise UsageError("part by part, reduce writes a sparse result: keep a sparse dimension or pass --keepdims")

    def partial(self, meta) -> Reduction:
        return Reduction(self.op, self.axis, self.keepdims, self.empty_value, dense_out=False, writes=True)

    def map_part(self, src, output, *, budget: Budget, tmp_dir=None) -> None:
        """One part's partial reduction, written to ``output``."""
        self.check(src.meta)
        run(self.partial(src.meta), src, output, budget=budget, tmp_dir=tmp_dir)

    def combine(self, meta) -> Combine:
        return Combine("sum" if self.op in ("sum", "count") else self.op)


def _reduced(src, step: Reduction, budget: Budget, tmp_dir, progress):
    """The GroupReducer's pieces for every row of ``src`` (``step.reducer``, whose ``finish``
    gives the rest): in one pass when the order allows, else through the external sort."""
    path, meta, plan, op, kdtype = src.path, src.meta, step.axes, step.op, step.kdtype
    K = meta.sparse_ndim
    m = 0 if op == "count" else max(meta.block_size, 1) if meta.hybrid else 1
    kept = plan.kept
    order = tuple(meta.sort_order)
    prefix = []
    for a, b in zip(order, kept):
        if a != b:
            break
        prefix.append(a)
    rest = kept[len(prefix):]
    E = math.prod(int(meta.shape[d]) for d in rest)
    # The other ops see each coordinate once: a claim of unique rows is trusted only in one pass in
    # a full claimed order, and checked there as the rows pass (a file claiming unique rows but
    # holding a repeat gave the max of the repeats); otherwise duplicates are summed first.
    dedup = op != "sum" and (not meta.unique or len(order) != K)
    single = E * (m * kdtype.itemsize + 16) <= budget.total // 8 and (not dedup or len(order) == K)
    if not single:
        prefix, rest = kept, []
        dedup = op != "sum"
    # What the one pass relies on is checked as the rows pass, counted from the input's first
    # (a piece of a cluster's job counts from its start): the claimed order's leading kept
    # dimensions (the groups end where they change), the whole claimed order before summing
    # duplicates, and uniqueness where it is trusted.  A lying file gave an internal error, or
    # the max of unsummed duplicates.
    check = ClaimCheck(meta, order, not dedup, path=path) if single and (dedup or op != "sum") else None
    if check is not None:
        check.tracker.offset = src.start
    dims = list(prefix) + list(rest)
    bounds = [int(meta.shape[d]) for d in dims]
    reducer = step.reducer = GroupReducer(op, len(prefix), [meta.shape[d] for d in rest], m, kdtype)
    is_bool = meta.value_type == "bool"

    def values_of(batch, n, column=K):
        if op == "count":
            return np.empty((n, 0), dtype=np.uint8)
        return as_kernel(values_of_array(batch.column(column), meta), n, kdtype)

    def feed_all():
        if single and not dedup:
            # The fast path: index columns straight from the batches, every one of them read and
            # bounds-checked in the same pass, reduced dimensions too: an entry outside the shape
            # is refused wherever it lies (footer statistics are not proof of what the pages hold).
            read = dims + [d for d in range(K) if d not in dims]
            all_bounds = [int(meta.shape[d]) for d in read]

            def columns_of(batch, where):
                cols = batch_columns(batch, K)
                return [cols[c] for c in where]

            def prepare(batch):  # on the decoding thread
                n = batch.num_rows
                return reducer.block_partial(columns_of(batch, read), values_of(batch, n), all_bounds) if n else None

            leading = None  # the order's leading kept dimensions, where only they are relied on
            if check is None and prefix:
                leading = ClaimCheck(meta, prefix, False, path=path)
                leading.tracker.offset = src.start
            rows = 0
            for batch, partial in src.iter_prepared(prepare, budget=budget):
                n = batch.num_rows
                if not n:
                    continue
                if check is not None:
                    check.check_batch(batch)
                elif leading is not None and isinstance(partial, tuple):
                    leading.check_seam(columns_of(batch, range(K)))
                elif leading is not None:
                    leading.check(columns_of(batch, range(K)))
                if isinstance(partial, tuple):
                    got = reducer.merge_block(*partial)
                elif partial is not None:
                    got = partial  # the row of an index out of bounds
                else:
                    got = reducer.feed(columns_of(batch, read), values_of(batch, n), all_bounds, block=False)
                if isinstance(got, int):
                    raise DataError(out_of_bounds(src.start + rows + got, batch_keys(batch, K), got, meta.shape[:K]),
                                    path=path)
                rows += n
                if progress:
                    progress.advance(n)
                yield from got
            return
        if single:
            batches = checked_batches(src, budget=budget, progress=progress, path=path, claim=check)
        else:
            batches = ordered_batches(src, tuple(kept) + tuple(plan.reduced), budget=budget, tmp_dir=tmp_dir,
                                      progress=progress, path=path)
        pairs = ((keys, values_of(batch, keys.shape[1])) for keys, batch in batches)
        if dedup:
            pairs = sum_duplicates(pairs, is_bool=is_bool)
        for keys, vals in pairs:
            yield from reducer.feed([np.ascontiguousarray(keys[d]) for d in dims], vals, bounds)

    return feed_all()


def _finish_piece(piece, op, plan, dtype, kdtype):
    """Output keys (K_out, g) and values (g, *dense_out) from a reducer piece."""
    keys, acc, counts = piece
    g = keys.shape[1]
    if op in ("count", "mean"):  # the only ops that read the counts
        counts = counts * plan.dense_factor
    if plan.dense_reduced:
        ax = tuple(1 + j for j in plan.dense_reduced)
        if op == "count":
            acc = np.empty((g,) + plan.dense_out + (0,), dtype=kdtype)
        else:
            blk = acc.reshape((g,) + plan.dense_in)
            with np.errstate(all="ignore"):
                ufunc = _UFUNC["sum" if op == "mean" else op]
                acc = ufunc.reduce(blk, axis=ax, keepdims=plan.keepdims, dtype=kdtype)
    shape_out = (g,) + plan.dense_out
    if op == "count":
        vals = np.broadcast_to(counts.reshape((g,) + (1,) * len(plan.dense_out)), shape_out).astype(np.int64)
    elif op == "mean":
        with np.errstate(all="ignore"):
            mean = acc.reshape(g, -1) / counts.reshape(g, 1).astype(kdtype if kdtype.kind in "fc" else np.float64)
        vals = from_kernel(mean, dtype, plan.dense_out)
    else:
        vals = from_kernel(np.asarray(acc).reshape(g, -1), dtype, plan.dense_out)
    if plan.keepdims and plan.reduced:
        K = len(plan.kept) + len(plan.reduced)
        full = np.zeros((K, g), dtype=np.int64)
        full[plan.kept] = keys
        keys = full
    return keys, vals


# ---------------------------------------------------------------------------------------------
# the output: a sparse tensor, a dense .npy, or the scalar

class _ScalarWriter(ClosesOrAborts):
    def __init__(self, empty):
        self.value = empty

    def write(self, keys, vals):
        if keys.shape[1]:
            self.value = vals.reshape(-1)[0].item()
        return keys.shape[1]

    def close(self):
        return self.value

    def abort(self):
        pass
