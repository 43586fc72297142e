"""Plain-Python reference for the svmlight parser in sptool/_textparse.pyx (``parse_svmlight``):
the test oracle for the compiled kernel, written line by line as scikit-learn's loader reads a
file (``bytes.split``, ``float``, ``int``), never used at run time.

``parse_svmlight(data, multilabel)`` returns a dict of what the kernel fills in: ``rows``,
``cols``, ``vals`` (entries in file order), ``labels`` (one per row, or a sorted list per row
with ``multilabel``), ``qids`` (None where a row has none), ``lines``, ``min_id``, ``max_id``,
``first_unsorted`` (0-based line, or -1), and on failure ``error`` = (code name, 0-based line).
"""

from __future__ import annotations

import re

_INTEGER = re.compile(rb"[+-]?[0-9]+")

def _number(word: bytes) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


def _integer(word: bytes) -> int | None:
    if not _INTEGER.fullmatch(word):
        return None
    return int(word)


def parse_svmlight(data: bytes, multilabel: bool) -> dict:
    out = {"rows": [], "cols": [], "vals": [], "labels": [], "qids": [], "lines": 0,
           "min_id": None, "max_id": None, "first_unsorted": -1, "error": None}
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for no, line in enumerate(lines):
        out["lines"] = no + 1
        words = line.split(b"#", 1)[0].split()
        if not words:
            continue
        row = len(out["labels"])
        if multilabel:
            if b":" in words[0]:
                label = []
            else:
                label = [_number(w) for w in words[0].split(b",")]
                if any(v is None for v in label):
                    out["error"] = ("SV_LABEL", no)
                    return out
                label.sort()
                words = words[1:]
        else:
            label = _number(words[0])
            if label is None:
                out["error"] = ("SV_LABEL", no)
                return out
            words = words[1:]
        qid = None
        if words and words[0].startswith(b"qid:"):
            qid = _integer(words[0][4:])
            if qid is None:
                out["error"] = ("SV_QID", no)
                return out
            words = words[1:]
        prev = -1
        for w in words:
            if b":" not in w:
                out["error"] = ("SV_COLON", no)
                return out
            id_text, value_text = w.split(b":", 1)
            idv = _integer(id_text)
            if idv is None:
                out["error"] = ("SV_ID", no)
                return out
            if idv < 0:
                out["error"] = ("SV_NEGATIVE", no)
                return out
            value = _number(value_text)
            if value is None:
                out["error"] = ("SV_VALUE", no)
                return out
            if idv <= prev and out["first_unsorted"] < 0:
                out["first_unsorted"] = no
            prev = idv
            out["rows"].append(row)
            out["cols"].append(idv)
            out["vals"].append(value)
            out["min_id"] = idv if out["min_id"] is None else min(out["min_id"], idv)
            out["max_id"] = idv if out["max_id"] is None else max(out["max_id"], idv)
        out["labels"].append(label)
        out["qids"].append(qid)
    return out
