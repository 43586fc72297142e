"""sptool mul and sptool div."""

from __future__ import annotations

import click

from ..ops.mul import div as div_op
from ..ops.mul import mul as mul_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, output_option, settings


def _run(ctx, name, op, tensor, dense, output):
    opts = settings(ctx)
    r, job = run_job(name, op, opts, ctx.obj, tensor, dense, output, memory=opts["memory"])
    job.summary(result=r, rows_out=r["rows"], extra=cluster_extra(r, r["value_type"]), output=output)


@click.command("mul")
@input_argument()
@click.argument("dense", metavar="D.npy|NUMBER")
@output_option()
@common_options
@click.pass_context
def mul(ctx, tensor, dense, output):
    """Multiply a sparse tensor by a dense .npy broadcast to its shape (TensorFlow's sp * dense),
    or by a number (sptool mul T.parquet 2.5; a negative one after --: sptool mul T.parquet -- -1).

    D broadcasts by NumPy's rules to the sparse shape only (each dimension of D, aligned on the
    right, equals the tensor's or is 1: a (1, n) or (n,) array scales the columns); the tensor
    never broadcasts. The output keeps the tensor's indices, order and uniqueness; implicit
    zeros stay implicit. Value types follow NumPy promotion.

    When the value type changes (an int8 tensor times a float D) and the tensor does not
    promise unique coordinates, rows sharing a coordinate are first summed in the tensor's
    own type (the format's rule: they mean their sum, wrapping as that type does), so the
    output is canonical (row-major, unique) rather than in the input's order. TensorFlow
    multiplies each stored row instead.

    Memory: the tensor streams through in batches; D is read through a memory map, one
    gathered value per row.

    \b
    Example:
      sptool todense sample_data/matrix_b.parquet -o /tmp/matrix_b.npy
      sptool mul sample_data/matrix_a.parquet /tmp/matrix_b.npy -o /tmp/product.parquet
      sptool mul sample_data/digits.parquet 0.0625 -o /tmp/scaled.parquet
    """  # noqa: E501 (a help example is one shell line)
    _run(ctx, "mul", mul_op, tensor, dense, output)


@click.command("div")
@input_argument()
@click.argument("dense", metavar="D.npy|NUMBER")
@output_option()
@common_options
@click.pass_context
def div(ctx, tensor, dense, output):
    """Divide a sparse tensor by a dense .npy broadcast to its shape (TensorFlow's sp / dense),
    or by a number.

    Broadcasting and output as for mul. Types follow TensorFlow's true division: (u)int8/16
    give float32, (u)int32/64 give float64, floats stay. Division by zero gives inf or nan
    (IEEE), silently.

    An integer tensor changes type, so when it does not promise unique coordinates, rows
    sharing a coordinate are first summed in its own type (they mean their sum; summing
    after division would round each part), and the output is canonical (row-major, unique)
    rather than in the input's order. TensorFlow divides each stored row instead; the dense
    results agree except where the integer sum wraps.

    Memory: the tensor streams through in batches; D is read through a memory map.

    \b
    Example:
      sptool todense sample_data/digits.parquet -o /tmp/digits.npy
      sptool div sample_data/digits.parquet /tmp/digits.npy -o /tmp/ones.parquet
      sptool div sample_data/digits.parquet 16 -o /tmp/digits16.parquet
    """  # noqa: E501 (a help example is one shell line)
    _run(ctx, "div", div_op, tensor, dense, output)


def register(cli):
    cli.add_command(mul)
    cli.add_command(div)
