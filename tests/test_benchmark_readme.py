"""benchmarks/readme_table.py: the README's current results table is made from run.py's results
file, every tool's figures in it, and nothing outside its markers touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)
import readme_table  # noqa: E402


def _doc(rng_seed: int) -> dict:
    """A results document shaped as run.py writes it (_write_results), with figures from a seed."""
    import random

    r = random.Random(rng_seed)

    def tool(name):
        runs = [r.uniform(0.1, 9) for _ in range(3)]
        return {"tool": name, "argv": ["x"], "seconds": runs, "best": min(runs), "median": sorted(runs)[1],
                "cpu_median": r.uniform(0.1, 9), "max_rss": r.randrange(2**20, 2**33), "ratio": None}

    results = []
    for bench in ("reorder", "reduce"):
        tools = [tool("sptool"), tool("duckdb"), tool("polars")]
        for t in tools[1:]:
            t["ratio"] = t["median"] / tools[0]["median"]
        results.append({"benchmark": bench, "description": "", "target": "", "tools": tools})
    results.append({"benchmark": "graphblas", "skipped": "python-graphblas is not installed"})
    return {"size": "small", "repeat": 3, "started": "2026-11-29T12:00:00+0000", "elapsed_seconds": 1.0,
            "machine": {"nproc": 2, "cpu": "test cpu", "ram_bytes": 24 * 2**30, "platform": "linux",
                        "python": "3.11.7", "load_average": [0.5, 0.4, 0.3],
                        "versions": {"sptool": "0.1.0", "numpy": "2", "pyarrow": "26"}},
            "load_average_now": [0.5, 0.4, 0.3], "results": results}


def _table_rows(text: str) -> list[list[str]]:
    block = text.split(readme_table.BEGIN, 1)[1].split(readme_table.END, 1)[0]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in block.splitlines()
            if ln.startswith("| ") and not ln.startswith("| benchmark |")]


@pytest.mark.parametrize("seed", [1, 2])
def test_every_tools_figures_are_in_the_table(tmp_path, seed):
    doc = _doc(seed)
    results = tmp_path / "latest.json"
    results.write_text(json.dumps(doc))
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n\nProse above.\n")
    subprocess.run([sys.executable, os.path.join(BENCH, "readme_table.py"), str(results), "--readme", str(readme)],
                   check=True, capture_output=True)
    rows = _table_rows(readme.read_text())
    want = []
    for r in doc["results"]:
        if "skipped" in r:
            want.append([r["benchmark"], f"skipped: {r['skipped']}", "", "", "", ""])
            continue
        for i, t in enumerate(r["tools"]):
            ratio = "" if t["ratio"] is None else f"{t['ratio']:.2f}x"
            want.append([r["benchmark"] if i == 0 else "", t["tool"], f"{t['median']:.2f}", ratio,
                         f"{t['cpu_median']:.2f}", f"{t['max_rss'] / 2**20:,.0f} MiB"])
    assert rows == want
    assert readme.read_text().startswith("# Benchmarks\n\nProse above.\n")


def test_a_new_run_replaces_only_the_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# B\n\nbefore\n\n{readme_table.BEGIN}\nold table\n{readme_table.END}\n\nafter\n")
    for seed in (3, 4):
        readme_table.update(str(readme), readme_table.markdown([_doc(seed)]))
        text = readme.read_text()
        assert text.startswith("# B\n\nbefore\n\n") and text.endswith(f"{readme_table.END}\n\nafter\n")
        assert "old table" not in text and text.count(readme_table.BEGIN) == 1
        assert _table_rows(text)[0][2] == f"{_doc(seed)['results'][0]['tools'][0]['median']:.2f}"
    assert os.listdir(tmp_path) == ["README.md"]
