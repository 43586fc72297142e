"""transpose, reshape, expand_dims, retain, map, mul and div on a cluster (maps.py): each the
single-machine op run on every piece, or, where that op sorts its output or sums duplicates
first, on every key range of the order it sorts by.  Every function takes the op's arguments
plus ``client`` and writes a part directory; arguments are checked here, before any task."""

from __future__ import annotations

from functools import partial

import numpy as np

from .._memory import budget_of
from ..errors import UsageError
from ..format import number_of
from ..ops.expand_dims import expand_dims as expand_dims_one
from ..ops.expand_dims import normalize_axis
from ..ops.map_values import ADDITIVE, FUNCTIONS
from ..ops.map_values import map_values as map_one
from ..ops.mul import div as div_one
from ..ops.mul import mul as mul_one
from ..ops.mul import result_dtype
from ..ops.reshape import reshape as reshape_one
from ..ops.reshape import resolve_shape
from ..ops.retain import retain as retain_one
from ..ops.transpose import normalize_perm
from ..ops.transpose import transpose as transpose_one
from ..stream.binary import is_dense_path, open_dense
from ..stream.order import sums_when_promoted
from ..stream.where import compile_where
from .maps import per_piece
from .ranges import on_ranges, operand_meta


def _first(r: dict, *keys) -> dict:
    """Fields of the first part's own summary (the same for every part)."""
    return {k: r["results"][0][k] for k in keys}


def _without_results(r: dict) -> dict:
    return {k: v for k, v in r.items() if k != "results"}


def transpose(path: str, output: str, *, client, perm=None, memory=None, tmp_dir: str | None = None,
              progress=None) -> dict:
    """``sptool.transpose`` on the cluster of ``client``: the rows shuffled into key ranges of
    the input order ``perm`` (the output's row-major order) and each range transposed, so part i
    holds output key range i."""
    meta = operand_meta(path)
    perm = normalize_perm(perm, meta.sparse_ndim, meta.ndim)
    budget = budget_of(memory)
    fn = partial(transpose_one, perm=perm, memory=budget, tmp_dir=tmp_dir)
    r = on_ranges(client, fn, [path], output, order=perm, memory=budget, progress=progress)
    return {**_without_results(r), "rows": r["rows_out"], "perm": list(perm)}


def reshape(path: str, output: str, *, client, shape, memory=None, progress=None) -> dict:
    """``sptool.reshape`` on the cluster of ``client``, piece by piece."""
    meta = operand_meta(path)
    resolve_shape(shape, tuple(meta.shape[:meta.sparse_ndim]), meta.dense_shape)
    r = per_piece(client, partial(reshape_one, shape=shape, memory=memory), path, output, memory=memory,
                  progress=progress)
    return {**_without_results(r), "rows": r["rows_out"]}


def expand_dims(path: str, output: str, *, client, axis: int = -1, memory=None, progress=None) -> dict:
    """``sptool.expand_dims`` on the cluster of ``client``, piece by piece."""
    normalize_axis(axis, operand_meta(path).ndim)
    r = per_piece(client, partial(expand_dims_one, axis=axis, memory=memory), path, output, memory=memory,
                  progress=progress)
    return {**_without_results(r), "rows": r["rows_out"], **_first(r, "sparse_ndim")}


def retain(path: str, output: str, *, client, mask=None, where: str | None = None, memory=None,
           progress=None) -> dict:
    """``sptool.retain`` with ``where`` on the cluster of ``client``, piece by piece (a ``mask``,
    one flag per row of the whole input, is refused)."""
    if mask is not None:
        raise UsageError("on a cluster retain takes --where (a condition on each row), not --mask")
    if where is None:
        raise UsageError("give --where (a condition on each row)")
    meta = operand_meta(path)
    compile_where(where, sparse_ndim=meta.sparse_ndim, value_type=meta.value_type,
                  dense_ndim=meta.ndim - meta.sparse_ndim)
    r = per_piece(client, partial(retain_one, where=where, memory=memory), path, output, memory=memory,
                  progress=progress)
    return _without_results(r)


def in_claimed_order(src, output: str, *, fn, order):
    """``fn(src, output)`` with the range claiming ``order`` (a task's op): a range of an input
    sorted by ``order`` is sorted by it, and the single-machine op keeps that order."""
    if order is not None:
        src = src.with_meta(src.meta.with_(sort_order=order))
    return fn(src, output)


def summed_first(client, fn, path: str, meta, output: str, *, memory, progress) -> dict:
    """An op that sums the duplicates of its input first (stream.order.SummedSource: rows in the
    input's full sort order, else row-major), on key ranges of that order, each range in input
    order through the single-machine ``fn``: the sums, and their order, as on one machine."""
    K = meta.sparse_ndim
    claimed = tuple(meta.sort_order) if len(meta.sort_order) == K else None
    fn = partial(in_claimed_order, fn=fn, order=claimed)
    return on_ranges(client, fn, [path], output, order=claimed or tuple(range(K)), memory=memory,
                     progress=progress)


def map_values(path: str, output: str, *, client, fn: str, allow_fill_change: bool = False, memory=None,
               tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.map_values`` on the cluster of ``client``: piece by piece, or by key ranges where
    the duplicates are summed before ``fn`` (a non-additive ``fn`` of a tensor not known unique)."""
    if fn not in FUNCTIONS:
        raise UsageError(f"--fn must be one of {', '.join(FUNCTIONS)}, not {fn!r}")
    meta = operand_meta(path)
    one = partial(map_one, fn=fn, allow_fill_change=allow_fill_change, memory=memory, tmp_dir=tmp_dir)
    if fn not in ADDITIVE and not meta.unique:
        r = summed_first(client, one, path, meta, output, memory=memory, progress=progress)
    else:
        r = per_piece(client, one, path, output, memory=memory, progress=progress)
    return {**_without_results(r), **_first(r, "value_type", "fill_value", "sort_order")}


def cwise_one(one, d, src, output: str, **kw):
    """mul or div (``one``) of a piece or range by ``d`` (a task's op)."""
    return one(src, d, output, **kw)


def _cwise(name: str, one, t: str, d, output: str, *, client, memory, progress) -> dict:
    """mul or div on the cluster: each task reads a dense operand from its path (a memory map on
    storage every worker sees) or gets the number or array itself."""
    meta = operand_meta(t)
    number = number_of(d)
    if number is None and not isinstance(d, np.ndarray):
        if not is_dense_path(d):
            raise UsageError(f"the second operand of {name} must be a number or a dense .npy file (the sparse side "
                             "never broadcasts)", path=str(d))
        dense_dtype = open_dense(d).dtype
    else:
        dense_dtype = np.asarray(d if number is None else number).dtype
    fn = partial(cwise_one, one, d, memory=memory)
    if sums_when_promoted(meta, result_dtype(name, meta.dtype, dense_dtype, number)):
        r = summed_first(client, fn, t, meta, output, memory=memory, progress=progress)
    else:
        r = per_piece(client, fn, t, output, memory=memory, progress=progress)
    return {**_without_results(r), "rows": r["rows_out"], **_first(r, "broadcast_shape")}


def mul(t: str, d, output: str, *, client, memory=None, progress=None) -> dict:
    """``sptool.mul`` on the cluster of ``client``, piece by piece."""
    return _cwise("mul", mul_one, t, d, output, client=client, memory=memory, progress=progress)


def div(t: str, d, output: str, *, client, memory=None, progress=None) -> dict:
    """``sptool.div`` on the cluster of ``client``, piece by piece."""
    return _cwise("div", div_one, t, d, output, client=client, memory=memory, progress=progress)
