"""CRC-32C (Castagnoli), as the stream digest takes it: google-crc32c's hardware-accelerated one
when that package is installed with its C extension (the ``crc`` extra), else the compiled
slicing-by-8 of ``_tfrecord.pyx``; the same numbers either way.  The package is looked for at
the first CRC taken, not when sptool is imported.  (TFRecord's and apply's CRCs are taken
inside the compiled loops, record by record: they stay with the compiled one.)"""

from __future__ import annotations

import warnings

from ._tfrecord import crc32c as sliced_crc32c

_extend = None  # google_crc32c.extend, or False without it: chosen at the first call


def _hardware_extend():
    """google_crc32c.extend where it runs compiled, else False."""
    try:
        with warnings.catch_warnings():
            # Without its C extension the package warns, and it is slower than the fallback.
            warnings.simplefilter("ignore", RuntimeWarning)
            import google_crc32c
    except ImportError:
        return False
    return google_crc32c.extend if google_crc32c.implementation == "c" else False


def crc32c(data, crc: int = 0) -> int:
    """The CRC-32C of the bytes-like ``data``, continuing ``crc`` (a previous result)."""
    global _extend
    if _extend is None:
        _extend = _hardware_extend()
    if _extend:
        try:
            return _extend(crc, data)
        except TypeError:  # it takes bytes and read-only buffers only (not bytearray, memoryview)
            pass
    return sliced_crc32c(memoryview(data).cast("B"), crc)
