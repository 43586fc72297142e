"""The lowest versions pyproject.toml allows, as a pip constraints file, or a check that they are
the ones installed.

    python .ci/floors.py [GROUP...]          # name==floor for [project] dependencies and each optional GROUP
    python .ci/floors.py --check [GROUP...]  # exit 1 unless every installed one of them is at its floor

Every runtime dependency must have a floor (name>=version); an optional one without a floor is
left out.  Extras in brackets are dropped: a constraint names the distribution only."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)\s*$")


def floors(groups: list[str]) -> dict[str, str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    found = {}
    for requirement in project["dependencies"]:
        m = FLOOR.match(requirement)
        if m is None:
            sys.exit(f"{PYPROJECT.name}: dependency {requirement!r} has no single floor (name>=version)")
        found[m[1].lower()] = m[2]
    for group in groups:
        for requirement in project["optional-dependencies"][group]:
            m = FLOOR.match(requirement)
            if m is not None:
                found.setdefault(m[1].lower(), m[2])
    return found


def _same(installed: str, floor: str) -> bool:
    """8.2 is 8.2.0: release numbers compared with trailing zeros dropped."""
    def release(v):
        parts = [int(p) for p in re.match(r"[0-9]+(?:\.[0-9]+)*", v)[0].split(".")]
        while parts and parts[-1] == 0:
            parts.pop()
        return parts
    return release(installed) == release(floor) and not re.search(r"[a-z]", installed.lower())


def main(argv: list[str]) -> int:
    check = "--check" in argv
    wanted = floors([a for a in argv if a != "--check"])
    if not check:
        print("\n".join(f"{name}=={version}" for name, version in wanted.items()))
        return 0
    wrong = []
    for name, version in wanted.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        print(f"{name} {installed} (floor {version})")
        if not _same(installed, version):
            wrong.append(f"{name} {installed} is not its floor {version}")
    for line in wrong:
        print(line, file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
