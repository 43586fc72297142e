"""Keeping pandas out of the command line's process (it is no dependency of sptool)."""

from __future__ import annotations

import sys


class _WithoutPandas:
    """An import finder that makes pandas look absent, as it is from sptool's dependencies.

    pyarrow's to_numpy imports pandas whenever it is installed (for its conversion tables), on
    the first call, on a decoding thread that holds the import lock meanwhile: 0.25 CPU-second
    a command, and 0.57 of a 5M-row reorder's 1.49 (median of 5 interleaved runs)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def keep_pandas_out():
    """For the command line only: the Python API leaves its caller's imports alone."""
    if "pandas" not in sys.modules and _WithoutPandas not in sys.meta_path:
        sys.meta_path.insert(0, _WithoutPandas)
