"""Comparing two benchmark runs: is HEAD slower than BASE?

Per (impl, kind, workload, device, dtype, metric) the change of the median time, judged by one
of two rules:

- **rank test** (both runs kept their raw samples, `samples_s` in rnnbench.bench/2): a one-sided
  Mann–Whitney U test of HEAD's samples against BASE's, in the direction of the change, as asv
  and Google Benchmark's compare.py do. A change is real when p < alpha (default 0.01, which
  7 samples a side can reach; asv's 0.002 needs more). A real slow-down past the threshold is
  a **regression**, a real speed-up past it an improvement, a real change inside it is
  "below threshold", anything else "within noise".
- **IQR rule** (either run has no samples: rnnbench.bench/1, pytest-benchmark): a change of the
  median no larger than the larger of the two IQRs is "within noise"; past it, the threshold
  decides as above. The output says how many results each rule judged.

A result that ran in BASE and failed in HEAD fails the gate too, and so does one that BASE has
and HEAD lacks ("missing"), unless missing results are allowed: a truncated run must not pass.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tabulate import tabulate

from rnnbench.errors import UsageError
from rnnbench.reports.records import Results, Timing
from rnnbench.reports.units import percent, seconds
from rnnbench.documents import read_json

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01
# Fewer samples a side and no one-sided rank test can reach p < 0.01 (3 a side: 0.05 at best).
MIN_SAMPLES = 5
# Verdicts, in the order the summary lists them.
VERDICTS = ("regression", "failed", "missing", "improvement", "below threshold", "within noise",
            "now timed", "not comparable", "not timed", "new", "duplicate")
# Environment keys whose difference makes a comparison suspect; printed as a note.
MACHINE_KEYS = ("hostname", "cpu", "gpu", "torch", "cuda", "threads")
RANK_TEST, IQR_RULE = "rank test", "IQR rule"


@dataclass(frozen=True)
class Change:
    """One result in BASE and/or HEAD and the verdict on it."""

    key: tuple                 # Timing.key(): impl, kind, workload, device, dtype, metric
    base: Timing | None
    head: Timing | None
    verdict: str
    change: float | None = None      # head median / base median - 1
    rule: str | None = None          # RANK_TEST or IQR_RULE, for two timed results
    p_value: float | None = None     # the rank test's, in the direction of the change
    noise: float | None = None       # the IQR rule's spread, relative to the base median


@dataclass(frozen=True)
class Gate:
    """How `compare_runs` decides."""

    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    allow_missing: bool = False

    def gating(self) -> tuple[str, ...]:
        """The verdicts that fail the comparison."""
        return ("regression", "failed") + (() if self.allow_missing else ("missing",))


def parse_threshold(text: str) -> float:
    """'5%' or '5' -> 0.05; UsageError for anything that is not a non-negative percentage."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%?\s*", str(text))
    if not match:
        raise UsageError(f"--threshold {text!r}: expected a percentage such as 5% or 2.5")
    return float(match.group(1)) / 100


def samples_of(results: Results) -> dict[tuple, list[float]]:
    """The raw samples (`samples_s`) of every bench result of `results`' files, by Timing.key();
    files of other formats, and bench documents written before samples were kept, give none."""
    found = {}
    for source in results.sources:
        if source.format != "bench":
            continue
        for item in read_json(source.path).get("results") or []:
            if isinstance(item, dict) and isinstance(item.get("samples_s"), list):
                key = (item.get("impl"), *(str(item.get(name) or "") for name in
                       ("kind", "workload", "device", "dtype")), item.get("metric"))
                found[key] = item["samples_s"]
    return found


def compare_runs(base: list[Timing], head: list[Timing], gate: Gate = Gate(),
                 base_samples: dict | None = None, head_samples: dict | None = None
                 ) -> list[Change]:
    """A Change for every result key in either run, in BASE's order then HEAD's new ones.
    `*_samples` map Timing.key() to raw samples (see `samples_of`); without them for a key,
    that key is judged by the IQR rule."""
    base_by, head_by = _by_key(base), _by_key(head)
    base_samples, head_samples = base_samples or {}, head_samples or {}
    changes = []
    for key in dict.fromkeys([*base_by, *head_by]):
        b, h = base_by.get(key, []), head_by.get(key, [])
        if len(b) > 1 or len(h) > 1:
            changes.append(Change(key, b[0] if b else None, h[0] if h else None, "duplicate"))
        elif not h:
            changes.append(Change(key, b[0], None, "missing"))
        elif not b:
            changes.append(Change(key, None, h[0], "new"))
        else:
            changes.append(_judge(key, b[0], h[0], gate, base_samples.get(key),
                                  head_samples.get(key)))
    return changes


