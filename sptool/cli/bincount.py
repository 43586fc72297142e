"""sptool bincount."""

from __future__ import annotations

import click

from ..ops.bincount import bincount as bincount_op
from ._console import Job
from ._options import common_options, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("bincount")
@click.argument("path", metavar="T")
@output_option()
@option("weights", metavar="W", default=None,
        help="A tensor with the same shape and coordinates as T: each occurrence adds its weight, and "
             "the result takes the weights' value type.")
@option("minlength", type=int, default=None, metavar="N", help="The result has at least N bins.")
@option("maxlength", type=int, default=None, metavar="N",
        help="The result has exactly N bins; values >= N are not counted.")
@option("binary_output", is_flag=True, help="1 for every value that occurs, instead of its count.")
@option("axis", type=click.Choice(["0", "-1"]), default="0", show_default=True,
        help="0: count over all values (a 1-D result); -1: count per row of a 2-D T.")
@tmp_dir_option
@common_options
@click.pass_context
def bincount(ctx, path, output, weights, minlength, maxlength, binary_output, axis, tmp_dir):
    """Count how often each integer id occurs (TensorFlow's sparse.bincount).

    The result is sparse and canonical: [N] with --axis 0, [batch, N] with --axis -1,
    where N is --maxlength if given, else the largest id + 1 or --minlength if larger
    (TensorFlow's rule; --maxlength 0 gives N = 0). Counts have T's value type (int32 or
    int64; int64 for other integer types), or the weights' type. Ids must be >= 0 (a
    negative one is an error naming its entry); duplicate coordinates of T are summed
    first, as the format defines. Implicit zeros are not counted.

    Memory: T (and W) stream in row-major order, sorted first if they are not (spilling
    to --tmp-dir); --axis -1 works on pieces of whole rows; --axis 0 counts ids into a
    dense array of at most a quarter of --memory, and merges the counts of larger ids
    with the external sort.

    \b
    Example:
      sptool bincount sample_data/ids_numbers.parquet --axis -1 --minlength 64 -o /tmp/counts.parquet
      sptool bincount sample_data/ids_numbers.parquet --axis 0 --binary-output -o /tmp/seen.parquet
    """
    opts = settings(ctx)
    job = Job("bincount", quiet=opts["quiet"])
    try:
        r = bincount_op(path, output, weights=weights, minlength=minlength, maxlength=maxlength,
                        binary_output=binary_output, axis=int(axis), memory=opts["memory"], tmp_dir=tmp_dir,
                        progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


def register(cli):
    cli.add_command(bincount)
