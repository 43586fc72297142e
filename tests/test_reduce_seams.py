"""reduce's one pass over a file claiming row-major order, where the claim breaks exactly where a
batch begins (the rows of every batch in order, the batches not), and what the output of the
one pass claims: checked against NumPy and against the rows as pyarrow reads them back."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sptool
from sptool.errors import DataError

SHAPE = (30, 20, 8)


def _claiming_canonical(path: str, idx: np.ndarray, val: np.ndarray) -> str:
    """A file of the rows ``idx``, ``val`` in that order whose metadata claims them canonical."""
    good = np.unique(idx, axis=0)
    sptool.write(sptool.SparseTensor(good, np.ones(len(good)), SHAPE), path)
    f = pq.ParquetFile(path)
    kept = {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"}
    meta = json.loads(kept[b"sptool"])
    assert meta["sort_order"] == [0, 1, 2] and meta["unique"]
    meta.update(nnz=len(idx))
    kept[b"sptool"] = json.dumps(meta).encode()
    table = pa.table({f"indices_{k}": idx[:, k] for k in range(3)} | {"values": val}, schema=f.schema_arrow)
    pq.write_table(table.replace_schema_metadata(kept), path, row_group_size=64)
    return path


def _sorted_coords(rng, n: int, lo: int, hi: int) -> np.ndarray:
    """n distinct coordinates of SHAPE with the leading index in [lo, hi), row-major sorted."""
    flat = rng.choice((hi - lo) * SHAPE[1] * SHAPE[2], n, replace=False) + lo * SHAPE[1] * SHAPE[2]
    return np.stack(np.unravel_index(np.sort(flat), SHAPE), axis=1).astype(np.int64)


@pytest.mark.parametrize("batch", [40, 64])
def test_a_claimed_order_broken_where_a_batch_begins_is_an_error_naming_the_row(tmp_path, rng, monkeypatch,
                                                                                 batch):
    """Each batch's rows are in order, so the sum's one compiled pass over a batch finds nothing
    wrong in it: the first row of the next batch, below the last one before it, is still refused,
    by its row and whole coordinate, and nothing is written."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", str(batch))
    first = _sorted_coords(rng, 2 * batch, 15, 30)
    second = _sorted_coords(rng, 2 * batch, 0, 15)
    idx = np.concatenate([first, second])
    path = _claiming_canonical(str(tmp_path / "lies.parquet"), idx, rng.standard_normal(len(idx)))
    row = 2 * batch  # the first row of the third batch
    assert np.all(np.diff(idx[:row, 0]) >= 0) and np.all(np.diff(idx[row:, 0]) >= 0) and idx[row, 0] < idx[row - 1, 0]
    out = tmp_path / "out.parquet"
    want = rf"indices\[{row}\] = \[{idx[row, 0]},{idx[row, 1]},{idx[row, 2]}\] is out of order"
    with pytest.raises(DataError, match=want):
        sptool.reduce(path, str(out), op="sum", axis=1)
    assert not out.exists()


@pytest.mark.parametrize("axis,keepdims", [(1, False), (1, True), (2, False), ([0, 2], False), (0, True)])
def test_the_one_pass_output_is_canonical_and_within_its_shape(tmp_path, rng, monkeypatch, axis, keepdims):
    """The one pass's entries go to the output file without the writer checking them row by row:
    read back by pyarrow, they are strictly row-major, inside the shape the metadata gives, and
    NumPy's sums; the metadata says canonical."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "37")
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "23")
    idx = _sorted_coords(rng, 900, 0, 30)
    val = rng.standard_normal(len(idx))
    path = str(tmp_path / "t.parquet")
    sptool.write(sptool.SparseTensor(idx, val, SHAPE), path)
    out = str(tmp_path / "out.parquet")
    sptool.reduce(path, out, op="sum", axis=axis, keepdims=keepdims)
    dense = np.zeros(SHAPE)
    dense[tuple(idx.T)] = val
    want = dense.sum(axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
    table = pq.read_table(out)
    meta = json.loads(pq.read_metadata(out).metadata[b"sptool"])
    keys = np.stack([table.column(f"indices_{k}").to_numpy() for k in range(want.ndim)], axis=1)
    assert meta["shape"] == list(want.shape) and meta["canonical"] and meta["nnz"] == len(keys)
    assert np.all((keys >= 0) & (keys < np.array(want.shape)))
    codes = np.ravel_multi_index(tuple(keys.T), want.shape)
    assert np.all(np.diff(codes) > 0)
    got = np.zeros(want.shape)
    got[tuple(keys.T)] = table.column("values").to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
