"""Random mutations of valid files never crash, hang or leave output behind."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sptool
from sptool.cli import cli

# Exit codes a user may see for bad input: 0 (a harmless mutation), 1 (bad data), 2 (unreadable).
# 3 is sptool's "internal error": a crash, which is what this test hunts for.
ALLOWED = {0, 1, 2}


def _valid_files(tmp_dir):
    rng = np.random.default_rng(7)
    idx = np.unique(rng.integers(0, 6, size=(40, 3)), axis=0)
    t = sptool.SparseTensor(idx, rng.standard_normal(len(idx)), (6, 6, 6))
    h = sptool.SparseTensor(np.array([[0], [3], [3]]), rng.standard_normal((3, 2, 2)), (5, 2, 2))
    files = {}
    for name, tensor in (("t.parquet", t), ("t.arrows", t), ("h.parquet", h)):
        path = os.path.join(tmp_dir, name)
        sptool.write(tensor, path)
        with open(path, "rb") as f:
            files[name] = f.read()
    return files


_FILES: dict = {}


def valid_bytes(name, tmp_path_factory):
    if not _FILES:
        _FILES.update(_valid_files(tmp_path_factory.mktemp("valid")))
    return _FILES[name]


mutation = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 64)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.integers(0, 255)),
)


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for kind, where, arg in ops:
        if not buf:
            break
        pos = min(int(where * len(buf)), len(buf) - 1)
        if kind == "flip":
            buf[pos] ^= arg
        elif kind == "truncate":
            del buf[pos:]
        elif kind == "delete":
            del buf[pos:pos + arg]
        else:
            buf[pos:pos] = bytes([arg]) * 4
    return bytes(buf)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


@pytest.mark.parametrize("name", ["t.parquet", "t.arrows", "h.parquet"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_inputs(tmp_path_factory, name, ops):
    work = tmp_path_factory.mktemp("mut")
    src = work / name
    src.write_bytes(mutate(valid_bytes(name, tmp_path_factory), ops))
    before = src.read_bytes()
    runner = CliRunner()
    commands = [
        ["validate", str(src)],
        ["info", str(src)],
        ["info", "--scan", str(src)],
        ["todense", str(src), "-o", str(work / "out.npy")],
    ]
    if cli.get_command(None, "convert") is not None:
        commands.append(["convert", str(src), "-o", str(work / "out.tns")])
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for args in commands:
            signal.alarm(30)
            result = runner.invoke(cli, ["-q"] + args, catch_exceptions=True)
            signal.alarm(0)
            assert result.exit_code in ALLOWED, (args, result.exit_code, result.output)
            assert "Traceback" not in result.output
            left = sorted(os.listdir(work))
            expected = sorted({name} | ({os.path.basename(args[-1])} if result.exit_code == 0 and "-o" in args
                                        else set()))
            assert left == expected, (args, left)
            for p in left:
                if p != name:
                    os.remove(work / p)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert src.read_bytes() == before, "inputs are never modified"
