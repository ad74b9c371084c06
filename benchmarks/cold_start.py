"""Cold start: the first call of a fresh module in a fresh process, against sequence length.

`rnnbench bench` records each metric's first call in the benchmark process, where graphs compiled
for an earlier workload are reused. Here every (implementation, steps, metric) runs in a new Python
process whose compiler caches are empty (a fresh TORCHINDUCTOR_CACHE_DIR), so its first call pays
what a new user's does: tracing, code generation and C++ compilation. The second call on the same
module is timed as well; the difference is the one-time cost. Extensions built once per machine
(fused's kernels, in TORCH_EXTENSIONS_DIR) are not rebuilt: that cost is not per process.

The question it answers is the one torch.compile users ask: does compiling a longer sequence cost
more? `ratio` is a first call's time over the first call at the shortest length, per metric.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

from rnnbench.benchmarks.workloads import Workload
from rnnbench.errors import one_line

STEPS = (25, 100, 1000)
TIMEOUT_S = 600.0


def cold_start(target: str, workload: Workload, steps: Sequence[int], threads: int,
               timeout_s: float = TIMEOUT_S,
               checkpoint: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """One result per (steps, metric of `workload`): first_call_s, second_call_s and the ratio
    of first_call_s to the shortest length's. A child that fails or times out gives a result
    with status "failed" and the reason; the other lengths still run. `checkpoint` gets the
    results so far after each one, so an interrupted run can keep them."""
    results = []
    for length in sorted(steps):
        sized = dataclasses.replace(workload, steps=length, name=f"{workload.name}-t{length}")
        for metric in workload.metrics:
            result = {"impl": target, "workload": workload.name, "steps": length, "metric": metric,
                      "threads": threads, "status": "ok", "reason": None,
                      "first_call_s": None, "second_call_s": None, "ratio": None}
            try:
                result.update(_in_child(target, sized, metric, threads, timeout_s))
            except ChildFailed as exc:
                result.update(status="failed", reason=str(exc))
            results.append(result)
            _ratios(results)
            if checkpoint:
                checkpoint(results)
    return results


class ChildFailed(Exception):
    """The child process raised, crashed or ran out of time; the message says which."""


def _in_child(target: str, workload: Workload, metric: str, threads: int, timeout_s: float) -> dict:
    request = json.dumps({"target": target, "workload": workload.to_dict(), "metric": metric,
                          "threads": threads})
    with tempfile.TemporaryDirectory(prefix="rnnbench-cold-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        try:
            done = subprocess.run([sys.executable, "-m", __name__, request], env=env,
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ChildFailed(f"no result within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise ChildFailed(lines[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def constructor_kind(target: str, workload: Workload) -> str | None:
    """The kind a bare constructor named as `target` implements: the workload's (a target
    with a ":" may be one); None for a registered name."""
    return workload.kind if ":" in target else None


def _ratios(results: list[dict]) -> None:
    first = {}
    for result in results:  # sorted by steps: the first ok result per metric is the shortest
        if result["status"] == "ok":
            base = first.setdefault((result["impl"], result["metric"]), result["first_call_s"])
            result["ratio"] = result["first_call_s"] / base


def _child(request: dict) -> dict:
    """In the fresh process: build the module, time its first and second call of the metric."""
    import torch

    from rnnbench.benchmarks.tasks import build_task
    from rnnbench.benchmarks.timing import measure, synchronizer
    from rnnbench.benchmarks.workloads import workload_from_dict
    from rnnbench.impls import load

    torch.set_num_threads(request["threads"])
    workload = workload_from_dict(request["workload"])
    impl = load(request["target"], constructor_kind(request["target"], workload))
    reason = impl.unavailable_reason()
    if reason:
        raise RuntimeError(f"{impl.name} is unavailable: {reason}")
    call = build_task(impl, workload, workload.device or "cpu").steps[request["metric"]]
    sync = synchronizer(workload.device or "cpu")
    first = measure(call, sync)
    return {"first_call_s": first, "second_call_s": measure(call, sync)}


if __name__ == "__main__":
    try:
        print(json.dumps(_child(json.loads(sys.argv[1]))))
    except Exception as exc:  # the parent reports the last stderr line as the reason
        print(one_line(exc), file=sys.stderr)
        sys.exit(1)
