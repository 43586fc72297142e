"""formats/SPEC.md and formats/metadata.schema.json agree with the implementation."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sptool
from sptool.format import TensorMeta, check_metadata, parse_metadata
from sptool.report import CODES

jsonschema = pytest.importorskip("jsonschema")

FORMATS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "formats")
SEVERITY = {"F": "fatal", "E": "error", "W": "warning", "I": "info"}
BIG = 2**53 + 1


# ---------------------------------------------------------------------------------------------
# (a) the code tables

def spec_codes() -> dict[str, str]:
    """code -> severity from the tables of SPEC §10.5."""
    with open(os.path.join(FORMATS, "SPEC.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("### 10.5 Codes"):text.index("## 11.")]
    rows = re.findall(r"^\|\s*`([A-Z][A-Z0-9_]+)`\s*\|\s*([FEWI])\s*\|", section, flags=re.M)
    codes: dict[str, str] = {}
    for code, sev in rows:
        assert code not in codes, f"{code} appears twice in SPEC §10.5"
        codes[code] = SEVERITY[sev]
    return codes


def test_spec_code_tables_match_report_codes():
    codes = spec_codes()
    assert len(codes) > 40
    assert set(codes) == set(CODES), (sorted(set(codes) - set(CODES)), sorted(set(CODES) - set(codes)))
    wrong = {c: (codes[c], CODES[c][0]) for c in codes if codes[c] != CODES[c][0]}
    assert not wrong, f"severity differs (spec, report.py): {wrong}"


def test_code_prefix_matches_severity():
    for code, (sev, _title) in CODES.items():
        assert code[0] == {"fatal": "E", "error": "E", "warning": "W", "info": "I"}[sev], code


# ---------------------------------------------------------------------------------------------
# (b) the JSON schema

@pytest.fixture(scope="module")
def validator():
    with open(os.path.join(FORMATS, "metadata.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    cls = jsonschema.Draft202012Validator
    cls.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    return cls(schema)


def _sample_tensors():
    rng = np.random.default_rng(7)
    idx = np.array([[0, 1], [1, 3], [2, 0], [3, 4]])
    yield "canonical", sptool.SparseTensor(idx, rng.standard_normal(4), (4, 5),
                                           dimension_names=["row", None], attributes={"k": [1, 2]})
    yield "unsorted_dup", sptool.SparseTensor(np.array([[2, 1, 0], [0, 0, 1], [2, 1, 0]]),
                                              np.array([1, 2, 3], np.int32), (3, 2, 2))
    yield "hybrid", sptool.SparseTensor(np.array([[0], [2], [2]]), np.ones((3, 2, 3), np.float32), (4, 2, 3))
    yield "string", sptool.SparseTensor(idx, np.array(["a", "b", "", "d"], dtype=object), (4, 5),
                                        value_type="string")
    yield "binary", sptool.SparseTensor(idx, np.array([b"a", b"", b"\x00", b"z"], dtype=object), (4, 5),
                                        value_type="binary", fill_value=b"\x01\x02")
    yield "complex", sptool.SparseTensor(idx, np.arange(4) * (1 + 1j), (4, 5), fill_value=complex(1, float("nan")))
    yield "bool_iso", sptool.SparseTensor(idx, np.ones(4, bool), (4, 5), iso=True)
    yield "nan_fill", sptool.SparseTensor(idx, np.arange(4.0), (4, 5), fill_value=float("nan"))
    yield "negzero_fill", sptool.SparseTensor(idx, np.arange(4, dtype=np.float32), (4, 5), fill_value=-0.0)
    yield "uint64", sptool.SparseTensor(idx, np.array([0, 1, 2, 2**64 - 1], np.uint64), (4, 5),
                                        fill_value=2**64 - 1)
    yield "empty", sptool.SparseTensor(np.empty((0, 2), np.int64), np.empty(0), (4, 5))
    yield "big_shape", sptool.SparseTensor(np.array([[BIG - 1, 0]]), np.ones(1), (BIG, 3))


@pytest.mark.parametrize("layout", ["file", "dir", "stream"])
def test_writer_metadata_validates_against_schema(tmp_path, validator, layout):
    for name, t in _sample_tensors():
        if layout == "file":
            path = str(tmp_path / f"{name}.parquet")
            sptool.write(t, path)
            raws = [pq.read_metadata(path).metadata[b"sptool"]]
        elif layout == "dir":
            path = str(tmp_path / name) + "/"
            sptool.write(t, path)
            raws = [pq.read_metadata(os.path.join(path, p)).metadata[b"sptool"] for p in sorted(os.listdir(path))]
        else:
            path = str(tmp_path / f"{name}.arrows")
            sptool.write(t, path)
            with pa.ipc.open_stream(path) as reader:
                raws = [reader.schema.metadata[b"sptool"]]
        assert raws
        for raw in raws:
            obj = json.loads(raw)
            errors = [e.message for e in validator.iter_errors(obj)]
            assert not errors, (name, layout, obj, errors)
            _, problems = check_metadata(raw, stream=layout == "stream")
            assert not [p for p in problems if p.severity != "info"], (name, layout, problems)


GOOD = TensorMeta(shape=(4, 5), sparse_ndim=2, value_type="float64", nnz=4, sort_order=(0, 1),
                  unique=True).to_dict()


def _without(d, key):
    return {k: v for k, v in d.items() if k != key}


@pytest.mark.parametrize("bad", [
    pytest.param(_without(GOOD, "nnz"), id="missing_key"),
    pytest.param({**GOOD, "version": "1.0"}, id="version_1.0"),
    pytest.param({**GOOD, "version": "2.0.0"}, id="version_major_2"),
    pytest.param({**GOOD, "value_type": "float128"}, id="bad_value_type"),
    pytest.param({**GOOD, "structure": "symmetric"}, id="structure_key"),
    pytest.param({**GOOD, "format": "sptool.csr"}, id="format"),
    pytest.param({**GOOD, "shape": [4, -1]}, id="negative_extent"),
    pytest.param({**GOOD, "fill_value": "nan"}, id="fill_nan_lowercase"),
    pytest.param({**GOOD, "sort_order": [0, 0]}, id="sort_order_repeated"),
    pytest.param({**GOOD, "iso": 1}, id="iso_not_bool"),
])
def test_schema_rejects_invalid_metadata(validator, bad):
    assert not validator.is_valid(bad)
    _, problems = check_metadata(json.dumps(bad))
    assert any(p.severity in ("fatal", "error") for p in problems)


def test_schema_accepts_the_spec_examples(validator):
    with open(os.path.join(FORMATS, "SPEC.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    examples = [json.loads(b) for b in blocks]
    full = [e for e in examples if isinstance(e, dict) and "format" in e]
    assert len(full) >= 3
    for e in full:
        assert validator.is_valid(e), [x.message for x in validator.iter_errors(e)]
        _, problems = check_metadata(json.dumps(e), stream="stream" in e)
        assert not [p for p in problems if p.severity != "info"], (e, problems)


# ---------------------------------------------------------------------------------------------
# (c) check_metadata and the schema agree where both apply

# Values per value_type: (valid fill encodings, invalid ones).  Left out on purpose, because JSON Schema
# cannot express them: integers written with a fraction (1.0), floats that overflow the type.
FILLS = {
    "bool": ([True, False], [0, "true", None]),
    "int8": ([0, -128, 127], [128, -129, "0", True]),
    "int16": ([0, -(2**15)], [2**15]),
    "int32": ([7, 2**31 - 1], [2**31, "7"]),
    "int64": ([-(2**63), 2**63 - 1], [2**63, None]),
    "uint8": ([0, 255], [-1, 256]),
    "uint16": ([65535], [65536]),
    "uint32": ([0, 2**32 - 1], [2**32]),
    "uint64": ([0, 2**64 - 1], [-1, 2**64]),
    "float16": ([0, 1.5, "NaN", "Infinity", "-Infinity", "0x3c00", "0x7E00"], ["nan", "0x3c0", "0x3c000", True]),
    "float32": ([0.0, -1.25, "0x80000000", "NaN"], ["0x8000", "1.0", [0.0], None, "inf"]),
    "float64": ([0.0, 1e300, -5, "0x7FF8000000000001", "-Infinity"], ["0x7ff8", "+Infinity", "NaN ", {}]),
    "complex64": ([[0.0, 0.0], [1, "NaN"], ["0x3f800000", -2.5]], [[0.0], [0, 0, 0], 0.0, ["nan", 0]]),
    "complex128": ([[0.0, -0.0], ["Infinity", "0x8000000000000000"]], [[0, "0x3c00"], "0j", [None, 0]]),
    "string": (["", "abc", "\u00e9"], [1, None, ["a"]]),
    "binary": (["", "AQI=", "AAAA"], ["AQI", "A===", "!!!!", 5]),
}
VERSIONS = (["1.0.0", "1.0.5", "1.2.0", "1.0.0-rc.1", "1.0.0+build.7", "1.0.0-alpha-1"],
            ["1.0", "2.0.0", "0.9.0", "v1.0.0", "1.0.0-", "01.0.0", 1, None])


KEYS = ["format", "version", "shape", "sparse_ndim", "value_type", "fill_value", "nnz", "sort_order", "unique",
        "iso", "dimension_names", "created_by", "attributes", "structure"]


@st.composite
def metadata_dicts(draw):
    """Metadata objects whose cross-key rules hold (those the schema cannot express), with at most one or
    two keys given a bad value, so that each bad value is judged on its own."""
    bad_keys = {draw(st.sampled_from([None] * len(KEYS) + KEYS)), draw(st.sampled_from([None] * 40 + KEYS))}

    def pick(key, good, bad):
        return draw(st.sampled_from(bad if key in bad_keys and bad else good))

    d: dict = {}
    d["format"] = pick("format", ["sptool.coo"], ["sptool", 1, None])
    d["version"] = pick("version", *VERSIONS)
    ndim = draw(st.integers(1, 4))
    shape = [draw(st.sampled_from([0, 1, 3, 10])) for _ in range(ndim)]
    if draw(st.booleans()):
        shape[draw(st.integers(0, ndim - 1))] = BIG
    if "shape" in bad_keys:
        shape = draw(st.sampled_from(["4x5", [], [-1] + shape[1:], shape[:-1] + [2**63], ["3"] + shape[1:],
                                      {"0": 3}]))
    d["shape"] = shape
    K = draw(st.integers(1, ndim))
    d["sparse_ndim"] = pick("sparse_ndim", [K], [0, -1, "1", True, 1.5])
    d["value_type"] = vt = pick("value_type", list(FILLS), ["float128", "decimal", 5, None])
    good, bad = FILLS.get(vt, ([0], [None]))
    d["fill_value"] = pick("fill_value", good, bad)
    d["nnz"] = pick("nnz", [0, 4, 2**60], [-1, "3", True, 1.5])
    order = draw(st.permutations(list(range(K))))[: draw(st.integers(0, K))]
    d["sort_order"] = pick("sort_order", [list(order)], [[0, 0], [-1], ["0"], [True], "0", None])
    unique = True if vt in ("string", "binary") else draw(st.booleans())
    d["unique"] = pick("unique", [unique], ["true", 1, None])
    d["canonical"] = (d["sort_order"] == list(range(K)) and d["unique"] is True)
    if "iso" in bad_keys or draw(st.booleans()):
        d["iso"] = pick("iso", [True, False], [1, "true", None])
    if "dimension_names" in bad_keys or draw(st.booleans()):
        names = [draw(st.sampled_from(["a", "row", None])) for _ in range(ndim)]
        d["dimension_names"] = pick("dimension_names", [names], ["ab", [1] * ndim, [{}] * ndim])
    if "created_by" in bad_keys or draw(st.booleans()):
        d["created_by"] = pick("created_by", ["x 1.0"], [5, None])
    if "attributes" in bad_keys or draw(st.booleans()):
        d["attributes"] = pick("attributes", [{}, {"a": [1]}], [[], "x"])
    if draw(st.integers(0, 5)) == 0:
        d["stream"] = draw(st.sampled_from([{}, {"trailer": True}, {"trailer": False}]))
    if "structure" in bad_keys:
        d["structure"] = draw(st.sampled_from(["symmetric", None, {}]))
    if draw(st.integers(0, 9)) == 0:
        d["colour"] = "blue"  # unknown keys are allowed by both (a warning only)
    return d


def _check_ok(d) -> bool:
    _, problems = check_metadata(json.dumps(d))
    return not any(p.severity in ("fatal", "error") for p in problems)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metadata_dicts())
def test_check_metadata_agrees_with_schema(validator, d):
    schema_ok = validator.is_valid(d)
    assert _check_ok(d) == schema_ok, (d, [e.message for e in validator.iter_errors(d)],
                                       check_metadata(json.dumps(d))[1])


def _single_mutations():
    """Every bad (and good) value of the pools above, each applied alone to valid metadata."""
    for vt, (good, bad) in FILLS.items():
        base = {**GOOD, "value_type": vt, "fill_value": good[0]}
        for fill in good + bad:
            yield f"fill-{vt}-{fill!r}", {**base, "fill_value": fill}
    for version in VERSIONS[0] + VERSIONS[1]:
        yield f"version-{version!r}", {**GOOD, "version": version}
    others = {
        "format": ["sptool", 1, None], "shape": ["4x5", [], [-1, 5], [4, 2**63], ["3", 5], [4.5, 5]],
        "sparse_ndim": [0, -1, "1", True, 1.5], "value_type": ["float128", 5, None], "nnz": [-1, "3", True, 1.5],
        "sort_order": [[0, 0], [-1], ["0"], [True], "0", None], "unique": ["true", 1, None],
        "canonical": ["true", 0], "iso": [1, "true", None, True, False], "dimension_names": ["ab", [1, 2], ["a", None]],
        "created_by": [5, None, "x"], "attributes": [[], "x", {}], "structure": ["symmetric", None],
        "stream": [{}, {"trailer": True}],
    }
    for key, values in others.items():
        for value in values:
            yield f"{key}-{value!r}", {**GOOD, key: value}


@pytest.mark.parametrize("d", [pytest.param(d, id=i) for i, d in _single_mutations()])
def test_check_metadata_agrees_with_schema_per_value(validator, d):
    assert _check_ok(d) == validator.is_valid(d), (d, [e.message for e in validator.iter_errors(d)],
                                                   check_metadata(json.dumps(d))[1])


# Cases where check_metadata and the schema once disagreed (found by the property above); both must
# now reject each.
_REJECTED = {
    "version_empty_prerelease_identifier": (
        {**GOOD, "version": "1.0.0-rc..1"},
        "format.py _VERSION_RE accepts empty pre-release identifiers; use the SemVer 2.0.0 regex"),
    "stream_not_object": (
        {**GOOD, "stream": True},
        "check_metadata does not type-check 'stream' (SPEC §4.3: E_KEY_TYPE)"),
    "stream_trailer_not_bool": (
        {**GOOD, "stream": {"trailer": "yes"}},
        "check_metadata does not type-check stream.trailer"),
    "fill_hex_with_space": (
        {**GOOD, "fill_value": "0x7ff80000 00000000"},
        "bytes.fromhex skips whitespace; require exactly 4/8/16 hex digits"),
    "dimension_names_null": (
        {**GOOD, "dimension_names": None},
        "dimension_names: null is accepted as 'absent'; SPEC §4.3 types it as an array (E_DIMENSION_NAMES)"),
}


@pytest.mark.parametrize("key", sorted(_REJECTED))
def test_once_disagreed_now_rejected_by_both(validator, key):
    d, _ = _REJECTED[key]
    assert not validator.is_valid(d)
    assert not _check_ok(d)
    assert _check_ok(d) == validator.is_valid(d)


# ---------------------------------------------------------------------------------------------
# (d) integers above 2^53 stay exact

@pytest.mark.parametrize("shape,index", [
    ((BIG, 3), [BIG - 1, 2]),
    ((2**63 - 1,), [2**63 - 2]),
    ((3, 2**60 + 7), [2, 2**60 + 6]),
])
def test_big_shape_round_trip(tmp_path, shape, index):
    t = sptool.SparseTensor(np.array([[0] * len(shape), index], dtype=np.int64), np.array([1.0, 2.0]), shape)
    path = str(tmp_path / "big.parquet")
    sptool.write(t, path)
    raw = pq.read_metadata(path).metadata[b"sptool"].decode()
    assert all(str(s) in raw for s in shape)
    back = sptool.read(path)
    assert back.shape == shape and all(type(s) is int for s in back.shape)
    assert back.indices.tolist() == [[0] * len(shape), index]
    assert sptool.validate(path).valid
    # The stream container carries the same integers.
    spath = str(tmp_path / "big.arrows")
    sptool.write(t, spath)
    assert sptool.read(spath).shape == shape


def test_big_nnz_exact_in_metadata(tmp_path):
    nnz = 2**60 + 3
    meta = TensorMeta(shape=(2**61, 2), sparse_ndim=1, value_type="float64", nnz=nnz, sort_order=(0,),
                      unique=True)
    text = meta.to_json()
    assert f'"nnz":{nnz}' in text
    assert parse_metadata(text).nnz == nnz
    assert parse_metadata(text).shape == (2**61, 2)
    # A file that claims that many rows: the mismatch is reported with the exact number.
    table = pa.table({"indices_0": pa.array([0, 1], pa.int64()),
                      "values": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64(), 2))})
    path = str(tmp_path / "claims.parquet")
    writer = pq.ParquetWriter(path, table.schema)
    writer.write_table(table)
    writer.add_key_value_metadata({"sptool": text})
    writer.close()
    report = sptool.validate(path)
    mismatch = [p for p in report.problems if p.code == "E_NNZ_MISMATCH"]
    assert mismatch and str(nnz) in mismatch[0].message
