"""Row-sparse updates of dense tables: the optimizer steps of ``sptool.apply`` (steps.py) and the
redo journal that makes them all or nothing (journal.py), on .npy files updated in place through
memory maps.  Below the ops, above the engine: it reads its gradients through the engine's sort and
writes the tables itself."""

from .steps import OPTIMIZERS, apply_steps

__all__ = ["OPTIMIZERS", "apply_steps"]
