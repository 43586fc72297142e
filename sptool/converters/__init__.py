"""Converters between sptool and other sparse formats.

``convert(src, dst, ...)`` is the entry point (sptool convert on the command line).  One
module per format: tns (FROSTT), mtx (Matrix Market), delimited (.csv, .tsv), npz
(scipy.sparse), npy (dense NumPy); text holds the chunked text reader they share, built on
the compiled parser in sptool/_textparse.pyx.
"""

from .registry import FORMATS, convert, input_format, output_format

__all__ = ["convert", "FORMATS", "input_format", "output_format"]
