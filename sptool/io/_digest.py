"""The whole-content digest of an Arrow IPC stream (formats/SPEC.md §8): the CRC-32C of every
byte before the trailer message, taken as the bytes pass between pyarrow and the file.

pyarrow reads a stream message by message with exact-sized reads (the continuation marker,
the length, the metadata, the body) and writes it the same way, so a file object in between
sees each byte once and can tell where the trailer message begins: the digest as it stood
before that message was read or written.
"""

from __future__ import annotations

from .._crc32c import crc32c
from ..format import DIGEST_KEY


def digest_problem(trailer: dict, crc: int | None) -> str | None:
    """Why a trailer's digest does not vouch for the bytes before it (``crc``: their CRC-32C,
    None where nothing was measured), or None; a trailer without a digest vouches for nothing."""
    if crc is None or DIGEST_KEY not in trailer or trailer[DIGEST_KEY] == crc:
        return None
    return (f"the stream's bytes before its trailer have CRC-32C {crc}, the trailer says {trailer[DIGEST_KEY]}: "
            "they changed after writing")


class _Digesting:
    """A file object between pyarrow and ``f`` that CRC-32Cs what passes (``crc``: so far)."""

    def __init__(self, f):
        self._f = f
        self.crc = 0
        self.size = 0

    @property
    def closed(self):
        return self._f.closed

    def seekable(self):
        return False

    def close(self):
        pass  # the file is its opener's to close


class DigestReader(_Digesting):
    def read(self, n=-1):
        data = self._f.read(n)
        self.crc = crc32c(data, self.crc)
        self.size += len(data)
        return data

    def readable(self):
        return True


class DigestWriter(_Digesting):
    def write(self, data):
        self.crc = crc32c(data, self.crc)
        self.size += memoryview(data).nbytes
        return self._f.write(data)

    def flush(self):
        self._f.flush()

    def writable(self):
        return True
