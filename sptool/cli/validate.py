"""sptool validate."""

from __future__ import annotations

import click

from ..errors import SchedulerUnreachable, SptoolError
from ..ops.validate import validate as validate_op
from ._cluster import cluster, operation
from ._console import Job, out
from ._options import common_options, settings
from ._vocabulary import option

_STYLE = {"fatal": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


@click.command("validate")
@click.argument("tensors", metavar="TENSOR...", nargs=-1, required=True)
@option("as_json", is_flag=True, help="Print the report as JSON (one object per tensor, a list "
        "if several).")
@option("metadata_only", is_flag=True, help="Check metadata, schema and footers only; read no data.")
@option("deep", is_flag=True, help="Also check uniqueness when sort_order does not fix the row order.")
@option("strict", is_flag=True, help="Treat warnings as failures (exit 1), and require page checksums "
        "in Parquet files and a content digest in streams.")
@common_options
@click.pass_context
def validate(ctx, tensors, as_json, metadata_only, deep, strict):
    """Check tensors against every rule of the format spec.

    Reports each problem with a stable code and the first offending entry, e.g.
    "indices[3] = [1,0] is out of order". Every tensor named is checked, even after one
    fails. Exit 0 if all are valid (warnings allowed unless --strict), 1 if any is invalid,
    2 if any could not be read at all.

    Memory: one streaming pass in batches within --memory (--deep holds the index
    columns in memory). On a cluster each part of a directory is checked by its own
    task, the checks across parts here; a single Parquet file's rows by a task per run
    of its row groups, its footer here: the same report. A TENSOR may be a URL (s3://...,
    as pyarrow's filesystems resolve them): every check is made, and the report is the
    same as for the local copy of the file.

    \b
    Example:
      sptool validate sample_data/tensor3d.parquet sample_data/digits.parquet
      sptool validate --json sample_data/unsorted.parquet
    """
    opts = settings(ctx)
    with cluster(ctx.obj, opts["quiet"] or as_json) as client:
        docs, worst = _validate_all(tensors, as_json, metadata_only, deep, strict, opts, client)
    if as_json:
        import json

        click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    ctx.exit(worst)


def _validate_all(tensors, as_json, metadata_only, deep, strict, opts, client):
    docs, worst = [], 0
    for path in tensors:
        job = Job(f"validate {path}", quiet=opts["quiet"] or as_json, inputs=[path])
        try:
            report = operation("validate", validate_op, client)(path, metadata_only=metadata_only, deep=deep,
                                                                strict=strict, memory=opts["memory"], progress=job)
        except SptoolError as e:
            if isinstance(e, SchedulerUnreachable):  # the job's failure, not this tensor's
                raise
            # One unreadable tensor does not stop the others; its line says why, and the exit
            # code is the worst of all.
            # The path leads the line already; a path inside the message is another file's.
            message = " ".join((e.message if e.path == path else str(e)).split())
            worst = max(worst, e.exit_code)
            docs.append({"target": path, "valid": False, "error": message, "exit_code": e.exit_code})
            if not as_json:
                from rich.markup import escape

                out.print(f"{escape(path)}: [bold red]UNREADABLE[/] ({escape(message)})")
            job.summary(result=docs[-1], line=False, exit_code=e.exit_code, error=message)
            continue
        finally:
            job.stop()
        worst = max(worst, report.exit_code(strict))
        doc = report.as_dict()
        doc["valid"] = report.ok(strict)
        docs.append(doc)
        if not as_json:
            _print(report, strict)
        # A file that could not be read at all has no rows worth a line.
        job.summary(result=doc, line=not as_json and (job.rows > 0 or report.ok(strict)),
                    exit_code=report.exit_code(strict))
    return docs, worst


def _print(report, strict: bool):
    verdict = "[green]valid[/]" if report.ok(strict) else \
        "[bold red]UNREADABLE[/]" if report.unreadable else "[bold red]INVALID[/]"
    nnz = f", {report.nnz:,} entries" if report.nnz is not None else ""
    out.print(f"{report.target}: {verdict} ({report.mode}{nnz})")
    if not report.problems:
        return
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("severity", "code", "where", "message"):
        table.add_column(col, overflow="fold")
    for p in report.problems:
        where = " ".join(f"{k}={v}" for k, v in p.location.items() if k != "index" and v is not None)
        table.add_row(f"[{_STYLE[p.severity]}]{p.severity}[/]", p.code, where, p.message)
    out.print(table)


def register(cli):
    cli.add_command(validate)
