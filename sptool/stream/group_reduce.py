"""Group reduce: rows ordered by some leading index columns reduced to one result per distinct
coordinate (reduce's core; compiled scatter and segment kernels in sptool/_reduce.pyx)."""

from __future__ import annotations

import math

import numpy as np

from .. import _kernels, _reduce
from .values import runs, segment

_SCATTER = {"sum": _reduce.scatter_sum, "prod": _reduce.scatter_prod, "max": _reduce.scatter_max,
            "min": _reduce.scatter_min}


class GroupReducer:
    """Reduces rows that arrive ordered by their ``n_prefix`` leading index columns into one
    result per distinct coordinate on those and the ``rest`` columns after them, emitted in
    row-major order of (prefix, rest).

    Within a run of equal prefix indices the rest coordinates are accumulated into a dense
    array of E = prod(rest extents) slots; the run still open at the end of a batch is carried
    into the next.  ``feed(columns, values, bounds)`` takes index columns in that order (any
    further columns are only bounds-checked) and returns pieces (keys (P+R, g), acc (g, m),
    counts (g,)): the reduction in the kernel dtype and how many rows each result took.  A row
    outside ``bounds`` makes feed return its position as an int instead.
    """

    def __init__(self, op: str, n_prefix: int, rest_extents, m: int, kdtype: np.dtype):
        self.op = "sum" if op in ("mean", "count") else op
        self.n_prefix = n_prefix
        self.rest_extents = [int(e) for e in rest_extents]
        self.E = math.prod(self.rest_extents)
        self.m = m
        self.kdtype = kdtype
        self.carry = None  # (prefix indices (P,), acc (E, m), counts (E,))
        self._cells = np.empty(0, dtype=np.int64)
        self._starts = np.empty(1, dtype=np.int64)
        self._extents = np.array(self.rest_extents, dtype=np.int64)

    def _strides(self, ncols: int) -> np.ndarray:
        strides = np.zeros(ncols, dtype=np.int64)
        s = 1
        for j in range(len(self.rest_extents) - 1, -1, -1):
            strides[self.n_prefix + j] = s
            s *= self.rest_extents[j]
        return strides

    def _new_acc(self, cells: int):
        return np.zeros((cells, self.m), dtype=self.kdtype), np.zeros(cells, dtype=np.int64)

    def _piece(self, pkeys, r, acc, counts):
        if self.rest_extents:
            rest = np.stack(np.unravel_index(r, self.rest_extents)).astype(np.int64, copy=False)
            keys = np.concatenate([pkeys, rest]) if self.n_prefix else rest
        else:
            keys = pkeys
        return keys, acc, counts

    def _compact(self, acc, counts, lo: int, hi: int, first: int):
        """The piece of the touched slots lo..hi-1 of a block of groups numbered from ``first``
        on the one prefix column (a compiled pass; lo and hi are multiples of E)."""
        g = int(np.count_nonzero(counts[lo:hi]))
        keys = np.empty((1 + len(self.rest_extents), g), dtype=np.int64)
        vals = np.empty((g, acc.shape[1]), dtype=acc.dtype)
        got = np.empty(g, dtype=np.int64)
        _reduce.compact_cells(counts, lo, hi, self.E, first, self._extents, acc, keys, vals, got)
        return keys, vals, got

    def _prefix_at(self, columns, rows) -> np.ndarray:
        if not self.n_prefix:
            return np.zeros((0, len(rows)), dtype=np.int64)
        return np.stack([columns[j][rows] for j in range(self.n_prefix)])

    def _flush_carry(self):
        pkey, acc, counts = self.carry
        self.carry = None
        if self.n_prefix == 1:
            return self._compact(acc, counts, 0, self.E, int(pkey[0]))
        touched = np.flatnonzero(counts)
        pkeys = np.repeat(pkey[:, None], len(touched), axis=1)
        return self._piece(pkeys, touched, acc[touched], counts[touched])

    def feed(self, columns, vals: np.ndarray, bounds, *, block: bool = True):
        n = len(vals)
        if n == 0:
            return []
        if block:
            got = self.block_partial(columns, vals, bounds)
            if isinstance(got, tuple):
                return self.merge_block(*got)
            if got is not None:
                return got
        E = self.E
        if len(self._cells) < n:
            self._cells = np.empty(n, dtype=np.int64)
            self._starts = np.empty(n + 1, dtype=np.int64)
        cells, starts = self._cells[:n], self._starts
        G = _reduce.group_cells(list(columns), n, np.asarray(bounds, dtype=np.int64), self.n_prefix,
                                self._strides(len(columns)), E, cells, starts)
        if G < 0:
            return -G - 1
        scatter = _SCATTER[self.op]
        out = []
        g0 = 0
        if self.carry is not None:
            if all(int(columns[j][0]) == self.carry[0][j] for j in range(self.n_prefix)):
                end = int(starts[1])
                scatter(cells[:end], 0, vals[:end], self.carry[1], self.carry[2])
                if G == 1:
                    return out
                g0 = 1
            out.append(self._flush_carry())
        if G - 1 > g0:
            out.append(self._middle(columns, vals, cells, starts, g0, G - 1))
        last = int(starts[G - 1])
        acc, counts = self._new_acc(E)
        scatter(cells[last:], (G - 1) * E, vals[last:], acc, counts)
        self.carry = (self._prefix_at(columns, [last])[:, 0].copy(), acc, counts)
        return out

    def block_partial(self, columns, vals, bounds):
        """The first half of feed() for sums grouped by one leading column whose values in this
        batch span few enough groups (the common case: one compiled pass, group by group in
        E slots): (first, last, head, head_counts, middle, tail, tail_counts) for merge_block,
        where ``middle`` holds the entries of the groups between the first and the last,
        already made; the row of an index out of bounds; or None when the batch does not suit
        it.  Touches no state, so it may run on the thread that decoded the batch."""
        n, E = len(vals), self.E
        if self.op != "sum" or self.n_prefix != 1 or not n:
            return None
        first, last = int(columns[0][0]), int(columns[0][-1])
        span = last - first + 1
        # A group costs a scan of its slots' bitmap (E / 64 words) besides its rows: worth it while
        # those words are not many more than the rows, and the head and tail slots (made for each
        # batch) not many more either.
        limit = 4 * n + 4096
        if first < 0 or last >= bounds[0] or not (0 < span * ((E + 63) // 64) <= limit and E <= limit):
            return None
        head, head_counts = self._new_acc(E)
        tail, tail_counts = self._new_acc(E)
        keys = np.empty((1 + len(self.rest_extents), n), dtype=np.int64)
        sums = np.empty((n, self.m), dtype=self.kdtype)
        counts = np.empty(n, dtype=np.int64)
        code, g = _reduce.group_block_sum(list(columns), n, np.asarray(bounds, dtype=np.int64),
                                          self._strides(len(columns)), self._extents, vals, head, head_counts,
                                          tail, tail_counts, keys, sums, counts)
        if code >= 0:
            return code
        if code < -1:
            return None  # rows out of order on the leading column: the general path handles them
        middle = (keys[:, :g], sums[:g], counts[:g]) if g else None
        return first, last, head, head_counts, middle, tail, tail_counts, (columns, vals)

    def merge_block(self, first: int, last: int, head, head_counts, middle, tail, tail_counts, rows):
        """The second half: the carried group joins the block's first one when they share the
        leading index; every group but the last is complete.  ``rows``: the batch's (index
        columns, values), whose first group's rows then go on into the carried sums one by one,
        as feed() adds them: carry + (the block's sum) rounds differently, and a float sum would
        depend on where the batches begin (on --memory, or on how a cluster cuts the input)."""
        out = []
        if self.carry is not None:
            if int(self.carry[0][0]) == first:
                columns, vals = rows
                h = int(head_counts.sum())
                cells = np.zeros(h, dtype=np.int64)
                for j, stride in enumerate(self._strides(len(columns))[1:1 + len(self.rest_extents)], start=1):
                    cells += columns[j][:h] * stride
                _SCATTER[self.op](cells, 0, vals[:h], self.carry[1], self.carry[2])
                head, head_counts = self.carry[1], self.carry[2]
                self.carry = None
            else:
                out.append(self._flush_carry())
        if first == last:
            self.carry = (np.array([first], dtype=np.int64), head, head_counts)
            return out
        out.append(self._compact(head, head_counts, 0, self.E, first))
        if middle is not None:
            out.append(middle)
        self.carry = (np.array([last], dtype=np.int64), tail, tail_counts)
        return out

    def _middle(self, columns, vals, cells, starts, ga, gb):
        """Reduce the complete groups ga..gb-1 of a batch."""
        E = self.E
        a, b = int(starts[ga]), int(starts[gb])
        if E == 1:
            seg = starts[ga:gb + 1] - a
            acc = segment(self.op, vals[a:b], seg)
            return self._piece(self._prefix_at(columns, starts[ga:gb]), np.zeros(gb - ga, np.int64), acc,
                               np.diff(seg))
        if (gb - ga) * E <= 4 * (b - a) + 4096:
            acc, counts = self._new_acc((gb - ga) * E)
            _SCATTER[self.op](cells[a:b], ga * E, vals[a:b], acc, counts)
            touched = np.flatnonzero(counts)
            gid = touched // E + ga
            return self._piece(self._prefix_at(columns, starts[gid]), touched % E, acc[touched], counts[touched])
        # Few rows per slot: sort the rows by cell instead of scanning mostly empty slots.
        c = np.ascontiguousarray(cells[a:b]).view(np.uint64)
        perm = np.empty(b - a, dtype=np.int64)
        sc = np.empty(b - a, dtype=np.uint64)
        _kernels.radix_argsort(c, perm, sc)
        sc = sc.view(np.int64)
        seg = runs(sc.reshape(1, -1), [0])
        acc = segment(self.op, np.ascontiguousarray(vals[a:b][perm]), seg)
        first = sc[seg[:-1]]
        return self._piece(self._prefix_at(columns, starts[first // E]), first % E, acc, np.diff(seg))

    def finish(self) -> list:
        return [self._flush_carry()] if self.carry is not None else []


