"""sptool reshape."""

from __future__ import annotations

import click

from ..ops.reshape import reshape as reshape_op
from ._cluster import cluster_extra, run_job
from ._options import INT_LIST, common_options, input_argument, output_option, settings
from ._vocabulary import option


@click.command("reshape")
@input_argument()
@output_option()
@option("shape", type=INT_LIST, required=True, metavar="9,-1",
        help="The new shape; one size may be -1 (inferred). A hybrid tensor's new shape ends with its "
             "dense dimensions, which are kept.")
@common_options
@click.pass_context
def reshape(ctx, tensor, output, shape):
    """Give the sparse dimensions a new shape with the same number of elements
    (TensorFlow's sparse reshape: each entry keeps its row-major position).

    Row order is kept: a row-major sorted (or canonical) input stays so; any other sort
    order is dropped. Duplicates are kept.

    Memory: one pass in batches within --memory.

    \b
    Example:
      sptool reshape sample_data/tensor3d.parquet --shape 1200,-1 -o /tmp/reshaped.parquet
      sptool reshape sample_data/digits.parquet --shape -1 -o /tmp/flat.parquet
    """
    opts = settings(ctx)
    r, job = run_job("reshape", reshape_op, opts, ctx.obj, tensor, output, shape=shape, memory=opts["memory"])
    job.summary(result=r, rows_out=r["rows"], extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(reshape)
