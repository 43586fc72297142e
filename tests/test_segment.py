"""segment-sum, segment-mean and segment-sqrt-n against np.add.at on the same data."""

from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

import sptool
from sptool.cli import cli
from sptool.errors import DataError, ShapeMismatch, UsageError


def oracle(kind, data, idx, seg, num_segments=None):
    S = num_segments if num_segments is not None else (int(seg[-1]) + 1 if len(seg) else 0)
    out = np.zeros((S,) + data.shape[1:], dtype=data.dtype)
    np.add.at(out, seg, data[idx])
    if kind == "sum":
        return out
    counts = np.bincount(seg, minlength=S).astype(data.dtype)
    div = counts if kind == "mean" else np.sqrt(counts)
    shape = (S,) + (1,) * (data.ndim - 1)
    return np.where(counts.reshape(shape) > 0, out / np.where(div > 0, div, 1).reshape(shape), 0).astype(data.dtype)


def _save(tmp_path, **arrays):
    paths = {}
    for name, arr in arrays.items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], arr)
    return paths


FUNCS = {"sum": sptool.segment_sum, "mean": sptool.segment_mean, "sqrt_n": sptool.segment_sqrt_n}


@pytest.mark.parametrize("kind", list(FUNCS))
@pytest.mark.parametrize("seed", range(6))
def test_against_np_add_at(kind, seed, tmp_path, monkeypatch):
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")  # slices of 7 pairs: segments cross slice boundaries
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    trailing = [(), (3,), (2, 4)][seed % 3]
    dtype = [np.float32, np.float64][seed % 2] if kind != "sum" else [np.float32, np.float64, np.int64, np.int32][
        seed % 4]
    data = (rng.standard_normal((n,) + trailing) * 10).astype(dtype)
    pairs = int(rng.integers(0, 60))
    idx = rng.integers(0, n, size=pairs)  # repeated rows too
    seg = np.sort(rng.integers(0, 12, size=pairs))
    num = None if seed % 2 else 15
    p = _save(tmp_path, data=data, idx=idx, seg=seg)
    out = str(tmp_path / "out.npy")
    r = FUNCS[kind](p["data"], out, indices=p["idx"], segment_ids=p["seg"], num_segments=num)
    got, want = np.load(out), oracle(kind, data, idx, seg, num)
    assert got.dtype == data.dtype and got.shape == want.shape and r["shape"] == list(want.shape)
    if kind == "sum":
        np.testing.assert_array_equal(got, want)  # the same additions in the same order as np.add.at
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_errors(tmp_path):
    data = np.arange(12.0).reshape(4, 3)
    runner = CliRunner()
    cases = [
        (dict(idx=[0, 4], seg=[0, 1]), DataError, r"Bad: indices\[1\] == 4 out of range \[0, 4\)"),
        (dict(idx=[0, 1, 2], seg=[1, 0, 2]), DataError, r"segment ids are not increasing: segment_ids\[1\] = 0"),
        (dict(idx=[0, 1], seg=[-1, 0]), DataError, "must be >= 0"),
        (dict(idx=[0, 1], seg=[0, 1, 2]), ShapeMismatch, "same size"),
    ]
    for arrays, err, match in cases:
        p = _save(tmp_path, data=data, idx=np.array(arrays["idx"]), seg=np.array(arrays["seg"]))
        out = str(tmp_path / "o.npy")
        with pytest.raises(err, match=match):
            sptool.segment_sum(p["data"], out, indices=p["idx"], segment_ids=p["seg"])
        assert not os.path.exists(out)
        r = runner.invoke(cli, ["segment-sum", p["data"], "--indices", p["idx"], "--segment-ids", p["seg"], "-o", out])
        assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
        assert not os.path.exists(out) and not [f for f in os.listdir(tmp_path) if f.startswith(".")]
    p = _save(tmp_path, data=data, idx=np.array([0, 1]), seg=np.array([0, 3]))
    with pytest.raises(DataError, match=r"Segment id 3 out of range \[0, 2\)"):
        sptool.segment_sum(p["data"], str(tmp_path / "o.npy"), indices=p["idx"], segment_ids=p["seg"], num_segments=2)
    ints = _save(tmp_path, data=np.arange(4).reshape(4, 1))["data"]
    with pytest.raises(UsageError, match="float32 or float64"):
        sptool.segment_mean(ints, str(tmp_path / "o.npy"), indices=p["idx"], segment_ids=p["seg"])
    with pytest.raises(UsageError, match=".npy"):
        sptool.segment_sum(p["data"], str(tmp_path / "o.parquet"), indices=p["idx"], segment_ids=p["seg"])


