"""The current results table of benchmarks/README.md, made from a results file of run.py.

    python benchmarks/readme_table.py [RESULTS.json ...] [--readme PATH]

run.py --readme does the same at the end of a run.  The table replaces what stands between the
README's two markers (one row per tool, the sptool row first); the rest of the README is prose
written by hand.  Several results files (one per family run) make one table, in the order given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "README.md")
BEGIN = "<!-- current results: made by benchmarks/run.py --readme; edits between these markers are lost -->"
END = "<!-- end of current results -->"


def _mib(n) -> str:
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def _machine_line(doc: dict) -> str:
    m, v = doc["machine"], doc["machine"]["versions"]
    load = ", ".join(f"{x:.2f}" for x in m["load_average"])
    return (f"`--size {doc['size']}`, median of {doc['repeat']} runs, started {doc['started']}: {m['nproc']} CPUs "
            f"({m['cpu']}), {m['ram_bytes'] / 2**30:.1f} GiB RAM, Python {m['python']}, sptool {v['sptool']}, "
            f"numpy {v['numpy']}, pyarrow {v['pyarrow']}; load average at the start {load}.")


def _rows(doc: dict) -> list[str]:
    rows = []
    for r in doc["results"]:
        if r.get("skipped"):
            rows.append(f"| {r['benchmark']} | skipped: {r['skipped']} | | | | |")
            continue
        for i, t in enumerate(r["tools"]):
            secs = "failed" if t["median"] is None else f"{t['median']:.2f}"
            ratio = "" if t.get("ratio") is None else f"{t['ratio']:.2f}x"
            cpu = "" if t.get("cpu_median") is None else f"{t['cpu_median']:.2f}"
            rows.append(f"| {r['benchmark'] if i == 0 else ''} | {t['tool']} | {secs} | {ratio} | {cpu} | "
                        f"{_mib(t.get('max_rss'))} |")
    return rows


def markdown(docs: list[dict]) -> str:
    """The table (and a line on the machine of each run) of one or more results documents."""
    lines = [_machine_line(d) for d in docs]
    lines += ["", "| benchmark | tool | seconds | ratio | CPU s | peak RSS |", "|---|---|---|---|---|---|"]
    for d in docs:
        lines += _rows(d)
    lines += ["", "ratio = peer seconds / sptool seconds (above 1: sptool faster)."]
    return "\n".join(lines)


def update(readme: str, table: str) -> None:
    """Put ``table`` between the README's markers (a section at its end if it has none), written
    whole to a temporary and renamed over it."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## Latest run\n\n{block}\n"
    tmp = f"{readme}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, readme)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="*", default=[os.path.join(HERE, "results", "latest.json")])
    p.add_argument("--readme", default=README)
    args = p.parse_args(argv)
    docs = []
    for path in args.results:
        with open(path, encoding="utf-8") as f:
            docs.append(json.load(f))
    update(args.readme, markdown(docs))
    print(f"{os.path.relpath(args.readme)}: current results from {', '.join(args.results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
