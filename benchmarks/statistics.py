"""How sure a timing is: the one place that turns samples into an interval and a verdict.

`bench` (each result), `run`'s summary and the report (each result, and the headline geometric
mean over an implementation's results) all call `speedup`, so every screen prints the same
interval for the same number.

- `ratio_interval`: a 95% percentile-bootstrap interval (`scipy.stats.bootstrap`, `RESAMPLES`
  resamples, seeded, so the same samples give the same interval) of baseline median /
  candidate median from the raw per-call samples of both, each side resampled on its own.
  Given several workloads' pairs it is the interval of the geometric mean of their ratios,
  every sample resampled at once.
- `verdict`: "faster" when the whole interval lies above 1, "slower" when below,
  "within_noise" when it contains 1.0 — such a ratio is never shown as a speed-up.
- "not_judged": no claim either way, whatever the interval says, when the machine was busy
  while timing (`rnnbench.benchmarks.machine`) or the pair is bimodal (`is_bimodal`: some
  calls ran at another speed, e.g. while a thread waited for a core). Where the two were timed
  interleaved (`bench`: sample i of every implementation comes from round i) that is judged on
  the round-by-round ratios: a change of the whole machine's speed, which on a shared VM moves
  every implementation alike by 20-40% over seconds, makes each side's samples bimodal but not
  their ratios; one side's speed changing and not the other's makes the ratios bimodal.
  Otherwise (pytest-benchmark, asv) on the samples of either side. The interval stays the one
  that resamples each side on its own: resampling the rounds together gave intervals too narrow
  for an A/A test (3 false claims in 40 against at most 2).
- `is_noisy`: the spread is large against the median, IQR / median > NOISY_IQR_FRACTION. Such a
  median may move by that much between two runs, whatever its interval says.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rnnbench.benchmarks.result import RATIO_VERDICTS, BenchResult, vs_native

CONFIDENCE = 0.95
RESAMPLES = 2000
# Fewer samples a side and the bootstrap has nothing to resample: an interval would be a point.
MIN_SAMPLES = 3
NOISY_IQR_FRACTION = 0.10
# Two clusters: sorted, neighbours at least this factor apart, with at least this share of the
# samples (and two) on each side. A quiet machine's samples spread a few percent; a call that
# waited for a core (an OpenMP thread descheduled under contention) takes a timeslice longer.
BIMODAL_GAP = 1.3
BIMODAL_MIN_SHARE = 0.2
SEED = 0
FASTER, SLOWER, WITHIN_NOISE, NOT_JUDGED = RATIO_VERDICTS
# Why a ratio is not judged, as the screens say it.
BUSY, BIMODAL = "busy machine", "bimodal samples"


@dataclass(frozen=True)
class Ratio:
    """A speed-up over the baseline with what is known of its certainty.

    `ci` is the 95% interval where there is one; `verdict` one of RATIO_VERDICTS, or None (no
    interval: no claim either way); `unjudged_because` why a "not_judged" verdict is one (BUSY
    or BIMODAL).
    """

    value: float
    ci: tuple[float, float] | None = None
    verdict: str | None = None
    unjudged_because: str = BUSY

    @property
    def not_judged_text(self) -> str:
        """'not judged: busy machine' or 'not judged: bimodal samples'."""
        return f"not judged: {self.unjudged_because}"

    @property
    def within_noise(self) -> bool:
        return self.verdict == WITHIN_NOISE

    @property
    def not_judged(self) -> bool:
        return self.verdict == NOT_JUDGED


def speedup(pairs: Sequence[tuple[BenchResult, BenchResult]], *, busy: bool = False
            ) -> Ratio | None:
    """The speed-up of each pair's result over its baseline (`(baseline, result)`, the same
    workload and metric), summed up: the geometric mean of their `vs_native`, its interval
    from the raw samples (`ratio_interval`; a single result without samples keeps the
    interval its document states) and the verdict, "not_judged" when `busy`, when a pair is
    bimodal (`bimodal_pair`: its round-by-round ratios where timed in rounds, else either side's
    samples) or when a document already said so (a busy machine, unless the samples say
    bimodal). None when a pair has no speed-up (`vs_native` is None), or there
    are no pairs."""
    ratios = [vs_native(result, baseline) for baseline, result in pairs]
    if not ratios or None in ratios:
        return None
    from scipy.stats import gmean   # scipy.stats is slow to import: not for `rnnbench --help`

    ci = ratio_interval([(baseline.samples_s, result.samples_s) for baseline, result in pairs])
    if ci is None and len(pairs) == 1:
        ci = pairs[0][1].vs_native_ci
    bimodal = any(bimodal_pair(*pair) for pair in pairs)
    unjudged = busy or bimodal or any(r.vs_native_verdict == NOT_JUDGED
                                      for pair in pairs for r in pair)
    return Ratio(float(gmean(ratios)), ci, NOT_JUDGED if unjudged else verdict(ci),
                 BIMODAL if bimodal and not busy else BUSY)


def interleaved(baseline: BenchResult, result: BenchResult) -> bool:
    """Whether sample i of both was taken in the same round: both from a bench document (a
    report's timings name their file's format; pytest-benchmark and asv time one benchmark at a
    time) with as many samples each."""
    formats = {getattr(getattr(r, "source", None), "format", "bench") for r in (baseline, result)}
    return formats == {"bench"} and len(baseline.samples_s) == len(result.samples_s)


def bimodal_pair(baseline: BenchResult, result: BenchResult) -> bool:
    """Whether the speed of one side changed against the other's while timed: the round-by-round
    ratios are bimodal where the samples are interleaved; otherwise either side's samples."""
    if interleaved(baseline, result) and baseline.samples_s:
        return is_bimodal([b / r for b, r in zip(baseline.samples_s, result.samples_s) if r > 0])
    return bimodal(baseline) or bimodal(result)


