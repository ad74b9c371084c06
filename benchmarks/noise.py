"""How sure a timing is: the interval of a speed ratio, its verdict, and the `noisy` flag.

- `ratio_interval`: a 95% percentile-bootstrap interval of baseline median / candidate median
  from the raw per-call samples of both (each side resampled on its own, `RESAMPLES` times,
  with a fixed seed so the same samples give the same interval). Given several workloads'
  pairs it is the interval of the geometric mean of their ratios, every pair resampled at once.
- `verdict`: "faster" when the whole interval lies above 1, "slower" when below, "within_noise"
  when it contains 1.0 — such a ratio is never shown as a speed-up.
- `is_noisy`: the spread is large against the median, IQR / median > NOISY_IQR_FRACTION. Such a
  median may move by that much between two runs, whatever its interval says.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
# Fewer samples a side and the bootstrap has nothing to resample: an interval would be a point.
MIN_SAMPLES = 3
NOISY_IQR_FRACTION = 0.10
VERDICTS = ("faster", "slower", "within_noise")
SEED = 0


def ratio_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES
                   ) -> tuple[float, float] | None:
    """The `confidence` interval of the geometric mean over `pairs` of
    median(baseline samples) / median(candidate samples); one pair gives the plain ratio's.
    None when a pair has fewer than MIN_SAMPLES samples a side, or a non-positive one."""
    if not pairs:
        return None
    rng = np.random.default_rng(SEED)
    log_ratio = np.zeros(resamples)
    for baseline, candidate in pairs:
        base, cand = np.asarray(baseline, float), np.asarray(candidate, float)
        if min(base.size, cand.size) < MIN_SAMPLES or (base <= 0).any() or (cand <= 0).any():
            return None
        log_ratio += np.log(_resampled_medians(base, rng, resamples))
        log_ratio -= np.log(_resampled_medians(cand, rng, resamples))
    tail = (1 - confidence) / 2 * 100
    low, high = np.exp(np.percentile(log_ratio / len(pairs), [tail, 100 - tail]))
    return float(low), float(high)


def _resampled_medians(samples: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    draws = rng.integers(0, samples.size, size=(resamples, samples.size))
    return np.median(samples[draws], axis=1)


def verdict(interval: Sequence[float] | None) -> str | None:
    """"faster", "slower" or "within_noise" for an interval of baseline / candidate; None
    without one."""
    if interval is None:
        return None
    low, high = interval
    if low > 1.0:
        return "faster"
    if high < 1.0:
        return "slower"
    return "within_noise"


def is_noisy(median_s: float, iqr_s: float) -> bool:
    """Whether the spread is large against the median (IQR / median > NOISY_IQR_FRACTION)."""
    return iqr_s > NOISY_IQR_FRACTION * median_s
