"""The command line and the Python API are one surface (in the spirit of sqlite-utils' docs tests).

Every command in sptool.cli.COMMANDS has a public function in `sptool`, every option and argument
of the command is a parameter of that function with the same name (click's ``param.name``), and
every keyword-only parameter of the function is reachable from the command line.  The tables
below are the only exceptions, each with its reason; a real gap is not listed here but marked
xfail(strict=True) below, so that closing it turns the test red until the mark is removed.
"""

from __future__ import annotations

import inspect

import click
import pytest

import sptool
import sptool.distributed
from sptool.cli import COMMANDS, cli
from sptool.cli._cluster import DISTRIBUTED
from sptool.cli._vocabulary import VocabularyOption

# Command name -> public function name, where "replace - with _" is not the rule.
FUNCTION_NAMES = {
    "slice": "slice_",  # `slice` would shadow the builtin
    "map": "map_values",  # `map` would shadow the builtin
}

# Options on every command that exist only on the command line.
CLI_ONLY_COMMON = {
    "quiet": "hides progress bars and summary lines; the API draws none unless given progress=",
    "debug": "shows a traceback on errors; the API raises the exception itself",
    "json_summary": "writes the summary line as JSON; the API returns that summary (or the tensor) itself",
}

# (command, click param name) -> reason: options that only shape what the command prints.
CLI_ONLY = {
    ("info", "as_json"): "output format; sptool.info returns the dict that --json prints",
    ("head", "as_json"): "output format; sptool.head returns the (indices, values, meta) that --json prints",
    ("validate", "as_json"): "output format; sptool.validate returns the Report (Report.as_dict() is the JSON)",
    ("reduce", "as_json"): "output format; sptool.reduce returns the scalar or summary dict that --json prints",
}

# (command, click param name) -> (API parameter name, reason): the same parameter, named differently.
RENAMED = {
    **{(c, "tensor"): ("path", "positional input; the API calls its input a path")
       for c in ("info", "head", "todense", "reorder", "split", "slice", "reshape", "transpose", "reset-shape",
                 "retain", "fill-empty-rows", "expand-dims", "reduce", "softmax", "to-indicator", "map", "spy")},
    ("concat", "tensors"): ("paths", "positional inputs; the API calls them paths"),
    ("validate", "tensors"): ("path", "the command validates each TENSOR in turn with sptool.validate(path)"),
    ("mul", "tensor"): ("t", "positional sparse operand"),
    ("mul", "dense"): ("d", "positional dense operand"),
    ("div", "tensor"): ("t", "positional sparse operand"),
    ("div", "dense"): ("d", "positional dense operand"),
}

# API parameters that are not meant to be reachable from the command line.
API_ONLY_COMMON = {
    "progress": "a progress sink object; the command line passes its own bar (and --quiet turns it off)",
    "client": "sptool.distributed's functions take a distributed.Client; the command line makes one from the "
              "global --scheduler",
}
# (command, API parameter name) -> reason.  Empty: every keyword-only parameter has its option.
API_ONLY: dict[tuple[str, str], str] = {}

# (command, parameter of its sptool.distributed function) -> reason: cluster-only tuning.
DISTRIBUTED_ONLY = {
    ("reorder", "ranges"): "the number of key ranges (parts); the command line takes the default, one per input "
                           "piece and at least one per worker",
}

# Real gaps: not exceptions, failing tests.  (command, direction) -> reason.
GAPS: dict[tuple[str, str], str] = {}


def function_for(command_name: str):
    return getattr(sptool, FUNCTION_NAMES.get(command_name, command_name.replace("-", "_")))


def command_for(command_name: str) -> click.Command:
    command = cli.get_command(None, command_name)
    assert command is not None, f"sptool.cli does not provide command {command_name!r}"
    return command


def _positional(sig: inspect.Signature) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in sig.parameters.values() if p.kind in kinds]


def missing_in_api(command_name: str, command: click.Command, func) -> list[str]:
    """The command's params with no counterpart in ``func``, as readable descriptions."""
    sig = inspect.signature(func)
    positional = _positional(sig)
    problems = []
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    for param in command.params:
        if param.name in CLI_ONLY_COMMON or (command_name, param.name) in CLI_ONLY:
            continue
        target = RENAMED.get((command_name, param.name), (param.name,))[0]
        flag = param.opts[-1] if isinstance(param, click.Option) else param.human_readable_name
        if target not in sig.parameters or sig.parameters[target].kind is inspect.Parameter.VAR_KEYWORD:
            problems.append(f"{command_name} {flag}: {func.__name__}() has no parameter {target!r}")
        elif isinstance(param, click.Argument):
            index = arguments.index(param)
            where = positional.index(target) if target in positional else None
            if where != index:
                problems.append(f"{command_name} {flag}: {func.__name__}() takes {target!r} "
                                f"not as positional parameter {index}")
    return problems


