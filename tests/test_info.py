"""info --histogram: the distribution of stored entries per index of an axis, against NumPy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import random_tensor, tiny_budget

import sptool
from sptool.cli import cli


def _oracle_bins(counts: np.ndarray) -> list[dict]:
    """Power-of-two bins of entry counts, by a plain Python loop."""
    found: dict[tuple[int, int], int] = {}
    for c in counts.tolist():
        lo, hi = (0, 0) if c == 0 else (1 << (c.bit_length() - 1), (1 << c.bit_length()) - 1)
        found[lo, hi] = found.get((lo, hi), 0) + 1
    return [{"entries_from": lo, "entries_to": hi, "indices": n} for (lo, hi), n in sorted(found.items())]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_histogram_matches_numpy(tmp_path, rng, tiny_batches, axis):
    t = random_tensor(rng, (40, 9, 7), 300, duplicates=True)
    path = str(tmp_path / "t.parquet")
    sptool.write(t, path)
    h = sptool.info(path, histogram=axis)["histogram"]
    counts = np.bincount(t.indices[:, axis % 3], minlength=t.shape[axis])
    assert h["axis"] == axis % 3 and h["indices"] == t.shape[axis] and h["entries"] == t.nnz
    assert (h["min"], h["max"]) == (counts.min(), counts.max()) and np.isclose(h["mean"], counts.mean())
    assert h["bins"] == _oracle_bins(counts)
    r = CliRunner().invoke(cli, ["info", "--json", "--histogram", str(axis), path])
    assert r.exit_code == 0 and json.loads(r.stdout)["histogram"] == h


def test_histogram_refuses_an_axis_over_memory_and_a_dense_axis(tmp_path, rng):
    t = random_tensor(rng, (6, 5), 10)
    path = str(tmp_path / "t.parquet")
    sptool.write(t, path)
    with pytest.raises(sptool.UsageError, match="over --memory"):
        sptool.info(path, histogram=0, memory=tiny_budget(64))
    r = CliRunner().invoke(cli, ["info", "--histogram", "2", path])
    assert r.exit_code == 2 and "--histogram axis 2 is out of range" in r.output
