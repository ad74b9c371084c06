"""The catalogue of checks: stable ids, categories, and the cases each runs on.

A check is a generic function of (subject, case) that returns numbers when the implementation
passed and raises `Finding` when it did not; it knows nothing about any one implementation. Its
id on a case is "<name>/<case name>", e.g. "forward/two-layer-bidirectional"; with the kind it
is unique and stable across runs. `dtype`, `backward` and `features` say which features the check
needs, so an implementation that lacks them gets "not_supported" instead of a failure.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from rnnbench.suites import (check_construction, check_dropout, check_errors, check_init,
                             check_inputs, check_numerics, check_packed, check_shapes, check_solver,
                             check_state)
from rnnbench.suites.cases import (CASES, CONSTRUCTION_CASES, DROPOUT_CASES, PACKED_CASES, Case,
                                   select)

CATEGORIES = ("construction", "init", "shapes", "forward", "gradients", "state", "dropout",
              "errors", "inputs", "solver")


def _every(case: Case) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """One check: what it is called, what it examines, which rows of which table it runs on."""

    name: str
    category: str
    function: Callable
    table: tuple[Case, ...]
    applies: Callable[[Case], bool] = _every
    dtype: str = "float32"
    backward: bool = False
    features: tuple[str, ...] = ()  # call features the check needs whatever the case
    quick_rows: int | None = None   # a --quick run takes only this many of its rows, if set

    def id(self, case: Case) -> str:
        return f"{self.name}/{case.name}"

    def cases(self, kind: str, quick: bool = False) -> list[Case]:
        chosen = [case for case in select(self.table, kind, quick) if self.applies(case)]
        return chosen[:self.quick_rows] if quick and self.quick_rows is not None else chosen


# The dtypes of the numeric checks and their ids' suffixes: float64 is tight enough that any real
# mistake fails; the others are judged by the policy's tolerance for the dtype
# (rnnbench.reference.tolerance), the half-precision ones included, so that a mistake confined to
# an implementation's half path (a gate computed in a coarser dtype, an approximation used only
# there) is seen too.
NUMERIC_DTYPES = (("float64", ""), ("float32", "-float32"), ("bfloat16", "-bfloat16"),
                  ("float16", "-float16"))


HALF_DTYPES = ("bfloat16", "float16")


def _smooth(case: Case) -> bool:
    """Whether the case's gradients are a smooth function of its inputs. relu's derivative jumps
    at 0, and half precision rounds preactivations across it: there even torch.nn's gradients
    differ from the float64 reference by O(1) now and then (reference/tolerance.py), so relu
    gradients are judged in float64 and float32 only."""
    return case.config.nonlinearity != "relu"


def _numeric_checks() -> list[Check]:
    """forward and gradients in each of NUMERIC_DTYPES."""
    checks = []
    for dtype, suffix in NUMERIC_DTYPES:
        # A --quick run leaves half precision to the full list: compiled implementations build a
        # graph per dtype and grad mode, and with empty caches compile's half rows alone (one
        # per kind) took 30 s of the quick run per sequence kind.
        quick_rows = 0 if dtype in HALF_DTYPES else None
        checks.append(Check(f"forward{suffix}", "forward",
                            partial(check_numerics.check_forward, dtype=dtype), CASES, dtype=dtype,
                            quick_rows=quick_rows))
        checks.append(Check(f"gradients{suffix}", "gradients",
                            partial(check_numerics.check_gradients, dtype=dtype), CASES,
                            applies=_smooth if dtype in HALF_DTYPES else _every,
                            dtype=dtype, backward=True, quick_rows=quick_rows))
    return checks


CHECKS: tuple[Check, ...] = (
    Check("parameters", "construction", check_construction.check_parameters, CASES),
    Check("biases", "construction", check_construction.check_biases, CONSTRUCTION_CASES,
          applies=lambda case: case.config.bias),
    *(Check(f"dtype-device{suffix}", "construction",
            partial(check_construction.check_dtype_device, dtype=dtype), CONSTRUCTION_CASES,
            dtype=dtype, features=("factory_kwargs",))
      for dtype, suffix in (("float64", ""), ("float32", "-float32"))),
    Check("invalid-arguments", "construction", check_construction.check_invalid_arguments,
          CONSTRUCTION_CASES),
    Check("init", "init", check_init.check_init, CONSTRUCTION_CASES),
    Check("shapes", "shapes", check_shapes.check_shapes, CASES),
    *_numeric_checks(),
    # Variable-length sequences (PackedSequence input): float64 tight, float32 by the policy.
    *(Check(f"packed-forward{suffix}", "forward",
            partial(check_packed.check_packed_forward, dtype=dtype), PACKED_CASES, dtype=dtype)
      for dtype, suffix in (("float64", ""), ("float32", "-float32"))),
    Check("packed-gradients", "gradients",
          partial(check_packed.check_packed_gradients, dtype="float64"), PACKED_CASES,
          dtype="float64", backward=True),
    Check("state", "state", check_state.check_state, CASES, applies=check_state.applies,
          features=("initial_state",)),
    Check("dropout-eval", "dropout", check_dropout.check_eval, DROPOUT_CASES,
          applies=check_dropout.has_dropout),
    Check("dropout-train", "dropout", check_dropout.check_train, DROPOUT_CASES),
    *(Check(f"error-{wrong.name}", "errors", partial(check_errors.check_rejected, wrong=wrong),
            CASES, applies=wrong.applies, features=wrong.features)
      for wrong in check_errors.WRONG_INPUTS),
    Check("inputs", "inputs", check_inputs.check_inputs_unchanged, CASES),
    *(Check(**row) for row in check_solver.ROWS),
)


# Rows a kind registered after import adds (rnnbench.suites.check_spec.register_kind).
_REGISTERED: list[Check] = []


def register_checks(rows) -> None:
    """Add catalogue rows, e.g. the spec-driven checks of a newly registered kind."""
    _REGISTERED.extend(rows)


def all_checks() -> tuple[Check, ...]:
    """The catalogue: the built-in rows, then the registered ones."""
    return CHECKS + tuple(_REGISTERED)
