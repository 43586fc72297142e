"""cross and cross-hashed against TensorFlow's own results (tests/data/tfsparse) and against an
itertools.product oracle, with unsorted, duplicated, dense and streamed inputs."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import small_runs
from references import cross as ref

import sptool
from sptool.cli import cli
from sptool.errors import ShapeMismatch, UsageError

TF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tfsparse")
with open(os.path.join(TF, "index.json")) as _f:
    TF_CASES = [c for c in json.load(_f)["cases"] if "cross" in c["call"]["op"]]
DEFAULT_KEY = 0xDECAFCAFFE


def _tf_input(d, name, permute=None):
    idx, vals, shape = d[f"{name}_indices"], d[f"{name}_values"], tuple(int(s) for s in d[f"{name}_shape"])
    if vals.dtype.kind == "S":
        vals = np.array([v.decode() for v in vals], dtype=object)
    if permute is not None:
        p = permute(len(vals))
        idx, vals = idx[p], vals[p]
    return sptool.SparseTensor(idx, vals, shape)


def _run_tf_case(case, tmp_path, permute=None):
    d = np.load(os.path.join(TF, case["file"]))
    paths = []
    for name in case["inputs"]:
        path = str(tmp_path / f"{name}.parquet")
        sptool.write(_tf_input(d, name, permute), path)
        paths.append(path)
    out = str(tmp_path / "out.parquet")
    call = case["call"]
    if call["op"] == "tf.sparse.cross":
        sptool.cross(paths, out, separator=call["separator"])
    else:
        sptool.cross_hashed(paths, out, num_buckets=call["num_buckets"], hash_key=call.get("hash_key"))
    return d, sptool.read(out)


@pytest.mark.parametrize("case", TF_CASES, ids=[c["file"] for c in TF_CASES])
def test_matches_tensorflow(case, tmp_path):
    d, got = _run_tf_case(case, tmp_path)
    np.testing.assert_array_equal(got.indices, d["out_indices"])
    assert got.shape == tuple(int(s) for s in d["out_shape"])
    if d["out_values"].dtype.kind == "S":
        assert list(got.values) == [v.decode() for v in d["out_values"]]
    else:
        assert got.values.dtype == np.int64
        np.testing.assert_array_equal(got.values, d["out_values"])


@pytest.mark.parametrize("case", TF_CASES[:6], ids=[c["file"] for c in TF_CASES[:6]])
def test_unsorted_inputs_give_tensorflows_result_of_the_sorted_ones(case, tmp_path, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 16, 5)
    rng = np.random.default_rng(3)
    d, got = _run_tf_case(case, tmp_path, permute=rng.permutation)
    np.testing.assert_array_equal(got.indices, d["out_indices"])
    assert got.shape == tuple(int(s) for s in d["out_shape"])
    want = [v.decode() for v in d["out_values"]] if d["out_values"].dtype.kind == "S" else list(d["out_values"])
    assert list(got.values) == want


# ---------------------------------------------------------------------------------------------
# the oracle: per row, itertools.product of the features, each input's in column order


def _features(inp, B):
    """Per row, the input's features: a SparseTensor's values in column order (duplicate
    coordinates summed, as the format defines), or a dense matrix's row."""
    if isinstance(inp, np.ndarray):
        return [list(inp[r]) for r in range(B)]
    cells = {}
    for (r, c), v in zip(map(tuple, inp.indices), inp.values):
        cells[(r, c)] = cells[(r, c)] + v if (r, c) in cells else v
    rows = [[] for _ in range(B)]
    for (r, c) in sorted(cells):
        rows[r].append(cells[(r, c)])
    return rows


def _text(v):
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v)
    if isinstance(v, str):
        return v
    return str(int(v))


def _fingerprint(v):
    if isinstance(v, (bytes, np.bytes_)):
        return ref.fingerprint64_bytes(bytes(v))
    if isinstance(v, str):
        return ref.fingerprint64_bytes(v.encode())
    return int(v) & ref.M64


