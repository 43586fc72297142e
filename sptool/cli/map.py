"""sptool map."""

from __future__ import annotations

import click

from ..ops.map_values import FUNCTIONS
from ..ops.map_values import map_values as map_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("map")
@input_argument()
@option("fn", type=click.Choice(list(FUNCTIONS)), required=True, metavar="FN",
        help="The function: " + ", ".join(FUNCTIONS) + ".")
@option("allow_fill_change", is_flag=True,
        help="Accept a function that changes the fill value (e.g. exp of 0 is 1): the output's fill value "
             "becomes f(fill), so unstored cells are mapped too.")
@output_option()
@tmp_dir_option
@common_options
@click.pass_context
def map_(ctx, tensor, fn, allow_fill_change, output, tmp_dir):
    """Apply an elementwise function to the stored values (TensorFlow's map_values).

    Indices, order and uniqueness stay; the value type follows NumPy (sqrt of
    integers is float64, abs of complex is real). Stored zeros are mapped too. A
    function that does not keep the fill value (exp, cos, cosh, log, arccos,
    reciprocal or logical_not of a 0 fill) is refused unless --allow-fill-change, which sets the output's fill value to
    f(fill). Duplicate coordinates hold a sum and f(a) + f(b) is not f(a + b), so
    unless the function is additive (neg, conj, real, imag) duplicates are summed
    first and the output is unique.

    Memory: streams batch by batch; summing the duplicates of a tensor that is not
    fully sorted needs the external sort (runs spilled to --tmp-dir).

    \b
    Example:
      sptool map sample_data/tensor3d.parquet --fn square -o /tmp/squared.parquet
      sptool map sample_data/matrix_a.parquet --fn exp --allow-fill-change -o /tmp/exp.parquet
    """
    opts = settings(ctx)
    r, job = run_job("map", map_op, opts, ctx.obj, tensor, output, fn=fn, allow_fill_change=allow_fill_change,
                     memory=opts["memory"], tmp_dir=tmp_dir)
    extra = cluster_extra(r, f"{r['value_type']}, fill value {r['fill_value']!r}")
    job.summary(result=r, rows_out=r["rows_out"], extra=extra, output=output)


def register(cli):
    cli.add_command(map_)
