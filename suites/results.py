"""What the checks produce: a `CheckResult` per check, the `ConformanceRun` document of a whole
run, and the two exceptions a check raises to end early.

A check function returns a dict of numbers when the implementation passed, raises `Finding` when
it found a conformance failure (with a message, maybe a diagnosis id, and numbers), or
`NotSupported` when the implementation cannot be asked this question. The runner turns all three,
and anything else that escapes (an "error"), into a `CheckResult`.

`ConformanceRun` is the rnnbench.conformance/1 document: its fields are declared once here, it
writes and reads itself (`to_json` / `from_json`), and what is derived from the results (the
counts, the features not supported, the parameter map) is computed here and nowhere else.
Nothing in this module imports torch, so reports read documents without it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields

from rnnbench.documents import CONFORMANCE_SCHEMA, OUTCOMES
from rnnbench.findings import group_failures, unsupported_features

# The two levels a run is judged at. "numerics": it computes the spec's function (torch.nn's for
# its kinds) on everything that ran: the checks of NUMERIC_CATEGORIES. "drop-in": it can replace
# the contract's module as is: every check, and every feature it lacks declared as such.
LEVELS = ("numerics", "drop-in")
NUMERIC_CATEGORIES = frozenset({"shapes", "forward", "gradients", "state", "init", "dropout",
                                "solver"})
# A level's verdict: nothing failed and something passed ("conforms"); something failed; some
# checks were cut short (timed out, or not run for lack of time) and none failed; nothing at this
# level ran at all.
STATES = ("conforms", "does not conform", "incomplete", "not checked")


@dataclass
class CheckResult:
    """The outcome of one check on one case of one kind.

    `check` is the stable id "<check name>/<case name>" (e.g. "forward/two-layer-bidirectional");
    `numbers` holds what was measured (max_abs, max_rel, tol, excess, and where a numeric failure
    first diverges: layer, direction, timestep, parameter).
    """

    check: str
    category: str
    kind: str
    case: str
    outcome: str
    message: str = ""
    diagnosis: str | None = None
    numbers: dict = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def name(self) -> str:
        """The check's name without its case ("forward-float32")."""
        return self.check.split("/", 1)[0]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> CheckResult:
        """A result from its JSON object (optional fields it lacks take their defaults);
        ValueError saying what is wrong when it is not one."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        for name in ("check", "kind", "category", "outcome"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise ValueError(f"no {name!r}")
        if data["outcome"] not in OUTCOMES:
            raise ValueError(f"unknown outcome {data['outcome']!r} (known: {', '.join(OUTCOMES)})")
        return cls(check=data["check"], category=data["category"], kind=data["kind"],
                   case=str(data.get("case") or ""), outcome=data["outcome"],
                   message=str(data.get("message") or ""), diagnosis=data.get("diagnosis") or None,
                   numbers=data["numbers"] if isinstance(data.get("numbers"), dict) else {},
                   duration_s=float(data.get("duration_s") or 0.0))


@dataclass(frozen=True)
class Verdict:
    """One level's verdict on a run: its state (one of STATES), and why, one line per cause
    (a finding, a feature lacked without being declared, checks cut short)."""

    level: str
    state: str
    reasons: tuple[str, ...] = ()
    passed: int = 0


def cut_short(result) -> bool:
    """Whether a result is an error only because the check did not finish (a time limit, the
    run's budget, an interrupted run), not a failure of the implementation."""
    return result.outcome == "error" and bool(result.numbers.get("incomplete"))


def undeclared_features(results: Iterable) -> dict[str, str]:
    """Feature -> "reason (source)" for every feature the results skipped that the
    implementation lacks without declaring it (absent from its signatures, or observed),
    drawn cases a fuzz search skipped included."""
    found = {}
    for result in results:
        found.update({feature: why for feature, why in result.numbers.get("skipped", {}).items()
                      if feature not in found})
        if result.outcome != "not_supported":
            continue
        sources = result.numbers.get("sources") or {}
        for feature, reason in (result.numbers.get("features") or {}).items():
            if sources.get(feature, "declared") != "declared":
                found.setdefault(feature, f"{reason} ({sources[feature]})")
    return found


# A check that failed without running says nothing of the function the module computes: the
# flag its Finding's numbers carry -> why, as the numerics level then says it.
NOT_RUN = {
    "parameters_matched": "its parameters could not be matched to the spec's, so its function "
                          "was not checked: --param-map KEY=NAME,... says which is which where "
                          "whole parameters map",
    "parameters_readable": "its parameters are held in a form they cannot be read from (packed, "
                           "or reparametrized by weight_norm or spectral_norm), so its function "
                           "was not checked",
    "constructed": "its constructor needs arguments torch.nn's does not give, so its function "
                   "was not checked: a function that takes torch.nn's arguments and supplies "
                   "the others can stand in for it",
    "called": "its forward needs arguments torch.nn's does not give, so its function was not "
              "checked: a module whose forward takes torch.nn's arguments and supplies the others "
              "can stand in for it",
}


def not_run(result) -> str | None:
    """Why a check failed without running at all (`NOT_RUN`), or None."""
    if result.outcome != "failed":
        return None
    return next((why for flag, why in NOT_RUN.items() if result.numbers.get(flag) is False), None)


def judge(results: Iterable, interrupted: bool = False) -> dict[str, Verdict]:
    """Each level's Verdict on a run's results (`CheckResult`s, or anything with their
    attributes); known failures (xfail) are not failures. A check that could not run at all
    (`not_run`: parameters no rule can match or none can be read from, a constructor that
    needs more than torch.nn gives) is no finding at the numerics level (a right function behind names no rule can read
    is not a wrong one), but the level is then "not checked", whatever else passed or did not
    finish: the checks that ran without it prove nothing of the function. The drop-in level
    fails on it."""
    results = list(results)
    unread = list(dict.fromkeys(why for r in results if r.category in NUMERIC_CATEGORIES
                                and (why := not_run(r))))
    verdicts = {}
    for level in LEVELS:
        mine = [r for r in results if level == "drop-in"
                or (r.category in NUMERIC_CATEGORIES and not not_run(r))]
        failing = [r for r in mine if r.outcome in ("failed", "error") and not cut_short(r)]
        reasons = [group.sentence + (f" [{group.diagnosis}]" if group.diagnosis else "")
                   for group in group_failures(failing)]
        if level == "drop-in":
            reasons += [f"{feature} not supported and not declared: {why}"
                        for feature, why in undeclared_features(results).items()]
        cut = sum(cut_short(r) for r in mine)
        passed = sum(r.outcome in ("passed", "xpass") for r in mine)
        if reasons:
            state = "does not conform"
        elif level == "numerics" and unread:
            state, reasons = "not checked", unread
        elif cut or interrupted:
            state = "incomplete"
            reasons = [f"{cut} checks did not finish" if cut else "the run was interrupted"]
        else:
            state = "conforms" if passed else "not checked"
        verdicts[level] = Verdict(level, state, tuple(reasons), passed)
    return verdicts


def summary_phrase(verdicts: dict[str, Verdict]) -> str:
    """Both levels in a few words, for tables: "conforms", "computes the function, not a
    drop-in", "not a drop-in, function not checked", "DOES NOT CONFORM", "INCOMPLETE" or "not
    checked"."""
    numerics, drop_in = verdicts["numerics"].state, verdicts["drop-in"].state
    if "does not conform" == numerics:
        return "DOES NOT CONFORM"
    if "incomplete" in (numerics, drop_in) and drop_in != "does not conform":
        return "INCOMPLETE"
    if numerics == "incomplete" and verdicts["numerics"].passed:
        return "computes the function so far, not a drop-in"
    if drop_in == "does not conform":
        return ("computes the function, not a drop-in" if numerics == "conforms"
                else "not a drop-in, function not checked")
    return "conforms" if drop_in == "conforms" else "not checked"


def count_outcomes(results: Iterable[CheckResult]) -> dict[str, int]:
    """Counts per outcome, every outcome present."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for result in results:
        counts[result.outcome] += 1
    return counts


@dataclass
class ConformanceRun:
    """One run of the conformance checks on one target: what was asked, what came out.

    `error` says why nothing could be checked (the target could not be loaded), `interrupted`
    that the run stopped before every check had a result."""

    target: str
    implementation: str | None = None
    kinds: list[str] = field(default_factory=list)
    device: str = "cpu"
    quick: bool = False
    seed: int = 0
    checks: str | None = None   # the --check selection
    fuzz: int | None = None
    case: str | None = None     # the --case given (JSON)
    interrupted: bool = False
    duration_s: float = 0.0
    environment: dict | None = None
    known_failures: dict = field(default_factory=dict)
    results: list[CheckResult] = field(default_factory=list)
    error: str = ""
    require: str = "drop-in"  # the level whose verdict sets the exit code
    # How the run was asked for, as a rerun must repeat it (param_map, unsupported, timeout_s),
    # and the slowdown of this machine that scaled the checks' time limits.
    options: dict = field(default_factory=dict)

    @property
    def summary(self) -> dict[str, int]:
        """How many results have each outcome."""
        return count_outcomes(self.results)

    @property
    def not_supported_features(self) -> dict[str, str]:
        """Feature -> why it is not supported, once per feature the results skipped."""
        return {feature: entry["reason"]
                for feature, entry in unsupported_features(self.results).items()}

    @property
    def verdicts(self) -> dict[str, Verdict]:
        """Each level's verdict (`judge`)."""
        return judge(self.results, self.interrupted)

    @property
    def exit_code(self) -> int:
        """0 when the required level conforms (or, for a selection of checks, nothing at it ran),
        1 when it does not conform (or nothing at it ran at all, or something stopped its checks:
        `not_run`), 3 when it is incomplete."""
        verdict = self.verdicts[self.require]
        state = verdict.state
        if state == "not checked":
            return 0 if (self.checks or self.fuzz or self.case) and not verdict.reasons else 1
        return {"conforms": 0, "does not conform": 1, "incomplete": 3}[state]

    @property
    def param_map(self) -> dict[str, str]:
        """The parameter map the checks assumed ({module key: spec name}), as the parameters
        check reported it; empty when the module speaks the spec's names."""
        return next((r.numbers["param_map"] for r in self.results
                     if r.numbers.get("param_map")), {})

    @property
    def stale_known_failures(self) -> list[str]:
        """The known-failure entries that match none of the results' checks."""
        from rnnbench.suites.known import stale

        return stale(self.known_failures, self.results)

    def to_json(self) -> dict:
        """The document: every field, then what is derived from the results."""
        data = {"schema": CONFORMANCE_SCHEMA}
        data.update((f.name, getattr(self, f.name)) for f in fields(self) if f.name != "results")
        if not self.error:
            del data["error"]
        data.update(summary=self.summary,
                    verdict={level: {"state": v.state, "reasons": list(v.reasons), "passed": v.passed}
                             for level, v in self.verdicts.items()},
                    not_supported_features=self.not_supported_features,
                    undeclared_features=undeclared_features(self.results),
                    param_map=self.param_map, stale_known_failures=self.stale_known_failures,
                    results=[r.to_json() for r in self.results])
        return data

    @classmethod
    def from_json(cls, data, unread: list | None = None) -> ConformanceRun:
        """A document from its JSON object (what is derived from the results is computed again,
        not read); ValueError saying what is wrong when it is not one. A result that cannot be
        read raises too, unless `unread` is a list: then (index, reason, item) goes there."""
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise ValueError("a conformance document is an object with a list of 'results'")
        if not isinstance(data.get("target"), str) or not data["target"]:
            raise ValueError("no 'target'")
        if not isinstance(data.get("environment") or {}, dict):
            raise ValueError("'environment' is not an object")
        results = []
        for index, item in enumerate(data["results"]):
            try:
                results.append(CheckResult.from_json(item))
            except ValueError as exc:
                if unread is None:
                    raise ValueError(f"results[{index}]: {exc}") from None
                unread.append((index, str(exc), item))
        kinds = data.get("kinds")
        return cls(target=data["target"], implementation=data.get("implementation"),
                   kinds=[str(k) for k in kinds] if isinstance(kinds, list) else [],
                   device=str(data.get("device") or "cpu"), quick=data.get("quick") is True,
                   seed=data.get("seed") if isinstance(data.get("seed"), int) else 0,
                   checks=data.get("checks"), fuzz=data.get("fuzz"), case=data.get("case"),
                   interrupted=data.get("interrupted") is True,
                   duration_s=float(data.get("duration_s") or 0.0),
                   environment=data.get("environment"),
                   known_failures=data.get("known_failures") if isinstance(
                       data.get("known_failures"), dict) else {},
                   results=results, error=str(data.get("error") or ""),
                   require=data.get("require") if data.get("require") in LEVELS else "drop-in",
                   options=data.get("options") if isinstance(data.get("options"), dict) else {})

    @classmethod
    def merged(cls, runs: list[ConformanceRun], kind_order: list[str]) -> ConformanceRun:
        """One target's document from documents of its kinds checked apart: the first one that
        could not run if any, else every result, the kinds in `kind_order`."""
        failed = next((run for run in runs if run.error), None)
        if failed is not None or len(runs) == 1:
            return failed or runs[0]
        def rank(result: CheckResult) -> int:
            return kind_order.index(result.kind) if result.kind in kind_order else len(kind_order)
        return dataclasses.replace(
            runs[0], kinds=[kind for run in runs for kind in run.kinds],
            interrupted=any(run.interrupted for run in runs),
            duration_s=max(run.duration_s for run in runs),
            results=sorted((r for run in runs for r in run.results), key=rank))


class Finding(Exception):
    """A conformance failure: what is wrong (one line), its diagnosis id if recognised, numbers."""

    def __init__(self, message: str, diagnosis: str | None = None, **numbers):
        super().__init__(message)
        self.message = message
        self.diagnosis = diagnosis
        self.numbers = numbers
        # Of a forward whose return is misshapen in part: its well-formed outputs, by name.
        self.conforming: dict = {}


class NotSupported(Exception):
    """The implementation declares a feature this check needs unsupported."""
