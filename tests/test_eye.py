"""eye against np.eye."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import sptool
from sptool.cli import cli
from sptool.errors import UsageError
from sptool.ops.eye import eye


@pytest.mark.parametrize("n,m", [(0, None), (1, None), (5, None), (3, 7), (7, 3), (4, 0)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "complex64"])
def test_matches_numpy(tmp_path, n, m, dtype):
    out = str(tmp_path / "eye.parquet")
    r = eye(n, m, out, dtype=dtype)
    assert sptool.validate(out).valid
    s = sptool.read(out)
    want = np.eye(n, m, dtype=dtype)
    assert s.canonical and s.dtype == want.dtype and s.shape == want.shape and r["rows"] == min(want.shape)
    np.testing.assert_array_equal(s.to_dense(), want)


def test_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")
    out = str(tmp_path / "eye.parquet")
    eye(50, 40, out, dtype="float64")
    assert sptool.validate(out).valid
    np.testing.assert_array_equal(sptool.read(out).to_dense(), np.eye(50, 40))


def test_errors_and_cli(tmp_path):
    with pytest.raises(UsageError):
        eye(-1, None, str(tmp_path / "e.parquet"))
    with pytest.raises(UsageError, match="--dtype"):
        eye(3, None, str(tmp_path / "e.parquet"), dtype="string")
    runner = CliRunner()
    r = runner.invoke(cli, ["eye", "4", "--dtype", "nosuch", "-o", str(tmp_path / "e.parquet")])
    assert r.exit_code == 2 and not (tmp_path / "e.parquet").exists()
    r = runner.invoke(cli, ["-q", "eye", "4", "6", "--dtype", "int32", "-o", str(tmp_path / "e.parquet")])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(sptool.read(str(tmp_path / "e.parquet")).to_dense(), np.eye(4, 6, dtype="int32"))
