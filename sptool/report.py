"""Validation problems and reports: the stable codes of formats/SPEC.md and their severities."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

FATAL, ERROR, WARNING, INFO = "fatal", "error", "warning", "info"

# code -> (severity, title).  The codes are part of the format spec (formats/SPEC.md);
# tests check that the two lists agree.
CODES: dict[str, tuple[str, str]] = {
    # A. container and metadata
    "E_NOT_PARQUET": (FATAL, "the file opens as Parquet"),
    "E_NO_SPTOOL_METADATA": (FATAL, "the key-value metadata holds the key 'sptool'"),
    "E_METADATA_NOT_JSON": (FATAL, "the metadata is valid UTF-8 JSON"),
    "E_METADATA_NOT_OBJECT": (FATAL, "the metadata is a JSON object"),
    "E_MISSING_KEY": (FATAL, "every required key is present"),
    "E_KEY_TYPE": (FATAL, "every known key has its JSON type"),
    "E_FORMAT_ID": (FATAL, "format is 'sptool.coo'"),
    "E_VERSION_SYNTAX": (FATAL, "version is SemVer"),
    "E_VERSION_UNSUPPORTED": (FATAL, "major version is 1"),
    "W_VERSION_NEWER_MINOR": (WARNING, "minor version is not newer than this implementation"),
    "W_UNKNOWN_KEY": (WARNING, "no unknown top-level keys"),
    "E_SHAPE": (FATAL, "shape is a non-empty list of integers in [0, 2^63-1]"),
    "E_SHAPE_OVERFLOW": (FATAL, "the dense elements fit in int64 (format 1.0; from 1.1 only a row's dense block)"),
    "E_SPARSE_NDIM": (FATAL, "1 <= sparse_ndim <= len(shape)"),
    "E_VALUE_TYPE": (FATAL, "value_type is in the v1 vocabulary"),
    "E_FILL_VALUE": (ERROR, "fill_value is a valid encoding for value_type"),
    "E_SORT_ORDER": (ERROR, "sort_order holds distinct dimensions in [0, sparse_ndim)"),
    "E_CANONICAL_INCONSISTENT": (ERROR, "canonical == (sort_order == [0..K-1] and unique)"),
    "E_DIMENSION_NAMES": (ERROR, "dimension_names has one string or null per dimension"),
    "E_DUPLICATES_FOR_TYPE": (ERROR, "string and binary tensors are unique"),
    "E_STRUCTURE_UNSUPPORTED": (FATAL, "no 'structure' key (not part of v1.0)"),
    "E_ISO_TYPE": (ERROR, "iso is a boolean"),
    # B. schema and footer
    "E_MISSING_INDEX_COLUMN": (FATAL, "indices_0..indices_{K-1} exist"),
    "E_INDEX_COLUMN_TYPE": (FATAL, "index columns are signed int64"),
    "E_MISSING_VALUES_COLUMN": (FATAL, "the values column exists"),
    "E_VALUES_COLUMN_TYPE": (FATAL, "the values column type matches value_type"),
    "E_DENSE_BLOCK_SIZE": (FATAL, "the dense block size equals prod(shape[K:])"),
    "E_DUPLICATE_COLUMN": (FATAL, "column names are unique"),
    "E_UNEXPECTED_COLUMN": (ERROR, "no other columns"),
    "E_COLUMN_ORDER": (ERROR, "columns are in the order indices_0..K-1, values"),
    "W_NULLABLE_COLUMN": (WARNING, "columns are declared non-nullable"),
    "E_NNZ_MISMATCH": (ERROR, "nnz equals the number of rows"),
    "E_SORTING_COLUMNS_MISMATCH": (ERROR, "Parquet sorting_columns agree with sort_order"),
    "W_SORTING_COLUMNS_ABSENT": (WARNING, "sorted files declare Parquet sorting_columns"),
    "W_NO_STATISTICS": (WARNING, "index column chunks carry min/max statistics"),
    "E_STATS_OUT_OF_BOUNDS": (ERROR, "statistics show indices within shape"),
    "E_STATS_NOT_SORTED": (ERROR, "statistics show the leading sort key non-decreasing across row groups"),
    "W_NO_PAGE_CHECKSUMS": (WARNING, "the footer records page checksums (strict mode)"),
    # C. data scan
    "E_READ_FAILED": (FATAL, "the data decodes"),
    "E_PAGE_CHECKSUM": (FATAL, "every page matches its CRC-32"),
    "E_NULL_INDEX": (ERROR, "no nulls in index columns"),
    "E_NULL_VALUE": (ERROR, "no nulls in values"),
    "E_INDEX_OUT_OF_BOUNDS": (ERROR, "0 <= indices_k < shape[k]"),
    "E_NOT_SORTED": (ERROR, "rows follow sort_order"),
    "E_DUPLICATE_COORDINATE": (ERROR, "no repeated coordinates when unique"),
    "E_DENSE_BLOCK_LENGTH": (ERROR, "every dense block has prod(shape[K:]) items"),
    "E_ISO_VALUES_DIFFER": (ERROR, "all values equal when iso"),
    "W_STATS_INCONSISTENT": (WARNING, "data lies within the column-chunk statistics"),
    "I_EXPLICIT_FILL": (INFO, "stored entries equal to fill_value"),
    # D. directory
    "E_NO_PARTS": (FATAL, "the directory holds at least one part"),
    "E_PART_SCHEMA_MISMATCH": (ERROR, "every part has the same schema"),
    "E_PART_METADATA_MISMATCH": (ERROR, "every part has the same tensor metadata"),
    "W_PART_NAME": (WARNING, "parts are named part-NNNNNN.parquet"),
    "W_STRAY_FILE": (WARNING, "no visible non-Parquet files"),
    # E. stream
    "E_STREAM_NOT_ARROW": (FATAL, "the input is an Arrow IPC stream"),
    "E_STREAM_TRUNCATED": (ERROR, "the promised trailer arrived"),
    "E_TRAILER_CONFLICT": (ERROR, "the trailer agrees with the header"),
    "E_STREAM_SHAPE_UNRESOLVED": (ERROR, "every shape entry is known at the end"),
    "E_STREAM_DIGEST": (ERROR, "the bytes before the trailer match its crc32c digest"),
    "W_NO_STREAM_DIGEST": (WARNING, "the trailer carries a crc32c digest (strict mode)"),
}


LOCATION_KEYS = ("part", "row_group", "row", "index")


@dataclass
class Problem:
    code: str
    message: str
    location: dict = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return CODES[self.code][0]

    @property
    def title(self) -> str:
        return CODES[self.code][1]

    def as_dict(self) -> dict:
        loc = {key: self.location.get(key) for key in LOCATION_KEYS}
        return {"code": self.code, "severity": self.severity, "title": self.title,
                "passed": self.severity == INFO,
                "message": self.message, "location": loc}


# Codes that mean nothing could be read at all (a text file named .parquet, an empty file, text
# on stdin): the exit code of an unreadable input, 2, as for a missing file.
UNREADABLE = frozenset({"E_NOT_PARQUET", "E_STREAM_NOT_ARROW"})


@dataclass
class Report:
    """What ``sptool.validate`` returns: every problem found, never an exception for bad data."""

    target: str
    mode: str
    problems: list[Problem] = field(default_factory=list)
    nnz: int | None = None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity in (FATAL, ERROR)]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == WARNING]

    @property
    def valid(self) -> bool:
        return not self.errors

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def ok(self, strict: bool = False) -> bool:
        return self.valid and not (strict and self.warnings)

    @property
    def unreadable(self) -> bool:
        """Nothing could be read: every error says so, and no row was counted."""
        return bool(self.errors) and all(p.code in UNREADABLE for p in self.errors) and not self.nnz

    def exit_code(self, strict: bool = False) -> int:
        """0 valid, 1 invalid, 2 unreadable (the CLI's codes)."""
        return 0 if self.ok(strict) else 2 if self.unreadable else 1

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "mode": self.mode,
            "valid": self.valid,
            "unreadable": self.unreadable,
            "nnz": self.nnz,
            "checks": [p.as_dict() for p in self.problems],
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)
