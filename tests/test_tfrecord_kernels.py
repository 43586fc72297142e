"""The TFRecord kernels (sptool/_tfrecord.pyx) against their plain-Python reference
(sptool/_tfrecord_reference.py), and CRC-32C against the google-crc32c package."""

from __future__ import annotations

import google_crc32c
import numpy as np
import pytest
from references import tfrecord as ref
from tfrecord_oracle import example, frame, masked_crc

from sptool import _tfrecord as tfr

NAMES = [b"ids", b"values", b"label", b""]


def _names(names):
    blob = np.frombuffer(b"".join(names), dtype=np.uint8)
    return blob, np.cumsum([len(n) for n in names]).astype(np.int64)


def _random_examples(rng, n):
    out = []
    for i in range(n):
        k = int(rng.integers(0, 6))
        feats = {}
        if rng.random() < 0.9:
            feats["ids"] = ("int64", [int(v) for v in rng.integers(-(2**63), 2**63 - 1, size=k)] if i % 7 == 0
                            else [int(v) for v in rng.integers(0, 300, size=k)])
        if rng.random() < 0.8:
            feats["values"] = ("float", [float(v) for v in rng.standard_normal(k).astype(np.float32)])
        if rng.random() < 0.5:
            feats["label"] = ("bytes", [bytes(rng.integers(0, 256, size=int(rng.integers(0, 5)), dtype=np.uint8))
                                        for _ in range(int(rng.integers(0, 3)))])
        if rng.random() < 0.1:
            feats["other"] = None
        out.append(example(**feats))
    return out


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 63, 1000, 4099])
def test_crc32c_matches_google_crc32c(size):
    data = np.random.default_rng(size).integers(0, 256, size=size, dtype=np.uint8)
    assert tfr.crc32c(data) == google_crc32c.value(data.tobytes())
    assert ref.crc32c(data) == google_crc32c.value(data.tobytes())
    assert tfr.masked_crc32c(data) == masked_crc(data.tobytes()) == ref.masked_crc32c(data)
    half = size // 2
    assert tfr.crc32c(data[half:], tfr.crc32c(data[:half])) == google_crc32c.value(data.tobytes())


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


def _check_all(buf: bytes, names=NAMES):
    view = np.frombuffer(buf, dtype=np.uint8)
    scanned = tfr.scan_records(view)
    _same(scanned, ref.scan_records(view))
    offsets, lengths = scanned[0], scanned[1]
    blob, ends = _names(names)
    got = tfr.locate_features(view, offsets, lengths, blob, ends)
    want = ref.locate_features(view, offsets, lengths, blob, ends)
    assert got[4:] == want[4:]
    good = len(offsets) if got[4] == tfr.OK else got[5]
    for g, w in zip(got[:4], want[:4]):
        np.testing.assert_array_equal(g[:good], w[:good])
    kinds, firsts, lasts, counts = (a[:good] for a in got[:4])
    for f in range(len(names)):
        for kind in (tfr.K_INT64, tfr.K_FLOAT, tfr.K_BYTES):
            rows = kinds[:, f] == kind
            a, b = np.ascontiguousarray(firsts[rows, f]), np.ascontiguousarray(lasts[rows, f])
            total = int(counts[rows, f].sum())
            if kind == tfr.K_BYTES:
                _same(tfr.read_bytes(view, a, b, total), ref.read_bytes(view, a, b, total))
            else:
                _same([tfr.read_numbers(view, a, b, total, kind)], [ref.read_numbers(view, a, b, total, kind)])
    return scanned, got


def test_decoding_matches_reference_on_protobuf_examples():
    rng = np.random.default_rng(1)
    records = _random_examples(rng, 200)
    scanned, got = _check_all(frame(records))
    assert scanned[3] == tfr.OK and len(scanned[0]) == 200 and got[4] == tfr.OK


def test_decoding_matches_reference_on_damaged_bytes():
    """Every kind of damage (flipped bits, cut records, garbage) gives the reference's answer,
    including which record is bad and why."""
    rng = np.random.default_rng(2)
    records = _random_examples(rng, 30)
    clean = frame(records)
    statuses = set()
    for trial in range(300):
        buf = bytearray(clean)
        if trial % 3 == 0:  # damage the data but keep the framing valid: the Example parser must cope
            data = bytearray(records[trial % len(records)])
            for _ in range(int(rng.integers(1, 4))):
                if data:
                    data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
            buf = bytearray(frame(records[: trial % len(records)] + [bytes(data)]))
        elif trial % 3 == 1:
            buf[int(rng.integers(0, len(buf)))] ^= 1 << int(rng.integers(0, 8))
        else:
            buf = buf[: int(rng.integers(0, len(buf)))]
        scanned, got = _check_all(bytes(buf))
        statuses.add(scanned[3])
        statuses.add(got[4])
    assert {tfr.ERR_LENGTH_CRC, tfr.ERR_DATA_CRC, tfr.ERR_WIRE} <= statuses


