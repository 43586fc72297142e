"""sptool transpose."""

from __future__ import annotations

import click

from ..ops.transpose import transpose as transpose_op
from ._cluster import cluster_extra, run_job
from ._options import INT_LIST, common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("transpose")
@input_argument()
@output_option()
@option("perm", type=INT_LIST, default=None, metavar="1,0,2",
        help="Output dimension k is input dimension perm[k] [default: reversed]. Negative values count "
             "from the end; only sparse dimensions move (dense ones stay last).")
@tmp_dir_option
@common_options
@click.pass_context
def transpose(ctx, tensor, output, perm, tmp_dir):
    """Permute the sparse dimensions (TensorFlow's sparse transpose); the output is
    row-major sorted, with rows sharing a coordinate kept.

    Memory: an external merge sort; RAM stays within --memory and sorted runs (about
    the input's size) are spilled to --tmp-dir. An input already sorted by the
    dimension order perm streams straight through.

    \b
    Example:
      sptool transpose sample_data/tensor3d.parquet --perm 2,0,1 -o /tmp/transposed.parquet
      sptool transpose sample_data/matrix_a.parquet -o /tmp/a_t.parquet
    """
    opts = settings(ctx)
    r, job = run_job("transpose", transpose_op, opts, ctx.obj, tensor, output, perm=perm, memory=opts["memory"],
                     tmp_dir=tmp_dir)
    job.summary(result=r, rows_out=r["rows"], extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(transpose)
