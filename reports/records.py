"""The normalised results a report is made from, whatever files they came from.

Every input file becomes a `Source`; its conformance results become `Check`s, its timings
`Timing`s, and anything the loader cannot place becomes an `Unplaced` entry that the report
lists, so nothing read is ever dropped silently.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from rnnbench.benchmarks.result import BenchResult
from rnnbench.suites.results import CheckResult

# Sizes a timing may carry; the scaling curves vary one of them with the others fixed.
SIZE_FIELDS = ("steps", "batch", "input_size", "hidden_size", "num_layers")


@dataclass(frozen=True)
class Source:
    """One input file: where it is, what format it has, which machine it describes."""

    path: str
    format: str              # "conformance" | "bench" | "pytest-benchmark" | "asv"
    machine: str
    # When it was measured (UTC): as the file records it, else the file's modification time.
    time: datetime.datetime | None = field(default=None, kw_only=True)
    environment: dict = field(default_factory=dict, compare=False, hash=False)
    target: str = ""         # conformance files: the implementation checked (even with no checks)
    interrupted: bool = False  # the run that wrote the file was interrupted: results incomplete
    error: str = ""          # why the run that wrote the file could not check anything
    quick: bool = False      # conformance files: the quick case list, not the full one
    # How it was measured: preset, budget_s, seed, device, threads, ... as the file says them.
    settings: dict = field(default_factory=dict, compare=False, hash=False)
    # bench files: the machine's load before timing (busy, reasons, GEMM peak spread).
    machine_check: dict = field(default_factory=dict, compare=False, hash=False)
    # conformance files: features declared unsupported {feature: reason}, and the parameter
    # names assumed {module key: spec name}.
    not_supported_features: dict = field(default_factory=dict, compare=False, hash=False)
    param_map: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def commit(self) -> str:
        """The commit of rnnbench that was measured, or "" when the file does not say."""
        return str(self.environment.get("commit") or "")

    @property
    def version(self) -> str:
        """rnnbench's version that wrote the file (the suite version), or ""."""
        return str(self.environment.get("rnnbench") or "")

    @property
    def busy(self) -> bool:
        return self.machine_check.get("busy") is True


@dataclass(kw_only=True)
class Check(CheckResult):
    """One conformance check result as the report has it: a `CheckResult` of implementation
    `impl` on `device`, and the file it came from."""

    source: Source
    impl: str
    device: str


@dataclass(kw_only=True)
class Timing(BenchResult):
    """One performance result as the report has it: a `BenchResult` (from a bench document,
    or made from a pytest-benchmark or asv entry) and the file it came from."""

    source: Source
    # The sizes the result was measured at (SIZE_FIELDS), its workload's where it has them.
    sizes: dict = field(default_factory=dict)

    def key(self) -> tuple:
        """What makes two timings the same measurement (e.g. in two runs of one machine)."""
        return (self.impl, self.kind, self.workload, self.device, self.dtype, self.metric)


@dataclass(frozen=True)
class Unplaced:
    """Something read from an input that the report cannot put in a table, and why."""

    source: Source
    where: str       # e.g. "results[3]" or a benchmark name
    reason: str
    content: str     # a short rendering of the item itself


@dataclass(frozen=True)
class Duplicate:
    """An input left out because it repeats another: the same file named twice, or a copy."""

    path: str
    same_as: str
    how: str         # "same file" | "same content"


@dataclass
class Results:
    """Everything loaded from a report's inputs."""

    sources: list[Source] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    timings: list[Timing] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)

    def extend(self, other: Results) -> None:
        self.sources += other.sources
        self.checks += other.checks
        self.timings += other.timings
        self.unplaced += other.unplaced
        self.duplicates += other.duplicates

    def machines(self) -> list[str]:
        return list(dict.fromkeys(s.machine for s in self.sources))
