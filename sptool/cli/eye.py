"""sptool eye."""

from __future__ import annotations

import click

from ..format import VALUE_TYPES
from ..ops.eye import eye as eye_op
from ._console import Job
from ._options import common_options, output_option, settings
from ._vocabulary import option

_TYPES = [t for t in VALUE_TYPES if t not in ("string", "binary")]


@click.command("eye")
@click.argument("num_rows", metavar="N", type=int)
@click.argument("num_columns", metavar="[M]", type=int, required=False)
@option("dtype", type=click.Choice(_TYPES), default="float32", show_default=True, metavar="TYPE",
        help="Value type: " + ", ".join(_TYPES) + ".")
@output_option()
@common_options
@click.pass_context
def eye(ctx, num_rows, num_columns, dtype, output):
    """Write an N x M identity matrix: ones on the main diagonal (TensorFlow's
    sparse eye). M defaults to N; the min(N, M) entries are canonical.

    Memory: rows are generated and written in batches, so any N streams in bounded
    memory (sptool eye 100000000 -o big.parquet works).

    \b
    Example:
      sptool eye 1000 --dtype float64 -o /tmp/eye.parquet
      sptool eye 200 150 --dtype float64 | sptool add sample_data/matrix_a.parquet - -o /tmp/a_plus_eye.parquet
    """
    opts = settings(ctx)
    job = Job("eye", quiet=opts["quiet"], inputs=[])  # reads nothing
    try:
        r = eye_op(num_rows, num_columns, output, dtype=dtype, memory=opts["memory"], progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows"], output=output)


def register(cli):
    cli.add_command(eye)
