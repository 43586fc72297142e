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
@option("optimizer", type=click.Choice(ops.OPTIMIZERS), default="sgd", show_default=True,
        help="The update rule (formulas above).")
@option("lr", type=float, default=None, metavar="LR", help="The learning rate (required).")
@option("state", metavar="DIR", default=None,
        help="The optimizer's state directory, created on first use (required by adagrad and adam).")
@option("initial_accumulator", type=float, default=0.1, show_default=True, metavar="A",
        help="adagrad: the accumulator's starting value, when --state is created.")
@option("eps", type=float, default=None, metavar="EPS",
        help="adagrad and adam: added to the square root [default: 1e-7 adagrad, 1e-8 adam].")
@option("beta1", type=float, default=0.9, show_default=True, help="adam: decay of the first moment.")
@option("beta2", type=float, default=0.999, show_default=True, help="adam: decay of the second moment.")
@option("recover", is_flag=True,
        help="Only checkpoint: finish (or discard, if it never committed) an interrupted apply on TABLE, "
             "and make the applies in the journal durable in TABLE itself, removing the journal (no "
             "gradients).")
@option("journal_limit", metavar="SIZE", default=None,
        help="Checkpoint first when the journal has reached SIZE (0: every apply checkpoints the one "
             "before) [default: the larger of 256MiB and 1/8 of TABLE and its state].")
@option("fsync", default=True, show_default=True,
        help="--no-fsync waits for no disk: still all or nothing if sptool is killed (SIGKILL, Ctrl-C, a "
             "crash of the process), NOT after a power loss or OS crash, which can leave TABLE torn. "
             "(Creating a --state always fsyncs.)")
@tmp_dir_option
@common_options
@click.pass_context
def apply(ctx, table, gradients, optimizer, lr, state, initial_accumulator, eps, beta1, beta2, recover, fsync,
          journal_limit, tmp_dir):
    """Apply row-sparse gradients, in order, to a dense table .npy in place (sparse SGD, Adagrad, lazy Adam).

    TABLE is a float32 or float64 .npy of shape [N, d1, ...]; each GRAD a row-sparse
    tensor of shape [N, d1, ...] (one sparse dimension: Paddle's SelectedRows,
    TensorFlow's IndexedSlices; build one with `sptool convert --rows`). Rows repeated
    in a gradient are summed first (Paddle's MergeAdd; PyTorch's SparseAdam and Keras
    do the same). With g a touched row's summed gradient and p its row of TABLE:

    \b
      sgd      p -= lr * g                                  (Paddle sgd)
      adagrad  acc += g*g; p -= lr * g / (sqrt(acc) + eps)  (Keras Adagrad: acc
               starts at --initial-accumulator 0.1, eps 1e-7; Paddle's adagrad
               has the same formula with eps 1e-6, PyTorch's acc 0, eps 1e-10)
      adam     m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
               p -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)

    adam is lazy (Paddle's lazy_mode, tfa's LazyAdam, PyTorch's SparseAdam): only
    touched rows update their moments; t, the step count, advances once per gradient.
    eps is added to sqrt(v) as PyTorch's SparseAdam and Keras do (Kingma and Ba's
    "epsilon hat"); Paddle adds eps * sqrt(1-b2^t) instead, the same as eps on the
    bias-corrected v: to match Paddle, pass --eps EPS*sqrt(1-b2^t). Arithmetic is in
    the table's type. The state (accumulator.npy, or m.npy and v.npy, beside
    state.json with the step count) lives in --state DIR, created on first use and
    refused if it belongs to another table, optimizer, shape or type.

    All or nothing, by a redo (write-ahead) journal beside TABLE
    (.TABLE.npy.journal): the touched rows' NEW contents (table and state) and the
    new step count are appended to it, then a commit record that vouches for them
    (by their CRCs), and the journal is fsynced once; only then are the rows
    written into TABLE and the state,
    and apply returns without waiting for their writeback. Why: syncing TABLE
    itself waits for every 4 KiB page a touched row sits on (100k random rows of a
    2M x 64 float32 table and its two Adam moments dirty about 850 MB of pages),
    where the journal is written in one sequential piece (about 75 MB there).

    \b
    What is durable when apply returns: the whole update, in the journal.
    Checkpoints: applies accumulate in the journal (a database's write-ahead log);
    an apply first checkpoints it (fdatasync of TABLE and the state, which waits
    for the pages the OS has not yet written back, then the journal is removed)
    when the journal has reached --journal-limit (default: the larger of 256 MiB
    and 1/8 of TABLE and its state), is older than the OS's writeback delay (35 s
    by Linux's defaults: the pages are then on disk and the sync waits for
    little), belongs to another state, or TABLE or the state changed since the
    last apply (a TABLE replaced by cp or np.save is synced as it stands and the
    journal of the applies to the one it replaced dropped). So the journal grows
    to at most --journal-limit plus one apply's; a checkpoint costs one write of
    the pages the accumulated applies dirtied that the OS has not written back (at
    most TABLE and the state, in file order). --recover checkpoints at once.

    A crash, SIGKILL or Ctrl-C at any moment leaves TABLE and its state entirely
    old or entirely new after the next apply or --recover: an apply cut short
    before its whole commit record is discarded (TABLE was never touched by it),
    committed ones are replayed in order (each holds the final contents of its
    rows, so replaying twice changes nothing); rows are written again only if the
    system itself crashed since or the process was killed while writing them (a
    page cache that outlived the process already holds them). Before a replay each
    journaled row of TABLE and the state must be, piece by piece (cut at 4 KiB
    pages, the unit the OS writes back), its contents before or after one of the
    journaled applies (by a CRC-32C the journal keeps), but for the row a killed
    copy was writing (one per array, and one more for each replay a durable
    "replay began" record says was started): a TABLE replaced since (cp, np.save:
    same name and shape) is refused, exit 1, nothing touched; to discard those
    applies, remove .TABLE.npy.journal. The check goes a range of row ids at a
    time, within --memory. Ctrl-C or SIGTERM after the commit
    record waits until the rows are written (memory copies), then apply exits
    130 / 143 saying the update was applied. Bad input (block shape, height, a row
    id outside the table, a value type that would lose precision such as float64
    onto float32, a state of another table) is an error, exit 1, and TABLE is left
    untouched. One apply at a time per table (a lock). --no-fsync keeps the same
    journal and order of writes but waits for no disk (it drops an earlier journal
    without a checkpoint's sync), and removes its journal as it returns: the
    journal and rows are in the OS page cache, which outlives a killed process,
    but a power loss or OS crash can lose them (as a NumPy script's np.save, which
    does not fsync either).

    Memory: TABLE and the state are memory maps; only the touched rows are read and
    written, in blocks within --memory (a 1% gradient costs about 1% of the table
    in I/O, plus the journal: on disk, the touched rows' new contents, table and
    state); an unsorted gradient is first sorted within --memory.

    \b
    Example:
      sptool convert sample_data/embeddings.npy -o /tmp/emb.parquet
      sptool todense /tmp/emb.parquet -o /tmp/emb.npy
      sptool apply /tmp/emb.npy sample_data/grad.parquet --optimizer adam --lr 0.01 --state /tmp/emb-adam
      sptool apply /tmp/emb.npy sample_data/grad.parquet --optimizer sgd --lr 0.1
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
