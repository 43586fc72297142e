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
        help="Axes to reduce, e.g. 0,-1 [default: all: a scalar].")
@option("keepdims", is_flag=True, help="Keep reduced axes, of extent 1.")
@option("empty_value", metavar="V", default=None,
        help="Result where no entry lands [default: fill value].")
@option("output", metavar="PATH", default=None,
        help="OUT.npy (dense), else sparse [default: - (stdout)].")
@option("as_json", is_flag=True, help='Print a scalar result as {"value": ...}.')
@tmp_dir_option
@common_options
@click.pass_context
def reduce(ctx, tensor, op, axis, keepdims, empty_value, output, as_json, tmp_dir):
    """Reduce over axes with sum, max, min, prod, mean or count (TensorFlow's
    reduce_sum / reduce_max, plus the others).

    Every op sees the stored entries only, duplicates summed first; the fill value takes no
    part. A .npy output is dense, with --empty-value where no entry landed; any other output
    is sparse and canonical; reducing every axis prints a scalar. Types: sum and prod keep
    the value type (integers wrap), mean of integers is float64, count is int64.

    Memory: one pass when the kept dimensions lead the sort order or fit --memory; else an
    external sort first (sptool help memory).

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
