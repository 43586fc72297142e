"""Decode a Parquet file's row groups on several threads and hand them over in file order.

pyarrow's own readers decode one row group at a time and spread only its columns over
threads, so one heavy column (float64 values) keeps a single core busy while the other
waits.  Whole row groups decoded side by side, each thread with its own file handle, use
both cores: 0.15 s instead of 0.25 s for three columns of a 20M-row file (2 cores).

Memory: ``threads + 1`` chunks of about ``batch_rows / threads`` rows are decoded or waiting,
plus the chunk being consumed: about two batches, fewer than iter_batches behind the
one-deep prefetch (sptool/_memory.py counts the batches in flight).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .._memory import ROW_GROUP_ROWS
from .._threads import THREADS, stop_pool
from ._footer import check_levels
from ._url import located


def parquet_file(path: str, metadata=None) -> pq.ParquetFile:
    """A Parquet file opened as sptool reads every one: each page's CRC-32, where the writer
    stored one, checked as the page is read (a mismatch raises OSError, "CRC checksum
    verification failed"), and no pre-buffering.  Only opens: the caller reads the footer."""
    # pre_buffer=False: pre-buffering a row group's column chunks doubled peak memory
    # (10M rows at --memory 64MiB: 199 MiB vs 103 MiB) for no gain in speed.
    filesystem, inner = located(path)  # a URL: read through its filesystem's input files
    pf = pq.ParquetFile(inner, metadata=metadata, pre_buffer=False, page_checksum_verification=True,
                        filesystem=filesystem)
    if metadata is None:  # a footer handed in was checked when its file was opened
        check_footer(path, pf.metadata)
    return pf


class DamagedFooter(ValueError):
    """A footer that parses but contradicts itself: asking pyarrow about it would abort."""


def check_footer(path: str, md: pq.FileMetaData):
    """The footer agrees with itself where pyarrow would otherwise abort the process (an uncaught
    C++ exception, SIGABRT) as soon as anything makes a column chunk's metadata (``validate``,
    ``info``, a plain read): each chunk's type and level histograms fit its column (checked on
    our own reading of the footer, io/_footer.py, before pyarrow makes any chunk's metadata),
    and the row groups' row counts add up to the file's."""
    problem = check_levels(path, md.schema)
    if problem:
        raise DamagedFooter(f"the footer is damaged: {problem}")
    rows = 0
    for r in range(md.num_row_groups):
        rg = md.row_group(r)
        if rg.num_rows < 0 or rg.num_columns != md.num_columns:
            raise DamagedFooter(f"the footer is damaged: row group {r} holds {rg.num_rows} rows in "
                                f"{rg.num_columns} column chunks for {md.num_columns} columns")
        rows += rg.num_rows
    if rows != md.num_rows:
        # Planning reads by the row groups' counts (plan_chunks) needs them to add up.
        raise DamagedFooter(f"the footer is damaged: its row groups hold {rows} rows, the file {md.num_rows}")


def read_failure_code(e: Exception) -> str:
    """The validation code of a failure to decode data: a page whose checksum does not match
    has its own code (the bytes changed after writing), anything else is E_READ_FAILED."""
    return "E_PAGE_CHECKSUM" if "CRC checksum verification failed" in str(e) else "E_READ_FAILED"


def check_text(data):
    """``data`` (a table or batch) once its string columns are known to be valid UTF-8, else
    ArrowInvalid: Parquet's decoder copies a STRING column's bytes as they are, and a bad one
    would fail later, in the middle of an op, or pass on into an output."""
    for col in data.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            col.validate(full=True)
    return data


WHOLE_GROUP_BYTES = 16 << 20


def plan_chunks(metadata: pq.FileMetaData, groups, batch_rows: int, threads: int = THREADS) -> list[list[int]] | None:
    """Runs of consecutive row groups (from ``groups``) of about batch_rows / threads rows each,
    or None when a row group alone exceeds max(batch_rows, ROW_GROUP_ROWS) (a file from another
    writer with huge row groups), or batch_rows and WHOLE_GROUP_BYTES: only a batch-at-a-time
    reader keeps those within --memory."""
    target = max(1, batch_rows // max(threads, 1))
    limit = max(batch_rows, ROW_GROUP_ROWS)
    chunks: list[list[int]] = []
    run: list[int] = []
    rows = 0
    for r in groups:
        group = metadata.row_group(r)
        n = group.num_rows
        # A row group read whole is held about three times over as it decodes (its compressed
        # pages, the values, the table): a wide one of more rows than a batch goes to the
        # batch-at-a-time reader too (a 100k-row gradient of 64 floats: 190 MiB peak RSS whole,
        # 140 MiB in 16k-row batches, measured).
        if n > limit or (n > batch_rows and group.total_byte_size > WHOLE_GROUP_BYTES):
            return None
        if run and (rows + n > target or r != run[-1] + 1):
            chunks.append(run)
            run, rows = [], 0
        run.append(r)
        rows += n
    if run:
        chunks.append(run)
    return chunks


def read_chunks(path: str, pf: pq.ParquetFile, chunks: list[list[int]], *, batch_rows: int,
                columns=None, threads: int = THREADS, prepare=None) -> Iterator:
    """Batches of at most batch_rows rows of the given row-group chunks, in order; with
    ``prepare``, (batch, prepare(batch)) pairs, prepare running on the decoding thread (a
    kernel that releases the GIL then works beside the next decode, on data still in cache).

    Decoding errors, and prepare's, are raised by the consumer as they were raised.
    """
    def split(table):
        batches = check_text(table).to_batches(batch_rows)
        return batches if prepare is None else [(b, prepare(b)) for b in batches]

    if threads <= 1 or len(chunks) <= 1:
        for groups in chunks:
            yield from split(pf.read_row_groups(groups, columns=columns, use_threads=True))
        return

    from concurrent.futures import ThreadPoolExecutor

    local = threading.local()  # each thread's open file, closed as its thread ends

    def work(groups):
        f = getattr(local, "file", None)
        if f is None:
            # The footer is parsed once, by the caller; each thread only opens the file.
            f = local.file = parquet_file(path, metadata=pf.metadata)
        return split(f.read_row_groups(groups, columns=columns, use_threads=False))

    pool = ThreadPoolExecutor(threads, thread_name_prefix="sptool-read")
    pending: deque = deque()
    todo = iter(chunks)
    try:
        for groups in todo:
            pending.append(pool.submit(work, groups))
            if len(pending) > threads:
                break
        while pending:
            items = pending.popleft().result()
            following = next(todo, None)
            if following is not None:
                pending.append(pool.submit(work, following))
            yield from items
            del items
    finally:
        stop_pool(pool)  # the chunks not begun are cancelled; no join (sptool._threads)
