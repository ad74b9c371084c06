"""The tolerance policy: how far an implementation may stray from the float64 reference.

One place for every comparison the suites make. A tolerance depends on the dtype the
implementation computed in and grows with the length of the computation (rounding errors of a
recurrence accumulate over time steps and layers, roughly like a random walk, hence the square
root). Gradients run the recurrence twice and get a fixed extra factor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# Per-step error scale for each dtype, relative to values of order one. float64 leaves room for
# a different summation order; "tf32" is float32 storage with TF32 matmuls on GPU.
_BASE = {
    "float64": 1e-11,
    "float32": 1e-5,
    "tf32": 2e-3,
    "float16": 4e-3,
    "bfloat16": 3e-2,
}
GRADIENT_FACTOR = 10.0


@dataclass(frozen=True)
class Tolerance:
    """Elementwise closeness |actual - expected| <= atol + rtol * |expected|."""

    atol: float
    rtol: float

    def excess(self, actual, expected) -> float:
        """The worst ratio of error to allowance; <= 1 means within tolerance."""
        import numpy as np

        actual = np.asarray(actual, dtype=np.float64)
        expected = np.asarray(expected, dtype=np.float64)
        if actual.size == 0:
            return 0.0
        allowance = self.atol + self.rtol * np.abs(expected)
        with np.errstate(invalid="ignore"):
            ratio = np.abs(actual - expected) / allowance
        # Equal values agree (the same infinity included); a NaN anywhere else never does.
        ratio = np.where(actual == expected, 0.0, ratio)
        return float(np.max(np.where(np.isnan(ratio), np.inf, ratio)))

    def __str__(self) -> str:
        return f"atol={self.atol:.1e} rtol={self.rtol:.1e}"


def dtypes() -> tuple[str, ...]:
    """The dtype names the policy knows."""
    return tuple(_BASE)


def tolerance(dtype: str, steps: int = 1, layers: int = 1, *, gradient: bool = False) -> Tolerance:
    """The tolerance for outputs (or gradients) of a `steps`-long, `layers`-deep computation."""
    if dtype not in _BASE:
        raise ValueError(f"no tolerance policy for dtype {dtype!r}; known: {', '.join(_BASE)}")
    scale = _BASE[dtype] * math.sqrt(max(1, steps) * max(1, layers))
    if gradient:
        scale *= GRADIENT_FACTOR
    return Tolerance(atol=scale, rtol=scale)
