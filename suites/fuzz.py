"""Searching for bugs beyond the case tables: configurations and sizes drawn with Hypothesis.

Fixed cases always leave gaps. `--fuzz N` draws N configurations with their input sizes per kind
whose suite record has a strategy (`SuiteKind.fuzz_cases`; torch.nn's kinds: every option the
implementation supports, layers, directions, batch_first, bias, relu, projections, batched or
not, the state given or omitted), runs the float64 forward and gradient checks on each against
the reference (the forward alone for an implementation without a backward), and when one fails
lets Hypothesis shrink it to a minimal failing case. The search is seeded (`--seed`), so it is
reproducible; the finding carries the minimal case, which `--case JSON` reruns through every
check (`rnnbench conform` prints the command).
"""
from __future__ import annotations

import dataclasses
import json
import random
import sys
from dataclasses import dataclass

from rnnbench.reference.kinds import config_from_dict
from rnnbench.findings import cause_of
from rnnbench.suites.cases import OMITTED, Case
from rnnbench.suites.check_numerics import check_forward, check_gradients
from rnnbench.suites.features import case_missing_features, source
from rnnbench.suites.results import Finding, NotSupported

# How a child process announces each drawn case on stderr before running it
# (`announce_cases`), so that a case that kills it can still be named.
CASE_LINE = "fuzz case: "
_announcing = False


def announce_cases() -> None:
    """Print each drawn case before running it, from now on in this process (a child's)."""
    global _announcing
    _announcing = True


@dataclass(frozen=True)
class FuzzCase:
    """The "case" of a fuzz item: how many examples to draw, and the plainest configuration of
    the kind (what the search needs of the implementation whatever it draws)."""

    config: object
    examples: int
    quick: bool = True
    batched: bool = True
    needs: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def name(self) -> str:
        return f"{self.examples}-examples"

    def runs(self, group: str) -> bool:
        return True


def case_to_json(case: Case) -> str:
    """The one-line form `--case` takes: the configuration's fields that differ from their
    defaults (and those without one), the batch, the steps, whether h0 is given."""
    config = {"kind": case.config.kind}
    config.update((f.name, getattr(case.config, f.name)) for f in dataclasses.fields(case.config)
                  if f.name != "kind" and getattr(case.config, f.name) != f.default)
    return json.dumps({"config": config, "batch": case.batch, "steps": case.steps, "h0": case.h0},
                      separators=(",", ":"))


def case_from_json(text: str) -> Case:
    """`--case JSON` as a Case; ValueError with a one-line reason."""
    expected = ('expected {"config": {"kind": ..., "input_size": ..., "hidden_size": ...}, '
                '"batch": N or null, "steps": N, "h0": true}')
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--case: not JSON ({exc}); {expected}") from None
    if not isinstance(data, dict) or "config" not in data:
        raise ValueError(f"--case: no \"config\" in it; {expected}")
    unknown = sorted(set(data) - {"config", "batch", "steps", "h0"})
    if unknown:
        raise ValueError(f"--case: unknown field {unknown[0]!r}; {expected}")
    try:
        config = config_from_dict(data["config"])
        batch, steps, h0 = data.get("batch"), int(data.get("steps", 1)), bool(data.get("h0", True))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"--case: {exc}; {expected}") from None
    if batch is not None and (not isinstance(batch, int) or batch < 1) or steps < 1:
        raise ValueError("--case: batch must be null or a positive integer, steps positive")
    return Case("given", config, batch, steps, h0, features=() if h0 else OMITTED)


# Distinct causes of failure a search reports, each with its own smallest case.
MAX_CAUSES = 3


def check_fuzz(subject, case: FuzzCase) -> dict:
    """No drawn case fails the float64 forward and gradient checks. The search draws every one
    of its cases (it does not stop at the first failure), then shrinks a smallest case for each
    distinct cause it met (at most MAX_CAUSES), keeping the cause while it shrinks: a shrink may
    not turn one bug into another (or into a feature the implementation legitimately lacks)."""
    from hypothesis import HealthCheck, find, settings
    from hypothesis.errors import NoSuchExample

    outcomes: dict[str, Finding | None] = {}
    met: dict[str, Case] = {}  # cause -> the first case that failed with it, in the order met
    skipped: dict[str, str] = {}  # feature lacked without declaring it -> "reason (source)"

    def outcome(drawn: Case) -> Finding | None:
        key = case_to_json(drawn)
        if key not in outcomes:
            if _announcing:  # the parent names it when it kills the process
                print(f"\n{CASE_LINE}{key}", file=sys.stderr, flush=True)
            outcomes[key] = _fuzz_one(subject, drawn, skipped)
            if outcomes[key] is not None:
                met.setdefault(cause_of(outcomes[key]), drawn)
        return outcomes[key]

    def fails_as(cause: str):
        def fails(drawn: Case) -> bool:
            finding = outcome(drawn)
            return finding is not None and cause_of(finding) == cause
        return fails

    rules = settings(max_examples=case.examples, database=None, deadline=None,
                     suppress_health_check=list(HealthCheck))
    strategy = subject.suite.fuzz_cases(subject.kind)
    try:  # the search: every case drawn, none accepted
        find(strategy, lambda drawn: outcome(drawn) is None and False, settings=rules,
             random=random.Random(subject.seed))
    except NoSuchExample:
        pass
    if not met:
        return {"examples": len(outcomes), **({"skipped": skipped} if skipped else {})}
    ordered = list(met)[:MAX_CAUSES]
    smallest = {}
    for cause in ordered:
        try:
            smallest[cause] = find(strategy, fails_as(cause), settings=rules,
                                   random=random.Random(subject.seed))
        except NoSuchExample:  # too rare to meet again: the case it was met on
            smallest[cause] = met[cause]
    first = ordered[0]
    described = [f"{_described(smallest[c])}: {outcome(smallest[c]).message}" for c in ordered]
    finding = outcome(smallest[first])
    message = (f"a drawn case fails: {described[0]}" if len(described) == 1 else
               f"drawn cases fail in {len(described)} ways: "
               + "; ".join(f"({n}) {text}" for n, text in enumerate(described, 1)))
    raise Finding(message, finding.diagnosis, case=case_to_json(smallest[first]),
                  cases=[case_to_json(smallest[c]) for c in ordered],
                  **{k: v for k, v in finding.numbers.items() if k not in ("case", "cases")})


def _fuzz_one(subject, drawn: Case, skipped: dict[str, str]) -> Finding | None:
    """The float64 forward and gradient checks on one drawn case (the forward alone where the
    implementation has no backward): None when they pass or the implementation lacks a feature
    the case needs (added to `skipped` unless declared: it still counts against drop-in), else
    their finding."""
    missing = case_missing_features(subject, drawn, "float64", False)
    for feature, reason in missing.items():
        if source(subject, feature) != "declared":
            skipped.setdefault(feature, f"{reason} ({source(subject, feature)})")
    if missing:
        return None  # a feature the implementation lacks: not a finding
    try:
        check_forward(subject, drawn, dtype="float64")
        if not case_missing_features(subject, drawn, "float64", True):
            check_gradients(subject, drawn, dtype="float64")
    except Finding as finding:
        return finding
    except NotSupported:
        return None
    return None


def _described(drawn: Case) -> str:
    return (f"{drawn.config.describe()}, batch {drawn.batch}, {drawn.steps} steps"
            + ("" if drawn.h0 else ", no h0"))
