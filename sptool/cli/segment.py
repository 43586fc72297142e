"""sptool segment-sum, segment-mean and segment-sqrt-n."""

from __future__ import annotations

import click

from ..ops import segment as ops
from ._console import Job
from ._options import common_options, settings
from ._vocabulary import option

WHAT = {
    "segment-sum": ("sum", ops.segment_sum, "Sums"),
    "segment-mean": ("mean", ops.segment_mean, "Means"),
    "segment-sqrt-n": ("sqrt_n", ops.segment_sqrt_n, "Sums over sqrt(count)"),
}

HELP = """{verb} of the rows --indices picks, per sorted --segment-ids (TensorFlow's sparse.segment_{kind}).

Output row s combines DATA[indices[i]] over the pairs i with segment_ids[i] == s,
adding in pair order (as np.add.at does){divide}. DATA is a .npy of shape [n, ...];
--indices and --segment-ids are 1-D integer .npy files of the same length, the ids
sorted (non-decreasing) and >= 0. The output .npy has shape [N, ...] in DATA's type:
N is --num-segments, or the last segment id + 1; segments no pair reaches are zeros.
Errors use TensorFlow's words ("segment ids are not increasing", "Bad: indices[i] ==
x out of range [0, n)") and name the pair.

Memory: DATA, the indices and the ids are memory maps read in slices of pairs sized
by --memory (only the picked rows are copied); the output is a memory map written
back as the slices pass, so neither needs to fit in --memory.

\b
Example:
  {example}
"""
EXAMPLE = ("sptool {name} sample_data/dense_b.npy --indices sample_data/segment_indices.npy "
           "--segment-ids sample_data/segment_ids.npy -o /tmp/{kind}.npy\n  "
           "sptool {name} sample_data/dense_b.npy --indices sample_data/segment_indices.npy "
           "--segment-ids sample_data/segment_ids.npy --num-segments 12 -o /tmp/{kind}-12.npy")


def _command(name: str):
    kind, op, verb = WHAT[name]
    divide = {"sum": "", "mean": ", then divided by the segment's count (float data)",
              "sqrt_n": ", then divided by the square root of the count (float data)"}[kind]

    example = EXAMPLE.format(name=name, kind=kind)
    @click.command(name, help=HELP.format(verb=verb, kind=kind, divide=divide, example=example))
    @click.argument("data", metavar="DATA.npy")
    @option("indices", required=True, metavar="I.npy", help="Rows of DATA to take, one per pair.")
    @option("segment_ids", required=True, metavar="S.npy", help="The output row of each pair, sorted.")
    @option("num_segments", type=int, default=None, metavar="N",
            help="Output rows [default: the last segment id + 1].")
    @option("output", required=True, metavar="OUT.npy", help="The dense result, a .npy file.")
    @common_options
    @click.pass_context
    def command(ctx, data, indices, segment_ids, num_segments, output):
        opts = settings(ctx)
        job = Job(name, quiet=opts["quiet"])
        try:
            r = op(data, output, indices=indices, segment_ids=segment_ids, num_segments=num_segments,
                   memory=opts["memory"], progress=job)
        finally:
            job.stop()
        job.summary(result=r, output=output, extra=f"dense {r['dtype']}")

    return command


def register(cli):
    for name in WHAT:
        cli.add_command(_command(name))
