"""The outputs the command line's command has committed, for the message of an interruption that
lands after a commit: between it and the exit, or between two of split's outputs.  Recorded only
once the command line asks (``record``): a library's process would only see the list grow."""

from __future__ import annotations

_recorded: list[str] | None = None


def record() -> list[str]:
    """From now on, the final path of every output committed is appended to the list returned."""
    global _recorded
    _recorded = []
    return _recorded


def committed(final: str) -> None:
    if _recorded is not None:
        _recorded.append(final)
