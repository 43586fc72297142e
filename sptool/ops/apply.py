"""apply: sparse optimizer steps (SGD, Adagrad, lazy Adam) from row-sparse gradients onto a dense
parameter table stored as .npy, in place through a memory map, all or nothing: the public op.
Its arguments are checked here; the steps, the optimizer state and the redo journal that makes
them all or nothing live in sptool/rowsparse/.
"""

from __future__ import annotations

import os

from .._memory import budget_of, parse_size
from ..errors import UsageError
from ..rowsparse import OPTIMIZERS, apply_steps

__all__ = ["OPTIMIZERS", "apply"]  # the optimizers' names: the command line's choices


def apply(table: str, gradients=(), *, optimizer: str = "sgd", lr: float | None = None, state: str | None = None,
          initial_accumulator: float = 0.1, eps: float | None = None, beta1: float = 0.9, beta2: float = 0.999,
          recover: bool = False, fsync: bool = True, journal_limit=None, tmp_dir: str | None = None, memory=None,
          progress=None) -> dict:
    """Apply row-sparse gradients, in order, to the dense table ``table`` (a float32 or float64
    .npy of shape [N, d1, ...]) in place, with Paddle's sparse SGD, Adagrad or lazy Adam.

    Each gradient is a row-sparse tensor (path, stream or SparseTensor) of shape [N, d1, ...]
    with one sparse dimension; rows repeated in it are summed first.  With g a touched row's
    summed gradient (untouched rows, and their state, are left alone):

    - ``sgd``: p -= lr * g.
    - ``adagrad``: acc += g*g; p -= lr * g / (sqrt(acc) + eps); acc starts at
      ``initial_accumulator`` (0.1), eps defaults to 1e-7 (Keras's values).
    - ``adam`` (lazy: Paddle's lazy_mode, tfa's LazyAdam, PyTorch's SparseAdam): m = b1 m +
      (1-b1) g; v = b2 v + (1-b2) g*g; p -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps),
      t the step count, advanced once per gradient; eps (1e-8) is added to sqrt(v), as PyTorch
      and Keras do (Paddle adds eps * sqrt(1-b2^t), i.e. eps on the bias-corrected v).

    ``state``: a directory holding the optimizer's state (``accumulator.npy`` or ``m.npy`` and
    ``v.npy``, the table's shape and type, and ``state.json`` with the step count), created on
    first use; refused if it belongs to another table, optimizer, shape or type.  Required by
    adagrad and adam; with sgd it keeps the step count.

    All or nothing, by a redo journal beside the table, fsynced with a commit record before the
    table is touched: when apply returns the update is durable, and after a crash or a kill the
    next apply (or ``recover=True``) replays or discards it.  ``journal_limit`` (a size) bounds
    the journal between checkpoints; ``fsync=False`` waits for no disk (all or nothing when the
    process is killed, not after a power loss).  The guide "Row-sparse tensors and apply"
    (docs/row-sparse.md) says how, and what is refused.

    Memory: the table and state are memory maps; only touched rows are read and written, in
    blocks within ``memory``; an unsorted gradient is sorted within ``memory`` (spilling to
    ``tmp_dir``).  Returns a summary dict.

    Examples
    --------
    >>> import tempfile, shutil, os
    >>> d = tempfile.mkdtemp(); table = os.path.join(d, "emb.npy")
    >>> _ = shutil.copy("sample_data/embeddings.npy", table)
    >>> apply(table, ["sample_data/grad.parquet"], optimizer="adam", lr=0.01, state=os.path.join(d, "st"))["step"]
    1
    """
    budget = budget_of(memory)
    limit = None if journal_limit is None else parse_size(journal_limit)
    if not isinstance(table, (str, os.PathLike)):
        raise UsageError(f"the table must be the path of a .npy file (apply updates it in place), not "
                         f"{type(table).__name__}")
    table = os.fspath(table)
    if isinstance(gradients, (str, os.PathLike)) or not hasattr(gradients, "__iter__"):
        gradients = [gradients]  # one gradient; what it is, open_input tells
    gradients = list(gradients)
    return apply_steps(table, gradients, optimizer=optimizer, lr=lr, state=state,
                       initial_accumulator=initial_accumulator, eps=eps, beta1=beta1, beta2=beta2, recover=recover,
                       fsync=fsync, limit=limit, tmp_dir=tmp_dir, budget=budget, progress=progress)
