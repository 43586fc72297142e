"""todense on a cluster, to a .npy on storage every worker sees.  The driver preallocates the
file (a sparse file: header, then holes that read as zeros); the rows are shuffled into key
ranges of the row-major order (ranges.py), which are runs of consecutive cells, so each task
owns a region of the file no other task writes: it sorts its range and writes the cells its rows
reach with pwrite (io's BlockScatter), duplicates summed in input order as on one machine.
The driver renames the file into place when every task is done (npyfile.py).

An order the input claims is checked first, as one machine checks it while the rows pass
(claims.py: a task per piece, index columns only, the seams on the driver): a part whose rows
break its claim is refused with the single machine's error, naming the row from the input's
start, before any cell is written.

Cells no row reaches stay the file's zeros, so the fill value must be 0; string and binary
values (two passes, a width) stay on one machine."""

from __future__ import annotations

from functools import partial

from .._memory import Budget, budget_of
from ..errors import UsageError
from ..io import BlockScatter, batch_keys, batch_values, check_dense_size, is_zero
from ..ops.todense import default_value_of, local_npy
from ..stream.dense import CLAIMS_NOTE, dense_dtype, sorts_first
from ..stream.order import ClaimCheck, sorted_batches
from .claims import verify_claim
from .npyfile import by_regions, shared_npy
from .ranges import operand_meta


def scatter_range(src, _part: str, *, npy: str, offset: int, dtype, budget: Budget, tmp_dir, unique: bool,
                  path: str) -> int:
    """One key range's rows, sorted row-major, written into its cells of the .npy (a task's
    op; no part is written); with ``unique``, the input's uniqueness claim checked on them
    (a coordinate's rows all fall in one range).  The rows written."""
    meta = src.meta
    K = meta.sparse_ndim
    order = tuple(range(K))
    check = ClaimCheck(meta, order, True, path=path, note=CLAIMS_NOTE) if unique else None
    scatter = BlockScatter(npy, offset, meta, dtype, budget)
    try:
        for batch, _ in sorted_batches(src, order, budget=budget, tmp_dir=tmp_dir, keys=False):
            keys = batch_keys(batch, K)
            if check is not None:
                check.check(keys)
            scatter.add(keys, batch_values(batch, meta))
        scatter.finish()
    finally:
        scatter.close()
    return scatter.rows


def todense(path: str, output: str, *, client, default_value=None, validate: bool = True, memory=None,
            progress=None) -> dict:
    """``sptool.todense`` on the cluster of ``client``, into the .npy ``output`` on shared storage
    (see the module docstring); ``validate`` checks bounds and the uniqueness claim."""
    if not isinstance(output, str) or not output.endswith(".npy"):
        raise UsageError("todense writes a .npy file; name the output *.npy", path=output)
    output = local_npy(output)  # on a shared filesystem, which every worker's pwrite reaches
    meta = operand_meta(path)
    if meta.value_type in ("string", "binary"):
        raise UsageError(f"on a cluster todense writes numbers, not {meta.value_type} values (run it without "
                         "--scheduler)", path=path)
    fill = meta.fill_value if default_value is None else default_value_of(default_value, meta)
    if not is_zero(fill):
        raise UsageError(f"on a cluster todense leaves the cells no row reaches as zeros: the fill value {fill!r} "
                         "needs one machine (run it without --scheduler, or pass --default-value 0)", path=path)
    dtype = dense_dtype(meta)
    nbytes = check_dense_size(meta.shape, dtype, output)
    budget = budget_of(memory)
    K = meta.sparse_ndim
    # The claimed order checked in stored order, as one machine checks it when it does not sort
    # first; uniqueness too when the order is full (then the ranges need not check it again).
    in_stored_order = validate and bool(meta.sort_order) and not sorts_first(meta, nbytes, budget)
    before = partial(verify_claim, client, meta=meta, order=meta.sort_order, unique=meta.unique, note=CLAIMS_NOTE,
                     budget=budget, name=path) if in_stored_order else None
    with shared_npy(output, meta.shape, dtype) as (npy, offset, scratch):
        fn = partial(scatter_range, npy=npy, offset=offset, dtype=dtype, budget=budget, tmp_dir=None,
                     unique=validate and meta.unique and not (in_stored_order and len(meta.sort_order) == K),
                     path=path)
        outcome = by_regions(client, path, meta, range(K), fn, scratch, budget=budget, progress=progress,
                             before=before)
    return {"rows": meta.nnz, "shape": list(meta.shape), "dtype": str(dtype), "bytes": nbytes, "parts": outcome.parts,
            "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}