def unreachable_from_cli(command_name: str, command: click.Command, func) -> list[str]:
    """Keyword-only parameters of ``func`` that no option or argument of the command feeds."""
    fed = {RENAMED.get((command_name, p.name), (p.name,))[0] for p in command.params}
    return [f"{func.__name__}(..., {name}=) has no option on `sptool {command_name}`"
            for name, p in inspect.signature(func).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in fed
            and name not in API_ONLY_COMMON and (command_name, name) not in API_ONLY]


def _cases(direction: str):
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=GAPS[name, direction]))
            if (name, direction) in GAPS else name for name in COMMANDS]


@pytest.mark.parametrize("command_name", list(COMMANDS))
def test_command_has_api_function(command_name):
    public = FUNCTION_NAMES.get(command_name, command_name.replace("-", "_"))
    assert public in sptool._API, f"`sptool {command_name}` has no public sptool.{public} in sptool._API"
    assert public in sptool.__all__
    assert callable(function_for(command_name))


@pytest.mark.parametrize("command_name", _cases("cli"))
def test_cli_params_are_api_parameters(command_name):
    problems = missing_in_api(command_name, command_for(command_name), function_for(command_name))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("command_name", _cases("api"))
def test_api_keywords_are_reachable_from_cli(command_name):
    problems = unreachable_from_cli(command_name, command_for(command_name), function_for(command_name))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("command_name", sorted(DISTRIBUTED))
def test_distributed_functions_take_the_commands_parameters(command_name):
    """What a command calls given --scheduler (sptool.distributed's function for it) takes the same
    options and arguments as the op it replaces, plus the client."""
    func = sptool.distributed.OPERATIONS[command_name]
    command = command_for(command_name)
    problems = missing_in_api(command_name, command, func) + [
        p for p in unreachable_from_cli(command_name, command, func)
        if not any(f"..., {name}=)" in p for c, name in DISTRIBUTED_ONLY if c == command_name)]
    assert not problems, "\n".join(problems)
    assert inspect.signature(func).parameters["client"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_commands_with_a_scheduler_are_the_distributed_functions():
    assert DISTRIBUTED == set(sptool.distributed.OPERATIONS)


def test_exception_tables_are_not_stale():
    """Every exception names a command param and API parameter that exist, so the tables shrink
    when the surface changes instead of silently excusing nothing."""
    for (name, param), _reason in CLI_ONLY.items():
        assert param in {p.name for p in command_for(name).params}, (name, param)
    for (name, param), (target, _reason) in RENAMED.items():
        assert param in {p.name for p in command_for(name).params}, (name, param)
        assert target in inspect.signature(function_for(name)).parameters, (name, target)
    for (name, param), _reason in API_ONLY.items():
        assert param in inspect.signature(function_for(name)).parameters, (name, param)
    for (name, param), _reason in DISTRIBUTED_ONLY.items():
        assert param in inspect.signature(sptool.distributed.OPERATIONS[name]).parameters, (name, param)
    for name in FUNCTION_NAMES:
        assert name in COMMANDS, name
    for name, _direction in GAPS:
        assert name in COMMANDS, name


@pytest.mark.parametrize("command_name", list(COMMANDS))
def test_old_spellings_match_between_command_and_function(command_name):
    """A command that still takes an old spelling of an option has a function that still takes
    the old keyword of the same concept, and the other way round."""
    func, command = function_for(command_name), command_for(command_name)
    old_flags = {p.concept for p in command.params if isinstance(p, VocabularyOption) and p.old_spellings(command_name)}
    old_keywords = set(getattr(func, "old_keywords", {}).values()) - {"output"}  # -o's was a positional's name
    assert old_flags == old_keywords


@pytest.mark.parametrize("command_name", list(COMMANDS))
def test_the_output_is_a_keyword_that_defaults_to_none(command_name):
    """Given no output, an op returns its result (a SparseTensor, or an array for a dense one)."""
    params = inspect.signature(function_for(command_name)).parameters
    has_output = any(p.name == "output" for p in command_for(command_name).params)
    if has_output:
        assert "output" in params and params["output"].default is None, command_name
        assert params["output"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, command_name


def test_checker_reports_a_missing_keyword():
    """The helpers can fail: an option (and a keyword) the other side lacks is reported."""

    def fake(path, output=None, *, scale=1.0, api_only=None, memory=None, progress=None):
        raise NotImplementedError

    command = click.Command("fake", params=[
        click.Argument(["path"]), click.Option(["-o", "--output"]), click.Option(["--scale"]),
        click.Option(["--bogus-flag"], is_flag=True), click.Option(["--memory"]), click.Option(["--quiet"]),
    ])
    assert missing_in_api("fake", command, fake) == ["fake --bogus-flag: fake() has no parameter 'bogus_flag'"]
    assert unreachable_from_cli("fake", command, fake) == ["fake(..., api_only=) has no option on `sptool fake`"]
    swapped = click.Command("fake", params=[click.Argument(["output"]), click.Argument(["path"])])
    assert missing_in_api("fake", swapped, fake) == [
        "fake OUTPUT: fake() takes 'output' not as positional parameter 0",
        "fake PATH: fake() takes 'path' not as positional parameter 1",
    ]
