"""reduce on a cluster.  A directory sorted on a dimension the reduction keeps is reduced where
its pieces stand, whatever the op (seamed.py: one round of tasks, no row shuffled).  Otherwise
by partial reductions, where combining them does not depend on the order of operations: every
input piece reduced on its own by a task (``Reduce.map_part``),
and the partials, far fewer rows than the input when the reduction reduces, shuffled into key
ranges of the output's dimensions and combined there (ranges.py), so the concatenated parts are
the single-machine result.

Which reductions split:

- sum of integers (wrapping arithmetic is associative and commutative), for any input: a
  coordinate's duplicates on several pieces add up in the partials;
- max, min and prod of integers, and count of any values, when no coordinate has rows on two
  pieces: these see each coordinate once, after its duplicates are summed.  That holds for one
  file claiming unique rows, or a directory whose parts all claim unique rows in one sort
  order with every part's last key below the next part's first (seams.py).

Float sums and products depend on the order of the additions, and max and min of floats on which
of -0.0 and 0.0 comes first: those, and mean, hand each output coordinate's rows whole, in input
order, to the single-machine reduce, the rows shuffled into key ranges of the kept dimensions
(ranges.py) unless the seamed path applies.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .._memory import Budget, budget_of
from ..errors import UsageError
from ..io import join_path, open_source, part_name
from ..ops.reduce import Axes, Reduce, check_op, result_dtype
from ..ops.reduce import reduce as reduce_one
from ..stream.engine import run
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .pieces import pieces_of, refuse_stdin
from .seamed import by_seams, piece_edges

# The partials' and the ranges' modules (maps.py, ranges.py, seams.py) are imported by the
# strategies that use them: a float reduce of a sorted directory (seamed.py) never does, and
# its driver's start is what bounds it against one machine (docs/performance.md).

ORDER_FREE = {"sum": "iu", "prod": "iu", "max": "iu", "min": "iu", "count": None}  # op -> value kinds


def splits(meta, op: str, result_dtype) -> bool:
    """Whether ``op`` over ``meta``'s values, giving ``result_dtype``, combines the same in any
    order (before uniqueness)."""
    if op not in ORDER_FREE:
        return False
    kinds = ORDER_FREE[op]
    return kinds is None or (not meta.hybrid and np.dtype(meta.dtype).kind in kinds and
                             np.dtype(result_dtype).kind in kinds)


def reduce_piece(step, src, output: str, *, budget: Budget, tmp_dir) -> None:
    """One piece's partial reduction written to ``output`` (a task's op; map_part checks the
    piece's metadata)."""
    step.map_part(src, output, budget=budget, tmp_dir=tmp_dir)


def combine_range(src, output: str, *, step, budget: Budget, tmp_dir) -> None:
    """One key range of the partials combined into output part ``output`` (a task's op)."""
    run(step.combine(src.meta), src, output, budget=budget, tmp_dir=tmp_dir)


def reduce_partials(path: str, meta, output: str, *, client, step, result_dtype, memory=None, tmp_dir=None,
                    progress=None) -> dict | None:
    """``sptool.reduce`` of the tensor at ``path`` (of metadata ``meta``) by partial reductions
    on the cluster of ``client`` (see the module docstring), or None when the reduction does not
    split that way.  ``step`` is ops.reduce's ``Reduce`` (its split into partials), ``result_dtype``
    the result's type."""
    budget = budget_of(memory)
    check_output(output)
    op = step.op
    if not splits(meta, op, result_dtype):
        return None
    # The whole's claims as one machine opens it (io.source.derived_claims); uniqueness checked
    # only in a full order.
    trusted = meta.unique and len(meta.sort_order) == meta.sparse_ndim
    if op != "sum" and not trusted:
        return None
    from .claims import claimed_task, raise_first_failure
    from .maps import each_piece, mapped_piece
    from .ranges import range_map

    step.check(meta)
    workers = worker_count(client)
    with PartDirectory(output) as out:
        partials = out.scratch("partials")
        fn = partial(reduce_piece, step, budget=budget, tmp_dir=tmp_dir)
        # The others trust that no coordinate has rows on two pieces: each piece's rows are
        # checked against the claim on their way to its reduction, and the seams between the
        # pieces here, as one machine checks the rows it trusts.
        task = mapped_piece if op == "sum" else partial(claimed_task, meta=meta)
        done, outcome, pieces = each_piece(client, fn, path, out, lambda i: join_path(partials, part_name(i)),
                                           budget=budget, progress=progress, task=task)
        if op != "sum":
            raise_first_failure(pieces, [(edges, failure) for edges, failure, _, _ in done], meta, meta.sort_order,
                                True, note="", name=pieces[0].operand or path)
        with open_source(partials) as done:
            partial_meta = done.meta
        fn = partial(combine_range, step=step, budget=budget, tmp_dir=tmp_dir)
        combined = range_map(client, [(pieces_of(partials, workers), partial_meta)], range(partial_meta.sparse_ndim),
                             fn, out, ranges=workers, budget=budget)
        combined.rows_in = outcome.rows_in
        combined.peak_worker_memory = max(combined.peak_worker_memory, outcome.peak_worker_memory)
    r = {**combined.summary(), "output": output, "strategy": "partials"}
    del r["results"]
    return r


