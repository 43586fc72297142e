"""No function in sptool/ above cyclomatic complexity 25, as radon measures it: past that a
function interleaves several jobs, and a reader cannot follow its paths one at a time."""

from pathlib import Path

from radon.complexity import cc_visit

import sptool

LIMIT = 25


def _functions(path: Path):
    """Every function and method of a module (radon's blocks, classes opened up)."""
    for block in cc_visit(path.read_text(encoding="utf-8")):
        yield from getattr(block, "methods", None) or [block]


def test_no_function_above_the_complexity_limit():
    root = Path(sptool.__file__).parent
    modules = sorted(root.rglob("*.py"))
    assert len(modules) > 50  # the package itself, not an empty or relocated tree
    over = [f"{path.relative_to(root.parent)}:{f.lineno} {f.fullname} ({f.complexity})"
            for path in modules for f in _functions(path) if f.complexity > LIMIT]
    assert not over, "split these into functions that each do one thing:\n" + "\n".join(over)
