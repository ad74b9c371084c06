"""`rnnbench coldstart`: first-call time against sequence length, each in a fresh process.

    rnnbench coldstart [--impl A,B,...] [--preset P | --workload FILE] [--name WORKLOAD]
                       [--steps 25,100,1000] [--threads N] [--json PATH]

One workload (by default the preset's first) is run at each sequence length; see
`rnnbench.benchmarks.cold_start` for what is measured. Exit 0 when every child gave a time, 1 when
any failed, 2 for a usage error.
"""
from __future__ import annotations

from tabulate import tabulate

from rnnbench.benchmarks.cold_start import STEPS, cold_start, constructor_kind
from rnnbench.benchmarks.workloads import load_workloads, preset_names
from rnnbench.errors import UsageError
from rnnbench.reports import units
from rnnbench.documents import require_writable, write_json
from rnnbench.wording import counted

DEFAULT_IMPLS = "compile"
DEFAULT_PRESET = "goals"
SCHEMA = "rnnbench.coldstart/1"

EXAMPLES = """\
examples:
  rnnbench coldstart                                    compile on goals' first workload
  rnnbench coldstart --impl compile,torchscript --steps 25,100,1000
  rnnbench coldstart --impl torchscript --threads 1 --json out/coldstart.json

exit codes: 0 every child gave a time, 1 a child failed, 2 a usage error (one line)
"""

def add_arguments(parser) -> None:
    parser.epilog = EXAMPLES
    parser.add_argument("--impl", default=DEFAULT_IMPLS, metavar="A,B,...",
                        help="comma-separated registered implementations, package.module:attr or "
                             "path/to/file.py:attr (a bare class implements the workload's kind; "
                             f"default {DEFAULT_IMPLS})")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", help=f"a named preset: {', '.join(preset_names())} "
                                         f"(default {DEFAULT_PRESET})")
    source.add_argument("--workload", metavar="FILE", help="a workload file in the presets' JSON format")
    parser.add_argument("--name", metavar="WORKLOAD", help="which workload of the file or preset "
                                                          "(default its first)")
    parser.add_argument("--steps", default=",".join(map(str, STEPS)), metavar="T,T,...",
                        help=f"sequence lengths (default {','.join(map(str, STEPS))})")
    parser.add_argument("--threads", type=int, help="torch threads (default: the workload's, "
                                                    "else torch's current count)")
    parser.add_argument("--json", metavar="PATH", help="write the results here")


def run(args) -> int:
    import torch

    from rnnbench.commands.bench import interrupted_after, validate_threads
    from rnnbench.impls import load

    if args.json is not None:
        require_writable(args.json, "--json")
    steps = _lengths(args.steps)
    validate_threads(args.threads)
    workload = _workload(args)
    threads = args.threads or workload.threads or torch.get_num_threads()
    targets = [t.strip() for t in args.impl.split(",") if t.strip()]
    if not targets:
        raise UsageError("--impl: no implementation given")
    for target in targets:  # a wrong name or kind fails here, before any child runs
        if workload.kind not in load(target, constructor_kind(target, workload)).kinds:
            raise UsageError(f"{target} provides no {workload.kind!r}")
    results: list[dict] = []
    finished: list[dict] = []  # what an interrupted run shows

    def checkpoint(current: list[dict], complete: bool = False) -> None:
        # After every result, marked interrupted until the run is complete, so that a run cut
        # short keeps what finished and says so.
        finished[:] = results + current
        if args.json:
            write_json(args.json, {"schema": SCHEMA, "workload": workload.to_dict(),
                                   "results": finished, "interrupted": not complete})

    try:
        for target in targets:
            results += cold_start(target, workload, steps, threads, checkpoint=checkpoint)
    except KeyboardInterrupt:
        if finished:
            print(render(finished), flush=True)
            print(interrupted_after(counted(len(finished), "result"), args.json), flush=True)
        raise
    print(render(results))
    checkpoint([], complete=True)  # after the printing: a full disk loses nothing shown
    return 1 if any(r["status"] != "ok" for r in results) else 0


def _lengths(text: str) -> list[int]:
    try:
        steps = [int(part) for part in text.split(",")]  # an empty part is a typo, not nothing
    except ValueError:
        raise UsageError(f"--steps must be comma-separated whole numbers, got {text!r}") from None
    if not steps or min(steps) < 1:
        raise UsageError(f"--steps must list lengths of at least 1, got {text!r}")
    return steps


def _workload(args):
    workloads = load_workloads(preset=None if args.workload else args.preset or DEFAULT_PRESET,
                               path=args.workload)
    if args.name is None:
        workload = workloads[0]
    else:
        named = [w for w in workloads if w.name == args.name]
        if not named:
            raise UsageError(f"no workload named {args.name!r} (known: "
                             f"{', '.join(w.name for w in workloads)})")
        workload = named[0]
    if not workload.spec.steps_matter:
        raise UsageError(f"{workload.name} is a {workload.kind}: it takes one step, so it has "
                         "no sequence length")
    return workload


def render(results: list[dict]) -> str:
    """One row per (implementation, metric, length)."""
    rows = [[r["impl"], r["metric"], r["steps"], units.seconds(r["first_call_s"]) or "-",
             units.seconds(r["second_call_s"]) or "-",
             "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
             "" if r["status"] == "ok" else f"{r['status']}: {r['reason']}"]
            for r in sorted(results, key=lambda r: (r["impl"], r["metric"], r["steps"]))]
    return tabulate(rows, headers=["impl", "metric", "steps", "first call", "second call",
                                   "vs shortest", "note"], disable_numparse=True)
