"""spy: the sparsity pattern of two axes, counted in one pass into a fixed-size density grid and
drawn as a PNG image (with Pillow, the ``spy`` extra) or as text.

Each grid cell counts the stored entries (duplicates included) whose two indices fall in its
block: row ``i`` of an axis of extent ``n`` drawn in ``h`` cells goes to cell ``i * h // n``, so
cells are equal blocks of indices, as ``np.histogram2d`` bins them over ``[0, n)``.  An axis
shorter than the picture gets one cell per index, each drawn as a band of pixels.  Darkness is
the log of the count, so that a single entry stays visible beside a dense block.
"""

from __future__ import annotations

import math
import re

import numpy as np

from .. import _kernels
from .._args import whole_numbers
from .._memory import Budget, budget_of, format_size
from .._vocabulary import renamed_keywords
from ..errors import UsageError
from ..io import AtomicTarget, ClosesOrAborts, known_shape, open_input
from ..stream.axes import normalize_axes
from ..stream.engine import Plan, StreamOp, run

IMAGE_SIZE = (512, 512)  # (width, height) of an image when --image-size is not given
TEXT_SIZE = (64, 32)  # a terminal cell is about twice as tall as wide: a square tensor looks square
TEXT_LEVELS = " .:-=+*#%@"  # darkness of a text cell, from no entry to the most entries
# The lightest grey a cell holding one entry gets (0 black, 255 white): visible on white.
LIGHTEST = 200
INSTALL_HINT = "pip install 'sptool[spy]' (or pip install pillow)"


def parse_size(size, default: tuple[int, int]) -> tuple[int, int]:
    """(width, height) from "WxH", "N" (square), a pair, or None for ``default``."""
    if size is None:
        return default
    if isinstance(size, str):
        m = re.fullmatch(r"\s*(\d+)\s*(?:[xX×]\s*(\d+)\s*)?", size)
        if not m:
            raise UsageError(f"--image-size {size!r} must be WIDTHxHEIGHT (e.g. 512x512) or one number for a square")
        size = (int(m.group(1)), int(m.group(2) or m.group(1)))
    sides = whole_numbers(size, "--image-size")
    if len(sides) != 2:
        raise UsageError(f"--image-size {list(sides)} must be two numbers, a width and a height")
    width, height = sides
    if not (1 <= width <= 1 << 16 and 1 <= height <= 1 << 16):
        raise UsageError(f"--image-size {width}x{height}: each side must be 1 to 65536")
    return width, height


