"""rnnbench.suites — the conformance checks.

Public API:

- `conform(target, kinds=None, device="cpu", quick=False, seed=0, timeout_s=60, progress=None)`
  runs every check of a target in a child process and returns the rnnbench.conformance/1
  document (`rnnbench conform` is a thin shell over it);
- `run_checks(impl, kinds=None, device="cpu", quick=False, seed=0, progress=None)` runs them in
  this process and returns a list of `CheckResult`;
- `CheckResult`; `CHECKS` (the catalogue: stable ids, categories, cases); `CASES`,
  `CONSTRUCTION_CASES`, `DROPOUT_CASES` (the case tables); `DIAGNOSES` (id -> sentence).

Names are resolved on first use: pytest imports this package for its plugin in every run, and
that must not cost a torch import.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "CheckResult": "rnnbench.suites.results",
    "OUTCOMES": "rnnbench.suites.results",
    "run_checks": "rnnbench.suites.runner",
    "conform": "rnnbench.suites.isolation",
    "CHECKS": "rnnbench.suites.checks",
    "CATEGORIES": "rnnbench.suites.checks",
    "CASES": "rnnbench.suites.cases",
    "CONSTRUCTION_CASES": "rnnbench.suites.cases",
    "DROPOUT_CASES": "rnnbench.suites.cases",
    "DIAGNOSES": "rnnbench.suites.diagnoses",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rnnbench.suites' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