def oracle(inputs, B, *, separator="_X_", hashed=False, num_buckets=0, key=DEFAULT_KEY):
    # TensorFlow's column order: the sparse inputs, then the dense ones.
    cols = [i for i in inputs if not isinstance(i, np.ndarray)] + [i for i in inputs if isinstance(i, np.ndarray)]
    per_input = [_features(i, B) for i in cols]
    entries = []
    for r in range(B):
        for p, combo in enumerate(itertools.product(*(f[r] for f in per_input))):
            if hashed:
                h = key
                for v in combo:
                    h = ref.fingerprint_cat64(h, _fingerprint(v))
                value = h % num_buckets if num_buckets > 0 else h % ref.INT64_MAX
            else:
                parts = [_text(v) for v in combo]
                if any(isinstance(x, bytes) for x in parts):
                    value = separator.encode().join(x if isinstance(x, bytes) else x.encode() for x in parts)
                else:
                    value = separator.join(parts)
            entries.append(((r, p), value))
    return entries


def _ids_tensor(rng, B, width, kind, *, duplicates=False, shuffle=False, empty_rows=0.2):
    rows, cols = [], []
    for r in range(B):
        if rng.random() < empty_rows:
            continue
        k = int(rng.integers(1, width + 1))
        rows += [r] * k
        cols += sorted(rng.choice(width, size=k, replace=False).tolist())
    idx = np.array([rows, cols], dtype=np.int64).T.reshape(-1, 2)
    n = len(idx)
    if kind == "int":
        vals = rng.integers(-30, 30, size=n).astype(np.int64)
    elif kind == "int32":
        vals = rng.integers(0, 1000, size=n).astype(np.int32)
    elif kind == "string":
        vals = np.array([f"w{v}é" if v % 5 == 0 else f"w{v}" for v in rng.integers(0, 40, size=n)], dtype=object)
    else:
        vals = np.array([b"\xff" + bytes([int(v)]) for v in rng.integers(0, 255, size=n)], dtype=object)
    if duplicates and n:
        extra = rng.integers(0, n, size=max(1, n // 5))
        idx = np.concatenate([idx, idx[extra]])
        vals = np.concatenate([vals, vals[extra]])
    if shuffle or duplicates:
        p = rng.permutation(len(idx))
        idx, vals = idx[p], vals[p]
    return sptool.SparseTensor(idx, vals, (B, width))


def _as_entries(t):
    return [(tuple(int(x) for x in i), v.item() if isinstance(v, np.generic) else v)
            for i, v in zip(t.indices, t.values)]


def _inputs_to_paths(inputs, tmp_path):
    paths = []
    for i, inp in enumerate(inputs):
        if isinstance(inp, np.ndarray):
            path = str(tmp_path / f"in{i}.npy")
            np.save(path, inp)
        else:
            path = str(tmp_path / f"in{i}.parquet")
            sptool.write(inp, path)
        paths.append(path)
    return paths


@pytest.mark.parametrize("seed", range(8))
def test_random_inputs_against_the_oracle(seed, tmp_path, tiny_batches, monkeypatch):
    small_runs(monkeypatch, 32, 9)
    rng = np.random.default_rng(100 + seed)
    B = int(rng.integers(1, 30))
    kinds = [["int", "string"], ["string", "int", "int32"], ["bytes", "int"], ["int", "int", "int", "string"]][seed % 4]
    inputs = [_ids_tensor(rng, B, int(rng.integers(1, 5)), k, duplicates=(k == "int" and seed % 2 == 0),
                          shuffle=seed % 3 == 0) for k in kinds]
    if seed % 2:  # dense columns, put first: TensorFlow still crosses them after the sparse inputs
        inputs.insert(0, rng.integers(0, 9, size=(B, 2)))
        inputs.append(np.array([[f"d{r}", "z"] for r in range(B)]))
    paths = _inputs_to_paths(inputs, tmp_path)
    out = str(tmp_path / "x.parquet")
    r = sptool.cross(paths, out, separator="|")
    want = oracle(inputs, B, separator="|")
    got = sptool.read(out)
    assert _as_entries(got) == want
    assert got.canonical and got.shape == (B, max([p + 1 for (_, p), _ in want], default=0))
    assert r["rows_out"] == len(want)
    key = [None, 0, 12345, -7][seed % 4]
    buckets = [0, 1000, 3, 2**40][seed % 4]
    sptool.cross_hashed(paths, out, num_buckets=buckets, hash_key=key)
    want = oracle(inputs, B, hashed=True, num_buckets=buckets,
                  key=DEFAULT_KEY if not key else key & ref.M64)
    assert _as_entries(sptool.read(out)) == want


def test_huge_row_products_stream_in_slices(tmp_path, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "37")  # slices of 37 crosses cut every row's product
    rng = np.random.default_rng(5)
    a = sptool.SparseTensor([[0, c] for c in range(20)] + [[2, 0]], rng.integers(0, 99, 21), (3, 20))
    b = sptool.SparseTensor([[0, c] for c in range(15)] + [[1, 0], [2, 3]], [f"s{i}" for i in range(17)], (3, 15))
    dense = rng.integers(0, 5, size=(3, 4))
    paths = _inputs_to_paths([a, b, dense], tmp_path)
    out = str(tmp_path / "x.parquet")
    sptool.cross_hashed(paths, out, num_buckets=97)
    got = sptool.read(out)
    assert got.nnz == 20 * 15 * 4 + 4 and got.shape == (3, 1200)
    assert _as_entries(got) == oracle([a, b, dense], 3, hashed=True, num_buckets=97)
    sptool.cross(paths, out)
    assert _as_entries(sptool.read(out)) == oracle([a, b, dense], 3)


@pytest.mark.parametrize("seed", range(4))
def test_slice_maxes_are_the_largest_indices_of_the_slice(seed):
    """What cross tells the sink in place of its checks (the largest row and column of each
    slice, from the rows' offsets) against the maxima of the reference's crosses, for slices
    starting and ending mid-row, between rows and around rows with no crosses."""
    from sptool.ops.cross import _slice_maxes

    rng = np.random.default_rng(seed)
    R = 40
    counts = rng.integers(0, 3, size=(3, R)) * rng.integers(0, 2, size=R)  # a row may have none
    ptr = np.zeros((3, R + 1), np.int64)
    for i in range(3):
        ptr[i, 1:] = np.cumsum(counts[i])
    offsets = np.concatenate([[0], np.cumsum(np.prod(counts, axis=0))]).astype(np.int64)
    row_ids = np.sort(rng.choice(10 * R, size=R, replace=False)).astype(np.int64)
    total = int(offsets[-1])
    for g0 in range(total):
        for g1 in {g0 + 1, min(g0 + int(rng.integers(1, 30)), total), total}:
            crosses = list(ref._crosses(ptr, offsets, g0, g1))
            want = [int(row_ids[crosses[-1][0]]), max(p for _, p, _ in crosses)]
            assert _slice_maxes(row_ids, offsets, g0, g1).tolist() == want


def test_dense_only_and_in_memory_result(tmp_path):
    x = np.array([["a", "b"], ["c", "d"], ["e", "f"]])
    y = np.array([[1], [2], [3]], dtype=np.int32)
    got = sptool.cross([x, y])  # no output: a SparseTensor
    assert _as_entries(got) == oracle([x, y], 3)
    assert got.shape == (3, 2)


def test_no_crosses(tmp_path):
    a = sptool.SparseTensor([[0, 0]], [1], (4, 2))
    b = sptool.SparseTensor([[1, 0]], [2], (4, 2))
    got = sptool.cross_hashed([a, b])
    assert got.nnz == 0 and got.shape == (4, 0)  # TensorFlow: [batch, max crosses in a row]


def test_errors(tmp_path, rng):
    good = sptool.SparseTensor([[0, 0], [1, 1]], [3, 4], (2, 2))
    with pytest.raises(ShapeMismatch, match="Expected batch size 2 got 3"):
        sptool.cross([good, sptool.SparseTensor([[0, 0]], [1], (3, 2))])
    with pytest.raises(ShapeMismatch, match="Expected batch size 2 got 5"):
        sptool.cross([good, np.zeros((5, 1), np.int64)])
    with pytest.raises(ShapeMismatch, match="2-D"):
        sptool.cross([good, sptool.SparseTensor([[0, 0, 0]], [1], (2, 2, 2))])
    with pytest.raises(UsageError, match="float64"):
        sptool.cross([good, sptool.SparseTensor([[0, 0]], [1.5], (2, 2))])
    with pytest.raises(UsageError, match="float"):
        sptool.cross([good, np.zeros((2, 1))])
    with pytest.raises(UsageError, match="num-buckets"):
        sptool.cross_hashed([good], num_buckets=-1)
    with pytest.raises(UsageError, match="int64"):
        sptool.cross_hashed([good], hash_key=2**63)
    with pytest.raises(UsageError, match="at least one"):
        sptool.cross([])
    with pytest.raises(UsageError, match="stdin"):
        sptool.cross(["-", "-"])


def test_cli(tmp_path):
    a = _ids_tensor(np.random.default_rng(1), 12, 3, "string")
    b = _ids_tensor(np.random.default_rng(2), 12, 3, "int")
    paths = _inputs_to_paths([a, b], tmp_path)
    out = str(tmp_path / "x.parquet")
    runner = CliRunner()
    r = runner.invoke(cli, ["-q", "cross-hashed", *paths, "--num-buckets", "50", "--hash-key", "9", "-o", out])
    assert r.exit_code == 0, r.output
    assert _as_entries(sptool.read(out)) == oracle([a, b], 12, hashed=True, num_buckets=50, key=9)
    r = runner.invoke(cli, ["-q", "cross", *paths, "--separator", "+", "-o", out])
    assert r.exit_code == 0, r.output
    assert _as_entries(sptool.read(out)) == oracle([a, b], 12, separator="+")
    bad = str(tmp_path / "bad.parquet")
    sptool.write(sptool.SparseTensor([[0, 0]], [1], (5, 2)), bad)
    fresh = str(tmp_path / "fresh.parquet")
    r = runner.invoke(cli, ["cross", paths[0], bad, "-o", fresh])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "Expected batch size 12 got 5" in r.output
    assert bad in r.output and not os.path.exists(fresh)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".") or "tmp" in n]
    r = runner.invoke(cli, ["cross-hashed", paths[0], "--num-buckets", "-2", "-o", fresh])
    assert r.exit_code == 2 and "num-buckets" in r.output and not os.path.exists(fresh)


