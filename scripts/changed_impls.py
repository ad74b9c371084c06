"""Which built-in implementations a change touches, for the pull-request workflow.

    git diff --name-only origin/main...HEAD | python3 scripts/changed_impls.py
    ["fused"]

Reads changed paths (one per line) on stdin and prints a JSON list of built-ins to check: an
implementation's own files (impls/NAME.py, impls/NAME_*.cpp) check that one; anything every
implementation stands on (the spec, the checks, the rest of impls/, the package's own code and
its metadata) checks them all; the rest (docs, tests, reports, benchmarks, scripts) checks none,
the project's tests cover it. Runs with a bare Python: the built-ins are read from
impls/registry.py, not imported.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
# Paths whose change can change any implementation's verdict.
SHARED = ("impls/", "reference/", "suites/", "rnnbench/", "pyproject.toml", "setup.py")


def builtins(registry: Path = ROOT / "impls" / "registry.py") -> tuple[str, ...]:
    """The BUILTINS tuple of impls/registry.py, read without importing it."""
    for node in ast.parse(registry.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BUILTINS"
                                                for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise ValueError(f"{registry}: no BUILTINS")


def affected(paths: list[str], names: tuple[str, ...]) -> list[str]:
    """The built-ins among `names` whose conformance the changed `paths` can change."""
    chosen = set()
    for path in map(PurePosixPath, paths):
        own = path.parent == PurePosixPath("impls") and _owner(path.name, names)
        if own:
            chosen.add(own)
        elif str(path).startswith(SHARED):
            return list(names)
    return [name for name in names if name in chosen]


def _owner(file_name: str, names: tuple[str, ...]) -> str | None:
    """The built-in a file of impls/ belongs to by its name (NAME.py, NAME_kernels.cpp)."""
    stem = file_name.split(".", 1)[0]
    return next((name for name in names if stem == name or stem.startswith(name + "_")), None)


if __name__ == "__main__":
    print(json.dumps(affected([line.strip() for line in sys.stdin if line.strip()], builtins())))
