"""sptool convert."""

from __future__ import annotations

import click

from ..converters import FORMATS
from ..ops.convert import convert as convert_op
from ._cluster import cluster_extra, run_job
from ._options import common_options, parse_scalar, settings
from ._tfrecord_options import tfrecord_options
from ._vocabulary import option, warn_once


@click.command("convert")
@click.argument("src", metavar="SRC", type=str, required=False)
@option("output", metavar="DST", default="-", help="Output path, DIR/, or - (stdout) [default: -].")
@option("from_format", type=click.Choice(FORMATS), metavar="FORMAT", default=None,
        help="Input format [default: by name or content].")
@option("to_format", type=click.Choice(FORMATS), metavar="FORMAT", default=None,
        help="Output format [default: by the name].")
@option("shape", metavar="10,20,30", default=None, help="Shape of a text input [default: max + 1].")
@option("dtype", metavar="TYPE", default=None, help="Value type to write, e.g. float32.")
@option("fill_value", metavar="V", default=None, help="Fill value (.npy: of the empty cells).")
@option("index_base", type=click.Choice(["0", "1"]), default=None, help="Index base of a text format.")
@option("vocab_size", type=click.IntRange(min=0), metavar="V", default=None, help="Columns of the ids.")
@option("labels", metavar="L.npy|L.parquet", default=None, help="Labels, written (reading) or read.")
@option("index_columns", metavar="ROW,COL", default=None, help="Read SRC as a plain table of these.")
@option("values_column", metavar="NAME", default=None, help="A plain table's values column.")
@option("plain", is_flag=True, help="Write a plain table: no tensor metadata.")
@option("row_ids", metavar="R.npy", default=None, help="Row ids of a row-sparse input (no SRC).")
@option("key", metavar="KEY", default=None, help="An AnnData input's matrix [default: X].")
# A format's own options: `sptool help formats` tells them, and the help names them in one paragraph.
@option("zero_based", default=None, hidden=True, help="svmlight ids start at 0 or 1.")
@option("multilabel", is_flag=True, hidden=True, help="svmlight labels are comma-separated lists.")
@option("query_id", metavar="Q.npy", default=None, hidden=True, help="svmlight qid: values.")
@option("strict", is_flag=True, hidden=True, help="svmlight: refuse unsorted or repeated ids.")
@option("dense", is_flag=True, hidden=True, help="A .mtx output in Matrix Market's array format.")
@option("dimension_names", metavar="ROW,COL", default=None, hidden=True, help="With --plain: index names.")
@option("label_key", metavar="KEY", default=None, hidden=True, help="The key of each record's label.")
@option("row_values", metavar="V.npy", default=None, hidden=True, help="With --row-ids: their blocks.")
@option("height", type=click.IntRange(min=0), metavar="H", default=None, hidden=True,
        help="With --row-ids: the first extent.")
@tfrecord_options
@common_options
@click.pass_context
def convert(ctx, src, output, from_format, to_format, shape, dtype, fill_value, index_base, zero_based,
            vocab_size, labels, multilabel, query_id, strict, index_columns, values_column, dense, plain,
            dimension_names, label_key, row_ids, row_values, height, key, **tfrecord):
    """Convert a tensor between sptool and .tns, .mtx, .npz, .npy, CSV/TSV, svmlight, JSON lines,
    TFRecord, binsparse, AnnData and plain tables, told by name or content; docs/formats/
    (docs site) tells how each differs from the software it follows.

    Format options, told in `sptool help formats`: --zero-based/--one-based, --multilabel,
    --query-id, --strict (svmlight); --label-key, --feature, --compression (JSON lines,
    TFRecord); --dense (.mtx); --dimension-names (--plain); --row-values, --height (--row-ids).

    Memory: text streams within --memory (sptool help memory).

    \b
    Example:
      sptool convert sample_data/tensor3d.tns -o /tmp/tensor3d.parquet
      sptool convert sample_data/digits.svm -o /tmp/digits.parquet --labels /tmp/labels.npy
      sptool convert sample_data/examples.tfrecord -o /tmp/ex.parquet --ids ids --values values --vocab-size 20
    """
    opts = settings(ctx)
    if row_ids is not None and row_values is None and tfrecord["values"] is not None:
        warn_once("`convert --values` naming a row-sparse input's blocks is deprecated and will go; use --row-values")
        row_values, tfrecord["values"] = tfrecord["values"], None
    result, job = run_job("convert", convert_op, opts, ctx.obj, src, output, from_format=from_format,
                          to_format=to_format, shape=shape, dtype=dtype, fill_value=parse_scalar(fill_value),
                          index_base=None if index_base is None else int(index_base),
                          zero_based=zero_based, vocab_size=vocab_size, labels=labels, multilabel=multilabel,
                          query_id=query_id, strict=strict, index_columns=index_columns,
                          values_column=values_column, plain=plain, dimension_names=dimension_names,
                          label_key=label_key, row_ids=row_ids, row_values=row_values, height=height, dense=dense,
                          key=key,
                          memory=opts["memory"], **tfrecord)
    job.summary(result=result, rows_out=result["rows"], output=output,
                inputs=[src] if src is not None else [p for p in (row_ids, row_values) if p is not None],
                extra=cluster_extra(result, f"{result['to']} format, {result['value_type']}")
                + "".join(f"; {note}" for note in result.get("notes", [])))


def register(cli):
    cli.add_command(convert)
