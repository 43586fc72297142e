"""Help that fits a screen: every command's --help within 40 lines at 80 columns with two or
three examples, `sptool --help` too, and the detail in topics (`sptool help TOPIC`) whose text is
the same file the documentation site includes."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import tomllib

import pytest
from command_examples import ROOT, env_with_sptool, help_examples
from pty_terminal import Terminal, screen

from sptool.cli import COMMAND_KINDS, COMMANDS, cli
from sptool.cli.help import TOPICS, topic_source

SCREEN_LINES = 40
TOPIC_DIR = ROOT / "sptool" / "topics"


def _sptool(*args, columns="80") -> subprocess.CompletedProcess:
    env = dict(env_with_sptool(), COLUMNS=columns)
    return subprocess.run(["sptool", *args], env=env, capture_output=True, text=True, timeout=120)


def _plain(markdown: str) -> list[str]:
    """The words of a topic's Markdown as a reader sees them: no backquotes, any wrapping."""
    return markdown.replace("`", "").split()


@pytest.mark.parametrize("name", [*cli.list_commands(None), None])
def test_help_fits_a_screen_at_80_columns(name):
    p = _sptool(*([name] if name else []), "--help")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) <= SCREEN_LINES, (name, len(lines))


@pytest.mark.parametrize("name, lines", help_examples())
def test_every_command_shows_two_or_three_examples(name, lines):
    assert 2 <= len(lines) <= 3, (name, lines)


def test_the_group_help_names_every_command_once():
    named = [n for _, names in COMMAND_KINDS for n in names]
    assert sorted(named) == sorted(COMMANDS), set(named) ^ set(COMMANDS)
    text = _sptool("--help").stdout
    for name in COMMANDS:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name
    for topic in TOPICS:
        assert topic in text


@pytest.mark.parametrize("topic", TOPICS)
def test_help_topic_prints_the_shipped_file_in_a_pipe(topic):
    p = _sptool("help", topic)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith(f"sptool help {topic}: ")
    assert p.stdout.split() == [*f"sptool help {topic}: {TOPICS[topic]}".split(), *_plain(topic_source(topic))]
    assert topic_source(topic) == (TOPIC_DIR / f"{topic}.md").read_text()


@pytest.mark.parametrize("topic", TOPICS)
def test_help_topic_in_a_terminal(topic, tmp_path):
    term = Terminal(["sptool", "help", topic], cwd=tmp_path)
    assert term.finish() == 0, term.text
    shown = screen(bytes(term.output))
    assert shown[0].startswith(f"sptool help {topic}: ") and "\x1b" not in "".join(shown)
    assert " ".join(shown).split()[-8:] == _plain(topic_source(topic))[-8:]


def test_an_unknown_topic_is_a_usage_error_naming_the_topics(tmp_path):
    p = _sptool("help", "memroy")
    assert p.returncode == 2 and p.stdout == ""
    assert "No such command or topic 'memroy'. Did you mean 'memory'?" in p.stderr
    assert all(topic in p.stderr for topic in TOPICS)
    term = Terminal(["sptool", "help", "nothing-like-it"], cwd=tmp_path)
    assert term.finish() == 2
    text = " ".join(screen(bytes(term.output)))
    assert "No such command or topic 'nothing-like-it'." in text and all(topic in text for topic in TOPICS)


def test_help_lists_the_commands_with_summaries_and_the_topics():
    p = _sptool("help")
    assert p.returncode == 0
    for name in COMMANDS:
        assert re.search(rf"^  {re.escape(name)} +\S", p.stdout, flags=re.M), name
    for topic, what in TOPICS.items():
        assert re.search(rf"^  {re.escape(topic)} +{re.escape(what)}$", p.stdout, flags=re.M), topic
    assert _sptool("help", "reorder").stdout == _sptool("reorder", "--help").stdout


def test_topics_ship_in_the_wheel_and_no_other_topic_file_exists():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sptool"]
    files = sorted(p.name for p in TOPIC_DIR.iterdir())
    assert files == sorted(f"{t}.md" for t in TOPICS)
    for name in files:
        assert any(fnmatch.fnmatch(f"topics/{name}", pattern) for pattern in patterns), name


def test_docs_include_each_topic_rather_than_copy_it():
    page = (ROOT / "docs" / "topics.md").read_text()
    for topic in TOPICS:
        assert f'--8<-- "sptool/topics/{topic}.md"' in page
        first_line = topic_source(topic).splitlines()[0]
        copies = [p for p in (ROOT / "docs").rglob("*.md") if first_line in p.read_text()]
        assert not copies, (topic, copies)


def test_convert_names_each_option_its_help_leaves_to_the_formats_topic():
    command = cli.get_command(None, "convert")
    hidden = [o for o in command.params if getattr(o, "hidden", False) and o.name not in
              ("memory", "quiet", "debug", "json_summary")]
    text, topic = _sptool("convert", "--help").stdout, topic_source("formats")
    assert hidden
    for option in hidden:
        for flag in option.opts + option.secondary_opts:
            assert flag in text and flag in topic, flag


def test_cluster_topic_names_every_command_that_runs_on_a_cluster():
    from sptool.cli._cluster import DISTRIBUTED

    topic = topic_source("cluster")
    assert all(f"`{name}`" in topic for name in DISTRIBUTED), sorted(DISTRIBUTED)


def test_readme_points_at_the_help_topics():
    readme = (ROOT / "README.md").read_text()
    assert "sptool help" in readme and all(topic in readme for topic in TOPICS)
    assert len(readme.splitlines()) <= 200


def test_topics_fit_80_columns():
    for topic in TOPICS:
        long = [ln for ln in topic_source(topic).splitlines() if len(ln) > 78]
        assert not long, (topic, long)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    import importlib.util
    import sys

    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(out)], cwd=out, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return out


def test_the_site_shows_every_topic(site):
    html = (site / "topics" / "index.html").read_text()
    words = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    for topic in TOPICS:
        assert f'id="{topic}"' in html
        last_sentence = " ".join(_plain(topic_source(topic))[-6:])
        assert last_sentence in words.replace("&quot;", '"').replace("&#39;", "'"), (topic, last_sentence)
