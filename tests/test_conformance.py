"""The conformance corpus (formats/SPEC.md §12): no drift from its generator, and validate agrees with it."""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pyarrow.parquet as pq
import pytest

import sptool
from sptool.report import CODES, INFO

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = os.path.join(ROOT, "formats")
CORPUS = os.path.join(FORMATS, "conformance")
TENSOR_NAMES = ("data.parquet", "data", "data.arrows")

# Cases where sptool's validate disagrees with the SPEC.  Each entry: the reason and the proposed fix.
# Remove an entry when the fix lands (the xfail is strict, so a fixed bug fails the suite until then).
KNOWN_BUGS: dict[str, str] = {
}


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_conformance", os.path.join(FORMATS, "make_conformance.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _case_names() -> list[str]:
    return sorted(n for n in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, n)))


def _target(case_dir: str) -> str:
    for name in TENSOR_NAMES:
        path = os.path.join(case_dir, name)
        if os.path.exists(path):
            return path
    raise AssertionError(f"{case_dir} holds no tensor ({', '.join(TENSOR_NAMES)})")


def _expected(name: str) -> dict:
    with open(os.path.join(CORPUS, name, "expected.json")) as f:
        return json.load(f)


def _params(names):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[n])) if n in KNOWN_BUGS
            else n for n in names]


def _failed(report) -> tuple[list[str], list[str]]:
    codes = sorted({p.code for p in report.problems if p.severity != INFO})
    info = sorted({p.code for p in report.problems if p.severity == INFO})
    return codes, info


# ---------------------------------------------------------------------------------------------
# drift: the committed corpus is what the generator writes

def _normalize(value):
    """Python values from Arrow, with floats spelled exactly (NaN == NaN, -0.0 != 0.0)."""
    if isinstance(value, float):
        return ("float", value.hex() if math.isfinite(value) else repr(value))
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def _parquet_summary(path: str):
    """What a Parquet file means, independent of how a pyarrow version lays out its bytes; None if unreadable."""
    try:
        pf = pq.ParquetFile(path)
        md = pf.metadata
        schema = pf.schema_arrow
    except Exception:
        return None
    row_groups = []
    for r in range(md.num_row_groups):
        rg = md.row_group(r)
        columns = []
        for c in range(rg.num_columns):
            col = rg.column(c)
            st = col.statistics
            stats = None
            if st is not None and st.has_min_max:
                stats = _normalize([st.min, st.max])
            columns.append((col.path_in_schema, stats))
        sorting = [(s.column_index, s.descending) for s in (rg.sorting_columns or ())]
        row_groups.append((rg.num_rows, sorting, columns))
    try:
        contents = _normalize(pf.read().to_pylist())
    except Exception as e:  # a deliberately undecodable file
        contents = ("unreadable", type(e).__name__)
    kv = {k: v for k, v in (md.metadata or {}).items() if k != b"ARROW:schema"}
    return {"kv": kv, "schema": schema.to_string(show_schema_metadata=True), "num_rows": md.num_rows,
            "row_groups": row_groups, "contents": contents}


def _files(root: str) -> list[str]:
    out = []
    for dirpath, _, filenames in os.walk(root):
        out += [os.path.relpath(os.path.join(dirpath, f), root) for f in filenames]
    return sorted(out)


def _compare_file(a: str, b: str, label: str):
    with open(a, "rb") as f:
        data_a = f.read()
    with open(b, "rb") as f:
        data_b = f.read()
    if data_a == data_b:
        return
    if data_a[:4] == b"PAR1" and data_b[:4] == b"PAR1" and not label.endswith(".arrows"):
        sa, sb = _parquet_summary(a), _parquet_summary(b)
        if sa is not None or sb is not None:
            assert sa == sb, f"{label}: the Parquet content drifted from the generator"
            return
    raise AssertionError(f"{label}: the bytes drifted from the generator")


