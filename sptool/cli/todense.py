"""sptool todense."""

from __future__ import annotations

import click

from .._memory import format_size
from ..ops.todense import todense as todense_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, settings
from ._vocabulary import option


@click.command("todense")
@input_argument()
@option("output", metavar="OUT.npy", required=True, help="The dense .npy file to write.")
@option("default_value", metavar="V", default=None,
        help="Value where nothing is stored [default: the tensor's fill value].")
@option("validate", default=True, show_default=True,
        help="Also check the file's sort and uniqueness claims (bounds are always checked).")
@common_options
@click.pass_context
def todense(ctx, tensor, output, default_value, validate):
    """Write the dense form of a tensor as a .npy file (TensorFlow's to_dense).

    Duplicate coordinates are summed (logical OR for bool), as the format defines.
    An index outside the shape is an error naming the entry.

    Memory: the .npy is written through a memory map, so it may be larger than
    --memory; a size that overflows int64 or exceeds the free disk is refused before
    anything is written. So the output is a local path (or a file:// URL; the input may be
    any URL): an s3:// or other filesystem's URL is refused. On a cluster (--scheduler)
    the .npy goes on storage every worker sees: the rows are shuffled into runs of
    consecutive cells and each task writes its own run's cells into the preallocated
    file; the fill value must then be 0. An order the
    input claims is checked first (a task per piece), as one machine checks it.

    \b
    Example:
      sptool todense sample_data/tensor3d.parquet -o /tmp/tensor3d.npy
      sptool reduce sample_data/tensor3d.parquet --op sum --axis 2 | sptool todense - -o /tmp/sums.npy
    """
    opts = settings(ctx)
    result, job = run_job("todense", todense_op, opts, ctx.obj, tensor, output,
                          default_value=default_value, validate=validate, memory=opts["memory"])
    extra = f"dense {result['dtype']}, {format_size(result['bytes'])}"
    job.summary(result=result, output=output, extra=cluster_extra(result, extra))


def register(cli):
    cli.add_command(todense)
