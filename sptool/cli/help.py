"""sptool help: a command's help, or a topic's text.

The topics are Markdown files shipped inside the package (sptool/topics/, pyproject's
package-data); the documentation site includes the same files (docs/topics.md), so each is
written once.  In the terminal they are shown as written, less Markdown's backquotes.
"""

from __future__ import annotations

import difflib
import re
from importlib import resources

import click

# topic -> what it tells, in `sptool help` and the group's help, in this order.
TOPICS = {
    "formats": "what convert reads and writes, and each format's options",
    "memory": "--memory, and what each command holds within it",
    "cluster": "--scheduler: commands on a Dask cluster",
    "exit-codes": "what each exit code means",
}


def topic_source(name: str) -> str:
    """The Markdown of topic ``name``, as the package ships it."""
    return resources.files("sptool").joinpath("topics", f"{name}.md").read_text(encoding="utf-8")


def topic_text(name: str) -> str:
    """Topic ``name`` as the terminal shows it: a title line, then the text without backquotes."""
    body = re.sub(r"`([^`]*)`", r"\1", topic_source(name))
    return f"sptool help {name}: {TOPICS[name]}\n\n{body}"


def _refuse(ctx: click.Context, group: click.Group, name: str):
    known = [*group.list_commands(ctx), *TOPICS]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise click.UsageError(f"No such command or topic {name!r}.{hint} Topics: {', '.join(TOPICS)}.", ctx)


def _index(ctx: click.Context, group: click.Group) -> str:
    """Every command with its one-line summary, then the topics."""
    formatter = ctx.make_formatter()
    formatter.write_usage("sptool help", "[COMMAND | TOPIC]")
    click.Group.format_commands(group, ctx.parent, formatter)
    with formatter.section("Topics (sptool help TOPIC)"):
        formatter.write_dl(list(TOPICS.items()))
    return formatter.getvalue().rstrip("\n")


@click.command("help")
@click.argument("name", required=False, metavar="[COMMAND | TOPIC]")
@click.pass_context
def help_command(ctx, name):
    """Show a command's help, or a topic: formats, memory, cluster, exit-codes.

    With no name, list the commands and the topics.

    Memory: none beyond start-up; reads no tensor.

    \b
    Example:
      sptool help reorder
      sptool help memory
    """
    group = ctx.parent.command
    if name is None:
        click.echo(_index(ctx, group))
    elif name in TOPICS:
        click.echo(topic_text(name).rstrip("\n"))
    else:
        found = group.get_command(ctx, name)
        if found is None:
            _refuse(ctx, group, name)
        with click.Context(found, info_name=name, parent=ctx.parent) as sub:
            click.echo(found.get_help(sub))
