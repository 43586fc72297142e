"""The driver every streaming op runs under: plan, per-batch map, finish.

An op is a ``StreamOp``: ``plan(meta)`` decides from the input's metadata alone what the output
will be (its metadata, the input order the per-batch work needs, the uniqueness the sink must
verify); ``map(batch, keys)`` turns one input batch, delivered in that order, into output
batches; ``finish()`` flushes what was carried across batches.  ``run`` does the rest, once for
every op: ordering the input (streamed when the metadata already promises the order, else the
external sort), progress, the sink with its on-the-fly checks and atomic commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .._memory import Budget
from ..format import TensorMeta
from ..io import Background, local_only, open_sink
from .bounds import checked
from .order import claim_check, sorted_batches


@dataclass(frozen=True)
class Plan:
    """What an op will do, decided from its input's metadata alone."""

    meta: TensorMeta  # the output's metadata (nnz is counted by the sink)
    order: tuple[int, ...] | None = None  # the input order map() needs; None: as stored
    duplicates: str = "keep"  # with an order: the policy for rows sharing a coordinate (sum: canonical)
    unique_claim: bool | None = None  # True: the sink verifies the output has no repeated coordinate
    bounds_checked: bool = False  # stored order: check every index against the shape, keys as (K, n)
    background: bool = False  # encode and write the output on a second thread (map is heavy enough to pay)
    pieces: bool = False  # map yields (keys (K, n), values) pairs for the sink's write(), not record batches
    row_for_row: bool = False  # output row i is input row i: the sink's errors name the source and its rows
    check_claims: bool = True  # the input's claimed order checked as it is read (False: the op checks, or may not)
    keyed_rows: bool = False  # map's batches are the sorted rows of its keys: the sink checks their order on the keys


class StreamOp:
    """One op's per-batch work; ``run`` drives it.  An op of several operands takes their
    metadata in order (``plan(*metas)``) and reads them in its own ``read`` (given the list)."""

    def plan(self, meta: TensorMeta) -> Plan:
        raise NotImplementedError

    def map(self, batch: pa.RecordBatch, keys) -> Iterable[pa.RecordBatch]:
        """Output batches for one input batch (with its sort keys when the plan asked for an order)."""
        raise NotImplementedError

    def read(self, src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
        """The (batch, keys) pairs map() gets: by default all of ``src`` as the plan orders it; an
        op that can skip rows without reading them (slice: row groups outside the box) overrides
        this."""
        return input_batches(src, plan, budget=budget, tmp_dir=tmp_dir, progress=progress)

    def open_output(self, output, plan: Plan, *, budget: Budget):
        """The sink the output batches go to: a tensor (file, directory, stream or memory) by
        default; an op with a dense .npy output returns io's DenseSink."""
        return open_sink(output, plan.meta, unique_claim=plan.unique_claim, budget=budget)

    def finish(self) -> Iterable[pa.RecordBatch]:
        """Output held back across batches (a run of equal keys that the next batch could continue)."""
        return ()

    def progress_total(self, metas: list, plan: Plan) -> int | None:
        """The rows the progress bar counts to: the inputs' (None when one is unknown); for an op
        that reads nothing (eye), the rows its plan makes."""
        counts = [m.nnz for m in metas] if metas else [plan.meta.nnz]
        return None if None in counts else sum(counts)

    def output_shape(self, *input_shapes: tuple) -> tuple | None:
        """The output's shape from the input's (one shape an operand), once a stream's trailer
        has told the extents its header left open (the plan's shape has None there); None lets
        the sink take each open extent from the largest index written, as it does by default for
        an op of several operands."""
        return input_shapes[0] if len(input_shapes) == 1 else None


def input_batches(src, plan: Plan, *, budget: Budget, tmp_dir=None, progress=None):
    """(batch, keys) pairs of ``src`` as ``plan`` needs them: sort keys in a requested order, the
    (K, n) indices when bounds-checked in stored order, else None."""
    if plan.order is not None:
        yield from sorted_batches(src, plan.order, budget=budget, tmp_dir=tmp_dir, progress=progress,
                                  duplicates=plan.duplicates, claims=plan.check_claims)
        return
    # Rows read in stored order carry the order the source claims into the op's output (row for
    # row, or filtered, or cut): the claim is checked as they pass, naming the input's row.
    claim = claim_check(src) if plan.check_claims else None
    if plan.bounds_checked:
        for batch, cols in checked(src.iter_batches(budget=budget), src.meta, path=src.path, progress=progress,
                                   start=src.start, claim=claim):
            yield batch, np.stack(cols)
        return
    for batch in src.iter_batches(budget=budget):
        if claim is not None and batch.num_rows:
            claim.check_batch(batch)
        if progress:
            progress.advance(batch.num_rows)
        yield batch, None


def run(op: StreamOp, src, output, *, budget: Budget, tmp_dir=None, progress=None):
    """Drive ``op`` over an opened source (or a list of them, for an op of several operands, or of
    none, for one that makes its rows) into
    ``output`` (a path, a directory, '-' for stdout, or None to keep the result in memory:
    ``sink.result()``); the closed sink, whose ``final_meta`` describes what was written."""
    if tmp_dir is not None:  # refused now, not once the data grows large enough to spill
        local_only(tmp_dir, "--tmp-dir", directory=True)
    srcs = list(src) if isinstance(src, (list, tuple)) else [src]
    plan = op.plan(*(s.meta for s in srcs))
    if progress:
        progress.set_total(op.progress_total([s.meta for s in srcs], plan))
    sink = op.open_output(output, plan, budget=budget)
    if plan.row_for_row:
        sink.count_from(srcs[0].start, srcs[0].path)
    method = "write" if plan.pieces else "write_batch"
    writer = Background(sink, method) if plan.background else sink
    put = writer.write if plan.background else getattr(sink, method)

    def emit(outs):
        for out in outs:
            if plan.pieces:
                put(*out)
            else:
                put(out)

    with writer:
        for batch, keys in op.read(src, plan, budget=budget, tmp_dir=tmp_dir, progress=progress):
            if plan.keyed_rows:
                for out in op.map(batch, keys):
                    put(out, keys)
            else:
                emit(op.map(batch, keys))
        emit(op.finish())
        if any(s is None for s in plan.meta.shape):
            shape = op.output_shape(*(s.meta.shape for s in srcs))
            if shape is not None:
                sink.resolve_shape(shape)
    return sink

