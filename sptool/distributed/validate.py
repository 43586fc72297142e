"""validate on a cluster: every part of a directory checked by its own task (groups A, B and C of
formats/SPEC.md depend on that part alone), the checks across parts (group D: schema and metadata
agreement, the nnz total) by the driver as on one machine, so the report is the same."""

from __future__ import annotations

from .._memory import peak_rss
from ..io import locate
from ..ops.validate import check_part, checked_report
from ..report import Report
from .progress import follow
from .ranges import Outcome


def checked_part(path: str, name: str, **kw) -> tuple:
    """One part's PartCheck, and the worker's peak memory (a task)."""
    return check_part(path, name, **kw), peak_rss()


def parts_checker(client, *, metadata_only: bool, deep: bool, strict: bool = False, memory=None, progress=None):
    """A ``check_parts(path, names)`` for ``_Validator.directory`` that checks the parts on the
    cluster of ``client``, in parallel, and gives their PartChecks in part order."""

    def check_parts(path: str, names: list[str]) -> list:
        outcome = Outcome()
        futures = [client.submit(checked_part, path, name, metadata_only=metadata_only, deep=deep,
                                 strict=strict, memory=memory, pure=False) for name in names]
        done = follow(client, futures, outcome, progress=progress, rows=lambda result: result[0].nnz or 0)
        return [part for part, _ in done]

    return check_parts


def validate(path: str, *, client, metadata_only: bool = False, deep: bool = False, strict: bool = False,
             memory=None, progress=None) -> Report:
    """``sptool.validate`` with the parts of a directory checked in parallel on the cluster of
    ``client`` and the checks across parts run here: the same report.  A file or stream is one
    sequence of rows, checked here."""
    kw = dict(metadata_only=metadata_only, deep=deep, strict=strict, memory=memory, progress=progress)
    check_parts = parts_checker(client, **kw) if isinstance(path, str) and locate(path) == "dir" else None
    return checked_report(path, **kw, check_parts=check_parts)
