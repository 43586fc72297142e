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
@output_option(help_text="Output: a .npy file when an operand is dense; for sparse x sparse a .parquet file, a "
               "directory (ending in /), a .arrows stream, or - for stdout (the default).")
@option("adjoint_a", is_flag=True, help="Use the conjugate transpose of A.")
@option("adjoint_b", is_flag=True, help="Use the conjugate transpose of B.")
@tmp_dir_option
@common_options
@click.pass_context
def matmul(ctx, a, b, output, adjoint_a, adjoint_b, tmp_dir):
    """Matrix product A' B' (TensorFlow's sparse_dense_matmul; ' is the conjugate transpose
    with --adjoint-a/--adjoint-b).

    A sparse matrix times a dense .npy, or a dense .npy times a sparse matrix, gives a dense
    .npy (-o OUT.npy). Two sparse matrices give a sparse, canonical product. Sparse operands
    may be in any order; duplicates accumulate; an index outside the shape is an error naming
    the entry. Value types follow NumPy promotion.

    inf and nan: implicit zeros of a sparse operand take no part in any product; its stored
    values and every element of a dense operand do. So a stored inf times a dense 0 is nan
    (as in NumPy and TensorFlow's sparse_dense_matmul), while an inf facing an implicit zero
    contributes nothing, in sparse x sparse as in sparse x dense (a dense product of the two
    would give nan there).

    Memory: the sparse operand streams through in batches, on two threads; dense operands
    and the dense output are memory maps. Sparse x sparse sorts A by rows within --memory
    (spilling to --tmp-dir) and holds B in memory when it fits in half of --memory; a bigger B
    is taken in slabs that do (A is read once per slab). B's column count must stay small
    enough for two dense rows of it in a quarter of --memory. On a cluster (--scheduler), the
    sparse operand's entries go by ranges of output rows (of output columns for dense x sparse),
    and each task computes whole output rows as one machine does, so the result is identical,
    float sums included: a dense product's tasks write their rows into the .npy on shared
    storage (the dense operand is read there by every worker; both are paths, never URLs of
    other filesystems); sparse x sparse writes a part directory (-o DIR/, or a URL such as
    s3://bucket/p/), each task multiplying its rows of A by all of B (read by every task, in
    slabs when B does not fit in half of --memory).

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
