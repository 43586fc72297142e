"""Builds the Cython kernels.

Compiler directives live here, not in the .pyx headers, so that SPTOOL_CYTHON_DEBUG=1 can
turn bounds and wraparound checking back on for a debug build (a header directive would
silently override this switch).
"""

import os
from glob import glob

from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("SPTOOL_CYTHON_DEBUG") == "1"
directives = {
    "language_level": 3,
    "boundscheck": debug,
    "wraparound": debug,
    "initializedcheck": debug,
    "cdivision": True,
    "embedsignature": True,
}
extensions = [
    Extension(
        path[:-4].replace("/", "."),
        [path],
        extra_compile_args=["-O3"] if not debug else ["-O0", "-g"],
    )
    for path in sorted(glob("sptool/*.pyx"))
]
setup(ext_modules=cythonize(extensions, compiler_directives=directives))
