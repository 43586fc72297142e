"""Rich consoles, progress bars and the closing summary (a line on stderr, and the --json-summary
object, whose keys docs/json-summary.schema.json describes)."""

from __future__ import annotations

import io
import os
import re
import sys
import time

from .._memory import format_size, peak_rss


class _LazyConsole:
    """A rich Console made on first use: a quiet command never imports rich.

    Attribute access is forwarded, but protocols are not (Python looks dunder methods up on the
    type), so anything that takes a Console object, such as a Progress, is given ``get()``.
    """

    def __init__(self, **options):
        self._options = options
        self._console = None

    def get(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name):
        return getattr(self.get(), name)


class _StdoutConsole(_LazyConsole):
    """stdout's console: what it prints has no trailing padding (a table's last column is padded
    to its width), so a pipe gets the text and nothing else; any bar is taken down first.  In a
    pipe a table's rows are not wrapped at 80 columns (unless $COLUMNS says a width): one row is
    one line, for grep and cut."""

    def get(self):
        if self._console is None and not _is_terminal(sys.stdout) and not os.environ.get("COLUMNS"):
            self._options = {**self._options, "width": _PIPE_WIDTH}
        return super().get()

    def print(self, *objects, **options):
        console = self.get()
        with console.capture() as captured:
            console.print(*objects, **options)
        stop_all_bars()
        console.file.write(_TRAILING_PADDING.sub("", captured.get()))
        console.file.flush()


# Wide enough that no row of a report wraps; the padding this leaves is stripped.
_PIPE_WIDTH = 4096


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# Spaces at the end of a line, before the style resets that may close it.
_TRAILING_PADDING = re.compile(r" +(?=(?:\x1b\[[0-9;]*m)*$)", re.M)

out = _StdoutConsole(soft_wrap=True)  # data and reports: stdout
err = _LazyConsole(stderr=True, soft_wrap=True)  # messages, progress, summaries


_LIVE: set = set()  # jobs whose bar is on screen


def stop_all_bars():
    """Take every bar off the screen (and show the cursor): before an error message, and on
    the way out whatever happened, so a terminal is never left with a hidden cursor."""
    for job in list(_LIVE):
        try:
            job.stop()
        except Exception:  # noqa: BLE001 - restoring the terminal must not mask the real error
            pass


class _ClearsBarsFirst(io.RawIOBase):
    """The script's file descriptor 1: whatever is written to stdout (a report, a text format, an
    Arrow stream into a pipe whose reader prints on this terminal) takes the bars down first, so
    no text is glued to a bar and no bar is drawn again over what follows."""

    def __init__(self, fd: int):
        self._fd = fd

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return os.isatty(self._fd)

    def write(self, data):
        if _LIVE:
            stop_all_bars()
        return os.write(self._fd, data)


def guard_stdout():
    """Send the script's sys.stdout through _ClearsBarsFirst: for the command line's own process
    only (a host process's stdout is its own), and only where a bar can be drawn at all."""
    try:
        if not os.isatty(sys.stderr.fileno()):
            return
        fd = sys.stdout.fileno()
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):  # no stdout or stderr, or not a file
        return
    text = sys.stdout
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClearsBarsFirst(fd)), encoding=text.encoding,
                                  errors=text.errors, line_buffering=text.line_buffering)


# The terminal stderr shows, opened anew and locked while this process runs: of several sptool
# stages of one pipeline, only the one holding the lock draws a bar (two would write over each
# other).  The lock goes with the process; nothing is left on disk.
_TERMINAL_LOCK: list = []


def _terminal_is_ours() -> bool:
    if _TERMINAL_LOCK:
        return _TERMINAL_LOCK[0] is not None
    import fcntl

    try:
        fd = os.open(os.ttyname(sys.stderr.fileno()), os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, AttributeError, ValueError):
        _TERMINAL_LOCK.append(True)  # no lock to be had: draw, as a lone command would
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        _TERMINAL_LOCK.append(None)  # another sptool of this terminal draws
        return False
    _TERMINAL_LOCK.append(fd)
    return True


def print_line(text: str):
    """A whole line on stderr, in one write.  Where another sptool stage draws a bar, the line
    the cursor is on (that bar) is erased first, in the same write: a refresh of that bar cannot
    land between the erase and the text and leave the two glued."""
    erase = "\r\x1b[2K" if _TERMINAL_LOCK and _TERMINAL_LOCK[0] is None else ""
    sys.stderr.write(f"{erase}{text}\n")
    sys.stderr.flush()


