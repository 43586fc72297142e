"""The sptool command line: a thin layer over the Python API in sptool.ops.

Errors are translated to messages and exit codes here, once: SptoolError -> its exit code
(1 bad data, 2 bad usage or unreadable input), a closed pipe -> 0, anything unexpected -> 3
with a one-line message (a traceback only with --debug).
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

import click

from .._commits import record as record_commits
from .._commits import recorded as recorded_commits
from .._version import FORMAT_VERSION, __version__
from ..errors import SptoolError
from ._cluster import note_help, refuse_unless_distributed
from ._console import (
    guard_stdout,
    json_summary_written,
    print_line,
    start_json_summaries,
    stop_all_bars,
    summary_object,
    write_json_summary,
)
from ._options import JSON_SUMMARY_HELP, MEMORY_HELP, _store
from ._vocabulary import option, with_new_spellings
from .help import TOPICS, help_command

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
INTERNAL_ERROR = 3


def _version_text() -> str:
    from .. import _kernels

    return (f"sptool {__version__} (format {FORMAT_VERSION}, kernels: compiled, "
            f"{os.path.basename(_kernels.__file__)})")


class SptoolGroup(click.Group):
    def list_commands(self, ctx):
        return [name for name in COMMANDS if self.get_command(ctx, name) is not None] + ["help"]

    def resolve_command(self, ctx, args):
        try:
            name, command, rest = super().resolve_command(ctx, args)
        except click.UsageError as e:
            import difflib

            name = args[0] if args else ""
            close = difflib.get_close_matches(name, list(COMMANDS) + ["help"], n=1)
            if close and not name.startswith("-"):
                raise click.UsageError(f"No such command {name!r}. Did you mean {close[0]!r}?", ctx) from None
            raise e
        refuse_unless_distributed(name, ctx.ensure_object(dict))
        if command is not None and not ctx.resilient_parsing:
            rest = with_new_spellings(name, command, rest)
        return name, command, rest

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            command = load_command(name)
            if command is None:
                return None
            note_help(command)
            self.add_command(command)
        return self.commands.get(name)

    def format_commands(self, ctx, formatter):
        """The commands by kind, names only, so that the page fits a screen (`sptool help` gives
        each one's summary), then the help topics."""
        import textwrap

        width = max(formatter.width - formatter.current_indent - 13, 30)
        with formatter.section("Commands (sptool help COMMAND, or sptool COMMAND --help)"):
            for kind, names in COMMAND_KINDS:
                lines = textwrap.wrap(" ".join(names), width, break_on_hyphens=False, break_long_words=False)
                for i, line in enumerate(lines):
                    formatter.write(f"{' ' * formatter.current_indent}{kind if i == 0 else '':<11}{line}\n")
        with formatter.section("Topics"):
            formatter.write_text("sptool help " + " | ".join(TOPICS) + "; sptool help lists everything.")

    def invoke(self, ctx: click.Context):
        try:
            if _from_main:
                # From here on an interrupted command cleans up (below); until now the early
                # handler of sptool.__main__ exited at once, with nothing to clean.
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, _terminate)
            if _from_main:
                record_commits()
            return self._invoke_clearing_bars(ctx)
        except SptoolError as e:
            _abort_outputs()
            _fail(ctx, str(e), e.exit_code)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): not an error for a pipeline stage.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(0)
        except KeyboardInterrupt:
            _abort_outputs()
            print_line(_interrupted_message())
            ctx.exit(130)
        except click.ClickException as e:  # a usage error: click prints it
            write_json_summary(summary_object(ctx.invoked_subcommand, exit_code=e.exit_code,
                                              error=" ".join(e.format_message().split())))
            raise
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except MemoryError:
            _abort_outputs()
            _fail(ctx, "ran out of memory; lower --memory or free some", 2)
        except Exception as e:  # noqa: BLE001 - the one place unexpected errors are reported
            _abort_outputs()
            if _raised_by_an_interrupt(e):
                print_line(_interrupted_message())
                ctx.exit(130)
            hint = "" if _debugging(ctx) else " (run with --debug for a traceback)"  # with it, printed above
            _fail(ctx, f"internal error: {type(e).__name__}: {e}{hint}", INTERNAL_ERROR)
        finally:
            # The command has ended, its exit code decided: what is left is the exit.  A signal
            # now would reach click's own handler ("Aborted!", exit 1), even after a success.
            _ignore_signals()

    def _invoke_clearing_bars(self, ctx: click.Context):
        # A message printed under a live bar would be overdrawn, and a bar never stopped leaves
        # the terminal's cursor hidden: whatever ends the command, the bars go first.
        succeeded = False
        try:
            result = super().invoke(ctx)
            succeeded = True
            return result
        except click.exceptions.Exit as e:
            succeeded = e.exit_code == 0
            raise
        finally:
            stop_all_bars()
            if succeeded and not json_summary_written():  # a command of no Job (help)
                write_json_summary(summary_object(ctx.invoked_subcommand))


