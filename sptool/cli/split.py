"""sptool split."""

from __future__ import annotations

import click

from ..ops.split import split as split_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, settings
from ._vocabulary import option


@click.command("split")
@input_argument()
@option("axis", type=int, required=True, metavar="A",
        help="Dimension to split along. Negative values count from the end.")
@option("num_split", type=int, required=True, metavar="N", help="Number of pieces.")
@option("output", metavar="PATTERN", required=True,
        help="Where piece i goes, with {i} replaced by its number: out/part-{i}.parquet, out-{i}/ for "
             "directories, {i:03d} to pad.")
@common_options
@click.pass_context
def split(ctx, tensor, axis, num_split, output):
    """Split a tensor into N (--num-split) pieces along a dimension (TensorFlow's sparse.split).

    The first shape[axis] % N pieces are one longer than the rest; indices along --axis are
    rebased to each piece. Each piece keeps the input's sort order and uniqueness. If any
    piece fails, no piece is left behind.

    Memory: one streaming pass; all N outputs are written at once, their row groups sized
    so that the N buffers together stay within --memory. On a cluster (--scheduler) the
    pattern names directories (-o out-{i}/): each input piece (a part, or a run of a
    file's row groups) is split by its own task, and its share of piece i becomes a part of
    directory i; the directories are renamed into place together, and a failed rename puts
    back the ones already replaced.

    \b
    Example:
      sptool split sample_data/tensor3d.parquet --axis 0 --num-split 4 -o /tmp/piece-{i}.parquet
      sptool split sample_data/digits.parquet --axis 1 --num-split 2 -o /tmp/half-{i}.parquet
    """
    opts = settings(ctx)
    r, job = run_job("split", split_op, opts, ctx.obj, tensor, output, axis=axis, num_split=num_split,
                     memory=opts["memory"])
    job.summary(result=r, rows_out=sum(r["rows"]), extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(split)
