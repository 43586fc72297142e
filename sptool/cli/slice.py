"""sptool slice."""

from __future__ import annotations

import click

from .._memory import format_size
from ..ops.slice import slice_ as slice_op
from ._cluster import cluster_extra, run_job
from ._options import INT_LIST, common_options, input_argument, output_option, settings
from ._vocabulary import option


@click.command("slice")
@input_argument()
@option("start", type=INT_LIST, required=True, metavar="a,b,...",
        help="First index of the box in each dimension.")
@option("size", type=INT_LIST, required=True, metavar="x,y,...",
        help="Extent of the box in each dimension; -1 means to the end.")
@output_option()
@common_options
@click.pass_context
def slice_cmd(ctx, tensor, start, size, output):
    """Keep the entries inside a box, rebased to its corner (TensorFlow's sparse.slice).

    Keeps start[d] <= index[d] < start[d] + size[d] and subtracts start. The output shape
    is clamped to the input: max(0, min(start + size, shape) - start). For a hybrid tensor,
    --start/--size list every dimension (dense blocks are cut) or just the sparse ones. The
    output keeps the input's sort order and uniqueness.

    Memory: one streaming pass in batches. From a Parquet file or directory only the row
    groups whose min/max statistics overlap the box are read, so a small box out of a sorted
    file reads a small part of it. On a cluster the footers of a directory's parts are read
    in parallel and the row groups kept are sliced in runs of consecutive groups, each by
    its own task (a single file spreads over the workers too).

    \b
    Example:
      sptool slice sample_data/tensor3d.parquet --start 10,0,5 --size 5,-1,10 -o /tmp/box.parquet
      sptool slice sample_data/digits.parquet --start 0,0 --size 100,-1 -o /tmp/first100.parquet
    """
    opts = settings(ctx)
    r, job = run_job("slice", slice_op, opts, ctx.obj, tensor, output, start=start, size=size, memory=opts["memory"])
    extra = ""
    if r["row_groups_total"] is not None:
        extra += (f"read {r['row_groups_read']}/{r['row_groups_total']} row groups "
                  f"({format_size(r['bytes_read'])} of {format_size(r['bytes_total'])})")
    job.summary(result=r, rows_out=r["rows_out"], extra=cluster_extra(r, extra), output=output)


def register(cli):
    cli.add_command(slice_cmd)
