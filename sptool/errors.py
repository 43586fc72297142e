"""Exceptions raised by the sptool library.

Every error a user can cause is a SptoolError carrying the exit code the CLI uses:
1 for bad data (the input is not a valid tensor, or shapes do not agree), 2 for bad usage
or an input that cannot be read at all.  The CLI translates them in one place.
"""

from __future__ import annotations


class SptoolError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, path: str | None = None):
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class DataError(SptoolError):
    """The data is not a valid sptool tensor, or breaks a rule of the operation."""

    exit_code = 1


class FormatError(DataError):
    """The file or stream does not follow formats/SPEC.md."""


class ShapeMismatch(DataError):
    """Operand shapes, ranks or value types do not agree."""


class UsageError(SptoolError):
    """An argument or option is wrong."""

    exit_code = 2


class SchedulerUnreachable(UsageError):
    """--scheduler named a Dask scheduler that did not answer: the job's failure, not any one
    input's (validate of several tensors stops at it)."""


class InputError(SptoolError):
    """An input cannot be opened or read (missing, unreadable, not a recognised container)."""

    exit_code = 2


class Interrupted(SptoolError):
    """SIGINT or SIGTERM arrived during a step that had to finish (it did): the command stops
    with 128 + the signal's number (130, 143), saying what was done."""

    def __init__(self, message: str, signum: int, *, path: str | None = None):
        super().__init__(message, path=path)
        self.exit_code = 128 + signum


class ResourceError(SptoolError):
    """The job cannot be done within --memory or the free disk space."""

    exit_code = 2
