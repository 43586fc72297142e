"""A claim of iso values (formats/SPEC.md section 5: every stored scalar element has one bit
pattern) is never written unverified: a command whose output keeps its input's values, and so its
claim, refuses an input whose values break it (one line naming the file and NumPy's first
differing row; no output left), and every output it writes passes validate.  Valid iso inputs
keep working: duplicates summed drop the claim, and a directory whose parts are each iso with
different values is not iso as a whole (section 7)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_distributed import client, tiny  # noqa: F401 - fixtures: the session's cluster, tiny batches

import sptool
import sptool.distributed
from sptool.cli import cli
from sptool.errors import DataError

SHAPE = (12, 9)


def _coordinates(n=40, seed=3):
    cells = np.sort(np.random.default_rng(seed).choice(SHAPE[0] * SHAPE[1], size=n, replace=False))
    return np.stack(np.unravel_index(cells, SHAPE), axis=1).astype(np.int64)


def _liar(path, values, *, claims_order=True, hybrid=False):
    """A file whose metadata says iso true over ``values`` (written around sptool's sink)."""
    idx = _coordinates(len(values))
    vt = {"b": "bool", "f": "float64", "c": "complex128", "O": "string"}[np.asarray(values).dtype.kind]
    shape = list(SHAPE) + ([2] if hybrid else [])
    fill = {"bool": False, "float64": 0.0, "complex128": [0.0, 0.0], "string": ""}[vt]
    meta = {"format": "sptool.coo", "version": "1.0.0", "shape": shape, "sparse_ndim": 2, "value_type": vt,
            "fill_value": fill, "nnz": len(idx), "sort_order": [0, 1] if claims_order else [],
            "unique": claims_order, "canonical": claims_order, "iso": True}
    t = sptool.SparseTensor(idx, values, shape)  # the columns as sptool writes them
    sptool.write(t, path)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"sptool": json.dumps(meta).encode()}), path, row_group_size=5)
    return _numpys_first_break(path)


def _numpys_first_break(path) -> int:
    """NumPy: the first row with a scalar element whose bytes differ from the first element's."""
    col = pq.read_table(path).column("values").combine_chunks()
    while pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type):
        col = col.flatten()
    if pa.types.is_struct(col.type):  # complex: both components of an element compared together
        elems = [bytes(np.array([re, im]).tobytes()) for re, im in zip(col.field("real").to_numpy(),
                                                                       col.field("imag").to_numpy())]
    elif pa.types.is_string(col.type):
        elems = col.to_pylist()
    else:
        elems = [bytes(v) for v in np.ascontiguousarray(col.to_numpy(zero_copy_only=False)).view(np.uint8)
                 .reshape(len(col), -1)]
    per_row = len(elems) // pq.read_metadata(path).num_rows
    bad = [i for i, e in enumerate(elems) if e != elems[0]]
    assert bad, "the values keep the claim"
    return bad[0] // per_row


def _values(kind, n=40, at=23):
    if kind == "float":
        v = np.full(n, 2.5)
        v[at] = 3.5
    elif kind == "nan":  # NaN equals NaN bit for bit; -0.0 is not 0.0
        v = np.full(n, np.nan)
        v[at] = -np.nan
    elif kind == "bool":
        v = np.ones(n, dtype=bool)
        v[at] = False
    elif kind == "string":
        v = np.array(["w"] * n, dtype=object)
        v[at] = "x"
    else:  # complex: the same real part, another imaginary one
        v = np.full(n, 1 + 2j)
        v[at] = 1 + 3j
    return v


# Every command that keeps its input's values (and so its iso claim); OUT is the output.
COMMANDS = {
    "reorder": ["reorder", "IN", "-o", "OUT.parquet"],
    "reorder-colmajor": ["reorder", "IN", "--perm", "1,0", "-o", "OUT.parquet"],
    "reorder-dir": ["reorder", "IN", "--perm", "1,0", "-o", "OUT/"],
    "slice": ["slice", "IN", "--start", "0,0", "--size", "12,9", "-o", "OUT.parquet"],
    "transpose": ["transpose", "IN", "-o", "OUT.parquet"],
    "convert-parquet": ["convert", "IN", "-o", "OUT.parquet"],
    "convert-arrows": ["convert", "IN", "-o", "OUT.arrows"],
    "reshape": ["reshape", "IN", "--shape", "108", "-o", "OUT.parquet"],
    "expand-dims": ["expand-dims", "IN", "--axis", "0", "-o", "OUT.parquet"],
    "retain": ["retain", "IN", "--where", "indices_0 >= 0", "-o", "OUT.parquet"],
    "map": ["map", "IN", "--fn", "abs", "-o", "OUT.parquet"],
    "reset-shape": ["reset-shape", "IN", "--shape", "13,9", "-o", "OUT.parquet"],
    "split": ["split", "IN", "--axis", "0", "--num-split", "2", "-o", "OUT-{i}.parquet"],
}


