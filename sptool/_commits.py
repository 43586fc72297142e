"""The paths the ``sptool`` script's command has committed (outputs moved into place, a table
updated in place), for the message of an interruption that lands after a commit, before the exit.
Recorded only once the script asks (``record``): a library's process would only see the list grow.
Internal files committed too (spools, scratch) are gone by the time that message is written."""

from __future__ import annotations

_recorded: list[str] | None = None


def record() -> None:
    """From now on, the final path of every output committed is recorded."""
    global _recorded
    _recorded = []


def recorded() -> list[str]:
    return list(_recorded or ())


def committed(final: str) -> None:
    if _recorded is not None:
        _recorded.append(final)
