"""The text kernel's word-at-a-time paths against Python's int() and float(): integers of every
length at every distance from the end of their line (a field read from one 8-byte load, or
digit by digit near the end), fractions behind leading zeros, and the line number of a line too
long to be text, told once many blocks before it are parsed on the thread pool."""

from __future__ import annotations

import numpy as np
import pytest

import sptool
from sptool import _textparse as tp
from sptool.converters.text import OpenedText
from sptool.errors import DataError


def _parse(text: bytes, nidx: int, *, delim: int = 0, base: int = 0):
    cap = text.count(b"\n") + 1
    idx, fval = np.zeros((nidx, cap), np.int64), np.zeros(cap, np.float64)
    result = tp.parse_lines(text, True, nidx, tp.V_FLOAT, base, delim, 0, idx, fval, np.empty(0, np.int64))
    return result, idx, fval


def _integer_words(rng) -> list[str]:
    words = []
    for digits in range(1, 20):
        for _ in range(6):
            word = "".join(str(d) for d in rng.integers(0, 10, digits))
            words.append(word if int(word) < 2**63 else word[:-1])
    words += ["0", "00000001", "000000000000000000007", str(2**63 - 1), "+12", "+1234567"]
    return words


@pytest.mark.parametrize(("delim", "sep"), [(0, " "), (0, "\t"), (44, ","), (44, " , "), (9, "\t")])
def test_indices_of_every_length_parse_as_int_does(rng, delim, sep):
    words = _integer_words(rng)
    # Each word once as the first field (bytes to spare after it) and once as the last index, right
    # before a short value, so that both the 8-byte load and the digit loop read it.
    lines = [sep.join([w, words[-1 - i], "1"]) + ("\r" if i % 5 == 0 else "") for i, w in enumerate(words)]
    result, idx, _ = _parse("\n".join(lines).encode(), 2, delim=delim)
    rows, err = result[0], result[3]
    assert err == tp.OK and rows == len(words)
    assert idx[0].tolist() == [int(w) for w in words]
    assert idx[1].tolist() == [int(w) for w in reversed(words)]


def test_integer_values_of_every_length_and_sign_parse_as_int_does(rng):
    words = _integer_words(rng)
    words += [f"-{w}" for w in words if not w.startswith("+")] + [str(-(2**63))]
    text = "\n".join(f"0 {w}" for w in words).encode()
    idx, ival = np.zeros((1, len(words)), np.int64), np.zeros(len(words), np.int64)
    result = tp.parse_lines(text, True, 1, tp.V_INT, 0, 0, 0, idx, np.empty(0), ival)
    assert result[3] == tp.OK and result[0] == len(words)
    assert ival.tolist() == [int(w) for w in words]


@pytest.mark.parametrize("word", ["12a4567 1", "1234567x 1", "12\xff4567 1", "\xfa2345678 1", "-x234567 1",
                                  "+ 2345678 1", "1.5 2 1"])
def test_an_index_that_is_no_integer_is_refused(word):
    result, *_ = _parse(word.encode("latin-1"), 2)
    assert result[3] in (tp.ERR_INDEX, tp.ERR_FIELDS) and result[6] == 0


def test_an_index_past_int64_is_a_range_error():
    result, *_ = _parse(f"{2**63} 1 1".encode(), 2)
    assert result[3] == tp.ERR_RANGE


def test_fractions_behind_leading_zeros_parse_as_float_does(rng):
    words = []
    for zeros in range(0, 24, 3):
        for digits in range(1, 26, 2):
            body = "".join(str(d) for d in rng.integers(0, 10, digits))
            exp = f"e{int(rng.integers(-30, 30))}" if digits % 3 == 0 else ""
            sign = "-" if digits % 4 == 1 else ""
            zs = "0" * zeros
            words += [f"{sign}0.{zs}{body}{exp}", f"{sign}.{zs}{body}", f"{sign}00.{zs}{body}"]
    words += ["0.0000000000", "0.00000000", "-0.000000000000000000000000", "0." + "0" * 330 + "1"]
    _, _, got = _parse("\n".join(f"0 {w}" for w in words).encode(), 1)
    want = np.array([float(w) for w in words])
    bad = [(w, g, x) for w, g, x, same in zip(words, got, want, got.view(np.int64) == want.view(np.int64)) if not same]
    assert not bad, bad[:5]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_line_too_long_is_named_after_many_blocks(tmp_path, monkeypatch, threads):
    monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", "4096")
    monkeypatch.setenv("SPTOOL_THREADS", threads)
    n = 20000
    lines = [f"{i % 7 + 1} {i % 5 + 1} {i / 3!r}" for i in range(n)]
    path = tmp_path / "long.tns"
    path.write_text("\n".join(lines) + "\n1 1 " + "1" * (2 << 20) + "\n2 2 2.0\n")
    with pytest.raises(DataError, match=rf"long\.tns: line {n + 1}: longer than {1 << 20} bytes"):
        sptool.convert(str(path), str(tmp_path / "long.parquet"))
    assert not (tmp_path / "long.parquet").exists()


@pytest.mark.parametrize("block", [None, "4096"])
def test_lines_of_a_few_bytes_convert_whole(tmp_path, monkeypatch, rng, block):
    """Lines of 4 bytes, many to a block: rows, values and line numbers as loadtxt reads them."""
    if block is not None:
        monkeypatch.setenv("SPTOOL_TEXT_BLOCK_BYTES", block)
    n = 30000
    idx, vals = rng.integers(1, 10, n), rng.integers(0, 10, n)
    path = tmp_path / "short.tns"
    path.write_text("".join(f"{i} {v}\n" for i, v in zip(idx, vals)))
    sptool.convert(str(path), str(tmp_path / "short.parquet"))
    got = sptool.read(str(tmp_path / "short.parquet"))
    want = np.loadtxt(path, ndmin=2)
    np.testing.assert_array_equal(got.indices[:, 0], want[:, 0] - 1)
    np.testing.assert_array_equal(got.values, want[:, 1])
    path.write_text(path.read_text() + "1 x\n")
    with pytest.raises(DataError, match=rf"short\.tns: line {n + 1}: field 2: value 'x' is not a number"):
        sptool.convert(str(path), str(tmp_path / "bad.parquet"))


def _text_file(tmp_path, n=5000):
    path = tmp_path / "blocks.tns"
    path.write_bytes(b"".join(b"%d %d %r\n" % (i % 97 + 1, i % 13 + 1, i / 7) for i in range(n)))
    return path


def test_blocks_held_by_their_reader_are_never_refilled(tmp_path):
    path = _text_file(tmp_path)
    text = OpenedText(str(path))
    held = [(block, bytes(block)) for block in text.blocks(1000)]
    text.close()
    assert all(block == copy for block, copy in held)
    assert b"".join(copy for _, copy in held) == path.read_bytes()


def test_blocks_let_go_are_refilled_and_read_whole(tmp_path):
    path = _text_file(tmp_path)
    text = OpenedText(str(path))
    copies = [bytes(block) for block in text.blocks(1000)]
    text.close()
    assert b"".join(copies) == path.read_bytes()
