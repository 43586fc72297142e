"""sptool reorder."""

from __future__ import annotations

import click

from ..ops.reorder import reorder as reorder_op
from ..stream.duplicates import POLICIES
from ._cluster import cluster, cluster_extra, operation
from ._console import Job
from ._options import INT_LIST, common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("reorder")
@input_argument()
@output_option()
@option("perm", type=INT_LIST, default=None, metavar="2,0,1",
        help="The dimension order to sort by, as a permutation: rows come out in the order transpose --perm "
             "would give them [default: 0,1,...: row-major]. Negative values count from the end.")
@option("duplicates", type=click.Choice(POLICIES), default="keep", show_default=True,
        help="Rows sharing a coordinate: keep them adjacent in input order, or merge them (sum gives "
             "the canonical form), or fail naming the first.")
@tmp_dir_option
@common_options
@click.pass_context
def reorder(ctx, tensor, output, perm, duplicates, tmp_dir):
    """Sort the rows by a dimension order (TensorFlow's reorder; with --duplicates sum,
    PyTorch's coalesce).

    Input already in the requested order streams straight through.

    Memory: an external merge sort; RAM stays within --memory and sorted runs
    (about the input's size) are spilled to --tmp-dir, which is removed on success,
    failure and Ctrl-C.

    \b
    Example:
      sptool reorder sample_data/unsorted.parquet --duplicates sum -o /tmp/sorted.parquet
      sptool reorder sample_data/tensor3d.parquet --perm 2,0,1 -o /tmp/by-last.parquet
    """
    opts = settings(ctx)
    with cluster(ctx.obj, opts["quiet"]) as client:
        job = Job("reorder", quiet=opts["quiet"])
        try:
            r = operation("reorder", reorder_op, client)(tensor, output, perm=perm, duplicates=duplicates,
                                                         memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
        finally:
            job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output, extra=cluster_extra(r))


def register(cli):
    cli.add_command(reorder)
