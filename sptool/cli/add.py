"""sptool add."""

from __future__ import annotations

import click

from .._memory import format_size
from ..ops.add import add as add_op
from ._cluster import cluster, cluster_extra, operation
from ._console import Job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("add")
@input_argument("a")
@click.argument("b", metavar="[B]", required=False)
@output_option(help_text="A sparse output [default: - (stdout)]; a .npy when an operand is dense.")
@option("thresh", type=float, default=0.0, metavar="T",
        help="Drop sums of both sides below T in magnitude (TensorFlow's threshold) [default: 0].")
@option("prune", is_flag=True,
        help="Apply --thresh to every output entry.")
@option("scalar", metavar="X", default=None,
        help="Instead of B, add X to every stored entry.")
@tmp_dir_option
@common_options
@click.pass_context
def add(ctx, a, b, output, thresh, prune, scalar, tmp_dir):
    """Add two tensors (TensorFlow's sparse.add), or a number to every stored entry.

    Two sparse tensors of equal shape give a sparse, canonical sum (duplicates summed); a sparse
    tensor and a dense .npy (either order) a dense .npy (-o OUT.npy). Types follow NumPy. With
    --scalar X and no B, X is added to every stored entry: the result is as sparse as A (not
    the dense A + X). At most one input may be - (stdin).

    Memory: sorted operands stream in one pass; unsorted ones are sorted externally within
    --memory, spilling to --tmp-dir; a dense output is a memory map.

    \b
    Example:
      sptool add sample_data/matrix_a.parquet sample_data/matrix_b.parquet -o /tmp/sum.parquet
      sptool add sample_data/unsorted.parquet sample_data/unsorted.parquet --thresh 0.5 -o /tmp/twice.parquet
      sptool add sample_data/digits.parquet --scalar 0.5 -o /tmp/shifted.parquet
    """
    opts = settings(ctx)
    with cluster(ctx.obj, opts["quiet"]) as client:
        job = Job("add", quiet=opts["quiet"])
        try:
            r = operation("add", add_op, client)(a, b, output, scalar=scalar, thresh=thresh, prune=prune,
                                                 memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
        finally:
            job.stop()
    if "bytes" in r:
        job.summary(result=r, output=output, extra=f"dense {r['dtype']}, {format_size(r['bytes'])}")
    else:
        extra = [f"{r['dropped']:,} dropped" if r["dropped"] else "", cluster_extra(r)]
        job.summary(result=r, rows_out=r["rows_out"], extra=", ".join(filter(None, extra)), output=output)


def register(cli):
    cli.add_command(add)
