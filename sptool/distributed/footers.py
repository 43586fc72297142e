"""A part directory opened from footers read on the cluster: each part's footer (Parquet
metadata, schema, sptool metadata, checked as ``io.read_part`` checks it) read by its own task,
in parallel, and the source assembled here as ``io.open_source`` assembles it.  ``info`` needs
no more; rows, if an op reads them, are read here from the files themselves."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from .._memory import budget_of, peak_rss
from ..io import ParquetSource, Part, locate, open_dataset, open_input, open_parquet, read_part
from ..ops.info import summary
from .progress import follow
from .ranges import Outcome


@dataclass
class Footer:
    """What a ParquetFile holds once its footer is read: enough for metadata and statistics;
    reading rows opens the file (here, on first use)."""

    path: str
    metadata: pq.FileMetaData
    schema_arrow: pa.Schema

    def __getattr__(self, name):
        if name.startswith("__"):  # pickling and copying look up dunders: not the file's
            raise AttributeError(name)
        return getattr(open_parquet(self.path), name)


def footer(path: str) -> tuple:
    """One part's checked footer (a task): (Footer, its trusted and its stored TensorMeta, the
    worker's peak memory)."""
    part = read_part(path)
    return Footer(path, part.file.metadata, part.file.schema_arrow), part.meta, part.stored, peak_rss()


def open_directory(client, path: str) -> ParquetSource:
    """The part directory ``path`` as a ParquetSource, its footers read on the cluster."""

    def read_parts(paths: list[str]) -> list[Part]:
        read = follow(client, [client.submit(footer, p, pure=False) for p in paths], Outcome())
        return [Part(p, f, meta, stored) for p, (f, meta, stored, _) in zip(paths, read)]

    return open_dataset(path, read_parts)


def info(path: str, *, client, scan: bool = False, histogram: int | None = None, memory=None, progress=None) -> dict:
    """``sptool.info`` with the footers of a part directory read in parallel on the cluster of
    ``client``: the same summary.  Rows, when read (``scan``, ``histogram``), are read here."""
    budget_of(memory)  # a bad --memory is refused before any task, as on one machine
    if isinstance(path, str) and locate(path) == "dir":
        opened = contextlib.nullcontext(open_directory(client, path))
    else:
        opened = open_input(path)
    return summary(path, opened, scan=scan, histogram=histogram, memory=memory, progress=progress)
