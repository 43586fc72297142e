"""sptool maximum and sptool minimum."""

from __future__ import annotations

import click

from ..ops.maximum import maximum as maximum_op
from ..ops.maximum import minimum as minimum_op
from ._console import Job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option


def _run(ctx, name, op, a, b, output, tmp_dir):
    opts = settings(ctx)
    job = Job(name, quiet=opts["quiet"])
    try:
        r = op(a, b, output, memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


@click.command("maximum")
@input_argument("a")
@input_argument("b")
@output_option()
@tmp_dir_option
@common_options
@click.pass_context
def maximum(ctx, a, b, output, tmp_dir):
    """Element-wise maximum of two sparse tensors (TensorFlow's sparse.maximum).

    The output holds the union of the coordinates; a coordinate missing on one side counts as
    0 there (the fill value), so max(-3, implicit 0) = 0 is stored. Shapes must be equal; real
    value types only. Duplicates within an operand are summed first. The output is canonical.

    Memory: sorted operands stream through in one pass; unsorted ones go through an external
    sort within --memory (half each), spilling to --tmp-dir.

    \b
    Example:
      sptool maximum sample_data/matrix_a.parquet sample_data/matrix_b.parquet -o /tmp/max.parquet
      sptool maximum sample_data/unsorted.parquet sample_data/unsorted.parquet -o /tmp/max_self.parquet
    """
    _run(ctx, "maximum", maximum_op, a, b, output, tmp_dir)


@click.command("minimum")
@input_argument("a")
@input_argument("b")
@output_option()
@tmp_dir_option
@common_options
@click.pass_context
def minimum(ctx, a, b, output, tmp_dir):
    """Element-wise minimum of two sparse tensors (TensorFlow's sparse.minimum).

    The output holds the union of the coordinates; a coordinate missing on one side counts as
    0 there (the fill value), so min(3, implicit 0) = 0 is stored. Shapes must be equal; real
    value types only. Duplicates within an operand are summed first. The output is canonical.

    Memory: sorted operands stream through in one pass; unsorted ones go through an external
    sort within --memory (half each), spilling to --tmp-dir.

    \b
    Example:
      sptool minimum sample_data/matrix_a.parquet sample_data/matrix_b.parquet -o /tmp/min.parquet
      sptool minimum sample_data/unsorted.parquet sample_data/unsorted.parquet -o /tmp/min_self.parquet
    """
    _run(ctx, "minimum", minimum_op, a, b, output, tmp_dir)


def register(cli):
    cli.add_command(maximum)
    cli.add_command(minimum)
