"""The v1 on-disk format (formats/SPEC.md): value types, metadata, Arrow schema.

This module is the only place that knows how the `sptool` JSON and the column layout are
spelled.  It reads and checks metadata but does no I/O.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from ._version import FORMAT_VERSION
from .errors import FormatError, UsageError
from .report import Problem

FORMAT_ID = "sptool.coo"
METADATA_KEY = "sptool"
TRAILER_KEY = "sptool.trailer"
# A footer entry beside METADATA_KEY: its value "crc32" records that every page header carries a
# CRC-32 of the page (Parquet's PageHeader.crc), so that a reader can verify them (SPEC §6).
CHECKSUMS_KEY = "sptool.page_checksums"
# The trailer's optional whole-content digest of a stream (SPEC §8): CRC-32C of the bytes before it.
DIGEST_KEY = "crc32c"
INT64_MAX = 2**63 - 1
# What a writer declares (SPEC §9: the lowest version whose features it uses): 1.1.0 only for a
# tensor whose extents multiply past INT64_MAX, which 1.0 refuses (E_SHAPE_OVERFLOW).
NARROW_VERSION, WIDE_VERSION = "1.0.0", "1.1.0"

REQUIRED_KEYS = (
    "format", "version", "shape", "sparse_ndim", "value_type", "fill_value",
    "nnz", "sort_order", "unique", "canonical",
)
OPTIONAL_KEYS = ("iso", "dimension_names", "created_by", "attributes", "stream")

_COMPLEX_PARTS = {"complex64": pa.float32(), "complex128": pa.float64()}
VALUE_TYPES: dict[str, np.dtype] = {
    "bool": np.dtype(bool),
    "int8": np.dtype(np.int8), "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32), "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8), "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex64), "complex128": np.dtype(np.complex128),
    "string": np.dtype(object), "binary": np.dtype(object),
}
VARIABLE_WIDTH = ("string", "binary")
_ARROW_NUMBERS = {pa.from_numpy_dtype(dt): name for name, dt in VALUE_TYPES.items() if dt.kind in "biuf"}
# SemVer 2.0.0: numeric identifiers without leading zeros, no empty identifiers.
_IDENT = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_VERSION_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    rf"(?:-{_IDENT}(?:\.{_IDENT})*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_HEX_FLOAT_RE = re.compile(r"0x(?:[0-9A-Fa-f]{4}|[0-9A-Fa-f]{8}|[0-9A-Fa-f]{16})")


def index_column(k: int) -> str:
    return f"indices_{k}"


def value_type_of_dtype(dtype) -> str:
    """The v1 value_type name for a NumPy dtype (object arrays must be told apart by the caller)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "U":
        return "string"
    if dtype.kind == "S":
        return "binary"
    for name, dt in VALUE_TYPES.items():
        if dt == dtype and name not in VARIABLE_WIDTH:
            return name
    raise FormatError(f"values of dtype {dtype} have no sptool value type")


def value_type_of_arrow(t: pa.DataType) -> str | None:
    """The value_type of an Arrow boolean, integer or floating type; None for any other.  Not by
    DataType.to_pandas_dtype, which needs pandas in the pyarrow releases before 26."""
    return _ARROW_NUMBERS.get(t)


def arrow_element_type(value_type: str) -> pa.DataType:
    if value_type in _COMPLEX_PARTS:
        part = _COMPLEX_PARTS[value_type]
        return pa.struct([pa.field("real", part, nullable=False), pa.field("imag", part, nullable=False)])
    if value_type == "string":
        return pa.string()
    if value_type == "binary":
        return pa.binary()
    return pa.from_numpy_dtype(VALUE_TYPES[value_type])


# ---------------------------------------------------------------------------------------------
# fill_value encoding (Zarr v3 conventions)

def _encode_float(x: float, dtype: np.dtype):
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0 and math.copysign(1.0, x) < 0:
        # JSON readers differ on "-0.0"; the bit pattern is exact everywhere.
        bits = {2: "<e", 4: "<f", 8: "<d"}[dtype.itemsize]
        return "0x" + struct.pack(">" + bits[1], x).hex()
    return x


