"""Compressed text: .gz, .bz2, .xz and .zst inputs read as a stream, told by the name or, on
stdin and for unnamed files, by their first bytes; outputs whose name ends so are written
compressed.  The Python standard library does gzip, bz2 and xz; zstd comes from pyarrow, a
dependency already (no zstandard package needed)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import sys

from ..errors import InputError
from ..io import bare, open_sequential

CODECS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))
HEAD = max(len(m) for m, _ in MAGIC)
# What a corrupt or truncated compressed stream raises, by codec library.
_ERRORS = (OSError, EOFError, lzma.LZMAError, ValueError)
# The first bytes of stdin read to tell its format, held until a reader opens stdin:
# (the stdin they came from, the bytes, whether they are all of it).
_held: list = [None, b"", False]


def open_binary(path: str, what: str):
    """(raw binary file, whether the caller closes it, name for messages) of a path, or of stdin
    for '-' (refused when it is a terminal: ``what`` says what to pipe in)."""
    if path == "-":
        if sys.stdin.isatty():
            raise InputError(f"stdin is a terminal; pipe {what} into sptool or name a file", path="<stdin>")
        raw = sys.stdin.buffer
        if _held[0] is raw and _held[1]:  # the bytes stdin_head took, in front of the rest
            raw, _held[:] = _Prefixed(_held[1], raw), [None, b"", False]
        return raw, False, "<stdin>"
    try:
        return open_sequential(path), True, path  # a URL: its filesystem's stream, read ahead
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror}", path=path) from None


def look_at_stdin(n: int) -> bytes:
    """Some of stdin's first bytes (up to ``n``, fewer when only fewer have come), without reading
    them away: b"" when stdin is empty or a terminal, whose reader then says so."""
    if sys.stdin.isatty():
        return b""
    raw = sys.stdin.buffer
    if _held[0] is raw:
        return _held[1][:n]
    if hasattr(raw, "peek"):
        return raw.peek(n)[:n]
    if raw.seekable():
        at = raw.tell()
        head = raw.read(n)
        raw.seek(at)
        return head
    return b""  # a stream that can neither look ahead nor go back: taken for an Arrow stream, unread


def stdin_head(n: int) -> tuple[bytes, bool]:
    """(stdin's first ``n`` bytes, or all of it when shorter; whether that is all of it), held for the
    reader that opens stdin next (open_binary gives them back in front of the rest)."""
    raw = sys.stdin.buffer
    if _held[0] is not raw:
        _held[:] = [raw, b"", False]
    while len(_held[1]) < n and not _held[2]:
        more = raw.read(n - len(_held[1]))
        _held[1] += more
        _held[2] = not more
    return _held[1][:n], _held[2]


def decompressed_head(head: bytes, codec: str, limit: int) -> bytes:
    """As much of the start of a compressed stream, up to ``limit`` bytes, as its first bytes ``head``
    give (the codec's complaint where ``head`` is cut is expected)."""
    f = _Decompressing(io.BytesIO(head), codec, "")
    out = b""
    try:
        while len(out) < limit and (chunk := f.f.read(min(1 << 12, limit - len(out)))):
            out += chunk
    except _ERRORS:
        pass
    return out


def codec_of_name(path: str) -> str | None:
    return CODECS.get(os.path.splitext(bare(path))[1].lower()) if path != "-" else None


def without_codec(path: str) -> str:
    """The name with its compression suffix (and a URL's query) removed ("t.tns.gz" -> "t.tns"), for
    telling the format."""
    return os.path.splitext(bare(path))[0] if codec_of_name(path) else bare(path)


def codec_of_bytes(head: bytes) -> str | None:
    return next((codec for magic, codec in MAGIC if head.startswith(magic)), None)


class _Decompressing:
    """A readable binary file over a compressed one; a corrupt stream is an InputError naming it."""

    def __init__(self, raw, codec: str, name: str):
        self.name = name
        if codec == "gzip":
            self.f = gzip.GzipFile(fileobj=raw, mode="rb")
        elif codec == "bz2":
            self.f = bz2.BZ2File(raw, mode="rb")
        elif codec == "xz":
            self.f = lzma.LZMAFile(raw, mode="rb")
        else:
            import pyarrow as pa

            self.f = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd")
        self.codec = codec

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except _ERRORS as e:  # pyarrow's zstd errors are OSError / ValueError too
            raise InputError(f"cannot decompress ({self.codec}): {e}", path=self.name) from None

    def read(self, n: int = -1) -> bytes:
        return self._guard(self.f.read, n)

    def readinto(self, view) -> int:
        return self._guard(self.f.readinto, view)

    def close(self):
        self.f.close()


def reading(raw, path: str, name: str):
    """``raw`` (a buffered binary file, or stdin) decompressed when ``path`` or its first bytes
    say it is compressed; otherwise ``raw`` itself."""
    codec = codec_of_name(path)
    if codec is None:
        if hasattr(raw, "peek"):
            codec = codec_of_bytes(raw.peek(HEAD)[:HEAD])
        else:  # a stream that cannot look ahead: read the first bytes and put them back in front
            head = raw.read(HEAD)
            codec = codec_of_bytes(head)
            raw = _Prefixed(head, raw)
    return raw if codec is None else _Decompressing(raw, codec, name)


class _Prefixed:
    """``head`` followed by the rest of ``raw``, read as one file (closing it leaves ``raw`` to its owner)."""

    closed = False

    def __init__(self, head: bytes, raw):
        self.head, self.raw = head, raw

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if not self.head:
            return self.raw.read(n)
        if n is None or n < 0:
            data, self.head = self.head + self.raw.read(), b""
            return data
        data, self.head = self.head[:n], self.head[n:]
        return data if len(data) == n else data + self.raw.read(n - len(data))

    def readinto(self, view) -> int:
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self):
        pass


def writing(raw, path: str):
    """``raw`` wrapped in a compressor when ``path``'s name asks for one, else ``raw``; the
    caller closes the wrapper, then ``raw``."""
    codec = codec_of_name(path)
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="wb")
    if codec == "bz2":
        return bz2.BZ2File(raw, mode="wb")
    if codec == "xz":
        return lzma.LZMAFile(raw, mode="wb")
    if codec == "zstd":
        import pyarrow as pa

        return pa.CompressedOutputStream(pa.PythonFile(_KeepOpen(raw), mode="w"), "zstd")
    return raw


class _KeepOpen:
    """``raw`` for pyarrow's compressor, which closes what it writes to: closing this only flushes,
    so the caller still owns ``raw`` (stdout must stay open)."""

    def __init__(self, raw):
        self.raw, self.closed = raw, False

    def write(self, data) -> int:
        return self.raw.write(data)

    def flush(self):
        self.raw.flush()

    def writable(self) -> bool:
        return True

    def close(self):
        self.raw.flush()
        self.closed = True