def _debugging(ctx: click.Context) -> bool:
    """Whether errors show their traceback: --debug, or $SPTOOL_DEBUG."""
    return bool(ctx.ensure_object(dict).get("debug") or os.environ.get("SPTOOL_DEBUG"))


def _fail(ctx: click.Context, message: str, code: int):
    if _debugging(ctx):
        traceback.print_exc()
    message = " ".join(message.split())  # one line, always
    print_line(f"Error: {message}")
    write_json_summary(summary_object(ctx.invoked_subcommand, exit_code=code, error=message))
    ctx.exit(code)


def _print_help_all(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    group = ctx.command
    pages = [group.get_help(ctx)]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        with click.Context(command, info_name=name, parent=ctx) as sub:
            pages.append(f"{'=' * 100}\nsptool {name}\n\n{command.get_help(sub)}")
    click.echo("\n\n".join(pages))
    ctx.exit()


def _print_version(ctx, param, value):
    # A callback, not click.version_option's message string: that would load the kernels (and
    # numpy) when this module is imported, before main() has set up the process.
    if value and not ctx.resilient_parsing:
        click.echo(_version_text())
        ctx.exit()


@click.group(cls=SptoolGroup, context_settings=CONTEXT_SETTINGS)
@option("version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
        help="Show the version and exit.")
@option("help_all", is_flag=True, expose_value=False, is_eager=True, callback=_print_help_all,
        help="Show every command's help on one page and exit.")
@option("memory", metavar="SIZE", expose_value=False, callback=_store("memory"), help=MEMORY_HELP)
@option("quiet", is_flag=True, expose_value=False, callback=_store("quiet"),
        help="No progress bars or summary lines.")
@option("debug", is_flag=True, expose_value=False, callback=_store("debug"),
        help="Show a traceback on errors.")
@option("json_summary", metavar="PATH", expose_value=False, callback=_store("json_summary"),
        help=JSON_SUMMARY_HELP)
@option("scheduler", metavar="ADDRESS", expose_value=False, callback=_store("scheduler"),
        help="Run on a Dask cluster: tcp://HOST:PORT or local:N (sptool help cluster).")
@click.pass_context
def cli(ctx):
    """Streaming tools for n-dimensional sparse tensors (COO) in Parquet files and Arrow streams.

    Tensors are .parquet files, directories of part files, or Arrow IPC streams on stdin and
    stdout ('-'), so commands compose in pipes. Every command works within --memory. Exit
    codes: 0 ok, 1 bad data, 2 bad usage, 3 internal error (sptool help exit-codes).

    \b
    Format spec (version {version}): SPEC.md, installed with sptool at
    {spec}
    """
    ctx.ensure_object(dict)
    start_json_summaries()


# The spec ships inside the package (pyproject's package-data), so its path holds in any install.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cli.help = cli.help.format(version=FORMAT_VERSION, spec=os.path.join(_PACKAGE_DIR, "SPEC.md"))


cli.add_command(help_command)


def _abort_outputs():
    """Remove the temporaries of outputs not committed (a signal can land before a sink's own
    cleanup is in place, between opening an output and entering its ``with``) and the scratch
    directories not removed (an external sort suspended in a generator that nothing resumes)."""
    _ignore_signals()  # a second Ctrl-C would cut this short and reach click ("Aborted!", exit 1)
    if "sptool.io" in sys.modules:
        from ..io import abort_live_targets, remove_live_scratch

        abort_live_targets()
        remove_live_scratch()


def _ignore_signals():
    if _from_main:  # the signal handlers are the script's, never a host process's
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _raised_by_an_interrupt(e: BaseException) -> bool:
    """Whether ``e`` came while an interrupt unwound the command (a lock or pool cleaned up in a
    ``finally`` the signal cut short): the interrupt, not ``e``, is what ended the command."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _interrupted_message() -> str:
    """Nothing was written, or (a signal landing after an output's commit, before the exit) what
    was, whole.  Once the cleanup has run, a recorded path still there and not hidden is an
    output: a spool, a scratch file or a piece split removed again (all or none) is gone."""
    done = [p for p in dict.fromkeys(recorded_commits()) if not os.path.basename(p.rstrip("/")).startswith(".")
            and _still_there(p)]
    if not done:
        return "sptool: interrupted; no output was written"
    return f"sptool: interrupted after writing {', '.join(done)} (complete); nothing else was written"


def _still_there(path: str) -> bool:
    from ..io import kind_of

    try:
        return kind_of(path) is not None
    except Exception:  # noqa: BLE001 - a store that does not answer now: not claimed as written
        return False


def _terminate(signum, frame):
    # A terminated job cleans up as an interrupted one does: temporary outputs and spilled
    # runs are removed on the way out.
    raise KeyboardInterrupt


_from_main = False  # set by main(): the signal handlers are the command line's to set


def main(argv=None):
    global _from_main

    # The command line never calls BLAS, but OpenBLAS (loaded with numpy) starts a thread pool
    # that spins on the second core for a while: about 0.1 CPU-second a run taken from the
    # decoding threads (measured on reduce).  Set before any command module imports numpy.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _from_main = True
    guard_stdout()
    try:
        cli.main(args=argv, prog_name="sptool")
        code = 0
    except SystemExit as e:
        code = e.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # Every output is committed (or removed) and every worker thread joined by now, so skip
    # the interpreter's teardown of numpy, pyarrow and their memory pools: 30 ms of a 0.45 s
    # reduce, measured.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
    os._exit(code or 0)


# command -> module of sptool.cli that registers it, in the order `sptool --help` lists them:
# foundation first, then structure, then math.  Modules are imported only when their command
# runs (or when --help lists them all), so a command starts without loading the others.
COMMANDS = {
    "validate": "validate", "info": "info", "head": "info", "convert": "convert", "todense": "todense",
    "reorder": "reorder", "concat": "concat", "split": "split", "slice": "slice", "reshape": "reshape",
    "transpose": "transpose", "reset-shape": "reset_shape", "retain": "retain",
    "fill-empty-rows": "fill_empty_rows", "expand-dims": "expand_dims",
    "reduce": "reduce", "add": "add", "maximum": "maximum", "minimum": "maximum", "mul": "mul", "div": "mul",
    "softmax": "softmax", "matmul": "matmul", "to-indicator": "to_indicator", "map": "map", "eye": "eye",
    "spy": "spy",
    "merge": "merge",
    "cross": "cross", "cross-hashed": "cross", "bincount": "bincount",
    "segment-sum": "segment", "segment-mean": "segment", "segment-sqrt-n": "segment",
    "sampled-matmul": "sampled_matmul",
    "apply": "apply",
}


# How `sptool --help` groups the commands (every one of COMMANDS, in its order).
COMMAND_KINDS = (
    ("files", ("validate", "info", "head", "convert", "todense", "spy", "eye")),
    ("structure", ("reorder", "concat", "split", "slice", "reshape", "transpose", "reset-shape", "retain",
                   "fill-empty-rows", "expand-dims")),
    ("math", ("reduce", "add", "maximum", "minimum", "mul", "div", "softmax", "matmul", "map",
              "sampled-matmul")),
    ("features", ("to-indicator", "merge", "cross", "cross-hashed", "bincount", "segment-sum", "segment-mean",
                  "segment-sqrt-n", "apply")),
)


def load_command(name: str):
    """The click command ``name`` from its module (None if that module does not provide it)."""
    import importlib

    module = importlib.import_module(f".{COMMANDS[name]}", __name__)
    found = click.Group()
    module.register(found)
    return found.commands.get(name)
