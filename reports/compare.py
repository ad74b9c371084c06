"""Comparing two benchmark runs, noise-aware: is HEAD slower than BASE?

Per (impl, kind, workload, device, dtype, metric) the change of the median time. A change is
judged against the runs' own spread: with IQRs `iqr_b` and `iqr_h`, a change of the median no
larger than `max(iqr_b, iqr_h)` is inside the noise and never a regression, whatever the
threshold. A **regression** is a result slower by more than the threshold AND outside the noise,
or one that ran in BASE and failed in HEAD.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tabulate import tabulate

from rnnbench.errors import UsageError
from rnnbench.reports.model import Timing
from rnnbench.reports.units import seconds

DEFAULT_THRESHOLD = 0.05
# Verdicts, in the order the summary lists them; GATING ones make `rnnbench compare` exit 1.
VERDICTS = ("regression", "failed", "improvement", "below threshold", "within noise",
            "now timed", "not comparable", "not timed", "new", "gone", "duplicate")
GATING = ("regression", "failed")
# Environment keys whose difference makes a comparison suspect; printed as a note.
MACHINE_KEYS = ("hostname", "cpu", "gpu", "torch", "cuda", "threads")


@dataclass(frozen=True)
class Change:
    """One result in BASE and/or HEAD and the verdict on it."""

    key: tuple                 # Timing.key(): impl, kind, workload, device, dtype, metric
    base: Timing | None
    head: Timing | None
    verdict: str
    change: float | None = None      # head median / base median - 1
    noise: float | None = None       # the spread, relative to the base median


def parse_threshold(text: str) -> float:
    """'5%' or '5' -> 0.05; UsageError for anything that is not a non-negative percentage."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%?\s*", str(text))
    if not match:
        raise UsageError(f"--threshold {text!r}: expected a percentage such as 5% or 2.5")
    return float(match.group(1)) / 100


def compare_runs(base: list[Timing], head: list[Timing],
                 threshold: float = DEFAULT_THRESHOLD) -> list[Change]:
    """A Change for every result key in either run, in BASE's order then HEAD's new ones."""
    base_by, head_by = _by_key(base), _by_key(head)
    changes = []
    for key in dict.fromkeys([*base_by, *head_by]):
        b, h = base_by.get(key, []), head_by.get(key, [])
        if len(b) > 1 or len(h) > 1:
            changes.append(Change(key, b[0] if b else None, h[0] if h else None, "duplicate"))
        elif not h:
            changes.append(Change(key, b[0], None, "gone"))
        elif not b:
            changes.append(Change(key, None, h[0], "new"))
        else:
            changes.append(_judge(key, b[0], h[0], threshold))
    return changes


def gating(changes: list[Change]) -> list[Change]:
    """The changes that fail the comparison."""
    return [c for c in changes if c.verdict in GATING]


def format_changes(changes: list[Change], threshold: float) -> str:
    """The table `rnnbench compare` prints, then a one-line verdict."""
    rows = [[*c.key, _time(c.base), _time(c.head), _percent(c.change, signed=True),
             _percent(c.noise), c.verdict] for c in changes]
    table = tabulate(rows, ["impl", "kind", "workload", "device", "dtype", "metric", "base",
                            "head", "change", "noise (IQR)", "verdict"], disable_numparse=True)
    counts = {v: sum(c.verdict == v for c in changes) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    bad = gating(changes)
    verdict = (f"FAIL: {len(bad)} regression(s) past {threshold:.1%} outside the noise"
               if bad else f"OK: no regression past {threshold:.1%} outside the noise")
    return f"{table}\n\n{summary or 'nothing to compare'}\n{verdict}"


def machine_differences(base_env: dict, head_env: dict) -> list[str]:
    """'key: base vs head' for each MACHINE_KEYS entry that differs between the two runs."""
    return [f"{k}: {base_env.get(k)} vs {head_env.get(k)}" for k in MACHINE_KEYS
            if base_env.get(k) != head_env.get(k)]


def _judge(key: tuple, base: Timing, head: Timing, threshold: float) -> Change:
    base_ok = base.status == "ok" and bool(base.median_s)
    head_ok = head.status == "ok" and head.median_s is not None
    if not (base_ok and head_ok):
        if base_ok:     # ran before, not now: broken (gating) or no longer possible here
            verdict = "failed" if head.status == "failed" else "not comparable"
        else:
            verdict = "now timed" if head_ok else "not timed"
        return Change(key, base, head, verdict)
    change = head.median_s / base.median_s - 1
    spread = max(_finite(base.iqr_s), _finite(head.iqr_s))
    noise = spread / base.median_s
    if abs(change) <= noise:
        verdict = "within noise"
    elif change > threshold:
        verdict = "regression"
    elif change < -threshold:
        verdict = "improvement"
    else:
        verdict = "below threshold"
    return Change(key, base, head, verdict, change, noise)


def _by_key(timings: list[Timing]) -> dict[tuple, list[Timing]]:
    grouped: dict[tuple, list[Timing]] = {}
    for t in timings:
        grouped.setdefault(t.key(), []).append(t)
    return grouped


def _finite(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0


def _time(t: Timing | None) -> str:
    if t is None:
        return ""
    if t.status != "ok" or t.median_s is None:
        return t.status
    return seconds(t.median_s)


def _percent(value: float | None, signed: bool = False) -> str:
    if value is None:
        return ""
    return f"{value:+.1%}" if signed else f"{value:.1%}"
