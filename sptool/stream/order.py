"""A source's rows in a requested order: streamed straight through when the metadata already
promises that order, otherwise through the external sort (stream/sort.py); bounds are checked
either way, since an index outside the shape would pack into a wrong key."""

from __future__ import annotations

import numpy as np

from .. import _kernels
from .._memory import Budget, budget_of
from .._messages import out_of_order, repeated
from ..errors import DataError
from ..io import IsoCheck, OrderTracker, TensorSource, batch_columns, batch_keys, batch_values, make_batch
from .bounds import checked
from .duplicates import deduplicated, sum_duplicates
from .sort import key_preparer, prepared_batches, sorted_stream
from .values import as_kernel, from_kernel, kernel_dtype


def already_sorted(meta, order) -> bool:
    return tuple(meta.sort_order[: len(order)]) == tuple(order) and len(meta.sort_order) >= len(order)


class ClaimCheck:
    """The one check that a source's claimed order (strictly increasing when ``unique``) holds as
    its rows pass: the first row that breaks it is an error naming the row and what the metadata
    says, then ``note`` (what the caller offers instead).  ``row_keys(row)``: the (K, 1)
    coordinates of a row counted as the tracker counts, for a caller that checks fewer columns
    than the coordinates (the leading dimensions of the order it relies on), so the error shows
    the whole row.  With ``iso``, a claim of iso values is checked too, on the rows whose values
    it is given (check_batch, check_rows): an output that keeps its input's values keeps the
    claim, and the sink would refuse it broken, so it is refused here, naming the input's row."""

    def __init__(self, meta, order, unique: bool, *, path=None, note: str = "", row_keys=None, iso: bool = False):
        self.meta, self.path, self.note, self.row_keys = meta, path, note, row_keys
        self.failed_at = -1
        self.tracker = OrderTracker(tuple(order), meta.sparse_ndim, check_repeats=unique)
        self.iso = IsoCheck() if iso and meta.iso else None

    def check_values(self, batch) -> None:
        """The iso claim on a batch's values, its rows counted from the tracker's next one (so,
        before the same rows' order is checked)."""
        if self.iso is None or not batch.num_rows:
            return
        at = self.tracker.offset
        row = self.iso.first_break(batch_values(batch, self.meta), at)
        if row >= 0:
            self.failed_at = at + row
            raise DataError(self.iso.broken(at + row), path=self.path)

    def check_rows(self, batch, cols) -> None:
        """A batch's values and its index columns ``cols`` (the K columns as a list or (K, n))."""
        self.check_values(batch)
        self.check(cols)

    def check_seam(self, cols) -> None:
        """A batch whose rows a compiled pass has already found in the claimed order among
        themselves (its one order dimension non-decreasing): only its first row, against the
        last batch's, is left to check.  The tracker sees the first and last rows and counts the
        rows between, so a later error still names the right row."""
        n = len(cols[0])
        self.check([c[[0, n - 1]] for c in cols])
        self.tracker.offset += n - 2

    def check(self, keys) -> None:
        """``keys``: the K index columns of a batch (a (K, n) array or a list of int64 columns)."""
        seen = self.tracker.offset
        at, kind = self.tracker.check(keys)
        if at >= 0:
            self._fail(at, kind, keys, at - seen)

    def check_batch(self, batch, codes=None) -> None:
        """A batch's rows, by their packed sort codes in the tracker's full order when given (one
        vectorised comparison), else by its index columns."""
        K = self.meta.sparse_ndim
        self.check_values(batch)
        if not self.tracker.takes_codes(codes):
            self.check(batch_columns(batch, K))
            return
        at, kind, keys = self.tracker.check_batch_codes(batch, codes, K)
        if at >= 0:
            self._fail(at, kind, keys, 0)

    def _fail(self, at: int, kind: int, keys, i: int):
        self.failed_at = at  # for a caller that picks the first of several checks' failures
        if self.row_keys is not None:
            keys, i = self.row_keys(at), 0
        what = repeated if kind == _kernels.REPEATED else out_of_order
        meta = self.meta
        raise DataError(f"{what(at, keys, i)}, although the metadata says sort_order {list(meta.sort_order)}, "
                        f"unique {str(bool(meta.unique)).lower()}{self.note}", path=self.path)


def claim_check(src, meta=None) -> ClaimCheck | None:
    """The check of what ``src`` claims (its order, unique rows where it claims them in a full
    order: TensorMeta.trusted, and iso values; or what ``meta`` claims, for a piece of a larger
    input), counting rows from the input's first; None when it claims neither an order nor iso."""
    meta = src.meta if meta is None else meta
    if not meta.sort_order and not meta.iso:
        return None
    check = ClaimCheck(meta, meta.sort_order, meta.unique, path=src.path, iso=True)
    check.tracker.offset = src.start
    return check


def _claim_checked(pairs, check: ClaimCheck, *, codes: bool = True):
    """(batch, keys) pairs with their rows checked by ``check`` (by the keys when ``codes``: they
    are the packed codes of its order).  A batch whose keys could not be made (an index out of
    bounds, before a sort) is left to the sort to refuse."""
    for batch, keys in pairs:
        if batch.num_rows and not isinstance(keys, int):
            check.check_batch(batch, keys if codes else None)
        yield batch, keys