class DensityGrid:
    """Entries per block of a (rows, cols) extent, in at most (height, width) cells."""

    def __init__(self, extent: tuple[int, int], size: tuple[int, int]):
        self.extent = extent
        self.size = size
        self.cells = (max(min(size[1], extent[0]), 1), max(min(size[0], extent[1]), 1))
        self.counts = np.zeros(self.cells[0] * self.cells[1], dtype=np.int64)

    @property
    def nbytes(self) -> int:
        """What drawing it holds: the counts and two float copies of them, and the picture (with
        the encoder's copy of it)."""
        return 3 * self.counts.nbytes + 2 * self.size[0] * self.size[1]

    def add(self, rows: np.ndarray, cols: np.ndarray):
        """Count one batch of (in-bounds) coordinates."""
        if not len(rows):
            return
        codes = _cell(rows, self.extent[0], self.cells[0]) * self.cells[1] + _cell(cols, self.extent[1], self.cells[1])
        lo, hi = _kernels.column_minmax(codes)
        # Only the cells this batch touches: a bincount over the whole grid would cost its size per batch.
        self.counts[lo:hi + 1] += np.bincount(codes - lo, minlength=hi - lo + 1)

    def grid(self) -> np.ndarray:
        return self.counts.reshape(self.cells)

    def levels(self, top: int) -> np.ndarray:
        """Each cell's count on a log scale in [0, 1]: 0 for no entry, 1 for the most."""
        grid = self.grid()
        most = int(grid.max()) if grid.size else 0
        if most == 0:
            return np.zeros(grid.shape)
        return np.log1p(grid) / math.log1p(most) * top

    def stretched(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per cell) at the picture's size: a cell covers a band of pixels when an
        axis has fewer indices than the picture has pixels."""
        width, height = self.size
        rows = np.arange(height) * self.cells[0] // height
        cols = np.arange(width) * self.cells[1] // width
        return values[rows[:, None], cols[None, :]]


def _cell(index: np.ndarray, extent: int, cells: int) -> np.ndarray:
    """floor(index * cells / extent), exactly while index * cells fits in 64 bits."""
    if extent * cells < 2**63:
        return index * cells // extent
    return np.minimum((index / extent * cells).astype(np.int64), cells - 1)


def image_pixels(grid: DensityGrid) -> np.ndarray:
    """(height, width) uint8 grey levels: white where no entry is stored, darker for more."""
    levels = grid.levels(1.0)
    grey = np.where(levels > 0, np.rint(LIGHTEST * (1.0 - levels)), 255).astype(np.uint8)
    return grid.stretched(grey)


def text_picture(grid: DensityGrid) -> list[str]:
    """The grid as lines of characters in a frame, denser cells drawn with heavier characters."""
    top = len(TEXT_LEVELS) - 1
    levels = grid.levels(float(top))
    chars = np.where(levels > 0, np.maximum(np.ceil(levels - 1e-9), 1), 0).astype(np.int64)
    picture = np.array(list(TEXT_LEVELS))[grid.stretched(chars)]
    width = grid.size[0]
    return ["+" + "-" * width + "+", *("|" + "".join(row) + "|" for row in picture), "+" + "-" * width + "+"]


def pillow_image(output: str):
    """Pillow's Image module, or a UsageError saying how to install it (asked before any work)."""
    try:
        from PIL import Image
    except ImportError:
        raise UsageError(f"writing an image needs Pillow, which is not installed: {INSTALL_HINT}; --ascii draws "
                         "the pattern as text without it", path=output) from None
    return Image


def write_png(pixels: np.ndarray, output: str):
    """Write the pixels as a greyscale PNG, atomically."""
    Image = pillow_image(output)
    target = AtomicTarget(output, is_dir=False)
    try:
        Image.fromarray(pixels, mode="L").save(target.tmp, format="PNG")
        target.commit()
    except BaseException:
        target.abort()
        raise


@renamed_keywords("axis", "image_size")
def spy(path, output: str | None = None, *, axis=None, image_size=None, ascii_: bool = False, memory=None,
        progress=None) -> dict:
    """The sparsity pattern of a tensor's two sparse axes (``axis``, default the first two),
    counted in one pass into a grid of ``image_size`` = (width, height) cells (or "WxH").

    With ``output`` (a .png path) the grid is written as a greyscale image of exactly that size
    (default 512x512), log-scaled: white where nothing is stored, darker where more is (Pillow
    is needed: ``pip install 'sptool[spy]'``).  With ``ascii_`` the pattern is also drawn as
    text, returned under ``"ascii"`` as a list of lines: a caption, then the picture in a frame
    (64x32 characters unless ``image_size`` is given and no image is written).  The rows of the
    picture are the first axis, its columns the second.  Duplicates count as stored entries.

    Returns ``{"axes", "extent", "nnz", "grid", "max_count", ...}``: ``grid`` is the image's
    (or else the text's) counts, one per cell, an int64 array of at most (height, width).

    Memory: the grid holds 8 bytes per cell, the image 1 byte per pixel (refused when over
    ``memory``); the tensor streams through in batches.

    Examples
    --------
    >>> r = spy("sample_data/digits.parquet", image_size=(16, 8), ascii_=True)
    >>> r["grid"].shape, int(r["grid"].sum()) == r["nnz"]
    ((8, 16), True)
    """
    if output is not None and output != "-" and not str(output).lower().endswith(".png"):
        raise UsageError("spy writes a PNG image: name the output *.png (or use --ascii for text)", path=output)
    if output == "-":
        raise UsageError("spy writes its image to a file: name it with -o *.png (or use --ascii for text)")
    if output is None and not ascii_:
        ascii_ = True
    if output is not None:
        pillow_image(output)
    budget = budget_of(memory)
    with open_input(path) as opened, known_shape(opened) as src:
        op = Spy(axis, image_size, image=output is not None, ascii_=ascii_, budget=budget, path=src.path)
        run(op, src, None, budget=budget, progress=progress)
        meta = src.meta
    grids, (r, c), extent, rows_seen = op.grids, op.axes, op.extent, op.out.rows
    main = grids[0]
    result = {"path": src.path, "axes": [r, c], "extent": list(extent), "nnz": rows_seen,
              "grid": main.grid(), "max_count": int(main.counts.max()) if main.counts.size else 0,
              "cell": [_ceil_div(extent[0], main.cells[0]), _ceil_div(extent[1], main.cells[1])],
              "names": [_name(meta, r), _name(meta, c)]}
    if output is not None:
        write_png(image_pixels(main), output)
        result.update(output=output, size=list(main.size))
    if ascii_:
        text = grids[-1]
        caption = (f"{result['names'][0]}: 0..{extent[0] - 1} down, {result['names'][1]}: 0..{extent[1] - 1} across; "
                   f"{rows_seen:,} entries, up to {int(text.counts.max()) if text.counts.size else 0:,} in a cell")
        result["ascii"] = [caption, *text_picture(text)]
    return result


