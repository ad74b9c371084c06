"""`conform`: the checks of one target, run in a child process that cannot take the run down.

The child (`rnnbench.suites.child`) loads the target, plans the checks and streams one result per
check. When it dies (a segfault, `os._exit`) or a check runs past its time limit, the check it
was running becomes an "error" result, the child is killed if need be, and a fresh child carries
on with the next check; `sys.exit` inside a check is caught in the child itself.

Every run is bounded, however the implementation misbehaves:
- a check's time limit is the larger of `timeout_s` and CHECK_SLOWDOWN times what the check
  takes on native (`native_seconds.json`, measured by `python -m rnnbench.suites.native_times`);
- a kind on which the process died CRASH_LIMIT checks in a row is given up;
- once checks that hung or crashed have cost LOST_BUDGET_S in all, the rest of the run is given
  up (an implementation that hangs after a while would otherwise restart a child per check);
- after `budget_s` the remaining checks are not run.
Checks that are not run are "error" results that say why. What finished is always kept: an
interrupted run returns the results it has.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rnnbench.errors import UsageError
from rnnbench.suites import known
from rnnbench.suites.features import device_type
from rnnbench.suites.results import CheckResult, ConformanceRun
from rnnbench.suites.runner import validate_kinds

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_BUDGET_S = 270.0  # with start-up, every run ends within five minutes
LOAD_TIMEOUT_S = 180.0  # importing torch and the target in a fresh process
CRASH_LIMIT = 3
LOST_BUDGET_S = 100.0
CHECK_SLOWDOWN = 100.0
FUZZ_CASE_S = 5.0  # the time limit of a fuzz check grows by this per drawn case
NATIVE_SECONDS = Path(__file__).with_name("native_seconds.json")
# The child must import this rnnbench, not a folder of that name in the working directory, which
# `python -m` would put first on sys.path; the working directory stays importable, last.
LAUNCHER = ("import sys; cwd = sys.path.pop(0); import rnnbench.suites.child as child; "
            "sys.path.append(cwd); sys.exit(child.main(sys.argv))")


def conform(target: str, kinds=None, device: str = "cpu", quick: bool = False, seed: int = 0,
            timeout_s: float = DEFAULT_TIMEOUT_S,
            progress: Callable[[CheckResult, int, int], None] | None = None, *,
            checks: str | None = None, param_map: dict | None = None,
            budget_s: float | None = DEFAULT_BUDGET_S, fuzz: int | None = None,
            case: str | None = None, known_failures: dict | None = None, unsupported=(),
            require: str = "drop-in") -> ConformanceRun:
    """Run the checks of `target` isolated; its `ConformanceRun` document.

    `checks` selects checks by pattern, `fuzz` searches that many drawn cases per kind, `case`
    (JSON, see `rnnbench.suites.fuzz.case_from_json`) runs one given case (see `runner.plan`);
    `param_map` maps the module's state_dict keys to the spec's names; `known_failures` (pattern
    -> reason) turns their results into xfail/xpass; `unsupported` names features the target
    does not support (declared: not held against it); `require` is the level whose verdict
    the document's exit code follows; `budget_s` bounds the run (None: unbounded).
    UsageError when the target cannot be loaded, a kind or the device is wrong. Interrupted
    (KeyboardInterrupt), the document has the results so far and `interrupted` set.
    """
    validate_kinds(kinds)  # before paying for a child process
    device_type(device)
    started = time.perf_counter()
    options = {"target": target, "kinds": list(kinds or []), "device": device, "quick": quick,
               "seed": seed, "checks": checks, "param_map": param_map or {}, "fuzz": fuzz,
               "case": case, "known_failures": known_failures or {},
               "unsupported": sorted(unsupported)}
    run = _Run(options, timeout_s, budget_s, progress)
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
        options={"param_map": param_map or {}, "unsupported": sorted(unsupported)})


def native_seconds() -> dict[str, float]:
    """What each check (by name) takes on native at most, over kinds and cases."""
    try:
        return json.loads(NATIVE_SECONDS.read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return {}


class _Run:
    """The parent's side: children started one after another until every item has a result."""

    def __init__(self, options: dict, timeout_s: float, budget_s: float | None, progress):
        self.options = options
        self.timeout_s, self.budget_s, self.progress = timeout_s, budget_s, progress
        self.native = native_seconds()
        self.started = time.monotonic()
        self.items: list[dict] = []
        self.done: dict[int, CheckResult] = {}
        self.implementation = None
        self.environment = None
        self.interrupted = False
        self.skip_kinds: set[str] = set()
        self.crashes_in_a_row = 0
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
            if self.lost_s >= LOST_BUDGET_S:
                return self.give_up_all(f"checks that hung or crashed cost {self.lost_s:.0f} s "
                                        f"in all (limit {LOST_BUDGET_S:g} s)")
            if self.remaining_s() <= 0:
                return self.give_up_all(f"the run's budget of {self.budget_s:g} s is spent "
                                        "(--budget allows more)")

    def remaining_s(self) -> float:
        if self.budget_s is None:
            return float("inf")
        return self.budget_s - (time.monotonic() - self.started)

    def limit_s(self, index: int | None) -> float:
        """The time limit of item `index` (the next one while none is running)."""
        if index is None or index >= len(self.items):
            return self.timeout_s
        name = self.items[index]["check"].split("/", 1)[0]
        if name == "fuzz":  # one check, many drawn cases, then shrinking
            return self.timeout_s + FUZZ_CASE_S * self.options["fuzz"]
        return max(self.timeout_s, CHECK_SLOWDOWN * self.native.get(name, 0.0))

    def child(self, start: int) -> None:
        """One child from item `start` on, until it finishes, dies or hangs."""
        with tempfile.TemporaryFile() as output:
            child = _Child({**self.options, "start": start, "skip_kinds": sorted(self.skip_kinds)},
                           output)
            try:
                running, planned, since, cut = None, False, time.monotonic(), False
                while True:
                    # Until this child has loaded the target, allow for imports; then per check,
                    # and never past the run's budget.
                    limit = self.limit_s(running) if planned else LOAD_TIMEOUT_S
                    deadline = min(since + limit, time.monotonic() + self.remaining_s())
                    try:
                        event = child.next_event(deadline - time.monotonic())
                    except TimeoutError:
                        child.kill()
                        how = (f"timed out after {limit:.0f} s" if deadline == since + limit
                               else "was stopped: the run's budget is spent")
                        cut = True
                        break
                    if event is None:  # the child closed its end: it is exiting
                        how = child.how_it_ended()
                        break
                    since = time.monotonic()
                    planned = planned or event["event"] == "plan"
                    running = self.handle(event, running)
                    if event["event"] == "done":
                        child.how_it_ended()
                        return
            except BaseException:
                child.kill()
                raise
            # Blame the check it was running (if it died between checks: the next one).
            culprit = running if running is not None else self.next_index() if planned else start
            self.died(culprit, how, time.monotonic() - since, output, cut)

    def handle(self, event: dict, running: int | None) -> int | None:
        """Take in one event from the child; returns the index of the item now running."""
        kind = event["event"]
        if kind == "usage_error":
            raise UsageError(event["message"])
        if kind == "plan":
            self.items, self.implementation = event["items"], event["implementation"]
            self.known_failures = event.get("known_failures", self.known_failures)
        elif kind == "environment":
            self.environment = event["environment"]
        elif kind == "start":
            return event["index"]
        elif kind == "result":
            self.record(event["index"], CheckResult.from_json(event["result"]))
            self.crashes_in_a_row = 0
        return None

    def died(self, index: int | None, how: str, duration_s: float, output,
             cut: bool = False) -> None:
        """Account for a child that stopped early: an error result for item `index`; `cut`
        when it was stopped for taking too long (the check is incomplete, not failed)."""
        if not self.items:
            raise UsageError(f"cannot load {self.options['target']}: the process {how}"
                             + _last_line(output))
        if index is None:  # every item has its result
            return
        item = self.items[index]
        self.record(index, CheckResult(**item, outcome="error", message=f"the process {how}"
                                       + _last_line(output), duration_s=duration_s,
                                       numbers={"incomplete": True} if cut else {}))
        self.lost_s += duration_s
        self.crashes_in_a_row += 1
        if self.crashes_in_a_row >= CRASH_LIMIT:
            self.give_up(item["kind"])

    def give_up_all(self, reason: str) -> None:
        """Every item without a result becomes an error saying why it was not run."""
        for index, item in enumerate(self.items):
            if index not in self.done:
                self.record(index, CheckResult(**item, outcome="error", message=f"not run: {reason}",
                                               numbers={"incomplete": True}))

    def give_up(self, kind: str) -> None:
        self.skip_kinds.add(kind)
        self.crashes_in_a_row = 0
        for index, item in enumerate(self.items):
            if item["kind"] == kind and index not in self.done:
                self.record(index, CheckResult(
                    **item, outcome="error",
                    message=f"not run: the process died on {CRASH_LIMIT} {kind} checks in a row",
                    numbers={"incomplete": True}))


