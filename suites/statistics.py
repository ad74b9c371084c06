"""The suite's statistical tests, and why a correct implementation practically never fails them.

Two checks are statistical: `init` (is every parameter drawn from its spec distribution?) and
`dropout-train` (are units dropped at rate p, with a fresh mask every time step?). Every such
test rejects at level ALPHA = 1e-10. A run makes at most MAX_TESTS of them (`tests/test_suites.py`
counts the full case list: one Kolmogorov-Smirnov test per parameter of each construction case,
two binomial tests per dropout case with 0 < p < 1). By Bonferroni's inequality the chance that a correct implementation fails
any statistical test in a run is at most MAX_TESTS * ALPHA = 2e-8 < 1e-6. The deterministic
parts (values outside the init bounds, kept units not scaled by exactly 1/(1-p)) cannot fail a
correct implementation at all.

Power. The KS test rejects when sqrt(n) * D > lambda with 2 * exp(-2 lambda^2) = ALPHA, i.e.
lambda = 3.44; with n >= 1000 samples per parameter that is any CDF gap D > 0.109. The textbook
mistakes are far beyond it: a 1/H bound instead of 1/sqrt(H) at H = 7 gives D = 0.31, zeros 0.5,
and randn, orthogonal or Xavier inits put values outside the bounds. The rate test sees ~1000
dropout decisions: at p = 0.5 a rate off by 0.1 is 6 standard deviations out, and a rate of 1-p
instead of p only passes if p = 0.5, where the two coincide.
"""
from __future__ import annotations

import numpy as np

from rnnbench.reference import Uniform, UniformSum

ALPHA = 1e-10
MAX_TESTS = 200
# Values a hair outside [low, high] are float rounding of the bounds, not a wrong distribution.
BOUND_SLACK = 1e-6


def sample_fit(samples: np.ndarray, dist) -> dict:
    """How well `samples` fit a spec distribution: the KS statistic and p-value, the extremes,
    and how many values lie outside a uniform's (or a sum of two's) bounds (none can for a
    normal)."""
    statistic = ks_statistic(samples, dist.cdf)
    outside = 0
    if isinstance(dist, (Uniform, UniformSum)):
        slack = BOUND_SLACK * (dist.high - dist.low)
        outside = int(np.count_nonzero((samples < dist.low - slack) | (samples > dist.high + slack)))
    return {"ks": statistic, "p_value": ks_p_value(statistic, samples.size),
            "min": float(samples.min()), "max": float(samples.max()), "samples": int(samples.size),
            "outside": outside}


def ks_statistic(samples: np.ndarray, cdf) -> float:
    """The two-sided Kolmogorov-Smirnov statistic D = sup |F_n(x) - F(x)| of `samples`
    against the distribution function `cdf`."""
    values = cdf(np.sort(np.asarray(samples, dtype=np.float64)))
    n = values.size
    above = np.arange(1, n + 1) / n - values     # F_n just after each sample, minus F
    below = values - np.arange(n) / n            # F minus F_n just before it
    return float(max(above.max(), below.max()))


def ks_p_value(statistic: float, n: int) -> float:
    """P(D_n >= statistic) for a sample of `n` from the distribution itself, bounded above by
    twice the exact one-sided tail (the two one-sided events' union): a test that rejects below
    ALPHA rejects a correct implementation at most at rate ALPHA, and where it matters (p near
    ALPHA) the two tails practically never overlap, so the bound is the exact value there."""
    from scipy.special import smirnov  # scipy.special imports in a quarter of scipy.stats' time

    return float(min(1.0, 2.0 * smirnov(n, statistic)))


def fits(fit: dict) -> bool:
    """Whether a `sample_fit` result is consistent with the distribution."""
    return fit["outside"] == 0 and fit["p_value"] >= ALPHA


def binomial_tail(events: int, trials: int, rate: float) -> float:
    """P(X >= events) for X ~ Binomial(trials, rate): a one-sided test of too many events."""
    from scipy.special import bdtrc

    return 1.0 if events <= 0 else float(bdtrc(events - 1, trials, rate))


def rate_p_value(events: int, trials: int, rate: float) -> float:
    """Two-sided binomial test of `events` in `trials` against `rate`: twice the smaller tail."""
    from scipy.special import bdtr

    lower = float(bdtr(events, trials, rate))
    return min(1.0, 2.0 * min(lower, binomial_tail(events, trials, rate)))
