"""What the suites know of each kind, beside its spec record (`rnnbench.reference.kinds`): how to
make a case of a configuration, which forward check compares one run with the reference, the
dtypes its numeric checks run in, and how a failure of those is diagnosed.

The benchmarks' pre-check and the spec-driven checks ask this, so that they handle any kind
without naming one: torch.nn's six kinds use their forward check (`check_numerics`); every other
kind the spec-driven one (`check_spec`), with the record its suite module registered
(`register_suite_kind`), or the default one.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.reference import KINDS as TORCH_KINDS


@dataclass(frozen=True)
class SuiteKind:
    """`make_case(name, cfg, batch, steps)`: a case without an initial state;
    `forward_check(subject, case, dtype)`: numbers, or a Finding; `dtypes`: the dtypes of the
    kind's forward and gradient checks, the first the tightest; `diagnose(subject, run,
    observed, expected, grad_out)`: the name of the mistake a failed comparison of the
    spec-driven checks shows (grad_out None: of the outputs, else of the gradients), or None."""

    make_case: Callable
    forward_check: Callable
    dtypes: tuple[str, ...] = ("float64", "float32")
    diagnose: Callable | None = None

    @property
    def dtype(self) -> str | None:
        """The one dtype the kind's checks run in, where they cannot run in another."""
        return self.dtypes[0] if len(self.dtypes) == 1 else None


_RECORDS: dict[str, SuiteKind] = {}


def register_suite_kind(kind: str, record: SuiteKind) -> None:
    """Give a kind checked by the spec-driven checks its own record (dtypes, diagnoses)."""
    _RECORDS[kind] = record


def suite_kind(kind: str) -> SuiteKind:
    """The suites' record of `kind` (the spec-driven default for kinds without one)."""
    if kind in TORCH_KINDS:
        from rnnbench.suites.cases import Case
        from rnnbench.suites.check_numerics import check_forward
        from rnnbench.suites.checks import NUMERIC_DTYPES

        return SuiteKind(lambda name, cfg, batch, steps: Case(name, cfg, batch, steps, h0=False),
                         check_forward, dtypes=tuple(dtype for dtype, _ in NUMERIC_DTYPES))
    # The catalogue imports the built-in kinds' suite modules, which register their records.
    from rnnbench.suites import checks  # noqa: F401
    from rnnbench.suites.check_spec import suite_record

    return _RECORDS.get(kind) or suite_record()
