"""sptool to-indicator."""

from __future__ import annotations

import click

from ..ops.to_indicator import to_indicator as to_indicator_op
from ._console import Job
from ._options import common_options, input_argument, settings, tmp_dir_option
from ._vocabulary import option


@click.command("to-indicator")
@input_argument()
@option("vocab_size", type=int, required=True, metavar="V", help="Extent of the new last dimension.")
@option("output", metavar="PATH", default=None,
        help="OUT.npy for a dense bool array; else a sparse bool tensor: a .parquet file, a directory "
             "(ending in /), a .arrows stream, or - for stdout (the default; an Arrow IPC stream).")
@tmp_dir_option
@common_options
@click.pass_context
def to_indicator(ctx, tensor, vocab_size, output, tmp_dir):
    """Turn integer ids into a bool indicator tensor (TensorFlow's to_indicator).

    The last sparse dimension is replaced by the ids held in the values: the result,
    of shape [D0, ..., Dn-2, V], is True at [d0, ..., dn-2, id] for every stored
    entry. Ids may repeat within a row. Values must be integers in [0, V): the first
    entry outside is an error naming it. Duplicate coordinates are summed first (the
    format's rule), and the sum is the id. A sparse result is canonical.

    Memory: a sparse result goes through the external sort (runs spilled to
    --tmp-dir); a .npy result is written through a memory map.

    \b
    Example:
      sptool to-indicator sample_data/digits.parquet --vocab-size 17 -o /tmp/indicator.parquet
      sptool to-indicator sample_data/ids_numbers.parquet --vocab-size 50 -o /tmp/indicator.npy
    """
    opts = settings(ctx)
    job = Job("to-indicator", quiet=opts["quiet"])
    try:
        r = to_indicator_op(tensor, "-" if output is None else output, vocab_size=vocab_size,
                            memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


def register(cli):
    cli.add_command(to_indicator)
