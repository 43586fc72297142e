"""A part directory written by many workers: every part is written atomically by the task that
makes it (the io sink's hidden sibling, renamed when whole), into a hidden staging directory that
becomes the output only when every part is in.  A job that fails, or is interrupted, leaves no
directory that reads as complete; its scratch (shuffled pieces, partials) lives inside the staging
directory, on the same shared storage, and goes with it."""

from __future__ import annotations

import os
import shutil

from ..errors import UsageError
from ..io import AtomicTarget, ClosesOrAborts, commit_all, is_remote, local_path, output_kind, part_name

SCRATCH = ".sptool-scratch"  # hidden: never listed as a part, and allowed in a directory sptool replaces


def check_output(output) -> str:
    """A cluster writes a part directory; anything else is refused before any work."""
    if output is None or output_kind(output) != "dir":
        raise UsageError("on a cluster the output is a directory of parts on storage every worker sees: give "
                         "-o DIR/ (output='DIR/' in Python)", path=output if isinstance(output, str) else None)
    if is_remote(output):
        # The shuffle's scratch lives in the staging directory beside the parts, written and
        # renamed by the workers as local files: a shared filesystem path, not an object store.
        raise UsageError("on a cluster the output directory is a path on a shared filesystem (or a file:// URL); "
                         "inputs may be URLs, outputs to other filesystems are written by the commands run "
                         "without --scheduler", path=output)
    return local_path(output)


class PartDirectory(ClosesOrAborts):
    """Staging for an output directory; ``part(i)`` is the path a worker writes part i to,
    ``scratch(name)`` a directory for a job's intermediate files; ``close()`` removes the scratch
    and moves the directory into place, ``abort()`` removes everything."""

    def __init__(self, output: str):
        self.output = check_output(output)
        self._target = AtomicTarget(output, is_dir=True)
        self.root = self._target.tmp

    def part(self, i: int) -> str:
        return os.path.join(self.root, part_name(i))

    def scratch(self, name: str) -> str:
        path = os.path.join(self.root, SCRATCH, name)
        os.makedirs(path, exist_ok=True)
        return path

    def close(self):
        commit_together([self])

    def abort(self):
        self._target.abort()


def commit_together(dirs: list[PartDirectory]) -> None:
    """Several part directories committed all or none (io.commit_all: a failed rename puts back
    the ones already moved); still staged after a failure, for their ``abort``."""
    for d in dirs:
        shutil.rmtree(os.path.join(d.root, SCRATCH), ignore_errors=True)
    commit_all([d._target for d in dirs])
