"""sptool softmax."""

from __future__ import annotations

import click

from ..ops.softmax import softmax as softmax_op
from ._console import Job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option


@click.command("softmax")
@input_argument()
@output_option()
@tmp_dir_option
@common_options
@click.pass_context
def softmax(ctx, tensor, output, tmp_dir):
    """Softmax over the last sparse dimension, among stored entries only
    (TensorFlow's sparse softmax).

    Rows sharing all other sparse indices form a group; each value becomes
    exp(v - max) / sum(exp(v - max)) over its group. Cells with no stored entry take
    no part and stay empty. Needs rank >= 2 and float values. Duplicate coordinates
    are summed first, and an unsorted input is sorted (TensorFlow would silently
    misalign it); the output is canonical.

    Memory: one group at a time (rows sharing all but the last sparse index); an
    unsorted input goes through the external sort, spilling runs to --tmp-dir.

    \b
    Example:
      sptool softmax sample_data/tensor3d.parquet -o /tmp/softmax.parquet
      sptool softmax sample_data/matrix_a.parquet -o /tmp/row_softmax.parquet
    """
    opts = settings(ctx)
    job = Job("softmax", quiet=opts["quiet"])
    try:
        r = softmax_op(tensor, output, memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


def register(cli):
    cli.add_command(softmax)
