"""sptool reset-shape."""

from __future__ import annotations

import click

from ..ops.reset_shape import reset_shape as reset_shape_op
from ._console import Job
from ._options import INT_LIST, common_options, input_argument, output_option, settings
from ._vocabulary import option


@click.command("reset-shape")
@input_argument()
@output_option()
@option("shape", type=INT_LIST, default=None, metavar="40,30,20",
        help="The new shape: same rank and dense dimensions, large enough for every entry "
             "[default: the tight bounding box, max index + 1 per sparse dimension].")
@common_options
@click.pass_context
def reset_shape(ctx, tensor, output, shape):
    """Give the entries a new shape (TensorFlow's sparse reset_shape): by default the
    tight bounding box of the indices. Entries and their order are unchanged.

    A new size too small for some entry is an error naming the dimension (unlike
    TensorFlow, a shape smaller than the old one is fine if the entries fit).

    Memory: one pass in batches within --memory; a Parquet file's footer statistics
    reject a too-small --shape before any row is read.

    \b
    Example:
      sptool reset-shape sample_data/unsorted.parquet -o /tmp/tight.parquet
      sptool reset-shape sample_data/matrix_a.parquet --shape 300,200 -o /tmp/bigger.parquet
    """
    opts = settings(ctx)
    job = Job("reset-shape", quiet=opts["quiet"])
    try:
        r = reset_shape_op(tensor, output, shape=shape, memory=opts["memory"], progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows"], output=output)


def register(cli):
    cli.add_command(reset_shape)
