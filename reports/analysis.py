"""What the tables and figures share: outcome counts, speed-ups over the baseline, series.

Pure functions of the normalised `Results`; nothing here formats or draws.

A speed-up is the baseline's median time over the implementation's in the same run. A result
whose numbers do not conform (bench's `conforms: false`), or whose baseline's do not, has no
speed-up: fast wrong answers are not a result. Its interval and verdict come from
`rnnbench.benchmarks.statistics.speedup`, as in `bench` and `run`: an interval that contains
1.0 makes the ratio "within noise", and a run timed on a busy machine has no verdict at all.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rnnbench.benchmarks.result import vs_native
from rnnbench.benchmarks.statistics import Ratio, speedup
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


@dataclass(frozen=True)
class Speedups:
    """Every timing's speed-up over the baseline's timing in its comparison group: the
    baselines by group, and the Ratios by (group, impl) of the timings that have one."""

    baselines: dict[tuple, Timing]
    ratios: dict[tuple, Ratio]


def speedups(timings: Iterable[Timing]) -> Speedups:
    """The Speedups of `timings`; the baseline's own ratio is 1."""
    timings = list(timings)
    baselines = {comparison_group(t): t for t in timings if t.impl == BASELINE}
    ratios = {}
    for t in timings:
        base = baselines.get(comparison_group(t))
        if t.impl == BASELINE:
            ratio = Ratio(1.0) if vs_native(t, t) is not None else None
        else:
            ratio = speedup([(base, t)], busy=t.source.busy) if base else None
        if ratio is not None:
            ratios[(comparison_group(t), t.impl)] = ratio
    return Speedups(baselines, ratios)


def speedup_of(table: Speedups, t: Timing) -> float | None:
    ratio = ratio_of(table, t)
    return None if ratio is None else ratio.value


def ratio_of(table: Speedups, t: Timing) -> Ratio | None:
    """The speed-up of `t` with its interval and verdict; None where `t` has no speed-up."""
    return table.ratios.get((comparison_group(t), t.impl))


@dataclass(frozen=True)
class Headline:
    """One implementation's speed-up over the baseline, summed up over the results it has.

    `ratio` is the geometric mean over `count` results (workload x metric) with its interval
    from their raw samples (`rnnbench.benchmarks.statistics.speedup`).
    `left_out` counts the timed results left out because their numbers do not conform;
    `noisy` the results flagged noisy.
    """

    ratio: Ratio | None
    count: int
    left_out: int
    noisy: int


def headline(timings: Iterable[Timing], table: Speedups) -> Headline:
    """The Headline of the timings of one implementation (one machine and device)."""
    timings = [t for t in timings if t.status == "ok" and t.median_s]
    pairs = [(table.baselines[comparison_group(t)], t) for t in timings
             if t.impl != BASELINE and ratio_of(table, t) is not None]
    left_out = sum(t.conforms is False for t in timings)
    noisy = sum(t.noisy is True for t in timings)
    ratio = speedup(pairs, busy=any(t.source.busy for _, t in pairs))
    return Headline(ratio, len(pairs), left_out, noisy)


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
