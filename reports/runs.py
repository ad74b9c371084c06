"""Results of several runs side by side, comparing only what is comparable.

A run is what one machine measured at one commit of rnnbench: every input file with the same
machine, commit and rnnbench version belongs to it. Two runs are compared only when they used the
same rnnbench version (the suite: its checks, cases and workloads), and within them only like with
like: a timing with the timing of the same implementation, kind, workload, device, dtype and
metric; a conformance verdict with the verdict of the same implementation and device on the same
case list (quick or full). Everything else is left out with the reason, never silently.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rnnbench.reports.records import Results, Source, Timing

EXAMPLES = 3     # how many examples a reason for leaving things out names


@dataclass(frozen=True, order=True)
class Run:
    """One machine at one commit with one version of rnnbench."""

    machine: str
    commit: str
    version: str

    def label(self) -> str:
        return f"{self.machine} @ {self.commit[:8]}" if self.commit else self.machine


def run_of(source: Source) -> Run:
    return Run(source.machine, source.commit, source.version)


def runs(results: Results) -> list[Run]:
    """Every run in the inputs, in the order their files came."""
    return list(dict.fromkeys(run_of(s) for s in results.sources))


@dataclass(frozen=True)
class LeftOut:
    """Things not compared, grouped by the reason: how many, and a few of them by name."""

    why: str
    count: int
    examples: tuple[str, ...]


@dataclass
class Comparison:
    """The runs of one rnnbench version and what they have in common.

    `timings` maps a timing key (Timing.key()) to the timing of each run that has it;
    `verdicts` maps (impl, device, quick) to the conformance files of each run that has it.
    """

    version: str
    runs: list[Run]
    timings: dict[tuple, dict[Run, Timing]] = field(default_factory=dict)
    verdicts: dict[tuple, dict[Run, list[Source]]] = field(default_factory=dict)


def side_by_side(results: Results) -> tuple[list[Comparison], list[LeftOut]]:
    """The comparisons the inputs allow (one per rnnbench version with two runs or more) and
    what was left out of them, with the reasons. Nothing when the inputs hold one run."""
    every = runs(results)
    if len(every) < 2:
        return [], []
    left: dict[str, list[str]] = {}
    versions: dict[str, list[Run]] = {}
    for run in every:
        versions.setdefault(run.version, []).append(run)
    comparisons = []
    for version, members in versions.items():
        if len(members) < 2:
            others = ", ".join(v or "unknown" for v in versions if v != version)
            left.setdefault(f"the only run of rnnbench {version or '(version unknown)'}: "
                            f"other runs used {others}, whose checks and workloads may differ",
                            []).append(members[0].label())
            continue
        comparisons.append(_compare(version, members, results, left))
    return comparisons, [LeftOut(why, len(items), tuple(items[:EXAMPLES]))
                         for why, items in left.items()]


def _compare(version: str, members: list[Run], results: Results,
             left: dict[str, list[str]]) -> Comparison:
    comparison = Comparison(version, members)
    timings: dict[tuple, dict[Run, Timing]] = {}
    for t in results.timings:
        run = run_of(t.source)
        if run not in members:
            continue
        row = timings.setdefault(t.key(), {})
        if run in row:
            left.setdefault("measured twice in one run: the first file's timing is shown",
                            []).append(f"{_timing_name(t)} in {run.label()}")
        else:
            row[run] = t
    for key, row in timings.items():
        if len(row) > 1:
            comparison.timings[key] = row
        else:
            (run, t), = row.items()
            left.setdefault("timed in one run only: no other run timed this implementation, "
                            "workload and metric on this device and dtype",
                            []).append(f"{_timing_name(t)} ({run.label()})")
    verdicts: dict[tuple, dict[Run, list[Source]]] = {}
    for s in results.sources:
        if s.format == "conformance" and run_of(s) in members:
            key = (s.target, str(s.settings.get("device") or ""), s.quick)
            verdicts.setdefault(key, {}).setdefault(run_of(s), []).append(s)
    for key, row in verdicts.items():
        impl, device, quick = key
        if len(row) > 1:
            comparison.verdicts[key] = row
            continue
        (run,) = row
        other_list = any(k[:2] == key[:2] and k[2] != quick for k in verdicts)
        why = ("conformance on another case list (quick or full) in the other runs"
               if other_list else "conformance checked in one run only")
        case_list = "quick" if quick else "full"
        left.setdefault(why, []).append(f"{impl} {device} {case_list} ({run.label()})")
    return comparison


def _timing_name(t: Timing) -> str:
    return " ".join(part for part in (t.impl, t.workload, t.metric, t.device, t.dtype) if part)
