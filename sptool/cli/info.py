"""sptool info and sptool head."""

from __future__ import annotations

import json
import math

import click

from .._memory import format_size
from ..format import index_column
from ..ops.info import head as head_op
from ..ops.info import info as info_op
from ._cluster import cluster, operation
from ._console import Job, out
from ._options import common_options, input_argument, settings
from ._vocabulary import option


@click.command("info")
@input_argument()
@option("as_json", is_flag=True, help="Print the summary as JSON.")
@option("scan", is_flag=True, help="Read the index columns to get exact per-dimension ranges "
        "(otherwise they come from row-group statistics).")
@option("histogram", type=int, default=None, metavar="AXIS",
        help="Also draw the distribution of stored entries per index of a sparse AXIS (nnz per row for 0), "
             "counted in the same one pass.")
@common_options
@click.pass_context
def info(ctx, tensor, as_json, scan, histogram):
    """Summarise a tensor: shape, nnz, density, types, order flags, index ranges, storage.

    A row-sparse tensor (one sparse dimension with dense rows, Paddle's SelectedRows)
    shows "row-sparse: n rows of [d1, ...]" and the fraction of its height touched.

    An AnnData file (.h5ad, or a .zarr store) is summarised by its X, followed by every
    matrix it holds, sparse or dense (X, layers, obsm, varm, obsp, varp, raw): key,
    layout, shape, stored entries and value type (JSON: "matrices").

    Memory: reads only the Parquet footers (a stream, --scan or --histogram is read
    once in batches within --memory; --histogram adds 8 bytes per index of its axis;
    a row-sparse tensor whose rows may repeat is read once too, one byte per row of
    its height). On a cluster the footers of a directory's parts are read in
    parallel; rows, if read, are read here.

    \b
    Example:
      sptool info sample_data/digits.parquet
      sptool info --histogram 0 sample_data/digits.parquet
      sptool info --json sample_data/rowsparse.parquet
    """
    opts = settings(ctx)
    with cluster(ctx.obj, opts["quiet"] or as_json) as client:
        job = Job("info", quiet=opts["quiet"] or not (scan or histogram is not None))
        try:
            d = operation("info", info_op, client)(tensor, scan=scan, histogram=histogram, memory=opts["memory"],
                                                   progress=job)
        finally:
            job.stop()
    if as_json:
        click.echo(json.dumps(_jsonable_dict(d), indent=2, default=str, allow_nan=False))
    else:
        _print_info(d)
    job.summary(result=_jsonable_dict(d))


def _print_info(d: dict):
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("path", f"{d['path']} ({d['kind']})"),
        ("shape", str(d["shape"]) + (f"  (dense block {d['dense_shape']})" if d["dense_shape"] else "")),
        ("nnz", f"{d['nnz']:,}" if d["nnz"] is not None else "unknown"),
        ("density", f"{d['density']:.3g}"),
        ("value type", f"{d['value_type']}, fill value {d['fill_value']!r}" + (", iso" if d["iso"] else "")),
        ("order", f"sort_order {d['sort_order']}, unique {d['unique']}, canonical {d['canonical']}"),
    ]
    if "row_sparse" in d:
        rs = d["row_sparse"]
        touched = "unknown (over --memory)" if rs["distinct_rows"] is None else \
            f"{rs['distinct_rows']:,} distinct, {rs['touched']:.3g} of the height {rs['height']:,} touched"
        rows.append(("row-sparse", f"{rs['rows']:,} rows of {rs['block']}; {touched}"))
    for k in range(d["sparse_ndim"]):
        name = (d["dimension_names"] or [None] * len(d["shape"]))[k]
        label = index_column(k) + (f" ({name})" if name else "")
        span = "not read (--scan reads it)" if d["min_index"][k] is None else \
            f"{d['min_index'][k]} .. {d['max_index'][k]}"
        rows.append((label, f"{span}  of {d['shape'][k]}"))
    if "parts" in d:
        rows.append(("storage", f"{d['parts']} part(s), {d['row_groups']} row group(s), "
                     f"{format_size(d['bytes'])}"
                     + (f", {d['bytes_per_entry']:.1f} bytes per entry" if d.get("bytes_per_entry") else "")))
    if "matrices" in d:
        rows.append(("format", "AnnData: X summarised above, every matrix below"))
    else:
        rows.append(("format", f"{d['version']}, written by {d['created_by']}"))
    for k, v in rows:
        table.add_row(k, v)
    out.print(table)
    if "matrices" in d:
        _print_matrices(d["matrices"])
    if "histogram" in d:
        _print_histogram(d["histogram"])