def _decode_float(v, dtype: np.dtype) -> float:
    if isinstance(v, bool):
        raise ValueError("a boolean is not a float")
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{v} is not a finite JSON number (write \"Infinity\" or \"NaN\")")
        try:
            with np.errstate(over="ignore"):
                out = dtype.type(v)
        except OverflowError:
            raise ValueError(f"{str(v)[:24]}... overflows {dtype}") from None
        if not np.isfinite(out):
            raise ValueError(f"{str(v)[:24]} overflows {dtype}")
        return float(out)
    if v == "NaN":
        return math.nan
    if v == "Infinity":
        return math.inf
    if v == "-Infinity":
        return -math.inf
    if isinstance(v, str) and v.startswith("0x"):
        if not _HEX_FLOAT_RE.fullmatch(v):
            raise ValueError(f"hex fill value {v!r} must be 0x followed by 4, 8 or 16 hex digits")
        raw = bytes.fromhex(v[2:])
        if len(raw) != dtype.itemsize:
            raise ValueError(f"hex fill value {v} is not {dtype.itemsize} bytes")
        return float(np.frombuffer(raw, dtype=dtype.newbyteorder(">"))[0])
    raise ValueError(f"{v!r} is not a float encoding")


def encode_fill(value, value_type: str):
    dtype = VALUE_TYPES[value_type]
    if value_type == "bool":
        return bool(value)
    if value_type.startswith(("int", "uint")):
        return int(value)
    if value_type.startswith("float"):
        return _encode_float(value, dtype)
    if value_type.startswith("complex"):
        part = np.dtype(np.float32 if value_type == "complex64" else np.float64)
        c = complex(value)
        return [_encode_float(c.real, part), _encode_float(c.imag, part)]
    if value_type == "string":
        return str(value)
    return base64.b64encode(bytes(value)).decode("ascii")


def decode_fill(v, value_type: str):
    """The Python value of an encoded fill_value; ValueError when it is not a valid encoding."""
    dtype = VALUE_TYPES[value_type]
    if value_type == "bool":
        if not isinstance(v, bool):
            raise ValueError("must be true or false")
        return v
    if value_type.startswith(("int", "uint")):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("must be an integer")
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max:
            raise ValueError(f"{v} is out of range for {value_type}")
        return v
    if value_type.startswith("float"):
        return _decode_float(v, dtype)
    if value_type.startswith("complex"):
        part = np.dtype(np.float32 if value_type == "complex64" else np.float64)
        if not isinstance(v, list) or len(v) != 2:
            raise ValueError("must be [real, imag]")
        return complex(_decode_float(v[0], part), _decode_float(v[1], part))
    if value_type == "string":
        if not isinstance(v, str):
            raise ValueError("must be a string")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("is not valid Unicode (a lone surrogate)") from None
        return v
    if not isinstance(v, str):
        raise ValueError("must be a base64 string")
    return base64.b64decode(v, validate=True)


def default_fill(value_type: str):
    return {"bool": False, "string": "", "binary": b""}.get(
        value_type, 0j if value_type.startswith("complex") else 0
    )


# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TensorMeta:
    """Decoded `sptool` metadata of one tensor (file, part, dataset or stream)."""

    shape: tuple
    sparse_ndim: int
    value_type: str
    fill_value: object = None
    nnz: int | None = None
    sort_order: tuple = ()
    unique: bool = False
    iso: bool = False
    dimension_names: tuple | None = None
    attributes: dict | None = None
    created_by: str | None = None
    version: str = FORMAT_VERSION

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "sort_order", tuple(int(s) for s in self.sort_order))
        if self.fill_value is None:
            object.__setattr__(self, "fill_value", default_fill(self.value_type))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dense_shape(self) -> tuple:
        return self.shape[self.sparse_ndim:]

    @property
    def block_size(self) -> int:
        return math.prod(self.dense_shape)

    @property
    def hybrid(self) -> bool:
        return len(self.shape) > self.sparse_ndim

    @property
    def canonical(self) -> bool:
        return self.unique and self.sort_order == tuple(range(self.sparse_ndim))

    @property
    def dtype(self) -> np.dtype:
        return VALUE_TYPES[self.value_type]

    @property
    def row_major(self) -> bool:
        return self.sort_order == tuple(range(self.sparse_ndim))

    def with_(self, **changes) -> TensorMeta:
        return replace(self, **changes)

    def trusted(self) -> TensorMeta:
        """The claims a reader acts on: all but a claim of unique rows in no full sort order,
        which no one pass can check (rows of strings and binaries are unique by this spec, and
        fewer than two rows are unique whatever their order)."""
        if not self.unique or len(self.sort_order) == self.sparse_ndim or self.value_type in ("string", "binary") \
                or (self.nnz is not None and self.nnz <= 1):
            return self
        return replace(self, unique=False)

    # -- Arrow ------------------------------------------------------------------------------
    def values_type(self) -> pa.DataType:
        elem = arrow_element_type(self.value_type)
        if self.hybrid:
            return pa.list_(pa.field("item", elem, nullable=False), self.block_size)
        return elem

    def arrow_schema(self, metadata: dict | None = None) -> pa.Schema:
        fields = [pa.field(index_column(k), pa.int64(), nullable=False) for k in range(self.sparse_ndim)]
        fields.append(pa.field("values", self.values_type(), nullable=False))
        return pa.schema(fields, metadata=metadata)

    # -- JSON -------------------------------------------------------------------------------
    def to_dict(self, *, stream: bool = False) -> dict:
        d = {
            "format": FORMAT_ID,
            "version": version_for(self.shape),
            "shape": list(self.shape),
            "sparse_ndim": self.sparse_ndim,
            "value_type": self.value_type,
            "fill_value": encode_fill(self.fill_value, self.value_type),
            "nnz": self.nnz,
            "sort_order": list(self.sort_order),
            "unique": bool(self.unique),
            "canonical": self.canonical,
        }
        if self.iso:
            d["iso"] = True
        if self.dimension_names is not None:
            d["dimension_names"] = list(self.dimension_names)
        if self.attributes:
            d["attributes"] = self.attributes
        d["created_by"] = self.created_by or _created_by()
        if stream:
            d["stream"] = {"trailer": True}
        return d

    def to_json(self, *, stream: bool = False) -> str:
        return json.dumps(self.to_dict(stream=stream), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict) -> TensorMeta:
        vt = d["value_type"]
        names = d.get("dimension_names")
        return cls(
            shape=tuple(d["shape"]),
            sparse_ndim=d["sparse_ndim"],
            value_type=vt,
            fill_value=decode_fill(d["fill_value"], vt),
            nnz=d["nnz"],
            sort_order=tuple(d["sort_order"]),
            unique=d["unique"],
            iso=bool(d.get("iso", False)),
            dimension_names=tuple(names) if names is not None else None,
            attributes=d.get("attributes"),
            created_by=d.get("created_by"),
            version=d["version"],
        )


def _created_by() -> str:
    from ._version import __version__

    return f"sptool {__version__}"