def gating(changes: list[Change], gate: Gate = Gate()) -> list[Change]:
    """The changes that fail the comparison."""
    return [c for c in changes if c.verdict in gate.gating()]


def format_changes(changes: list[Change], gate: Gate = Gate()) -> str:
    """A table per workload (kind, device and dtype in its heading), which rule judged how many
    results, and a one-line verdict."""
    groups: dict[tuple, list[Change]] = {}
    for c in changes:
        impl, kind, workload, device, dtype, metric = c.key
        groups.setdefault((workload, kind, device, dtype), []).append(c)
    lines = []
    for (workload, *labels), group in groups.items():
        rows = [[c.key[0], c.key[5], _time(c.base), _time(c.head), percent(c.change, signed=True),
                 _evidence(c), c.verdict] for c in group]
        shown = ", ".join(label for label in labels if label)
        lines += [f"{workload} ({shown})" if shown else workload,
                  tabulate(rows, ["impl", "metric", "base", "head", "change", "evidence",
                                  "verdict"], disable_numparse=True), ""]
    counts = {v: sum(c.verdict == v for c in changes) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    rules = {rule: sum(c.rule == rule for c in changes) for rule in (RANK_TEST, IQR_RULE)}
    if rules[RANK_TEST]:
        lines.append(f"{rules[RANK_TEST]} judged by the rank test: one-sided Mann-Whitney U on "
                     f"the raw samples, p < {gate.alpha:g}")
    if rules[IQR_RULE]:
        lines.append(f"{rules[IQR_RULE]} judged by the IQR rule (no raw samples, e.g. bench/1): "
                     "changes inside the IQR are noise")
    failing = ", ".join(f"{counts[v]} {v}" for v in gate.gating() if counts[v])
    verdict = (f"FAIL: {failing} (threshold {gate.threshold:.1%})" if failing else
               f"OK: no regression past {gate.threshold:.1%} outside the noise")
    return "\n".join([*lines, summary or "nothing to compare", verdict])


def machine_differences(base_env: dict, head_env: dict) -> list[str]:
    """'key: base vs head' for each MACHINE_KEYS entry that differs between the two runs."""
    return [f"{k}: {base_env.get(k)} vs {head_env.get(k)}" for k in MACHINE_KEYS
            if base_env.get(k) != head_env.get(k)]


def _judge(key: tuple, base: Timing, head: Timing, gate: Gate, base_samples, head_samples
           ) -> Change:
    base_ok = base.status == "ok" and bool(base.median_s)
    head_ok = head.status == "ok" and head.median_s is not None
    if not (base_ok and head_ok):
        if base_ok:     # ran before, not now: broken (gating) or no longer possible here
            verdict = "failed" if head.status == "failed" else "not comparable"
        else:
            verdict = "now timed" if head_ok else "not timed"
        return Change(key, base, head, verdict)
    change = head.median_s / base.median_s - 1
    if min(len(base_samples or ()), len(head_samples or ())) >= MIN_SAMPLES:
        p_value = rank_test(base_samples, head_samples, slower=change > 0)
        real = p_value < gate.alpha
        return Change(key, base, head, _verdict(change, real, gate.threshold), change,
                      RANK_TEST, p_value=p_value)
    noise = max(_finite(base.iqr_s), _finite(head.iqr_s)) / base.median_s
    return Change(key, base, head, _verdict(change, abs(change) > noise, gate.threshold), change,
                  IQR_RULE, noise=noise)


def rank_test(base: list[float], head: list[float], slower: bool) -> float:
    """The one-sided Mann-Whitney U p-value that HEAD's samples are larger (`slower`) or
    smaller than BASE's."""
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(head, base, alternative="greater" if slower else "less").pvalue)


def _verdict(change: float, real: bool, threshold: float) -> str:
    if not real:
        return "within noise"
    if change > threshold:
        return "regression"
    if change < -threshold:
        return "improvement"
    return "below threshold"


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


def _evidence(c: Change) -> str:
    if c.rule == RANK_TEST:
        return f"p={c.p_value:.2g}"
    if c.rule == IQR_RULE:
        return f"IQR {c.noise:.1%}"
    return ""



