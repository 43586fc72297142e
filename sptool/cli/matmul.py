"""sptool matmul."""

from __future__ import annotations

import click

from .._memory import format_size
from ..ops.matmul import matmul as matmul_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, input_argument, output_option, settings, tmp_dir_option
from ._vocabulary import option


@click.command("matmul")
@input_argument("a")
@input_argument("b")
@output_option(help_text="A .npy when an operand is dense; else a sparse output [default: - (stdout)].")
@option("adjoint_a", is_flag=True, help="Use the conjugate transpose of A.")
@option("adjoint_b", is_flag=True, help="Use the conjugate transpose of B.")
@tmp_dir_option
@common_options
@click.pass_context
def matmul(ctx, a, b, output, adjoint_a, adjoint_b, tmp_dir):
    """Matrix product A' B' (TensorFlow's sparse_dense_matmul; ' is the conjugate transpose
    with --adjoint-a/--adjoint-b).

    Sparse x dense .npy, or dense x sparse, gives a dense .npy (-o OUT.npy); sparse x sparse a
    sparse, canonical product. Sparse operands may be in any order; duplicates accumulate;
    types follow NumPy. Implicit zeros take no part: a stored inf times a dense 0 is nan, an
    inf facing an implicit zero adds nothing.

    Memory: the sparse operand streams; dense operands are memory maps; sparse x sparse holds
    B in half of --memory, or takes it in slabs (sptool help memory).

    \b
    Example:
      sptool matmul sample_data/matrix_a.parquet sample_data/dense_b.npy -o /tmp/ab.npy
      sptool matmul sample_data/matrix_a.parquet sample_data/matrix_b.parquet --adjoint-b -o /tmp/abt.parquet
    """
    opts = settings(ctx)
    r, job = run_job("matmul", matmul_op, opts, ctx.obj, a, b, output, adjoint_a=adjoint_a, adjoint_b=adjoint_b,
                     memory=opts["memory"], tmp_dir=tmp_dir)
    if r["output"] == "dense":
        job.summary(result=r, output=output, extra=cluster_extra(r, f"dense {r['dtype']}, {format_size(r['bytes'])}"))
    else:
        job.summary(result=r, rows_out=r["rows_out"], extra=cluster_extra(r), output=output)


def register(cli):
    cli.add_command(matmul)
