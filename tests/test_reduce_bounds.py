"""An entry outside the shape is an error naming the file and NumPy's first bad row, on every
path of reduce (all axes to a scalar or a .npy, some axes to a sparse or dense result, with and
without --keepdims, from the API too) and of the other commands whose answer depends on every
entry (todense, bincount), even where the footer's statistics say every index is in bounds.

The files are valid but for one index of indices_1 changed in its data page after writing
(uncompressed PLAIN pages): the footer's statistics still describe the values written, as in a
file damaged on disk or written by a faulty writer.  validate --deep refuses them
(E_INDEX_OUT_OF_BOUNDS)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_distributed import client, tiny  # noqa: F401 - fixtures: the session's cluster, tiny batches

import sptool
import sptool.distributed
from sptool.cli import cli
from sptool.errors import DataError

SHAPE = (40, 10)
GROUP_ROWS = 64


def _coordinates(seed=4):
    rng = np.random.default_rng(seed)
    cells = np.sort(rng.choice(SHAPE[0] * SHAPE[1], size=250, replace=False))
    return np.stack(np.unravel_index(cells, SHAPE), axis=1).astype(np.int64)


def _bad_row(idx, where: str) -> int:
    """A row in the third row group whose changed index keeps the claimed row-major order (so
    the only thing wrong is the bound): the first row of a leading index for a negative one,
    the last row of one for a too-large one."""
    first = 2 * GROUP_ROWS
    starts = np.flatnonzero(np.diff(idx[:, 0]) != 0) + 1
    rows = starts if where == "below" else starts - 1
    return int(rows[rows > first][0])


def _write_damaged(path, claim: str, where: str):
    """A file whose indices_1 at one row is changed in the data page to -211 (below) or 1000
    (above) for a dimension of 10; the footer's statistics still say [0, 9]."""
    idx = _coordinates()
    vals = np.arange(1, len(idx) + 1, dtype=np.int64) % 7 + 1
    canonical = claim == "canonical"
    meta = {"format": "sptool.coo", "version": "1.0.0", "shape": list(SHAPE), "sparse_ndim": 2,
            "value_type": "int64", "fill_value": 0, "nnz": len(idx), "sort_order": [0, 1] if canonical else [],
            "unique": canonical, "canonical": canonical}
    fields = [pa.field(f"indices_{k}", pa.int64(), nullable=False) for k in range(2)]
    schema = pa.schema(fields + [pa.field("values", pa.int64(), nullable=False)])
    table = pa.table([idx[:, 0], idx[:, 1], vals], schema=schema).replace_schema_metadata(
        {b"sptool": json.dumps(meta).encode()})
    pq.write_table(table, path, row_group_size=GROUP_ROWS, compression="none", use_dictionary=False,
                   column_encoding={name: "PLAIN" for name in schema.names}, data_page_version="1.0")
    row = _bad_row(idx, where)
    value = -211 if where == "below" else 1000
    md = pq.read_metadata(path)
    group, local = divmod(row, GROUP_ROWS)
    chunk = md.row_group(group).column(1)
    # One page a chunk of required int64s in PLAIN: the values are the chunk's last bytes.
    end = chunk.data_page_offset + chunk.total_compressed_size
    at = end - 8 * (md.row_group(group).num_rows - local)
    with open(path, "r+b") as f:
        f.seek(at)
        assert int.from_bytes(f.read(8), "little", signed=True) == idx[row, 1]
        f.seek(at)
        f.write(value.to_bytes(8, "little", signed=True))
    stats = pq.read_metadata(path).row_group(group).column(1).statistics
    assert 0 <= stats.min and stats.max < SHAPE[1]  # the footer still vouches for the bounds
    return _numpys_first_bad_row(path)


def _numpys_first_bad_row(path) -> int:
    t = pq.read_table(path)
    idx = np.stack([t.column(f"indices_{k}").to_numpy() for k in range(2)], axis=1)
    bad = np.flatnonzero(((idx < 0) | (idx >= np.array(SHAPE))).any(axis=1))
    assert len(bad) == 1
    return int(bad[0])


