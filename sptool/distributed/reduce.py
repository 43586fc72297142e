"""reduce on a cluster: partial reductions per piece, summed by the distributed sort."""

from __future__ import annotations

from .._memory import budget_of
from ..format import value_type_of_dtype
from ..io import open_source
from ..ops.reduce import Plan, Reduce
from .cluster import worker_count
from .partdir import PartDirectory, check_output
from .partwise import run_partwise
from .pieces import pieces_of


def reduce(path: str, output: str, *, client, op: str, axis=None, keepdims: bool = False, empty_value=None,
           memory=None, tmp_dir: str | None = None, progress=None) -> dict:
    """``sptool.reduce`` on the Dask cluster of ``client``, to a sparse part directory (canonical,
    as the single-machine op writes it).  Only ``op="sum"`` splits into parts (it is linear in the
    entries); the others, a scalar or a dense .npy result are refused."""
    check_output(output)
    with open_source(path) as src:
        meta = src.meta
    part = Reduce(op, axis, keepdims, empty_value)
    pieces = pieces_of(path, worker_count(client))
    with PartDirectory(output) as out:
        outcome = run_partwise(client, part, pieces, [meta], out, budget=budget_of(memory), tmp_dir=tmp_dir,
                               progress=progress)
    first = outcome.part_metas[0]
    plan = Plan(meta, op, axis, keepdims)
    return {"op": op, "axes": plan.axes, "rows_in": outcome.rows_in, "rows_out": outcome.rows_out,
            "shape": list(first.shape), "value_type": value_type_of_dtype(first.dtype), "output": output,
            "parts": outcome.parts, "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}
