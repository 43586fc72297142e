"""Build the sample tensors in sample_data/ (deterministic: fixed seeds, no downloads).

    python sample_data/make_samples.py [OUTPUT_DIR]      # default: the directory of this script

Every valid sample is written with sptool's own writer (sptool.write); invalid.parquet is
built with pyarrow directly, the way sptool's writer lays out a file, but with false claims.
digits.parquet and digits.svm need scikit-learn (its bundled copy of the UCI optdigits test set).
See sample_data/README.md for what each file is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import sptool
from sptool import SparseTensor
from sptool.format import version_for

HERE = os.path.dirname(os.path.abspath(__file__))

# One seed per sample, so that changing one sample never changes another.
SEED_TENSOR3D = 20240301
SEED_UNSORTED = 20240302
SEED_ROWSPARSE = 20240303
SEED_MATRIX_A = 20240304
SEED_MATRIX_B = 20240305
SEED_DENSE_B = 20240306
SEED_IDS = 20240314
SEED_SEGMENTS = 20240316
SEED_EMBEDDINGS = 20240317
EMBEDDINGS_SHAPE = (1000, 16)
GRAD_ROWS = 200

TENSOR3D_SHAPE = (40, 30, 20)
TENSOR3D_NNZ = 1000
MATRIX_SHAPE = (200, 150)
MATRIX_DENSITY = 0.02
DENSE_B_SHAPE = (150, 16)
IDS_SHAPE = (100, 4)  # [batch, position]: up to 4 ids per row
WORDS = ("red", "green", "blue", "cyan", "magenta", "yellow", "black", "white", "orange", "purple",
         "brown", "pink", "gray", "olive", "navy", "teal")


def random_canonical(rng: np.random.Generator, shape, nnz: int) -> tuple[np.ndarray, np.ndarray]:
    """nnz distinct coordinates in row-major order, with uniform values in [-10, 10)."""
    flat = np.sort(rng.choice(int(np.prod(shape)), size=nnz, replace=False))
    indices = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    values = rng.uniform(-10.0, 10.0, size=nnz)
    return indices, values


def digits() -> SparseTensor:
    """scikit-learn's load_digits(): 1797 8x8 images as an (image, pixel) matrix of non-zero pixels."""
    import sklearn
    from sklearn.datasets import load_digits

    data = load_digits().data  # float64 holding the integers 0..16
    dense = data.astype(np.int64)
    assert np.array_equal(dense, data), "load_digits() is expected to hold whole numbers"
    t = SparseTensor.from_dense(dense)
    attributes = {
        "source": "scikit-learn sklearn.datasets.load_digits().data",
        "package": f"scikit-learn {sklearn.__version__}",
        "origin": "UCI ML Repository, Optical Recognition of Handwritten Digits (optdigits), test set; "
                  "E. Alpaydin and C. Kaynak, 1998; https://doi.org/10.24432/C50P49",
        "license": "optdigits: CC BY 4.0 (UCI ML Repository); scikit-learn: BSD-3-Clause",
        "description": "8x8 images, pixel = 8*row + column, intensity 0..16; zero pixels are not stored",
    }
    return SparseTensor(t.indices, t.values, t.shape, sort_order=(0, 1), unique=True,
                        dimension_names=("image", "pixel"), attributes=attributes)


def tensor3d() -> SparseTensor:
    rng = np.random.default_rng(SEED_TENSOR3D)
    indices, values = random_canonical(rng, TENSOR3D_SHAPE, TENSOR3D_NNZ)
    # The FROSTT copy infers the shape from the largest index, so every extent must be reached.
    assert (indices.max(axis=0) + 1).tolist() == list(TENSOR3D_SHAPE)
    return SparseTensor(indices, values, TENSOR3D_SHAPE, sort_order=(0, 1, 2), unique=True,
                        dimension_names=("i", "j", "k"))


def write_tns(t: SparseTensor, path: str) -> None:
    """FROSTT text: 1-based indices, then the value as Python's shortest round-trip repr."""
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for idx, v in zip((t.indices + 1).tolist(), t.values.tolist()):
            f.write(" ".join(map(str, idx)) + " " + repr(float(v)) + "\n")


def unsorted() -> SparseTensor:
    """Rows in random order, 20 of them repeating an earlier coordinate (summed when read)."""
    rng = np.random.default_rng(SEED_UNSORTED)
    shape = (10, 8, 6)
    base = rng.choice(int(np.prod(shape)), size=100, replace=False)
    flat = np.concatenate([base, rng.choice(base, size=20, replace=False)])
    flat = flat[rng.permutation(len(flat))]
    indices = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    values = rng.integers(1, 10, size=len(flat)).astype(np.float64)  # small whole numbers: exact sums
    return SparseTensor(indices, values, shape, sort_order=(), unique=False,
                        dimension_names=("x", "y", "z"))


