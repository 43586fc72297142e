"""Options declared from sptool's vocabulary (sptool/_vocabulary.py), and their old spellings.

``option("axis", type=int, help=...)`` is Click's option spelled as the vocabulary spells the
concept: the command gives what is its own (type, default, help), never the name.  An old
spelling is not a Click option at all, so no help shows it: ``with_new_spellings`` rewrites it
to the new one before the command parses its arguments, warning once per process.
"""

from __future__ import annotations

import click

from .._vocabulary import VOCABULARY

_warned: set[str] = set()


class VocabularyOption(click.Option):
    """A Click option tagged with the concept it names, and the old spellings it still takes in
    the commands that used them."""

    def __init__(self, *args, concept: str, old_flags: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.concept, self.old_flags = concept, old_flags

    def old_spellings(self, command_name: str) -> tuple[str, ...]:
        return self.old_flags.get(command_name, ())


def option(concept: str, **attrs):
    """The Click option decorator for ``concept``, spelled as the vocabulary says."""
    word = VOCABULARY[concept]
    return click.option(*word.flags, concept, cls=VocabularyOption, concept=concept, old_flags=word.old_flags,
                        **attrs)


def warn_once(text: str) -> None:
    """A one-line deprecation note on stderr, the first time it would be given in this process."""
    if text not in _warned:
        _warned.add(text)
        click.echo(f"sptool: {text}", err=True)


def _value_taking(command: click.Command) -> set[str]:
    """The command's spellings that take the next argument as their value."""
    taking = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            taking.update(param.opts)
    return taking


def with_new_spellings(name: str, command: click.Command, args: list[str]) -> list[str]:
    """``args`` of ``command`` with each old spelling of an option replaced by its new one
    (``--num 3``, ``--num=3`` and ``-n3`` alike), each warned about once; values and
    everything after ``--`` are left as they are."""
    renames = {old: param.opts[-1] for param in command.params if isinstance(param, VocabularyOption)
               for old in param.old_spellings(name)}
    if not renames:
        return args
    taking = _value_taking(command)
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return out + args[i:]
        flag, sep, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        short_glued = not arg.startswith("--") and len(arg) > 2 and arg[:2] in renames
        if short_glued:
            flag, sep, value = arg[:2], "=", arg[2:]
        if flag in renames:
            new = renames[flag]
            warn_once(f"`{name} {flag}` is deprecated and will go; use {new}")
            out.append(f"{new}{sep}{value}")
            flag = new
        else:
            out.append(arg)
        i += 1
        if flag in taking and not sep and i < len(args):
            out.append(args[i])  # the option's value, whatever it looks like
            i += 1
    return out
