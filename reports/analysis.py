"""What the tables and figures share: outcome counts, speed-ups over the baseline, series.

Pure functions of the normalised `Results`; nothing here formats or draws.

A speed-up is the baseline's median time over the implementation's in the same run. A result
whose numbers do not conform (bench's `conforms: false`), or whose baseline's do not, has no
speed-up: fast wrong answers are not a result. Where the input carries the speed-up's 95%
interval, an interval that contains 1.0 makes the ratio "within noise", never a speed-up.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rnnbench.benchmarks.result import vs_native
from rnnbench.reports.records import Check, Timing
from rnnbench.documents import BASELINE, OUTCOMES

# Size axes a scaling curve can vary, with their axis titles; the other sizes stay fixed.
SCALING_AXES = {"steps": "sequence length", "batch": "batch size", "hidden_size": "hidden size"}
MIN_SERIES_POINTS = 3


def outcome_counts(checks: Iterable[Check], key: Callable[[Check], tuple]) -> dict[tuple, Counter]:
    """Outcome counters grouped by `key(check)`, in first-seen order; every outcome present."""
    counts: dict[tuple, Counter] = {}
    for check in checks:
        counts.setdefault(key(check), Counter({o: 0 for o in OUTCOMES}))[check.outcome] += 1
    return counts


def pass_fraction(counts: Counter) -> float | None:
    """passed / applicable (passed + failed + error); None when nothing was applicable."""
    applicable = counts["passed"] + counts["failed"] + counts["error"]
    return counts["passed"] / applicable if applicable else None


def comparison_group(t: Timing) -> tuple:
    """Timings in one group were measured in one run on the same thing and can be compared."""
    return (t.source.path, t.kind, t.workload, t.device, t.dtype, t.metric)


def speedups(timings: Iterable[Timing]) -> dict[tuple, float]:
    """(comparison group, impl) -> its vs_native over the baseline's timing in the group, for
    the timings that have one."""
    timings = list(timings)
    baseline = {comparison_group(t): t for t in timings if t.impl == BASELINE}
    found = {(comparison_group(t), t.impl): vs_native(t, baseline.get(comparison_group(t)))
             for t in timings}
    return {key: ratio for key, ratio in found.items() if ratio is not None}


def speedup_of(table: dict[tuple, float], t: Timing) -> float | None:
    return table.get((comparison_group(t), t.impl))


@dataclass(frozen=True)
class Ratio:
    """A speed-up over the baseline with what is known of its certainty.

    `ci` is the 95% interval where the input has one; `verdict` is "faster", "slower",
    "within_noise" (the interval contains 1.0) or None (no interval: no claim either way).
    """

    value: float
    ci: tuple[float, float] | None = None
    verdict: str | None = None

    @property
    def within_noise(self) -> bool:
        return self.verdict == "within_noise"


def interval_verdict(ci: tuple[float, float] | None) -> str | None:
    """The verdict an interval of baseline / implementation gives."""
    if ci is None:
        return None
    return "faster" if ci[0] > 1.0 else "slower" if ci[1] < 1.0 else "within_noise"


def ratio_of(table: dict[tuple, float], t: Timing) -> Ratio | None:
    """The speed-up of `t` with its interval and verdict (the input's verdict where it gives
    one); None where `t` has no speed-up."""
    value = speedup_of(table, t)
    if value is None:
        return None
    return Ratio(value, t.vs_native_ci, t.vs_native_verdict or interval_verdict(t.vs_native_ci))


@dataclass(frozen=True)
class Headline:
    """One implementation's speed-up over the baseline, summed up over the results it has.

    `ratio` is the geometric mean over `count` results (workload x metric). Its interval
    combines the results' own intervals on the log scale as independent normal errors (the
    mean of n of them): centred on the mean of the intervals' log-midpoints, half-width
    sqrt(sum of the log half-widths squared) / n, so one result keeps its own interval. None
    unless every result has an interval.
    `left_out` counts the timed results left out because their numbers do not conform;
    `noisy` the results flagged noisy.
    """

    ratio: Ratio | None
    count: int
    left_out: int
    noisy: int


def headline(timings: Iterable[Timing], table: dict[tuple, float]) -> Headline:
    """The Headline of the timings of one implementation (one machine and device)."""
    timings = [t for t in timings if t.status == "ok" and t.median_s]
    ratios = [r for r in (ratio_of(table, t) for t in timings) if r is not None]
    left_out = sum(t.conforms is False for t in timings)
    noisy = sum(t.noisy is True for t in timings)
    if not ratios:
        return Headline(None, 0, left_out, noisy)
    value = math.exp(sum(math.log(r.value) for r in ratios) / len(ratios))
    ci = None
    if all(r.ci for r in ratios):
        lows, highs = ([math.log(r.ci[i]) for r in ratios] for i in (0, 1))
        centre = sum(low + high for low, high in zip(lows, highs)) / (2 * len(ratios))
        half = math.sqrt(sum(((high - low) / 2) ** 2
                             for low, high in zip(lows, highs))) / len(ratios)
        ci = (math.exp(centre - half), math.exp(centre + half))
    return Headline(Ratio(value, ci, interval_verdict(ci)), len(ratios), left_out, noisy)



@dataclass(frozen=True)
class Series:
    """Median time against one size, the other sizes fixed: one line of a scaling plot, of the
    run (results file) at `path`."""

    axis: str
    label: str
    device: str
    metric: str
    points: tuple[tuple[float, float], ...]   # (size, median_s), sorted by size
    path: str = ""


def scaling_series(timings: Iterable[Timing]) -> list[Series]:
    """Every series with at least MIN_SERIES_POINTS sizes along one of SCALING_AXES."""
    timings = [t for t in timings if t.status == "ok" and t.median_s]
    found = []
    for axis in SCALING_AXES:
        groups: dict[tuple, dict[float, float]] = {}
        for t in timings:
            if axis not in t.sizes:
                continue
            fixed = tuple(sorted((k, v) for k, v in t.sizes.items() if k != axis))
            key = (t.source.path, t.impl, t.kind, t.device, t.dtype, t.metric, fixed)
            groups.setdefault(key, {})[t.sizes[axis]] = t.median_s
        for (path, impl, kind, device, dtype, metric, fixed), points in groups.items():
            if len(points) >= MIN_SERIES_POINTS:
                held = ", ".join(f"{k}={v:g}" for k, v in fixed)
                label = f"{impl} {kind} {dtype} ({held})" if held else f"{impl} {kind} {dtype}"
                found.append(Series(axis, label, device, metric, tuple(sorted(points.items())),
                                    path))
    return found
