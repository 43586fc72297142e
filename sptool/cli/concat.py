"""sptool concat."""

from __future__ import annotations

import click

from ..ops.concat import concat as concat_op
from ._cluster import cluster, cluster_extra, operation
from ._console import Job
from ._options import common_options, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("concat")
@click.argument("tensors", metavar="TENSOR...", nargs=-1, required=True)
@option("axis", type=int, required=True, metavar="A",
        help="Dimension to concatenate along (a sparse one). Negative values count from the end.")
@option("expand_nonconcat", is_flag=True,
        help="Let the other dimensions differ: each becomes the maximum over the inputs "
             "(TensorFlow's expand_nonconcat_dims). Without it they must be equal.")
@output_option()
@tmp_dir_option
@common_options
@click.pass_context
def concat(ctx, tensors, axis, expand_nonconcat, output, tmp_dir):
    """Concatenate tensors along a dimension (TensorFlow's sparse.concat).

    Indices along --axis are offset by the sizes of the inputs before them. Ranks, value
    types, fill values and (unless --expand-nonconcat) the other dimensions must match. The
    output is row-major sorted, and unique when every input is; duplicates are kept. At most
    one input may be - (stdin).

    Memory: sorted inputs are merged (or, along axis 0, appended) in a single streaming pass;
    unsorted inputs go through an external sort within --memory, spilling to --tmp-dir.
    On a cluster the inputs are shuffled into ranges of the dimensions before --axis
    (along axis 0: one range, one task).

    \b
    Example:
      sptool concat sample_data/matrix_a.parquet sample_data/matrix_b.parquet --axis 1 -o /tmp/ab.parquet
      sptool concat sample_data/matrix_a.parquet sample_data/matrix_b.parquet --axis 0 -o /tmp/stacked.parquet
    """
    opts = settings(ctx)
    with cluster(ctx.obj, opts["quiet"]) as client:
        job = Job("concat", quiet=opts["quiet"])
        try:
            r = operation("concat", concat_op, client)(list(tensors), output, axis=axis,
                                                       expand_nonconcat=expand_nonconcat, memory=opts["memory"],
                                                       tmp_dir=tmp_dir, progress=job)
        finally:
            job.stop()
    job.summary(result=r, rows_out=r["rows_out"], extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(concat)
