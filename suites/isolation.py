"""`conform`: the checks of one target, run in a child process that cannot take the run down.

The child (`rnnbench.suites.child`) loads the target, plans the checks and streams one result per
check. When it dies (a segfault, `os._exit`) or a check runs past the time limit, the check it
was running becomes an "error" result, the child is killed if need be, and a fresh child carries
on with the next check; `sys.exit` inside a check is caught in the child itself. A kind on which
the process died CRASH_LIMIT checks in a row is given up (its remaining checks are "error"
results), so an implementation that always crashes costs a few restarts, not one per check.
What finished is always kept: an interrupted run returns the results it has.
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

from rnnbench.errors import UsageError
from rnnbench.results import CONFORMANCE_SCHEMA
from rnnbench.suites.results import CheckResult
from rnnbench.suites.runner import check_kinds, device_type, summarize

DEFAULT_TIMEOUT_S = 60.0
LOAD_TIMEOUT_S = 180.0  # importing torch and the target in a fresh process
CRASH_LIMIT = 3


def conform(target: str, kinds=None, device: str = "cpu", quick: bool = False, seed: int = 0,
            timeout_s: float = DEFAULT_TIMEOUT_S,
            progress: Callable[[CheckResult, int, int], None] | None = None) -> dict:
    """Run the checks of `target` isolated; the rnnbench.conformance/1 document.

    UsageError when the target cannot be loaded, a kind or the device is wrong. Interrupted
    (KeyboardInterrupt), the document has the results so far and "interrupted": true.
    """
    check_kinds(kinds)  # before paying for a child process
    device_type(device)
    started = time.perf_counter()
    run = _Run(target, list(kinds or []), device, quick, seed, timeout_s, progress)
    try:
        run.until_done()
    except KeyboardInterrupt:
        run.interrupted = True
    return {
        "schema": CONFORMANCE_SCHEMA, "target": target, "implementation": run.implementation,
        "kinds": list(dict.fromkeys(item["kind"] for item in run.items)),
        "device": device, "quick": quick, "seed": seed, "interrupted": run.interrupted,
        "duration_s": time.perf_counter() - started, "environment": run.environment,
        "summary": summarize(run.results()), "results": [r.to_dict() for r in run.results()],
    }


class _Run:
    """The parent's side: children started one after another until every item has a result."""

    def __init__(self, target, kinds, device, quick, seed, timeout_s, progress):
        self.options = {"target": target, "kinds": kinds, "device": device, "quick": quick,
                        "seed": seed}
        self.timeout_s, self.progress = timeout_s, progress
        self.items: list[dict] = []
        self.done: dict[int, CheckResult] = {}
        self.implementation = None
        self.environment = None
        self.interrupted = False
        self.skip_kinds: set[str] = set()
        self.crashes_in_a_row = 0

    def results(self) -> list[CheckResult]:
        return [self.done[i] for i in sorted(self.done)]

    def record(self, index: int, result: CheckResult) -> None:
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

    def child(self, start: int) -> None:
        """One child from item `start` on, until it finishes, dies or hangs."""
        with tempfile.TemporaryFile() as output:
            child = _Child({**self.options, "start": start, "skip_kinds": sorted(self.skip_kinds)},
                           output)
            try:
                running, planned, since = None, False, time.monotonic()
                while True:
                    # Until this child has loaded the target, allow for imports; then per check.
                    limit = self.timeout_s if planned else LOAD_TIMEOUT_S
                    try:
                        event = child.next_event(since + limit - time.monotonic())
                    except TimeoutError:
                        child.kill()
                        how = f"timed out after {limit:g} s"
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
            self.died(culprit, how, time.monotonic() - since, output)

    def handle(self, event: dict, running: int | None) -> int | None:
        """Take in one event from the child; returns the index of the item now running."""
        kind = event["event"]
        if kind == "usage_error":
            raise UsageError(event["message"])
        if kind == "plan":
            self.items, self.implementation = event["items"], event["implementation"]
        elif kind == "environment":
            self.environment = event["environment"]
        elif kind == "start":
            return event["index"]
        elif kind == "result":
            self.record(event["index"], CheckResult.from_dict(event["result"]))
            self.crashes_in_a_row = 0
        return None

    def died(self, index: int | None, how: str, duration_s: float, output) -> None:
        """Account for a child that stopped early: an error result for item `index`."""
        if not self.items:
            raise UsageError(f"cannot load {self.options['target']}: the process {how}"
                             + _last_line(output))
        if index is None:  # every item has its result
            return
        item = self.items[index]
        self.record(index, CheckResult(**item, outcome="error", message=f"the process {how}"
                                       + _last_line(output), duration_s=duration_s))
        self.crashes_in_a_row += 1
        if self.crashes_in_a_row >= CRASH_LIMIT:
            self.give_up(item["kind"])

    def give_up(self, kind: str) -> None:
        self.skip_kinds.add(kind)
        self.crashes_in_a_row = 0
        for index, item in enumerate(self.items):
            if item["kind"] == kind and index not in self.done:
                self.record(index, CheckResult(
                    **item, outcome="error",
                    message=f"not run: the process died on {CRASH_LIMIT} {kind} checks in a row"))


class _Child:
    """`python -m rnnbench.suites.child` with a pipe for its events; its prints go to `output`."""

    def __init__(self, options: dict, output):
        read_end, write_end = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rnnbench.suites.child", json.dumps({**options, "fd": write_end})],
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
