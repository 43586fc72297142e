"""sptool retain."""

from __future__ import annotations

import click

from ..errors import UsageError
from ..ops.retain import retain as retain_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, output_option, settings
from ._vocabulary import option


@click.command("retain")
@input_argument()
@output_option()
@option("mask", metavar="M.npy", default=None,
        help="A 1-D bool .npy with one flag per row, in file order: keep the True rows.")
@option("where", metavar="EXPR", default=None,
        help="Keep the rows where EXPR holds, e.g. 'values > 0 and indices_1 % 2 == 0'.")
@common_options
@click.pass_context
def retain(ctx, tensor, output, mask, where):
    """Keep the rows selected by a mask or a condition, in their order (TensorFlow's
    sparse retain). Shape, sort order and uniqueness carry over.

    \b
    --where language: values, indices_0, indices_1, ...; numbers (also nan, inf),
    'strings', true, false; + - * / %; < <= > >= == != (chainable: 0 < values < 1);
    and, or, not, parentheses; abs(x), isnan(x); any(c) / all(c) reduce a condition
    over the dense block of a hybrid tensor (needed there: values is a block).
    It is parsed, never run as Python. Binary values take --mask only.

    Memory: one pass in batches within --memory; the mask is memory-mapped. On a cluster
    (--scheduler) each part is filtered by its own task, with --where only.

    \b
    Example:
      sptool retain sample_data/tensor3d.parquet --where "values > 0 and indices_0 < 10" -o /tmp/retained.parquet
      sptool retain sample_data/digits.parquet --where "values >= 8" -o /tmp/dark.parquet
    """
    opts = settings(ctx)
    if (mask is None) == (where is None):
        raise UsageError("give exactly one of --mask M.npy and --where EXPR")
    r, job = run_job("retain", retain_op, opts, ctx.obj, tensor, output, mask=mask, where=where,
                     memory=opts["memory"])
    job.summary(result=r, rows_out=r["rows_out"], extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(retain)
