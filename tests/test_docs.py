"""The documentation site: it builds in strict mode with every command and public function in its
references, and the guides' runnable examples run and print what the pages say.

A guide marks a fenced bash or python block as runnable with the line `<!-- runnable -->` (or
`<!-- runnable exit=N -->`) before it; a ```text block after it, marked `<!-- output -->`, is its
expected standard output.  A page's blocks run in order in one temporary directory holding the
samples, with /tmp/ paths moved into it (command_examples.in_workdir).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time

import pytest
from command_examples import ROOT, env_with_sptool, in_workdir

DOCS = ROOT / "docs"
MARK = re.compile(r"^<!-- runnable[^>]*-->$", re.M)
RUNNABLE = re.compile(
    r"^<!-- runnable(?: exit=(?P<exit>\d+))? -->\n```(?P<language>bash|python)\n(?P<code>.*?)```\n"
    r"(?:\n<!-- output -->\n```text\n(?P<output>.*?)```\n)?",
    re.S | re.M,
)
# The width the pages' outputs were taken at: Rich wraps tables to the terminal's columns.
COLUMNS = "100"


def runnable_blocks(page) -> list[re.Match]:
    text = page.read_text()
    blocks = list(RUNNABLE.finditer(text))
    assert len(blocks) == len(MARK.findall(text)), f"{page.name}: a runnable mark before no bash or python block"
    return blocks


def guides():
    return sorted(page for page in DOCS.rglob("*.md") if MARK.search(page.read_text()))


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip("\n").splitlines()]


def _run(block: re.Match, workdir) -> subprocess.CompletedProcess:
    code = in_workdir(block["code"], workdir)
    argv = (["bash", "-e", "-o", "pipefail", "-c", code] if block["language"] == "bash"
            else [sys.executable, "-c", code])
    env = dict(env_with_sptool(), COLUMNS=COLUMNS)
    return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("page", guides(), ids=lambda page: str(page.relative_to(DOCS)))
def test_guide_examples_run_and_print_what_the_page_says(page, tmp_path):
    for block in runnable_blocks(page):
        p = _run(block, tmp_path)
        where = f"{page.name}: {block['code'].splitlines()[0]}"
        assert p.returncode == int(block["exit"] or 0), (where, p.stdout, p.stderr)
        if block["output"] is not None:
            shown = p.stdout.replace(str(tmp_path) + "/", "/tmp/")
            assert _lines(shown) == _lines(block["output"]), where


def test_the_guides_have_runnable_examples():
    names = {page.name for page in guides()}
    assert {"getting-started.md", "pipelines.md", "ci.md", "row-sparse.md", "python.md"} <= names, names


def test_api_page_documents_every_public_name():
    """Each name `sptool` exports is rendered from the module that defines it."""
    import sptool

    shown = set(re.findall(r"^::: sptool\.([\w.]+)$", (DOCS / "api.md").read_text(), flags=re.M))
    want = {f"{module}.{name}" for name, module in sptool._API.items()}
    assert want <= shown, sorted(want - shown)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    started = time.monotonic()
    # Run from elsewhere than the checkout: the build must not depend on the working directory.
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(out)], cwd=out, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    print(f"mkdocs build --strict: {time.monotonic() - started:.1f} s")
    return out


def test_cli_reference_has_every_command(site):
    from sptool.cli import COMMANDS

    page = (site / "cli" / "index.html").read_text()
    missing = [name for name in COMMANDS if f'id="sptool-{name}"' not in page]
    assert not missing, missing
    # Each command's example block is rendered as code, not run into a paragraph.
    assert "<code>sptool validate sample_data/tensor3d.parquet sample_data/digits.parquet" in page


def test_api_reference_renders_every_public_name(site):
    import sptool

    page = (site / "api" / "index.html").read_text()
    missing = [name for name, module in sptool._API.items() if f'id="sptool.{module}.{name}"' not in page]
    assert not missing, missing


def test_performance_page_shows_the_benchmark_tables_once(site):
    source = (ROOT / "benchmarks" / "README.md").read_text()
    header = next(line for line in source.splitlines() if line.startswith("| benchmark |"))
    assert header not in (DOCS / "performance.md").read_text()  # included, not copied
    page = (site / "performance" / "index.html").read_text()
    assert "<th>benchmark</th>" in page and "Peak memory per command" in page


def test_spec_is_on_the_site_from_formats(site):
    page = (site / "spec" / "SPEC" / "index.html").read_text()
    assert "sptool COO tensor format" in page and (site / "spec" / "metadata.schema.json").exists()