def test_peak_rss_within_the_budget_when_the_output_is_far_larger(tmp_path):
    """12.5M crosses (300 MB as arrays) from 100k rows of 3 x 5 ids, at --memory 64MiB."""
    from test_memory import OVERHEAD, peak_rss

    rng = np.random.default_rng(8)
    n = 100_000
    rows = np.repeat(np.arange(n), 5)
    idx = np.stack([rows, np.tile(np.arange(5), n)], axis=1)
    paths = []
    for i in range(3):
        vals = np.array([f"w{v}" for v in rng.integers(0, 500, len(rows))], dtype=object) if i == 0 else \
            rng.integers(0, 1 << 40, len(rows))
        paths.append(str(tmp_path / f"in{i}.parquet"))
        sptool.write(sptool.SparseTensor(idx, vals, (n, 5)), paths[-1])
    budget = 64 << 20
    rss = peak_rss(["--memory", str(budget), "cross-hashed", *paths, "--num-buckets", "1000", "-o", "o.parquet"],
                   tmp_path)
    assert rss < budget + OVERHEAD, f"peak RSS {rss / 2**20:.0f} MiB"
    import pyarrow.parquet as pq

    f = pq.ParquetFile(str(tmp_path / "o.parquet"))
    assert f.metadata.num_rows == n * 125
    first = f.read_row_group(0)
    k = min(first.num_rows, 2 * 125)
    small = [sptool.SparseTensor(t.indices[t.indices[:, 0] < 2], t.values[t.indices[:, 0] < 2], (2, 5))
             for t in (sptool.read(p) for p in paths)]
    want = oracle(small, 2, hashed=True, num_buckets=1000)[:k]
    got = list(zip(zip(first.column("indices_0").to_numpy()[:k].tolist(), first.column("indices_1").to_numpy()[:k]
                       .tolist()), first.column("values").to_numpy()[:k].tolist()))
    assert got == want


