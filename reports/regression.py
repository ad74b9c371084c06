"""Comparing two benchmark runs: is HEAD slower than BASE?

Per (impl, kind, workload, device, dtype, metric) the change of the median time, judged by one
of two rules:

- **rank test against native** (both runs kept their raw samples: `samples_s` in
  rnnbench.bench/2, pytest-benchmark's `stats.data`; and both timed native on the same workload
  and metric): every sample is divided by its own run's native median, and a one-sided
  Mann–Whitney U test compares HEAD's against BASE's, in the direction of the change. Native is
  timed interleaved with the others in each run, so what moves every implementation between
  runs (the machine's clock, a neighbour, memory placement) cancels out.
- **rank test** (raw samples where one run has no native, and for native itself): the same
  test on the raw samples, as asv and Google Benchmark's compare.py do.

  Either way a change is real when p < alpha (default 0.01, which 7 samples a side can reach;
  asv's 0.002 needs more). A real slow-down past the threshold is a **regression**, a real
  speed-up past it an improvement, a real change inside it is "below threshold", anything else
  "within noise".
- **IQR rule** (either run has no samples: rnnbench.bench/1, pytest-benchmark saved without
  its data): a change of the median no larger than the larger of the two IQRs is "within
  noise"; past it, the threshold decides as above. The output says how many results each rule
  judged.

The gate passes nothing it cannot judge. A result that ran in BASE and failed in HEAD fails it
(as does one that failed in both), like a regression. So does, unless the gate is told to call
such results inconclusive (`Gate.unjudged`), a result it cannot judge: one whose numbers in HEAD
do not conform ("non-conforming", however fast), one that BASE has and HEAD lacks ("missing",
a truncated run; unless missing results are allowed), one BASE timed that HEAD could not
("not comparable": unavailable or not supported now), one whose workload has other sizes in
HEAD than in BASE ("other sizes": a workload redefined under its old name, which no timing can
be compared across) and one that a run holds twice ("duplicate"). A timing from a busy machine,
or with bimodal samples on either side, is "not judged": the comparison is then inconclusive
(EXIT_INCONCLUSIVE) unless something failed.
"""
from __future__ import annotations

import dataclasses
import math
import re
import statistics
import textwrap
from dataclasses import dataclass

from tabulate import tabulate

from rnnbench.benchmarks.statistics import bimodal
from rnnbench.errors import UsageError
from rnnbench.reports.records import Results, Timing
from rnnbench.reports.units import percent, seconds
from rnnbench.documents import BASELINE

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.01
# Fewer samples a side and no one-sided rank test can reach p < 0.01 (3 a side: 0.05 at best).
MIN_SAMPLES = 5
# Verdicts, in the order the summary lists them.
VERDICTS = ("regression", "failed", "non-conforming", "missing", "not comparable", "other sizes",
            "duplicate", "not judged", "improvement", "below threshold", "within noise",
            "now timed", "not timed", "new")
# What always fails the gate, and what fails it unless it is told to call it inconclusive.
FAILING = ("regression", "failed")
UNJUDGEABLE = ("non-conforming", "missing", "not comparable", "other sizes", "duplicate")
NOT_JUDGED = "not judged"
UNJUDGED_POLICIES = ("fail", "inconclusive")
# The exit code of a comparison that found nothing failing but could not judge everything.
EXIT_INCONCLUSIVE = 3
# Environment keys whose difference may move a timing (warned about), and ones worth a note.
WARNED_KEYS = ("cpu", "cpu_flags", "isa_limits", "gpu", "threads", "torch", "cuda")
NOTED_KEYS = ("hostname", "rnnbench")
RANK_TEST_NATIVE, RANK_TEST, IQR_RULE = "rank test against native", "rank test", "IQR rule"
RULES = (RANK_TEST_NATIVE, RANK_TEST, IQR_RULE)
# Not a rule: why a result judged against native is not judged (see `_unless_baseline_moved`).
BASELINE_MOVED = "native moved"
WIDTH = 100


