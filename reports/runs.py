"""Runs: what the report keys every result by, and the comparison of runs side by side.

A run is one results file: what one machine measured at one time, with one commit and version
of rnnbench. Two files are two runs, even from the same commit on the same machine (two bench
runs are two sets of numbers, never one pooled set). Runs are shown in date order and named by
machine, time and file (`Runs.label`).

Two runs are compared only when they used the same rnnbench version (the suite: its checks,
cases and workloads), and within them only like with like: a timing with the timing of the same
implementation, kind, workload, device, dtype and metric; a conformance verdict with the verdict
of the same implementation and device on the same case list (quick or full). Everything else is
left out with the reason, never silently.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import PurePath

from rnnbench.reports.records import Results, Source, Timing

EXAMPLES = 3     # how many examples a reason for leaving things out names
TIME_FORMAT = "%Y-%m-%d %H:%M"


@dataclass(frozen=True)
class Run:
    """One results file: its path, when and where it was measured, and what was measured."""

    path: str
    time: datetime.datetime | None     # UTC; None when the file says no time and has none
    machine: str
    commit: str
    version: str

    def order(self) -> tuple:
        """Date order; runs of unknown time first, then by machine and path."""
        return (self.time is not None, self.time or _EPOCH, self.machine, self.path)

    @property
    def checkout(self) -> tuple[str, str, str]:
        """The code measured where: (machine, commit, version). A conformance run tells the
        verdict of every timing run of the same checkout."""
        return (self.machine, self.commit, self.version)


_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


def run_of(source: Source) -> Run:
    return Run(source.path, source.time, source.machine, source.commit, source.version)


class Runs:
    """Every run of a report's inputs in date order, and how tables and figures name them."""

    def __init__(self, results: Results):
        self.all = sorted({run_of(s) for s in results.sources}, key=Run.order)
        self._files = _distinct_names([run.path for run in self.all])

    def label(self, run: Run) -> str:
        """'cpu-box 2026-01-02 10:00 (bench-cpu.json)': the machine, the time in UTC and the
        file, named by as much of its path as tells it from the other inputs."""
        when = run.time.strftime(TIME_FORMAT) if run.time else "time unknown"
        return f"{run.machine} {when} ({self._files[run.path]})"

    def of(self, source: Source) -> str:
        """The label of the run `source` is."""
        return self.label(run_of(source))

    def chronological(self, items: list) -> list:
        """`items` (checks or timings) in their runs' date order, a run's in its file's order."""
        position = {run: i for i, run in enumerate(self.all)}
        return sorted(items, key=lambda item: position[run_of(item.source)])

    def timing_runs(self, results: Results) -> list[Run]:
        """The runs that have timings, in date order."""
        timed = {run_of(t.source) for t in results.timings}
        return [run for run in self.all if run in timed]


def _distinct_names(paths: list[str]) -> dict[str, str]:
    """Each path's shortest tail of folders and file name that no other path ends with."""
    names = {}
    for path in paths:
        parts = PurePath(path).parts
        for depth in range(1, len(parts) + 1):
            tail = parts[-depth:]
            if not any(PurePath(other).parts[-depth:] == tail for other in paths if other != path):
                break
        names[path] = str(PurePath(*tail))
    return names


@dataclass(frozen=True)
class LeftOut:
    """Things not compared, grouped by the reason: how many, and a few of them by name."""

    why: str
    count: int
    examples: tuple[str, ...]


@dataclass
class Comparison:
    """The runs of one rnnbench version and what they have in common.

    `timings` maps a timing key (Timing.key()) to the timing of each run that has it, the runs
    in date order; `verdicts` maps (impl, device, quick) to the conformance runs that checked
    it, in date order.
    """

    version: str
    runs: list[Run]
    timings: dict[tuple, dict[Run, Timing]] = field(default_factory=dict)
    verdicts: dict[tuple, list[Source]] = field(default_factory=dict)


def side_by_side(results: Results) -> tuple[list[Comparison], list[LeftOut]]:
    """The comparisons the inputs allow (one per rnnbench version with two runs or more of
    the same kind) and what was left out of them, with the reasons. Nothing when the inputs hold
    one run of timings and one of each conformance."""
    named = Runs(results)
    left: dict[str, list[str]] = {}
    versions: dict[str, list[Run]] = {}
    for run in named.all:
        versions.setdefault(run.version, []).append(run)
    comparisons = [_compare(version, members, results, named, left)
                   for version, members in versions.items()]
    comparisons = [c for c in comparisons if c.timings or c.verdicts]
    if len(versions) > 1:
        for version, members in versions.items():
            if not any(c.version == version for c in comparisons):
                others = ", ".join(v or "unknown" for v in versions if v != version)
                left.setdefault(f"the only run of rnnbench {version or '(version unknown)'}: "
                                f"other runs used {others}, whose checks and workloads may "
                                "differ", []).extend(named.label(run) for run in members)
    return comparisons, [LeftOut(why, len(items), tuple(items[:EXAMPLES]))
                         for why, items in left.items()]


def _compare(version: str, members: list[Run], results: Results, named: Runs,
             left: dict[str, list[str]]) -> Comparison:
    comparison = Comparison(version, members)
    timings: dict[tuple, dict[Run, Timing]] = {}
    for t in results.timings:
        run = run_of(t.source)
        if run not in members:
            continue
        row = timings.setdefault(t.key(), {})
        if run in row:
            left.setdefault("measured twice in one run: the first timing is shown",
                            []).append(f"{_timing_name(t)} in {named.label(run)}")
        else:
            row[run] = t
    timed_runs = {run for row in timings.values() for run in row}
    for key, row in timings.items():
        if len(row) > 1:
            comparison.timings[key] = dict(sorted(row.items(), key=lambda item: item[0].order()))
        elif len(timed_runs) > 1:
            (run, t), = row.items()
            left.setdefault("timed in one run only: no other run timed this implementation, "
                            "workload and metric on this device and dtype",
                            []).append(f"{_timing_name(t)} ({named.label(run)})")
    verdicts: dict[tuple, list[Source]] = {}
    for s in results.sources:
        if s.format == "conformance" and run_of(s) in members:
            key = (s.target, str(s.settings.get("device") or ""), s.quick)
            verdicts.setdefault(key, []).append(s)
    # A verdict of one run is left out only where another checkout's verdicts could have met it.
    checkouts = {run_of(s).checkout for sources in verdicts.values() for s in sources}
    for key, sources in verdicts.items():
        impl, device, quick = key
        if len(sources) > 1:
            comparison.verdicts[key] = sorted(sources, key=lambda s: run_of(s).order())
        elif len(checkouts) > 1:
            other_list = any(k[:2] == key[:2] and k[2] != quick for k in verdicts)
            why = ("conformance on another case list (quick or full) in the other runs"
                   if other_list else "conformance checked in one run only")
            left.setdefault(why, []).append(f"{impl} {device} {'quick' if quick else 'full'} "
                                            f"({named.of(sources[0])})")
    return comparison


def _timing_name(t: Timing) -> str:
    return " ".join(part for part in (t.impl, t.workload, t.metric, t.device, t.dtype) if part)
