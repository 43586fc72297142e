"""sptool reduce."""

from __future__ import annotations

import json
import math

import click

from ..errors import UsageError
from ..ops.reduce import OPS
from ..ops.reduce import reduce as reduce_op
from ._cluster import cluster, cluster_extra, operation
from ._console import Job
from ._options import INT_LIST, common_options, input_argument, parse_scalar, settings, tmp_dir_option
from ._vocabulary import option


@click.command("reduce")
@input_argument()
@option("op", type=click.Choice(OPS), required=True, help="The reduction.")
@option("axis", type=INT_LIST, multiple=True, metavar="A",
        help="An axis to reduce (repeatable, or comma-separated); negative values count from the end "
             "[default: all axes, giving a scalar].")
@option("keepdims", is_flag=True, help="Keep reduced axes with extent 1 (index 0).")
@option("empty_value", metavar="V", default=None,
        help="Result for cells no stored entry reaches [default: the fill value; 0 for count].")
@option("output", metavar="PATH", default=None,
        help="OUT.npy for the dense result; else a sparse result: a .parquet file, a directory (ending "
             "in /), a .arrows stream, or - for stdout (the default; an Arrow IPC stream). A scalar "
             "result is printed instead.")
@option("as_json", is_flag=True, help='Print a scalar result as {"value": ...}.')
@tmp_dir_option
@common_options
@click.pass_context
def reduce(ctx, tensor, op, axis, keepdims, empty_value, output, as_json, tmp_dir):
    """Reduce over axes with sum, max, min, prod, mean or count (TensorFlow's
    reduce_sum / reduce_max, plus the others).

    Every op sees the stored entries only, after duplicate coordinates are summed:
    max, min and prod run over the distinct stored coordinates of a group, count
    counts them and mean is sum / count. The fill value takes no part (TensorFlow's
    is 0). A .npy output is dense, with --empty-value where no entry landed (as
    TensorFlow's reduce_max gives 0 there); any other output is sparse: one entry per
    non-empty group, canonical. sum and prod keep the value type (integers wrap),
    mean of integers is float64, count is int64; max and min refuse complex values.
    Reducing a dense dimension of a hybrid tensor reduces inside the blocks.

    Memory: one streaming pass when the kept dimensions lead the input's sort order,
    or when the other kept dimensions have few enough coordinates to accumulate
    within --memory; otherwise an external sort first (runs spilled to --tmp-dir).

    On a cluster, reductions whose result does not depend on the order of operations
    are reduced piece by piece and the partials combined: integer sum (any input);
    integer max, min, prod and count when no coordinate has rows on two parts (from
    the parts' unique claims and their seams). Float values and mean take the exact
    path: rows shuffled into ranges of the kept dimensions, each reduced whole, so
    float sums come out bit for bit as on one machine.

    \b
    Example:
      sptool reduce sample_data/tensor3d.parquet --op sum --axis 1 -o /tmp/reduced.parquet
      sptool reduce sample_data/digits.parquet --op max --axis 0 -o /tmp/pixel_max.npy
      sptool reduce sample_data/unsorted.parquet --op count
    """
    opts = settings(ctx)
    axis = None if not axis else [a for group in axis for a in group]
    with cluster(ctx.obj, opts["quiet"]) as client:
        job = Job("reduce", quiet=opts["quiet"] or (axis is None and not keepdims))
        try:
            r = operation("reduce", reduce_op, client)(tensor, "-" if output is None else output, op=op, axis=axis,
                                                       keepdims=keepdims, empty_value=parse_scalar(empty_value),
                                                       memory=opts["memory"], tmp_dir=tmp_dir, progress=job)
        finally:
            job.stop()
    if not isinstance(r, dict):
        click.echo(json.dumps({"value": _json_value(r)}) if as_json else _text(r))
        job.summary(result={"value": r}, line=False)
        return
    if as_json:
        if output in (None, "-"):
            raise UsageError("--json prints a scalar result or the summary of a written output, but stdout "
                             "carries the result tensor here; name an output with -o")
        click.echo(json.dumps(r))
    job.summary(result=r, rows_out=r["rows_out"], extra=cluster_extra(r), output=output)


def _json_value(v):
    if isinstance(v, complex):
        return [_json_value(v.real), _json_value(v.imag)]
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return v


def _text(v) -> str:
    return repr(v) if isinstance(v, (float, complex)) else str(v)


def register(cli):
    cli.add_command(reduce)