def rowsparse() -> SparseTensor:
    """A SelectedRows gradient of a 100 x 8 embedding table: 40 rows, some row ids repeated."""
    rng = np.random.default_rng(SEED_ROWSPARSE)
    rows = np.sort(rng.integers(0, 100, size=40)).astype(np.int64)
    assert len(np.unique(rows)) < len(rows), "the sample should repeat some row ids"
    values = rng.standard_normal((40, 8)).astype(np.float32)
    return SparseTensor(rows.reshape(-1, 1), values, (100, 8), sort_order=(0,), unique=False,
                        dimension_names=("row", "embedding"))


def embeddings() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 1000 x 16 float32 embedding table and a row-sparse gradient of it for `sptool apply`:
    200 row ids in random order (some repeated, as a batch's lookups repeat) and their rows."""
    rng = np.random.default_rng(SEED_EMBEDDINGS)
    table = (rng.standard_normal(EMBEDDINGS_SHAPE) * 0.1).astype(np.float32)
    rows = rng.integers(0, EMBEDDINGS_SHAPE[0], size=GRAD_ROWS).astype(np.int64)
    assert len(np.unique(rows)) < len(rows), "the sample should repeat some row ids"
    values = rng.standard_normal((GRAD_ROWS, EMBEDDINGS_SHAPE[1])).astype(np.float32)
    return table, rows, values


def matrix(seed: int) -> SparseTensor:
    rng = np.random.default_rng(seed)
    nnz = int(round(MATRIX_SHAPE[0] * MATRIX_SHAPE[1] * MATRIX_DENSITY))
    indices, values = random_canonical(rng, MATRIX_SHAPE, nnz)
    return SparseTensor(indices, values, MATRIX_SHAPE, sort_order=(0, 1), unique=True,
                        dimension_names=("row", "col"))


def dense_b() -> np.ndarray:
    return np.random.default_rng(SEED_DENSE_B).standard_normal(DENSE_B_SHAPE)


def ids(seed_offset: int, words: bool) -> SparseTensor:
    """A [batch, position] id tensor as tf.sparse.cross takes: rows of 0 to 4 ids, canonical;
    string ids drawn from WORDS, or int64 ids in [0, 50)."""
    rng = np.random.default_rng(SEED_IDS + seed_offset)
    lengths = rng.integers(0, IDS_SHAPE[1] + 1, size=IDS_SHAPE[0])
    rows = np.repeat(np.arange(IDS_SHAPE[0]), lengths)
    cols = np.concatenate([np.arange(n) for n in lengths])
    n = len(rows)
    values = np.array([WORDS[i] for i in rng.integers(0, len(WORDS), size=n)], dtype=object) if words \
        else rng.integers(0, 50, size=n).astype(np.int64)
    return SparseTensor(np.stack([rows, cols], axis=1).astype(np.int64), values, IDS_SHAPE, sort_order=(0, 1),
                        unique=True, dimension_names=("batch", "position"))


def segments() -> tuple[np.ndarray, np.ndarray]:
    """(indices, segment ids) for segment-sum on dense_b.npy: 40 rows of its 150, in 10 sorted segments."""
    rng = np.random.default_rng(SEED_SEGMENTS)
    indices = rng.integers(0, DENSE_B_SHAPE[0], size=40).astype(np.int64)
    ids = np.sort(rng.integers(0, 10, size=40)).astype(np.int64)
    ids[-1] = 9  # the last segment is reached, so the output has 10 rows
    return indices, ids


def write_invalid(path: str) -> None:
    """A 4 x 4 matrix that claims to be canonical, but row 3 is out of order and row 7 is out of
    bounds.  Laid out like sptool's writer (zstd, statistics, sorting_columns, the 'sptool' JSON in
    the footer key-value metadata), so that only the data is wrong."""
    indices = np.array([[0, 0], [0, 2], [1, 1], [1, 0], [2, 1], [2, 3], [3, 0], [5, 2]], dtype=np.int64)
    values = np.arange(1.0, len(indices) + 1.0)
    meta = {
        "format": "sptool.coo", "version": version_for([4, 4]), "shape": [4, 4], "sparse_ndim": 2,
        "value_type": "float64", "fill_value": 0.0, "nnz": len(indices), "sort_order": [0, 1],
        "unique": True, "canonical": True, "dimension_names": ["row", "col"],
        "created_by": "sample_data/make_samples.py (deliberately invalid)",
    }
    schema = pa.schema([pa.field("indices_0", pa.int64(), nullable=False),
                        pa.field("indices_1", pa.int64(), nullable=False),
                        pa.field("values", pa.float64(), nullable=False)])
    table = pa.table([indices[:, 0], indices[:, 1], values], schema=schema)
    tmp = path + ".tmp"
    with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True, write_page_index=True,
                          sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)]) as w:
        w.write_table(table)
        w.add_key_value_metadata({"sptool": json.dumps(meta, separators=(",", ":"))})
    os.replace(tmp, path)


