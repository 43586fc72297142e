"""A part directory written by many workers: every part is written atomically by the task that
makes it (the io sink's hidden sibling, moved into place when whole), into a hidden staging
directory that becomes the output only when every part is in.  A job that fails, or is
interrupted, leaves no directory that reads as complete; its scratch (shuffled pieces, partials)
lives inside the staging directory, on the same shared storage, and goes with it.

The output may be on any filesystem io resolves (a shared path, ``s3://``, a registered scheme):
every name here goes through io's URL layer, so a worker writes its part where the driver
commits it.  On an object store the staging directory is a hidden prefix beside the output and
the commit moves its parts into place one by one (io.commit_all: the parts already moved are
moved back if one fails), as a single machine's directory output is committed there."""

from __future__ import annotations

from ..errors import UsageError
from ..io import (
    AtomicTarget,
    ClosesOrAborts,
    commit_all,
    join_path,
    local_path,
    make_dir,
    output_kind,
    part_name,
    remove_hidden,
)

SCRATCH = ".sptool-scratch"  # hidden: never listed as a part, and allowed in a directory sptool replaces


def check_output(output) -> str:
    """A cluster writes a part directory; anything else is refused before any work.  The output
    as workers name it (a file:// URL as its path; another URL as it is)."""
    if output is None or output_kind(output) != "dir":
        raise UsageError("on a cluster the output is a directory of parts on storage every worker sees: give "
                         "-o DIR/ (output='DIR/' in Python)", path=output if isinstance(output, str) else None)
    return local_path(output)


class PartDirectory(ClosesOrAborts):
    """Staging for an output directory; ``part(i)`` is the name a worker writes part i to,
    ``scratch(name)`` a directory for a job's intermediate files; ``close()`` removes the scratch
    and moves the directory into place, ``abort()`` removes everything."""

    def __init__(self, output: str):
        self.output = check_output(output)
        self._target = AtomicTarget(self.output, is_dir=True, remote=True)
        self.root = self._target.tmp

    def part(self, i: int) -> str:
        return join_path(self.root, part_name(i))

    def scratch(self, name: str) -> str:
        path = join_path(self.root, SCRATCH, name)
        make_dir(path)
        return path

    def close(self):
        commit_together([self])

    def abort(self):
        self._target.abort()


def commit_together(dirs: list[PartDirectory]) -> None:
    """Several part directories committed all or none (io.commit_all: a failed move puts back
    the ones already moved); still staged after a failure, for their ``abort``.  Each loses its
    hidden entries first: the scratch, and the temporary of a task whose worker was killed as it
    wrote (the task ran again elsewhere)."""
    for d in dirs:
        remove_hidden(d.root)
    commit_all([d._target for d in dirs])
