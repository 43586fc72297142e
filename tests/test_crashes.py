"""Inputs and arguments that once ended as internal errors (exit 3) or bare Python exceptions:
each now a one-line refusal with a documented exit code, or an sptool error from the API."""

from __future__ import annotations

import os
import shlex
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from command_examples import help_examples, in_workdir
from conftest import random_tensor

import sptool
from sptool.cli import cli

# Sorted runs of 64 rows, none kept in memory: a sort of the sample data spills.
SPILL_EVERYTHING = {"SPTOOL_RUN_ROWS": "64", "SPTOOL_BATCH_ROWS": "64", "SPTOOL_KEEP_BYTES": "0"}


def _takes_tmp_dir(name: str) -> bool:
    return "--tmp-dir" in CliRunner().invoke(cli, [name, "--help"]).output


def _invoke(line: str):
    return CliRunner().invoke(cli, shlex.split(line)[1:])


TMP_DIR_COMMANDS = [(name, lines) for name, lines in help_examples() if _takes_tmp_dir(name)]


@pytest.mark.parametrize("name, lines", TMP_DIR_COMMANDS, ids=[n for n, _ in TMP_DIR_COMMANDS])
def test_every_command_refuses_a_missing_tmp_dir_before_any_work(name, lines, tmp_path, monkeypatch):
    """A --tmp-dir that does not exist is a usage error (exit 2, one line naming it) when it is
    given, not an internal error once the data is large enough to spill; an existing one takes
    the spilled runs and is left as it was."""
    for key, value in SPILL_EVERYTHING.items():
        monkeypatch.setenv(key, value)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    steps = [step.strip() for line in lines for step in in_workdir(line, work).split("&&")]
    own = next(i for i, step in enumerate(steps) if step.startswith(f"sptool {name} "))
    for step in steps[:own]:  # what the command's own example reads
        assert _invoke(step).exit_code == 0, step
    before = sorted(os.listdir(work))
    missing = tmp_path / "no" / "such"
    r = _invoke(f"{steps[own]} --tmp-dir {missing}")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and str(missing) in r.output, r.output
    assert sorted(os.listdir(work)) == before and not missing.parent.exists()
    spills = tmp_path / "spills"
    spills.mkdir()
    r = _invoke(f"{steps[own]} --tmp-dir {spills}")
    assert r.exit_code == 0, r.output
    assert os.listdir(spills) == []


def test_the_api_refuses_a_missing_tmp_dir_however_small_the_data(tmp_path, rng):
    t = random_tensor(rng, (6, 5), 12)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    with pytest.raises(sptool.UsageError, match="--tmp-dir") as e:
        sptool.reorder(src, str(tmp_path / "r.parquet"), perm=(1, 0), tmp_dir=str(tmp_path / "missing"))
    assert e.value.path == str(tmp_path / "missing") and not os.path.exists(tmp_path / "r.parquet")


def test_an_internal_error_under_debug_does_not_ask_for_debug(tmp_path, monkeypatch):
    """No input reaches an internal error any more, so one is made: with --debug the traceback is
    printed and the message does not tell the user to pass --debug; without it, it does."""
    import sptool.cli.reorder as command

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(command, "reorder_op", broken)
    t = random_tensor(np.random.default_rng(0), (4, 4), 5)
    src = str(tmp_path / "t.parquet")
    sptool.write(t, src)
    args = ["reorder", src, "-o", str(tmp_path / "r.parquet")]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 3 and "run with --debug" in plain.stderr
    debug = CliRunner().invoke(cli, ["--debug", *args])
    assert debug.exit_code == 3 and "Traceback" in debug.stderr and "RuntimeError: a bug" in debug.stderr
    assert "--debug" not in debug.stderr.strip().splitlines()[-1]


# -- arguments of the wrong type ---------------------------------------------------------------

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data")


def _sample(name: str) -> str:
    return os.path.join(SAMPLES, name)


T3, A, B = _sample("tensor3d.parquet"), _sample("matrix_a.parquet"), _sample("matrix_b.parquet")
IDS, WORDS = _sample("ids_numbers.parquet"), _sample("ids_words.parquet")

