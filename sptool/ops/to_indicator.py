"""to_indicator: ids in the values become True at [D0..Dn-2, id] (TensorFlow's sparse to_indicator)."""

from __future__ import annotations

import numpy as np

from .._args import whole_number
from .._memory import Budget, budget_of
from .._messages import row_text, tuple_text
from ..errors import DataError, UsageError
from ..io import DenseSink, batch_values, is_npy, known_shape, make_batch, open_input
from ..stream.duplicates import deduplicated, sum_duplicates
from ..stream.engine import Plan, StreamOp, run
from ..stream.order import checked_batches, claim_check, ordered_batches
from ..stream.sort import sorted_stream
from ..stream.values import as_kernel, kernel_dtype
from ..tensor import SparseTensor


def to_indicator(path: str, output: str | None = None, *, vocab_size: int, memory=None,
                 tmp_dir: str | None = None, progress=None) -> dict:
    """TensorFlow's to_indicator: the last sparse dimension is replaced by the integer ids
    held in the values, giving a bool tensor of shape [D0, ..., Dn-2, vocab_size] that is True
    at [d0, ..., dn-2, id] for every stored entry.  An id may repeat within a row.

    The values must be integers in [0, vocab_size) (an error names the first entry outside);
    rows sharing a coordinate are summed first, as the format defines, and the sum is the id.
    ``output`` ending in .npy gets a dense bool array (written through a memory map); any
    other output a sparse bool tensor, canonical (sorted and unique).

    Memory: the sparse output goes through the external sort (spilling to ``tmp_dir``); the
    dense one streams into the memory map.

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> out = os.path.join(tempfile.mkdtemp(), "ind.npy")
    >>> _ = to_indicator("sample_data/digits.parquet", out, vocab_size=17)
    >>> np.load(out).shape
    (1797, 17)
    """
    budget = budget_of(memory)
    V = whole_number(vocab_size, "--vocab-size")
    if V < 0:
        raise UsageError(f"--vocab-size must be >= 0, not {V}")
    dense_out = is_npy(output)
    with open_input(path) as opened, known_shape(opened, tmp_dir) as src:
        op = ToIndicator(V, dense_out)
        sink = run(op, src, output, budget=budget, tmp_dir=tmp_dir, progress=progress)
        if output is None:
            return SparseTensor.from_sink(sink)
        rows_out = None if dense_out else sink.final_meta.nnz
        meta = src.meta
    return {"rows_in": meta.nnz, "rows_out": rows_out, "shape": list(op.shape), "output": output}


class ToIndicator(StreamOp):
    """Each entry's id moved into the last index, the value True: into a DenseSink as the
    entries come, or sorted (external sort, repeats once) for a sparse output."""

    def __init__(self, vocab_size: int, dense_out: bool):
        self.V, self.dense_out = vocab_size, dense_out

    def plan(self, meta) -> Plan:
        K = meta.sparse_ndim
        if meta.hybrid:
            raise UsageError(f"to-indicator needs one id per entry; the tensor has dense dimensions "
                             f"{list(meta.dense_shape)}")
        if meta.dtype.kind not in "iu" or meta.value_type == "bool":
            raise UsageError(f"to-indicator needs integer ids, but the values are {meta.value_type}")
        self.shape = tuple(meta.shape[: K - 1]) + (self.V,)
        out_meta = meta.with_(shape=self.shape, value_type="bool", fill_value=False, nnz=None,
                              sort_order=tuple(range(K)), unique=True, iso=False, created_by=None,
                              dimension_names=None if meta.dimension_names is None
                              else tuple(meta.dimension_names[: K - 1]) + (None,))
        return Plan(out_meta, unique_claim=True, pieces=self.dense_out)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        if self.dense_out:
            return DenseSink(output, plan.meta.with_(dimension_names=None), fill=False, budget=budget)
        return super().open_output(output, plan, budget=budget)

    def read(self, src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        entries = _entries(src, src.meta, self.V, budget, tmp_dir, progress, src.path)
        if self.dense_out:
            for keys, ids in entries:
                yield (_new_keys(keys, ids), np.ones(len(ids), dtype=bool)), None
            return
        for batch in _sorted_once(entries, plan.meta, budget, tmp_dir):
            yield batch, None

    def map(self, out, keys):
        yield out  # a batch, or a (keys, values) piece for the dense output


def _entries(src, meta, V, budget, tmp_dir, progress, path):
    """(keys (K, n), ids (n,)) with checked ids; duplicates summed first."""
    K = meta.sparse_ndim
    dtype = kernel_dtype(meta.dtype)
    if meta.unique:
        rows = 0
        for keys, batch in checked_batches(src, budget=budget, progress=progress, path=path, claim=claim_check(src)):
            ids = batch_values(batch, meta)
            _check_ids(keys, ids, V, rows, path)
            rows += len(ids)
            yield keys, ids
        return
    order = meta.sort_order if len(meta.sort_order) == K else tuple(range(K))
    batches = ordered_batches(src, order, budget=budget, tmp_dir=tmp_dir, progress=progress, path=path)
    pairs = ((keys, as_kernel(batch_values(batch, meta), keys.shape[1], dtype)) for keys, batch in batches)
    for keys, ids in sum_duplicates(pairs):
        ids = ids.reshape(-1)
        _check_ids(keys, ids, V, None, path)
        yield keys, ids


def _check_ids(keys, ids, V, offset, path):
    bad = np.flatnonzero((ids < 0) | (ids >= V)) if len(ids) else ()
    if not len(bad):
        return
    i = int(bad[0])
    v = int(ids[i])
    where = f"indices[{offset + i}] = {row_text(keys, i)}" if offset is not None else \
        f"the entry at {tuple_text(keys[:, i])} (duplicates summed)"
    why = f"vocab size {V} is smaller than a value" if v >= V else "ids must be non-negative"
    raise DataError(f"{where} has id {v}, outside [0, {V}): {why}", path=path)


def _new_keys(keys, ids):
    return np.concatenate([keys[:-1], ids.astype(np.int64).reshape(1, -1)])


def _sorted_once(entries, out_meta, budget, tmp_dir):
    schema = out_meta.arrow_schema()
    K = out_meta.sparse_ndim

    def batches():
        for keys, ids in entries:
            n = len(ids)
            if n:
                yield make_batch(_new_keys(keys, ids), np.ones(n, dtype=bool), out_meta, schema)

    stream = sorted_stream(batches(), out_meta, tuple(range(K)), budget=budget, tmp_dir=tmp_dir)
    return deduplicated(stream, "first", out_meta, schema)