class Spy(StreamOp):
    """Each batch's entries counted into the density grids (one for the image, one for the
    text): the grids are the output, written (keys (K, n),) pieces."""

    def __init__(self, axes, size, *, image: bool, ascii_: bool, budget: Budget, path):
        self.chosen, self.size, self.image, self.ascii_ = axes, size, image, ascii_
        self.budget, self.path = budget, path

    def plan(self, meta) -> Plan:
        K = meta.sparse_ndim
        if K < 2:
            raise UsageError(f"spy draws two sparse axes; this tensor has {K}", path=self.path)
        axes = self.chosen
        chosen = normalize_axes(axes if axes is not None else (0, 1), K, "--axis")
        if len(chosen) != 2 or chosen[0] == chosen[1]:
            raise UsageError(f"--axis needs two different sparse axes, e.g. 0,1 (got {list(axes)})")
        self.axes = r, c = chosen
        self.extent = extent = (int(meta.shape[r]), int(meta.shape[c]))
        self.grids = grids = []
        if self.image:
            grids.append(DensityGrid(extent, parse_size(self.size, IMAGE_SIZE)))
        if self.ascii_:
            text_size = parse_size(self.size, TEXT_SIZE) if not self.image else TEXT_SIZE
            grids.append(DensityGrid(extent, text_size))
        self.cost = cost = sum(g.nbytes for g in grids)
        if cost > self.budget.total // 2:
            raise UsageError(f"a picture of {grids[0].size[0]}x{grids[0].size[1]} needs {format_size(cost)}, over "
                             "half of --memory; give a smaller --image-size or raise --memory")
        return Plan(meta, bounds_checked=True, pieces=True)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        self.out = _Grids(self.grids, self.axes)
        return self.out

    def read(self, src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        # The grids hold their share of the budget; the batches get the rest.
        return super().read(src, plan, budget=budget.with_total(budget.total - self.cost), progress=progress)

    def map(self, batch, keys):
        yield (keys,)


class _Grids(ClosesOrAborts):
    """The grids as the output: each piece's entries counted on the two axes."""

    def __init__(self, grids: list[DensityGrid], axes):
        self.grids, self.axes = grids, axes
        self.rows = 0

    def write(self, keys):
        r, c = self.axes
        for grid in self.grids:
            grid.add(keys[r], keys[c])
        self.rows += keys.shape[1]

    def close(self):
        pass

    def abort(self):
        pass


def _name(meta, axis: int) -> str:
    name = meta.dimension_names[axis] if meta.dimension_names else None
    return f"indices_{axis}" + (f" ({name})" if name else "")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b) if b else 0

