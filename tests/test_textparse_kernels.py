"""The coordinate-text kernel (sptool/_textparse.pyx) against Python's own parsing: float() is
correctly rounded, as the kernel's fast paths (Clinger's, Eisel-Lemire's 128-bit products) and its
strtod fallback must be; int() for the indices.  The debug CI build compiles the portable fallbacks
of the 128-bit product and bit scans, so these tests cover both."""

from __future__ import annotations

import numpy as np
import pytest

from sptool import _textparse as tp


def _parse(lines: list[str], nidx: int = 1):
    data = np.frombuffer(("\n".join(lines) + "\n").encode(), np.uint8)
    cap = len(lines)
    idx, fval = np.empty((nidx, cap), np.int64), np.empty(cap, np.float64)
    rows, _, _, err, *_ = tp.parse_lines(data, True, nidx, tp.V_FLOAT, 0, 0, 0, idx, fval, np.empty(0, np.int64))
    assert err == tp.OK and rows == cap
    return idx, fval


def _decimal(rng) -> str:
    digits = "".join(str(d) for d in rng.integers(0, 10, size=int(rng.integers(1, 21))))
    point = int(rng.integers(0, len(digits) + 1))
    sign = "-" if rng.random() < 0.3 else ""
    return f"{sign}{digits[:point]}.{digits[point:]}e{int(rng.integers(-340, 320))}"


@pytest.mark.parametrize("seed", range(8))
def test_floats_parse_as_python_parses_them(seed):
    rng = np.random.default_rng(seed)
    words = [_decimal(rng) for _ in range(2000)]
    # Shortest round-trip spellings of random doubles: mostly 15-17 digits, the 128-bit path.
    words += [repr(float(x)) for x in rng.standard_normal(1000) * 10.0 ** rng.integers(-300, 300, 1000)]
    words += ["0", "-0.0", "1e400", "-1e-400", "9007199254740993", "123456789012345678901234", "inf", "nan"]
    idx, got = _parse([f"{i} {w}" for i, w in enumerate(words)])
    want = np.array([float(w) for w in words])
    np.testing.assert_array_equal(idx[0], np.arange(len(words)))
    same = (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [(w, g, x) for w, g, x, s in zip(words, got, want, same) if not s][:5]


def test_indices_parse_as_python_parses_them():
    rng = np.random.default_rng(1)
    ints = [int(v) for v in rng.integers(0, 2**63 - 1, size=500, dtype=np.int64)] + [0, 2**63 - 1]
    idx, _ = _parse([f"{v} {w} 1.5" for v, w in zip(ints, reversed(ints))], nidx=2)
    assert idx[0].tolist() == ints and idx[1].tolist() == ints[::-1]
