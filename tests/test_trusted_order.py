"""An order a file claims is checked wherever it is trusted, not only where the op asks for a
check: a file claiming canonical rows that are not in order is an error naming the first row out
of order (NumPy finds it), where an op passing the rows through gave a wrong result (a group met
twice, an svmlight line split in two)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sptool
from sptool.errors import DataError

SHAPE = (30, 20)


@pytest.fixture
def lying(tmp_path, rng):
    """A file whose metadata says canonical, with one row moved to the end (NumPy: the first row
    whose row-major code is below the previous row's)."""
    idx = np.unique(np.stack([rng.integers(0, SHAPE[0], 300), rng.integers(0, SHAPE[1], 300)], axis=1), axis=0)
    val = rng.standard_normal(len(idx))
    path = str(tmp_path / "lying.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), path)
    f = pq.ParquetFile(path)
    kept = {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"}
    assert json.loads(kept[b"sptool"])["canonical"]
    moved = np.r_[np.arange(1, len(idx)), 0]  # the first row last
    table = pa.table({"indices_0": idx[moved, 0], "indices_1": idx[moved, 1], "values": val[moved]},
                     schema=f.schema_arrow)
    pq.write_table(table.replace_schema_metadata(kept), path)
    codes = idx[moved, 0] * SHAPE[1] + idx[moved, 1]
    return path, int(np.flatnonzero(np.diff(codes) < 0)[0]) + 1


def test_group_checks_the_order_it_trusts(lying):
    path, row = lying
    with pytest.raises(DataError, match=rf"indices\[{row}\] = .* although the metadata says sort_order \[0, 1\]"):
        list(sptool.group(path, [0]))


def test_a_conversion_checks_the_order_it_trusts(lying, tmp_path):
    path, row = lying
    out = tmp_path / "out.svm"
    with pytest.raises(DataError, match=rf"indices\[{row}\] = .* although the metadata says sort_order \[0, 1\]"):
        sptool.convert(path, str(out))
    assert not out.exists()
