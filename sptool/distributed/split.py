"""split on a cluster, into part directories: every input piece split by its own task with the
single-machine split (into its scratch), and piece j's share of output i moved into output
directory i as its part j.  Output i's parts concatenated are the single-machine piece i, in
input order; the directories are committed together once every task is done, all or none
(partdir.commit_together: a rename that fails puts back the outputs already replaced), so a
failed job leaves every output as it was."""

from __future__ import annotations

from functools import partial

from .._memory import budget_of, peak_rss
from .._vocabulary import renamed_keywords
from ..io import join_path, move, part_name
from ..ops.split import Split, piece_paths
from ..ops.split import split as split_one
from .maps import each_piece
from .partdir import PartDirectory, check_output, commit_together
from .pieces import PieceSource
from .ranges import operand_meta

SHARE = "{i}.parquet"  # a task's pattern, in its own scratch directory


def split_piece(fn, piece, pattern: str) -> tuple:
    """``fn(piece source, pattern)`` on one piece (a task): (what fn returned, peak memory)."""
    return fn(PieceSource(piece), pattern), peak_rss()


@renamed_keywords("output", "num_split")
def split(path: str, output: str, *, client, axis: int, num_split: int, memory=None, progress=None) -> dict:
    """``sptool.split`` on the cluster of ``client``: ``output``, a pattern, names part directories (``out-{i}/``),
    output i holding piece i of the split, one part per input piece."""
    pattern, num = output, num_split
    budget = budget_of(memory)
    Split(pattern, axis, num, budget).plan(operand_meta(path))  # a bad axis, num or pattern: before any task
    outputs = piece_paths(pattern, int(num))
    for output in outputs:
        check_output(output)
    one = partial(split_one, axis=axis, num_split=num, memory=budget)

    dirs = []
    try:
        for output in outputs:
            dirs.append(PartDirectory(output))
        scratch = dirs[0].scratch("split")

        def shares(j: int) -> str:  # piece j's pattern
            return join_path(scratch, part_name(j), SHARE)

        done, outcome, _ = each_piece(client, one, path, dirs[0], shares, budget=budget, progress=progress,
                                      task=split_piece)
        for j in range(len(done)):
            for i, d in enumerate(dirs):
                move(piece_paths(shares(j), len(dirs))[i], d.part(j))
        commit_together(dirs)
    except BaseException:
        for d in dirs:
            d.abort()
        raise
    results = [r for r, _ in done]
    rows = [sum(r["rows"][i] for r in results) for i in range(len(outputs))]
    return {"outputs": outputs, "rows_in": outcome.rows_in, "rows": rows, "shapes": results[0]["shapes"],
            "sort_order": results[0]["sort_order"], "unique": all(r["unique"] for r in results),
            "parts": len(done), "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}
