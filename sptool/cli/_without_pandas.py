"""Keeping pandas out of the ``sptool`` script's own process (it is no dependency of sptool)."""

from __future__ import annotations

import sys


class _WithoutPandas:
    """An import finder that makes pandas look absent, as it is from sptool's dependencies.

    pyarrow imports pandas whenever it is installed (its to_numpy and array conversions look for
    pandas types), on the first call, often on a decoding thread that holds the import lock
    meanwhile.  pyarrow supports running without pandas, and sptool's own code never needs it
    (tests/test_versions.py runs the command line where pandas is installed)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def keep_pandas_out():
    """For the ``sptool`` script only (sptool.__main__.run): a host process's imports are its own."""
    if "pandas" not in sys.modules and _WithoutPandas not in sys.meta_path:
        sys.meta_path.insert(0, _WithoutPandas)
