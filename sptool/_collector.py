"""Python's cyclic garbage collector kept off the modules the ``sptool`` script loads."""

from __future__ import annotations

import contextlib
import gc

_script = False


def script_process() -> None:
    """Declare this process the ``sptool`` script's (sptool.__main__), where loaded modules may
    be frozen; a caller's process (the Python API, the tests' CliRunner) is left alone."""
    global _script
    _script = True


@contextlib.contextmanager
def paused_for_imports():
    """In the script's process, load modules with the cyclic collector off, then freeze what
    exists (gc.freeze: the permanent generation, which collections never walk).

    Loading modules allocates many container objects and almost no garbage, yet every 700 of
    them start a collection over the young ones: ``import distributed`` ran about 100
    collections, 40-55 ms of its 0.35 s, and the command line's own imports about 57 (10-16 ms;
    measured with gc.callbacks, session 10).  Pausing alone only defers that work: the first
    collection after it walks everything loaded (37-40 ms, measured), hence the freeze.  In
    another process freezing would keep the caller's own objects from ever being collected, so
    there this does nothing; so it does when the collector is off already."""
    if not (_script and gc.isenabled()):
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
