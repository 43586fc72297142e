"""validate on a cluster: every part of a directory checked by its own task (groups A, B and C of
formats/SPEC.md depend on that part alone), the checks across parts (group D: schema and metadata
agreement, the nnz total) by the driver as on one machine, so the report is the same."""

from __future__ import annotations

from .._memory import peak_rss
from .progress import follow
from .ranges import Outcome


def checked_part(check_part, path: str, name: str, **kw) -> tuple:
    """One part's PartCheck, and the worker's peak memory (a task)."""
    return check_part(path, name, **kw), peak_rss()


def parts_checker(client, check_part, *, metadata_only: bool, deep: bool, strict: bool = False, memory=None,
                  progress=None):
    """A ``check_parts(path, names)`` for ``_Validator.directory`` that checks the parts on the
    cluster of ``client`` with ``check_part`` (ops.validate's, handed down: this package does not
    import the ops), in parallel, and gives their PartChecks in part order."""

    def check_parts(path: str, names: list[str]) -> list:
        outcome = Outcome()
        futures = [client.submit(checked_part, check_part, path, name, metadata_only=metadata_only, deep=deep,
                                 strict=strict, memory=memory, pure=False) for name in names]
        done = follow(client, futures, outcome, progress=progress, rows=lambda result: result[0].nnz or 0)
        return [part for part, _ in done]

    return check_parts
