"""The shape of the code: modules import each other without loops (function-local imports
included, which hide a loop rather than remove it), the check modules name no kind, and every
name a package exports exists."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folder -> the package it is installed as (pyproject's package-dir).
PACKAGES = {"rnnbench": "rnnbench", "reference": "rnnbench.reference", "impls": "rnnbench.impls",
            "suites": "rnnbench.suites", "reports": "rnnbench.reports",
            "benchmarks": "rnnbench.benchmarks", "rnnbench/commands": "rnnbench.commands"}
# The kinds' own suite modules, which register them; nothing generic may import them.
FAMILIES = {"rnnbench.suites.torch_nn", "rnnbench.suites.implicit"}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            if not path.stem.startswith("test_") and path.stem != "conftest":
                found[name] = path
    return found


MODULES = _modules()


def imports_of(path: Path) -> set[str]:
    """The rnnbench modules a file imports, wherever in the file (module or function level):
    `from package import module` is an import of the module, `from module import name` of the
    module. (That importing a submodule runs its package's __init__ first is not counted.)"""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name for name in submodules if name in MODULES]
            if len(names) < len(submodules):
                names.append(node.module)
        else:
            continue
        found |= {name for name in names if name in MODULES}
    return found


GRAPH = {name: imports_of(path) - {name} for name, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import loop of GRAPH, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = "open", path.append(node)
        for target in sorted(GRAPH[node]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (loop := visit(target)):
                return loop
        state[node], _ = "done", path.pop()
        return None

    return next((loop for node in sorted(GRAPH) if node not in state and (loop := visit(node))),
                None)


def test_no_module_imports_itself_through_others():
    loop = _cycle()
    assert loop is None, " -> ".join(loop)


def test_the_loop_finder_finds_a_planted_loop(monkeypatch):
    monkeypatch.setitem(GRAPH, "rnnbench.errors", GRAPH["rnnbench.errors"] | {"rnnbench.cli"})
    assert _cycle() is not None


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("rnnbench.suites.")
                                        and n not in FAMILIES | {"rnnbench.suites.catalogue"}))
def test_generic_suite_modules_import_no_kind_family(name):
    assert not GRAPH[name] & FAMILIES, f"{name} imports {GRAPH[name] & FAMILIES}"


@pytest.mark.parametrize("package", ["rnnbench.suites", "rnnbench.reports", "rnnbench.reference",
                                     "rnnbench.impls"])
def test_every_exported_name_exists(package):
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", ()):
        assert getattr(module, name) is not None, f"{package}.{name}"
