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
@option("output", metavar="DST", default="-", show_default=True,
        help="Output: a .parquet file, a directory (ending in /), a .arrows stream, - for stdout "
        "(an Arrow stream, or text with --to), or a .tns/.mtx/.npz/.npy/.csv/.tsv/.tfrecord/.h5 file.")
@option("from_format", type=click.Choice(FORMATS), default=None,
        help="Input format [default: from the name, else the content (stdin's too)].")
@option("to_format", type=click.Choice(FORMATS), default=None,
        help="Output format [default: from the name; - is sptool].")
@option("shape", metavar="10,20,30", default=None,
        help="Shape of a text input [default: max index + 1 per dimension, or its header].")
@option("dtype", metavar="TYPE", default=None,
        help="Value type to write, e.g. float32 [default: the input's; float64 for .tns/.csv/.tsv].")
@option("fill_value", metavar="V", default=None,
        help="Fill value of the output; for .npy input the value that is dropped, for .npy output "
        "the value of empty cells [default: 0].")
@option("index_base", type=click.Choice(["0", "1"]), default=None,
        help="Index base of text inputs and outputs [default: 1 for .tns/.mtx, 0 for .csv/.tsv].")
@option("zero_based", default=None,
        help="svmlight ids start at 0 or 1 [default: reading, guessed as scikit-learn does; writing, 1].")
@option("vocab_size", type=click.IntRange(min=0), metavar="V", default=None,
        help="svmlight, JSON lines or TFRecord input (with --ids): the number of columns, scikit-learn's "
             "n_features; ids must lie in [0, V) [default: largest id + 1; TFRecord: required].")
@option("labels", metavar="L.npy|L.parquet", default=None,
        help="svmlight, JSON lines or TFRecord labels: written here when reading (.npy, or for svmlight "
        ".parquet: a 1-D tensor, or the [rows, labels] indicator with --multilabel; TFRecord: from "
        "--label-key); read from such a file when writing [default: none read; svmlight writes 0].")
@option("multilabel", is_flag=True, help="svmlight input has comma-separated label lists.")
@option("query_id", metavar="Q.npy", default=None,
        help="svmlight qid: values, written here (reading) or read from here (writing).")
@option("strict", is_flag=True,
        help="svmlight input: refuse lines whose ids are unsorted or repeated [default: sort, sum].")
@option("index_columns", metavar="ROW,COL", default=None,
        help="Read SRC as a plain table (Parquet with no tensor metadata, .arrow/.feather, CSV/TSV with a "
             "header): its index columns, by name or 1-based position.")
@option("values_column", metavar="NAME", default=None,
        help="The plain table's values column [default: none, every coordinate holds True]; with --plain, "
             "the output's [default: values].")
@option("dense", is_flag=True,
        help="With a .mtx output: Matrix Market's dense 'array' format, every cell column by column.")
@option("plain", is_flag=True,
        help="Write DST (.parquet, .arrow, .feather) as a plain table, with no tensor metadata.")
@option("dimension_names", metavar="ROW,COL", default=None,
        help="With --plain: the names of the index columns [default: the tensor's, else indices_0...].")
@option("label_key", metavar="KEY", default=None,
        help="JSON lines and TFRecord: the key (feature) of each record's label, with --labels [default: label].")
@option("row_ids", metavar="R.npy", default=None,
        help="A row-sparse input instead of SRC: int row ids [n], with --row-values V.npy (their blocks, "
        "[n, d1, ...]) and --height H (the table's rows).")
@option("row_values", metavar="V.npy", default=None,
        help="With --row-ids: the dense block of each row id, [n, d1, ...].")
@option("height", type=click.IntRange(min=0), metavar="H", default=None,
        help="With --row-ids: the height of the row-sparse tensor (its first extent).")
@option("key", metavar="KEY", default=None,
        help="The matrix of an AnnData input: layers/NAME, raw/X, obsm/NAME, obsp/NAME... [default: X].")
