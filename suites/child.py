"""The child process of `rnnbench.suites.isolation.conform`: load the target, run the planned
checks from a given index on, and report each as an event.

Started by `rnnbench.suites.isolation` as a `rnnbench.child_process.ChildProcess`, which calls
`main(options, send)`. Events: {"event": "usage_error", "message"} | {"event": "calibration",
"seconds"} | {"event": "plan", "implementation", "items", "known_failures", "lacking"} | {"event":
"environment", "environment"} | {"event": "start", "index"} | {"event": "result", "index",
"result"} | {"event": "done"}. What the implementation prints goes to stdout and stderr, which the
parent keeps apart from the events.
"""
from __future__ import annotations

from rnnbench.errors import UsageError
from rnnbench.impls import load
from rnnbench.suites.fuzz import announce_cases, case_from_json
from rnnbench.suites.runner import (configured, known_lacking, plan, require_available, run_item,
                                    validate_device)


def main(options: dict, send) -> int:
    kinds = options["kinds"]
    announce_cases()
    if options.get("threads"):
        import torch

        torch.set_num_threads(options["threads"])
    if options.get("calibrate"):
        from rnnbench.suites.native_times import calibrate

        send("calibration", seconds=calibrate())
    try:
        validate_device(options["device"])
        impl = configured(load(options["target"], kinds[0] if len(kinds) == 1 else None,
                               kinds_given=tuple(kinds)),
                          options.get("param_map"), options.get("known_failures"),
                          options.get("unsupported", ()))
        require_available(impl)
        case = options.get("case")
        items = plan(impl, kinds, options["quick"], options.get("checks"), options.get("fuzz"),
                     None if case is None else case_from_json(case))
    except (UsageError, ValueError) as exc:
        send("usage_error", message=str(exc))
        return 2
    send("plan", implementation=impl.name, items=[item.describe() for item in items],
         known_failures=dict(impl.known_failures),
         lacking={index: result.to_json() for index, result
                  in known_lacking(impl, items, options["device"]).items()})
    if options["start"] == 0:
        from rnnbench.environment import capture

        send("environment", environment=capture())
    for index in range(options["start"], len(items)):
        if items[index].kind in options["skip_kinds"]:
            continue
        send("start", index=index)
        result = run_item(impl, items[index], options["device"], options["seed"])
        send("result", index=index, result=result.to_json())
    send("done")
    return 0