DIGITS_SVM_ROWS = 200


def write_digits_svm(path: str) -> None:
    """The first images of load_digits() with their digit labels, as scikit-learn writes svmlight
    (dump_svmlight_file, one-based ids as libsvm tools expect)."""
    from sklearn.datasets import dump_svmlight_file, load_digits

    d = load_digits()
    X = d.data[:DIGITS_SVM_ROWS].astype(np.int64)
    dump_svmlight_file(X, d.target[:DIGITS_SVM_ROWS], path, zero_based=False,
                       comment="the first 200 images of sklearn.datasets.load_digits(): label = digit, "
                               "id = 8*row + column + 1, value = intensity 0..16")


def make_all(out: str) -> list[tuple[str, str]]:
    """Write every sample into ``out``; returns (file name, one-line summary) pairs."""
    os.makedirs(out, exist_ok=True)
    done = []

    def put(name: str, t: SparseTensor):
        sptool.write(t, os.path.join(out, name))
        done.append((name, f"shape {list(t.shape)}, nnz {t.nnz}, {t.meta.value_type}"))

    put("digits.parquet", digits())
    t3 = tensor3d()
    put("tensor3d.parquet", t3)
    write_tns(t3, os.path.join(out, "tensor3d.tns"))
    done.append(("tensor3d.tns", f"FROSTT text of tensor3d.parquet, {t3.nnz} lines"))
    write_digits_svm(os.path.join(out, "digits.svm"))
    done.append(("digits.svm", f"svmlight text of the first {DIGITS_SVM_ROWS} digits images, with labels"))
    put("unsorted.parquet", unsorted())
    put("rowsparse.parquet", rowsparse())
    put("matrix_a.parquet", matrix(SEED_MATRIX_A))
    put("matrix_b.parquet", matrix(SEED_MATRIX_B))
    put("ids_words.parquet", ids(0, words=True))
    put("ids_numbers.parquet", ids(1, words=False))
    np.save(os.path.join(out, "dense_b.npy"), dense_b())
    seg_indices, seg_ids = segments()
    np.save(os.path.join(out, "segment_indices.npy"), seg_indices)
    np.save(os.path.join(out, "segment_ids.npy"), seg_ids)
    done.append(("segment_indices.npy", "40 row indices into dense_b.npy, for segment-sum"))
    done.append(("segment_ids.npy", "their 40 sorted segment ids in [0, 10)"))
    done.append(("dense_b.npy", f"dense {list(DENSE_B_SHAPE)} float64"))
    table, rows, values = embeddings()
    np.save(os.path.join(out, "embeddings.npy"), table)
    np.save(os.path.join(out, "grad_rows.npy"), rows)
    np.save(os.path.join(out, "grad_values.npy"), values)
    done.append(("embeddings.npy", f"dense {list(EMBEDDINGS_SHAPE)} float32 embedding table, for apply"))
    done.append(("grad_rows.npy", f"{GRAD_ROWS} row ids of a gradient of embeddings.npy, unsorted, some repeated"))
    done.append(("grad_values.npy", f"their rows, [{GRAD_ROWS}, {EMBEDDINGS_SHAPE[1]}] float32"))
    put("grad.parquet", SparseTensor(rows.reshape(-1, 1), values, EMBEDDINGS_SHAPE, sort_order=(), unique=False))
    write_invalid(os.path.join(out, "invalid.parquet"))
    done.append(("invalid.parquet", "4 x 4, claims canonical; row 3 out of order, row 7 out of bounds"))
    return done


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("output", nargs="?", default=HERE, help="directory to write into [default: %(default)s]")
    args = p.parse_args(argv)
    for name, summary in make_all(args.output):
        print(f"{os.path.join(args.output, name)}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
