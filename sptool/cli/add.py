"""sptool add."""

from __future__ import annotations

import click

from .._memory import format_size
from ..ops.add import add as add_op
from ._console import Job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option


@click.command("add")
@input_argument("a")
@input_argument("b")
@output_option(help_text="Output: a .parquet file, a directory (ending in /), a .arrows stream, or - for stdout "
               "(the default); a .npy file when one operand is dense.")
@click.option("--thresh", type=float, default=0.0, show_default=True, metavar="T",
              help="Drop a sum whose magnitude is below T where both operands have an entry (TensorFlow's "
                   "threshold); entries on one side only are kept.")
@click.option("--prune", is_flag=True,
              help="Apply --thresh to every output entry, not only where both operands have one.")
@tmp_dir_option
@common_options
@click.pass_context
def add(ctx, a, b, output, thresh, prune, tmp_dir):
    """Add two tensors (TensorFlow's sparse.add).

    Two sparse tensors give a sparse, canonical sum: a streaming merge join of the operands in
    row-major order (an unsorted operand is sorted first; duplicates are summed). Shapes must be
    equal. A sparse tensor and a dense .npy (either order) give a dense .npy (-o OUT.npy); shapes
    must be equal, duplicates accumulate. Value types follow NumPy promotion. At most one input
    may be - (stdin).

    Memory: sorted operands stream through in one pass; unsorted ones go through an external
    sort within --memory (half each), spilling to --tmp-dir. A dense output is a memory map.

    \b
    Example:
      sptool add sample_data/matrix_a.parquet sample_data/matrix_b.parquet -o /tmp/sum.parquet
      sptool add sample_data/unsorted.parquet sample_data/unsorted.parquet --thresh 0.5 -o /tmp/twice.parquet
    """
    opts = settings(ctx)
    job = Job("add", quiet=opts["quiet"])
    try:
        r = add_op(a, b, output, thresh=thresh, prune=prune, memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
    finally:
        job.stop()
    if "bytes" in r:
        job.summary(result=r, extra=f"wrote {output} ({r['dtype']}, {format_size(r['bytes'])})")
    else:
        job.summary(result=r, rows_out=r["rows_out"], extra=f"{r['dropped']:,} dropped" if r["dropped"] else "")


def register(cli):
    cli.add_command(add)
