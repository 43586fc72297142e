"""concat on a cluster.  The output is row-major sorted, so the dimensions before the concat
axis lead its order and are not shifted: the inputs are shuffled into key ranges of those
dimensions (ranges.py), and each range is concatenated by the single-machine concat, so part i
is the output's rows in range i.  Along axis 0 there is no such dimension: the job is one range,
one task."""

from __future__ import annotations

from functools import partial

from .._memory import budget_of
from ..errors import UsageError
from ..ops.concat import concat as concat_one
from ..ops.concat import input_paths, plan_concat
from .ranges import on_ranges, operand_meta


def concat_range(*sources_and_output, unique: list[bool], **kw) -> None:
    """One key range of every input concatenated by the single-machine concat into the part at
    the last argument (a task's op).  A range of a unique input is unique: its claim is kept, for the
    output's."""
    *sources, output = sources_and_output
    sources = [s.with_meta(s.meta.with_(unique=u)) for s, u in zip(sources, unique)]
    concat_one(sources, output, **kw)


def concat(paths, output: str, *, client, axis: int, expand_nonconcat: bool = False, memory=None,
           tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.concat`` on the Dask cluster of ``client``, written as a part directory whose
    concatenated parts are the single-machine output."""
    paths = input_paths(paths)
    budget = budget_of(memory)
    metas = [operand_meta(p) for p in paths]
    out_meta, axis, _ = plan_concat(metas, axis, expand_nonconcat)  # refused here, before any task
    if expand_nonconcat and any(m.shape[:axis] != metas[0].shape[:axis] for m in metas):
        raise UsageError("on a cluster, --expand-nonconcat needs the dimensions before the concat axis to agree "
                         "(they key the ranges)")
    fn = partial(concat_range, unique=[m.unique for m in metas], axis=axis,
                 expand_nonconcat=expand_nonconcat, memory=budget, tmp_dir=tmp_dir)
    r = on_ranges(client, fn, list(paths), output, order=tuple(range(axis)), memory=budget, progress=progress,
                  ranges=1 if axis == 0 else None)
    del r["results"]
    return {**r, "inputs": len(paths), "shape": list(out_meta.shape), "sort_order": list(range(out_meta.sparse_ndim)),
            "canonical": r["unique"]}
