"""Builds the Cython kernels.

Compiler directives live here, not in the .pyx headers, so that SPTOOL_CYTHON_DEBUG=1 can
turn bounds and wraparound checking back on for a debug build (a header directive would
silently override this switch).
"""

import os
from glob import glob

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class ParallelBuildExt(build_ext):
    """Compile the extensions side by side, one per core (pip passes no -j of its own)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1


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
setup(ext_modules=cythonize(extensions, compiler_directives=directives, nthreads=os.cpu_count() or 1),
      cmdclass={"build_ext": ParallelBuildExt})
