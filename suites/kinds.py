"""What the suites know of each kind, beside its spec record (`rnnbench.reference.kinds`): how to
make a case of a configuration, and which forward check compares one run with the reference.

The benchmarks' pre-check asks this, so that it checks any kind without naming one: torch.nn's
six kinds use their forward check (`check_numerics`), the implicit RNN its own (float64, the
solver's tolerance), and every other registered kind the spec-driven one (`check_spec`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.reference import KINDS as TORCH_KINDS
from rnnbench.reference.implicit import KIND as IMPLICIT_KIND


@dataclass(frozen=True)
class SuiteKind:
    """`make_case(name, cfg, batch, steps)`: a case without an initial state;
    `forward_check(subject, case, dtype)`: numbers, or a Finding; `dtype`: the one dtype the
    kind's checks run in, where they cannot run in another."""

    make_case: Callable
    forward_check: Callable
    dtype: str | None = None


def suite_kind(kind: str) -> SuiteKind:
    """The suites' record of `kind` (the spec-driven one for kinds registered later)."""
    if kind in TORCH_KINDS:
        from rnnbench.suites.cases import Case
        from rnnbench.suites.check_numerics import check_forward

        return SuiteKind(lambda name, cfg, batch, steps: Case(name, cfg, batch, steps, h0=False),
                         check_forward)
    if kind == IMPLICIT_KIND:
        from rnnbench.suites import check_implicit

        # float64 only: the implicit checks' tolerance (the solver's error bound) needs it
        return SuiteKind(check_implicit.Case,
                         lambda subject, case, dtype: check_implicit.check_forward(subject, case),
                         dtype="float64")
    from rnnbench.suites.check_spec import SpecCase, check_forward as spec_forward

    return SuiteKind(lambda name, cfg, batch, steps: SpecCase(name, cfg, batch, steps, h0=False),
                     spec_forward)