@pytest.fixture(params=["canonical-below", "canonical-above", "none-below", "none-above", "dir-below"])
def damaged(request, tmp_path):
    claim, where = request.param.split("-")
    path = str(tmp_path / "damaged.parquet")
    row = _write_damaged(path, "canonical" if claim == "dir" else claim, where)
    if claim == "dir":  # a directory of parts: the same reading path, part by part
        os.mkdir(tmp_path / "parts")
        shutil.move(path, tmp_path / "parts" / "part-000000.parquet")
        path = str(tmp_path / "parts")
    return path, row


def test_validate_refuses_the_damaged_file(damaged):
    path, row = damaged
    r = CliRunner().invoke(cli, ["validate", path])
    assert r.exit_code == 1 and "E_INDEX_OUT_OF_BOUNDS" in r.output


REDUCTIONS = [(op, axis, out) for op in ("sum", "count", "mean", "max", "min", "prod")
              for axis, out in ((None, None), (None, "r.npy"), ("1", "r.parquet"), ("0", "r.parquet"))]
REDUCTIONS += [("sum", "1", "r.npy"), ("sum", None, "keep.parquet"), ("count", None, "keep.parquet"),
               ("sum", "0,1", "r.npy")]


@pytest.mark.parametrize("op, axis, out", REDUCTIONS,
                         ids=[f"{op}-{axis or 'all'}-{out or 'scalar'}" for op, axis, out in REDUCTIONS])
def test_reduce_refuses_an_entry_outside_the_shape(damaged, tmp_path, op, axis, out):
    path, row = damaged
    args = ["reduce", path, "--op", op]
    if axis is not None:
        args += ["--axis", axis]
    if out is not None:
        args += ["-o", str(tmp_path / out)] + (["--keepdims"] if out.startswith("keep") else [])
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1 and "out of bounds" in r.output and f"indices[{row}]" in r.output
    assert os.path.basename(path) in r.output
    assert out is None or not os.path.exists(tmp_path / out)


@pytest.mark.parametrize("op, axis", [("sum", None), ("sum", 1), ("sum", (0, 1)), ("count", None), ("max", 0)])
def test_the_api_refuses_it_too(damaged, op, axis):
    path, row = damaged
    with pytest.raises(DataError, match=rf"indices\[{row}\] = .* is out of bounds") as e:
        sptool.reduce(path, op=op, axis=axis)
    assert path in str(e.value)


@pytest.mark.parametrize("args", [["todense", "-o", "d.npy"], ["bincount", "-o", "b.parquet"],
                                  ["bincount", "--axis", "-1", "-o", "b.parquet"]], ids=lambda a: " ".join(a[:3]))
def test_other_commands_that_read_every_entry_refuse_it(damaged, tmp_path, args):
    path, row = damaged
    command, rest = args[0], [str(tmp_path / a) if a.endswith((".npy", ".parquet")) else a for a in args[1:]]
    r = CliRunner().invoke(cli, [command, path, *rest])
    assert r.exit_code == 1, r.output
    assert "out of bounds" in r.output and f"indices[{row}]" in r.output
    assert not os.path.exists(rest[-1])


@pytest.mark.parametrize("axis", [1, 0])
def test_a_cluster_refuses_it_too(client, tiny, damaged, tmp_path, axis):  # noqa: F811
    """Integer sums reduced piece by piece (or where a sorted input's pieces stand): each task
    reads its piece through the same pass."""
    path, row = damaged
    out = str(tmp_path / "out") + "/"
    with pytest.raises(DataError, match=rf"indices\[{row}\] = .* is out of bounds") as e:
        sptool.distributed.reduce(path, out, op="sum", axis=axis, client=client)
    assert path in str(e.value)
    assert not os.path.exists(out)
