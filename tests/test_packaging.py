"""What a wheel of sptool holds: every package of the source tree, as setuptools finds them by
pyproject.toml's configuration (an editable install, which the tests use, hides a package left out)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_under_sptool_goes_into_a_wheel():
    setuptools = pytest.importorskip("setuptools")
    with open(ROOT / "pyproject.toml", "rb") as f:
        packages = tomllib.load(f)["tool"]["setuptools"]["packages"]
    if isinstance(packages, list):
        shipped = set(packages)
    else:
        shipped = set(setuptools.find_packages(where=str(ROOT), include=packages["find"]["include"]))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "sptool").rglob("__init__.py")}
    assert shipped == on_disk, f"left out of wheels: {sorted(on_disk - shipped)}"
