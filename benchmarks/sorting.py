"""Sorting: reorder of an unsorted 3-D tensor against DuckDB, Polars and the I/O floor, the same
under a small --memory (spilled runs), and on the wide 2-D int32 matrix.  Registered into
harness.BENCHMARKS on import.
"""

from __future__ import annotations

import os

from harness import Benchmark, Tool, python_tool, register, sptool_tool
from inputs import prepare_2d_int32, prepare_reorder

# -- reorder ------------------------------------------------------------------------------------

PEER_REORDER_DUCKDB = """
    import sys
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2")
    names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{sys.argv[1]}'").fetchall()]
    keys = ", ".join(n for n in names if n.startswith("indices_"))
    con.execute(f"COPY (SELECT * FROM '{sys.argv[1]}' ORDER BY {keys}) TO '{sys.argv[2]}' (FORMAT parquet)")
"""

# The I/O floor: read the input and write the sorted rows with sptool's own writer settings
# (the sorted table is read from sptool's output beforehand, so no sort is timed).
PEER_REORDER_FLOOR = """
    import json, sys
    import pyarrow.parquet as pq
    from sptool.format import TensorMeta
    from sptool.io.sink import parquet_writer_options
    pq.read_table(sys.argv[1])
    table = pq.read_table(sys.argv[2])
    meta = TensorMeta.from_dict(json.loads(pq.read_metadata(sys.argv[2]).metadata[b"sptool"]))
    pq.write_table(table, sys.argv[3], row_group_size=131072, **parquet_writer_options(meta, table["values"]))
"""


PEER_REORDER_POLARS = """
    import sys
    import polars as pl
    frame = pl.scan_parquet(sys.argv[1])
    keys = [c for c in frame.collect_schema().names() if c.startswith("indices_")]
    frame.sort(keys).sink_parquet(sys.argv[2])
"""


def tools_reorder(paths: dict, out: str) -> list[Tool]:
    src = paths["unsorted"]
    a, b, c, d = (os.path.join(out, f"reorder-{x}.parquet") for x in ("sptool", "duckdb", "floor", "polars"))
    return [
        sptool_tool("reorder", src, "-o", a, outputs=[a]),
        python_tool("duckdb COPY ... ORDER BY (2 threads)", PEER_REORDER_DUCKDB, src, b, outputs=[b]),
        python_tool("polars scan_parquet().sort().sink_parquet()", PEER_REORDER_POLARS, src, d, outputs=[d]),
        python_tool("I/O floor: pyarrow read + write", PEER_REORDER_FLOOR, src, paths["sorted"], c, outputs=[c]),
    ]


def check_reorder(paths: dict, out: str) -> tuple[str | None, str]:
    import sptool

    report = sptool.validate(os.path.join(out, "reorder-sptool.parquet"), metadata_only=True)
    problem = None if report.valid else f"sptool's output is invalid: {report.codes}"
    return problem, _output_sizes(out, "reorder", ("sptool", "duckdb", "polars", "floor"), paths["rows"])


def _output_sizes(out: str, stem: str, tools, rows: int) -> str:
    """The output's bytes per entry for each tool that wrote one (the write side's other cost)."""
    sizes = []
    for tool in tools:
        path = os.path.join(out, f"{stem}-{tool}.parquet")
        if os.path.exists(path):
            sizes.append(f"{tool} {_size_of(path) / rows:.2f}")
    return "output bytes per entry: " + ", ".join(sizes)


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


register(Benchmark(
    "reorder", "sort an unsorted 3-D float64 tensor row-major, file to file",
    "ratio >= 1.67 against DuckDB, >= 4 against Polars, >= 1.43 against the I/O floor",
    prepare_reorder, tools_reorder, check=check_reorder,
))


def _tools_reorder_memory(paths: dict, out: str) -> list[Tool]:
    src = paths["unsorted"]
    a = os.path.join(out, "reorder-mem-sptool.parquet")
    return [sptool_tool("reorder", src, "-o", a, "--memory", str(paths["budget"]), outputs=[a])]


register(Benchmark(
    "reorder-memory", "reorder with --memory at 1/8 of the input's in-memory size (many spilled runs)",
    "peak RSS at most the --memory budget + 150 MB", prepare_reorder, _tools_reorder_memory,
))


def _tools_reorder_2d(paths: dict, out: str) -> list[Tool]:
    return [t for t in tools_reorder({**paths, "sorted": paths["unsorted"]}, out) if not t.name.startswith("I/O")]


register(Benchmark(
    "reorder-2d-int32", "sort an unsorted 300k x 300k int32 matrix row-major, file to file",
    "sptool at least as fast as DuckDB and Polars", prepare_2d_int32("reorder"), _tools_reorder_2d,
    check=lambda p, o: check_reorder(p, o),
))
