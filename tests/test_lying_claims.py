"""Every command that reads a sparse tensor, on a file whose metadata claims an order or
uniqueness that its rows break: the result is either a DataError naming the file and NumPy's
first row that breaks the claim (``indices[N]``), or the same logical tensor as on an honest
file holding the same rows in the same stored order but claiming nothing (sort_order [],
unique false).  Anything else (another result, an internal error, another exception) is a
claim trusted unchecked.

The lies: (swap) two adjacent rows exchanged in the middle, (repeat) a row repeating the one
before it, (far) a coordinate repeated far later, (low) a row of a low leading index late in the
file; claimed canonical, sorted but not unique, column-major and unique, or sorted by the
leading dimension only and unique.  Small row groups, small batches and small sorted runs make
every command cross batch, row-group and run boundaries."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import small_runs

import sptool
from sptool.cli import cli
from sptool.errors import DataError

MEM = "16MiB"
SHAPES = {2: (30, 20), 3: (12, 10, 8), 1: (300, 3)}  # 1: row-sparse, sparse_ndim 1, blocks of 3
NNZ = {2: 380, 3: 560, 1: 220}
EMPTY_ROWS = (3, 7)  # leading indices never stored (fill_empty_rows has work to do)

# claim -> (sort order as a function of K, unique)
CLAIMS = {
    "canonical": (lambda K: tuple(range(K)), True),
    "sorted": (lambda K: tuple(range(K)), False),
    "colmajor": (lambda K: tuple(reversed(range(K))), True),
    "lead": (lambda K: (0,), True),
}
LIES = ["canonical-swap", "canonical-repeat", "canonical-far", "canonical-low", "sorted-swap", "sorted-low",
        "colmajor-swap", "colmajor-repeat", "lead-far", "lead-low"]


# --- the files ------------------------------------------------------------------------------------


def _codes(idx, shape, order):
    """Row codes of ``idx`` in the lexicographic order ``order`` (a mixed-radix number)."""
    code = np.zeros(len(idx), dtype=np.int64)
    for d in order:
        code = code * shape[d] + idx[:, d]
    return code


def first_break(idx, shape, order, unique) -> int:
    """NumPy's first row that breaks the claim (order non-decreasing; no coordinate twice when
    unique), or -1."""
    code = _codes(idx, shape, order)
    bad = np.flatnonzero(np.diff(code) < 0) + 1
    first = int(bad[0]) if len(bad) else -1
    if unique:
        full = _codes(idx, shape, range(len(shape)))
        _, firsts = np.unique(full, return_index=True)
        seen = np.ones(len(full), dtype=bool)
        seen[firsts] = False
        rep = np.flatnonzero(seen)
        if len(rep) and (first < 0 or rep[0] < first):
            first = int(rep[0])
    return first


def lying_rows(K, lie, dtype, seed=7):
    """(indices, values, claimed order, claimed unique, first bad row) of ``lie``."""
    rng = np.random.default_rng(seed + K)
    claim, kind = lie.split("-")
    order_of, unique = CLAIMS[claim]
    order = order_of(K)
    sshape = SHAPES[K][:K]
    cells = np.stack(np.unravel_index(np.arange(int(np.prod(sshape))), sshape), axis=1)
    cells = cells[~np.isin(cells[:, 0], EMPTY_ROWS)]
    idx = cells[np.sort(rng.choice(len(cells), NNZ[K], replace=False))]
    if claim == "lead":  # sorted by the leading dimension only: shuffled within each leading index
        idx = idx[np.lexsort((rng.random(len(idx)), idx[:, 0]))]
    else:
        idx = idx[np.argsort(_codes(idx, sshape, order), kind="stable")]
    n = len(idx)
    m = n // 2
    dup = None
    if kind == "swap":
        idx[[m, m + 1]] = idx[[m + 1, m]]
    elif kind == "repeat":
        idx, dup = np.insert(idx, m + 1, idx[m], axis=0), m + 1
    elif kind == "far":
        if claim == "lead":  # the first coordinate of a leading index again at the end of its group
            lead = idx[m, 0]
            group = np.flatnonzero(idx[:, 0] == lead)
            dup = group[-1] + 1
            idx = np.insert(idx, dup, idx[group[0]], axis=0)
        else:
            idx, dup = np.insert(idx, n - 40, idx[5], axis=0), n - 40
    elif kind == "low":
        row = idx[1].copy()
        idx = np.insert(np.delete(idx, 1, axis=0), n - 30, row, axis=0)
    vals = rng.integers(1, 5, size=(len(idx),) + SHAPES[K][K:])
    if dup is not None:  # the repeat's value apart from the others: whether it is summed shows
        vals[dup] = 5
    vals = vals.astype(dtype)
    at = first_break(idx, sshape, order, unique)
    assert at > 0
    return idx, vals, order, unique, at


def write_pair(tmp_path, K, lie, dtype):
    """(honest path, lying path, first bad row): the same rows in the same stored order; the
    honest file claims nothing, the lying one ``lie``'s claim."""
    idx, vals, order, unique, at = lying_rows(K, lie, dtype)
    shape = SHAPES[K]
    good = np.unique(idx, axis=0)
    base = str(tmp_path / "base.parquet")
    sptool.write(sptool.SparseTensor(good, np.ones((len(good),) + shape[K:], dtype=dtype), shape), base)
    f = pq.ParquetFile(base)
    kept = {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"}
    meta = json.loads(kept[b"sptool"])
    assert meta["canonical"]
    flat = vals.reshape(len(vals), -1)
    cols = {f"indices_{k}": idx[:, k] for k in range(K)}
    if flat.shape[1] == 1 and not shape[K:]:
        cols["values"] = flat[:, 0]
    else:
        cols["values"] = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), flat.shape[1])
    table = pa.table(cols, schema=f.schema_arrow)
    paths = {}
    for name, claim in (("honest", ([], False)), ("lying", (list(order), unique))):
        m = dict(meta, nnz=len(idx), sort_order=claim[0], unique=claim[1],
                 canonical=claim[1] and claim[0] == list(range(K)))
        md = dict(kept)
        md[b"sptool"] = json.dumps(m).encode()
        path = str(tmp_path / f"{name}.parquet")
        pq.write_table(table.replace_schema_metadata(md), path, row_group_size=64, write_page_checksum=True)
        paths[name] = path
    os.remove(base)
    return paths["honest"], paths["lying"], at