@dataclass(frozen=True)
class Change:
    """One result in BASE and/or HEAD and the verdict on it."""

    key: tuple                 # Timing.key(): impl, kind, workload, device, dtype, metric
    base: Timing | None
    head: Timing | None
    verdict: str
    change: float | None = None      # head median / base median - 1 (of the ratios to native
                                     # under RANK_TEST_NATIVE)
    rule: str | None = None          # one of RULES, for two timed results
    p_value: float | None = None     # the rank test's, in the direction of the change
    noise: float | None = None       # the IQR rule's spread, relative to the base median
    sizes: str | None = None         # how the workload's sizes differ, e.g. "steps 20 -> 12"


@dataclass(frozen=True)
class Gate:
    """How `compare_runs` decides. `unjudged`: what a result the gate cannot judge does,
    "fail" or "inconclusive" (UNJUDGED_POLICIES)."""

    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    allow_missing: bool = False
    unjudged: str = "fail"

    def unjudgeable(self) -> tuple[str, ...]:
        """The verdicts of results the gate cannot judge, as this gate counts them."""
        return tuple(v for v in UNJUDGEABLE if not (v == "missing" and self.allow_missing))

    def gating(self) -> tuple[str, ...]:
        """The verdicts that fail the comparison."""
        return FAILING + (self.unjudgeable() if self.unjudged == "fail" else ())

    def inconclusive(self) -> tuple[str, ...]:
        """The verdicts that make a comparison that nothing fails inconclusive."""
        return (NOT_JUDGED,) + (self.unjudgeable() if self.unjudged == "inconclusive" else ())


