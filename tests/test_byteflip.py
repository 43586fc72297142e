"""A fixed-seed slice of the byte-flip table (tests/byteflip.py): bytes flipped in the pages and
footer of sptool-written files are detected by every command, or the answer is NumPy's on the
undamaged file; and the regions the flips land in are where pyarrow's footer puts them."""

from __future__ import annotations

import random

import byteflip
import numpy as np
import pyarrow.parquet as pq

import sptool


def test_regions_are_the_pages_and_footer_pyarrow_describes(tmp_path):
    path = str(tmp_path / "s.parquet")
    idx = np.array([[0, 0, 1], [1, 2, 3], [4, 5, 6]])
    sptool.write(sptool.SparseTensor(idx, np.array(["a", "b", "a"], dtype=object), (5, 6, 7)), path)
    spans = byteflip.regions(path)
    md = pq.read_metadata(path)
    assert sorted(spans) == sorted(byteflip.REGIONS)
    assert len(spans["index pages"]) == 3 and len(spans["values pages"]) == 1
    with open(path, "rb") as f:
        data = f.read()
    assert data[spans["footer"][0][1]:] == len(data[spans["footer"][0][0]:-8]).to_bytes(4, "little") + b"PAR1"
    values = md.row_group(0).column(3)
    assert spans["dictionary page"] == [(values.dictionary_page_offset, values.data_page_offset)]
    damaged, where = byteflip.flip(data, spans["footer"], random.Random(1))
    assert 1 <= len(where) <= 4 and all(spans["footer"][0][0] <= w < spans["footer"][0][1] for w in where)
    assert sum(a != b for a, b in zip(data, damaged)) == len(set(where)) or len(set(where)) < len(where)


def test_byteflip_slice(tmp_path):
    report = byteflip.table(seed=20261124, trials=6, work=str(tmp_path), value_types=("float64", "string"))
    assert set(report["commands"]["float64"]) == set(byteflip.COMMANDS)  # every command has an oracle
    runs = sum(row["runs"] for row in report["table"].values())
    assert runs >= 6 * 3
    assert report["wrong"] == [], report["wrong"][:3]