@pytest.mark.parametrize("kind", list(FUNCS))
def test_operands_that_are_numbers_or_lists_are_not_file_names(kind, tmp_path):
    """A Python number or list is an array (as np.asarray makes it), never a path: a float as
    data is refused as a 0-d array is, and lists of ids work as arrays of them."""
    with pytest.raises(UsageError, match="data must have at least one dimension") as err:
        FUNCS[kind](1.0, indices=[0], segment_ids=[3])
    assert "no such file" not in str(err.value)
    with pytest.raises(UsageError, match="--indices must be a .npy path or an array, not set"):
        FUNCS[kind](np.ones((2, 2)), indices={0}, segment_ids=[0])
    with pytest.raises(UsageError, match="--segment-ids must be a rectangular array"):
        FUNCS[kind](np.ones((2, 2)), indices=[0, 1], segment_ids=[[0], [0, 1]])
    data = np.arange(12.0).reshape(4, 3)
    got = FUNCS[kind](data.tolist(), indices=[0, 3, 1], segment_ids=(0, 0, 2))
    np.testing.assert_allclose(got, oracle(kind, data, np.array([0, 3, 1]), np.array([0, 0, 2])))


def test_cli_matches_api_and_empty(tmp_path):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((50, 8)).astype(np.float32)
    idx, seg = rng.integers(0, 50, 100), np.sort(rng.integers(0, 20, 100))
    p = _save(tmp_path, data=data, idx=idx, seg=seg)
    out = str(tmp_path / "o.npy")
    r = CliRunner().invoke(cli, ["-q", "segment-sqrt-n", p["data"], "--indices", p["idx"], "--segment-ids", p["seg"],
                                 "--num-segments", "25", "-o", out])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(out), oracle("sqrt_n", data, idx, seg, 25), rtol=1e-6)
    e = _save(tmp_path, idx=np.zeros(0, np.int64), seg=np.zeros(0, np.int64))
    sptool.segment_mean(p["data"], out, indices=e["idx"], segment_ids=e["seg"])
    assert np.load(out).shape == (0, 8)


def test_peak_rss_within_the_budget(tmp_path):
    """2M pairs onto a 200k x 64 float32 table (51 MB; np.add.at would gather 512 MB) at --memory 64MiB."""
    from test_memory import OVERHEAD, peak_rss

    rng = np.random.default_rng(6)
    data = rng.standard_normal((200_000, 64)).astype(np.float32)
    idx, seg = rng.integers(0, 200_000, 2_000_000), np.sort(rng.integers(0, 100_000, 2_000_000))
    p = _save(tmp_path, data=data, idx=idx, seg=seg)
    budget = 64 << 20
    rss = peak_rss(["--memory", str(budget), "segment-sum", p["data"], "--indices", p["idx"], "--segment-ids",
                    p["seg"], "-o", "o.npy"], tmp_path)
    assert rss < budget + OVERHEAD, f"peak RSS {rss / 2**20:.0f} MiB"
    got = np.load(tmp_path / "o.npy", mmap_mode="r")
    head = seg < 1000  # the first segments, checked against np.add.at
    want = np.zeros((1000, 64), np.float32)
    np.add.at(want, seg[head], data[idx[head]])
    np.testing.assert_array_equal(got[:1000], want)


@pytest.mark.parametrize("name", ["segment-sum", "segment-mean", "segment-sqrt-n"])
@pytest.mark.parametrize("seg, pos, word", [
    ([0, 1, -2], 2, "must be >= 0"),  # the last id sizes the output when --num-segments is not given
    ([-5, -5, -5], 2, "must be >= 0"),
    ([0, -3, 1], 1, "must be >= 0"),
    ([0, 2, 1], 2, "not increasing"),
])
def test_invalid_segment_ids_are_data_errors_naming_the_file_and_pair(name, seg, pos, word, tmp_path):
    """TensorFlow refuses these ids (tf-semantics.md, segment_sum): exit 1, one line, the ids' file
    and the pair, whether or not the output is sized by --num-segments."""
    p = _save(tmp_path, data=np.arange(12.0).reshape(4, 3), idx=np.array([0, 1, 2]), seg=np.array(seg))
    out = str(tmp_path / "o.npy")
    for num in ([], ["--num-segments", "5"]):
        r = CliRunner().invoke(cli, [name, p["data"], "--indices", p["idx"], "--segment-ids", p["seg"], "-o", out,
                                     *num])
        assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
        assert p["seg"] in r.output and word in r.output, r.output
        if not num:  # with --num-segments, the first bad pair as it is read
            assert f"segment_ids[{pos}]" in r.output, r.output
        assert not os.path.exists(out)


def test_ids_past_int64_are_named_as_they_are(tmp_path):
    """A uint64 index past 2^63 is out of range as itself, not as the negative number it wraps to."""
    big = np.iinfo(np.uint64).max
    p = _save(tmp_path, data=np.arange(12.0).reshape(4, 3), idx=np.array([0, 1, big], np.uint64),
              seg=np.array([0, 1, big], np.uint64))
    with pytest.raises(DataError, match=rf"Bad: indices\[2\] == {big} out of range") as e:
        sptool.segment_sum(p["data"], str(tmp_path / "o.npy"), indices=p["idx"], segment_ids=p["seg"], num_segments=3)
    assert e.value.path == p["idx"]
    ok = _save(tmp_path, idx=np.array([0, 1, 2], np.uint64))
    with pytest.raises(DataError, match=rf"Segment id {big} out of range \[0, 3\)"):
        sptool.segment_sum(p["data"], str(tmp_path / "o.npy"), indices=ok["idx"], segment_ids=p["seg"], num_segments=3)
