"""sptool apply."""

from __future__ import annotations

import click

from ..ops import apply as ops
from ._console import Job
from ._options import common_options, settings, tmp_dir_option
from ._vocabulary import option


@click.command("apply")
@click.argument("table", metavar="TABLE.npy")
@click.argument("gradients", metavar="[GRAD...]", nargs=-1)
@option("optimizer", type=click.Choice(ops.OPTIMIZERS), default="sgd", metavar="RULE",
        help="sgd, adagrad or adam (above) [default: sgd].")
@option("lr", type=float, default=None, metavar="LR", help="The learning rate (required).")
@option("state", metavar="DIR", default=None,
        help="Optimizer state (adagrad, adam).")
@option("initial_accumulator", type=float, default=0.1, metavar="A",
        help="adagrad: acc's start [default: 0.1].")
@option("eps", type=float, default=None, metavar="EPS",
        help="Added to sqrt [default: 1e-7; adam 1e-8].")
@option("beta1", type=float, default=0.9, help="adam: b1 [default: 0.9].")
@option("beta2", type=float, default=0.999, help="adam: b2 [default: 0.999].")
@option("recover", is_flag=True,
        help="Only finish an interrupted apply and checkpoint.")
@option("journal_limit", metavar="SIZE", default=None,
        help="Checkpoint once the journal reaches SIZE.")
@option("fsync", default=True, help="--no-fsync: safe from kills, not power loss.")
@tmp_dir_option
@common_options
@click.pass_context
def apply(ctx, table, gradients, optimizer, lr, state, initial_accumulator, eps, beta1, beta2, recover, fsync,
          journal_limit, tmp_dir):
    """Apply row-sparse gradients to a .npy table in place (SGD, Adagrad, Adam).

    TABLE is a float .npy [N, d1, ...]; each GRAD a row-sparse tensor of that shape (Paddle's
    SelectedRows), repeated rows summed. With g a row's gradient and p its row of TABLE:

    \b
      sgd      p -= lr * g
      adagrad  acc += g*g; p -= lr * g / (sqrt(acc) + eps)
      adam     m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g   (lazy: touched rows only)
               p -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)

    All or nothing, by a journal beside TABLE: the docs' "Row-sparse tensors and apply" page
    tells it and each framework's defaults.

    Memory: memory maps; only the touched rows are read and written.

    \b
    Example:
      sptool convert sample_data/embeddings.npy -o /tmp/emb.parquet
      sptool todense /tmp/emb.parquet -o /tmp/emb.npy
      sptool apply /tmp/emb.npy sample_data/grad.parquet --optimizer adam --lr 0.01 --state /tmp/emb-adam
    """
    opts = settings(ctx)
    job = Job("apply", quiet=opts["quiet"])
    try:
        r = ops.apply(table, list(gradients), optimizer=optimizer, lr=lr, state=state,
                      initial_accumulator=initial_accumulator, eps=eps, beta1=beta1, beta2=beta2, recover=recover,
                      fsync=fsync, journal_limit=journal_limit, tmp_dir=tmp_dir, memory=opts["memory"],
                      progress=job)
    finally:
        job.stop()
    note = "" if r["recovered"] is None else f"; {_recovered(r['recovered'])} first"
    if recover:
        extra = "no journal found" if r["recovered"] is None else _recovered(r["recovered"])
    else:
        step = "" if r["step"] is None else f", step {r['step']}"
        extra = f"updated {r['rows']:,} rows of {table} ({r['optimizer']}, {r['gradients']} gradient(s){step}){note}"
    job.summary(result=r, rows_out=r["rows"], extra=extra)


def _recovered(rows: int) -> str:
    if rows < 0:
        return "discarded an interrupted apply that had not committed (TABLE untouched)"
    if rows:
        return f"finished an interrupted apply ({rows:,} rows written from its journal)"
    return "checkpointed the journal (its applies made durable in TABLE)"


def register(cli):
    cli.add_command(apply)