def test_unpacked_and_unknown_fields():
    """Repeated scalars written unpacked, unknown fields, and a key's last entry winning."""
    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        return bytes(out + bytes([v]))

    def field(tag, payload):
        return bytes([tag]) + varint(len(payload)) + payload

    int64_list = b"".join(b"\x08" + varint(v) for v in (5, 300, 7)) + b"\x18\x01"  # unpacked, plus field 3
    float_list = b"".join(b"\x0d" + np.float32(v).tobytes() for v in (1.5, -2.0))
    entry1 = field(0x0A, b"ids") + field(0x12, field(0x1A, b"\x0a\x01\x09"))  # overwritten below
    entry2 = field(0x0A, b"ids") + field(0x12, field(0x1A, int64_list))
    entry3 = field(0x12, field(0x12, float_list)) + field(0x0A, b"values")  # value before key
    features = field(0x0A, entry1) + field(0x0A, entry2) + field(0x0A, entry3) + b"\x10\x05"
    data = b"\x28\x01" + field(0x0A, features)  # an unknown varint field first
    view = np.frombuffer(frame([data]), dtype=np.uint8)
    offsets, lengths = tfr.scan_records(view)[:2]
    blob, ends = _names([b"ids", b"values"])
    kinds, firsts, lasts, counts, status, _ = tfr.locate_features(view, offsets, lengths, blob, ends)
    assert status == tfr.OK
    assert kinds.tolist() == [[tfr.K_INT64, tfr.K_FLOAT]] and counts.tolist() == [[3, 2]]
    assert tfr.read_numbers(view, firsts[:, 0], lasts[:, 0], 3, tfr.K_INT64).tolist() == [5, 300, 7]
    assert tfr.read_numbers(view, firsts[:, 1], lasts[:, 1], 2, tfr.K_FLOAT).tolist() == [1.5, -2.0]
    _check_all(frame([data]), [b"ids", b"values"])


@pytest.mark.parametrize("seed", [0, 1])
def test_encoder_matches_reference_and_protobuf(seed):
    from tfrecord_oracle import Example

    rng = np.random.default_rng(seed)
    rows = 50
    counts = rng.integers(0, 5, size=rows)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    ids = rng.integers(-(2**63), 2**63 - 1, size=int(starts[-1]), dtype=np.int64)
    floats = rng.standard_normal(int(starts[-1])).astype(np.float32)
    items = [bytes(rng.integers(0, 256, size=int(rng.integers(0, 4)), dtype=np.uint8)) for _ in range(rows)]
    boffsets = np.concatenate([[0], np.cumsum([len(b) for b in items])]).astype(np.int64)
    bdata = np.frombuffer(b"".join(items), dtype=np.uint8)
    e_i, e_f, e_u = np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.uint8)
    columns = [(tfr.K_INT64, np.frombuffer(b"ids", np.uint8), starts, ids, e_f, e_i, e_u),
               (tfr.K_FLOAT, np.frombuffer(b"values", np.uint8), starts, e_i, floats, e_i, e_u),
               (tfr.K_BYTES, np.frombuffer(b"note", np.uint8), np.arange(rows + 1, dtype=np.int64), e_i, e_f,
                boffsets, bdata)]
    got = bytes(tfr.encode_examples(rows, columns))
    assert got == bytes(ref.encode_examples(rows, columns))
    view = np.frombuffer(got, dtype=np.uint8)
    offsets, lengths, end, status, _ = tfr.scan_records(view)
    assert status == tfr.OK and end == len(got) and len(offsets) == rows
    for r in range(rows):
        ex = Example.FromString(got[offsets[r] : offsets[r] + lengths[r]])
        a, b = starts[r], starts[r + 1]
        assert list(ex.features.feature["ids"].int64_list.value) == ids[a:b].tolist()
        assert np.array_equal(np.array(ex.features.feature["values"].float_list.value, np.float32), floats[a:b])
        assert list(ex.features.feature["note"].bytes_list.value) == [items[r]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_order_within_rows_matches_reference(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 9, size=300)
    counts[::50] = rng.integers(17, 300, size=len(counts[::50]))  # rows merge-sorted, not by insertion
    ids = rng.integers(0, 5 if seed == 0 else 1000, size=int(counts.sum())).astype(np.int64)  # seed 0: many repeats
    got = tfr.order_within_rows(counts.astype(np.int64), ids)
    want = ref.order_within_rows(counts, ids)
    np.testing.assert_array_equal(got, want)
    starts = np.cumsum(counts) - counts
    lex = np.lexsort((np.arange(len(ids)), ids, np.repeat(np.arange(len(counts)), counts)))  # NumPy's own
    np.testing.assert_array_equal(got, lex)
    assert starts[0] == 0
    assert tfr.order_within_rows(np.array([3], np.int64), np.array([1, 2, 2], np.int64)) is None
    assert ref.order_within_rows(np.array([3]), np.array([1, 2, 2])) is None