# --- reading results as logical tensors ---------------------------------------------------------


def _raw_parquet(path):
    """(indices, values, meta) of an sptool Parquet file read with pyarrow alone (no claim trusted)."""
    f = pq.ParquetFile(path)
    meta = json.loads(f.metadata.metadata[b"sptool"])
    t = f.read()
    K = meta["sparse_ndim"]
    idx = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(K)], axis=1) if t.num_rows else \
        np.empty((0, K), np.int64)
    return idx, t.column("values").to_pylist(), meta


def parquet_logical(path):
    idx, vals, meta = _raw_parquet(path)
    shape = tuple(meta["shape"])
    K = meta["sparse_ndim"]
    if meta["value_type"] in ("string", "binary"):
        return shape, sorted(zip(map(tuple, idx.tolist()), vals))
    v = np.asarray(vals)
    dt = np.bool_ if meta["value_type"] == "bool" else np.result_type(v.dtype, np.float64)
    dense = np.zeros(shape, dtype=dt)
    if len(idx):
        if dt == np.bool_:
            np.logical_or.at(dense, tuple(idx.T), v.reshape((len(idx),) + shape[K:]))
        else:
            np.add.at(dense, tuple(idx.T), v.reshape((len(idx),) + shape[K:]))
    return shape, dense


def tensor_logical(t):
    shape = tuple(t.shape)
    if t.values.dtype.kind in "OUS":
        return shape, sorted(zip(map(tuple, np.asarray(t.indices).tolist()), list(t.values)))
    dt = np.bool_ if t.values.dtype == np.bool_ else np.result_type(t.values.dtype, np.float64)
    dense = np.zeros(shape, dtype=dt)
    idx = np.asarray(t.indices)
    if len(idx):
        op = np.logical_or if dt == np.bool_ else np.add
        op.at(dense, tuple(idx.T), np.asarray(t.values))
    return shape, dense


