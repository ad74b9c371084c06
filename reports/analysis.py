"""What the tables and figures share: outcome counts, speed-ups over the baseline, series.

Pure functions of the normalised `Results`; nothing here formats or draws.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rnnbench.reports.model import Check, Timing
from rnnbench.results import BASELINE, OUTCOMES

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
    """(comparison group, impl) -> baseline median / impl median (> 1 means faster)."""
    timings = [t for t in timings if t.status == "ok" and t.median_s]
    baseline = {comparison_group(t): t.median_s for t in timings if t.impl == BASELINE}
    return {(comparison_group(t), t.impl): baseline[comparison_group(t)] / t.median_s
            for t in timings if comparison_group(t) in baseline}


def speedup_of(table: dict[tuple, float], t: Timing) -> float | None:
    return table.get((comparison_group(t), t.impl))


@dataclass(frozen=True)
class Series:
    """Median time against one size, the other sizes fixed: one line of a scaling plot."""

    axis: str
    label: str
    device: str
    metric: str
    points: tuple[tuple[float, float], ...]   # (size, median_s), sorted by size


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
            key = (t.source.machine, t.impl, t.kind, t.device, t.dtype, t.metric, fixed)
            groups.setdefault(key, {})[t.sizes[axis]] = t.median_s
        for (machine, impl, kind, device, dtype, metric, fixed), points in groups.items():
            if len(points) >= MIN_SERIES_POINTS:
                held = ", ".join(f"{k}={v:g}" for k, v in fixed)
                label = f"{impl} {kind} {dtype} ({held})" if held else f"{impl} {kind} {dtype}"
                found.append(Series(axis, label, device, metric, tuple(sorted(points.items()))))
    return found
