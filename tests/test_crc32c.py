"""CRC-32C: google-crc32c's (hardware) and sptool's compiled slicing-by-8 give the RFC 3720
check values and the same numbers as each other; the stream digest is the same, and still
checked, whichever of them runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import google_crc32c
import numpy as np
import pyarrow as pa
import pytest

from sptool import _crc32c, _tfrecord

# RFC 3720 (iSCSI), appendix B.4: CRC-32C check values, and the classic "123456789".
READ_PDU = bytes.fromhex("01c00000" + "00000000" * 3 + "14000000 00000400 00000014 00000018 28000000 00000000"
                         " 02000000 00000000")  # a SCSI Read (10) command PDU
RFC_3720 = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (READ_PDU, 0xD9963A56),
    (b"123456789", 0xE3069283),
]


@pytest.mark.parametrize("data, expected", RFC_3720)
def test_both_give_the_rfc_3720_check_values(data, expected):
    assert google_crc32c.implementation == "c"  # the hardware path is the one under test
    assert google_crc32c.value(data) == expected
    assert _tfrecord.crc32c(np.frombuffer(data, np.uint8)) == expected
    assert _crc32c.crc32c(data) == expected


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 63, 4096, 100_003])
def test_both_agree_in_pieces_and_on_any_buffer(rng, size):
    data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    whole = google_crc32c.value(data)
    assert _tfrecord.crc32c(np.frombuffer(data, np.uint8)) == whole
    cuts = sorted(rng.integers(0, size + 1, 3).tolist())
    pieces = [data[a:b] for a, b in zip([0] + cuts, cuts + [size])]
    # bytes and pyarrow buffers go to google-crc32c, the others to the compiled one
    for kind in (bytes, bytearray, memoryview, pa.py_buffer, lambda b: np.frombuffer(b, np.uint8)):
        crc = 0
        for piece in pieces:
            crc = _crc32c.crc32c(kind(piece), crc)
        assert crc == whole, kind
    sliced = 0
    for piece in pieces:
        sliced = _tfrecord.crc32c(np.frombuffer(piece, np.uint8), sliced)
    assert sliced == whole


_DIGEST = """
import json, sys
if sys.argv[1] == "fallback":
    sys.modules["google_crc32c"] = None  # as if it were not installed
import sptool
from sptool import _crc32c
src, out = sys.argv[2], sys.argv[3]
sptool.reorder(src, out)
report = sptool.validate(out, strict=True).as_dict()
print(json.dumps({"hardware": bool(_crc32c._extend), "valid": report["valid"],
                  "codes": sorted(c["code"] for c in report["checks"])}))
"""


def _digest_run(mode: str, src: str, out: str) -> dict:
    res = subprocess.run([sys.executable, "-c", _DIGEST, mode, src, out], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_the_stream_digest_is_the_same_and_checked_without_google_crc32c(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "..", "sample_data", "tensor3d.parquet")
    runs = {mode: _digest_run(mode, src, str(tmp_path / f"{mode}.arrows")) for mode in ("hardware", "fallback")}
    assert runs["hardware"]["hardware"] and not runs["fallback"]["hardware"]
    assert (tmp_path / "hardware.arrows").read_bytes() == (tmp_path / "fallback.arrows").read_bytes()
    for mode, run in runs.items():
        assert run["valid"] and "E_STREAM_DIGEST" not in run["codes"], mode
    # A changed byte of a batch is caught by the digest either way.
    data = bytearray((tmp_path / "hardware.arrows").read_bytes())
    data[len(data) // 2] ^= 0x5A
    (tmp_path / "changed.arrows").write_bytes(bytes(data))
    for mode in ("hardware", "fallback"):
        code = (f"import sys\nif {mode == 'fallback'}: sys.modules['google_crc32c'] = None\nimport json, sptool\n"
                f"r = sptool.validate({str(tmp_path / 'changed.arrows')!r}, strict=True).as_dict()\n"
                "print(json.dumps(sorted(c['code'] for c in r['checks'])))")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "E_STREAM_DIGEST" in json.loads(res.stdout), mode