class _Child:
    """The child process (see LAUNCHER) with a pipe for its events; its prints go to `output`."""

    def __init__(self, options: dict, output):
        read_end, write_end = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, json.dumps({**options, "fd": write_end})],
            stdin=subprocess.DEVNULL, stdout=output, stderr=output, pass_fds=(write_end,),
            start_new_session=True)  # its own process group, so a kill reaches what it started
        os.close(write_end)
        self.channel = os.fdopen(read_end, "rb")
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.channel, selectors.EVENT_READ)
        self.buffer = b""

    def next_event(self, timeout: float) -> dict | None:
        """The next event; None when the child closed the pipe (it is exiting), TimeoutError
        when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                raise TimeoutError
            chunk = os.read(self.channel.fileno(), 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def kill(self) -> None:
        """Kill the child's process group (it and whatever it started)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.close()

    def how_it_ended(self, grace_s: float = 10.0) -> str:
        """Wait for the exiting child (killing it after `grace_s`); how it ended, in words."""
        try:
            code = self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return "stopped answering and was killed"
        self.close()
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def close(self) -> None:
        self.process.wait()
        if not self.channel.closed:
            self.selector.close()
            self.channel.close()


def _last_line(output) -> str:
    """"; last output: ..." with the last non-empty line the child printed, if any."""
    output.seek(0)
    lines = [line.strip() for line in output.read().decode(errors="replace").splitlines() if line.strip()]
    return f"; last output: {lines[-1][:200]}" if lines else ""