class Job:
    """Progress and the summary of one command.

    ``advance(rows)`` is what the ops call; a bar appears only when stderr is a terminal and
    --quiet is off.  ``inputs`` are what it reads (by default the command's arguments that name
    something to read); [] for a command that reads nothing (eye).
    """

    def __init__(self, name: str, *, total: int | None = None, quiet: bool = False, inputs: list | None = None):
        self.name = name
        self.total = total
        self.quiet = quiet
        self.rows = 0
        self.inputs = _inputs_of_command() if inputs is None else [str(i) for i in inputs]
        _STATE["inputs"] = self.inputs  # for the summary of a failure
        self.start = time.perf_counter()
        self._bar = None
        self._task = None
        if not quiet and err.is_terminal and _terminal_is_ours():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            # No redirection of sys.stdout/sys.stderr: stdout may carry an Arrow stream or JSON
            # while stderr is a terminal, and rich's proxies would route that text to the bar.
            bar = Progress(
                TextColumn("[bold]{task.description}[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"),
                TimeRemainingColumn(), console=err.get(), transient=True, redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = bar.add_task(name, total=total)
            self._bar = bar
            _LIVE.add(self)
            try:
                bar.start()
            except BaseException:
                self.stop()  # a half-started bar has already hidden the cursor
                raise

    def set_total(self, total: int | None):
        """Called by the op once it knows how many rows it will read."""
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def advance(self, rows: int):
        self.rows += rows
        if self._bar is not None:
            self._bar.update(self._task, advance=rows)

    def restart(self):
        """The op reads its input again from the start (svmlight's late index base): count anew."""
        self.rows = 0
        if self._bar is not None:
            self._bar.reset(self._task, total=self.total)

    def phase(self, label: str, total: int | None = None) -> _Phase:
        """A later pass over rows already counted (an external sort's merge): the bar counts it
        from 0 under its own label; the rows read stay as they were."""
        if self._bar is not None:
            self._bar.reset(self._task, total=total, description=f"{self.name} ({label})")
        return _Phase(self)

    def stop(self):
        bar, self._bar = self._bar, None
        _LIVE.discard(self)
        if bar is not None:
            bar.stop()  # erases the bar and shows the cursor again

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def summary(self, *, rows_out: int | None = None, extra: str = "", result: dict | None = None,
                output: str | None = None, line: bool = True, rows_in: int | None = None,
                inputs: list | None = None, exit_code: int = 0, error: str | None = None):
        """The closing line on stderr and the --json-summary object: what was read (``rows_in``,
        by default the rows counted), what was written (``output``, '-' for stdout, with the
        result's shape and ``rows_out`` entries), seconds, rows a second and peak memory, then
        ``extra``.  With ``line`` False, only the JSON object; ``inputs`` replaces the Job's."""
        self.stop()
        if inputs is not None:
            self.inputs = [str(i) for i in inputs]
        secs = time.perf_counter() - self.start
        if rows_in is None and self.inputs:
            rows_in = self.rows
        outputs = _outputs(output, result, rows_out)
        doc = summary_object(self.name.split()[0], exit_code=exit_code, error=error, inputs=self.inputs,
                             rows_in=rows_in, outputs=outputs, rows_out=rows_out, seconds=secs,
                             rows=self.rows or rows_in, result=result)
        write_json_summary(doc)
        if self.quiet or not line:
            return
        read = f"read {_names(self.inputs)}" + (f" ({rows_in:,} rows)" if rows_in is not None else "")
        parts = [read if self.inputs else "", _wrote(outputs), _timing(secs, self.rows),
                 f"peak memory {format_size(doc['peak_memory_bytes'])}"]
        text = f"{doc['command']}: " + ", ".join(filter(None, parts)) + (f"; {extra}" if extra else "")
        print_line(text)


class _Phase:
    """What Job.phase returns: ``advance`` moves the bar only."""

    def __init__(self, job: Job):
        self._job = job

    def advance(self, rows: int):
        bar = self._job._bar
        if bar is not None:
            bar.update(self._job._task, advance=rows)


# Under this many seconds a rate tells more of start-up than of the command: the line omits it.
RATE_MIN_SECONDS = 0.5

_STATE: dict = {"inputs": [], "start": time.perf_counter()}


def summary_object(command: str | None, *, exit_code: int = 0, error: str | None = None, inputs: list | None = None,
                   rows_in: int | None = None, outputs: list | None = None, rows_out: int | None = None,
                   seconds: float | None = None, rows: int | None = None, result: dict | None = None) -> dict:
    """The --json-summary object: the same keys for every command, success or failure
    (docs/json-summary.schema.json).  ``seconds`` defaults to the time since the command line
    started; ``rows`` (counted by the bar) gives rows_per_second."""
    if seconds is None:
        seconds = time.perf_counter() - _STATE["start"]
    return {
        "command": command, "ok": exit_code == 0, "exit_code": exit_code, "error": error,
        "inputs": list(_STATE["inputs"] if inputs is None else inputs), "rows_in": rows_in,
        "outputs": outputs or [], "rows_out": rows_out, "seconds": round(seconds, 4),
        "rows_per_second": round(rows / seconds, 1) if rows is not None and seconds > 0 else None,
        "peak_memory_bytes": peak_rss(), "result": result,
    }


def _inputs_of_command() -> list[str]:
    """What the running command reads: its arguments' values, less numbers (mul's scalar)."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return []
    found = []
    for param in ctx.command.params:
        if isinstance(param, click.Argument):
            value = ctx.params.get(param.name)
            found += [v for v in (value if isinstance(value, (list, tuple)) else [value])
                      if isinstance(v, str) and not _is_number(v)]
    return found


def _is_number(text: str) -> bool:
    try:
        complex(text)
    except ValueError:
        return False
    return not os.path.exists(text)


def _outputs(output: str | None, result, rows_out: int | None) -> list[dict]:
    """[{path, shape, nnz}] of what was written: the pieces of a split, or ``output`` with the
    result's shape; nnz is None for a dense array or an image."""
    result = result if isinstance(result, dict) else {}
    pieces = result.get("outputs")
    if isinstance(pieces, list):
        shapes = result.get("shapes") or [None] * len(pieces)
        rows = result["rows"] if isinstance(result.get("rows"), list) else [None] * len(pieces)
        return [{"path": str(p), "shape": _shape(s), "nnz": n} for p, s, n in zip(pieces, shapes, rows)]
    if output is None:
        return []
    shape = result.get("shape")
    if shape is None and rows_out is not None and output != "-":
        shape = _shape_written(output)
    return [{"path": str(output), "shape": _shape(shape), "nnz": rows_out}]


def _shape_written(path: str):
    """The shape a sparse output's own metadata declares (an op whose result does not repeat
    it: reorder, map...); None if it cannot be read back."""
    from ..io import open_source

    try:
        with open_source(path) as src:
            return src.meta.shape
    except Exception:  # noqa: BLE001 - a summary never fails a command that has succeeded
        return None


def _shape(shape):
    return None if shape is None or None in shape else [int(s) for s in shape]


def _names(paths: list[str], most: int = 3) -> str:
    shown = ["stdin" if p == "-" else p for p in paths[:most]]
    return ", ".join(shown) + (f" and {len(paths) - most} more" if len(paths) > most else "")


def _wrote(outputs: list[dict]) -> str:
    if len(outputs) > 1:
        nnz = [o["nnz"] for o in outputs]
        total = f", nnz {sum(nnz):,} in all" if None not in nnz else ""
        return f"wrote {len(outputs)} pieces {outputs[0]['path']} .. {outputs[-1]['path']}{total}"
    if not outputs:
        return ""
    o = outputs[0]
    details = ", ".join(filter(None, [f"shape {o['shape']}" if o["shape"] is not None else "",
                                      f"nnz {o['nnz']:,}" if o["nnz"] is not None else ""]))
    return f"wrote {'stdout' if o['path'] == '-' else o['path']}" + (f" ({details})" if details else "")


def _timing(secs: float, rows: int) -> str:
    text = "<0.01 s" if secs < 0.005 else f"{secs:.2f} s"
    if secs >= RATE_MIN_SECONDS and rows:
        text += f" ({_rate(rows / secs)} rows/s)"
    return text


_summaries_written = 0


def write_json_summary(doc: dict):
    """The --json-summary object, if asked for: one line of strict JSON on stderr ('-') or in a
    file (JSON lines: validate of several tensors writes one object each)."""
    global _summaries_written
    import click

    ctx = click.get_current_context(silent=True)
    target = (ctx.find_root().obj or {}).get("json_summary") if ctx is not None else None
    if not target:
        return
    import json

    output = ctx.params.get("output") if ctx is not None else None
    if doc.get("ok") and isinstance(doc.get("result"), dict) and "output" not in doc["result"] and output:
        doc["result"] = {**doc["result"], "output": output}
    text = json.dumps(_finite(doc), default=_jsonable, allow_nan=False, separators=(", ", ": "))
    if target == "-":
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    else:
        with open(target, "a" if _summaries_written else "w") as f:
            f.write(text + "\n")
    _summaries_written += 1


def json_summary_written() -> bool:
    return _summaries_written > 0


def start_json_summaries():
    """A new command line: its summary file starts empty (one process may run several, in tests)."""
    global _summaries_written
    _summaries_written = 0
    _STATE.update(inputs=[], start=time.perf_counter())


def _finite(value):
    """``value`` with NumPy scalars and arrays as Python values and non-finite floats spelled as
    the format spells a fill value ("NaN", "Infinity", "-Infinity"): strict JSON."""
    import math

    if type(value).__module__ == "numpy":
        value = value.tolist() if hasattr(value, "tolist") else value
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, complex):
        return [_finite(value.real), _finite(value.imag)]
    return value


def _jsonable(value):
    """Anything else JSON has no type for, as its text."""
    return str(value)


def _rate(r: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if r >= scale:
            return f"{r / scale:.1f}{unit}"
    return f"{r:.0f}"
