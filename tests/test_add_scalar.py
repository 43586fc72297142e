"""add --scalar: a number added to every stored entry, against a dense NumPy oracle restricted to
the stored coordinates (implicit zeros stay zero)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import column_major, dense_oracle, random_tensor, small_runs, write_tensor

import sptool
from sptool.cli import cli
from sptool.errors import UsageError


def _expected(t, number) -> np.ndarray:
    """NumPy's own answer: the dense tensor plus the number where a coordinate is stored, 0 elsewhere."""
    dense = dense_oracle(t)
    stored = np.zeros(t.shape, dtype=bool)
    stored[tuple(t.indices.T)] = True
    with np.errstate(over="ignore"):
        plus = dense + number  # NumPy's promotion of the value type and a Python number
    return np.where(stored, plus, np.zeros((), plus.dtype))


@pytest.mark.parametrize("dtype,number", [("float64", 2.5), ("float32", 2.5), ("int32", 3), ("int32", 0.5),
                                          ("int8", -7), ("complex64", 1 + 2j), ("bool", 1)])
@pytest.mark.parametrize("duplicates", [False, True])
def test_matches_numpy(tmp_path, rng, tiny_batches, monkeypatch, dtype, number, duplicates):
    small_runs(monkeypatch, 13, 5)  # unsorted duplicates go through the external sort in several runs
    t = random_tensor(rng, (9, 7, 4), 90, dtype=dtype, duplicates=duplicates)
    path = write_tensor(tmp_path, "t.parquet", t)
    out = str(tmp_path / "o.parquet")
    r = sptool.add(path, output=out, scalar=number)
    s = sptool.read(out)
    want = _expected(t, number)
    assert s.dtype == want.dtype
    assert r["rows_out"] == s.nnz == len({tuple(i) for i in t.indices})  # one row per stored coordinate
    assert s.unique and sptool.validate(out).valid
    np.testing.assert_allclose(s.to_dense(), want, rtol=1e-6)


def test_unique_input_keeps_its_order_and_text_numbers(tmp_path, rng):
    t = column_major(random_tensor(rng, (30, 20), 100))  # unique, out of row-major order
    path = write_tensor(tmp_path, "t.parquet", t)
    got = sptool.add(path, scalar="-1e-3")  # the number's text, as the command line gives it
    assert np.array_equal(got.indices, t.indices)  # no sort: the rows pass through in their order
    np.testing.assert_allclose(got.values, t.values - 1e-3)
    got = sptool.add(t, None, None, scalar=np.float32(2))  # an in-memory tensor and a NumPy number
    np.testing.assert_allclose(got.to_dense(), _expected(t, np.float32(2)))


def test_command_line(tmp_path, rng):
    t = random_tensor(rng, (12, 8), 40, dtype="float32", duplicates=True)
    path = write_tensor(tmp_path, "t.parquet", t)
    out = str(tmp_path / "o.parquet")
    runner = CliRunner()
    r = runner.invoke(cli, ["-q", "add", path, "--scalar", "-2.5", "-o", out])  # a negative value after --scalar
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(sptool.read(out).to_dense(), _expected(t, -2.5))
    assert sptool.read(out).dtype == np.float32


@pytest.mark.parametrize("args,message", [
    (["--scalar", "abc"], "--scalar must be a number"),
    (["B", "--scalar", "1"], "either a second operand or --scalar, not both"),
    ([], "needs a second operand"),
    (["--scalar", "1", "--thresh", "0.5"], "--thresh and --prune apply to sparse + sparse only"),
])
def test_usage_errors(tmp_path, rng, args, message):
    path = write_tensor(tmp_path, "t.parquet", random_tensor(rng, (4, 4), 5))
    args = [path if a == "B" else a for a in args]
    out = str(tmp_path / "o.parquet")
    r = CliRunner().invoke(cli, ["add", path, *args, "-o", out])
    assert r.exit_code == 2 and message in r.output and r.output.count("\n") == 1, r.output
    assert not (tmp_path / "o.parquet").exists()


def test_refuses_what_it_cannot_keep_sparse(tmp_path, rng):
    t = random_tensor(rng, (4, 4), 5, fill_value=1.0)
    with pytest.raises(UsageError, match="fill value is 0"):
        sptool.add(write_tensor(tmp_path, "f.parquet", t), output=str(tmp_path / "o.parquet"), scalar=1)
    s = sptool.SparseTensor([[0], [2]], np.array(["a", "b"], dtype=object), (3,))
    with pytest.raises(UsageError, match="needs numeric values"):
        sptool.add(write_tensor(tmp_path, "s.parquet", s), scalar=1)
