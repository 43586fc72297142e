"""An input's format told from its content, for a file whose name does not say it and for stdin.

Binary formats are told by their magic bytes (the registry's table).  Text, compressed or not, by
its first lines: Matrix Market's banner, a JSON object per line, svmlight's ``id:value``
features, CSV's commas, TSV's tabs under a header, or FROSTT's integer indices and a value in a
constant number of fields (its extended header too); ``#`` comment lines and blank lines are
skipped.  Lines that fit no format, or that could be two (tab-separated numbers without a header
are TSV with 0-based indices or .tns with 1-based ones), tell nothing: the caller asks for --from.

On stdin, the bytes looked at are not lost: an Arrow stream or a binary magic is seen without
reading (compression.look_at_stdin), and the text looked at is held and given back to the reader
(compression.stdin_head).
"""

from __future__ import annotations

import re

from ..errors import UsageError
from .compression import codec_of_bytes, decompressed_head, look_at_stdin, stdin_head

# The text looked at: enough for the comment lines that open a file and a few data lines.
SNIFF_BYTES = 64 << 10
DATA_LINES = 16
_NUMBER = re.compile(rb"^[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf|infinity|nan)$", re.IGNORECASE)
_INDEX = re.compile(rb"^\d+$")
_FEATURE = re.compile(rb"^(qid:[+-]?\d+|[+-]?\d+:\S+)$")


def stdin_format(magic: tuple, formats: tuple) -> str:
    """The format of stdin: sptool's Arrow stream (also when stdin is empty or a terminal, whose
    reader says so), a binary format by its ``magic`` ((bytes, format) pairs: its reader then says
    it needs a named file), else its text."""
    first = look_at_stdin(max(len(m) for m, _ in magic))
    if not first or b"\xff\xff\xff\xff".startswith(first[:4]):  # an Arrow stream's continuation marker
        return "sptool"
    for prefix, fmt in magic:
        if first.startswith(prefix):
            return fmt
    head, complete = stdin_head(SNIFF_BYTES)
    fmt = text_format(head, complete)
    if fmt is None:
        raise UsageError(f"cannot tell the format of stdin from its content; give --from ({', '.join(formats)})",
                         path="<stdin>")
    return fmt


def text_format(head: bytes, complete: bool) -> str | None:
    """The text format the first bytes of an input show (decompressed first when compressed), or
    None; ``complete`` says ``head`` is the whole input, so its last line is whole."""
    codec = codec_of_bytes(head)
    if codec is not None:
        head, complete = decompressed_head(head, codec, SNIFF_BYTES), False
    head = head.removeprefix(b"\xef\xbb\xbf")
    if b"\x00" in head:
        return None
    lines = head.split(b"\n")
    if not complete and len(lines) > 1:
        lines = lines[:-1]  # cut short: the last line may be a part of one
    lines = [line.strip() for line in lines if line.strip()]
    if not lines:
        return None
    if lines[0][:2] == b"%%" and lines[0][2:].lower().startswith(b"matrixmarket"):
        return "mtx"  # its reader checks the spelling of the banner
    if lines[0].startswith(b"{"):
        return "jsonl"
    data = [d for d in (line.split(b"#", 1)[0].strip() for line in lines) if d][:DATA_LINES]
    if data and all(map(_svmlight_like, data)) and any(b":" in d for d in data):
        return "svmlight"
    for fmt, delim in (("csv", b","), ("tsv", b"\t")):
        if _delimited(lines[:DATA_LINES], delim, header_needed=fmt == "tsv"):
            return fmt
    tabs = any(b"\t" in d for d in data)  # TSV's delimiter: headerless, it could be either
    return "tns" if data and not tabs and _tns_like(data) else None


def _svmlight_like(line: bytes) -> bool:
    """``label[,label...] [qid:Q] id:value ...``: features after a first word (the label, or already
    a feature when a multilabel line has no label); the reader judges the label itself."""
    words = line.split()
    return all(_FEATURE.match(w) for w in words[1:]) and (b":" not in words[0] or bool(_FEATURE.match(words[0])))


def _delimited(lines: list[bytes], delim: bytes, header_needed: bool) -> bool:
    """Lines of one number of ``delim``-separated fields, numbers under an optional header (whose
    words the reader checks)."""
    rows = [[f.strip().strip(b'"') for f in line.split(delim)] for line in lines]
    if len(rows[0]) < 2 or any(len(r) != len(rows[0]) for r in rows):
        return False
    header = not all(_NUMBER.match(f) for f in rows[0])
    return (header or not header_needed) and all(_NUMBER.match(f) for r in rows[header:] for f in r)


def _tns_like(data: list[bytes]) -> bool:
    """Integer indices then a value, the same number of fields on every line; or MLIR's and TACO's
    extended header (``rank nnz``, then ``rank`` extents) before such lines."""
    rows = [line.split() for line in data]
    if len(rows) > 2 and len(rows[0]) == 2 and all(map(_INDEX.match, rows[0] + rows[1])) and \
            len(rows[1]) == int(rows[0][0]):
        rows = rows[2:]
    width = len(rows[0])
    return width >= 2 and all(len(r) == width and all(map(_INDEX.match, r[:-1])) and _NUMBER.match(r[-1])
                              for r in rows)