# (function, call(out, **keywords), valid keywords, the keyword given a wrong value, its kind)
WRONG_TYPES = [
    ("SparseTensor", lambda out, **k: sptool.SparseTensor([[1], [3]], [1, 1], **k), {"shape": [5]}, "shape", "shape"),
    ("write", lambda out, **k: sptool.write(sptool.read(A), out("w.parquet"), **k), {}, "batch_rows", "int"),
    ("info", lambda out, **k: sptool.info(A, **k), {}, "histogram", "int"),
    ("head", lambda out, **k: sptool.head(A, **k), {}, "count", "int"),
    ("convert", lambda out, **k: sptool.convert(_sample("tensor3d.tns"), out("c.parquet"), **k), {}, "shape", "shape"),
    ("convert", lambda out, **k: sptool.convert(_sample("tensor3d.tns"), out("c.parquet"), **k), {}, "index_base",
     "int"),
    ("convert", lambda out, **k: sptool.convert(_sample("digits.svm"), out("c.parquet"), **k), {}, "vocab_size", "int"),
    ("convert", lambda out, **k: sptool.convert(_sample("examples.tfrecord"), out("c.parquet"), ids="ids",
                                                values="values", **k), {"vocab_size": 20}, "vocab_size", "int"),
    ("convert", lambda out, **k: sptool.convert(None, out("c.parquet"), row_ids=_sample("grad_rows.npy"),
                                                row_values=_sample("grad_values.npy"), **k), {"height": 1000}, "height",
     "int"),
    ("reorder", lambda out, **k: sptool.reorder(T3, out("r.parquet"), **k), {}, "perm", "ints"),
    ("concat", lambda out, **k: sptool.concat([A, B], out("c.parquet"), **k), {"axis": 0}, "axis", "int"),
    ("split", lambda out, **k: sptool.split(T3, out("p{i}.parquet"), **k), {"axis": 0, "num_split": 2}, "axis", "int"),
    ("split", lambda out, **k: sptool.split(T3, out("p{i}.parquet"), **k), {"axis": 0, "num_split": 2}, "num_split",
     "int"),
    ("slice_", lambda out, **k: sptool.slice_(T3, out("s.parquet"), **k), {"start": [0, 0, 0], "size": [2, 2, 2]},
     "start", "ints"),
    ("slice_", lambda out, **k: sptool.slice_(T3, out("s.parquet"), **k), {"start": [0, 0, 0], "size": [2, 2, 2]},
     "size", "ints"),
    ("reshape", lambda out, **k: sptool.reshape(T3, out("r.parquet"), **k), {"shape": [1200, 20]}, "shape", "ints"),
    ("transpose", lambda out, **k: sptool.transpose(T3, out("t.parquet"), **k), {}, "perm", "ints"),
    ("reset_shape", lambda out, **k: sptool.reset_shape(T3, out("r.parquet"), **k), {}, "shape", "shape"),
    ("expand_dims", lambda out, **k: sptool.expand_dims(T3, out("e.parquet"), **k), {}, "axis", "int"),
    ("group", lambda out, **k: next(iter(sptool.group(T3, **k))), {"dims": [0]}, "dims", "ints"),
    ("reduce", lambda out, **k: sptool.reduce(T3, out("r.parquet"), op="sum", **k), {"axis": [0, 2]}, "axis", "axes"),
    ("to_indicator", lambda out, **k: sptool.to_indicator(IDS, out("i.parquet"), **k), {"vocab_size": 1000},
     "vocab_size", "int"),
    ("eye", lambda out, **k: sptool.eye(output=out("e.parquet"), **k), {"num_rows": 3}, "num_rows", "int"),
    ("eye", lambda out, **k: sptool.eye(output=out("e.parquet"), **k), {"num_rows": 3}, "num_columns", "int"),
    ("spy", lambda out, **k: sptool.spy(A, out("s.png"), **k), {}, "axis", "ints"),
    ("spy", lambda out, **k: sptool.spy(A, out("s.png"), **k), {}, "image_size", "ints"),
    ("merge", lambda out, **k: sptool.merge(IDS, IDS, out("m.parquet"), **k), {"vocab_size": 1000}, "vocab_size",
     "int"),
    ("cross_hashed", lambda out, **k: sptool.cross_hashed([IDS, WORDS], out("h.parquet"), **k), {"num_buckets": 10},
     "num_buckets", "int"),
    ("cross_hashed", lambda out, **k: sptool.cross_hashed([IDS, WORDS], out("h.parquet"), **k), {"num_buckets": 10},
     "hash_key", "int"),
    ("bincount", lambda out, **k: sptool.bincount(IDS, out("b.parquet"), **k), {}, "minlength", "int"),
    ("bincount", lambda out, **k: sptool.bincount(IDS, out("b.parquet"), **k), {}, "maxlength", "int"),
    ("bincount", lambda out, **k: sptool.bincount(IDS, out("b.parquet"), **k), {}, "axis", "int"),
    ("segment_sum", lambda out, **k: sptool.segment_sum(_sample("dense_b.npy"), out("s.npy"),
                                                        indices=_sample("segment_indices.npy"),
                                                        segment_ids=_sample("segment_ids.npy"), **k), {},
     "num_segments", "int"),
]
WRONG = {
    "int": ["x", [50, 31], 1.5, True, object()],
    "axes": ["x", [1.5], [[0]], {"a": 1}, object()],
    "ints": ["x", 5, [1.5, 2], [[5], [3]], ["a", 1], object()],
    "shape": ["x", 5, [1.5], [[5], [3]], ["a"], object()],
}


