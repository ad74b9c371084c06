"""Comparing arrays with a `Tolerance` from the spec, NaN-safe, with the numbers a report needs."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from rnnbench.reference import Tolerance

# A dtype -> the coarser ones computed inside it by mistake or by design, finest first: float32
# in a float64 module; bfloat16 in a float16 module (same range, 3 fewer mantissa bits) or in a
# float32 one (as inference runtimes run float32 models on CPUs with bfloat16 arithmetic).
COARSER = {"float64": ("float32", "bfloat16"), "float32": ("bfloat16",), "float16": ("bfloat16",)}


def precision_reached(run, observed: dict, expected: dict) -> str | None:
    """The finest dtype coarser than the run's (`COARSER`) to whose tolerance the observed
    outputs agree with the reference: the precision a module right only to that accuracy
    computes in. bfloat16's tolerance is loose enough to cover wrong functions too (a hard
    sigmoid, a small zoneout), so it is named only where every value of the first output (the
    output sequence, a cell's h) is a bfloat16 value, as results computed in it and cast back
    are (an LSTM's c may be carried in more); and none is named on a case whose
    tolerance is scaled up (the saturated one), loose enough to cover them in any dtype. None
    where no coarser dtype fits."""
    if run.case.tolerance_scale != 1.0:
        return None
    return next((dtype for dtype in COARSER.get(run.dtype, ())
                 if agree(observed, expected, run.tolerance_as(dtype))
                 and (dtype != "bfloat16" or _all_bfloat16(next(iter(observed.values())),
                                                            run.dtype))), None)


def _all_bfloat16(value, own: str) -> bool:
    """Whether every value is a bfloat16 value; values below the normal range of the run's own
    dtype `own` are left out (float16 rounds a bfloat16 value there)."""
    values = torch.as_tensor(np.asarray(value, dtype=np.float64))
    values = values[values.abs() >= torch.finfo(getattr(torch, own)).tiny]
    return torch.equal(values.to(torch.bfloat16).to(torch.float64), values)


def excess(actual, expected, tol: Tolerance, axis=None):
    """The worst ratio |actual - expected| / (atol + rtol * |expected|); > 1 means outside the
    tolerance. NaN or inf where the expected value is finite counts as infinitely far."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    ratio = np.abs(actual - expected) / (tol.atol + tol.rtol * np.abs(expected))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    if ratio.size == 0:
        return 0.0 if axis is None else np.zeros(np.delete(ratio.shape, axis))
    return float(ratio.max()) if axis is None else ratio.max(axis=axis)


def difference(actual, expected, tol: Tolerance) -> dict[str, float]:
    """max_abs, max_rel, tol (the absolute allowance) and excess of one comparison."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    error = np.abs(actual - expected)
    error = np.where(np.isnan(error), np.inf, error)
    if error.size == 0:
        return {"max_abs": 0.0, "max_rel": 0.0, "tol": tol.atol, "excess": 0.0}
    relative = error / np.maximum(np.abs(expected), np.finfo(np.float64).tiny)
    return {"max_abs": float(error.max()), "max_rel": float(relative.max()), "tol": tol.atol,
            "excess": excess(actual, expected, tol)}


def first_mismatch(observed: dict, expected: dict, tol: Tolerance) -> tuple[str, dict] | None:
    """The first name (in `expected`'s order) whose arrays differ beyond `tol`, with the numbers
    of that comparison; None when all agree. Names missing from either side, or None, are skipped."""
    for name, want in expected.items():
        got = observed.get(name)
        if got is None or want is None:
            continue
        numbers = difference(got, want, tol)
        if not numbers["excess"] <= 1.0:
            return name, {**numbers, **sample(name, got, want, tol)}
    return None


SAMPLE_VALUES = 6


def sample(name: str, actual, expected, tol: Tolerance) -> dict:
    """Where the worst element of a comparison is and the values around it: the index of its
    row (every axis but the last) and up to SAMPLE_VALUES values of that row on each side."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape or actual.size == 0:
        return {}
    ratio = np.abs(actual - expected) / (tol.atol + tol.rtol * np.abs(expected))
    worst = np.unravel_index(int(np.argmax(np.where(np.isnan(ratio), np.inf, ratio))), ratio.shape)
    row = tuple(int(i) for i in worst[:-1])
    return {"name": name, "at": list(row), "expected": expected[row][:SAMPLE_VALUES].tolist(),
            "actual": actual[row][:SAMPLE_VALUES].tolist()}


def agree(observed: dict, expected: dict, tol: Tolerance) -> bool:
    """Whether every array both sides have agrees within `tol` (shapes must match too)."""
    return distance(observed, expected, tol) <= 1.0


def distance(observed: dict, expected: dict, tol: Tolerance) -> float:
    """The worst `excess` over the arrays both sides have: inf where their shapes differ, 0 when
    they have none in common."""
    worst = 0.0
    for name, want in expected.items():
        got = observed.get(name)
        if got is None or want is None:
            continue
        if np.shape(got) != np.shape(want):
            return math.inf
        worst = max(worst, excess(got, want, tol))
    return worst


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors are the same values in the same shape and dtype."""
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


def summary(name: str, numbers: dict, what: str = "the reference") -> str:
    """The one-line message of a failed comparison."""
    return (f"{name} differs from {what} (max abs {numbers['max_abs']:.1e}, "
            f"tol {numbers['tol']:.1e})")


def agreement(observed: dict, expected: dict, tol: Tolerance) -> dict[str, float]:
    """What outputs that agree report: the largest absolute difference over `expected`'s arrays,
    and the tolerance's atol."""
    return {"max_abs": max(difference(observed[n], expected[n], tol)["max_abs"]
                           for n in expected if n in observed),
            "tol": tol.atol}


def require_outputs_close(observed: dict, expected: dict, tol: Tolerance,
                          explain: Callable[[str, dict], str | None]) -> dict[str, float]:
    """`agreement` when every output in `expected` is within `tol`; else a Finding for the first
    one that is not, with its numbers. `explain(name, numbers)` adds where it differs to
    `numbers` and returns the diagnosis (or None)."""
    from rnnbench.suites.results import Finding

    wrong = first_mismatch(observed, expected, tol)
    if wrong is None:
        return agreement(observed, expected, tol)
    name, numbers = wrong
    diagnosis = explain(name, numbers)
    raise Finding(summary(name, numbers), diagnosis, **numbers)


def require_gradients_close(observed: dict, expected: dict,
                            tol: Tolerance | dict[str, Tolerance]) -> dict[str, float]:
    """{"tol": atol} (the largest, for one tolerance per name) when every gradient in `observed`
    is within `tol` of `expected`'s; else a Finding naming the first one that is not (its
    parameter, with the numbers)."""
    from rnnbench.suites.results import Finding

    tols = tol if isinstance(tol, dict) else dict.fromkeys(observed, tol)
    for name in observed:
        wrong = first_mismatch({name: observed[name]}, {name: expected[name]}, tols[name])
        if wrong:
            numbers = wrong[1]
            raise Finding(summary(f"the gradient w.r.t. {name}", numbers), parameter=name, **numbers)
    return {"tol": max(tols[name].atol for name in observed)}
