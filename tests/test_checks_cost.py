"""benchmarks/run.py --no-checks measures what the read checks cost by running each command with
them switched off: that launcher must switch off exactly what it says (a page whose CRC does not
match, a claim the rows break), and the "on" launcher must leave them on, or the figure means
nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import sptool

RUN_PY = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "run.py")


def _launcher() -> str:
    """CHECKS_CODE, read from run.py's source (importing run.py would register every benchmark)."""
    with open(RUN_PY) as f:
        src = f.read()
    start = src.index('CHECKS_CODE = """') + len('CHECKS_CODE = """')
    return textwrap.dedent(src[start:src.index('"""', start)])


def _run(tmp_path, state: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _launcher(), state, *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


def test_the_launcher_switches_the_claim_check_off_and_only_when_asked(tmp_path):
    rows = np.array([[0, 1], [2, 0], [1, 3], [4, 4]])  # claimed row-major
    first = int(np.flatnonzero(np.diff(np.ravel_multi_index(rows.T, (6, 5))) <= 0)[0]) + 1  # NumPy: what breaks it
    meta = sptool.TensorMeta(shape=(6, 5), sparse_ndim=2, value_type="int64", nnz=4, sort_order=(0, 1), unique=True)
    table = pa.table({"indices_0": rows[:, 0], "indices_1": rows[:, 1], "values": np.arange(1, 5)})
    with pq.ParquetWriter(tmp_path / "liar.parquet", table.schema) as w:
        w.write_table(table)
        w.add_key_value_metadata({"sptool": meta.to_json()})
    sptool.write(sptool.SparseTensor([[0, 0]], np.array([1]), (6, 5)), str(tmp_path / "b.parquet"))
    args = ("add", "liar.parquet", "b.parquet", "-o", "out.parquet", "-q")
    on = _run(tmp_path, "on", *args)
    assert on.returncode == 1 and f"indices[{first}] = {rows[first].tolist()}".replace(" ", "") in \
        on.stderr.replace(" ", "") and "out of order" in on.stderr, on.stderr
    assert not (tmp_path / "out.parquet").exists()
    assert "although the metadata says" in on.stderr  # ClaimCheck's message
    off = _run(tmp_path, "off", *args)
    # Nothing verified the claim: add's merge vouches for its output, so the command runs to the end.
    assert off.returncode == 0 and "Traceback" not in off.stderr, off.stderr
    assert "although the metadata says" not in off.stderr and (tmp_path / "out.parquet").exists()


def test_the_launcher_switches_page_crc_verification_off_and_only_when_asked(tmp_path):
    path = tmp_path / "t.parquet"
    rng = np.random.default_rng(4)
    sptool.write(sptool.SparseTensor([[i] for i in range(1000)], rng.standard_normal(1000), (1000,)), str(path))
    md = pq.read_metadata(path)
    col = md.row_group(0).column(md.num_columns - 1)  # values: one page, its body last in the chunk
    end = col.data_page_offset + col.total_compressed_size
    data = bytearray(path.read_bytes())
    data[end - 3] ^= 0x40
    path.write_bytes(bytes(data))
    on = _run(tmp_path, "on", "validate", "t.parquet")
    assert on.returncode == 1 and "E_PAGE_CHECKSUM" in on.stdout + on.stderr, on.stdout + on.stderr
    off = _run(tmp_path, "off", "validate", "t.parquet")
    assert off.returncode in (0, 1) and "Traceback" not in off.stderr, off.stderr  # ran, and reported
    assert "E_PAGE_CHECKSUM" not in off.stdout + off.stderr and "t.parquet" in off.stdout + off.stderr