def test_wrong_types_cover_every_public_function_with_such_an_argument():
    """Each public function with a scalar-int, axis or shape-like keyword is in WRONG_TYPES."""
    import inspect

    names = {"axis", "axes", "num", "shape", "start", "size", "perm", "order", "dims", "n", "histogram", "batch_rows",
             "vocab_size", "num_rows", "num_columns", "minlength", "maxlength", "num_buckets", "hash_key", "count",
             "num_split", "image_size",
             "num_segments", "index_base", "n_features", "height"}
    listed = {(f, k) for f, _, _, k, _ in WRONG_TYPES}
    wanted = set()
    for name in sptool._API:
        obj = getattr(sptool, name)
        if callable(obj) and not isinstance(obj, type) or name == "SparseTensor":
            wanted |= {(name, k) for k in inspect.signature(obj).parameters if k in names}
    sums = {"segment_mean", "segment_sqrt_n"}  # segment_sum's own code path
    assert {w for w in wanted if w[0] not in sums} <= listed, sorted(wanted - listed)


@pytest.mark.parametrize("table, gradient, says", [
    (lambda: sptool.read(_sample("grad.parquet")), _sample("grad.parquet"), "table must be the path of a .npy file"),
    (None, 1.0, "not float"),
    (None, [1.0], "not float"),
])
def test_apply_refuses_operands_of_the_wrong_type(tmp_path, table, gradient, says):
    """The table is a .npy path (apply updates it in place); a gradient is a path, stream or
    SparseTensor: anything else is a usage error, the table untouched."""
    path = tmp_path / "emb.npy"
    shutil.copy(_sample("embeddings.npy"), path)
    before = path.read_bytes()
    with pytest.raises(sptool.UsageError, match=says):
        sptool.apply(table() if table else str(path), gradient, optimizer="sgd", lr=0.1)
    assert path.read_bytes() == before


@pytest.mark.parametrize("function, call, valid, key, kind", WRONG_TYPES,
                         ids=[f"{f}-{k}" for f, _, _, k, _ in WRONG_TYPES])
def test_a_wrongly_typed_argument_is_a_usage_error_naming_it(function, call, valid, key, kind, tmp_path):
    def out(name):
        return str(tmp_path / name)

    call(out, **valid)  # the valid call works, so that each refusal below is the argument's
    for wrong in WRONG[kind]:
        with pytest.raises(sptool.SptoolError) as e:
            call(out, **{**valid, key: wrong})
        assert isinstance(e.value, sptool.UsageError), (wrong, e.value)
        assert key in str(e.value) or "--" + key.replace("_", "-") in str(e.value), (wrong, str(e.value))
