"""A source whose metadata promises an order (and uniqueness) it does not keep: every op that
trusts the promise instead of sorting stops at the first row that breaks it, with one message
naming the row, the file and the claim, and leaves no output behind.  NumPy finds that row."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sptool
from sptool import DataError

SHAPE = (6, 5)


def _liar(tmp_path, rows: np.ndarray) -> str:
    """A file of ``rows`` whose metadata says canonical (row-major, unique), written around the sink."""
    meta = sptool.TensorMeta(shape=SHAPE, sparse_ndim=2, value_type="int64", nnz=len(rows), sort_order=(0, 1),
                             unique=True)
    table = pa.table({"indices_0": rows[:, 0], "indices_1": rows[:, 1],
                      "values": np.arange(1, len(rows) + 1, dtype=np.int64)})
    path = str(tmp_path / "liar.parquet")
    with pq.ParquetWriter(path, table.schema) as w:
        w.write_table(table)
        w.add_key_value_metadata({"sptool": meta.to_json()})
    return path


def _first_break(rows: np.ndarray) -> tuple[int, str]:
    """NumPy: the first row not strictly after the one before it in row-major order."""
    for i in range(1, len(rows)):
        prev, cur = tuple(rows[i - 1]), tuple(rows[i])
        if cur <= prev:
            return i, "repeated" if cur == prev else "out of order"
    raise AssertionError("the rows keep the claim")


def _canonical(tmp_path, name: str, shape) -> str:
    path = str(tmp_path / name)
    sptool.write(sptool.SparseTensor([[0, 0], [1, 2]], np.array([1, 2], np.int64), shape), path)
    return path


OPS = {
    "add": lambda liar, tmp, out: sptool.add(liar, _canonical(tmp, "b.parquet", SHAPE), out + ".parquet"),
    "matmul": lambda liar, tmp, out: sptool.matmul(liar, _canonical(tmp, "b.parquet", SHAPE[::-1]),
                                                   out + ".parquet"),
    "bincount": lambda liar, tmp, out: sptool.bincount(liar, out + ".parquet", axis=-1),
    "todense": lambda liar, tmp, out: sptool.todense(liar, out + ".npy"),
}


# matmul needs rows in order only: repeated entries are summed into the product.
CASES = [(op, broken) for op in sorted(OPS) for broken in ("out of order", "repeated")
         if (op, broken) != ("matmul", "repeated")]


@pytest.mark.parametrize(("op", "broken"), CASES)
def test_a_broken_claim_names_its_row(tmp_path, rng, op, broken):
    rows = np.unique(np.stack([rng.integers(0, SHAPE[0], 40), rng.integers(0, SHAPE[1], 40)], axis=1), axis=0)
    at = int(rng.integers(3, len(rows) - 3))
    if broken == "repeated":
        rows = np.insert(rows, at, rows[at - 1], axis=0)
    else:
        rows[[at - 1, at]] = rows[[at, at - 1]]
    row, kind = _first_break(rows)
    assert kind == broken
    liar = _liar(tmp_path, rows)
    out = str(tmp_path / "out")
    with pytest.raises(DataError) as info:
        OPS[op](liar, tmp_path, out)
    message = str(info.value)
    r, c = rows[row]
    assert f"indices[{row}] = [{r},{c}] is {broken}, although the metadata says sort_order [0, 1], unique true" \
        in message
    assert "liar.parquet" in message
    assert not [f for f in os.listdir(tmp_path) if f.startswith("out") or f.startswith(".out")]
