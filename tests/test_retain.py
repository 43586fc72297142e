"""retain with a mask or a --where condition; the --where parser, including hostile input."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import dense_oracle, random_tensor

import sptool
from sptool.cli import cli
from sptool.errors import InputError, UsageError
from sptool.ops.retain import retain
from sptool.stream.where import MAX_DEPTH, compile_where


def _subset(t, keep):
    return sptool.SparseTensor(t.indices[keep], t.values[keep], t.shape, fill_value=t.fill_value)


def _check(tmp_path, t, keep, dst):
    assert sptool.validate(dst).valid
    s = sptool.read(dst)
    np.testing.assert_array_equal(s.indices, t.indices[keep])
    np.testing.assert_array_equal(s.values, t.values[keep])
    assert s.shape == t.shape and s.sort_order == t.sort_order
    assert s.unique == t.unique or (not t.unique and keep.sum() <= 1)
    np.testing.assert_array_equal(s.to_dense(), dense_oracle(_subset(t, keep)))
    return s


@pytest.mark.parametrize("layout", ["canonical", "unsorted-dups", "empty", "one"])
@pytest.mark.parametrize("as_file", [True, False])
def test_mask(tmp_path, rng, tiny_batches, layout, as_file):
    nnz = {"canonical": 90, "unsorted-dups": 90, "empty": 0, "one": 1}[layout]
    t = random_tensor(rng, (9, 8, 7), nnz, duplicates=layout == "unsorted-dups", sort=layout == "canonical")
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    keep = rng.random(t.nnz) < 0.4
    mask = keep
    if as_file:
        mask = str(tmp_path / "m.npy")
        np.save(mask, keep)
    dst = str(tmp_path / "out.parquet")
    r = retain(src, dst, mask=mask)
    assert r["rows_out"] == keep.sum()
    _check(tmp_path, t, keep, dst)


def test_mask_all_and_none(tmp_path, rng):
    t = random_tensor(rng, (9, 8), 30, sort=True)
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    for keep in (np.ones(t.nnz, bool), np.zeros(t.nnz, bool)):
        retain(src, str(tmp_path / "o.parquet"), mask=keep)
        s = _check(tmp_path, t, keep, str(tmp_path / "o.parquet"))
        assert s.canonical


def test_hybrid_and_strings(tmp_path, rng, tiny_batches):
    t = random_tensor(rng, (12, 5, 4), 40, sparse_ndim=2, dtype="float32", duplicates=True)
    src = str(tmp_path / "h.parquet")
    sptool.write(t, src)
    retain(src, str(tmp_path / "o.parquet"), where="any(values > 1.5) or indices_1 == 0")
    keep = (t.values > 1.5).any(axis=1) | (t.indices[:, 1] == 0)
    _check(tmp_path, t, keep, str(tmp_path / "o.parquet"))
    retain(src, str(tmp_path / "o.parquet"), where="all(abs(values) < indices_0 + 1)")
    keep = (np.abs(t.values) < (t.indices[:, :1] + 1)).all(axis=1)
    _check(tmp_path, t, keep, str(tmp_path / "o.parquet"))
    with pytest.raises(UsageError, match="reduce the condition with any"):
        retain(src, str(tmp_path / "x.parquet"), where="values > 0")
    st = sptool.SparseTensor([[0, 1], [1, 1], [2, 0]], np.array(["apple", "kiwi", "fig"], dtype=object), (3, 2))
    sptool.write(st, str(tmp_path / "s.parquet"))
    retain(str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"), where="values > 'b' and values != \"kiwi\"")
    assert sptool.read(str(tmp_path / "o.parquet")).values.tolist() == ["fig"]
    retain(str(tmp_path / "s.parquet"), str(tmp_path / "o.parquet"), mask=np.array([True, False, True]))
    assert sptool.read(str(tmp_path / "o.parquet")).values.tolist() == ["apple", "fig"]
    assert not os.path.exists(tmp_path / "x.parquet")


WHERE_CASES = [
    ("values > 0", lambda i, v: v > 0),
    ("values >= -1.5 and values < 2e0", lambda i, v: (v >= -1.5) & (v < 2)),
    ("not (indices_0 == 1)", lambda i, v: i[0] != 1),
    ("not values > 0 and indices_2 < 3", lambda i, v: ~(v > 0) & (i[2] < 3)),
    ("indices_0 % 2 == 0 or indices_1 * 2 > 5 and values < 0",
     lambda i, v: (i[0] % 2 == 0) | ((i[1] * 2 > 5) & (v < 0))),
    ("0 < values < 1", lambda i, v: (v > 0) & (v < 1)),
    ("-1 <= -values <= 0.5", lambda i, v: (-v >= -1) & (-v <= 0.5)),
    ("abs(values) > .5", lambda i, v: np.abs(v) > 0.5),
    ("1 + 2 * 3 == 7 and indices_0 - indices_1 / 2 >= 1", lambda i, v: i[0] - i[1] / 2 >= 1),
    ("(indices_0 + indices_1) * 2 == indices_2 + 4", lambda i, v: (i[0] + i[1]) * 2 == i[2] + 4),
    ("- -values > 0", lambda i, v: v > 0),
    ("values < inf and not isnan(values)", lambda i, v: np.isfinite(v) | (v == -np.inf)),
    ("values != values", lambda i, v: np.isnan(v)),
    ("values == nan", lambda i, v: np.zeros(len(v), bool)),
    ("values / 0 > 1", lambda i, v: v > 0),
    ("indices_1 % 0 == 0", lambda i, v: np.ones(len(v), bool)),
    ("true", lambda i, v: np.ones(len(v), bool)),
    ("1 > 2 or false", lambda i, v: np.zeros(len(v), bool)),
    ("(((values > 0)))", lambda i, v: v > 0),
]


@pytest.mark.parametrize("expr,oracle", WHERE_CASES, ids=[c[0] for c in WHERE_CASES])
def test_where_matches_numpy(tmp_path, rng, tiny_batches, expr, oracle):
    t = random_tensor(rng, (6, 7, 8), 80, duplicates=True)
    t.values[:3] = np.nan
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    retain(src, str(tmp_path / "o.parquet"), where=expr)
    with np.errstate(all="ignore"):
        keep = np.asarray(oracle(t.indices.T, t.values), dtype=bool)
    _check(tmp_path, t, keep, str(tmp_path / "o.parquet"))


@pytest.mark.parametrize("dtype,expr,oracle", [
    ("int8", "values * 1000 > 20000", lambda v: v.astype(np.int64) * 1000 > 20000),
    ("int8", "values % 3 == 1", lambda v: v % 3 == 1),
    ("uint64", "values > -1 and values < 20", lambda v: v < 20),
    ("bool", "values", lambda v: v),
    ("bool", "not values or values == false", lambda v: ~v),
    ("complex64", "abs(values) > 1 and values != 0", lambda v: np.abs(v) > 1),
    ("float16", "values > 0.5", lambda v: v > np.float16(0.5)),
])
def test_where_value_types(tmp_path, rng, dtype, expr, oracle):
    t = random_tensor(rng, (20, 5), 60, dtype=dtype, sort=True)  # unique in an order: the output keeps both
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    retain(src, str(tmp_path / "o.parquet"), where=expr)
    _check(tmp_path, t, np.asarray(oracle(t.values), dtype=bool), str(tmp_path / "o.parquet"))


HOSTILE = [
    ("__import__('os')", 0, "unknown function '__import__'"),
    ("__import__('os').system('echo pwned')", 16, "unexpected character '.'"),
    ("exec('import os')", 0, "unknown function 'exec'"),
    ("values.__class__", 6, "unexpected character '.'"),
    ("open('/etc/passwd') == 1", 0, "unknown function 'open'"),
    ("lambda: 1", 6, "unexpected character ':'"),
    ("[x for x in values]", 0, "unexpected character '\\['"),
    ("values; import os", 6, "unexpected character ';'"),
    ("values if values else 1", 7, "unexpected 'if'"),
    ("2 ** 3 > 1", 3, "expected a number, a name or '\\(', found '\\*'"),
    ("os.system('ls')", 2, "unexpected character '.'"),
    ("indices_7 > 1", 0, "unknown name 'indices_7' \\(this tensor has values, indices_0..indices_2"),
    ("indices_01 > 1", 0, "unknown name 'indices_01'"),
    ("foo > 1", 0, "unknown name 'foo'"),
    ("values >", 8, "found the end of the expression"),
    ("values > 0 )", 11, "unexpected '\\)'"),
    ("(values > 0", 11, "expected '\\)' to close the '\\(' at position 0"),
    ("values = 1", 7, "compare with '=='"),
    ("values > 0 && indices_0 < 1", 11, "write 'and'"),
    ("values > 0 || true", 11, "write 'or'"),
    ("1e > 0", 1, "unexpected 'e' after the number"),
    ("'abc > 0", 0, "unterminated string"),
    ("values + 1", 0, "must be a condition"),
    ("abs values > 1", 0, "abs is a function"),
    ("and values > 0", 0, "'and' needs something before it"),
    ("values > 0 and", 14, "found the end"),
    ("values > 'a'", 7, "cannot compare a number with a string"),
    ("values and true", 7, "'and' needs conditions on both sides"),
    ("not values", 0, "'not' needs a condition"),
    ("abs(values > 0) > 1", 0, "abs\\(\\) needs a number"),
    ("any(values) ", 0, "any\\(\\) needs a condition"),
    ("values % (values > 1) > 0", 7, "'%' needs numbers"),
]


@pytest.mark.parametrize("expr,pos,message", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_where_rejects_with_position(expr, pos, message):
    with pytest.raises(UsageError, match=message) as e:
        compile_where(expr, sparse_ndim=3, value_type="float64")
    assert str(e.value).endswith(f"at position {pos}")


def test_where_type_rules_per_value_type():
    with pytest.raises(UsageError, match="complex numbers have no order"):
        compile_where("values < 1", sparse_ndim=1, value_type="complex128")
    with pytest.raises(UsageError, match="cannot compare a condition with a number"):
        compile_where("values > 0", sparse_ndim=1, value_type="bool")
    with pytest.raises(UsageError, match="cannot compare a string with a number"):
        compile_where("values == 3", sparse_ndim=1, value_type="string")
    with pytest.raises(UsageError, match="binary tensor cannot be used"):
        compile_where("values == 'a'", sparse_ndim=1, value_type="binary")
    assert compile_where("indices_0 > 1", sparse_ndim=1, value_type="binary").needs_keys
    with pytest.raises(UsageError, match="needs a condition"):
        compile_where("  ", sparse_ndim=1, value_type="float64")


def test_where_depth_and_length_limits():
    deep = "(" * (MAX_DEPTH + 5) + "values > 0" + ")" * (MAX_DEPTH + 5)
    for expr in (deep, "not " * 200 + "true", "-" * 200 + "1 > 0"):
        with pytest.raises(UsageError, match="nested more than"):
            compile_where(expr, sparse_ndim=1, value_type="float64")
    with pytest.raises(UsageError, match="longer than"):
        compile_where("values > 0 or " * 2000 + "true", sparse_ndim=1, value_type="float64")
    ok = "(" * 20 + "values > 0" + ")" * 20
    assert compile_where(ok, sparse_ndim=1, value_type="float64")(None, np.array([1.0, -1.0]), 2).tolist() == \
        [True, False]


def test_where_evaluation_overflow_is_a_usage_error(tmp_path, rng):
    t = random_tensor(rng, (20, 5), 10, dtype="uint64")
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    with pytest.raises(UsageError, match="cannot evaluate"):
        retain(src, str(tmp_path / "o.parquet"), where="values + -1 > 0")
    assert not os.path.exists(tmp_path / "o.parquet")


def test_bad_masks(tmp_path, rng):
    t = random_tensor(rng, (9, 8), 20)
    n = t.nnz
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    dst = str(tmp_path / "o.parquet")
    for arr, message in [(np.ones(n - 1, bool), f"has {n - 1} flags but the tensor has {n} rows"),
                         (np.ones(n, np.int8), "must be a bool array, not int8"),
                         (np.ones((n, 1), bool), "must be 1-D"),
                         (np.array([True] * n, dtype=object), "holds Python objects")]:
        np.save(tmp_path / "m.npy", arr, allow_pickle=True)
        with pytest.raises((UsageError, InputError), match=message):
            retain(src, dst, mask=str(tmp_path / "m.npy"))
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(InputError, match="not a .npy file \\(it has no NumPy header\\)"):
        retain(src, dst, mask=str(tmp_path / "junk.npy"))
    with pytest.raises(InputError):
        retain(src, dst, mask=str(tmp_path / "missing.npy"))
    with pytest.raises(UsageError, match="exactly one"):
        retain(src, dst)
    assert not os.path.exists(dst)


def test_cli(tmp_path, rng):
    t = random_tensor(rng, (9, 8), 20, duplicates=True)
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    np.save(tmp_path / "m.npy", np.ones(21, bool))
    for args, code, text in [
        (["--mask", str(tmp_path / "m.npy")], 2, "has 21 flags"),
        (["--where", "__import__('os')"], 2, "unknown function '__import__'"),
        (["--where", "indices_7 > 1"], 2, "unknown name 'indices_7'"),
        ([], 2, "exactly one of --mask"),
        (["--where", "true", "--mask", str(tmp_path / "m.npy")], 2, "exactly one of --mask"),
    ]:
        r = CliRunner().invoke(cli, ["retain", src, *args, "-o", str(tmp_path / "o.parquet")])
        assert r.exit_code == code and r.stderr.count("\n") == 1 and text in r.stderr, (args, r.stderr)
    assert not os.path.exists(tmp_path / "o.parquet")
    r = CliRunner().invoke(cli, ["-q", "retain", src, "--where", "values > 0", "-o", str(tmp_path / "o.parquet")])
    assert r.exit_code == 0
    _check(tmp_path, t, t.values > 0, str(tmp_path / "o.parquet"))


def test_pipeline_through_stdin_and_stdout(tmp_path, rng):
    """reset-shape | retain | expand-dims | reshape | transpose | fill-empty-rows, all through pipes."""
    t = random_tensor(rng, (10, 6), 40, duplicates=True)
    src = str(tmp_path / "in.parquet")
    sptool.write(t, src)
    np.save(tmp_path / "m.npy", np.arange(t.nnz) % 3 != 0)
    py = sys.executable
    cmd = (f"{py} -P -m sptool -q reset-shape {src} --shape 12,6 -o - "
           f"| {py} -P -m sptool -q retain - --mask {tmp_path / 'm.npy'} -o - "
           f"| {py} -P -m sptool -q expand-dims - --axis 1 "
           f"| {py} -P -m sptool -q reshape - --shape 6,2,6 -o - "
           f"| {py} -P -m sptool -q transpose - --perm 1,0,2 "
           f"| {py} -P -m sptool -q fill-empty-rows - --default-value 7 -o {tmp_path / 'out.parquet'}")
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    dense = np.zeros((12, 6))
    dense[:10] = dense_oracle(_subset(t, np.arange(t.nnz) % 3 != 0))
    want = np.transpose(dense.reshape(6, 2, 6), (1, 0, 2))
    for r in range(2):
        if not want[r].any():
            want[r, 0, 0] = 7
    s = sptool.read(str(tmp_path / "out.parquet"))
    assert s.sort_order == (0, 1, 2)
    np.testing.assert_allclose(s.to_dense(), want)
    assert sptool.validate(str(tmp_path / "out.parquet")).valid
