"""The --memory budget: parsing sizes and turning a budget into batch sizes."""

from __future__ import annotations

import os
import re
import resource
import sys

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


def share(budget: int, parts: int) -> int:
    """A 1/parts share of a budget, for a step that takes a --memory of its own: never below the
    minimum, which that step would refuse."""
    return max(budget // parts, MIN_BUDGET)


def resolve_budget(memory: str | int | None) -> int:
    if memory is None:
        memory = os.environ.get(ENV_VAR) or DEFAULT_MEMORY
    budget = parse_size(memory)
    if budget < MIN_BUDGET:
        raise UsageError(f"--memory {memory} is too small: sptool needs at least 16MiB")
    return budget


def usable_budget(budget: int) -> int:
    """The part of --memory left for data once the interpreter, libraries and I/O buffers are in."""
    return max(budget - FIXED_OVERHEAD, budget // 4)


# Tests set this to a tiny number so that every streaming boundary (batches, row groups,
# carried state) is crossed on small data.
FORCE_BATCH_ROWS: int | None = None


def batch_rows(budget: int, row_bytes: int, *, minimum: int = 1024, maximum: int = 1 << 20) -> int:
    """Rows per batch so that the batches in flight fit in the budget."""
    if FORCE_BATCH_ROWS:
        return FORCE_BATCH_ROWS
    usable = usable_budget(budget)
    rows = usable // (max(row_bytes, 1) * _COPIES_PER_BATCH)
    return int(min(max(rows, minimum), maximum))


def peak_rss() -> int:
    """Peak resident set size of this process, in bytes."""
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru if sys.platform == "darwin" else ru * 1024
