"""Builds the Cython kernels.

Compiler directives live here, not in the .pyx headers, so that SPTOOL_CYTHON_DEBUG=1 can
turn bounds and wraparound checking back on for a debug build (a header directive would
silently override this switch).
"""

import json
import os
import shutil
from glob import glob

import Cython
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

debug = os.environ.get("SPTOOL_CYTHON_DEBUG") == "1"
# -g0: Python's own CFLAGS ask for debug info, which costs a third of the compile time and
# nothing at run time; a debug build keeps it.
compile_args = ["-O0", "-g"] if debug else ["-O3", "-g0"]
directives = {
    "language_level": 3,
    "boundscheck": debug,
    "wraparound": debug,
    "initializedcheck": debug,
    "cdivision": True,
    "embedsignature": True,
}
# How this checkout's C files were last translated and its kernels last compiled: a reinstall with
# the same settings and no newer source reuses them, so adding the test extras to an editable
# install translates and compiles nothing.
TRANSLATED = os.path.join("build", "kernels-translated.json")
COMPILED = os.path.join("build", "kernels-compiled.json")


def _stamp_matches(path: str, settings: dict) -> bool:
    try:
        with open(path) as f:
            return json.load(f) == settings
    except (OSError, ValueError):
        return False


def _write_stamp(path: str, settings: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(settings, f)


class ParallelBuildExt(build_ext):
    """Compile the extensions side by side, one per core (pip passes no -j of its own), and in an
    editable install keep the kernels already compiled in place when nothing they depend on is
    newer."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext):
        built = self._built_in_place(ext)
        if built:
            os.makedirs(os.path.dirname(self.get_ext_fullpath(ext.name)), exist_ok=True)
            shutil.copy2(built, self.get_ext_fullpath(ext.name))
            return
        super().build_extension(ext)

    def run(self):
        super().run()
        if self.inplace or self.editable_mode:
            _write_stamp(COMPILED, {"args": compile_args})

    def _built_in_place(self, ext):
        """The in-place kernel of an earlier editable build, if it is still good for ``ext``."""
        editable = self.inplace or self.editable_mode
        if not editable or self.force or not _stamp_matches(COMPILED, {"args": compile_args}):
            return None
        in_place = os.path.join(*ext.name.split(".")[:-1], os.path.basename(self.get_ext_filename(ext.name)))
        if not os.path.exists(in_place):
            return None
        return in_place if os.path.getmtime(in_place) >= os.path.getmtime(ext.sources[0]) else None


def _c_is_current(pyx: str, same_build: bool) -> bool:
    """Whether the C file translated from ``pyx`` by an earlier build can be compiled as it is.
    cythonize's own check also counts Cython's bundled .pxd files, which a fresh isolated build
    environment stamps as new every time, so it would translate everything again."""
    c = pyx[:-4] + ".c"
    if not (same_build and os.path.exists(c)):
        return False
    return os.path.getmtime(c) >= max(os.path.getmtime(p) for p in [pyx, *glob("sptool/*.pxd"), __file__])


def _extensions():
    translation = {"directives": directives, "cython": Cython.__version__}
    same_build = _stamp_matches(TRANSLATED, translation)
    current, stale = [], []
    for pyx in sorted(glob("sptool/*.pyx")):
        name = pyx[:-4].replace("/", ".")
        if _c_is_current(pyx, same_build):
            current.append(Extension(name, [pyx[:-4] + ".c"], extra_compile_args=compile_args))
        else:
            stale.append(Extension(name, [pyx], extra_compile_args=compile_args))
    if stale:
        stale = cythonize(stale, compiler_directives=directives, nthreads=os.cpu_count() or 1, force=True)
        _write_stamp(TRANSLATED, translation)
    # Largest C file first, so the longest compile does not start last on a busy core.
    return sorted(current + stale, key=lambda ext: os.path.getsize(ext.sources[0]), reverse=True)


setup(ext_modules=_extensions(), cmdclass={"build_ext": ParallelBuildExt})
