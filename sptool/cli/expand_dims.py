"""sptool expand-dims."""

from __future__ import annotations

import click

from ..ops.expand_dims import expand_dims as expand_dims_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, output_option, settings
from ._vocabulary import option


@click.command("expand-dims")
@input_argument()
@output_option()
@option("axis", type=int, default=-1, show_default=True, metavar="A",
        help="Where the new size-1 dimension goes, in -rank-1..rank; negative counts from the end.")
@common_options
@click.pass_context
def expand_dims(ctx, tensor, output, axis):
    """Insert a dimension of size 1 (TensorFlow's sparse expand_dims); every entry gets
    index 0 there.

    On a hybrid tensor an axis among the dense dimensions inserts into the dense block.
    The sort order and uniqueness carry over (canonical stays canonical).

    Memory: one pass in batches within --memory.

    \b
    Example:
      sptool expand-dims sample_data/matrix_a.parquet --axis 0 -o /tmp/expanded.parquet
      sptool expand-dims sample_data/tensor3d.parquet --axis -1 -o /tmp/t4.parquet
    """
    opts = settings(ctx)
    r, job = run_job("expand-dims", expand_dims_op, opts, ctx.obj, tensor, output, axis=axis, memory=opts["memory"])
    job.summary(result=r, rows_out=r["rows"], extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(expand_dims)