def reduce_seamed(path: str, src, kept, output: str, *, client, fn, memory=None, progress=None) -> dict | None:
    """``fn`` (the single-machine reduce of a source into a part) over the tensor at ``path``
    (``src``, opened by the caller) by seamed.py, when it is a directory whose parts are sorted
    on a kept dimension first, in order across their seams (their row-group statistics say so);
    None otherwise.  (A single file is left to the other paths: its pieces are runs of row
    groups whose statistics would have to be read here to find its seams.)"""
    if src.kind != "dir":
        return None
    leading = {p.meta.sort_order[0] if p.meta.sort_order else None for p in src.parts if p.meta.nnz}
    if len(leading) != 1 or leading & set(kept) != leading:
        return None
    dim = leading.pop()
    workers = worker_count(client)
    pieces = pieces_of(path, workers)
    edges = piece_edges(src, pieces, dim)
    meta = src.meta
    if edges is None:
        return None
    with PartDirectory(output) as out:
        # A task per worker (one streaming pass over its pieces each, on the task's own
        # decoding threads): 8 tasks of a 20M-entry reduce on 2 workers cost ~0.1 CPU s more.
        outcome = by_seams(client, pieces, edges, dim, meta, fn, out, budget=budget_of(memory), progress=progress,
                           tasks=workers)
    r = {**outcome.summary(), "output": output, "strategy": "seams"}
    del r["results"]
    return r


def reduce(path: str, output: str, *, client, op: str, axis=None, keepdims: bool = False, empty_value=None,
           memory=None, tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.reduce`` on the Dask cluster of ``client``, to a sparse part directory: where the
    pieces stand for a directory sorted on a kept dimension (seams), else by partials where the
    combination does not depend on the order of operations, otherwise the rows shuffled into
    ranges of the kept dimensions and each range reduced by the single-machine reduce.  Either
    way every op gives the single-machine result (float sums included)."""
    refuse_stdin(path)  # the workers read the input again
    # Opened once: its footers give the plan, and the seamed path's edges, where there is one.
    with open_source(path) as src:
        meta = src.meta
        check_op(op, meta)
        plan = Axes(meta, op, axis, keepdims)
        kept = [d for d in range(meta.sparse_ndim) if d not in plan.axes]
        if plan.scalar or plan.K_out == 0:
            raise UsageError("on a cluster, reduce writes a sparse part directory: keep a sparse dimension or pass "
                             "--keepdims")
        fn = partial(reduce_one, op=op, axis=axis, keepdims=keepdims, empty_value=empty_value, memory=memory,
                     tmp_dir=tmp_dir)
        # Seams first, whatever the op: one round of tasks, no row shuffled.  Partials take two
        # more (splitters, then the combining shuffle): an int64 sum of a sorted 20M-entry
        # directory took 0.89 s by partials, 1.5x one process's.
        r = reduce_seamed(path, src, kept, output, client=client, fn=fn, memory=memory, progress=progress)
        if r is None:
            # Only sum adds up across pieces whatever the duplicates; the others are split only
            # when the whole is unique.
            step = Reduce(op, axis, keepdims, empty_value, unique=op != "sum")
            r = reduce_partials(path, meta, output, client=client, step=step, result_dtype=result_dtype(meta, op),
                                memory=memory, tmp_dir=tmp_dir, progress=progress)
    if r is None:
        from .ranges import on_ranges

        r = {**on_ranges(client, fn, [path], output, order=kept, memory=memory, progress=progress),
             "strategy": "ranges"}
        del r["results"]
    return {"op": op, "axes": plan.axes, **r}