def trailer_problem(t, ndim: int) -> str | None:
    """Why a decoded stream trailer is not {"nnz": N, "shape": [ndim integers]}, or None."""
    def count(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    if not isinstance(t, dict) or not count(t.get("nnz")):
        return 'the trailer must be an object with an integer "nnz"'
    shape = t.get("shape")
    if not isinstance(shape, list) or len(shape) != ndim or not all(count(s) for s in shape):
        return f'the trailer\'s "shape" must list {ndim} non-negative integers'
    if DIGEST_KEY in t and not (count(t[DIGEST_KEY]) and t[DIGEST_KEY] < 2**32):
        return f'the trailer\'s "{DIGEST_KEY}" must be an integer in [0, 2^32)'
    return None


def stats_problem(k: int, lo: int, hi: int, extent: int) -> str | None:
    """What exact min/max statistics ``lo``, ``hi`` of index column k prove wrong
    (E_STATS_OUT_OF_BOUNDS), or None: an index outside [0, extent), or a minimum above the
    maximum (a damaged footer: it proves nothing about the rows, and a reader pruning by
    statistics would skip them unseen)."""
    if lo > hi:
        where = "with the minimum above the maximum"
    elif lo < 0 or hi >= extent:
        where = f"outside [0, {extent})"
    else:
        return None
    return f"statistics of {index_column(k)} span [{lo}, {hi}], {where}"


def invariants_differ(a: TensorMeta, b: TensorMeta) -> str | None:
    """The first dataset-invariant key (spec §7) on which two parts disagree, or None.

    Fill values compare by their encoding (so -0.0 differs from 0.0 and NaN equals NaN);
    absent dimension_names equal a list of nulls; versions compare by major number."""
    for key in ("shape", "sparse_ndim", "value_type", "fill_value", "iso", "dimension_names", "version"):
        x, y = getattr(a, key), getattr(b, key)
        if key == "fill_value":
            x, y = encode_fill(x, a.value_type), encode_fill(y, b.value_type)
        elif key == "dimension_names":
            x, y = (tuple(v) if v is not None else (None,) * a.ndim for v in (x, y))
        elif key == "version":
            x, y = x.split(".")[0], y.split(".")[0]
        if x != y:
            return key
    return None


# ---------------------------------------------------------------------------------------------
# checking metadata (rules A of the spec)

def dataset_claims(metas: list, edges: list) -> tuple[tuple, bool]:
    """(sort_order, unique) that a directory holds as a whole (formats/SPEC.md section 7), from
    its parts' metadata and their (first, last) coordinates, in part order ((None, None) for an
    empty part): sorted when every part has the same non-empty sort_order and no seam goes
    down, unique when also every part is and every seam goes up."""
    order = shared_order(metas)
    bounds = [(first, last) for first, last in edges if first is not None]
    keys = [(tuple(a[d] for d in order), tuple(b[d] for d in order)) for (_, a), (b, _) in zip(bounds, bounds[1:])]
    return seamed_claims(metas, [(a > b) - (a < b) for a, b in keys])


def shared_order(metas: list) -> tuple:
    """The sort_order every part of a directory claims, or () when they do not all claim the same
    non-empty one (then the whole claims no order, whatever its seams)."""
    order = tuple(metas[0].sort_order)
    return () if any(tuple(m.sort_order) != order for m in metas) else order


def seamed_claims(metas: list, seams: list) -> tuple[tuple, bool]:
    """(sort_order, unique) of a directory whose parts share ``shared_order(metas)``, given how the
    last key of each non-empty part compares with the first key of the next (-1 below, 0 equal,
    1 above; in that order)."""
    if len(metas) == 1:
        return tuple(metas[0].sort_order), metas[0].unique
    order = shared_order(metas)
    if not order or any(s > 0 for s in seams):
        return (), False
    return order, all(m.unique for m in metas) and all(s < 0 for s in seams)


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def _no_duplicate_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


# Limits on the sptool JSON (metadata and stream trailers) that every reader applies before
# parsing: Python's parser recurses once per nesting level and dies with a RecursionError deep
# down, and the footer's key-value metadata is held in memory whole.  The v1 keys nest 3 deep;
# 64 leaves room for attributes.
MAX_JSON_DEPTH = 64
MAX_METADATA_BYTES = 16 << 20
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_nesting(data: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (brackets inside strings do not count),
    found without recursion; an unbalanced text gives its deepest point all the same."""
    brackets = np.frombuffer(_JSON_STRING.sub(b"", data), dtype=np.uint8)
    step = np.isin(brackets, (0x5B, 0x7B)).astype(np.int64) - np.isin(brackets, (0x5D, 0x7D))
    return int(np.cumsum(step).max(initial=0))


def load_json(raw, what: str = "metadata", *, strict: bool = True):
    """The one parser of sptool JSON (the `sptool` metadata, stream trailers): bytes or str in,
    the decoded value out; ValueError (naming ``what``) for text that is not JSON, longer than
    MAX_METADATA_BYTES or nested deeper than MAX_JSON_DEPTH.  ``strict`` also rejects NaN /
    Infinity literals and repeated keys (RFC 8259 JSON only)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(data) > MAX_METADATA_BYTES:
        raise ValueError(f"the {what} is {len(data)} bytes, over the {MAX_METADATA_BYTES} bytes sptool reads")
    depth = json_nesting(data)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"the {what} nests {depth} levels deep, over the {MAX_JSON_DEPTH} sptool reads")
    text = data.decode("utf-8")
    if not strict:
        return json.loads(text)
    return json.loads(text, parse_constant=_no_constants, object_pairs_hook=_no_duplicate_keys)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def version_for(shape) -> str:
    """The lowest format version a tensor of ``shape`` can be written under (SPEC §9): 1.1.0 once
    its extents multiply past 2^63-1 (or may, a stream's extent still unknown), else 1.0.0."""
    if any(s is None for s in shape) or math.prod(shape) > INT64_MAX:
        return WIDE_VERSION
    return NARROW_VERSION


def shape_overflow(shape, version: str) -> str | None:
    """Why ``shape`` breaks E_SHAPE_OVERFLOW under ``version``, or None: a 1.0.x tensor's extents
    (those known) multiply to at most 2^63-1; from 1.1.0 on the product is unbounded."""
    m = _VERSION_RE.match(version)
    if m and (int(m.group(1)), int(m.group(2))) > (1, 0):
        return None
    if math.prod(s for s in shape if s is not None) > INT64_MAX:
        return (f"shape {json.dumps(list(shape))} has more than 2^63-1 elements, which format version {version} "
                f"does not allow ({WIDE_VERSION} does)")
    return None


def check_metadata(raw, *, stream: bool = False) -> tuple[dict | None, list[Problem]]:
    """Check the raw `sptool` value (bytes or str) against the metadata rules.

    Returns the parsed object (None if it is not a JSON object) and the problems found; checking
    stops at the first fatal problem, as later rules depend on it.
    """
    problems: list[Problem] = []

    def fail(code: str, message: str):
        problems.append(Problem(code, message))

    try:
        obj = load_json(raw)
    except (UnicodeError, ValueError) as e:
        fail("E_METADATA_NOT_JSON", f"metadata is not valid JSON: {e}")
        return None, problems
    if not isinstance(obj, dict):
        fail("E_METADATA_NOT_OBJECT", f"metadata is a JSON {type(obj).__name__}, not an object")
        return None, problems
    # Each stage returns True when it found a problem that the stages after it depend on.
    for stage in (_check_required_keys, _check_key_types, _check_version, _check_shape, _check_value_type):
        if stage(obj, fail, stream):
            return obj, problems
    _check_key_relations(obj, fail)
    return obj, problems


def _check_required_keys(obj: dict, fail, stream: bool) -> bool:
    missing = [k for k in REQUIRED_KEYS if k not in obj]
    if missing:
        fail("E_MISSING_KEY", "missing required key" + ("s " if len(missing) > 1 else " ") + ", ".join(missing))
    return bool(missing)


def _check_key_types(obj: dict, fail, stream: bool) -> bool:
    type_errors = []
    for key in ("format", "version", "value_type"):
        if not isinstance(obj[key], str):
            type_errors.append(f"{key} must be a string")
    if not _is_int(obj["sparse_ndim"]):
        type_errors.append("sparse_ndim must be an integer")
    if not isinstance(obj["sort_order"], list) or not all(_is_int(s) for s in obj["sort_order"]):
        type_errors.append("sort_order must be a list of integers")
    for key in ("unique", "canonical"):
        if not isinstance(obj[key], bool):
            type_errors.append(f"{key} must be true or false")
    nnz = obj["nnz"]
    if not ((_is_int(nnz) and nnz >= 0) or (stream and nnz is None)):
        type_errors.append("nnz must be a non-negative integer")
    if "created_by" in obj and not isinstance(obj["created_by"], str):
        type_errors.append("created_by must be a string")
    if "attributes" in obj and not isinstance(obj["attributes"], dict):
        type_errors.append("attributes must be an object")
    if "stream" in obj and not (isinstance(obj["stream"], dict)
                                and isinstance(obj["stream"].get("trailer", False), bool)):
        type_errors.append('stream must be an object like {"trailer": true}')
    if type_errors:
        fail("E_KEY_TYPE", "; ".join(type_errors))
    return bool(type_errors)


def _check_version(obj: dict, fail, stream: bool) -> bool:
    """The format id and version this sptool reads, and the keys that version knows."""
    if obj["format"] != FORMAT_ID:
        fail("E_FORMAT_ID", f"format is {obj['format']!r}, expected {FORMAT_ID!r}")
        return True
    version = obj["version"]
    m = _VERSION_RE.match(version)
    if not m:
        fail("E_VERSION_SYNTAX", f"version {version!r} is not a SemVer string")
        return True
    major, minor = int(m.group(1)), int(m.group(2))
    ours = [int(x) for x in FORMAT_VERSION.split(".")[:2]]
    if major != ours[0]:
        fail("E_VERSION_UNSUPPORTED", f"format version {version} is not supported (this sptool reads {ours[0]}.x)")
        return True
    if minor > ours[1]:
        fail("W_VERSION_NEWER_MINOR",
             f"format version {version} is newer than {FORMAT_VERSION}; unknown keys are ignored")
    if "structure" in obj:
        fail("E_STRUCTURE_UNSUPPORTED", "the 'structure' key is not part of format 1.0; refusing rather than guessing")
        return True
    for k in obj:
        if k not in REQUIRED_KEYS and k not in OPTIONAL_KEYS:
            fail("W_UNKNOWN_KEY", f"unknown key {k!r} is ignored")
    return False


def _check_shape(obj: dict, fail, stream: bool) -> bool:
    """The shape (entries unknown only in a stream's sparse dimensions) and sparse_ndim."""
    shape = obj["shape"]
    if not isinstance(shape, list) or not shape or not all(
        (_is_int(s) and 0 <= s <= INT64_MAX) or (stream and s is None) for s in shape
    ):
        fail("E_SHAPE", f"shape {json.dumps(shape)} must be a non-empty list of integers in [0, 2^63-1]")
        return True
    overflow = shape_overflow(shape, obj["version"])
    if overflow:
        fail("E_SHAPE_OVERFLOW", overflow)
        return True
    K = obj["sparse_ndim"]
    if not 1 <= K <= len(shape):
        fail("E_SPARSE_NDIM", f"sparse_ndim {K} must be between 1 and len(shape) = {len(shape)}")
        return True
    if any(s is None for s in shape[K:]):
        fail("E_SHAPE", "dense (trailing) dimensions must be known in a stream header")
        return True
    if math.prod(shape[K:]) > INT64_MAX:
        fail("E_SHAPE_OVERFLOW", f"the dense dimensions {json.dumps(shape[K:])} hold more than 2^63-1 elements a row")
        return True
    return False


def _check_value_type(obj: dict, fail, stream: bool) -> bool:
    vt = obj["value_type"]
    if vt not in VALUE_TYPES:
        fail("E_VALUE_TYPE", f"value_type {vt!r} is not one of {', '.join(VALUE_TYPES)}")
        return True
    try:
        decode_fill(obj["fill_value"], vt)
    except (ValueError, TypeError) as e:
        fail("E_FILL_VALUE", f"fill_value {json.dumps(obj['fill_value'])} is not valid for {vt}: {e}")
    return False


def _check_key_relations(obj: dict, fail) -> None:
    """The rules between keys: sort_order within sparse_ndim, canonical as sort_order and unique
    imply, dimension_names one a dimension, variable-width values unique, iso a boolean."""
    shape, K, vt = obj["shape"], obj["sparse_ndim"], obj["value_type"]
    order = obj["sort_order"]
    if len(set(order)) != len(order) or not all(0 <= s < K for s in order):
        fail("E_SORT_ORDER", f"sort_order {order} must hold distinct dimensions in [0, {K})")
    elif obj["canonical"] != (order == list(range(K)) and obj["unique"]):
        fail(
            "E_CANONICAL_INCONSISTENT",
            f"canonical is {json.dumps(obj['canonical'])} but sort_order is {order} and unique is "
            f"{json.dumps(obj['unique'])}",
        )
    names = obj.get("dimension_names", [None] * len(shape))
    if (
        not isinstance(names, list) or len(names) != len(shape)
        or not all(n is None or isinstance(n, str) for n in names)
    ):
        fail("E_DIMENSION_NAMES", f"dimension_names must list {len(shape)} strings or nulls")
    if vt in VARIABLE_WIDTH and not obj["unique"]:
        fail("E_DUPLICATES_FOR_TYPE", f"a {vt} tensor must be unique: duplicates cannot be summed")
    if "iso" in obj and not isinstance(obj["iso"], bool):
        fail("E_ISO_TYPE", "iso must be true or false")


def parse_metadata(raw, *, path: str | None = None, stream: bool = False) -> TensorMeta:
    """Decode the `sptool` metadata, raising FormatError (naming the rule) if it is not valid."""
    obj, problems = check_metadata(raw, stream=stream)
    bad = [p for p in problems if p.severity in ("fatal", "error")]
    if bad:
        raise FormatError(f"{bad[0].message} [{bad[0].code}]", path=path)
    return TensorMeta.from_dict(obj)


# ---------------------------------------------------------------------------------------------
# checking the Arrow schema of a file, part or stream (rules B of the spec)

def _tensor_annotation_problem(t: pa.DataType, meta: TensorMeta) -> str | None:
    """Why an arrow.fixed_shape_tensor annotation disagrees with the dense shape, if it does."""
    if getattr(t, "extension_name", None) != "arrow.fixed_shape_tensor":
        return None
    if list(t.shape) != list(meta.dense_shape):
        return f"the fixed_shape_tensor annotation has shape {list(t.shape)}, expected {list(meta.dense_shape)}"
    perm = t.permutation
    if perm is not None and list(perm) != list(range(len(meta.dense_shape))):
        return f"the fixed_shape_tensor annotation has permutation {list(perm)}; only row-major blocks are allowed"
    return None


def _values_type_ok(t: pa.DataType, meta: TensorMeta) -> tuple[bool, int | None]:
    """(element type matches, dense block size found or None)."""
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    size = None
    if meta.hybrid:
        if pa.types.is_fixed_size_list(t):
            size = t.list_size
        elif not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            return False, None
        t = t.value_type
    want = arrow_element_type(meta.value_type)
    # Not the string_view / binary_view layouts (§3.2): the readers' decoding does not cover them.
    if meta.value_type == "string":
        return t in (pa.string(), pa.large_string()), size
    if meta.value_type == "binary":
        return t in (pa.binary(), pa.large_binary()), size
    if meta.value_type.startswith("complex"):
        ok = (
            pa.types.is_struct(t) and t.num_fields == 2
            and [t.field(i).name for i in range(2)] == ["real", "imag"]
            and all(t.field(i).type == want.field(i).type for i in range(2))
        )
        return ok, size
    return t == want, size


def check_schema(schema: pa.Schema, meta: TensorMeta) -> list[Problem]:
    try:
        names = schema.names
    except UnicodeDecodeError:
        return [Problem("E_MISSING_INDEX_COLUMN", "the column names are not valid UTF-8")]
    try:
        return _check_columns(schema, names, meta)
    except UnicodeDecodeError:  # pyarrow decodes a nested field's name when it is read or printed
        return [Problem("E_VALUES_COLUMN_TYPE", "a field name inside column values is not valid UTF-8")]


def _check_columns(schema: pa.Schema, names: list, meta: TensorMeta) -> list[Problem]:
    problems: list[Problem] = []
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        # Readers pick columns by name; with two of a name there is no telling which one is meant.
        return [Problem("E_DUPLICATE_COLUMN", f"column name(s) {', '.join(repeated)} appear more than once")]
    K = meta.sparse_ndim
    for k in range(K):
        name = index_column(k)
        if name not in names:
            problems.append(Problem("E_MISSING_INDEX_COLUMN", f"column {name} is missing"))
            return problems
        t = schema.field(name).type
        if t != pa.int64():
            problems.append(Problem("E_INDEX_COLUMN_TYPE", f"column {name} is {t}, expected int64"))
            return problems
    if "values" not in names:
        problems.append(Problem("E_MISSING_VALUES_COLUMN", "column values is missing"))
        return problems
    vtype = schema.field("values").type
    ok, size = _values_type_ok(vtype, meta)
    if not ok:
        problems.append(Problem(
            "E_VALUES_COLUMN_TYPE",
            f"column values is {vtype}, expected {meta.values_type()} for value_type {meta.value_type}",
        ))
        return problems
    if meta.hybrid and meta.block_size > 2**31 - 1:
        problems.append(Problem(
            "E_DENSE_BLOCK_SIZE",
            f"dense blocks of {meta.block_size} items exceed Arrow's list size limit of 2^31-1",
        ))
        return problems
    annotation = _tensor_annotation_problem(vtype, meta) if meta.hybrid else None
    if annotation:
        problems.append(Problem("E_DENSE_BLOCK_SIZE", annotation))
        return problems
    if size is not None and size != meta.block_size:
        problems.append(Problem(
            "E_DENSE_BLOCK_SIZE",
            f"dense blocks hold {size} items, expected {meta.block_size} (dense shape {list(meta.dense_shape)})",
        ))
        return problems
    expected = [index_column(k) for k in range(K)] + ["values"]
    extra = [n for n in names if n not in expected]
    if extra:
        problems.append(Problem("E_UNEXPECTED_COLUMN", f"unexpected column(s): {', '.join(extra)}"))
    elif names != expected:
        problems.append(Problem("E_COLUMN_ORDER", f"columns are {names}, expected {expected}"))
    nullable = [f.name for f in schema if f.name in expected and f.nullable]
    if nullable:
        problems.append(Problem("W_NULLABLE_COLUMN", f"column(s) declared nullable: {', '.join(nullable)}"))
    return problems


def scalar_of_value_type(value, vt: str, option: str):
    """``value`` (a CLI string or a Python scalar) as a scalar of the value type ``vt``; a
    UsageError naming ``option`` when it is not one (text that is not a number, a float for an
    integer type, a number for a string type, a value that overflows)."""
    text = value.strip() if isinstance(value, str) else None

    def bad(why: str = ""):
        return UsageError(f"{option} {value!r} is not a valid {vt}{why}")

    if vt == "string":
        if not isinstance(value, str):
            raise bad(" (give a string)")
        return value
    if vt == "binary":
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        raise bad(" (give bytes or a string)")
    if isinstance(value, (bytes, bytearray)):
        raise bad()
    dtype = VALUE_TYPES[vt]
    if vt == "bool":
        return _bool_scalar(value, text, bad)
    if dtype.kind in "iu":
        return _int_scalar(value, text, dtype, bad)
    return _float_scalar(value, text, dtype, bad)


def _bool_scalar(value, text: str | None, bad):
    """scalar_of_value_type for bool (``bad(why)``: the UsageError to raise)."""
    if text is not None:
        low = text.lower()
        if low in ("true", "1"):
            return np.bool_(True)
        if low in ("false", "0"):
            return np.bool_(False)
        raise bad(" (use true or false)")
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return np.bool_(bool(value))
    raise bad()


def _int_scalar(value, text: str | None, dtype: np.dtype, bad):
    """scalar_of_value_type for an integer type: integral floats taken, overflow refused."""
    try:
        v = int(text) if text is not None else value
    except ValueError:
        raise bad() from None
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        v = int(v)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise bad()
    info = np.iinfo(dtype)
    if not info.min <= int(v) <= info.max:
        raise bad(f" (outside {info.min}..{info.max})")
    return dtype.type(int(v))


def _float_scalar(value, text: str | None, dtype: np.dtype, bad):
    """scalar_of_value_type for a float or complex type: a finite value that overflows refused."""
    conv = complex if dtype.kind == "c" else float
    try:
        v = conv(text.replace(" ", "") if conv is complex else text) if text is not None else conv(value)
    except (TypeError, ValueError):
        raise bad() from None
    with np.errstate(over="ignore"):
        out = dtype.type(v)
    parts = (v.real, v.imag, out.real, out.imag) if conv is complex else (v, v, out, out)
    if (math.isfinite(parts[0]) and not math.isfinite(parts[2])) or (
            math.isfinite(parts[1]) and not math.isfinite(parts[3])):
        raise bad(" (it overflows)")
    return out


def number_of_text(text: str):
    """The number a piece of text spells, as int, float or complex in that order of preference
    ("3", "2.5", "1e-3", "2+1j"); None when it spells none."""
    for convert in (int, float, complex):
        try:
            return convert(text)
        except ValueError:
            continue
    return None


def number_of(value):
    """A scalar operand (a Python or NumPy number, or its text: "2.5", "-3", "1e-3", "2+1j"), else
    None; bools and names of .npy files are not numbers."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, float, complex, np.number)):
        return value
    if isinstance(value, str) and not value.lower().endswith(".npy"):
        return number_of_text(value)
    return None