def sorted_batches(src, order, *, budget: Budget, tmp_dir=None, progress=None, keys: bool = True,
                   duplicates: str = "keep", verify: str | None = None, claims: bool = True):
    """Yield (batch, sort keys) of a source in ``order``: the one way to get a source in an
    order.  Passed through when the metadata already promises that order, otherwise through the
    external sort; bounds are checked either way (an index outside the shape would pack into a
    wrong key).  With ``keys=False`` a passed-through batch comes with None instead of keys it
    would not need.  ``duplicates`` other than "keep" applies that policy to rows sharing a
    coordinate (the canonical form with "sum"), whatever the metadata claims (a caller that
    trusts a uniqueness claim verifies it instead); such batches hold the index and value
    columns only, and come with keys None.

    The source's own claims (its order, and no coordinate repeated where it claims that in a
    full order) are checked as its rows arrive, in stored order, whether they are passed through
    or sorted: the first row breaking them is an error naming it, counted from the input's first
    row, unless ``claims`` is False (a caller that checks them itself, or is told not to: todense
    --no-validate).  ``verify="unique"``: the caller keeps rows sharing a coordinate apart and
    needs there to be none, whatever the source claims (strings, unique by the format): the rows
    it gets are checked for a repeat (a sort keeps repeats adjacent)."""
    meta = src.meta
    passed = already_sorted(meta, order)
    check = claim_check(src) if claims else None
    if passed:
        stream = prepared_batches(src, order, keys=keys or duplicates != "keep", budget=budget, progress=progress)
        if check is not None:
            # The keys are codes of the claimed order only when the caller asked for all of it.
            same = tuple(order) == tuple(meta.sort_order)
            stream = _claim_checked(stream, check, codes=same)
    else:
        pairs = src.iter_prepared(key_preparer(meta, order), budget=budget)
        if check is not None:
            pairs = _claim_checked(pairs, check, codes=False)  # the keys are of the requested order
        stream = sorted_stream(pairs, meta, order, keyed=True, path=src.path, budget=budget, tmp_dir=tmp_dir,
                               progress=progress)
    if verify == "unique" and not (check is not None and check.tracker.check_repeats):
        stream = _claim_checked(stream, ClaimCheck(meta, order, True, path=src.path))
    if duplicates == "keep":
        yield from stream
        return
    columns = range(meta.sparse_ndim + 1)
    for out in deduplicated(((batch.select(columns), k) for batch, k in stream), duplicates, meta):
        yield out, None


def checked_batches(src, *, budget: Budget, progress=None, path=None, claim: ClaimCheck | None = None):
    """(keys (K, n), batch) of a source in stored order; an index outside the shape is an
    error naming the row (the kernels index accumulators with them), and so is a row breaking
    ``claim`` (a caller relying on the stored order)."""
    for batch, cols in checked(src.iter_batches(budget=budget), src.meta, path=path, progress=progress,
                               start=src.start, claim=claim):
        yield np.stack(cols), batch


def ordered_batches(src, order, *, budget: Budget, tmp_dir=None, progress=None, path=None):
    """(keys (K, n), batch) in ``order``: streamed when the source is sorted so, else sorted
    externally (bounds-checked either way: sorted_batches checks the rows it sorts)."""
    from .order import sorted_batches

    K = src.meta.sparse_ndim
    for batch, _ in sorted_batches(src, order, budget=budget, tmp_dir=tmp_dir, progress=progress, keys=False):
        if batch.num_rows:
            yield batch_keys(batch, K), batch


class SummedSource(TensorSource):
    """``src`` with every coordinate once (rows sorted row-major unless already in a full order)."""

    kind = "summed"

    def __init__(self, src: TensorSource, *, tmp_dir: str | None = None):
        meta = src.meta
        K = meta.sparse_ndim
        self.order = meta.sort_order if len(meta.sort_order) == K else tuple(range(K))
        # Sums of different numbers of equal values differ: an iso claim does not survive.
        super().__init__(src.path, meta.with_(sort_order=self.order, unique=True, nnz=None, iso=False), src.schema)
        self.src = src
        self.tmp_dir = tmp_dir

    def iter_batches(self, batch_rows=None, *, budget: Budget | None = None):
        meta = self.src.meta
        kdtype = kernel_dtype(meta.dtype)
        batches = ordered_batches(self.src, self.order, budget=budget_of(budget), tmp_dir=self.tmp_dir, path=self.path)
        pairs = ((keys, as_kernel(batch_values(b, meta), keys.shape[1], kdtype)) for keys, b in batches)
        for keys, vals in sum_duplicates(pairs, is_bool=meta.value_type == "bool"):
            yield make_batch(keys, from_kernel(vals, meta.dtype, meta.dense_shape), self.meta, self.schema)


def summed_if_promoted(src: TensorSource, dtype, *, tmp_dir: str | None = None) -> TensorSource:
    """``src`` itself when accumulating its values in ``dtype`` gives the format's answer (the rows
    are unique, or ``dtype`` is the value type and not bool); otherwise a SummedSource."""
    return SummedSource(src, tmp_dir=tmp_dir) if sums_when_promoted(src.meta, dtype) else src


def sums_when_promoted(meta, dtype) -> bool:
    """Whether ``summed_if_promoted`` sums the duplicates of a tensor of ``meta`` for ``dtype``."""
    if meta.unique or meta.value_type in ("string", "binary"):
        return False
    return np.dtype(dtype) != meta.dtype or meta.value_type == "bool"


