"""MkDocs hooks for sptool's site (mkdocs.yml names this file).

- The command line's group loads its commands lazily, so mkdocs-click would see only `help`:
  listing them once registers every command before the CLI reference is rendered. Click's
  verbatim blocks (a line holding only \\b, then lines kept as they are: the examples) become
  Markdown code blocks there, in this process only.
- The format spec lives in formats/ (outside docs/); its pages are added to the site under
  spec/ as they are, one copy, with the files they link to.
- Snippets (the benchmark table) are looked up from the repository's root, wherever mkdocs runs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from mkdocs.structure.files import File

SPEC_FILES = ("SPEC.md", "CHANGELOG.md", "metadata.schema.json")


def _root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def verbatim_as_code(help_text: str) -> str:
    """``help_text`` with each of Click's \\b blocks as a fenced code block (a first line ending in
    ':', such as 'Example:', stays a paragraph before it)."""
    out, lines, i = [], help_text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() != "\b":
            out.append(lines[i])
            i += 1
            continue
        block, i = [], i + 1
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
        if block and block[0].rstrip().endswith(":") and not block[0].startswith(" "):
            out += [block.pop(0), ""]
        out += ["```text", *textwrap.dedent("\n".join(block)).splitlines(), "```"]
    return "\n".join(out)


def on_config(config):
    from sptool.cli import cli

    for name in cli.list_commands(None):
        command = cli.get_command(None, name)
        if command.help:
            command.help = verbatim_as_code(command.help)
    config.mdx_configs.setdefault("pymdownx.snippets", {})["base_path"] = [str(_root(config))]
    return config


def on_files(files, config):
    for name in SPEC_FILES:
        files.append(File.generated(config, f"spec/{name}", abs_src_path=str(_root(config) / "formats" / name)))
    return files
