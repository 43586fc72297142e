"""validate on a cluster: every part of a directory checked by its own task (groups A, B and C of
formats/SPEC.md depend on that part alone), the checks across parts (group D: schema and metadata
agreement, the nnz total) by the driver as on one machine, so the report is the same.  A single
Parquet file's footer is checked by the driver and its rows (group C) by tasks, a run of its row
groups each, which start from the row before the run as the whole scan does: the findings,
merged in row order, are the single machine's."""

from __future__ import annotations

from .._memory import peak_rss
from ..io import locate
from ..ops.validate import check_part, checked_report, scan_run
from ..report import Report
from .cluster import worker_count
from .pieces import runs_of
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


def scanned_run(path: str, chunks: list, before, **kw) -> tuple:
    """One run of a file's row-group chunks scanned (ops.validate.scan_run), and the worker's peak
    memory (a task)."""
    return scan_run(path, chunks, before, **kw), peak_rss()


def runs_scanner(client, progress=None):
    """A ``scan_runs(path, chunks, rows, kw)`` for ``_Validator`` that scans a file's chunks in runs
    (pieces.runs_of: a few per worker), a task each, and gives their RunScans in row order."""

    def scan_runs(path: str, chunks: list, rows: list, kw: dict) -> list:
        runs = runs_of([(path, list(range(len(chunks))), rows, 0)], worker_count(client), path)
        futures = [client.submit(scanned_run, path, [chunks[c] for c in run.groups],
                                 chunks[run.groups[0] - 1] if run.groups[0] else None, **kw, pure=False)
                   for run in runs]
        done = follow(client, futures, Outcome(), progress=progress, rows=lambda result: result[0].rows)
        return [scan for scan, _ in done]

    return scan_runs


def validate(path: str, *, client, metadata_only: bool = False, deep: bool = False, strict: bool = False,
             memory=None, progress=None) -> Report:
    """``sptool.validate`` with the parts of a directory checked in parallel on the cluster of
    ``client`` and the checks across parts run here: the same report.  A Parquet file's rows are
    checked by tasks, a run of its row groups each (--deep of a tensor that claims uniqueness
    without a full sort order, which holds every key at once, and a file of row groups too large to
    read whole, on the driver); a stream is one sequence of rows, checked here."""
    kw = dict(metadata_only=metadata_only, deep=deep, strict=strict, memory=memory, progress=progress)
    kind = locate(path) if isinstance(path, str) else None
    check_parts = parts_checker(client, **kw) if kind == "dir" else None
    scan_runs = runs_scanner(client, progress) if kind == "parquet" else None
    return checked_report(path, **kw, check_parts=check_parts, scan_runs=scan_runs)
