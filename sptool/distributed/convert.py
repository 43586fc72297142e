"""convert of many input files on a cluster: one task per file (a glob pattern names them, in
sorted order, or a directory of them that holds no tensor parts, or a list of names), each
converted by the single-machine convert into part i of the output directory.  A name may be a
URL: each worker resolves it and reads the file from there.
The parts must agree on shape and value type (a text format infers its shape from the largest
index of each file: give --shape); options that write a second file per input are refused."""

from __future__ import annotations

import glob
import inspect

from .._memory import budget_of, peak_rss
from ..errors import DataError, InputError, UsageError
from ..io import bare, join_path, kind_of, list_parts, matching
from ..ops.convert import convert as convert_one
from .partdir import PartDirectory, check_output
from .pieces import refuse_stdin
from .progress import Outcome, follow

PER_FILE_OUTPUTS = ("labels", "query_id")  # options naming a file beside the tensor


def convert_file(src: str, part: str, options: dict) -> tuple:
    """One input file converted into part ``part`` (a task): (convert's summary, peak memory)."""
    return convert_one(src, part, **options), peak_rss()


def convert(src, dst: str, *, client, memory=None, progress=None, **options) -> dict:
    """``sptool.convert`` of the files ``src`` (a path, a URL, a glob pattern such as
    ``data/*.tns`` or ``s3://bucket/raw/*.tns``, a directory of such files (not of a tensor's
    parts, which is one input), or a list of them) on the cluster of
    ``client``, into the part directory ``dst``, one part per file (a pattern's in sorted name
    order, a list's in its order); the same options as ``sptool.convert``."""
    for name in PER_FILE_OUTPUTS:
        if options.get(name):
            raise UsageError(f"on a cluster convert writes one part per input file; --{name.replace('_', '-')} "
                             "would name one file for all of them: run it without --scheduler")
    if options.get("to_format") not in (None, "sptool"):
        raise UsageError("on a cluster convert writes a part directory (sptool's format), not --to "
                         f"{options['to_format']}")
    if src is None or options.get("rows") is not None:
        raise UsageError("on a cluster convert reads input files (SRC, or a glob pattern of them), not --rows")
    names = [src] if isinstance(src, str) else list(src)
    if "-" in names:
        refuse_stdin("-")  # its message: workers cannot read the driver's pipe
    check_output(dst)
    files = []
    for name in names:
        pattern = glob.has_magic(bare(name))  # a URL's ?query is no wildcard
        if pattern:
            found = matching(name)
        elif kind_of(name) == "dir" and not list_parts(name):
            found = matching(join_path(name, "*"))  # a directory of input files, not a tensor's parts
        else:
            found = [name]
        if not found:
            raise InputError("no file matches this pattern" if pattern else "the directory holds no files", path=name)
        files += found
    options = {**options, "memory": budget_of(memory)}
    with PartDirectory(dst) as out:
        outcome = Outcome()
        futures = [client.submit(convert_file, f, out.part(i), options, pure=False) for i, f in enumerate(files)]
        done = [r for r, _ in follow(client, futures, outcome, progress=progress, rows=lambda r: r[0]["rows"])]
        for r, f in zip(done, files):
            for key in ("shape", "value_type"):
                if r[key] != done[0][key]:
                    raise DataError(f"converts to {key} {r[key]}, but {files[0]} to {done[0][key]}: the parts of a "
                                    "directory must agree" + (" (give --shape)" if key == "shape" else ""), path=f)
    given = src if isinstance(src, str) else ", ".join(names)
    return {"input": given, "output": dst, "from": done[0]["from"], "to": done[0]["to"], "inputs": len(files),
            "rows_in": sum(r["rows_in"] for r in done), "rows": sum(r["rows"] for r in done),
            "shape": done[0]["shape"], "value_type": done[0]["value_type"],
            "notes": sorted({n for r in done for n in r.get("notes", [])}), "parts": len(files),
            "workers": outcome.workers, "peak_worker_memory": outcome.peak_worker_memory}


# The op's parameters plus the client, as every function of sptool.distributed takes them.
_one = inspect.signature(convert_one)
convert.__signature__ = _one.replace(parameters=[
    *list(_one.parameters.values())[:2], inspect.Parameter("client", inspect.Parameter.KEYWORD_ONLY),
    *list(_one.parameters.values())[2:]])
