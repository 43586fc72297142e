"""sptool merge."""

from __future__ import annotations

import click

from ..ops.merge import merge as merge_op
from ._console import Job
from ._options import INT_LIST, common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("merge")
@click.argument("ids", metavar="IDS...", nargs=-1, required=True)
@input_argument("values")
@output_option()
@option("vocab_size", metavar="V", type=INT_LIST, required=True,
        help="The extent of the last output dimension; ids must lie in [0, V). One for each IDS: V1,V2,...")
@tmp_dir_option
@common_options
@click.pass_context
def merge(ctx, ids, values, output, vocab_size, tmp_dir):
    """Merge an ids tensor and a values tensor (TensorFlow's sparse_merge).

    IDS holds integer ids as the values of a [batch..., position] tensor (what `sptool
    convert --feature` gives for an Example feature), VALUES the values of the same
    coordinates. The output has shape [batch..., V]: each entry moves to column id, keeping
    its value. Repeated ids in a row stay separate entries, as TensorFlow keeps them (they
    are read as a sum). The output is sorted row-major. The entry counts must agree, as
    TensorFlow requires, and so must every coordinate (TensorFlow pairs entries by position
    only); ids outside [0, V) are errors. Several IDS with --vocab-size V1,V2,... give [batch..., V1, V2, ...].

    Memory: sorted inputs stream through in one pass; unsorted ones go through an external
    sort within --memory (an equal share each), spilling to --tmp-dir. One output row is held whole.

    \b
    Example:
      sptool convert sample_data/examples.tfrecord -o /tmp/ids.parquet --feature ids
      sptool convert sample_data/examples.tfrecord -o /tmp/values.parquet --feature values
      sptool merge /tmp/ids.parquet /tmp/values.parquet --vocab-size 20 -o /tmp/merged.parquet
    """
    opts = settings(ctx)
    job = Job("merge", quiet=opts["quiet"])
    try:
        r = merge_op(list(ids), values, output, vocab_size=vocab_size, memory=opts["memory"], tmp_dir=tmp_dir,
                     progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


def register(cli):
    cli.add_command(merge)
