"""docs/tensorflow.md names only commands, options and functions that exist."""

from __future__ import annotations

import re
from pathlib import Path

import sptool
from sptool.cli import COMMANDS, cli

PAGE = Path(__file__).resolve().parent.parent / "docs" / "tensorflow.md"


def _rows():
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| `") and len(cells) == 3:
            yield cells


def test_every_command_option_and_function_exists():
    import click

    rows = list(_rows())
    assert len(rows) >= 30
    checked = 0
    for _, ours, _ in rows:
        for code in re.findall(r"`([^`]+)`", ours):
            if code.startswith("sptool."):
                name = code.split(".", 1)[1]
                if not name.endswith("*"):
                    assert hasattr(sptool, name), code
                    checked += 1
                continue
            word = code.split()[0]
            if word not in COMMANDS:
                continue  # a file name such as formats/SPEC.md
            command = cli.get_command(click.Context(cli), word)
            options = {o for p in command.params for o in getattr(p, "opts", [])}
            for option in re.findall(r"--[a-z-]+", code):
                assert option in options, (word, option)
            checked += 1
    assert checked >= 40


# The functions of tf.sparse in TensorFlow 2.x's API index (tensorflow.org/api_docs/python/tf/sparse).
TF_SPARSE = """add bincount concat cross cross_hashed expand_dims eye fill_empty_rows from_dense map_values mask
maximum minimum reduce_max reduce_sum reorder reset_shape reshape retain sampled_addmm segment_mean
segment_sqrt_n segment_sum slice softmax sparse_dense_matmul split to_dense to_indicator transpose""".split()


def test_every_tf_sparse_function_has_a_row():
    named = set()
    for theirs, _, _ in _rows():
        named.update(re.findall(r"`([a-z_]+)`", theirs))
    assert sorted(set(TF_SPARSE) - named) == []
