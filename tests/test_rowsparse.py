"""Row-sparse tensors (SelectedRows / IndexedSlices): built by convert from .npy pairs, an .npz
of rows/values/height or TensorFlow's indices/values/dense_shape (and torch.save when torch is
installed), written back with --to rows, summarised by info and head, and carried through
validate, todense, reorder --duplicates sum, concat along axis 0 and add, each checked against
NumPy on the dense table (np.add.at sums the repeated rows)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import sptool
from sptool import SparseTensor
from sptool.cli import cli


def dense_of(rows, values, height):
    out = np.zeros((height,) + values.shape[1:], values.dtype)
    np.add.at(out, rows, values)
    return out


def arrays(seed=0, height=30, block=(4,), n=25, dtype=np.float32):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, height, n).astype(np.int64)
    rows[:5] = rows[5:10]  # repeated rows
    return rows, rng.standard_normal((n,) + block).astype(dtype), height


def run(*args, code=0):
    r = CliRunner().invoke(cli, ["-q", *map(str, args)])
    assert r.exit_code == code, r.output
    return r.output


@pytest.mark.parametrize("block", [(4,), (2, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convert_rows_values_height(tmp_path, block, dtype, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "6")
    rows, values, height = arrays(block=block, dtype=dtype)
    np.save(tmp_path / "r.npy", rows.astype(np.int32))  # any integer type of ids
    np.save(tmp_path / "v.npy", values)
    run("convert", "--row-ids", tmp_path / "r.npy", "--row-values", tmp_path / "v.npy", "--height", height,
        "-o", tmp_path / "g.parquet")
    t = sptool.read(str(tmp_path / "g.parquet"))
    assert (t.shape, t.sparse_ndim, t.values.dtype) == ((height,) + block, 1, np.dtype(dtype))
    assert np.array_equal(t.indices[:, 0], rows) and np.array_equal(t.values, values)  # rows kept as stored
    assert np.array_equal(t.to_dense(), dense_of(rows, values, height))
    assert sptool.validate(str(tmp_path / "g.parquet")).valid


def test_indexed_slices_npz_and_rows_round_trip(tmp_path):
    rows, values, height = arrays(block=(3,))
    np.savez(tmp_path / "slices.npz", indices=rows.astype(np.int32), values=values,
             dense_shape=np.array([height, 3], np.int64))
    run("convert", tmp_path / "slices.npz", "-o", tmp_path / "g.parquet")
    assert np.array_equal(sptool.read(str(tmp_path / "g.parquet")).to_dense(), dense_of(rows, values, height))
    run("convert", tmp_path / "g.parquet", "-o", tmp_path / "out.npz", "--to", "rows")
    with np.load(tmp_path / "out.npz") as z:
        assert sorted(z.files) == ["height", "rows", "values"]
        assert z["rows"].dtype == np.int64 and int(z["height"]) == height
        assert np.array_equal(z["rows"], rows) and np.array_equal(z["values"], values)
    run("convert", tmp_path / "out.npz", "-o", tmp_path / "back.parquet")  # rows/values/height read back
    assert np.array_equal(sptool.read(str(tmp_path / "back.parquet")).to_dense(), dense_of(rows, values, height))


def test_scipy_npz_still_reads_as_scipy(tmp_path):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    m = scipy_sparse.random(6, 5, density=0.4, format="coo", random_state=1)
    scipy_sparse.save_npz(tmp_path / "m.npz", m)
    run("convert", tmp_path / "m.npz", "-o", tmp_path / "m.parquet")
    assert np.array_equal(sptool.read(str(tmp_path / "m.parquet")).to_dense(), m.toarray())


def test_torch_sparse_coo(tmp_path):
    torch = pytest.importorskip("torch")  # optional: read only when installed
    rows, values, height = arrays(block=(3,))
    t = torch.sparse_coo_tensor(torch.from_numpy(rows).reshape(1, -1), torch.from_numpy(values), (height, 3))
    torch.save(t, tmp_path / "g.pt")
    run("convert", tmp_path / "g.pt", "-o", tmp_path / "g.parquet")
    assert np.array_equal(sptool.read(str(tmp_path / "g.parquet")).to_dense(), t.to_dense().numpy())


def test_bad_row_sparse_inputs(tmp_path):
    rows, values, height = arrays()
    np.save(tmp_path / "r.npy", rows)
    np.save(tmp_path / "v.npy", values)
    np.save(tmp_path / "short.npy", values[:-1])
    out = tmp_path / "g.parquet"
    bad = run("convert", "--row-ids", tmp_path / "r.npy", "--row-values", tmp_path / "v.npy", "--height", 5, "-o", out,
              code=1)
    first = int(np.flatnonzero(rows >= 5)[0])
    assert f"row id {rows[first]} (entry {first}) is outside the height [0, 5)" in bad
    bad = run("convert", "--row-ids", tmp_path / "r.npy", "--row-values", tmp_path / "short.npy", "--height", 30,
              "-o", out, code=1)
    assert "25 row ids but values of shape [24, 4]" in bad
    assert "--height" in run("convert", "--row-ids", tmp_path / "r.npy", "--row-values", tmp_path / "v.npy", "-o", out,
                             code=2)
    assert "not both" in run("convert", tmp_path / "v.npy", "--row-ids", tmp_path / "r.npy", "--values",
                             tmp_path / "v.npy", "--height", 30, "-o", out, code=2)
    np.savez(tmp_path / "mis.npz", indices=rows, values=values, dense_shape=np.array([height, 5]))
    assert "does not match" in run("convert", tmp_path / "mis.npz", "-o", out, code=1)
    assert not out.exists()


def _sample(tmp_path, seed=0, height=30, n=25, sort=False):
    rows, values, _ = arrays(seed, height=height, n=n)
    if sort:
        order = np.argsort(rows, kind="stable")
        rows, values = rows[order], values[order]
    path = str(tmp_path / f"g{seed}.parquet")
    sptool.write(SparseTensor(rows.reshape(-1, 1), values, (height, 4), sort_order=(0,) if sort else (),
                              unique=False), path)
    return path, dense_of(rows, values, height), rows


def test_info_says_row_sparse_and_the_fraction_touched(tmp_path):
    path, _, rows = _sample(tmp_path)
    d = sptool.info(path)
    distinct = len(np.unique(rows))
    assert d["row_sparse"] == {"rows": 25, "block": [4], "height": 30, "distinct_rows": distinct,
                               "touched": distinct / 30}
    text = run("info", path)
    assert "row-sparse  25 rows of [4]; " in text and f"{distinct} distinct, {distinct / 30:.3g} of the height" in text
    canonical = str(tmp_path / "c.parquet")
    sptool.reorder(path, canonical, duplicates="sum")
    assert sptool.info(canonical)["row_sparse"]["distinct_rows"] == distinct  # from the metadata alone


def test_head_previews_blocks(tmp_path):
    rows, values, height = arrays(block=(8,))
    path = str(tmp_path / "g.parquet")
    sptool.write(SparseTensor(rows.reshape(-1, 1), values, (height, 8), unique=False), path)
    text = run("head", "-n", 2, path)
    first = ", ".join(f"{x:.4g}" for x in values[0, :6].tolist())
    flat = " ".join(text.split())
    assert f"[{first}, ...] (block [8])" in flat
    lines = run("head", "-n", 1, "--json", path)
    assert np.allclose(__import__("json").loads(lines)["value"], values[0])


def test_todense_reorder_concat_add_validate_against_numpy(tmp_path):
    a, dense_a, rows_a = _sample(tmp_path, 1)
    b, dense_b, _ = _sample(tmp_path, 2, sort=True)
    assert sptool.validate(a).valid and sptool.validate(b).valid
    sptool.todense(a, str(tmp_path / "a.npy"))
    assert np.allclose(np.load(tmp_path / "a.npy"), dense_a)
    merged = str(tmp_path / "merged.parquet")
    sptool.reorder(a, merged, duplicates="sum")  # Paddle's MergeAdd
    m = sptool.read(merged)
    assert m.canonical and np.array_equal(m.indices[:, 0], np.unique(rows_a))
    assert np.allclose(m.to_dense(), dense_a)
    cat = sptool.concat([a, b], None, axis=0)
    assert cat.shape == (60, 4) and np.allclose(cat.to_dense(), np.concatenate([dense_a, dense_b]))
    total = sptool.add(a, b, None)
    assert total.sparse_ndim == 1 and np.allclose(total.to_dense(), dense_a + dense_b)
