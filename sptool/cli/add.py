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
@output_option(help_text="Output: a .parquet file, a directory (ending in /), a .arrows stream, or - for stdout "
               "(the default); a .npy file when one operand is dense.")
@option("thresh", type=float, default=0.0, show_default=True, metavar="T",
        help="Drop a sum whose magnitude is below T where both operands have an entry (TensorFlow's "
             "threshold); entries on one side only are kept.")
@option("prune", is_flag=True,
        help="Apply --thresh to every output entry, not only where both operands have one.")
@option("scalar", metavar="X", default=None,
        help="Instead of B, add the number X to every stored entry (implicit zeros stay zero).")
@tmp_dir_option
@common_options
@click.pass_context
def add(ctx, a, b, output, thresh, prune, scalar, tmp_dir):
    """Add two tensors (TensorFlow's sparse.add), or a number to every stored entry.

    Two sparse tensors give a sparse, canonical sum: a streaming merge join of the operands in
    row-major order (an unsorted operand is sorted first; duplicates are summed). Shapes must be
    equal. A sparse tensor and a dense .npy (either order) give a dense .npy (-o OUT.npy); shapes
    must be equal, duplicates accumulate. Value types follow NumPy promotion. At most one input
    may be - (stdin).

    With --scalar X and no B, X is added to every stored entry; positions not stored stay 0,
    so the result is as sparse as A (not the dense A + X). Rows sharing a coordinate are
    summed first. A's fill value must be 0; the type follows NumPy (float32 + 2.5 stays
    float32).

    Memory: sorted operands stream through in one pass; unsorted ones go through an external
    sort within --memory (half each), spilling to --tmp-dir. A dense output is a memory map.
    --scalar streams in one pass (after an external sort if A does not promise unique coordinates).

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
