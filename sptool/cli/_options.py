"""Options shared by commands, each spelled and worded once."""

from __future__ import annotations

import click

from .._memory import budget_of
from ..format import number_of_text
from ._vocabulary import option

# Short, as every command's help repeats them: `sptool help memory` and the docs say the rest.
JSON_SUMMARY_HELP = "Also write what happened as one JSON object to PATH (- for stderr)."
MEMORY_HELP = "Memory budget for the data, e.g. 2GiB [default: 1GiB, or $SPTOOL_MEMORY]."


def _store(key):
    def callback(ctx: click.Context, param, value):
        if value is not None and value is not False:
            ctx.ensure_object(dict)[key] = value
        return value
    return callback


# A command's help names the common options in one line (sptool --help describes them), so that
# it fits a screen.
COMMON_NOTE = "Common options (sptool --help): -m SIZE, -q, --debug, --json-summary PATH."


def common_options(fn):
    """--memory, --quiet, --debug and --json-summary, accepted before or after the command name;
    hidden from the command's option list (COMMON_NOTE names them)."""
    for decorator in reversed((
        option("memory", metavar="SIZE", expose_value=False, callback=_store("memory"), hidden=True,
               help=MEMORY_HELP),
        option("quiet", is_flag=True, expose_value=False, callback=_store("quiet"), hidden=True,
               help="No progress bar or summary line."),
        option("debug", is_flag=True, expose_value=False, callback=_store("debug"), hidden=True,
               help="Show a traceback on errors."),
        option("json_summary", metavar="PATH", expose_value=False, callback=_store("json_summary"), hidden=True,
               help=JSON_SUMMARY_HELP),
    )):
        fn = decorator(fn)
    return fn


def output_option(required: bool = False, help_text: str | None = None):
    # The default is "-" (stdout): in the Python API no output means a returned SparseTensor.
    return option("output", metavar="PATH", required=required, default=None if required else "-",
        help=help_text or "Output: a .parquet, a DIR/, a .arrows, or - (stdout, the default); a URL too.",
    )


def input_argument(name: str = "tensor"):
    return click.argument(name, metavar=name.upper(), type=str)


def settings(ctx: click.Context) -> dict:
    """The shared options in effect.  --memory (or $SPTOOL_MEMORY) is read here, once, into the
    Budget every op receives as ``memory``; a malformed value fails before any work."""
    obj = ctx.ensure_object(dict)
    return {"memory": budget_of(obj.get("memory")), "quiet": bool(obj.get("quiet")), "debug": bool(obj.get("debug"))}


class IntList(click.ParamType):
    """A comma-separated list of integers: 2,0,1 (negative values allowed)."""

    name = "INTS"

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return tuple(int(v) for v in value)
        try:
            return tuple(int(v) for v in str(value).replace(" ", "").split(",") if v != "")
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers (e.g. 2,0,1)", param, ctx)


INT_LIST = IntList()


def _local_dir(ctx, param, value):
    # Refused before any work, even when the input turns out sorted and nothing is spilled.
    from ..io import local_only

    return None if value is None else local_only(value, "--tmp-dir", directory=True)


def tmp_dir_option(fn):
    return option("tmp_dir", metavar="DIR", default=None, type=click.Path(file_okay=False),
                  callback=_local_dir,
                  help="Where sorted runs spill [default: system temp].")(fn)


def parse_scalar(text):
    """A scalar from the command line: int, float, complex or true/false; otherwise the text."""
    if text is None:
        return None
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    number = number_of_text(text)
    return text if number is None else number
