"""Pages of a memory-mapped .npy given back to the OS (io.release), judged by the kernel's own
count of the process's resident pages of that file (/proc/self/smaps)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from sptool.io import open_npy, release

MIB = 1 << 20

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")


def resident_bytes(path: str) -> int:
    """Bytes of ``path`` resident in this process's maps, as the kernel counts them."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                inside = line.rstrip().endswith(os.path.realpath(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total


def test_release_gives_back_the_pages_of_a_written_map_and_keeps_its_data(tmp_path):
    path = str(tmp_path / "a.npy")
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(2048, 1024))
    out[:] = np.arange(out.shape[1])  # every page touched and dirty
    assert resident_bytes(path) >= 15 * MIB
    release(out[3:])  # a view: its memory map found through its bases
    assert resident_bytes(path) < MIB
    del out
    back = np.load(path)
    np.testing.assert_array_equal(back, np.broadcast_to(np.arange(1024, dtype=np.float64), (2048, 1024)))


def test_release_gives_back_the_pages_of_a_read_map(tmp_path):
    path = str(tmp_path / "b.npy")
    np.save(path, np.ones((4096, 512), np.float32))
    arr = open_npy(path)
    assert float(arr.sum(dtype=np.float64)) == 4096 * 512
    assert resident_bytes(path) >= 7 * MIB
    release(arr)
    assert resident_bytes(path) < MIB


def test_release_leaves_an_array_in_memory_alone():
    arr = np.ones(1000)
    release(arr)
    assert arr.sum() == 1000


def test_release_rows_gives_back_the_pages_of_those_rows_only(tmp_path):
    """apply's journal gives the pages of the rows it has passed back, and no others."""
    from sptool.rowsparse.journal import as_rows, release_rows

    path = str(tmp_path / "t.npy")
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(4096, 1024))  # a row a page
    out[:] = 1
    page = os.sysconf("SC_PAGE_SIZE")
    before = resident_bytes(path)
    assert before >= 4096 * 4096
    release_rows([as_rows(out)], np.arange(1024, 3072))
    # The rows' 2048 pages, and the one the data's offset past the header makes them straddle.
    assert abs((before - resident_bytes(path)) - 2048 * 4096) <= page
    assert float(out[:1024].sum()) + float(out[3072:].sum()) == 2048 * 1024  # the rest read back unchanged
    del out
    assert float(np.load(path).sum(dtype=np.float64)) == 4096 * 1024
