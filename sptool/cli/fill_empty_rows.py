"""sptool fill-empty-rows."""

from __future__ import annotations

import click

from ..ops.fill_empty_rows import fill_empty_rows as fill_empty_rows_op
from ._console import Job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("fill-empty-rows")
@input_argument()
@output_option()
@option("default_value", metavar="V", required=True,
        help="The value for each empty row, read as the tensor's value type (true/false for bool).")
@option("indicator", metavar="IND.npy", default=None,
        help="Also write a bool .npy of length shape[0]: True where the row was empty.")
@tmp_dir_option
@common_options
@click.pass_context
def fill_empty_rows(ctx, tensor, output, default_value, indicator, tmp_dir):
    """Put V (--default-value) at [row, 0, ..., 0] for every row (dimension 0) without entries
    (TensorFlow's sparse fill_empty_rows; a hybrid row gets a block of V).

    The output is row-major sorted; rows sharing a coordinate are kept.

    Memory: an external merge sort within --memory, spilling sorted runs to
    --tmp-dir (a row-major sorted input streams straight through); the indicator
    is written through a memory map.

    \b
    Example:
      sptool fill-empty-rows sample_data/rowsparse.parquet --default-value 0 --indicator /tmp/e.npy -o /tmp/f.parquet
      sptool fill-empty-rows sample_data/matrix_a.parquet --default-value -1 -o /tmp/filled.parquet
    """
    opts = settings(ctx)
    job = Job("fill-empty-rows", quiet=opts["quiet"])
    try:
        r = fill_empty_rows_op(tensor, output, default_value=default_value, indicator=indicator, memory=opts["memory"],
                               tmp_dir=tmp_dir, progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], extra=f"{r['empty_rows']:,} empty rows filled", output=output)


def register(cli):
    cli.add_command(fill_empty_rows)
