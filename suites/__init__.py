"""rnnbench.suites — the conformance checks.

Public API:

- `conform(target, kinds=None, device="cpu", quick=False, seed=0, timeout_s=60, progress=None)`
  runs every check of a target in a child process and returns its `ConformanceRun` document
  (`rnnbench conform` is a thin shell over it);
- `run_checks(impl, kinds=None, device="cpu", quick=False, seed=0, progress=None)` runs them in
  this process and returns a list of `CheckResult`;
- `CheckResult`, `ConformanceRun`; `all_checks()` (the catalogue: every registered kind's checks,
  with stable ids, categories, cases) and `CATEGORIES`; `register_kind(spec, suite)` with
  `SuiteKind` and `Case` to add a kind; `DIAGNOSES` (id -> sentence).

Names are resolved on first use: pytest imports this package for its plugin in every run, and
that must not cost a torch import.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "CheckResult": "rnnbench.suites.results",
    "ConformanceRun": "rnnbench.suites.results",
    "run_checks": "rnnbench.suites.runner",
    "conform": "rnnbench.suites.isolation",
    "all_checks": "rnnbench.suites.catalogue",
    "CATEGORIES": "rnnbench.suites.catalogue",
    "Case": "rnnbench.suites.cases",
    "SuiteKind": "rnnbench.suites.kinds",
    "register_kind": "rnnbench.suites.kinds",
    "DIAGNOSES": "rnnbench.findings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rnnbench.suites' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