def same(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    return a == b


# --- the commands -------------------------------------------------------------------------------


def _other(tmp, K, dtype="int64", name="other", seed=99, shape=None):
    """An honest canonical operand of the same shape (written once per directory)."""
    path = os.path.join(tmp, f"{name}.parquet")
    if not os.path.exists(path):
        shape = shape or SHAPES[K]
        rng = np.random.default_rng(seed)
        cells = np.stack(np.unravel_index(np.arange(int(np.prod(shape[:K]))), shape[:K]), axis=1)
        idx = cells[np.sort(rng.choice(len(cells), min(len(cells) // 2, 300), replace=False))]
        vals = rng.integers(1, 5, size=(len(idx),) + tuple(shape[K:])).astype(dtype)
        sptool.write(sptool.SparseTensor(idx, vals, shape), path)
    return path


def _npy(tmp, name, shape, dtype="float64", seed=5, low=1):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        np.save(path, np.random.default_rng(seed).integers(low, 4, size=shape).astype(dtype))
    return path


def out(tmp, name="out.parquet"):
    return os.path.join(tmp, name)


def c_parquet(fn):
    """A command writing a sparse output: its logical tensor."""
    def run(p, tmp):
        o = out(tmp)
        fn(p, o, tmp)
        return parquet_logical(o)
    return run


def c_npy(fn):
    def run(p, tmp):
        o = out(tmp, "out.npy")
        fn(p, o, tmp)
        return np.load(o)
    return run


def _groups(p, dims, sort):
    res = []
    for key, idx, vals in sptool.group(p, dims, sort=sort, memory=MEM):
        res.append((tuple(key), tensor_logical(sptool.SparseTensor(np.asarray(idx), np.asarray(vals), SHAPES[2]))[1]))
    return res


def _converted(ext, back=None, **kw):
    """convert to ``ext`` and back to an sptool file (read with ``back`` options)."""
    def run(p, tmp):
        o = out(tmp, "out" + ext)
        sptool.convert(p, o, memory=MEM, **kw)
        b = out(tmp, "back.parquet")
        sptool.convert(o, b, memory=MEM, **(back or {}))
        return parquet_logical(b)
    return run


def _svmlight(p, tmp):
    o = out(tmp, "out.svm")
    sptool.convert(p, o, memory=MEM)
    from sklearn.datasets import load_svmlight_file

    x, _ = load_svmlight_file(o, n_features=SHAPES[2][1] + 1, zero_based=False)  # refuses a feature twice
    return np.asarray(x.todense())


def _jsonl(p, tmp):
    o = out(tmp, "out.jsonl")
    sptool.convert(p, o, memory=MEM)
    dense = np.zeros(SHAPES[2])
    with open(o) as f:
        for i, line in enumerate(f):
            rec = json.loads(line)
            np.add.at(dense[i], np.asarray(rec["ids"], dtype=np.int64), np.asarray(rec["values"]))
    return dense


def _tfrecord(p, tmp):
    o = out(tmp, "out.tfrecord")
    sptool.convert(p, o, ids="ids", values="values", memory=MEM)
    b = out(tmp, "back.parquet")
    sptool.convert(o, b, ids="ids", values="values", vocab_size=SHAPES[2][1], memory=MEM)
    return parquet_logical(b)


def _info(p, tmp):
    r = sptool.info(p, scan=True, histogram=0, memory=MEM)
    keep = ("shape", "nnz", "density", "min_index", "max_index", "histogram", "row_sparse")
    return json.dumps({k: r.get(k) for k in keep}, sort_keys=True, default=str)


def _apply(optimizer):
    def run(p, tmp):
        table = os.path.join(tmp, "table.npy")
        np.save(table, np.arange(SHAPES[1][0] * SHAPES[1][1], dtype=np.float64).reshape(SHAPES[1]) / 7)
        state = os.path.join(tmp, "state") if optimizer != "sgd" else None
        sptool.apply(table, [p], optimizer=optimizer, lr=0.5, state=state, fsync=False, memory=MEM)
        got = np.load(table)
        if state:
            shutil.rmtree(state, ignore_errors=True)
        return got
    return run


def _head(p, tmp):
    idx, vals, _ = sptool.head(p, 50, memory=MEM)
    return np.asarray(idx), np.asarray(vals)


def _spy(p, tmp):
    return "\n".join(sptool.spy(p, ascii_=True, image_size="20x10", memory=MEM)["ascii"][1:])


def _merge(p, tmp):
    # ids: the lying tensor's values as ids (sum of a repeat stays below the vocabulary)
    o = out(tmp)
    sptool.merge(p, p, o, vocab_size=16, memory=MEM)
    return parquet_logical(o)


def _cross(hashed):
    def run(p, tmp):
        other = _other(tmp, 2, name="cross_other", seed=3)
        o = out(tmp)
        if hashed:
            sptool.cross_hashed([p, other], o, num_buckets=1000, memory=MEM)
        else:
            sptool.cross([p, other], o, memory=MEM)
        return parquet_logical(o)
    return run


def _read(p, tmp):
    return tensor_logical(sptool.read(p, memory=MEM))


def _reduce(op, axis, keepdims=False):
    return c_parquet(lambda p, o, tmp: sptool.reduce(p, o, op=op, axis=axis, keepdims=keepdims, memory=MEM))


F = "float64"
I = "int64"  # noqa: E741

# (id, K, value dtype, run(path, tmp) -> comparable)
CASES = [
    ("read", 2, I, _read),
    ("read-3d", 3, I, _read),
    ("todense", 2, I, c_npy(lambda p, o, tmp: sptool.todense(p, o, memory=MEM))),
    ("todense-novalidate", 2, I, c_npy(lambda p, o, tmp: sptool.todense(p, o, validate=False, memory=MEM))),
    ("todense-3d", 3, I, c_npy(lambda p, o, tmp: sptool.todense(p, o, memory=MEM))),
    ("reorder", 2, I, c_parquet(lambda p, o, tmp: sptool.reorder(p, o, memory=MEM))),
    ("reorder-sum", 2, I, c_parquet(lambda p, o, tmp: sptool.reorder(p, o, duplicates="sum", memory=MEM))),
    ("reorder-max", 2, I, c_parquet(lambda p, o, tmp: sptool.reorder(p, o, duplicates="max", memory=MEM))),
    ("reorder-colmajor-sum", 2, I,
     c_parquet(lambda p, o, tmp: sptool.reorder(p, o, perm=(1, 0), duplicates="sum", memory=MEM))),
    ("reorder-3d-sum", 3, I,
     c_parquet(lambda p, o, tmp: sptool.reorder(p, o, perm=(2, 0, 1), duplicates="sum", memory=MEM))),
    ("reduce-sum-1", 2, I, _reduce("sum", 1)),
    ("reduce-sum-0", 2, I, _reduce("sum", 0)),
    ("reduce-max-1", 2, I, _reduce("max", 1)),
    ("reduce-max-0", 2, I, _reduce("max", 0)),
    ("reduce-min-all", 2, I, _reduce("min", None, keepdims=True)),
    ("reduce-prod-1", 2, I, _reduce("prod", 1)),
    ("reduce-mean-0", 2, F, _reduce("mean", 0)),
    ("reduce-count-1", 2, I, _reduce("count", 1)),
    ("reduce-3d-max-2", 3, I, _reduce("max", 2)),
    ("reduce-3d-sum-1-keep", 3, I, _reduce("sum", 1, keepdims=True)),
    ("reduce-3d-min-02", 3, I, _reduce("min", [0, 2])),
    ("reduce-3d-count-12", 3, I, _reduce("count", [1, 2])),
    ("add-a", 2, I, c_parquet(lambda p, o, tmp: sptool.add(p, _other(tmp, 2), o, memory=MEM))),
    ("add-b", 2, I, c_parquet(lambda p, o, tmp: sptool.add(_other(tmp, 2), p, o, memory=MEM))),
    ("add-thresh", 2, F, c_parquet(lambda p, o, tmp: sptool.add(p, _other(tmp, 2, F), o, thresh=5, memory=MEM))),
    ("add-scalar", 2, I, c_parquet(lambda p, o, tmp: sptool.add(p, None, o, scalar=2, memory=MEM))),
    ("add-dense", 2, F, c_npy(lambda p, o, tmp: sptool.add(p, _npy(tmp, "d.npy", SHAPES[2]), o, memory=MEM))),
    ("add-3d", 3, I, c_parquet(lambda p, o, tmp: sptool.add(p, _other(tmp, 3), o, memory=MEM))),
    ("maximum-a", 2, I, c_parquet(lambda p, o, tmp: sptool.maximum(p, _other(tmp, 2), o, memory=MEM))),
    ("maximum-b", 2, I, c_parquet(lambda p, o, tmp: sptool.maximum(_other(tmp, 2), p, o, memory=MEM))),
    ("minimum-b-3d", 3, I, c_parquet(lambda p, o, tmp: sptool.minimum(_other(tmp, 3), p, o, memory=MEM))),
    ("mul-dense", 2, I, c_parquet(lambda p, o, tmp: sptool.mul(p, _npy(tmp, "m.npy", (20,)), o, memory=MEM))),
    ("mul-scalar", 2, I, c_parquet(lambda p, o, tmp: sptool.mul(p, 3, o, memory=MEM))),
    ("div-dense", 2, F, c_parquet(lambda p, o, tmp: sptool.div(p, _npy(tmp, "v.npy", (30, 1), low=1), o,
                                                              memory=MEM))),
    ("matmul-sd", 2, F, c_npy(lambda p, o, tmp: sptool.matmul(p, _npy(tmp, "b.npy", (20, 5)), o, memory=MEM))),
    ("matmul-sd-adj", 2, F, c_npy(lambda p, o, tmp: sptool.matmul(p, _npy(tmp, "b2.npy", (30, 4)), o,
                                                                  adjoint_a=True, memory=MEM))),
    ("matmul-ds", 2, F, c_npy(lambda p, o, tmp: sptool.matmul(_npy(tmp, "a.npy", (6, 30)), p, o, memory=MEM))),
    ("matmul-ss-a", 2, F, c_parquet(lambda p, o, tmp: sptool.matmul(p, _other(tmp, 2, F, "o2015", shape=(20, 15)),
                                                                    o, memory=MEM))),
    ("matmul-ss-b", 2, F, c_parquet(lambda p, o, tmp: sptool.matmul(_other(tmp, 2, F, "o1030", shape=(10, 30)),
                                                                    p, o, memory=MEM))),
    ("sampled-matmul", 2, F, c_parquet(lambda p, o, tmp: sptool.sampled_matmul(
        p, _npy(tmp, "sa.npy", (30, 4)), _npy(tmp, "sb.npy", (4, 20)), o, memory=MEM))),
    ("transpose", 2, I, c_parquet(lambda p, o, tmp: sptool.transpose(p, o, memory=MEM))),
    ("transpose-id", 2, I, c_parquet(lambda p, o, tmp: sptool.transpose(p, o, perm=(0, 1), memory=MEM))),
    ("transpose-3d", 3, I, c_parquet(lambda p, o, tmp: sptool.transpose(p, o, perm=(2, 0, 1), memory=MEM))),
    ("reshape", 2, I, c_parquet(lambda p, o, tmp: sptool.reshape(p, o, shape=(20, 30), memory=MEM))),
    ("reshape-3d", 3, I, c_parquet(lambda p, o, tmp: sptool.reshape(p, o, shape=(120, -1), memory=MEM))),
    ("slice", 2, I, c_parquet(lambda p, o, tmp: sptool.slice_(p, o, start=(0, 2), size=(25, 15), memory=MEM))),
    ("slice-3d", 3, I, c_parquet(lambda p, o, tmp: sptool.slice_(p, o, start=(1, 0, 2), size=(-1, 8, 5),
                                                                memory=MEM))),
    ("concat-0", 2, I, c_parquet(lambda p, o, tmp: sptool.concat([p, _other(tmp, 2)], o, axis=0, memory=MEM))),
    ("concat-1-b", 2, I, c_parquet(lambda p, o, tmp: sptool.concat([_other(tmp, 2), p], o, axis=1, memory=MEM))),
    ("split", 2, I, None),  # in _outcome: several outputs, and more --memory for their writers
    ("retain-where", 2, I, c_parquet(lambda p, o, tmp: sptool.retain(p, o, where="values > 1", memory=MEM))),
    ("fill-empty-rows", 2, I, c_parquet(lambda p, o, tmp: sptool.fill_empty_rows(p, o, default_value=9, memory=MEM))),
    ("fill-empty-rows-3d", 3, I,
     c_parquet(lambda p, o, tmp: sptool.fill_empty_rows(p, o, default_value=9, memory=MEM))),
    ("expand-dims", 2, I, c_parquet(lambda p, o, tmp: sptool.expand_dims(p, o, axis=1, memory=MEM))),
    ("reset-shape", 2, I, c_parquet(lambda p, o, tmp: sptool.reset_shape(p, o, memory=MEM))),
    ("map-square", 2, I, c_parquet(lambda p, o, tmp: sptool.map_values(p, o, fn="square", memory=MEM))),
    ("map-neg", 2, I, c_parquet(lambda p, o, tmp: sptool.map_values(p, o, fn="neg", memory=MEM))),
    ("softmax", 2, F, c_parquet(lambda p, o, tmp: sptool.softmax(p, o, memory=MEM))),
    ("softmax-3d", 3, F, c_parquet(lambda p, o, tmp: sptool.softmax(p, o, memory=MEM))),
    ("to-indicator", 2, I, c_parquet(lambda p, o, tmp: sptool.to_indicator(p, o, vocab_size=16, memory=MEM))),
    ("to-indicator-npy", 2, I, c_npy(lambda p, o, tmp: sptool.to_indicator(p, o, vocab_size=16, memory=MEM))),
    ("bincount", 2, I, c_parquet(lambda p, o, tmp: sptool.bincount(p, o, memory=MEM))),
    ("bincount-rows", 2, I, c_parquet(lambda p, o, tmp: sptool.bincount(p, o, axis=-1, memory=MEM))),
    ("bincount-binary", 2, I, c_parquet(lambda p, o, tmp: sptool.bincount(p, o, axis=-1, binary_output=True,
                                                                        memory=MEM))),
    ("bincount-weights", 2, I, c_parquet(lambda p, o, tmp: sptool.bincount(p, o, weights=p, memory=MEM))),
    ("cross", 2, I, _cross(False)),
    ("cross-hashed", 2, I, _cross(True)),
    ("merge", 2, I, _merge),
    ("group", 2, I, None),  # in _outcome: sort=True on the honest file, the claimed leading dimension
    ("convert-svmlight", 2, F, _svmlight),
    ("convert-jsonl", 2, F, _jsonl),
    ("convert-tfrecord", 2, I, _tfrecord),
    ("convert-tns", 2, I, _converted(".tns", back={"shape": SHAPES[2]})),
    ("convert-mtx", 2, I, _converted(".mtx")),
    ("convert-npz", 2, I, _converted(".npz")),
    ("convert-npy", 2, I, c_npy(lambda p, o, tmp: sptool.convert(p, o, memory=MEM))),
    ("convert-csv", 2, I, _converted(".csv", back={"shape": SHAPES[2]})),
    ("convert-arrows", 2, I, _converted(".arrows")),
    ("convert-binsparse", 2, I, _converted(".bsp.h5")),
    ("info-scan", 2, I, _info),
    ("info-rowsparse", 1, F, _info),
    ("head", 2, I, _head),
    ("spy", 2, I, _spy),
    ("validate", 2, I, None),  # in the test: --deep must say invalid at indices[N]
    ("apply-sgd", 1, F, _apply("sgd")),
    ("apply-adam", 1, F, _apply("adam")),
    ("rowsparse-todense", 1, F, c_npy(lambda p, o, tmp: sptool.todense(p, o, memory=MEM))),
    ("rowsparse-reorder-sum", 1, F, c_parquet(lambda p, o, tmp: sptool.reorder(p, o, duplicates="sum",
                                                                             memory=MEM))),
]
CASE = {c[0]: c for c in CASES}

def _params():
    out_ = []
    for name, K, _, _ in CASES:
        for lie in LIES:
            if K == 1 and lie.startswith(("colmajor", "lead")):
                continue  # one sparse dimension: those are the canonical claims again
            out_.append(pytest.param(name, lie, id=f"{name}:{lie}"))
    return out_


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """write_pair, each (K, lie, dtype) written once for the module (the commands only read them)."""
    made = {}

    def get(K, lie, dtype):
        key = (K, lie, dtype)
        if key not in made:
            made[key] = write_pair(tmp_path_factory.mktemp(f"{K}d-{lie}-{dtype}"), K, lie, dtype)
        return made[key]

    return get


@pytest.fixture
def tuned(monkeypatch):
    """Batches of 50 rows, sorted runs of 100 merged in slices of 40: every boundary is crossed."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "50")
    small_runs(monkeypatch, 100, 40)


def _outcome(name, lie, path, tmp):
    """('ok', result) or ('data', message) or ('other', repr)."""
    os.makedirs(tmp, exist_ok=True)
    _, K, _, fn = CASE[name]
    try:
        if name == "split":
            pattern = os.path.join(tmp, "piece-{i}.parquet")
            sptool.split(path, pattern, axis=1, num_split=2, memory="64MiB")
            return "ok", tuple(parquet_logical(pattern.format(i=i)) for i in range(2))
        if name == "group":
            dims = [1] if lie.startswith("colmajor") else [0]
            return "ok", _groups(path, dims, sort="honest" in path)
        return "ok", fn(path, tmp)
    except DataError as e:
        return "data", str(e)
    except Exception as e:  # noqa: BLE001 - what the audit looks for
        return "other", f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("name,lie", _params())
def test_a_lying_claim_is_an_error_or_harmless(tmp_path, tuned, pairs, name, lie):
    _, K, dtype, _ = CASE[name]
    honest, lying, at = pairs(K, lie, dtype)
    if name == "validate":
        assert sptool.validate(honest, deep=True, memory=MEM).valid
        report = sptool.validate(lying, deep=True, memory=MEM)
        assert not report.valid
        assert f"indices[{at}]" in json.dumps(report.as_dict()), report.as_dict()
        return
    kind_h, want = _outcome(name, lie, honest, str(tmp_path / "h"))
    assert kind_h == "ok", want
    kind, got = _outcome(name, lie, lying, str(tmp_path / "l"))
    problem = verdict(kind, got, want, lying, at)
    if problem:
        # Without a traceback: one line per case says what went wrong.
        pytest.fail(f"{name} on the {lie} lie: {problem}", pytrace=False)


def verdict(kind, got, want, lying, at) -> str | None:
    """What is wrong with the outcome on the lying file, or None when it is one of the two allowed."""
    if kind == "data":
        if "\n" in got or lying not in got or f"indices[{at}] " not in got or "internal error" in got:
            return f"a DataError, but not one line naming {lying} and indices[{at}] as the input's fault: {got}"
        return None
    if kind != "ok":
        return f"not a DataError: {got}"
    return None if same(want, got) else "a different result"


@pytest.mark.parametrize("name,lie", [
    pytest.param(name, lie, id=f"{name}:{lie}")
    for name, K, _, fn in CASES if K > 1 and fn is not None for lie in ("colmajor-repeat", "lead-far")])
def test_an_output_does_not_inherit_an_unchecked_claim(tmp_path, tuned, pairs, name, lie):
    """Where a command succeeds on a file claiming unique rows that repeat, its Parquet output (if
    any) makes no claim its rows break."""
    _, K, dtype, _ = CASE[name]
    _, lying, _ = pairs(K, lie, dtype)
    kind, _ = _outcome(name, lie, lying, str(tmp_path))
    result = tmp_path / "out.parquet"
    if kind != "ok" or not result.exists():
        return  # an error: the other test judges it
    report = sptool.validate(str(result), deep=True, memory=MEM)
    if not report.valid:
        pytest.fail(f"{name} on the {lie} lie: the output is invalid: {report.codes}", pytrace=False)


@pytest.mark.parametrize("args,lie", [
    (["todense", "{p}", "-o", "{tmp}/o.npy"], "canonical-repeat"),
    (["reduce", "{p}", "--op", "max", "--axis", "0", "-o", "{tmp}/o.parquet"], "canonical-swap"),
    (["transpose", "{p}", "-o", "{tmp}/o.parquet"], "colmajor-swap"),
    (["slice", "{p}", "--start", "0,2", "--size", "25,15", "-o", "{tmp}/o.parquet"], "canonical-swap"),
    (["bincount", "{p}", "-o", "{tmp}/o.parquet"], "canonical-repeat"),
])
def test_the_command_line_exits_1_with_one_line(tmp_path, tuned, pairs, args, lie):
    _, lying, at = pairs(2, lie, "int64")
    argv = ["--memory", MEM, "--quiet"] + [a.format(p=lying, tmp=tmp_path) for a in args]
    r = CliRunner().invoke(cli, argv)
    assert r.exit_code == 1, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lying in lines[0] and f"indices[{at}] " in lines[0], r.output