def test_corpus_matches_generator(tmp_path):
    gen = _load_generator()
    out = str(tmp_path / "conformance")
    names = gen.generate(out)
    assert names == _case_names(), "case list drifted: run python formats/make_conformance.py"
    for name in names:
        committed, fresh = os.path.join(CORPUS, name), os.path.join(out, name)
        with open(os.path.join(committed, "expected.json")) as f1, open(os.path.join(fresh, "expected.json")) as f2:
            assert f1.read() == f2.read(), f"{name}/expected.json drifted: run python formats/make_conformance.py"
        files = _files(committed)
        assert files == _files(fresh), f"{name}: file list drifted"
        for rel in files:
            _compare_file(os.path.join(committed, rel), os.path.join(fresh, rel), f"{name}/{rel}")


def test_corpus_covers_every_code():
    seen = set()
    for name in _case_names():
        exp = _expected(name)
        seen |= set(exp["codes"]) | set(exp.get("deep_codes", ())) | set(exp.get("info", ())) | set(
            exp.get("strict_codes", ()))
    missing = sorted(c for c in CODES if c not in seen)
    assert not missing, f"no conformance case reports {missing}"
    assert seen <= set(CODES), sorted(seen - set(CODES))


def test_expected_files_are_well_formed():
    for name in _case_names():
        exp = _expected(name)
        assert set(exp) <= {"valid", "codes", "description", "info", "deep_codes", "strict_codes"}, name
        assert exp["codes"] == sorted(set(exp["codes"])), name
        errors = [c for c in exp["codes"] if CODES[c][0] in ("fatal", "error")]
        assert exp["valid"] == (not errors), name
        assert all(CODES[c][0] != INFO for c in exp["codes"]), name
        assert all(CODES[c][0] == INFO for c in exp.get("info", ())), name
        assert name.startswith("valid_") <= exp["valid"], name


# ---------------------------------------------------------------------------------------------
# validate agrees with the corpus

@pytest.mark.parametrize("name", _params(_case_names()))
def test_validate_full(name):
    exp = _expected(name)
    report = sptool.validate(_target(os.path.join(CORPUS, name)))
    codes, info = _failed(report)
    assert (report.valid, codes) == (exp["valid"], exp["codes"]), [p.message for p in report.problems]
    assert info == exp.get("info", [])
    assert report.as_dict()["valid"] == exp["valid"]


_DEEP = [n for n in _case_names() if "deep_codes" in _expected(n)]


@pytest.mark.parametrize("name", _params(_DEEP))
def test_validate_deep(name):
    exp = _expected(name)
    report = sptool.validate(_target(os.path.join(CORPUS, name)), deep=True)
    codes, _ = _failed(report)
    want_valid = not any(CODES[c][0] in ("fatal", "error") for c in exp["deep_codes"])
    assert (report.valid, codes) == (want_valid, exp["deep_codes"]), [p.message for p in report.problems]


_STRICT = [n for n in _case_names() if "strict_codes" in _expected(n)]


@pytest.mark.parametrize("name", _params(_STRICT))
def test_validate_strict(name):
    """Strict mode adds its own checks (page checksums, a stream digest) to the full mode's."""
    exp = _expected(name)
    report = sptool.validate(_target(os.path.join(CORPUS, name)), strict=True)
    codes, _ = _failed(report)
    assert codes == sorted(set(exp["codes"]) | set(exp["strict_codes"])), [p.message for p in report.problems]
    assert report.ok(strict=True) == (exp["valid"] and not exp["strict_codes"])


_VALID = [n for n in _case_names() if _expected(n)["valid"]]


@pytest.mark.parametrize("name", _params(_VALID))
def test_validate_metadata_only_on_valid_cases(name):
    """--metadata-only reads no row data: it finds a subset of the full mode's codes, and no error."""
    exp = _expected(name)
    report = sptool.validate(_target(os.path.join(CORPUS, name)), metadata_only=True)
    codes, _ = _failed(report)
    assert report.valid, [p.message for p in report.problems]
    assert set(codes) <= set(exp["codes"])
    assert report.mode == "metadata-only"


def test_known_bugs_name_real_cases():
    assert set(KNOWN_BUGS) <= set(_case_names())
