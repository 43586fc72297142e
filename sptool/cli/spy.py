"""sptool spy."""

from __future__ import annotations

import click

from ..ops.spy import spy as spy_op
from ._console import Job, out
from ._options import INT_LIST, common_options, input_argument, settings
from ._vocabulary import option


@click.command("spy")
@input_argument()
@option("output", metavar="PATTERN.png", default=None,
        help="Write the pattern as a greyscale PNG image (needs Pillow: pip install 'sptool[spy]').")
@option("ascii_", is_flag=True,
        help="Draw the pattern as text on stdout (the default when no -o is given; needs no extra).")
@option("axis", type=INT_LIST, default=None, metavar="R,C",
        help="The two sparse axes to draw, as rows and columns [default: 0,1].")
@option("image_size", metavar="WxH", default=None,
        help="Size of the picture: pixels of the image [default: 512x512], or characters of the text "
             "when no image is written [default: 64x32].")
@common_options
@click.pass_context
def spy(ctx, tensor, output, ascii_, axis, image_size):
    """Draw the sparsity pattern of a tensor: where its entries are, on two sparse axes.

    The entries are counted in one pass into a grid of cells of equal blocks of indices, one
    per pixel (or character); darker means more entries, on a log scale, so that a single
    entry stays visible beside a dense block. Rows of the picture are the first axis.

    Memory: 8 bytes per cell of the grid and 1 per pixel of the image, within --memory; the
    tensor streams through in batches.

    \b
    Example:
      sptool spy sample_data/digits.parquet --image-size 64x16
      sptool spy sample_data/tensor3d.parquet --axis 0,2 --ascii
    """
    opts = settings(ctx)
    job = Job("spy", quiet=opts["quiet"])
    try:
        r = spy_op(tensor, output, axis=axis, image_size=image_size, ascii_=ascii_, memory=opts["memory"], progress=job)
    finally:
        job.stop()
    for line in r.get("ascii", ()):
        out.print(line, highlight=False, markup=False)
    summary = {k: v for k, v in r.items() if k not in ("grid", "ascii")}
    job.summary(result=summary, output=output, extra=f"{r['size'][0]}x{r['size'][1]} image" if output else "")


def register(cli):
    cli.add_command(spy)
