"""`conform`: the checks of one target, run in a child process that cannot take the run down.

The child (`rnnbench.suites.child`, started as a `rnnbench.child_process.ChildProcess`) loads the
target, plans the checks and streams one result per check. When it dies (a segfault,
`os._exit`) or a check runs past its time limit, the check it was running becomes an "error"
result, the child is killed if need be, and a fresh child carries on with the next check;
`sys.exit` inside a check is caught in the child itself.

Every run is bounded, however the implementation misbehaves:
- a check's time limit is the larger of `timeout_s` and CHECK_SLOWDOWN times what the check
  takes on native (`native_seconds.json`, measured by `python -m rnnbench.suites.native_times`),
  times this machine's slowdown against the machine that table was measured on: each child
  times native's forward check first (`native_times.calibrate`) and the ratio to the table's
  own calibration (never below 1) scales every limit, so a slower or busier machine gets
  proportionally longer; a child's first check gets at least FIRST_CHECK_S (scaled alike), since
  it also pays what a process does once (torch.compile's first build);
- a kind on which the process died or hung CRASH_LIMIT checks in a row is given up;
- once checks that hung or crashed have cost LOST_BUDGET_S (times the slowdown) in all, the rest
  of the run is given up (an implementation that hangs after a while would otherwise restart a
  child per check);
- after `budget_s` (counted from the first check) the remaining checks are not run;
- a child's memory is limited (`memory_limit`; a check that exceeds it is an error that says
  so), only a bounded tail of what it prints is kept, and its whole process group is ended with
  it; it compiles in a private copy of torch.compile's cache, shared back only when it finished
  (`rnnbench.compiler_cache`), so a child killed midway leaves no half-built library behind.
Checks that are not run are "error" results that say why. Results that timed out or were not
run for a budget are marked incomplete (`numbers["incomplete"]`): the run could not judge them,
which is not the same as a failure, and the verdict says "incomplete" (`results.judge`). What finished is always kept: an
interrupted run returns the results it has.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rnnbench.child_process import (ChildProcess, default_memory_limit, exceeded_memory,
                                    memory_limit_text)
from rnnbench.compiler_cache import PrivateCache
from rnnbench.errors import UsageError
from rnnbench.suites import known
from rnnbench.suites.features import device_type
from rnnbench.suites.fuzz import CASE_LINE
from rnnbench.suites.results import CheckResult, ConformanceRun
from rnnbench.suites.runner import validate_kinds

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_BUDGET_S = 270.0  # with start-up, every run ends within five minutes
LOAD_TIMEOUT_S = 180.0  # importing torch and the target in a fresh process
# A child's first check also pays the process's one-time costs: torch.compile's first check in a
# process with an empty compiler cache took 62 s on a 16-core Xeon (13 s on a 2-core EPYC),
# where the next kind's first check took 13 s. Its limit is at least this (times the slowdown).
FIRST_CHECK_S = 180.0
CRASH_LIMIT = 3
LOST_BUDGET_S = 100.0
CHECK_SLOWDOWN = 100.0
FUZZ_CASE_S = 5.0  # the time limit of a fuzz check grows by this per drawn case
POLL_S = 0.25  # how often a waiting parent looks whether it was told to stop
NATIVE_SECONDS = Path(__file__).with_name("native_seconds.json")


def conform(target: str, kinds=None, device: str = "cpu", quick: bool = False, seed: int = 0,
            timeout_s: float = DEFAULT_TIMEOUT_S,
            progress: Callable[[CheckResult, int, int], None] | None = None, *,
            checks: str | None = None, param_map: dict | None = None,
            budget_s: float | None = DEFAULT_BUDGET_S, fuzz: int | None = None,
            case: str | None = None, known_failures: dict | None = None, unsupported=(),
            require: str = "drop-in", memory_limit: int | None = default_memory_limit(),
            stop: threading.Event | None = None, threads: int | None = None) -> ConformanceRun:
    """Run the checks of `target` isolated; its `ConformanceRun` document.

    `checks` selects checks by pattern, `fuzz` searches that many drawn cases per kind, `case`
    (JSON, see `rnnbench.suites.fuzz.case_from_json`) runs one given case (see `runner.plan`);
    `param_map` maps the module's state_dict keys to the spec's names; `known_failures` (pattern
    -> reason) turns their results into xfail/xpass; `unsupported` names features the target
    does not support (declared: not held against it); `require` is the level whose verdict
    the document's exit code follows; `budget_s` bounds the run (None: unbounded);
    `memory_limit` bounds each child's memory in bytes (None: unbounded); `threads` sets
    torch's thread count in each child (None: torch's default), recorded in its environment.
    UsageError when the target cannot be loaded, a kind or the device is wrong. Interrupted
    (KeyboardInterrupt, or `stop` set by another thread), the document has the results so far
    and `interrupted` set.
    """
    validate_kinds(kinds)  # before paying for a child process
    device_type(device)
    started = time.perf_counter()
    options = {"target": target, "kinds": list(kinds or []), "device": device, "quick": quick,
               "seed": seed, "checks": checks, "param_map": param_map or {}, "fuzz": fuzz,
               "case": case, "known_failures": known_failures or {},
               "unsupported": sorted(unsupported), "threads": threads}
    run = _Run(options, timeout_s, budget_s, progress, memory_limit=memory_limit, stop=stop)
    try:
        run.until_done()
    except KeyboardInterrupt:
        run.interrupted = True
    return ConformanceRun(
        target=target, implementation=run.implementation,
        kinds=list(dict.fromkeys(item["kind"] for item in run.items)), device=device,
        quick=quick, seed=seed, checks=checks, fuzz=fuzz, case=case, interrupted=run.interrupted,
        duration_s=time.perf_counter() - started, environment=run.environment,
        known_failures=run.known_failures, results=run.results(), require=require,
        options={"param_map": param_map or {}, "unsupported": sorted(unsupported),
                 "slowdown": round(run.slowdown, 2)})


def native_seconds() -> dict[str, float]:
    """What each check (by name) takes on native at most, over kinds and cases."""
    return _native_table().get("seconds", {})


def reference_calibration_s() -> float | None:
    """What `native_times.calibrate` took where native_seconds.json was measured; None if the
    table has no calibration (then limits are not scaled)."""
    value = _native_table().get("calibration_s")
    return value if isinstance(value, (int, float)) and value > 0 else None


def _native_table() -> dict:
    try:
        table = json.loads(NATIVE_SECONDS.read_text())
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


class _Run:
    """The parent's side: children started one after another until every item has a result."""

    def __init__(self, options: dict, timeout_s: float, budget_s: float | None, progress, *,
                 memory_limit: int | None = None, stop: threading.Event | None = None):
        self.options = options
        self.timeout_s, self.budget_s, self.progress = timeout_s, budget_s, progress
        self.memory_limit, self.stop = memory_limit, stop
        self.native = native_seconds()
        self.reference_s = reference_calibration_s()
        self.slowdown = 1.0
        self.started = time.monotonic()
        self.items: list[dict] = []
        self.lacking: dict[int, CheckResult] = {}  # items known not supported before they run
        self.done: dict[int, CheckResult] = {}
        self.implementation = None
        self.environment = None
        self.interrupted = False
        self.skip_kinds: set[str] = set()
        self.in_a_row: list[str] = []  # how the process ended on each of the last checks
        self.lost_s = 0.0
        self.known_failures = dict(options["known_failures"])

    def results(self) -> list[CheckResult]:
        return [self.done[i] for i in sorted(self.done)]

    def record(self, index: int, result: CheckResult) -> None:
        known.mark(result, self.known_failures)  # the child marks its own; this, the parent's
        self.done[index] = result
        if self.progress:
            self.progress(result, len(self.done), len(self.items))

    def next_index(self) -> int | None:
        return next((i for i, item in enumerate(self.items) if i not in self.done
                     and item["kind"] not in self.skip_kinds), None)

    def until_done(self) -> None:
        start = 0
        while True:
            self.child(start)
            start = self.next_index() if self.items else None
            if start is None:
                return
            if self.lost_s >= self.lost_budget_s():
                return self.give_up_all(f"checks that hung or crashed cost {self.lost_s:.0f} s "
                                        f"in all (limit {self.lost_budget_s():.0f} s)")
            if self.remaining_s() <= 0:
                return self.give_up_all(f"the run's budget of {self.budget_s:g} s is spent "
                                        "(--budget allows more)")

    def remaining_s(self) -> float:
        if self.budget_s is None:
            return float("inf")
        return self.budget_s - (time.monotonic() - self.started)

    def lost_budget_s(self) -> float:
        return LOST_BUDGET_S * self.slowdown

    def limit_s(self, index: int | None, first: bool = False) -> float:
        """The time limit of item `index` (the next one while none is running), the `first`
        check of its child or not."""
        if first:
            return max(self.limit_s(index), FIRST_CHECK_S * self.slowdown)
        if index is None or index >= len(self.items):
            return self.timeout_s * self.slowdown
        name = self.items[index]["check"].split("/", 1)[0]
        if name == "fuzz":  # one check, many drawn cases, then shrinking
            return (self.timeout_s + FUZZ_CASE_S * self.options["fuzz"]) * self.slowdown
        return max(self.timeout_s, CHECK_SLOWDOWN * self.native.get(name, 0.0)) * self.slowdown

    def child(self, start: int) -> None:
        """One child from item `start` on, until it finishes, dies or hangs."""
        options = {**self.options, "start": start, "skip_kinds": sorted(self.skip_kinds),
                   "calibrate": self.reference_s is not None}
        # Forked from a server with torch imported: a run of the quick list starts a child
        # per implementation (and one more after each crash), each 2-3 CPU-s of import.
        with PrivateCache() as cache, ChildProcess("rnnbench.suites.child", options,
                                                   memory_limit=self.memory_limit,
                                                   env=cache.env(), preloaded=True) as child:
            running, planned, since = None, False, time.monotonic()
            last_result_at = None   # what the child compiled before this is whole
            while True:
                # Until this child has loaded the target, allow for imports; then per check,
                # and never past the run's budget.
                limit = (self.limit_s(running, first=last_result_at is None) if planned
                         else LOAD_TIMEOUT_S)
                deadline = since + limit
                if planned:
                    deadline = min(deadline, time.monotonic() + self.remaining_s())
                try:
                    event = self.next_event(child, deadline)
                except TimeoutError:
                    child.kill()
                    how = (f"timed out after {limit:.0f} s" if deadline == since + limit
                           else "was stopped: the run's budget is spent")
                    break
                if event is None:  # the child closed its end: it is exiting
                    how = child.finish()
                    break
                since = time.monotonic()
                planned = planned or event["event"] == "plan"
                running = self.handle(event, running)
                if event["event"] == "result":
                    last_result_at = time.time()
                if event["event"] == "done":
                    child.finish()
                    cache.merge(child.returncode == 0, last_result_at)
                    return
            cache.merge(False, last_result_at)
            # Blame the check it was running (if it died between checks: the next one).
            culprit = running if running is not None else self.next_index() if planned else start
            self.died(culprit, how, time.monotonic() - since, child.last_line(),
                      child.last_line(CASE_LINE) or None)

    def next_event(self, child: ChildProcess, deadline: float) -> dict | None:
        """The child's next event before `deadline` (TimeoutError after it); KeyboardInterrupt
        as soon as `stop` is set."""
        while True:
            if self.stop is not None and self.stop.is_set():
                raise KeyboardInterrupt
            remaining = deadline - time.monotonic()
            try:
                return child.next_event(min(remaining, POLL_S) if self.stop else remaining)
            except TimeoutError:
                if remaining <= POLL_S or not self.stop:
                    raise

    def handle(self, event: dict, running: int | None) -> int | None:
        """Take in one event from the child; returns the index of the item now running."""
        kind = event["event"]
        if kind == "usage_error":
            raise UsageError(event["message"])
        if kind == "plan":
            if not self.items:     # the run's budget counts from the first check on
                self.started = time.monotonic()
            self.items, self.implementation = event["items"], event["implementation"]
            self.lacking = {int(index): CheckResult.from_json(result)
                            for index, result in event.get("lacking", {}).items()}
            self.known_failures = event.get("known_failures", self.known_failures)
        elif kind == "calibration" and self.reference_s:
            self.slowdown = max(1.0, event["seconds"] / self.reference_s)
        elif kind == "environment":
            self.environment = event["environment"]
        elif kind == "start":
            return event["index"]
        elif kind == "result":
            result = CheckResult.from_json(event["result"])
            if (result.outcome in ("failed", "error") and self.memory_limit
                    and exceeded_memory(result.message)):
                # The harness's limit stopped the check: an error, not a finding.
                result.outcome, result.diagnosis = "error", None
                result.message = f"{self.memory_note()}: {result.message}"
            self.record(event["index"], result)
            self.in_a_row.clear()
        return None

    def memory_note(self) -> str:
        return f"exceeded the memory limit ({memory_limit_text(self.memory_limit)})"

    def died(self, index: int | None, how: str, duration_s: float, last_output: str,
             drawn: str | None = None) -> None:
        """Account for a child that stopped early: an error result for item `index` (a fuzz
        check's with the `drawn` case it was running, when it announced one)."""
        if self.memory_limit and exceeded_memory(last_output):
            how = f"{self.memory_note()} and {how}"
        said = f"; last output: {last_output}" if last_output else ""
        if not self.items:
            raise UsageError(f"cannot load {self.options['target']}: the process {how}{said}")
        if index is None:  # every item has its result
            return
        item = self.items[index]
        cut = how.startswith(("timed out", "was stopped"))
        numbers = _incomplete(cut)
        if drawn:  # the fuzz case it died on: the rerun command gives it as --case
            numbers["case"] = drawn
        self.record(index, CheckResult(**item, outcome="error", message=f"the process {how}{said}",
                                       duration_s=duration_s, numbers=numbers))
        self.lost_s += duration_s
        self.in_a_row.append("hung" if cut else "died")
        if len(self.in_a_row) >= CRASH_LIMIT:
            self.give_up(item["kind"])

    def give_up_all(self, reason: str) -> None:
        """Every item without a result becomes an error saying why it was not run; a budget
        cut them."""
        for index in range(len(self.items)):
            if index not in self.done:
                self.not_run(index, reason, cut=True)

    def not_run(self, index: int, reason: str, cut: bool) -> None:
        """Item `index` was not run for `reason`: an error, unless it is known not supported
        (declared, or absent from a signature), which it stays."""
        result = self.lacking.get(index) or CheckResult(
            **self.items[index], outcome="error", message=f"not run: {reason}",
            numbers=_incomplete(cut))
        self.record(index, result)

    def give_up(self, kind: str) -> None:
        """The rest of `kind` becomes errors: the process hung or died on CRASH_LIMIT checks in
        a row. Only hangs (checks that ran out of time) cut them; a death is a failure."""
        hung = all(how == "hung" for how in self.in_a_row)
        what = ("timed out" if hung else "the process died" if "hung" not in self.in_a_row
                else "the process hung or died")
        self.skip_kinds.add(kind)
        self.in_a_row.clear()
        for index, item in enumerate(self.items):
            if item["kind"] == kind and index not in self.done:
                self.not_run(index, f"{what} on {CRASH_LIMIT} {kind} checks in a row", cut=hung)


def _incomplete(cut: bool) -> dict:
    """The numbers of an error result: marked incomplete when the check was cut (it timed out,
    or was not run for a budget or a run of hangs), not failed."""
    return {"incomplete": True} if cut else {}
