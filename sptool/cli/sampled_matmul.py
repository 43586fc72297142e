"""sptool sampled-matmul."""

from __future__ import annotations

import click

from ..ops.sampled_matmul import sampled_matmul as sampled_matmul_op
from ._console import Job
from ._options import common_options, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("sampled-matmul")
@click.argument("mask", metavar="MASK")
@click.argument("a", metavar="A.npy")
@click.argument("b", metavar="B.npy")
@output_option()
@option("alpha", type=float, default=1.0, show_default=True, help="Scale of the product A @ B.")
@option("beta", type=float, default=1.0, show_default=True, help="Scale of the mask's own values.")
@tmp_dir_option
@common_options
@click.pass_context
def sampled_matmul(ctx, mask, a, b, output, alpha, beta, tmp_dir):
    """alpha * (A @ B) at the sparse MASK's coordinates, plus beta * MASK's values
    (TensorFlow's sparse.sampled_addmm, SDDMM).

    MASK is [..., m, n]; A and B are .npy files of [..., m, k] and [..., k, n] with
    equal leading (batch) dimensions. The output keeps MASK's indices, order and shape;
    only the values change. Values are floating point (float16/32/64; the three types
    promote as in NumPy). A MASK with repeated coordinates is summed first (the format's
    rule), so each coordinate gets alpha * (A @ B) once, where TensorFlow adds it once
    per stored row.

    Memory: MASK streams in batches; A and B are memory maps. B is read transposed, so
    a C-ordered B is copied once into its transpose (in memory within a third of
    --memory, else into --tmp-dir); a Fortran-ordered B is read in place. The dense
    product is never formed. Both cores compute the dot products.

    \b
    Example:
      sptool todense sample_data/matrix_a.parquet -o /tmp/a.npy
      sptool matmul sample_data/matrix_b.parquet /tmp/a.npy --adjoint-a -o /tmp/bta.npy
      sptool sampled-matmul sample_data/matrix_a.parquet /tmp/a.npy /tmp/bta.npy --alpha 0.5 -o /tmp/sampled.parquet
    """  # noqa: E501 (a help example is one shell line)
    opts = settings(ctx)
    job = Job("sampled-matmul", quiet=opts["quiet"])
    try:
        r = sampled_matmul_op(mask, a, b, output, alpha=alpha, beta=beta, memory=opts["memory"], tmp_dir=tmp_dir,
                              progress=job)
    finally:
        job.stop()
    job.summary(result=r, rows_out=r["rows"], extra=r["value_type"], output=output)


def register(cli):
    cli.add_command(sampled_matmul)