def _argv(template, src, out):
    return [src if a == "IN" else a.replace("OUT", out) for a in template]


def _left(tmp_path, keep):
    return sorted(n for n in os.listdir(tmp_path) if n not in keep)


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("claims_order", [True, False], ids=["canonical", "unsorted"])
def test_a_broken_iso_claim_is_refused_naming_the_input(tmp_path, tiny_batches, name, claims_order):
    src = str(tmp_path / "liar.parquet")
    row = _liar(src, _values("float"), claims_order=claims_order)
    r = CliRunner().invoke(cli, _argv(COMMANDS[name], src, str(tmp_path / "out")))
    assert r.exit_code == 1, r.output
    assert r.output.count("\n") == 1 and src in r.output and "iso" in r.output
    assert f"values[{row}]" in r.output
    assert _left(tmp_path, {"liar.parquet"}) == []


@pytest.mark.parametrize("kind", ["nan", "bool", "string", "complex"])
def test_every_value_type_compares_bit_for_bit(tmp_path, tiny_batches, kind):
    src = str(tmp_path / "liar.parquet")
    row = _liar(src, _values(kind))
    for name in ("transpose", "convert-arrows"):
        r = CliRunner().invoke(cli, _argv(COMMANDS[name], src, str(tmp_path / "out")))
        assert r.exit_code == 1 and f"values[{row}]" in r.output and src in r.output, r.output


