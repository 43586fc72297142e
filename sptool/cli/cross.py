"""sptool cross and sptool cross-hashed."""

from __future__ import annotations

import inspect
import textwrap

import click

from ..ops.cross import SEPARATOR
from ..ops.cross import cross as cross_op
from ..ops.cross import cross_hashed as cross_hashed_op
from ._console import Job
from ._options import common_options, output_option, settings, tmp_dir_option
from ._vocabulary import option

INPUTS_AND_MEMORY = """
    Inputs: 2-D [batch, ids] sparse tensors of integer or string values and dense .npy
    matrices of them, all with the same number of rows; sparse ones first in each cross, as
    in TensorFlow, the last input varying fastest. The output is canonical, [batch, most
    crosses in a row].

    Memory: inputs stream within --memory (unsorted ones sorted externally); crosses are
    written in slices, so even 10**9 crosses in a row stream.
"""


@click.command("cross")
@click.argument("inputs", nargs=-1, required=True, metavar="A B [C...]")
@output_option()
@option("separator", default=SEPARATOR, show_default=True, metavar="S",
        help="Text put between the features of a cross.")
@tmp_dir_option
@common_options
@click.pass_context
def cross(ctx, inputs, output, separator, tmp_dir):
    """Cross features row by row into strings (TensorFlow's sparse.cross).

    For each row, every combination of one feature from each input, as the features'
    text joined by the separator ("red_X_7"); integers are written in decimal.
    \b
    Example:
      sptool cross sample_data/ids_words.parquet sample_data/ids_numbers.parquet -o /tmp/crossed.parquet
      sptool cross sample_data/ids_numbers.parquet sample_data/ids_words.parquet --separator : -o /tmp/c2.parquet
    """
    opts = settings(ctx)
    job = Job("cross", quiet=opts["quiet"])
    try:
        r = cross_op(list(inputs), output, separator=separator, memory=opts["memory"], tmp_dir=tmp_dir,
                     progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


@click.command("cross-hashed")
@click.argument("inputs", nargs=-1, required=True, metavar="A B [C...]")
@output_option()
@option("num_buckets", type=int, default=0, metavar="N",
        help="Buckets: the hash modulo N (0: 2**63 - 1).")
@option("hash_key", type=int, default=None, metavar="K",
        help="The hash chain's int64 key [default: 0xDECAFCAFFE].")
@tmp_dir_option
@common_options
@click.pass_context
def cross_hashed(ctx, inputs, output, num_buckets, hash_key, tmp_dir):
    """Cross features row by row into hashed buckets (TensorFlow's sparse.cross_hashed).

    For each row, every combination of one feature from each input, hashed as
    TensorFlow does, bit for bit: a string's Fingerprint64 (FarmHash), an integer as
    itself, chained with FingerprintCat64 from the key; int64 bucket ids.
    \b
    Example:
      sptool cross-hashed sample_data/ids_words.parquet sample_data/ids_numbers.parquet -o /tmp/h.parquet
      sptool cross-hashed sample_data/ids_words.parquet --num-buckets 9 --hash-key 7 -o /tmp/w.parquet
    """
    opts = settings(ctx)
    job = Job("cross-hashed", quiet=opts["quiet"])
    try:
        r = cross_hashed_op(list(inputs), output, num_buckets=num_buckets, hash_key=hash_key,
                            memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows_out"], output=output)


# Both commands share the paragraphs on inputs and memory, written once.
for _command in (cross, cross_hashed):
    head, example = inspect.cleandoc(_command.help).split("\b", 1)
    _command.help = f"{head.rstrip()}\n\n{textwrap.dedent(INPUTS_AND_MEMORY).strip()}\n\n\b{example}"


def register(cli):
    cli.add_command(cross)
    cli.add_command(cross_hashed)
