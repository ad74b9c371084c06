"""The child process of `rnnbench.benchmarks.isolation.run_isolated`: load the targets, time
them on the workloads, and report as events.

Started as a `rnnbench.child_process.ChildProcess`, which calls `main(options, send)`. Events:
{"event": "usage_error", "message"} | {"event": "plan", "impls": [{"target", "name"}]} |
{"event": "phase", "impl", "workload", "phase"} (before every phase of one implementation's work:
see `harness.run_benchmarks`' `watch`) | {"event": "progress", "done", "total", "label"} |
{"event": "results", "document", "results"} (after each workload: the document without its
results, and the results that workload added) | {"event": "done"}.
"""
from __future__ import annotations

from rnnbench.errors import UsageError


def main(options: dict, send) -> int:
    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.isolation import load_targets
    from rnnbench.benchmarks.workloads import workload_from_dict

    workloads = [workload_from_dict(w) for w in options["workloads"]]
    try:
        impls = load_targets(options["targets"], options["kind"], workloads, options["device"],
                             first=options["first"])
    except UsageError as exc:
        send("usage_error", message=str(exc))
        return 2
    send("plan", impls=[{"target": target, "name": impl.name}
                        for target, impl in impls.items()])
    sent = 0

    def checkpoint(doc: dict) -> None:
        nonlocal sent
        send("results", document={k: v for k, v in doc.items() if k != "results"},
             results=doc["results"][sent:])
        sent = len(doc["results"])

    run_benchmarks(list(impls.values()), workloads, options["device"], threads=options["threads"],
                   budget_s=options["budget_s"], preset=options["preset"], checkpoint=checkpoint,
                   history=options.get("history"),
                   progress=lambda done, total, label: send("progress", done=done, total=total,
                                                            label=label),
                   watch=lambda impl, workload, phase: send("phase", impl=impl, workload=workload,
                                                            phase=phase))
    send("done")
    return 0