def _print_matrices(matrices: list[dict]):
    """An AnnData file's matrices: key, layout, shape, stored entries, value type."""
    from rich.markup import escape
    from rich.table import Table

    moved = any("stored_at" in m for m in matrices)  # a file of before anndata 0.7
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for column in ("key", "layout", "shape", "nnz", "type") + (("stored at",) if moved else ()):
        table.add_column(column, justify="right" if column == "nnz" else "left")
    for m in matrices:
        nnz = "dense" if m["nnz"] is None else f"{m['nnz']:,}"
        table.add_row(escape(m["key"]), m["layout"], " x ".join(f"{s:,}" for s in m["shape"]), nnz,
                      m["value_type"], *([escape(m.get("stored_at", ""))] if moved else []))
    out.print("\n[bold]matrices[/]")
    out.print(table)


def _print_histogram(h: dict):
    from rich.markup import escape
    from rich.table import Table

    label = f"indices_{h['axis']}" + (f" ({escape(h['name'])})" if h["name"] else "")
    out.print(f"\n[bold]entries per index of {label}[/]: {h['indices']:,} indices, min {h['min']:,}, "
              f"mean {h['mean']:.3g}, max {h['max']:,}")
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("entries", justify="right")
    table.add_column("indices", justify="right")
    table.add_column("")
    most = max(b["indices"] for b in h["bins"])
    for b in h["bins"]:
        span = str(b["entries_from"]) if b["entries_from"] == b["entries_to"] else \
            f"{b['entries_from']:,}-{b['entries_to']:,}"
        bar = "█" * max(1, round(40 * b["indices"] / most))
        table.add_row(span, f"{b['indices']:,}", f"[cyan]{bar}[/]")
    out.print(table)


@click.command("head")
@input_argument()
@option("count", default=10, show_default=True, type=click.IntRange(min=0),
        help="Number of entries to show.")
@option("as_json", is_flag=True, help="Print JSON lines: {\"index\": [...], \"value\": ...}.")
@common_options
@click.pass_context
def head(ctx, tensor, count, as_json):
    """Show the first stored entries, in file order.

    A dense block (a row of a row-sparse tensor) shows its first PREVIEW elements and
    its shape; --json prints every element.

    Memory: reads only the first batch.

    \b
    Example:
      sptool head -n 5 sample_data/tensor3d.parquet
      sptool head -n 2 --json sample_data/rowsparse.parquet
    """
    opts = settings(ctx)
    job = Job("head", quiet=True)  # one batch read: no bar, no line
    idx, vals, meta = head_op(tensor, count, memory=opts["memory"])
    if as_json:
        for i in range(len(idx)):
            click.echo(json.dumps({"index": idx[i].tolist(), "value": _jsonable(vals[i])}, allow_nan=False))
    else:
        _print_head(idx, vals, meta)
    job.summary(result={"rows": len(idx), "shape": meta.shape, "value_type": meta.value_type}, rows_in=len(idx))


def _print_head(idx, vals, meta):
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("row", justify="right", style="dim")
    for k in range(meta.sparse_ndim):
        table.add_column(index_column(k), justify="right")
    table.add_column("values")
    for i in range(len(idx)):
        v = vals[i]
        table.add_row(str(i), *[str(int(x)) for x in idx[i]], _preview(v))
    out.print(table)


PREVIEW = 6


def _preview(v) -> str:
    """A value, or the first PREVIEW elements of a dense block and its shape."""
    if not hasattr(v, "ndim") or v.ndim == 0:
        return str(v)  # NumPy's text: a float32 with the digits a float32 holds, not a float64's
    flat = v.reshape(-1)
    if len(flat) <= PREVIEW and v.ndim == 1:
        return "[" + ", ".join(str(x) for x in flat) + "]"
    shown = ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in flat[:PREVIEW].tolist())
    shown += ", ..." if len(flat) > PREVIEW else ""
    return f"[{shown}] (block {list(v.shape)})"


def _jsonable(v):
    """A value as strict JSON: non-finite floats as "NaN"/"Infinity"/"-Infinity" (the format's
    fill_value spelling), complex as [re, im], blocks as nested lists; a float32 or float16
    with its own shortest digits (NumPy's text), not those of the float64 it widens to."""
    if getattr(v, "ndim", 0) > 0:
        return [_jsonable(x) for x in v]
    dtype = getattr(v, "dtype", None)
    if dtype is not None and dtype.kind == "c" and dtype.itemsize < 16:
        return [_jsonable(v.real), _jsonable(v.imag)]
    if dtype is not None and dtype.kind == "f" and dtype.itemsize < 8:
        return _jsonable(float(str(v)))
    v = v.tolist() if hasattr(v, "tolist") else v
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, complex):
        return [_jsonable(v.real), _jsonable(v.imag)]
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, bytes):
        return v.decode("latin-1")
    return v


def _jsonable_dict(d: dict) -> dict:
    return {k: (_jsonable(v) if isinstance(v, float) else v) for k, v in d.items()}


def register(cli):
    cli.add_command(info)
    cli.add_command(head)
