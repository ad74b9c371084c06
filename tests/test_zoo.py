"""The zoo (tests/zoo): every planted bug is caught and, where the catalogue names one, gets the
right diagnosis; every correct implementation passes every check.

The catalogue runs in this process (`run_checks`, the quick plan): the same checks `conform`
runs in a child, without a fresh torch import per row. Two rows go through the real command.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rnnbench.impls import load
from rnnbench.suites import run_checks
from rnnbench.findings import DIAGNOSES

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "zoo"


@functools.cache
def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"zoo_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # zoo files import their neighbour _base
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


catalogue = _import(ZOO / "catalogue.py")
BASE = _import(ZOO / "_base.py")


def _resolve(target: str):
    path, _, attr = target.rpartition(":")
    return getattr(_import(ROOT / path), attr)


def _checked(target: str, kind: str | None = None):
    """(checks run, the failed or errored ones) for a catalogue target."""
    results = run_checks(load(str(ROOT / target), kind), kinds=[kind] if kind else None, quick=True)
    return results, [r for r in results if r.outcome in ("failed", "error")]


def _listing(results) -> str:
    return "\n".join(f"  {r.outcome} {r.kind} {r.check}: {r.message} [{r.diagnosis}]"
                     for r in results)


@pytest.mark.parametrize("row", catalogue.CORRECT, ids=lambda row: row.target.rpartition("/")[2])
def test_correct_implementation_passes(row):
    results, problems = _checked(row.target)
    assert any(r.outcome == "passed" for r in results)
    assert not problems, f"false failures of {row.target}:\n{_listing(problems)}"


@pytest.mark.parametrize("row", catalogue.PLANTED, ids=lambda row: row.target.rpartition(":")[2])
def test_planted_bug_is_caught_and_diagnosed(row):
    _, problems = _checked(row.target, row.kind)
    assert problems, f"{row.target} ({row.description}) passed every check"
    if row.diagnosis is not None:
        found = {r.diagnosis for r in problems}
        assert row.diagnosis in found, (f"{row.target} ({row.description}): expected diagnosis "
                                        f"{row.diagnosis!r}, got {sorted(map(str, found))}:\n"
                                        f"{_listing(problems)}")


# Cell kinds: the command's exit codes at the smallest plan (each call starts two processes).
CELL_BUG = next(row for row in catalogue.PLANTED if row.kind.endswith("_cell"))


@pytest.mark.parametrize("target, kind, exit_code", [
    (catalogue.CORRECT[0].target, CELL_BUG.kind, 0),
    (CELL_BUG.target, CELL_BUG.kind, 1),
])
def test_cli_exit_code(target, kind, exit_code, tmp_path):
    out = tmp_path / "conformance.json"
    command = [sys.executable, "-m", "rnnbench.cli", "conform", target, "--kind", kind, "--quick",
               "--json", str(out)]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert finished.returncode == exit_code, finished.stdout[-2000:] + finished.stderr[-2000:]
    summary = json.loads(out.read_text())["summary"]
    assert (summary["failed"] + summary["error"] > 0) == (exit_code == 1)


def test_catalogue_covers_the_issue():
    planted = catalogue.PLANTED
    assert len(planted) >= 25 and len(catalogue.CORRECT) >= 3
    assert sum(row.diagnosis is not None for row in planted) >= 20
    assert {row.diagnosis for row in planted} - {None} <= set(DIAGNOSES)
    assert len({row.target for row in planted}) == len(planted)


@pytest.mark.parametrize("row", catalogue.PLANTED, ids=lambda row: row.target.rpartition(":")[2])
def test_planted_bug_overrides_exactly_one_hook_of_the_base(row):
    bug = _resolve(row.target)
    (parent,) = bug.__bases__
    assert parent.__name__ == BASE.KINDS[row.kind].__name__
    overridden = [name for name in vars(bug) if not name.startswith("__")]
    assert len(overridden) == 1, overridden
    assert any(overridden[0] in vars(cls) for cls in inspect.getmro(parent))