def parse_threshold(text: str) -> float:
    """'5%' or '5' -> 0.05; UsageError for anything that is not a non-negative percentage."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%?\s*", str(text))
    if not match:
        raise UsageError(f"--threshold {text!r}: expected a percentage such as 5% or 2.5")
    return float(match.group(1)) / 100


def samples_of(results: Results) -> dict[tuple, list[float]]:
    """The raw samples (`samples_s`) of every timing of `results` that has them, by
    Timing.key(); files of other formats, and bench documents written before samples were
    kept, give none."""
    return {t.key(): t.samples_s for t in results.timings if t.samples_s}


def compare_runs(base: list[Timing], head: list[Timing], gate: Gate = Gate(),
                 base_samples: dict | None = None, head_samples: dict | None = None,
                 *, busy: bool = False) -> list[Change]:
    """A Change for every result key in either run, in BASE's order then HEAD's new ones.
    `*_samples` map Timing.key() to raw samples (see `samples_of`); without them for a key,
    that key is judged by the IQR rule. `busy`: either run was timed on a busy machine, so no
    change of a timing is judged."""
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
            changes.append(_judge(key, b[0], h[0], gate, *_samples(key, base_samples,
                                                                  head_samples), busy=busy))
    by_key = {c.key: c for c in changes}
    return [_unless_baseline_moved(c, by_key) for c in changes]


def _unless_baseline_moved(change: Change, by_key: dict[tuple, Change]) -> Change:
    """`change`, or not judged when it claims a change measured against a native that moved
    by itself.

    Ratios to native cancel a machine that is uniformly slower or faster; they invent changes
    when native alone moved, and on a virtual machine whose speed drifts between runs the
    others move too, each its own way (two runs of one commit: native 48% faster, fused 12%
    slower in raw time, 98% slower against native). When native's own change is a real one
    past the threshold, no regression or improvement in its workload is judged, in raw time or
    against native; "within noise" against native stands (what the ratios are for)."""
    if change.rule != RANK_TEST_NATIVE or change.verdict not in ("regression", "improvement"):
        return change
    native = by_key.get((BASELINE, *change.key[1:]))
    if native is None or native.verdict not in ("regression", "improvement"):
        return change
    return dataclasses.replace(change, verdict=NOT_JUDGED, rule=BASELINE_MOVED)


def _samples(key: tuple, base: dict, head: dict) -> tuple[list | None, list | None, bool]:
    """BASE's and HEAD's samples of `key` to judge, and whether they are relative to native:
    divided by their own run's native median where both runs sampled native (and `key` is not
    native), else raw."""
    relative = _relative(base, key), _relative(head, key)
    if None not in relative:
        return (*relative, True)
    return base.get(key), head.get(key), False


def _relative(samples: dict, key: tuple) -> list[float] | None:
    baseline = (BASELINE, *key[1:])
    own, native = samples.get(key), samples.get(baseline)
    if own is None or key == baseline or not native or len(native) < MIN_SAMPLES:
        return None
    middle = statistics.median(native)
    return [value / middle for value in own]


def gating(changes: list[Change], gate: Gate = Gate()) -> list[Change]:
    """The changes that fail the comparison."""
    return [c for c in changes if c.verdict in gate.gating()]


def exit_code(changes: list[Change], gate: Gate = Gate()) -> int:
    """1 when a change fails the comparison, else EXIT_INCONCLUSIVE when one could not be
    judged, else 0."""
    if gating(changes, gate):
        return 1
    return EXIT_INCONCLUSIVE if any(c.verdict in gate.inconclusive() for c in changes) else 0


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
    judged = [c for c in changes if c.verdict not in (NOT_JUDGED, "non-conforming")]
    rules = {rule: sum(c.rule == rule for c in judged) for rule in RULES}
    if rules[RANK_TEST_NATIVE]:
        lines += _wrapped(f"{rules[RANK_TEST_NATIVE]} judged by the rank test against native: "
                          "the samples as ratios to their run's native median, one-sided "
                          f"Mann-Whitney U, p < {gate.alpha:g}")
    if rules[RANK_TEST]:
        lines += _wrapped(f"{rules[RANK_TEST]} judged by the rank test: one-sided Mann-Whitney "
                          f"U on the raw samples, p < {gate.alpha:g}")
    if rules[IQR_RULE]:
        lines += _wrapped(f"{rules[IQR_RULE]} judged by the IQR rule (no raw samples, e.g. "
                          "bench/1): changes inside the IQR are noise")
    moved = sum(c.rule == BASELINE_MOVED for c in changes)
    if counts[NOT_JUDGED] - moved:
        lines += _wrapped(f"{counts[NOT_JUDGED] - moved} not judged: timed on a busy machine, or "
                          "with bimodal samples (some calls ran at another speed)")
    if moved:
        lines += _wrapped(f"{moved} not judged: {BASELINE} itself changed between the runs (the "
                          "machine's speed, or torch), so a change measured against it is none "
                          "the gate can tell from the machine's")
    if counts["other sizes"]:
        lines += _wrapped(f"{counts['other sizes']} not compared: the workload of that name has "
                          "other sizes in HEAD than in BASE, so their times measure different "
                          "work (a redefined workload needs a new name to start a new history)")
    for note in interrupted_notes(changes):
        lines += _wrapped(note)
    failing = ", ".join(f"{counts[v]} {v}" for v in gate.gating() if counts[v])
    unsure = ", ".join(f"{counts[v]} {v}" for v in gate.inconclusive() if counts[v])
    if failing:
        verdict = f"FAIL: {failing} (threshold {gate.threshold:.1%})"
    elif unsure:
        verdict = (f"INCONCLUSIVE: {unsure}; no regression past {gate.threshold:.1%} among "
                   "the rest")
    else:
        verdict = f"OK: no regression past {gate.threshold:.1%} outside the noise"
    return "\n".join([*lines, summary or "nothing to compare", verdict])


def interrupted_notes(changes: list[Change]) -> list[str]:
    """A note for each run whose document says it was interrupted: it holds only what it
    finished, so the results it lacks ("missing" in HEAD, "new" against BASE) may be ones it
    never reached rather than ones the code lost. The verdicts stay as they are: the gate
    cannot judge a result a run never timed, whatever the reason."""
    notes = []
    for side, verdict, timings in (("BASE", "new", [c.base for c in changes]),
                                   ("HEAD", "missing", [c.head for c in changes])):
        for source in dict.fromkeys(t.source for t in timings if t and t.source.interrupted):
            lacking = sum(c.verdict == verdict for c in changes)
            because = (f", so the {lacking} {verdict} may be ones it never reached"
                       if lacking else "")
            notes.append(f"{side} ({source.path}) is an interrupted run: it holds only the "
                         f"results it finished before it stopped{because}")
    return notes


def environment_lines(base_env: dict, head_env: dict, changes: list[Change]) -> list[str]:
    """A warning when BASE and HEAD differ in what may move a timing (WARNED_KEYS, and the
    thread count results were timed with), a note for NOTED_KEYS (the rnnbench version)."""
    def differing(keys) -> list[str]:
        # Empty and absent are alike: a document from before a key was recorded had none set.
        return [f"{k} ({base_env.get(k)} vs {head_env.get(k)})" for k in keys
                if (base_env.get(k) or None) != (head_env.get(k) or None)]

    warned = differing(WARNED_KEYS)
    threads = [c for c in changes if c.base and c.head and None not in (c.base.threads,
               c.head.threads) and c.base.threads != c.head.threads]
    if threads:
        example = threads[0]
        warned.append(f"the thread count of {len(threads)} result{'s' * (len(threads) != 1)} "
                      f"(e.g. {' '.join(p for p in example.key if p)}: "
                      f"{example.base.threads:g} vs {example.head.threads:g})")
    lines = []
    if warned:
        lines.append("warning: BASE and HEAD differ in " + "; ".join(warned)
                     + ": a change may come from that, not from the code")
    noted = differing(NOTED_KEYS)
    if noted:
        lines.append("note: BASE and HEAD differ in " + "; ".join(noted))
    return [textwrap.fill(line, WIDTH, subsequent_indent="  ") for line in lines]


def _wrapped(text: str) -> list[str]:
    """A sentence of the output in lines of at most WIDTH columns."""
    return textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def _judge(key: tuple, base: Timing, head: Timing, gate: Gate, base_samples, head_samples,
           relative: bool = False, *, busy: bool = False) -> Change:
    base_ok = base.status == "ok" and bool(base.median_s)
    head_ok = head.status == "ok" and head.median_s is not None
    if head.status == "failed":
        return Change(key, base, head, "failed")
    if differing := sizes_changed(base, head):
        return Change(key, base, head, "other sizes", sizes=differing)
    if not (base_ok and head_ok):
        # Timed before, not now (unavailable or not supported here): nothing to judge.
        verdict = "not comparable" if base_ok else "now timed" if head_ok else "not timed"
        return Change(key, base, head, verdict)
    if min(len(base_samples or ()), len(head_samples or ())) >= MIN_SAMPLES:
        change = statistics.median(head_samples) / statistics.median(base_samples) - 1
        p_value = rank_test(base_samples, head_samples, slower=change > 0)
        judged = Change(key, base, head, _verdict(change, p_value < gate.alpha, gate.threshold),
                        change, RANK_TEST_NATIVE if relative else RANK_TEST, p_value=p_value)
    else:
        change = head.median_s / base.median_s - 1
        noise = max(_finite(base.iqr_s), _finite(head.iqr_s)) / base.median_s
        judged = Change(key, base, head, _verdict(change, abs(change) > noise, gate.threshold),
                        change, IQR_RULE, noise=noise)
    # The change is shown either way; the verdict says why it is no judgement.
    if head.conforms is False:
        return dataclasses.replace(judged, verdict="non-conforming")
    if busy or bimodal(base) or bimodal(head):
        return dataclasses.replace(judged, verdict=NOT_JUDGED)
    return judged


def sizes_changed(base: Timing, head: Timing) -> str:
    """How the sizes both timings record differ ("steps 20 -> 12, batch 32 -> 16"), or ""."""
    return ", ".join(f"{name} {base.sizes[name]} -> {head.sizes[name]}"
                     for name in base.sizes
                     if name in head.sizes and head.sizes[name] != base.sizes[name])


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
    if c.rule == BASELINE_MOVED:
        return f"{BASELINE} moved"
    if c.rule in (RANK_TEST, RANK_TEST_NATIVE):
        return f"p={c.p_value:.2g}"
    if c.rule == IQR_RULE:
        return f"IQR {c.noise:.1%}"
    return c.sizes or ""