# ---------------------------------------------------------------------------------------------
# the output's width: the most crosses in a row, whatever the inputs' declared widths


def _tf_sparse(data):
    """TensorFlow's test helper _sparse_tensor: row r holds data[r] at columns 0, 1, ...; the
    shape is [len(data), longest row]."""
    idx = [[r, c] for r, row in enumerate(data) for c in range(len(row))]
    vals = [v for row in data for v in row]
    vals = np.array(vals, dtype=object) if isinstance(vals[0], str) else np.array(vals, dtype=np.int64)
    return sptool.SparseTensor(idx, vals, (len(data), max(len(row) for row in data)))


# sparse_cross_op_test.py's test_sparse_cross_dense and test_integer_sparse_input: one sparse
# [2, 2] input and a dense [2, 2] one give 4 crosses in row 1, TensorFlow's dense_shape [2, 4].
TF_ONE_SPARSE = [
    ("test_sparse_cross_dense", [["batch1-FC1-F1"], ["batch2-FC1-F1", "batch2-FC1-F2"]],
     [["batch1-FC1-F1_X_batch1-FC2-F1", "batch1-FC1-F1_X_batch1-FC2-F2"],
      ["batch2-FC1-F1_X_batch2-FC2-F1", "batch2-FC1-F1_X_batch2-FC2-F2",
       "batch2-FC1-F2_X_batch2-FC2-F1", "batch2-FC1-F2_X_batch2-FC2-F2"]]),
    ("test_integer_sparse_input", [[11], [333, 5555]],
     [["11_X_batch1-FC2-F1", "11_X_batch1-FC2-F2"],
      ["333_X_batch2-FC2-F1", "333_X_batch2-FC2-F2", "5555_X_batch2-FC2-F1", "5555_X_batch2-FC2-F2"]]),
]
TF_DENSE = np.array([["batch1-FC2-F1", "batch1-FC2-F2"], ["batch2-FC2-F1", "batch2-FC2-F2"]])