@tfrecord_options
@common_options
@click.pass_context
def convert(ctx, src, output, from_format, to_format, shape, dtype, fill_value, index_base, zero_based,
            vocab_size, labels, multilabel, query_id, strict, index_columns, values_column, dense, plain,
            dimension_names, label_key, row_ids, row_values, height, key, **tfrecord):
    """Convert a tensor between sptool and FROSTT .tns, Matrix Market .mtx, scipy .npz,
    dense .npy, CSV/TSV coordinate text, svmlight/libsvm (.svm, .svmlight, .libsvm), JSON lines
    ({"ids": [...], "values": [...], "label": ...} per line: .jsonl, .ndjson) and TFRecord files
    of tf.train.Example records.

    How each reader and writer differs from SciPy's, scikit-learn's and TensorFlow's (and
    --strict where one exists): docs/formats/ in sptool's source, one page per format.

    Formats come from the names (.parquet, .arrows or a directory are sptool), else from
    an input's content (stdin too: an Arrow stream is sptool). Text inputs claim no order.
    Floats are written in their shortest round-trip form. Bad lines are errors naming the
    file and line; nothing is written.
    On a cluster (--scheduler) SRC may be a glob pattern ('data/*.tns') or a directory of
    such files: each file is converted by its own task into a part of the output
    directory (-o DIR/); one text file is not split, one task converts it (on its threads).

    URLs (s3://..., as pyarrow's filesystems resolve them; a pattern's wildcards in its
    last part only) are read and written for sptool tensors, the text formats (compressed
    too) and TFRecord files; .npy, .npz, binsparse, Arrow IPC and plain-table outputs go
    through local files and refuse them, naming what does take one.

    Memory: .tns, .mtx, .csv, .tsv, svmlight, JSON lines and .npy inputs stream in chunks sized from --memory,
    and text outputs stream batch by batch, so files larger than --memory convert. A .npz
    is held in memory whole (its size is checked first); .npy output is written through
    a memory map (as todense); a .mtx output from a text input or stream is staged in a
    temporary Parquet file next to it, since its header needs the final size.

    TFRecord (.tfrecord, .tfrecord.gz; no TensorFlow needed): --ids F --values G
    --vocab-size V gives the [n_examples, V] tensor of TensorFlow's sparse_merge, --feature F
    one feature by position; records are decoded in blocks sized from --memory, every one
    checked. Writing gives one Example per row of a 2-D tensor.

    binsparse (.h5/.hdf5, .zarr with zarr installed, .npz with --to/--from binsparse; needs
    pip install 'sptool[binsparse]'): 1-D as CVEC, 2-D as COOR, n-D as the custom sparse level,
    with the fill value; the input is sorted row-major with repeats summed first (the summary
    says so when it was not marked canonical). Every predefined format reads (CSR, CSC, DCSR,
    COOC, dense...); index_base 1 is honoured and a structure (symmetric...) is refused.
    HDF5 streams: output is written batch by batch, and COO, CSR/CSC and DCSR/DCSC inputs
    are read in slices (a CSR's row pointers held whole). .zarr and .npz containers and
    other HDF5 layouts do not stream: they are held in memory whole, and a tensor larger
    than --memory allows is refused before anything is written.

    AnnData (.h5ad, needs pip install 'sptool[anndata]'; a .zarr store whose root says
    anndata, with zarr installed): X, or the matrix --key names (layers/counts, raw/X,
    obsm/X_pca, obsp/distances), streamed within --memory: CSR by blocks of rows, CSC by
    blocks of columns, dense arrays by blocks of rows with their zeros dropped; files of
    anndata before 0.7 too. Every command reads an .h5ad's X directly. Output (.h5ad, or
    .zarr with --to anndata) holds a 2-D tensor as X in CSR, sorted row-major first within
    --memory when it is not, with the obs and var names anndata gives by default.

    Plain tables (DuckDB, Polars, Spark, pandas) are adopted with --index-columns and
    --values-column, streaming (shape from the largest indices unless --shape); --plain
    writes one back with no tensor metadata.

    Row-sparse tensors (Paddle's SelectedRows, TensorFlow's IndexedSlices): --row-ids R.npy
    --row-values V.npy --height H builds the [H, d1, ...] tensor with one sparse dimension
    from row ids and their dense blocks (memory-mapped, streamed; repeated rows are kept,
    and mean their sum); an .npz holding rows/values/height, or TensorFlow's
    indices/values/dense_shape, is read as one; --to rows writes such an .npz back; a
    sparse COO tensor saved with torch.save (.pt) is read when PyTorch is installed.

    \b
    Example:
      sptool convert sample_data/tensor3d.tns -o /tmp/tensor3d.parquet
      sptool convert /tmp/tensor3d.parquet -o /tmp/tensor3d.csv
      sptool convert sample_data/digits.svm -o /tmp/digits.parquet --labels /tmp/labels.npy
      sptool convert /tmp/digits.parquet -o /tmp/digits.svm --labels /tmp/labels.npy
      sptool convert sample_data/examples.tfrecord -o /tmp/examples.parquet --ids ids --values values --vocab-size 20
      sptool convert /tmp/examples.parquet -o /tmp/examples.tfrecord.gz --ids ids --values values
      sptool convert sample_data/digits.parquet --plain --dimension-names image,pixel -o /tmp/digits-table.parquet
      sptool convert /tmp/digits-table.parquet --index-columns image,pixel --values-column values -o /tmp/adopt.parquet
      sptool convert /tmp/digits.parquet -o /tmp/digits.jsonl --labels /tmp/labels.npy
      sptool convert sample_data/rowsparse.parquet -o /tmp/grad.npz --to rows
      sptool convert sample_data/tensor3d.parquet -o /tmp/tensor3d.bsp.h5
      sptool convert /tmp/tensor3d.bsp.h5 -o /tmp/tensor3d-back.parquet
      sptool convert sample_data/digits.parquet -o /tmp/digits.h5ad
      sptool convert /tmp/digits.h5ad -o /tmp/digits-back.parquet
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