def ratio_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES
                   ) -> tuple[float, float] | None:
    """The `confidence` interval of the geometric mean over `pairs` of
    median(baseline samples) / median(candidate samples); one pair gives the plain ratio's.
    None when a pair has fewer than MIN_SAMPLES samples a side, or a non-positive one."""
    samples = tuple(tuple(map(float, side)) for pair in pairs for side in pair)
    if not samples or any(len(side) < MIN_SAMPLES or min(side) <= 0 for side in samples):
        return None
    return _bootstrap(samples, confidence, resamples)


@functools.lru_cache(maxsize=4096)   # the report asks again for the same results' intervals
def _bootstrap(samples: tuple[tuple[float, ...], ...], confidence: float, resamples: int
               ) -> tuple[float, float]:
    from scipy.stats import bootstrap

    def geometric_mean_ratio(*sides, axis):
        logs = np.stack([np.log(np.median(side, axis=axis)) for side in sides])
        return np.exp(np.mean(logs[0::2] - logs[1::2], axis=0))

    found = bootstrap([np.array(side) for side in samples], geometric_mean_ratio,
                      n_resamples=resamples, vectorized=True, axis=-1, method="percentile",
                      confidence_level=confidence, rng=np.random.default_rng(SEED))
    low, high = found.confidence_interval
    return float(low), float(high)


def verdict(interval: Sequence[float] | None) -> str | None:
    """"faster", "slower" or "within_noise" for an interval of baseline / candidate; None
    without one."""
    if interval is None:
        return None
    low, high = interval
    if low > 1.0:
        return FASTER
    if high < 1.0:
        return SLOWER
    return WITHIN_NOISE


def is_noisy(median_s: float, iqr_s: float) -> bool:
    """Whether the spread is large against the median (IQR / median > NOISY_IQR_FRACTION)."""
    return iqr_s > NOISY_IQR_FRACTION * median_s


def is_bimodal(samples: Sequence[float]) -> bool:
    """Whether the samples fall into two clusters: sorted, two neighbours at least BIMODAL_GAP
    apart (as a factor) with at least BIMODAL_MIN_SHARE of the samples, and two, on each side."""
    ordered = sorted(samples)
    least = max(2, math.ceil(BIMODAL_MIN_SHARE * len(ordered)))
    return any(0 < ordered[i - 1] and ordered[i] >= BIMODAL_GAP * ordered[i - 1]
               for i in range(least, len(ordered) - least + 1))


def bimodal(result: BenchResult) -> bool:
    """Whether `result`'s samples are bimodal; without samples, what its document says."""
    return is_bimodal(result.samples_s) if result.samples_s else result.bimodal is True
