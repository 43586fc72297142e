"""One vocabulary: every option of every command is declared from sptool/_vocabulary.py, no
spelling names two concepts, no concept has two spellings, and the old spellings still work
(hidden from --help, warned about once per process) with the same results as the new ones,
checked against NumPy, pyarrow and scikit-learn."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from collections import defaultdict

import click
import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from command_examples import ROOT

import sptool
from sptool._vocabulary import VOCABULARY
from sptool.cli import COMMANDS, cli
from sptool.cli._vocabulary import with_new_spellings

SAMPLES = ROOT / "sample_data"
TENSOR3D = str(SAMPLES / "tensor3d.parquet")


def all_commands() -> dict[str, click.Command]:
    """Every registered command, loaded (the group loads them lazily), and the group itself."""
    found = {name: cli.get_command(None, name) for name in cli.list_commands(None)}
    return {"sptool": cli, **found}


def options_of(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name != "help"]


def concept_of(option: click.Option) -> str:
    return getattr(option, "concept", option.name)


def spelling_clashes(commands: dict[str, click.Command]) -> list[str]:
    """Spellings that name two concepts, and concepts spelled two ways, across ``commands``."""
    concepts, spellings = defaultdict(set), defaultdict(set)
    for name, command in commands.items():
        for option in options_of(command):
            for flag in option.opts + option.secondary_opts:
                concepts[flag].add((concept_of(option), name))
            spellings[concept_of(option)].add(tuple(option.opts + option.secondary_opts))
    problems = [f"{flag} names {sorted(set(c for c, _ in uses))} in {sorted(set(n for _, n in uses))}"
                for flag, uses in concepts.items() if len({c for c, _ in uses}) > 1]
    problems += [f"{concept} is spelled {sorted(spelled)}" for concept, spelled in spellings.items()
                 if len(spelled) > 1]
    return problems


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_every_option_is_declared_from_the_vocabulary():
    untagged = [f"{name} {option.opts[-1]}" for name, command in all_commands().items()
                for option in options_of(command)
                if not hasattr(option, "concept") or tuple(option.opts + option.secondary_opts) !=
                tuple(f for flag in VOCABULARY[option.concept].flags for f in flag.split("/"))]
    assert not untagged, untagged


def test_no_spelling_names_two_concepts_and_no_concept_has_two_spellings():
    assert spelling_clashes(all_commands()) == []


def test_the_clash_check_can_fail():
    """What the vocabulary replaced: -n for a count of entries in one command and of pieces in
    another, one concept under two names."""
    head = click.Command("head", params=[click.Option(["-n", "--rows", "n"])])
    split = click.Command("split", params=[click.Option(["--num", "-n"]), click.Option(["--dtype", "value_type"])])
    eye = click.Command("eye", params=[click.Option(["--value-type"])])
    problems = spelling_clashes({"head": head, "split": split, "eye": eye})
    assert "-n names ['n', 'num'] in ['head', 'split']" in problems
    assert "value_type is spelled [('--dtype',), ('--value-type',)]" in problems


def test_the_vocabulary_spells_each_concept_once():
    flags = [f for w in VOCABULARY.values() for flag in w.flags for f in flag.split("/")]
    assert len(flags) == len(set(flags))
    for w in VOCABULARY.values():
        for command, old in w.old_flags.items():
            assert command in COMMANDS and not set(old) & set(w.flags), (w.name, command)
        for function, old in w.old_keywords.items():
            assert function in sptool._API and w.name not in old, (w.name, function)


def test_old_spellings_do_not_shadow_a_commands_own():
    for name, command in all_commands().items():
        spelled = {f for option in options_of(command) for f in option.opts + option.secondary_opts}
        for option in options_of(command):
            assert not set(option.old_spellings(name)) & spelled, (name, option.name)


def test_old_spellings_are_hidden_from_help():
    for name, command in all_commands().items():
        if name == "sptool":
            continue
        text = invoke(name, "--help").output
        for option in options_of(command):
            for old in option.old_spellings(name):
                assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", text), (name, old)


def _stderr_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if "deprecated" in line]


def test_head_rows_is_count(tmp_path):
    table = pq.read_table(TENSOR3D)
    first = np.stack([table.column(k).to_numpy()[:4] for k in range(3)], axis=1)
    for args in (["-n", "4"], ["--count", "4"], ["--rows", "4"], ["-n4"], ["--rows=4"]):
        r = invoke("head", TENSOR3D, "--json", *args)
        assert r.exit_code == 0, r.output
        got = [line for line in r.stdout.splitlines() if line.startswith("{")]
        assert [eval(line.replace("true", "True"))["index"] for line in got] == first.tolist(), args
        if "--rows" in args[0]:
            assert _stderr_lines(r) in ([], ["sptool: `head --rows` is deprecated and will go; use --count"])


def test_split_num_is_num_split(tmp_path):
    dense = sptool.todense(TENSOR3D)
    for flag in ("--num-split", "--num", "-n"):
        out = tmp_path / flag.strip("-")
        r = invoke("split", TENSOR3D, "--axis", "1", flag, "4", "-o", f"{out}-{{i}}.parquet")
        assert r.exit_code == 0, r.output
        pieces = [sptool.todense(f"{out}-{i}.parquet") for i in range(4)]
        for got, want in zip(pieces, np.array_split(dense, 4, axis=1)):
            np.testing.assert_array_equal(got, want)


def test_reorder_order_is_perm(tmp_path):
    table = pq.read_table(str(SAMPLES / "unsorted.parquet"))
    cols = [table.column(k).to_numpy() for k in range(table.num_columns - 1)]
    want = np.lexsort([cols[2], cols[0], cols[1]])  # by dimension 1, then 0, then 2
    for flag in ("--perm", "--order"):
        out = tmp_path / f"{flag.strip('-')}.parquet"
        assert invoke("reorder", SAMPLES / "unsorted.parquet", flag, "1,0,2", "-o", out).exit_code == 0
        got = pq.read_table(str(out))
        for k in range(3):
            np.testing.assert_array_equal(got.column(k).to_numpy(), cols[k][want])


def test_convert_value_type_is_dtype(tmp_path):
    for flag in ("--dtype", "--value-type"):
        out = tmp_path / f"{flag.strip('-')}.parquet"
        assert invoke("convert", SAMPLES / "tensor3d.tns", "-o", out, flag, "float32").exit_code == 0
        assert sptool.read(str(out)).values.dtype == np.float32


def test_convert_n_features_is_vocab_size(tmp_path):
    from sklearn.datasets import load_svmlight_file

    want, _ = load_svmlight_file(str(SAMPLES / "digits.svm"), n_features=80)
    for flag in ("--vocab-size", "--n-features"):
        out = tmp_path / f"{flag.strip('-')}.parquet"
        r = invoke("convert", SAMPLES / "digits.svm", "-o", out, flag, "80")
        assert r.exit_code == 0, r.output
        np.testing.assert_array_equal(sptool.todense(str(out)), want.toarray())


def test_convert_old_row_sparse_spellings(tmp_path):
    rows, blocks = np.load(SAMPLES / "grad_rows.npy"), np.load(SAMPLES / "grad_values.npy")
    height = int(rows.max()) + 3
    want = np.zeros((height,) + blocks.shape[1:], blocks.dtype)
    np.add.at(want, rows, blocks)
    spellings = (["--row-ids", "R", "--row-values", "V"], ["--rows", "R", "--values", "V"])
    for k, spelled in enumerate(spellings):
        args = [{"R": SAMPLES / "grad_rows.npy", "V": SAMPLES / "grad_values.npy"}.get(a, a) for a in spelled]
        out = tmp_path / f"{k}.parquet"
        r = invoke("convert", "-o", out, "--height", height, *args)
        assert r.exit_code == 0, r.output
        np.testing.assert_allclose(sptool.todense(str(out)), want)


def test_spy_axes_and_size(tmp_path):
    new = invoke("spy", TENSOR3D, "--axis", "0,2", "--image-size", "20x10")
    old = invoke("spy", TENSOR3D, "--axes", "0,2", "--size", "20x10")
    assert new.exit_code == old.exit_code == 0
    assert new.stdout == old.stdout and "indices_2" in new.stdout


def test_fill_empty_rows_value_is_default_value(tmp_path):
    t = sptool.read(str(SAMPLES / "rowsparse.parquet"))
    assert t.sparse_ndim == 1  # a hybrid tensor: an empty row gets a whole block of the value
    want = sptool.todense(t)
    want[np.setdiff1d(np.arange(t.shape[0]), t.indices[:, 0])] = 7
    for flag in ("--default-value", "--value"):
        out = tmp_path / f"{flag.strip('-')}.parquet"
        assert invoke("fill-empty-rows", SAMPLES / "rowsparse.parquet", flag, "7", "-o", out).exit_code == 0
        np.testing.assert_array_equal(sptool.todense(str(out)), want)


def test_an_old_spelling_warns_once_per_process(tmp_path):
    code = (
        "from click.testing import CliRunner\n"
        "from sptool.cli import cli\n"
        f"for i in range(3):\n"
        f"    r = CliRunner().invoke(cli, ['head', {TENSOR3D!r}, '--rows', '2'])\n"
        "    assert r.exit_code == 0\n"
        "    print(r.stderr, end='')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert p.stdout.splitlines() == ["sptool: `head --rows` is deprecated and will go; use --count"]


def test_rewriting_leaves_values_and_the_rest_alone():
    command = cli.get_command(None, "split")
    args = ["T", "-m", "--num", "--num", "3", "-n2", "--", "--num"]
    assert with_new_spellings("split", command, args) == ["T", "-m", "--num", "--num-split", "3", "--num-split=2",
                                                          "--", "--num"]


# The Python API: old keywords work with a DeprecationWarning, output defaults to None.

def test_api_old_keywords_warn_and_agree():
    dense = sptool.todense(TENSOR3D)
    with pytest.warns(DeprecationWarning, match="'order' is now 'perm'"):
        old = sptool.reorder(TENSOR3D, order=[2, 1, 0])
    new = sptool.reorder(TENSOR3D, perm=[2, 1, 0])
    np.testing.assert_array_equal(old.indices, new.indices)
    order = np.lexsort([new.indices[:, k] for k in (0, 1, 2)])
    np.testing.assert_array_equal(order, np.arange(new.nnz))
    with pytest.warns(DeprecationWarning, match="'num' is now 'num_split'"):
        pieces = sptool.split(TENSOR3D, axis=0, num=3)
    for got, want in zip(pieces, np.array_split(dense, 3, axis=0)):
        np.testing.assert_array_equal(sptool.todense(got), want)
    with pytest.warns(DeprecationWarning, match="'n' is now 'count'"):
        idx, _, _ = sptool.head(TENSOR3D, n=5)
    assert idx.shape == (5, 3)
    with pytest.raises(TypeError, match="both 'perm' and its old name 'order'"):
        sptool.reorder(TENSOR3D, perm=[0, 1, 2], order=[0, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sptool.reorder(TENSOR3D, perm=[0, 1, 2])  # the new keyword warns nothing


def test_transpose_with_a_keyword_and_no_output():
    """The README's example, without the positional None it needed."""
    t = sptool.transpose(TENSOR3D, perm=[2, 0, 1])
    assert isinstance(t, sptool.SparseTensor)
    np.testing.assert_array_equal(sptool.todense(t), np.transpose(sptool.todense(TENSOR3D), (2, 0, 1)))


def test_dense_results_are_returned_without_output():
    t = sptool.read(TENSOR3D)
    want = np.zeros(t.shape)
    np.add.at(want, tuple(t.indices.T), t.values)
    np.testing.assert_array_equal(sptool.todense(TENSOR3D), want)
    data = np.load(SAMPLES / "dense_b.npy")
    idx, seg = np.load(SAMPLES / "segment_indices.npy"), np.load(SAMPLES / "segment_ids.npy")
    summed = np.zeros((seg.max() + 1,) + data.shape[1:], data.dtype)
    np.add.at(summed, seg, data[idx])
    got = sptool.segment_sum(str(SAMPLES / "dense_b.npy"), indices=idx, segment_ids=seg)
    np.testing.assert_allclose(got, summed)


def test_convert_returns_a_tensor_without_output():
    t = sptool.convert(str(SAMPLES / "tensor3d.tns"))
    np.testing.assert_array_equal(sptool.todense(t), sptool.todense(TENSOR3D))

