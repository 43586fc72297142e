"""The --memory budget: parsing sizes and turning a budget into batch sizes."""

from __future__ import annotations

import os
import re
import resource
import sys
from dataclasses import dataclass, replace

from ._threads import THREADS
from .errors import UsageError

DEFAULT_MEMORY = "1GiB"
ENV_VAR = "SPTOOL_MEMORY"

# Rows per Parquet row group written by sptool.  pyarrow's reader buffers a whole row
# group's column chunks (its read-ahead follows row groups, not batches, apache/arrow#12653),
# so the cap is what keeps any reader of our files in bounded memory.  131072 rows also gave
# the fastest DuckDB range slices in the format research (formats/SPEC.md).
ROW_GROUP_ROWS = 131_072
# ...and a row group should stay near this size for wide (hybrid) rows.
ROW_GROUP_BYTES = 64 << 20

_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "kib": 2**10,
    "m": 10**6, "mb": 10**6, "mib": 2**20,
    "g": 10**9, "gb": 10**9, "gib": 2**30,
    "t": 10**12, "tb": 10**12, "tib": 2**40,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")

# A batch in flight is held about this many times over (the Arrow batch, NumPy views and
# copies, the kernel's output, the writer's encode buffer, one prefetched batch).
_COPIES_PER_BATCH = 8
FIXED_OVERHEAD = 96 << 20  # interpreter, numpy/pyarrow/rich imports, reader and writer buffers


def parse_size(text: str | int) -> int:
    if isinstance(text, int):
        return text
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise UsageError(f"cannot read {text!r} as a size (examples: 512MB, 2GiB, 1000000)")
    return int(float(m.group(1)) * _UNITS[unit])


def format_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# The smallest --memory sptool accepts.
MIN_BUDGET = 16 << 20


# Tuning that a caller may fix instead of deriving it from the byte budget: rows per batch and
# per Parquet row group written, rows per sorted run and per merge slice of the external sort,
# bytes of sorted runs kept in memory, entries per slab of a sparse-sparse matmul, runs merged at
# once, worker threads, the rows below which work stays on one thread, and bytes per block of
# text parsed.  The tests use tiny values so that every streaming and threading boundary is
# crossed on small data; on the command line they come from $SPTOOL_BATCH_ROWS and the like
# (TUNING_ENV).
TUNING_ENV = {
    "batch_rows": "SPTOOL_BATCH_ROWS", "row_group_rows": "SPTOOL_ROW_GROUP_ROWS", "run_rows": "SPTOOL_RUN_ROWS",
    "merge_rows": "SPTOOL_MERGE_ROWS", "keep_bytes": "SPTOOL_KEEP_BYTES", "slab_entries": "SPTOOL_SLAB_ENTRIES",
    "fan_in": "SPTOOL_FAN_IN", "threads": "SPTOOL_THREADS", "parallel_rows": "SPTOOL_PARALLEL_ROWS",
    "text_block_bytes": "SPTOOL_TEXT_BLOCK_BYTES",
}


@dataclass(frozen=True)
class Budget:
    """The --memory budget, resolved once (``budget_of``) and handed down as an object: its
    bytes, how an op splits it (``share``), and what follows from it (rows per batch, rows per
    sorted run), unless a tuning field fixes that."""

    total: int
    batch_rows: int | None = None
    row_group_rows: int | None = None
    run_rows: int | None = None
    merge_rows: int | None = None
    keep_bytes: int | None = None
    slab_entries: int | None = None
    fan_in: int | None = None
    threads: int | None = None
    parallel_rows: int | None = None
    text_block_bytes: int | None = None

    @property
    def workers(self) -> int:
        """Threads for work split across cores."""
        return self.threads or THREADS

    @property
    def usable(self) -> int:
        """The part left for data once the interpreter, libraries and I/O buffers are in."""
        return max(self.total - FIXED_OVERHEAD, self.total // 4)

    def share(self, parts: int) -> Budget:
        """A 1/parts share, for a step that works within a budget of its own: never below the
        minimum, which that step would refuse; the tuning carries over."""
        return replace(self, total=max(self.total // parts, MIN_BUDGET))

    def with_total(self, total: int) -> Budget:
        """The same tuning with ``total`` bytes: an op's own split of its budget."""
        return replace(self, total=total)

    def with_batch_rows_at_most(self, rows: int, row_bytes: int) -> Budget:
        """The same budget reading at most ``rows`` rows a batch, unless tuning fixed them."""
        return self if self.batch_rows else replace(self, batch_rows=min(self.rows(row_bytes), rows))

    def rows(self, row_bytes: int, *, minimum: int = 1024, maximum: int = 1 << 20) -> int:
        """Rows per batch so that the batches in flight fit in the budget."""
        if self.batch_rows:
            return self.batch_rows
        rows = self.usable // (max(row_bytes, 1) * _COPIES_PER_BATCH)
        return int(min(max(rows, minimum), maximum))

    def group_rows(self, row_bytes: int) -> int:
        """Rows per Parquet row group written."""
        if self.row_group_rows:
            return self.row_group_rows
        return max(1, min(ROW_GROUP_ROWS, ROW_GROUP_BYTES // max(row_bytes, 1)))


def budget_of(memory: str | int | Budget | None) -> Budget:
    """The one place a --memory value is read: a size ("512MB", "2GiB", bytes), a Budget (taken
    as it is), or None for $SPTOOL_MEMORY or the default; tuning from TUNING_ENV applies."""
    if isinstance(memory, Budget):
        return memory
    if memory is None:
        given = os.environ.get(ENV_VAR)
        memory = given or DEFAULT_MEMORY
        where = f"${ENV_VAR}={given}" if given else None
    else:
        where = None
    try:
        total = parse_size(memory)
    except UsageError:
        if where:
            raise UsageError(f"cannot read {where} as a size (examples: 512MB, 2GiB, 1000000)") from None
        raise
    if total < MIN_BUDGET:
        raise UsageError(f"{where or f'--memory {memory}'} is too small: sptool needs at least 16MiB")
    tuning = {}
    for field, var in TUNING_ENV.items():
        if os.environ.get(var):
            try:
                tuning[field] = int(os.environ[var])
            except ValueError:
                raise UsageError(f"${var} must be a whole number, not {os.environ[var]!r}") from None
    return Budget(total, **tuning)


# glibc's largest mmap threshold: its dynamic threshold rises to the size of blocks freed, up to
# this, so that blocks below it come from the heap and reuse pages already faulted in.
MMAP_THRESHOLD = 32 << 20


def peak_rss() -> int:
    """Peak resident set size of this process, in bytes.

    On Linux, the kernel's high-water mark of this process's own memory (VmHWM): getrusage's
    ru_maxrss survives fork and exec, so a command started by a process holding 1.5 GB (a
    notebook, a benchmark, a Dask nanny started by one) reported 1.5 GB as its own peak."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru if sys.platform == "darwin" else ru * 1024

