"""validate: every rule of formats/SPEC.md, as a report (never an exception for bad data).

A driver, not a StreamOp: it reads raw Parquet footers, row groups and stream frames itself,
since a TensorSource would refuse the broken files it has to describe."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import _kernels
from .._memory import Budget, budget_of
from .._messages import out_of_bounds, out_of_order, repeated
from ..format import (
    CHECKSUMS_KEY,
    DIGEST_KEY,
    METADATA_KEY,
    TRAILER_KEY,
    TensorMeta,
    check_metadata,
    check_schema,
    default_fill,
    encode_fill,
    index_column,
    invariants_differ,
    load_json,
    shape_overflow,
    stats_problem,
    trailer_problem,
)
from ..io import (
    CANONICAL_PART_NAME,
    NO_INPUT_ON_STDIN,
    READ_ERRORS,
    DamagedBatch,
    DigestReader,
    FooterError,
    IsoCheck,
    check_text,
    digest_problem,
    join_path,
    list_parts,
    listing,
    local_path,
    locate,
    open_sequential,
    pages_without_crc,
    parquet_file,
    plan_chunks,
    prefetch,
    read_chunks,
    read_failure_code,
    read_stream_batch,
    row_bytes,
)
from ..report import FATAL, Problem, Report


def _short(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _has_fatal(problems) -> bool:
    return any(p.severity == FATAL for p in problems)


def _meta_from(obj: dict) -> TensorMeta:
    """TensorMeta from metadata that passed the fatal checks (a bad fill_value falls back)."""
    vt = obj["value_type"]
    sort_order = obj["sort_order"]
    if len(set(sort_order)) != len(sort_order) or not all(0 <= s < obj["sparse_ndim"] for s in sort_order):
        obj = {**obj, "sort_order": []}  # already reported as E_SORT_ORDER; nothing to check rows against
    try:
        return TensorMeta.from_dict(obj)
    except (ValueError, TypeError, KeyError):
        return TensorMeta.from_dict({**obj, "fill_value": encode_fill(default_fill(vt), vt)})


class Scanner:
    """The data rules (C), fed one batch at a time; order is carried across batches."""

    def __init__(self, meta: TensorMeta, add, base_location: dict, *, deep: bool, budget: int,
                 track_max=(), count_fill: bool = True):
        self.meta = meta
        self.count_fill = count_fill  # False when fill_value itself is invalid (E_FILL_VALUE)
        # Extents a stream leaves open until its trailer: remember, per dimension, the rows where
        # the running maximum rises, so the first row beyond the final extent can be named.
        self.track_max = list(track_max)
        self.records: dict[int, list] = {k: [] for k in self.track_max}
        self.record_bytes = 0
        self.running_max = {k: -1 for k in self.track_max}
        self.add = add
        self.base = base_location
        self.K = meta.sparse_ndim
        self.shape = np.asarray(meta.shape[: self.K], dtype=np.int64)
        self.order = np.asarray(meta.sort_order, dtype=np.int64)
        self.full_order = len(meta.sort_order) == self.K
        self.check_repeats = meta.unique and self.full_order
        self.prev = None
        self.row = 0
        self.found: set[str] = set()
        self.explicit_fill = 0
        self.iso = IsoCheck()
        self.deep = deep and meta.unique and not self.full_order
        self.deep_keys: list[np.ndarray] = []
        self.deep_bytes = 0
        self.deep_over = False
        self.budget = budget

    def _report(self, code: str, message: str, row: int | None = None, index=None, row_group=None):
        if code in self.found:
            return
        self.found.add(code)
        loc = dict(self.base)
        if row_group is not None:
            loc["row_group"] = row_group
        if row is not None:
            loc["row"] = row
        if index is not None:
            loc["index"] = index
        self.add(Problem(code, message, loc))

    def feed(self, batch: pa.RecordBatch, row_group: int | None = None, stats=None):
        n = batch.num_rows
        if n == 0:
            return
        K = self.K
        cols = [batch.column(index_column(k)) for k in range(K)]
        vals = batch.column("values")
        for k, col in enumerate(cols):
            if col.null_count:
                first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                self._report("E_NULL_INDEX", f"indices[{self.row + first}] has a null in {index_column(k)}",
                             self.row + first, row_group=row_group)
        self._check_values(vals, row_group)
        if any(c.null_count for c in cols):
            self.row += n
            self.prev = None
            return
        # The columns as they come off the file (no copy); the kernels read them in place.
        keys = [col.to_numpy(zero_copy_only=False) for col in cols]

        def at(i):
            return [int(c[i]) for c in keys]

        # One fused pass: bounds, order and each column's range (for the statistics check).
        row, dim, orow, kind, mins, maxs = _kernels.columns_scan(keys, self.shape, self.order, self.check_repeats,
                                                                 self.prev)
        if row >= 0:
            self._report("E_INDEX_OUT_OF_BOUNDS", out_of_bounds(self.row + row, keys, row, self.meta.shape[:K]),
                         self.row + row, at(row), row_group)
        if len(self.order):
            if orow >= 0:
                if kind == _kernels.OUT_OF_ORDER:
                    order_text = f"(sort_order {list(self.meta.sort_order)})"
                    self._report("E_NOT_SORTED", f"{out_of_order(self.row + orow, keys, orow)} {order_text}",
                                 self.row + orow, at(orow), row_group)
                else:
                    self._report("E_DUPLICATE_COORDINATE", repeated(self.row + orow, keys, orow), self.row + orow,
                                 at(orow), row_group)
                    if "E_NOT_SORTED" not in self.found:
                        # A repeat stops the scan early; look on for an order break in this batch.
                        r2, _ = _kernels.columns_order_violation(keys, self.order, False, self.prev)
                        if r2 >= 0:
                            self._report(
                                "E_NOT_SORTED",
                                f"{out_of_order(self.row + r2, keys, r2)} (sort_order {list(self.meta.sort_order)})",
                                self.row + r2, at(r2), row_group,
                            )
            self.prev = np.array(at(n - 1), dtype=np.int64)
        if stats is not None:
            for k in range(K):
                smin, smax = stats[k]
                if smin is not None and (mins[k] < smin or maxs[k] > smax):
                    self._report(
                        "W_STATS_INCONSISTENT",
                        f"{index_column(k)} in row group {row_group} spans [{mins[k]}, {maxs[k]}] but its statistics "
                        f"say [{smin}, {smax}]",
                        row_group=row_group,
                    )
        for k in self.track_max:
            col = keys[k]
            prefix = np.maximum.accumulate(col)
            prev = np.concatenate([[self.running_max[k]], prefix[:-1]])
            rises = np.flatnonzero(prefix > prev)
            if len(rises) and self.record_bytes < self.budget // 8:
                # Compact arrays: (rows, values, coordinates) of the rows where the maximum rose.
                coords = np.stack([c[rises] for c in keys], axis=1)
                self.records[k].append((self.row + rises, col[rises].copy(), coords))
                self.record_bytes += rises.nbytes * (2 + K)
            # Over the budget a rise is not recorded: the bound is still checked, unnamed.
            self.running_max[k] = max(self.running_max[k], int(prefix[-1]))
        if self.deep:
            self.deep_bytes += 8 * K * n
            if self.deep_bytes * 3 > self.budget:
                self.deep = False  # reported by _deep_guard at the end: over --memory
                self.deep_over = True
                self.deep_keys = []
            else:
                self.deep_keys.append(np.stack(keys))
        self.row += n

    def _check_values(self, vals: pa.Array, row_group):
        meta = self.meta
        n = len(vals)
        if isinstance(vals.type, pa.BaseExtensionType):
            vals = vals.storage
        if meta.hybrid and (pa.types.is_list(vals.type) or pa.types.is_large_list(vals.type)):
            self._check_block_lengths(vals, row_group)
        leaf, first = self._first_null_value(vals, n)
        if first is not None:
            self._report("E_NULL_VALUE", f"values[{self.row + first}] is null", self.row + first,
                         row_group=row_group)
            return
        # Everything below compares decoded values.
        try:
            flat = _decode(leaf, meta)
        except READ_ERRORS:
            return
        if self.count_fill:
            self._count_fill(flat, n)
        if meta.iso and n:
            bad = self.iso.first_break(flat, self.row)
            if bad >= 0:
                self._report("E_ISO_VALUES_DIFFER",
                             f"values[{self.row + bad}] differs from values[{self.iso.first_at}] although iso is true",
                             self.row + bad, row_group=row_group)

    def _check_block_lengths(self, vals: pa.Array, row_group):
        """Every dense block of list-typed values holds block_size items."""
        import pyarrow.compute as pc  # only for list-typed values; a slow import otherwise saved

        meta = self.meta
        lengths = pc.fill_null(pc.list_value_length(vals), meta.block_size).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(lengths != meta.block_size)
        if len(bad):
            self._report(
                "E_DENSE_BLOCK_LENGTH",
                f"values[{self.row + bad[0]}] holds {lengths[bad[0]]} items, expected {meta.block_size}",
                self.row + int(bad[0]), row_group=row_group,
            )

    def _first_null_value(self, vals: pa.Array, n: int) -> tuple:
        """The values' leaf array (list items flattened) and the batch row of the first null
        value (in a list, a struct field or the column itself), None when there is none."""
        meta = self.meta
        null_rows = None
        if vals.null_count:
            null_rows = vals.is_null()
        leaf = vals
        if meta.hybrid and pa.types.is_fixed_size_list(vals.type) or pa.types.is_list(vals.type) \
                or pa.types.is_large_list(vals.type):
            if leaf.flatten().null_count:
                first = _first_null_list_item(vals)
                null_rows = first if null_rows is None else null_rows
            leaf = vals.flatten()
        if pa.types.is_struct(leaf.type):
            for i in range(leaf.type.num_fields):
                if leaf.field(i).null_count and null_rows is None:
                    null_rows = leaf.field(i).is_null()
        if null_rows is None:
            return leaf, None
        first = int(np.flatnonzero(np.asarray(null_rows.to_numpy(zero_copy_only=False)))[0]) \
            if isinstance(null_rows, pa.Array) else int(null_rows)
        if meta.hybrid and not isinstance(null_rows, int) and len(null_rows) != n:
            first //= max(meta.block_size, 1)
        return leaf, first

    def _count_fill(self, flat: np.ndarray, n: int) -> None:
        """Count the stored entries equal to the fill value (none counted where they cannot be
        compared with it)."""
        meta = self.meta
        fill = meta.fill_value
        try:
            if meta.value_type in ("string", "binary"):
                eq = np.fromiter((v == fill for v in flat), dtype=bool, count=len(flat))
            elif isinstance(fill, float) and fill != fill:
                eq = np.isnan(flat)
            else:
                eq = flat == fill
            if meta.hybrid:
                eq = eq.reshape(n, -1).all(axis=1)
            self.explicit_fill += int(np.count_nonzero(eq))
        except (TypeError, ValueError):
            pass

    def check_final_shape(self, shape):
        """Bounds of the extents that were unknown while scanning, now that the trailer gave them."""
        hits = []
        for k in self.track_max:
            for rows, vals, coords in self.records[k]:
                over = np.flatnonzero(vals >= shape[k])
                if len(over):
                    hits.append((int(rows[over[0]]), coords[over[0]]))
                    break
        if hits:
            row, key = min(hits, key=lambda h: h[0])
            self._report("E_INDEX_OUT_OF_BOUNDS", out_of_bounds(row, key.reshape(-1, 1), 0, shape[: self.K]),
                         row, key.tolist())
            return
        over = [k for k in self.track_max if self.running_max[k] >= shape[k]]
        if over:  # the rows were too many to remember which one came first
            k = over[0]
            self._report("E_INDEX_OUT_OF_BOUNDS", f"{index_column(k)} reaches {self.running_max[k]}, outside the "
                         f"final extent {shape[k]} given by the trailer")

    def finish(self):
        if self.explicit_fill:
            self.add(Problem("I_EXPLICIT_FILL",
                             f"{self.explicit_fill} stored entries equal the fill value (kept: they are data)",
                             dict(self.base)))
        if self.deep and self.deep_keys and "E_DUPLICATE_COORDINATE" not in self.found:
            keys = np.concatenate(self.deep_keys, axis=1)
            self.deep_keys = []
            order = np.lexsort(keys[::-1])
            skeys = np.ascontiguousarray(keys[:, order])
            row, kind = _kernels.first_order_violation(skeys, np.arange(self.K, dtype=np.int64), True)
            if row >= 0:
                orig = int(max(order[row], order[row - 1]))
                self._report("E_DUPLICATE_COORDINATE", repeated(orig, keys, orig),
                             orig, keys[:, orig].tolist())


def _first_null_list_item(vals) -> int:
    """The row (list) holding the first null item."""
    import pyarrow.compute as pc

    flat_nulls = np.asarray(vals.flatten().is_null().to_numpy(zero_copy_only=False))
    parents = pc.list_parent_indices(vals).to_numpy(zero_copy_only=False)
    return int(parents[np.flatnonzero(flat_nulls)[0]])


def _decode(leaf: pa.Array, meta: TensorMeta) -> np.ndarray:
    vt = meta.value_type
    if vt.startswith("complex"):
        return leaf.field(0).to_numpy(zero_copy_only=False) + 1j * leaf.field(1).to_numpy(zero_copy_only=False)
    if vt in ("string", "binary"):
        return np.asarray(leaf.to_numpy(zero_copy_only=False), dtype=object)
    return np.asarray(leaf.to_numpy(zero_copy_only=False))


# ---------------------------------------------------------------------------------------------

@dataclass
class PartCheck:
    """What checking one part of a directory found: its problems, its rows (None when a fatal
    check stopped it first), and its metadata and schema for the checks across parts."""

    problems: list
    nnz: int | None
    meta: TensorMeta | None
    schema: pa.Schema | None


def check_part(path: str, name: str, *, metadata_only: bool, deep: bool, strict: bool = False, memory=None,
               progress=None) -> PartCheck:
    """One part of the directory ``path`` checked on its own (a cluster's task)."""
    v = _Validator(path, metadata_only=metadata_only, deep=deep, budget=budget_of(memory), progress=progress,
                   strict=strict)
    return v.part(path, name)


def _group_ends(md) -> np.ndarray:
    """The file's row after each of its row groups."""
    return np.cumsum([md.row_group(r).num_rows for r in range(md.num_row_groups)], dtype=np.int64)


def _row_group_batches(path: str, pf: pq.ParquetFile, chunks, rows: int, ends, start: int):
    """(row group, batch) of the file's row-group ``chunks`` (None: the whole file, read a batch at
    a time), batches cut at the row groups' ``ends`` so that each piece is checked against its own
    group's statistics; ``start``: the file's row of the chunks' first.  A chunk is cut the same
    way whichever other chunks are read with it, so a run of chunks is scanned as the whole file
    scans it."""
    if chunks is None:
        decoded = prefetch(map(check_text, pf.iter_batches(batch_size=rows, use_threads=True)))
    else:
        decoded = read_chunks(path, pf, chunks, batch_rows=rows)
    r = 0
    for b in decoded:
        while b.num_rows:
            while r < len(ends) - 1 and start >= ends[r]:
                r += 1
            take = min(b.num_rows, int(ends[r]) - start)
            yield r, b.slice(0, take)
            b = b.slice(take)
            start += take


def _feed(scanner: Scanner, batches, stats, add, progress=None) -> bool:
    """``batches`` fed to ``scanner``; False (once reported) when the data cannot be decoded, which
    ends the scan there."""
    try:
        for r, batch in batches:
            scanner.feed(batch, row_group=r, stats=stats[r] if stats else None)
            if progress:
                progress.advance(batch.num_rows)
    except READ_ERRORS as e:
        add(Problem(read_failure_code(e), f"the data cannot be decoded after row {scanner.row}: {_short(e)}",
                    {"row": scanner.row}))
        return False
    return True


def _silent(meta: TensorMeta) -> Scanner:
    """A scanner that reports nothing: for the state a scan has reached at some row."""
    return Scanner(meta, lambda problem: None, {}, deep=False, budget=0, count_fill=False)


def _iso_reference(path: str, pf: pq.ParquetFile, meta: TensorMeta, chunks, rows: int, ends) -> tuple | None:
    """(row, values) the iso check of the whole file compares every row with: the first row of the
    first batch whose values pass their checks (None: no batch does, or the data cannot be read)."""
    scanner = _silent(meta)
    try:
        for _, batch in _row_group_batches(path, pf, chunks, rows, ends, 0):
            scanner.feed(batch)
            if scanner.iso.first is not None:
                return scanner.iso.first_at, scanner.iso.first
    except READ_ERRORS:
        pass
    return None


@dataclass
class RunScan:
    """What the data rules (C) found in a run of a file's row-group chunks: the problems in the
    order found (each code once), the entries equal to the fill value, the rows scanned, and the
    read failure that ended the run (no row after it is read)."""

    problems: list
    explicit_fill: int
    rows: int
    failure: Problem | None


def scan_run(path: str, chunks: list, before: list | None, *, meta: TensorMeta, stats, rows: int, location: dict,
             count_fill: bool, iso_first: tuple | None) -> RunScan:
    """The data rules on the row-group ``chunks`` (consecutive, of plan_chunks) of the Parquet file
    ``path``, found as the whole file's scan finds them there (a cluster's task): rows counted from
    the file's start, the order checked from the last row of the chunk ``before`` them (None: the
    run starts the file), the iso check against ``iso_first`` (_iso_reference) once past its row."""
    pf = parquet_file(path)
    ends = _group_ends(pf.metadata)

    def first_row(chunk):
        return int(ends[chunk[0] - 1]) if chunk[0] else 0

    problems: list = []
    failure: list = []
    scanner = Scanner(meta, problems.append, location, deep=False, budget=0, count_fill=count_fill)
    scanner.row = first_row(chunks[0])
    if before is not None:
        seed = _silent(meta)
        last = None
        try:
            # The chunk's last row group holds the row before this run: read that group alone.
            for _, batch in _row_group_batches(path, pf, [before[-1:]], rows, ends, first_row(before[-1:])):
                last = batch
        except READ_ERRORS:
            last = None  # the whole scan stops there: what this run finds is not reported
        if last is not None:
            seed.feed(last)  # the previous row, as the whole scan leaves it after that batch
        scanner.prev = seed.prev
    if iso_first is not None and iso_first[0] < scanner.row:
        scanner.iso.first_at, scanner.iso.first = iso_first

    def fail(problem: Problem):
        problem.location = {**location, **problem.location}
        failure.append(problem)

    start = scanner.row
    _feed(scanner, _row_group_batches(path, pf, chunks, rows, ends, start), stats, fail)
    return RunScan(problems, scanner.explicit_fill, scanner.row - start, failure[0] if failure else None)


def _merged(runs: list, scanner: Scanner, add):
    """The findings of the runs of a file's chunks, in row order (RunScan, scan_run), added as the
    whole file's scan adds them: each code the first time it is found, nothing after a read
    failure, then the entries equal to the fill value (``scanner``: the file's, which reports them)."""
    seen: set[str] = set()
    for run in runs:
        for problem in run.problems:
            if problem.code not in seen:
                seen.add(problem.code)
                add(problem)
        if run.failure is not None:
            add(run.failure)
            return
        scanner.explicit_fill += run.explicit_fill
    scanner.finish()


class _Validator:
    def __init__(self, target: str, *, metadata_only: bool, deep: bool, budget: Budget, progress,
                 strict: bool = False, scan_runs=None):
        mode = "metadata-only" if metadata_only else ("deep" if deep else "full")
        # scan_runs(path, chunks, their rows, scan_run's keywords): a file's runs of row-group
        # chunks scanned by scan_run elsewhere (a cluster), their RunScans in row order.
        self.scan_runs = scan_runs
        self.report = Report(target=target, mode=mode)
        self.metadata_only = metadata_only
        self.deep = deep
        self.strict = strict
        self.budget = budget
        self.progress = progress

    def add(self, problem: Problem):
        self.report.problems.append(problem)

    def problems_for(self, location: dict):
        """An add() that stamps ``location`` (e.g. the part) on each problem."""
        def add(p: Problem):
            p.location = {**location, **p.location}
            self.add(p)
        return add

    # -- Parquet file ------------------------------------------------------------------------
    def parquet(self, path: str, location: dict) -> tuple[TensorMeta | None, pa.Schema | None]:
        add = self.problems_for(location)
        try:
            pf = parquet_file(path)
            md = pf.metadata
        except READ_ERRORS as e:
            add(Problem("E_NOT_PARQUET", f"not a readable Parquet file: {_short(e)}"))
            return None, None
        raw = (md.metadata or {}).get(METADATA_KEY.encode())
        if raw is None:
            add(Problem("E_NO_SPTOOL_METADATA", "no 'sptool' key in the Parquet key-value metadata"))
            return None, None
        obj, problems = check_metadata(raw)
        for p in problems:
            add(p)
        if _has_fatal(problems):
            return None, None
        meta = _meta_from(obj)
        reported = {p.code for p in problems}
        if self.strict and md.metadata.get(CHECKSUMS_KEY.encode()) != b"crc32":
            add(Problem("W_NO_PAGE_CHECKSUMS", f"the footer has no {CHECKSUMS_KEY} = \"crc32\" entry: flipped bits "
                                               "in its pages could not be detected"))
        elif self.strict:  # the footer's record is a claim: the page headers say what was written
            try:
                missing, pages, first = pages_without_crc(path, md)
            except (FooterError, OSError) as e:
                add(Problem("E_READ_FAILED", f"the page headers cannot be read: {e}"))
            else:
                if missing:
                    add(Problem("W_NO_PAGE_CHECKSUMS", f"the footer records page checksums, but {missing} of {pages} "
                                                       f"pages have none, first {first}"))
        try:
            schema = pf.schema_arrow
        except READ_ERRORS as e:
            add(Problem("E_NOT_PARQUET", f"the file's schema cannot be decoded: {_short(e)}"))
            return meta, None
        problems = check_schema(schema, meta)
        for p in problems:
            add(p)
        if _has_fatal(problems):
            return meta, None  # already reported; not compared with the other parts
        self.report.nnz = (self.report.nnz or 0) + md.num_rows
        try:
            stats = self._footer(pf, meta, add, order_ok="E_SORT_ORDER" not in reported)
        except READ_ERRORS as e:
            add(Problem("E_READ_FAILED", f"the footer's row-group metadata cannot be read: {_short(e)}"))
            return meta, schema
        if not self.metadata_only:
            self._scan_parquet(path, pf, meta, stats, location, add, count_fill="E_FILL_VALUE" not in reported)
        return meta, schema

    def _footer(self, pf: pq.ParquetFile, meta: TensorMeta, add, *, order_ok: bool = True):
        md = pf.metadata
        if meta.nnz != md.num_rows:
            add(Problem("E_NNZ_MISMATCH", f"metadata says nnz = {meta.nnz} but the file holds {md.num_rows} rows"))
        names = pf.schema_arrow.names
        want = [pq.SortingColumn(names.index(index_column(d))) for d in meta.sort_order] if meta.sort_order else []
        if order_ok:  # else sort_order itself is wrong (E_SORT_ORDER): nothing to compare sorting_columns with
            _check_sorting_columns(md, want, meta, add)
        stats = _row_group_stats(md, meta.sparse_ndim, add)
        _check_stats(stats, meta, add)
        return stats

    def _scan_parquet(self, path: str, pf: pq.ParquetFile, meta: TensorMeta, stats, location, add, *, count_fill=True):
        scanner = Scanner(meta, add, location, deep=self.deep, budget=self.budget.total, count_fill=count_fill)
        rows = self.budget.rows(row_bytes(meta))
        if self.progress:
            self.progress.set_total(pf.metadata.num_rows)
        md = pf.metadata
        chunks = plan_chunks(md, range(md.num_row_groups), rows)
        if self.scan_runs is not None and chunks is not None and len(chunks) > 1 and not scanner.deep:
            # The runs of chunks scanned elsewhere (a cluster's tasks), each as this scan would
            # find its rows; their findings merged in row order.
            ends = _group_ends(md)
            iso = _iso_reference(path, pf, meta, chunks, rows, ends) if meta.iso else None
            runs = self.scan_runs(path, chunks, [int(sum(md.row_group(g).num_rows for g in c)) for c in chunks],
                                  dict(meta=meta, stats=stats, rows=rows, location=location, count_fill=count_fill,
                                       iso_first=iso))
            _merged(runs, scanner, self.add)
            return
        batches = _row_group_batches(path, pf, chunks, rows, _group_ends(md), 0)
        if _feed(scanner, batches, stats, add, self.progress):
            self._deep_guard(scanner, add)
            scanner.finish()

    def _deep_guard(self, scanner: Scanner, add):
        if scanner.deep_over:
            add(Problem("E_READ_FAILED",
                        "--deep needs the index columns in memory for a tensor whose sort_order is not a full "
                        f"permutation; they take {scanner.deep_bytes} bytes, over --memory"))

    # -- directory ---------------------------------------------------------------------------
    def directory(self, path: str, check_parts=None):
        """``check_parts(path, names)``, when given, yields each part's ``PartCheck`` in order
        (a cluster checks them in parallel); else they are checked here, one after another."""
        names = sorted(n for n, _ in listing(path))
        parts = list_parts(path)
        for n in names:
            if n.startswith((".", "_")) or n in parts:
                continue
            self.add(Problem("W_STRAY_FILE", f"{n} is not a part file; engines reading the directory may trip on it",
                             {"part": n}))
        if not parts:
            self.add(Problem("E_NO_PARTS", "the directory holds no *.parquet part files"))
            return
        checked = check_parts(path, parts) if check_parts else (self.part(path, name) for name in parts)
        self.across(parts, checked)

    def across(self, names, checked):
        """Group D: the parts' own findings (``PartCheck``s, in part order) gathered, and the
        parts that passed their fatal checks compared with the first of them."""
        first = None
        for name, part in zip(names, checked):
            self.report.problems += part.problems
            if part.nnz is not None:
                self.report.nnz = (self.report.nnz or 0) + part.nnz
            meta, schema = part.meta, part.schema
            if meta is None or schema is None:
                continue
            if first is None:
                first = (name, meta, schema)
                continue
            fname, fmeta, fschema = first
            if not schema.remove_metadata().equals(fschema.remove_metadata()):
                self.add(Problem("E_PART_SCHEMA_MISMATCH", f"{name} has a different schema from {fname}",
                                 {"part": name}))
            key = invariants_differ(fmeta, meta)
            if key:
                self.add(Problem("E_PART_METADATA_MISMATCH",
                                 f"{name} has {key} {getattr(meta, key)!r} but {fname} has {getattr(fmeta, key)!r}",
                                 {"part": name}))

    def part(self, path: str, name: str) -> PartCheck:
        """Groups A, B and C of one part of the directory ``path``, on their own."""
        one = _Validator(self.report.target, metadata_only=self.metadata_only, deep=self.deep, budget=self.budget,
                         progress=self.progress, strict=self.strict)
        if not CANONICAL_PART_NAME.match(name):
            one.add(Problem("W_PART_NAME", f"{name} does not match part-NNNNNN.parquet", {"part": name}))
        meta, schema = one.parquet(join_path(path, name), {"part": name})
        return PartCheck(one.report.problems, one.report.nnz, meta, schema)

    # -- stream ------------------------------------------------------------------------------
    def stream(self, f, name: str):
        digest = DigestReader(f)
        opened = self._open_stream(digest, name)
        if opened is None:
            return
        reader, header, meta = opened
        unknown = [k for k, d in enumerate(header["shape"][: meta.sparse_ndim]) if d is None]
        scanner = Scanner(meta, self.add, {}, deep=self.deep, budget=self.budget.total, track_max=unknown)
        read = self._stream_rows(reader, digest, header, scanner)
        if read is None:
            return
        rows, trailer = read
        self.report.nnz = rows
        shape = self._stream_shape(header, rows, trailer)
        self._final_shape(shape, header["version"], scanner)

    def _open_stream(self, digest: DigestReader, name: str):
        """The stream's reader, header (its checked 'sptool' metadata) and TensorMeta; None once
        a problem that ends the check is reported."""
        add = self.add
        try:
            reader = pa.ipc.open_stream(digest)
        except READ_ERRORS as e:
            empty = name == "-" and digest.size == 0
            add(Problem("E_STREAM_NOT_ARROW", NO_INPUT_ON_STDIN if empty else f"not an Arrow IPC stream: {_short(e)}"))
            return None
        raw = (reader.schema.metadata or {}).get(METADATA_KEY.encode())
        if raw is None:
            add(Problem("E_NO_SPTOOL_METADATA", "the stream schema has no 'sptool' metadata"))
            return None
        header, problems = check_metadata(raw, stream=True)
        for p in problems:
            add(p)
        if _has_fatal(problems):
            return None
        meta = _meta_from({**header, "shape": [s if s is not None else 2**63 - 1 for s in header["shape"]]})
        problems = check_schema(reader.schema, meta)
        for p in problems:
            add(p)
        if _has_fatal(problems):
            return None
        return reader, header, meta

    def _stream_rows(self, reader, digest: DigestReader, header: dict, scanner: Scanner):
        """Every batch of the stream read (and scanned unless metadata only): the rows that
        arrived and the trailer (None: none came; {}: one not of the spec's form); None once the
        stream cannot be read on."""
        promised = _trailer_promised(header)
        trailer = None
        rows = 0
        while True:
            crc = digest.crc
            try:
                batch, custom = read_stream_batch(reader)
            except StopIteration:
                return rows, trailer
            except READ_ERRORS as e:
                damaged = isinstance(e, DamagedBatch)
                code = "E_STREAM_TRUNCATED" if promised and trailer is None and not damaged else "E_READ_FAILED"
                self.add(Problem(code, f"the stream cannot be read after row {rows}: {_short(e)}", {"row": rows}))
                return None
            if custom is not None and TRAILER_KEY.encode() in custom:
                trailer = self._stream_trailer(custom[TRAILER_KEY.encode()], len(header["shape"]), crc, trailer)
                continue
            if trailer is not None:
                self.add(Problem("E_TRAILER_CONFLICT", "record batches follow the trailer"))
            rows += batch.num_rows
            if not self.metadata_only:
                scanner.feed(batch)
                if self.progress:
                    self.progress.advance(batch.num_rows)

    def _stream_trailer(self, raw: bytes, ndim: int, crc, before):
        """A trailer batch's trailer (_trailer), checked against the digest of the bytes before it
        (``crc``); ``before``: the trailer already read, if any."""
        add = self.add
        if before is not None:
            add(Problem("E_TRAILER_CONFLICT", "a second trailer follows the trailer"))
        trailer = _trailer(raw, ndim, add)
        problem = digest_problem(trailer, crc) if trailer else None
        if problem:
            add(Problem("E_STREAM_DIGEST", problem))
        if self.strict and trailer is not None and DIGEST_KEY not in trailer:
            add(Problem("W_NO_STREAM_DIGEST", f"the trailer has no \"{DIGEST_KEY}\" digest: changed bytes "
                                              "in the stream could not be detected"))
        return trailer

    def _stream_shape(self, header: dict, rows: int, trailer) -> list:
        """The stream's final shape, the header's completed by the trailer's, once the rows that
        arrived are compared with the nnz both declare."""
        add = self.add
        shape = list(header["shape"])
        if header["nnz"] is not None and header["nnz"] != rows:
            add(Problem("E_NNZ_MISMATCH", f"the header says nnz = {header['nnz']} but {rows} rows arrived"))
        if trailer is None:
            if self.strict:
                add(Problem("W_NO_STREAM_DIGEST", "the stream has no trailer, so no digest of its bytes"))
            if _trailer_promised(header):
                add(Problem("E_STREAM_TRUNCATED",
                            f"the stream ended after {rows} rows without the promised trailer: it was cut off"))
        elif trailer:
            t_nnz, t_shape = trailer["nnz"], trailer["shape"]
            if header["nnz"] is not None and header["nnz"] != t_nnz:
                add(Problem("E_TRAILER_CONFLICT", f"trailer nnz {t_nnz} contradicts header nnz {header['nnz']}"))
            elif t_nnz != rows:
                add(Problem("E_NNZ_MISMATCH", f"trailer says nnz = {t_nnz} but {rows} rows arrived"))
            if any(a is not None and a != b for a, b in zip(shape, t_shape)):
                add(Problem("E_TRAILER_CONFLICT", f"trailer shape {t_shape} contradicts header shape {shape}"))
            shape = [a if a is not None else b for a, b in zip(shape, t_shape)]
        return shape

    def _final_shape(self, shape: list, version, scanner: Scanner) -> None:
        """The final shape resolved and within the version's limits, and the rows scanned
        checked against it."""
        add = self.add
        if any(s is None for s in shape):
            add(Problem("E_STREAM_SHAPE_UNRESOLVED", f"shape {shape} still has unknown entries at the end"))
        elif shape_overflow(shape, version):
            add(Problem("E_SHAPE_OVERFLOW", f"the final {shape_overflow(shape, version)}"))
        elif not self.metadata_only:
            scanner.check_final_shape(shape)
        if not self.metadata_only:
            self._deep_guard(scanner, add)
            scanner.finish()


def _check_sorting_columns(md, want: list, meta: TensorMeta, add) -> None:
    """The row groups' Parquet sorting_columns, where declared, agree with sort_order (``want``
    as sorting columns)."""
    declared = [md.row_group(r).sorting_columns for r in range(md.num_row_groups)]
    if any(declared):
        def key(cols):  # nulls_first is not checked (there are no nulls), per the spec
            return tuple((c.column_index, c.descending) for c in (cols or ()))

        if any(key(d) != key(want) for d in declared):
            first = next(r for r, d in enumerate(declared) if key(d) != key(want))
            got = [(c.column_index, c.descending) for c in (declared[first] or ())]
            add(Problem(
                "E_SORTING_COLUMNS_MISMATCH",
                f"row group {first} declares sorting_columns {got}, but sort_order is "
                f"{list(meta.sort_order)}", {"row_group": first},
            ))
    elif meta.sort_order and md.num_row_groups:
        add(Problem("W_SORTING_COLUMNS_ABSENT",
                    f"sort_order is {list(meta.sort_order)} but no row group declares Parquet sorting_columns"))


def _row_group_stats(md, K: int, add) -> list:
    """Each row group's (min, max) per index column from its statistics, (None, None) where it
    has none (reported once when a non-empty group lacks them)."""
    col_index = {}
    for i in range(md.num_columns):
        col_index[md.schema.column(i).path] = i
    stats = []
    missing_stats = False
    for r in range(md.num_row_groups):
        rg = md.row_group(r)
        per_dim = []
        for k in range(K):
            ci = col_index.get(index_column(k))
            st = rg.column(ci).statistics if ci is not None else None
            if st is None or not st.has_min_max or rg.num_rows == 0:
                if rg.num_rows:
                    missing_stats = True
                per_dim.append((None, None))
            else:
                per_dim.append((int(st.min), int(st.max)))
        stats.append(per_dim)
    if missing_stats:
        add(Problem("W_NO_STATISTICS", "some index column chunks have no min/max statistics"))
    return stats


def _check_stats(stats: list, meta: TensorMeta, add) -> None:
    """The statistics lie within the shape and, for a sorted tensor, the row groups follow one
    another on the leading dimension of sort_order."""
    for r, per_dim in enumerate(stats):
        bad = next((msg for k, (lo, hi) in enumerate(per_dim)
                    if lo is not None and (msg := stats_problem(k, lo, hi, meta.shape[k]))), None)
        if bad:
            add(Problem("E_STATS_OUT_OF_BOUNDS", f"row group {r}: {bad}", {"row_group": r}))
            break
    if not meta.sort_order:
        return
    lead = meta.sort_order[0]
    prev, prev_max = None, None  # the last row group with statistics (empty ones have none)
    for r in range(len(stats)):
        lo, hi = stats[r][lead]
        if lo is None:
            continue
        if prev_max is not None and lo < prev_max:
            add(Problem("E_STATS_NOT_SORTED",
                        f"row group {r} starts at {index_column(lead)} = {lo}, below the maximum "
                        f"{prev_max} of row group {prev}", {"row_group": r}))
            break
        prev, prev_max = r, hi


def _trailer_promised(header: dict) -> bool:
    """Whether the stream's header promises a trailer."""
    return bool((header.get("stream") or {}).get("trailer"))

def _trailer(raw: bytes, ndim: int, add) -> dict:
    """The trailer as {"nnz", "shape"}, or {} (after reporting) when it is not of the spec's form."""
    try:
        t = load_json(raw, "trailer", strict=False)
    except ValueError as e:
        add(Problem("E_TRAILER_CONFLICT", f"the trailer is not JSON: {_short(e)}"))
        return {}
    problem = trailer_problem(t, ndim)
    if problem:
        add(Problem("E_TRAILER_CONFLICT", f"{problem}: {raw[:80]!r}"))
        return {}
    return t


def _anndata(v: _Validator, path: str) -> None:
    """An AnnData file's X, checked as its source reads it: the sparse group's attributes and its
    datasets' lengths against the shape when opened, then (unless metadata only) indptr never
    decreasing and ending at the data's length, and every index within the shape, in one pass.
    The reader stops at the first problem, which is reported with the code it names.  Indices
    unsorted within a row are valid AnnData (no flag in the file promises sorted ones)."""
    from ..errors import DataError, InputError
    from ..io import AnnDataSource

    try:
        with AnnDataSource(path) as src:
            if not v.metadata_only:
                for keys, _ in src.iter_arrays(budget=v.budget):
                    if v.progress is not None:
                        v.progress.advance(keys.shape[1])
            v.report.nnz = src.meta.nnz
    except InputError:
        raise
    except DataError as e:
        v.add(Problem(getattr(e, "code", "E_READ_FAILED"), e.message))


def validate(path: str, *, metadata_only: bool = False, deep: bool = False, strict: bool = False, memory=None,
             progress=None) -> Report:
    """Check a tensor (file, directory or stream) against every rule of formats/SPEC.md.

    Returns a Report; bad data never raises.  Only an input that cannot be opened at all
    (missing, unreadable) raises InputError.  ``strict`` adds the checks that only strict mode
    makes (W_NO_PAGE_CHECKSUMS, W_NO_STREAM_DIGEST); ``Report.ok(strict=True)`` then counts
    every warning as a failure, as ``validate --strict`` does.

    Examples
    --------
    >>> report = validate("sample_data/digits.parquet")
    >>> report.valid
    True

    ``sptool.distributed.validate`` checks the parts of a directory on a Dask cluster.
    """
    return checked_report(path, metadata_only=metadata_only, deep=deep, strict=strict, memory=memory,
                          progress=progress)


def checked_report(path: str, *, metadata_only: bool, deep: bool, strict: bool, memory, progress,
           check_parts=None, scan_runs=None) -> Report:
    """validate's Report; ``check_parts(path, names)``, when given, checks a directory's parts, and
    ``scan_runs`` (_Validator) scans a single file's runs of row groups (sptool.distributed's
    validate does both on a cluster)."""
    from ..errors import InputError

    path = local_path(path)  # another filesystem's URL is read through it, by io
    target = path  # "-" for stdin, as the spec's report says
    v = _Validator(target, metadata_only=metadata_only, deep=deep, budget=budget_of(memory), progress=progress,
                   strict=strict, scan_runs=scan_runs)
    kind = locate(path)
    if kind == "stdin":
        import sys

        if sys.stdin.isatty():
            raise InputError("stdin is a terminal; pipe an Arrow IPC stream into sptool or name a file", path="-")
        v.stream(sys.stdin.buffer, target)
    elif kind == "dir":
        v.directory(path, check_parts)
    elif kind == "stream":
        with open_sequential(path) as f:
            v.stream(f, target)
    elif kind in ("hdf5", "anndata"):
        _anndata(v, path)
    elif kind == "unknown" and path.endswith(".arrows"):
        v.add(Problem("E_STREAM_NOT_ARROW", "not an Arrow IPC stream (no continuation marker at the start)"))
    else:
        v.parquet(path, {})
    return v.report
