"""Side outputs of a conversion (labels, query ids) follow the output: in place, with what
scikit-learn (svmlight) or the json module (JSON lines) reads from the input, when it succeeds;
gone, with the output and every temporary file, when a later line fails."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import sptool
from sptool import DataError

GOOD_SVM = "1 qid:3 1:0.5 4:2\n-1 qid:3 2:1.5\n2.5 qid:7 1:1 3:-1\n"
GOOD_JSONL = ('{"ids": [1, 4], "values": [0.5, 2.0], "label": 1}\n'
              '{"ids": [2], "values": [1.5], "label": -1}\n'
              '{"ids": [1, 3], "values": [1.0, -1.0], "label": 2.5}\n')


def test_svmlight_labels_and_query_ids_follow_the_output(tmp_path):
    src = tmp_path / "in.svm"
    src.write_text(GOOD_SVM)
    sptool.convert(str(src), str(tmp_path / "X.parquet"), labels=str(tmp_path / "y.npy"),
                   query_id=str(tmp_path / "q.npy"))
    _, y, qid = pytest.importorskip("sklearn.datasets").load_svmlight_file(str(src), query_id=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y)
    np.testing.assert_array_equal(np.load(tmp_path / "q.npy"), qid)
    assert sorted(os.listdir(tmp_path)) == ["X.parquet", "in.svm", "q.npy", "y.npy"]


def test_jsonl_labels_follow_the_output(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(GOOD_JSONL)
    sptool.convert(str(src), str(tmp_path / "X.parquet"), labels=str(tmp_path / "y.npy"))
    expected = [json.loads(line)["label"] for line in GOOD_JSONL.splitlines()]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.array(expected, dtype=np.float64))
    assert sorted(os.listdir(tmp_path)) == ["X.parquet", "in.jsonl", "y.npy"]


@pytest.mark.parametrize("fmt", ["svm", "jsonl"])
def test_a_late_bad_line_leaves_no_side_output(tmp_path, fmt):
    good, bad = (GOOD_SVM, "1 qid:9 x:1\n") if fmt == "svm" else (GOOD_JSONL, '{"ids": [1], "values": "x"}\n')
    src = tmp_path / f"in.{fmt}"
    src.write_text(good * 50 + bad)
    extra = {"query_id": str(tmp_path / "q.npy")} if fmt == "svm" else {}
    with pytest.raises(DataError, match=f"line {50 * len(good.splitlines()) + 1}"):
        sptool.convert(str(src), str(tmp_path / "X.parquet"), labels=str(tmp_path / "y.npy"), **extra)
    assert os.listdir(tmp_path) == [f"in.{fmt}"]