@pytest.mark.parametrize("name, sparse, expected", TF_ONE_SPARSE, ids=[c[0] for c in TF_ONE_SPARSE])
@pytest.mark.parametrize("as_files", [False, True], ids=["memory", "files"])
def test_tensorflows_one_sparse_input_crossed_with_a_dense_one(name, sparse, expected, as_files, tmp_path):
    inputs = [_tf_sparse(sparse), TF_DENSE]
    want = _tf_sparse(expected)
    if as_files:
        out = str(tmp_path / "x.parquet")
        sptool.cross(_inputs_to_paths(inputs, tmp_path), out)
        got = sptool.read(out)
    else:
        got = sptool.cross(inputs)
    assert got.shape == want.shape == (2, 4)
    np.testing.assert_array_equal(got.indices, want.indices)
    assert list(got.values) == list(want.values)
    hashed = sptool.cross_hashed(inputs, num_buckets=1000)
    assert hashed.shape == (2, 4)
    assert _as_entries(hashed) == oracle(inputs, 2, hashed=True, num_buckets=1000)


@pytest.mark.parametrize("op", [sptool.cross, sptool.cross_hashed], ids=["cross", "cross_hashed"])
def test_a_wide_declared_shape_does_not_widen_the_output(op, tmp_path):
    """TensorFlow: a [1, 4] sparse input holding 2 features, crossed with [['x']], gives
    dense_shape [1, 2]: the most crosses in a row, not the input's declared width."""
    wide = sptool.SparseTensor([[0, 0], [0, 1]], np.array(["a", "b"], dtype=object), (1, 4))
    dense = np.array([["x"]])
    assert op([wide, dense]).shape == (1, 2)
    assert op([wide]).shape == (1, 2)  # the sparse input alone
    out = str(tmp_path / "x.parquet")
    op(_inputs_to_paths([wide, dense], tmp_path), out)
    assert sptool.read(out).shape == (1, 2)


def test_cli_one_sparse_input_and_a_two_column_dense_one(tmp_path):
    words = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data",
                         "ids_words.parquet")
    ids = sptool.read(words)
    B = ids.shape[0]
    dense = np.array([[f"p{r}", "q"] for r in range(B)])
    paths = [words] + _inputs_to_paths([dense], tmp_path)
    out = str(tmp_path / "x.parquet")
    for command, kwargs in (("cross", {}), ("cross-hashed", {"hashed": True, "num_buckets": 77})):
        extra = ["--num-buckets", "77"] if kwargs else []
        r = CliRunner().invoke(cli, ["-q", command, *paths, *extra, "-o", out])
        assert r.exit_code == 0, r.output
        want = oracle([ids, dense], B, **kwargs)
        got = sptool.read(out)
        assert _as_entries(got) == want
        assert got.shape == (B, max(p + 1 for (_, p), _ in want))