def test_a_hybrid_block_counts_every_element(tmp_path, tiny_batches):
    """Blocks equal row to row but not within themselves break the claim too: every scalar
    element has the one bit pattern (SPEC section 5)."""
    src = str(tmp_path / "liar.parquet")
    values = np.tile([4.0, 4.0], (40, 1))
    values[31, 1] = 5.0
    row = _liar(src, values, hybrid=True)
    assert row == 31
    r = CliRunner().invoke(cli, ["reorder", src, "--perm", "1,0", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 1 and "values[31]" in r.output, r.output


def test_validate_counts_every_element_of_a_block(tmp_path):
    """validate holds the claim to the rule the commands enforce: blocks equal to each other but
    not within themselves are refused, at the first row NumPy finds."""
    src = str(tmp_path / "liar.parquet")
    row = _liar(src, np.tile([4.0, 5.0], (40, 1)), hybrid=True)
    assert row == 0
    r = CliRunner().invoke(cli, ["validate", src])
    assert r.exit_code == 1 and "E_ISO_VALUES_DIFFER" in r.output, r.output


def test_a_bool_file_claiming_iso_does_not_become_a_pattern_matrix(tmp_path):
    """Matrix Market's pattern field has no values (all true): a bool tensor became one on its
    iso claim, so a false value came out true."""
    src = str(tmp_path / "liar.parquet")
    row = _liar(src, _values("bool"))
    out = str(tmp_path / "m.mtx")
    r = CliRunner().invoke(cli, ["convert", src, "-o", out])
    assert r.exit_code == 1 and f"values[{row}]" in r.output and not os.path.exists(out), r.output


def test_the_api_refuses_it_too(tmp_path):
    src = str(tmp_path / "liar.parquet")
    row = _liar(src, _values("float"))
    with pytest.raises(DataError, match=rf"values\[{row}\] differs .* iso true") as e:
        sptool.reorder(src, None, perm=(1, 0))
    assert src in str(e.value)
    with pytest.raises(DataError, match="iso"):
        sptool.transpose(src, str(tmp_path / "t.parquet"))
    assert not os.path.exists(tmp_path / "t.parquet")


def test_a_tensor_in_memory_claiming_iso_is_written_only_when_it_holds(tmp_path):
    values = _values("float")
    out = str(tmp_path / "w.parquet")
    with pytest.raises(DataError, match=r"values\[23\] differs from values\[0\], although the metadata says iso true"):
        sptool.write(sptool.SparseTensor(_coordinates(), values, SHAPE, iso=True), out)
    assert _left(tmp_path, set()) == []
    sptool.write(sptool.SparseTensor(_coordinates(), np.full(40, 2.5), SHAPE, iso=True), out)
    assert CliRunner().invoke(cli, ["validate", out]).exit_code == 0
    assert sptool.read(out).meta.iso


def _validates(path):
    r = CliRunner().invoke(cli, ["validate", path])
    assert r.exit_code == 0, r.output


def test_summed_duplicates_drop_the_claim(tmp_path, tiny_batches):
    """A valid iso file with a repeated coordinate: its sums differ from its other values."""
    idx = np.array([[0, 1], [0, 1], [2, 3], [5, 5], [5, 5], [5, 5], [7, 0]])
    src = str(tmp_path / "dup.parquet")
    sptool.write(sptool.SparseTensor(idx, np.full(len(idx), 1.5), SHAPE, iso=True), src)
    _validates(src)
    for policy in ("sum", "max", "first"):
        out = str(tmp_path / f"{policy}.parquet")
        r = CliRunner().invoke(cli, ["reorder", src, "--duplicates", policy, "-o", out])
        assert r.exit_code == 0, r.output
        _validates(out)
        got = sptool.read(out)
        want = {(0, 1): 3.0, (2, 3): 1.5, (5, 5): 4.5, (7, 0): 1.5} if policy == "sum" else \
            {(0, 1): 1.5, (2, 3): 1.5, (5, 5): 1.5, (7, 0): 1.5}
        assert dict(zip(map(tuple, got.indices.tolist()), got.values.tolist())) == want
        assert got.meta.iso == (policy != "sum")


def test_a_directory_of_iso_parts_with_different_values_is_not_iso(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    idx = _coordinates(10)
    sptool.write(sptool.SparseTensor(idx[:5], np.full(5, 1.0), SHAPE, iso=True), str(parts / "part-000000.parquet"))
    sptool.write(sptool.SparseTensor(idx[5:], np.full(5, 2.0), SHAPE, iso=True), str(parts / "part-000001.parquet"))
    _validates(str(parts))
    for name in ("reorder-colmajor", "transpose", "convert-parquet", "slice"):
        out = str(tmp_path / f"{name}.parquet")
        r = CliRunner().invoke(cli, _argv(COMMANDS[name], str(parts), str(tmp_path / name)))
        assert r.exit_code == 0, r.output
        _validates(out)
        assert sorted(sptool.read(out).values.tolist()) == [1.0] * 5 + [2.0] * 5
    same = tmp_path / "same"
    same.mkdir()
    for i in range(2):
        sptool.write(sptool.SparseTensor(idx[5 * i:5 * i + 5], np.full(5, 1.0), SHAPE, iso=True),
                     str(same / f"part-00000{i}.parquet"))
    out = str(tmp_path / "same.parquet")
    assert CliRunner().invoke(cli, ["reorder", str(same), "--perm", "1,0", "-o", out]).exit_code == 0
    assert sptool.read(out).meta.iso  # parts whose first values agree: iso as a whole


# -- on a cluster: each task reads its piece through the same checks ----------------------------

@pytest.mark.parametrize("name", ["transpose", "reorder", "slice_", "convert"])
def test_a_cluster_refuses_a_broken_claim_too(client, tiny, tmp_path, name):  # noqa: F811
    """The input's row is named where a task reads a piece of it in stored order; a task of a
    sorted input's key range counts the rows of its range (as it does for an order claim)."""
    src = str(tmp_path / "liar.parquet")
    row = _liar(src, _values("float", n=60, at=47))
    kw = {"start": (0, 0), "size": SHAPE} if name == "slice_" else {}
    out = str(tmp_path / "out") + "/"
    named = r"\d+" if name == "reorder" else row
    with pytest.raises(DataError, match=rf"values\[{named}\] differs .* iso true") as e:
        getattr(sptool.distributed, name)(src, out, client=client, **kw)
    assert src in str(e.value)
    assert _left(tmp_path, {"liar.parquet"}) == []
