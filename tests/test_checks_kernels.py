"""The compiled read checks (sptool/_checks.pyx) against their plain Python references
(tests/references/checks.py), and the footer walk against pyarrow's own reading of the footer."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from references import checks as ref
from sptool._kernels import OUT_OF_ORDER, REPEATED

import sptool
from sptool import _checks
from sptool.io._footer import PHYSICAL, read_footer

# -- codes_order_violation ---------------------------------------------------------------------


def _first_break(codes, check_repeats, prev):
    """Independent oracle: a plain loop over Python ints."""
    last = prev
    for i, c in enumerate(int(x) for x in codes):
        if last is not None and (c < last or (check_repeats and c == last)):
            return i, REPEATED if c == last else OUT_OF_ORDER
        last = c
    return -1, 0


@pytest.mark.parametrize("seed", range(40))
def test_codes_order_violation_matches_the_reference_and_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    codes = np.sort(rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True))
    if n and seed % 3 == 0:
        codes[rng.integers(0, n)] = rng.integers(0, 2**64 - 1, dtype=np.uint64)  # an order break, maybe
    if n > 1 and seed % 3 == 1:
        i = int(rng.integers(1, n))
        codes[i] = codes[i - 1]  # a repeat
    for check_repeats in (True, False):
        for prev in (None, 0, 2**64 - 1, int(codes[0]) if n else 7):
            args = (codes, check_repeats, prev is not None, np.uint64(prev or 0))
            got = _checks.codes_order_violation(*args)
            assert got == ref.codes_order_violation(*args) == _first_break(codes, check_repeats, prev)


def test_codes_order_violation_kinds():
    c = np.array([1, 2, 2, 1], dtype=np.uint64)
    assert _checks.codes_order_violation(c, True) == (2, REPEATED)
    assert _checks.codes_order_violation(c, False) == (3, OUT_OF_ORDER)
    assert _checks.codes_order_violation(c[:1], True, True, np.uint64(1)) == (0, REPEATED)
    assert _checks.codes_order_violation(c[:1], False, True, np.uint64(1)) == (-1, 0)


# -- footer_chunks -----------------------------------------------------------------------------


def _pyarrow_view(path):
    """(row groups, rows of (group, type code, ABSENT, ABSENT)) as pyarrow reads the footer."""
    md = pq.read_metadata(path)
    code = {name: c for c, name in PHYSICAL.items()}
    rows = [(r, code[md.row_group(r).column(c).physical_type])
            for r in range(md.num_row_groups) for c in range(md.num_columns)]
    return md.num_row_groups, rows


def _files(tmp_path):
    rng = np.random.default_rng(3)
    idx = np.unique(rng.integers(0, 50, size=(3000, 3)), axis=0)
    paths = []
    for i, values in enumerate([
        rng.standard_normal(len(idx)),
        rng.integers(0, 9, len(idx)).astype(np.int32),
        np.array([f"s{j}" for j in range(len(idx))], dtype=object),
        rng.standard_normal((len(idx), 2, 2)),  # a dense-block (list) column: level histograms
    ]):
        p = tmp_path / f"t{i}.parquet"
        shape = (50, 50, 50) + values.shape[1:]
        sptool.write(sptool.SparseTensor(idx, values, shape, sort_order=(0, 1, 2), unique=True), str(p))
        paths.append(p)
    # Another writer's file: many small row groups, a nested column, page statistics.
    t = pa.table({"a": np.arange(5000), "b": pa.array([[j, j + 1] for j in range(5000)]),
                  "c": pa.array([None if j % 7 else f"x{j}" for j in range(5000)])})
    p = tmp_path / "other.parquet"
    pq.write_table(t, p, row_group_size=97, write_page_index=True)
    paths.append(p)
    return paths


def test_footer_chunks_agree_with_the_python_walker_and_pyarrow(tmp_path):
    histograms = 0
    for p in _files(tmp_path):
        footer = read_footer(str(p))
        groups, chunks = _checks.footer_chunks(np.frombuffer(footer, np.uint8))
        ref_groups, ref_rows = ref.footer_chunks(footer)
        assert groups == ref_groups and chunks.tolist() == ref_rows
        n_groups, typed = _pyarrow_view(str(p))
        assert groups == n_groups and [tuple(r[:2]) for r in chunks.tolist()] == typed
        histograms += int((chunks[:, 3] != _checks.ABSENT).sum())
    assert histograms  # the dense-block and nested columns' chunks carry definition level histograms


def _same_outcome(footer: bytes):
    try:
        expected = ref.footer_chunks(footer)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)):
            _checks.footer_chunks(np.frombuffer(footer, np.uint8))
        return False
    except RecursionError:
        return None
    groups, chunks = _checks.footer_chunks(np.frombuffer(footer, np.uint8))
    assert groups == expected[0] and len(chunks) == len(expected[1])
    stand_ins = (-(2**63) + 1, 2**63 - 1)  # the kernel's for a number beyond int64: equal to no type
    for got, want in zip(chunks.tolist(), expected[1]):
        for g, w in zip(got, want):
            assert g == w or (g in stand_ins and not stand_ins[0] < w < stand_ins[1])
    return True


def _cut_and_damaged(tmp_path, seed: int, cuts: int, damaged: int):
    """Footers of _files cut short at ``cuts`` random places (and at 0, 1 and one byte short),
    and ``damaged`` copies of each with one to three random bytes set at random."""
    rng = np.random.default_rng(seed)
    for p in _files(tmp_path):
        footer = read_footer(str(p))
        for cut in sorted(set(rng.integers(0, len(footer), cuts).tolist()) | {0, 1, len(footer) - 1}):
            yield footer[:cut]
        for _ in range(damaged):
            bad = bytearray(footer)
            for at in rng.integers(0, len(footer), int(rng.integers(1, 4))):
                bad[at] = int(rng.integers(0, 256))
            yield bytes(bad)


def test_footer_chunks_agree_with_the_reference_on_truncated_and_damaged_footers(tmp_path):
    outcomes = [_same_outcome(footer) for footer in _cut_and_damaged(tmp_path, 11, 60, 150)]
    assert True in outcomes and False in outcomes  # both walked and refused footers were compared


def _levels_problem(rows, schema):
    """The check the footer walk serves, written plainly over the reference walker's rows (the
    loop sptool ran before it was compiled): the first chunk whose type or level histogram
    contradicts its column."""
    columns = [schema.column(c) for c in range(len(schema))]
    position: dict = {}
    for r, t, rep, dfn in rows:
        c = position[r] = position.get(r, -1) + 1
        if c >= len(columns):
            continue
        col = columns[c]
        if t != ref.ABSENT and PHYSICAL.get(t) != col.physical_type:
            return (f"row group {r} says column {col.name} holds {PHYSICAL.get(t, 'UNKNOWN')}, the schema says "
                    f"{col.physical_type}")
        for n, level in ((rep, col.max_repetition_level), (dfn, col.max_definition_level)):
            if n != ref.ABSENT and n not in (0, level + 1):
                return (f"row group {r}, column {col.name}: a level histogram has {n} entries, the schema "
                        f"allows {level + 1}")
    return None


def test_check_levels_finds_what_a_plain_loop_over_the_reference_finds(tmp_path):
    from sptool.io._footer import check_levels

    rng = np.random.default_rng(12)
    found = 0
    for p in _files(tmp_path):
        data = p.read_bytes()
        footer = read_footer(str(p))
        start = len(data) - 8 - len(footer)
        schema = pq.ParquetFile(p).schema
        for _ in range(120):
            damaged = bytearray(footer)
            for at in rng.integers(0, len(footer), int(rng.integers(1, 3))):
                damaged[at] = int(rng.integers(0, 256))
            try:
                _groups, rows = ref.footer_chunks(bytes(damaged))
            except (ValueError, RecursionError):
                continue
            if any(not -(2**63) <= v < 2**63 - 1 for row in rows for v in row):
                continue  # a number beyond int64: the kernel's stand-in differs from it by design
            bad = tmp_path / "bad.parquet"
            bad.write_bytes(data[:start] + bytes(damaged) + data[-8:])
            expected = _levels_problem(rows, schema)
            assert check_levels(str(bad), schema) == expected
            found += expected is not None
    assert found  # some damaged footers did contradict their schema


# -- read_struct --------------------------------------------------------------------------------


def _struct_outcome(buf: bytes):
    """The kernel's read_struct of ``buf`` against the reference's: the same tree and end, or
    the same refusal (EndsEarly for bytes that end too soon).  True when both read it."""
    try:
        expected = ref.read_struct(buf)
    except ref.EndsEarly:
        with pytest.raises(_checks.EndsEarly, match="ends in the middle"):
            _checks.read_struct(buf)
        return False
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)) as info:
            _checks.read_struct(buf)
        assert not isinstance(info.value, _checks.EndsEarly)
        return False
    except RecursionError:
        return None
    got = _checks.read_struct(buf)
    # A field id past int64 (a damaged long field header) is kept exactly by the reference, as a
    # stand-in by the kernel: such trees are not compared.
    assert got == expected or not _ids_fit(expected[0])
    return True


def _ids_fit(fields) -> bool:
    def fit(value):
        if isinstance(value, list):
            return _ids_fit(value)
        if isinstance(value, tuple):
            return all(fit(v) for v in value[1])
        return True
    return all(-(2**63) < fid < 2**63 - 1 and fit(v) for fid, _, v in fields)


def _value_at(fields, path):
    """The value at ``path`` (thrift_footer's: field ids, list positions) of a field tree."""
    value = fields
    for step in path:
        if isinstance(value, tuple):  # a list: (element type, items)
            value = value[1][step]
        else:
            value = [v for fid, _, v in value if fid == step][-1]
    return value


def test_read_struct_agrees_with_the_reference_thrift_footer_and_pyarrow(tmp_path):
    from thrift_footer import I16, I32, I64, footer_fields, zigzag_varint

    from sptool.io._thrift import write_struct

    for p in _files(tmp_path):
        data = p.read_bytes()
        footer = read_footer(str(p))
        fields, end = _checks.read_struct(footer)
        assert (fields, end) == ref.read_struct(footer) and end == len(footer)
        assert bytes(write_struct(fields)) == footer
        md = pq.read_metadata(p)  # pyarrow: FileMetaData.num_rows (3) and row_groups (4)
        assert _value_at(fields, (3,)) == md.num_rows and len(_value_at(fields, (4,))[1]) == md.num_row_groups
        # thrift_footer's independent walk: every integer where it finds one, byte for byte.
        base, located = footer_fields(data)
        ints = [f for f in located if f.kind in (I16, I32, I64) and not isinstance(f.path[-1], str)]
        assert ints
        for f in ints:
            assert zigzag_varint(_value_at(fields, f.path)) == data[f.start:f.end]
        # A struct read from where it starts inside the footer: the first row group.
        group = next(f for f in located if f.path == (4, 0))
        assert _checks.read_struct(footer, group.start - base) == (_value_at(fields, (4, 0)), group.end - base)


def test_read_struct_agrees_with_the_reference_on_truncated_and_damaged_bytes(tmp_path):
    outcomes = [_struct_outcome(footer) for footer in _cut_and_damaged(tmp_path, 13, 40, 120)]
    assert True in outcomes and False in outcomes  # both read and refused structs were compared
