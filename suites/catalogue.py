"""The catalogue of checks: every registered kind's checks, from its suite record.

Every kind gets the same generic checks on its own cases: parameters (names and shapes), init,
shapes, forward and gradients in each of its dtypes, its wrong inputs rejected, inputs left
unmodified, and copies (state_dict, deepcopy, pickle) that compute what the original does; then
the checks only its family has (`SuiteKind.extra_checks`). The built-in kinds (torch.nn's six,
the implicit RNN) are registered when this module is imported; a kind registered later
(`rnnbench.suites.kinds.register_kind`) is in the catalogue from then on.
"""
from __future__ import annotations

from functools import partial

# Importing them registers the built-in kinds, torch.nn's first.
from rnnbench.suites import torch_nn  # noqa: F401  (isort: skip)
from rnnbench.suites import implicit  # noqa: F401  (isort: skip)
from rnnbench.suites import check_copies, check_errors
from rnnbench.suites.check import Check, every
from rnnbench.suites.check_construction import check_parameters
from rnnbench.suites.check_init import check_init
from rnnbench.suites.check_inputs import check_inputs_unchanged
from rnnbench.suites.check_numerics import check_forward, check_gradients
from rnnbench.suites.check_shapes import check_shapes
from rnnbench.suites.kinds import HALF_DTYPES, SuiteKind, registered_kinds, suite_record

CATEGORIES = ("construction", "init", "shapes", "forward", "gradients", "state", "dropout",
              "errors", "inputs", "solver")


def suite_kind(kind: str) -> SuiteKind:
    """The suite record of `kind`, the built-in kinds registered; KeyError if it has none."""
    return suite_record(kind)


def kinds() -> list[str]:
    """Every kind with a suite record."""
    return registered_kinds()


# kind -> (its suite record, its checks): built once per record, so that a plan's items compare
# equal from one plan to the next.
_BUILT: dict[str, tuple[SuiteKind, tuple[Check, ...]]] = {}


def checks_of(kind: str) -> tuple[Check, ...]:
    """Every check of `kind`, generic ones and its family's, each on that kind's cases. A check
    that no case of the kind runs is left out."""
    suite = suite_kind(kind)
    if kind not in _BUILT or _BUILT[kind][0] is not suite:
        _BUILT[kind] = (suite, _build(suite))
    return _BUILT[kind][1]


def _build(suite: SuiteKind) -> tuple[Check, ...]:
    cases, plain = suite.cases, suite.plain_dtype
    extras = [Check(**row) for row in suite.extra_checks]
    checks = [Check("parameters", "construction", check_parameters, cases, calls=False),
              # Construction checks that call forward run after the numeric ones, so that a
              # forward that crashes is first seen where the other kinds see it.
              *(c for c in extras if c.category == "construction" and not c.calls),
              Check("init", "init", check_init, suite.initial_cases, calls=False),
              Check("shapes", "shapes", check_shapes, cases, dtype=plain),
              *_numeric_checks(suite),
              *(c for c in extras if c.category != "construction" or c.calls),
              *(Check(f"error-{wrong.name}", "errors",
                      partial(check_errors.check_rejected, wrong=wrong, dtype=plain), cases,
                      applies=wrong.applies, features=wrong.features, dtype=plain, group="errors")
                for wrong in suite.wrong_inputs),
              Check("inputs", "inputs", check_inputs_unchanged, cases, dtype=plain),
              Check("state-dict", "construction", check_copies.check_state_dict, cases,
                    dtype=plain, rows=1, group="copies"),
              *(Check(how, "construction", partial(check_copies.check_copy, how=how), cases,
                      dtype=plain, rows=1, group="copies") for how in check_copies.COPIES)]
    return tuple(check for check in checks if check.cases())


def _numeric_checks(suite: SuiteKind) -> list[Check]:
    """forward and gradients in each of the kind's dtypes. float64 is tight enough that any real
    mistake fails; the others are judged by the policy's tolerance for the dtype
    (rnnbench.reference.tolerance), the half-precision ones included, so that a mistake confined
    to an implementation's half path (a gate computed in a coarser dtype, an approximation used
    only there) is seen too."""
    checks = []
    for dtype in suite.dtypes:
        suffix = "" if dtype == "float64" else f"-{dtype}"
        half = dtype in HALF_DTYPES
        # A --quick run leaves half precision to the full list: compiled implementations build a
        # graph per dtype and grad mode, and with empty caches compile's half rows alone (one
        # per kind) took 30 s of the quick run per sequence kind.
        quick_rows = 0 if half else None
        checks.append(Check(f"forward{suffix}", "forward", partial(check_forward, dtype=dtype),
                            suite.cases, dtype=dtype, quick_rows=quick_rows, group="forward"))
        smooth = (lambda case: suite.smooth(case.config)) if half else every
        checks.append(Check(f"gradients{suffix}", "gradients",
                            partial(check_gradients, dtype=dtype), suite.cases, applies=smooth,
                            dtype=dtype, backward=True, quick_rows=quick_rows, group="gradients"))
    # The parameters' gradients with no gradient asked of the input, as a first layer's backward
    # runs (a kernel may take another path then for every layer below the top one): float64
    # only, the deepest case first, and that one alone in a --quick run (for compiled
    # implementations another grad mode is another graph to build).
    deepest_first = tuple(sorted(suite.cases,
                                 key=lambda case: -getattr(case.config, "num_layers", 1)))
    checks.append(Check("gradients-parameters", "gradients",
                        partial(check_gradients, dtype="float64", inputs=False), deepest_first,
                        dtype="float64", backward=True, quick_rows=1, group="gradients"))
    return checks


def all_checks() -> dict[str, tuple[Check, ...]]:
    """Every registered kind's checks, by kind."""
    return {kind: checks_of(kind) for kind in kinds()}
