"""`bench` with implementations rnnbench does not ship: timed in a child process, so that nothing
they do costs the others their results.

The built-ins are ours and run in the benchmark process itself. A run that includes anything
else (a user's file or module, a third-party entry point) runs whole in a child process
(`rnnbench.benchmarks.child`, a `rnnbench.child_process.ChildProcess`): every implementation
in it, interleaved round by round as always, so that its times stay comparable with native's.
The child says before every phase which implementation is about to run what (construction, the
pre-check, the first call, the warm-up, each timed sample, the memory call), and sends each
workload's results as soon as the workload is done, so that:

- a phase that sends nothing for `timeout_s` has hung: the child is killed;
- when the child dies or hangs, the implementation whose phase it was fails that workload with
  how the process ended ("the process was killed by SIGSEGV during the first call of forward"),
  the workload is timed again in a fresh child without it, and the run goes on from the next
  workload with every implementation; one that takes its process down on CRASH_LIMIT workloads
  is not run again (its later results fail and say why);
- the results already received (native's among them) are kept whatever happens after.
The child has the conformance children's bounds on memory, output and processes, and its own
copy of torch.compile's cache (`rnnbench.compiler_cache`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.child_process import (ChildProcess, default_memory_limit, exceeded_memory,
                                    memory_limit_text)
from rnnbench.compiler_cache import PrivateCache
from rnnbench.documents import BASELINE, BENCH_SCHEMA
from rnnbench.errors import UsageError
from rnnbench.impls.base import Implementation
from rnnbench.impls.registry import BUILTINS, load

DEFAULT_TIMEOUT_S = 120.0   # a first call may compile
LOAD_TIMEOUT_S = 180.0      # importing torch and the targets in a fresh process
CRASH_LIMIT = 3


def needs_isolation(targets: list[str]) -> bool:
    """Whether any target is something other than a built-in."""
    return any(target not in BUILTINS for target in targets)


def load_targets(targets: list[str], kind: str | None, workloads: list, device: str,
                 first: bool = True) -> dict[str, Implementation]:
    """Target -> Implementation, each implementation once. A bare constructor (a `:` target)
    takes `kind`. The `first` time, native joins first when not among them (the baseline of
    every ratio), and UsageError says when none of the targets can run any of `workloads` on
    `device`; later (a workload timed again without some) the targets are taken as they are.
    UsageError for a target that cannot be loaded."""
    asked = {target: load(target, kind if ":" in target else None) for target in targets}
    impls = dict(asked)
    if first and BASELINE not in {impl.name for impl in asked.values()}:
        impls = {BASELINE: load(BASELINE), **asked}
    named: dict[str, str] = {}
    for target, impl in impls.items():    # a target named twice runs once
        named.setdefault(impl.name, target)
    if first:
        something_to_measure(list(asked.values()), workloads, device)
    return {target: impls[target] for target in named.values()}


def something_to_measure(asked: list[Implementation], workloads: list, device: str) -> None:
    """UsageError when none of the implementations asked for can run any of the workloads."""
    from rnnbench.benchmarks.harness import availability

    reasons = {}
    for impl in asked:
        blocked = [availability(impl, w, device) for w in workloads]
        if not all(blocked):
            return
        reasons.setdefault(blocked[0][1], []).append(impl.name)
    kinds = ", ".join(dict.fromkeys(w.kind for w in workloads))
    raise UsageError(f"nothing to measure on the {kinds} workloads: " + "; ".join(
        f"{', '.join(names)}: {reason}" for reason, names in reasons.items()))


@dataclass(frozen=True)
class _Death:
    """How a child ended early, and what it was doing then."""

    impl: str | None        # the implementation whose phase it was (None: nobody's)
    workload: str | None
    phase: str
    how: str                # "was killed by SIGSEGV", "timed out after 120 s"


def run_isolated(targets: list[str], workloads: list, device: str, *, kind: str | None,
                 threads: int | None, budget_s: float | None, preset: str | None,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 memory_limit: int | None = default_memory_limit(),
                 progress: Callable[[int, int, str], None] | None = None,
                 checkpoint: Callable[[dict], None] | None = None,
                 history: str | None = None) -> dict:
    """`harness.run_benchmarks` over `targets` in child processes (see the module); the
    rnnbench.bench/2 document. `checkpoint(document)` gets the document so far after every
    workload. UsageError when a target cannot be loaded or nothing can be measured."""
    bench = _Bench(targets, workloads, {"device": device, "kind": kind, "threads": threads,
                                        "budget_s": budget_s, "preset": preset,
                                        "history": history},
                   timeout_s, memory_limit, progress, checkpoint)
    bench.run()
    return bench.document()


class _Bench:
    """The parent's side: children started one after another until every workload is done."""

    def __init__(self, targets, workloads, options, timeout_s, memory_limit, progress, checkpoint):
        self.targets, self.workloads, self.options = list(targets), list(workloads), options
        self.timeout_s, self.memory_limit = timeout_s, memory_limit
        self.progress, self.checkpoint = progress, checkpoint
        self.skeleton: dict | None = None   # the first child's document, without results
        self.results: dict[str, list[dict]] = {}    # by workload
        self.names: dict[str, str] = {}     # target -> implementation name, native first
        self.crashes: dict[str, int] = {}
        self.given_up: dict[str, str] = {}  # target -> why it is not run any more

    def run(self) -> None:
        jobs = [(self.workloads, frozenset())]
        first = True
        while jobs:
            workloads, excluded = jobs.pop(0)
            death = self.child(workloads, excluded, first)
            first = False
            if death is None:
                continue
            names = [w.name for w in workloads]
            index = names.index(death.workload) if death.workload in names else 0
            target = self.target_of(death.impl)
            if target is None:
                # No implementation's phase (the machine's check): nobody to blame, no rerun.
                for workload in workloads[index:]:
                    for other in self.names:
                        if other not in excluded and other not in self.given_up:
                            self.fail(other, workload, f"not run: the benchmark process "
                                                       f"{death.how} during {death.phase}")
                continue
            self.fail(target, workloads[index], f"the process {death.how} during {death.phase}")
            self.crashes[target] = self.crashes.get(target, 0) + 1
            if self.crashes[target] >= CRASH_LIMIT:
                self.given_up[target] = (f"not run: the process ended on {CRASH_LIMIT} "
                                         f"workloads while it ran (last: {death.how})")
            jobs[:0] = [([workloads[index]], excluded | {target})] + (
                [(workloads[index + 1:], frozenset())] if index + 1 < len(workloads) else [])

    def child(self, workloads: list, excluded: frozenset, first: bool) -> _Death | None:
        """One child over `workloads` without the `excluded` targets, until it finishes (None),
        dies or hangs. The first child is given the targets asked for; later ones every
        target the first planned (native included) but those excluded or given up."""
        targets = [t for t in (self.targets if first else self.names)
                   if t not in excluded and t not in self.given_up]
        if not targets:
            return None
        options = {**self.options, "targets": targets, "first": first,
                   "workloads": [w.to_dict() for w in workloads]}
        with PrivateCache() as cache, ChildProcess("rnnbench.benchmarks.child", options,
                                                   memory_limit=self.memory_limit,
                                                   env=cache.env()) as child:
            planned, since = False, time.monotonic()
            last_results_at = None  # what the child compiled before this is whole
            doing = (None, None, "loading the implementations")
            while True:
                # --timeout bounds what is not ours; the built-ins' phases (the profiler's
                # first call, on a busy machine) and the machine's check get the load's limit.
                ours = not planned or doing[0] is None or self.target_of(doing[0]) in BUILTINS
                limit = max(self.timeout_s, LOAD_TIMEOUT_S) if ours else self.timeout_s
                try:
                    event = child.next_event(since + limit - time.monotonic())
                except TimeoutError:
                    child.kill()
                    how = f"timed out after {limit:.0f} s"
                    break
                if event is None:
                    how = child.finish()
                    break
                since = time.monotonic()
                kind = event["event"]
                if kind == "usage_error":
                    raise UsageError(event["message"])
                if kind == "plan":
                    planned = True
                    for entry in event["impls"]:
                        self.names.setdefault(entry["target"], entry["name"])
                elif kind == "phase":
                    doing = (event["impl"], event["workload"], event["phase"])
                elif kind == "progress" and self.progress:
                    self.progress(event["done"], event["total"], event["label"])
                elif kind == "results":
                    self.take(event["document"], event["results"])
                    last_results_at = time.time()
                elif kind == "done":
                    child.finish()
                    cache.merge(child.returncode == 0, last_results_at)
                    return None
            last = child.last_line()
            cache.merge(False, last_results_at)
        if self.memory_limit and exceeded_memory(last):
            how = f"exceeded the memory limit ({memory_limit_text(self.memory_limit)}) and {how}"
        how += f"; last output: {last}" if last else ""
        if not planned:
            raise UsageError(f"cannot load {', '.join(targets)}: the process {how}")
        return _Death(*doing, how)

    def target_of(self, name: str | None) -> str | None:
        """The target that loaded as the implementation `name`."""
        return next((t for t, named in self.names.items() if named == name), None)

    def take(self, skeleton: dict, results: list[dict]) -> None:
        """A workload's results from a child; the document so far goes to the checkpoint."""
        self.skeleton = self.skeleton or skeleton
        for result in results:
            reason = result.get("reason") or ""
            if result.get("status") == "failed" and self.memory_limit and exceeded_memory(reason):
                result["reason"] = (f"exceeded the memory limit "
                                    f"({memory_limit_text(self.memory_limit)}): {reason}")
            self.results.setdefault(result["workload"], []).append(result)
        if self.checkpoint:
            self.checkpoint(self.document())

    def fail(self, target: str, workload, reason: str) -> None:
        """Every metric of `workload` failed for `target`, for `reason`."""
        from rnnbench.benchmarks.harness import unmeasured

        for metric in workload.metrics:
            result = unmeasured(self.names[target], workload,
                                workload.device or self.options["device"], metric)
            result.status, result.reason = "failed", reason
            self.results.setdefault(workload.name, []).append(result.to_json())

    def document(self) -> dict:
        """The rnnbench.bench/2 document of every result so far: by workload, then in the
        order of the implementations, then of the workload's metrics; an implementation given
        up fails the workloads it was not run on, saying why."""
        for target, reason in self.given_up.items():
            for workload in self.workloads:
                done = {r["impl"] for r in self.results.get(workload.name, [])}
                if workload.name in self.results and self.names[target] not in done:
                    self.fail(target, workload, reason)
        order = list(self.names.values())
        results = []
        for workload in self.workloads:
            rank = {name: i for i, name in enumerate(order)}
            results += sorted(self.results.get(workload.name, []),
                              key=lambda r: (rank.get(r["impl"], len(order)),
                                             list(workload.metrics).index(r["metric"])))
        return {**(self.skeleton or self.empty()), "results": results,
                "workloads": [w.to_dict() for w in self.workloads]}

    def empty(self) -> dict:
        """A document's fields before any workload finished (no machine measured)."""
        import torch

        from rnnbench.benchmarks.harness import CONVENTIONS
        from rnnbench.environment import capture

        return {"schema": BENCH_SCHEMA, "environment": capture(),
                "device": self.options["device"],
                "threads": self.options["threads"] or torch.get_num_threads(),
                "preset": self.options["preset"], "budget_s": self.options["budget_s"],
                "peak_gflops": None, "machine_check": None, "peaks": [],
                "conventions": CONVENTIONS}
