"""`rnnbench bench`: time implementations side by side on named workloads.

    rnnbench bench [--impl A,B,...] [--kind K] [--preset P | --workload FILE]
                   [--device cpu|cuda] [--threads N] [--budget S] [--json PATH]

Prints a table (median, IQR, ratio vs native, GFLOP/s, % of the measured GEMM peak) and writes
the rnnbench.bench/1 document with --json (after every workload, so an interrupted run keeps what
it finished). Exit 0 when nothing failed, 1 when any implementation failed on any workload, 2 for
a usage error.
"""
from __future__ import annotations

import sys

from tabulate import tabulate

from rnnbench.benchmarks.workloads import load_workloads, preset_names
from rnnbench.errors import UsageError
from rnnbench.progress import StepCounter
from rnnbench.reference import KINDS
from rnnbench.reports import units
from rnnbench.results import BASELINE, STATUSES, write_json

DEFAULT_PRESET = "quick"
WORKLOAD_KINDS = KINDS + ("implicit",)
# Solver statistics worth a column note (the rest stay in the JSON).
SOLVER_NOTES = ("forward_iterations", "backward_iterations", "unconverged")


def add_arguments(parser) -> None:
    parser.add_argument("--impl", metavar="A,B,...",
                        help="comma-separated targets: registered names, package.module:attr or "
                             "path/to/file.py:attr (default: every registered implementation); "
                             f"{BASELINE} is always included as the baseline for ratios")
    parser.add_argument("--kind", help="only the workloads of this kind (and the kind of a bare "
                                       "constructor target)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", help=f"a named preset: {', '.join(preset_names())} "
                                         f"(default {DEFAULT_PRESET})")
    source.add_argument("--workload", metavar="FILE", help="a workload file in the presets' JSON format")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's current count)")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="timing budget per implementation, workload and metric "
                             "(default: the workload's own)")
    parser.add_argument("--json", metavar="PATH", help="write the results document here")


def run(args) -> int:
    import torch

    from rnnbench.benchmarks.runner import run_benchmarks
    from rnnbench.impls import load, registered

    if args.device not in ("cpu", "cuda"):
        raise UsageError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget must be positive, got {args.budget}")
    if args.kind is not None and args.kind not in WORKLOAD_KINDS:
        raise UsageError(f"unknown kind {args.kind!r}; known kinds: {', '.join(WORKLOAD_KINDS)}")
    workloads = load_workloads(preset=None if args.workload else args.preset or DEFAULT_PRESET,
                               path=args.workload)
    if args.kind:
        workloads = [w for w in workloads if w.kind == args.kind]
        if not workloads:
            raise UsageError(f"no workload of kind {args.kind!r} in {args.workload or args.preset or DEFAULT_PRESET}")
    if args.impl:
        targets = [t.strip() for t in args.impl.split(",") if t.strip()]
        if not targets:
            raise UsageError("--impl: no target given")
        # A bare constructor needs its kind; registered implementations are filtered by workload.
        impls = [load(t, args.kind if ":" in t else None) for t in targets]
        if BASELINE not in {impl.name for impl in impls}:
            impls.insert(0, load(BASELINE))
    else:
        impls = list(registered().values())
    impls = list({impl.name: impl for impl in impls}.values())  # a target named twice runs once

    def checkpoint(doc: dict) -> None:
        if args.json:
            write_json(args.json, doc)

    progress = StepCounter(sys.stderr, log_prefix="bench")
    doc = run_benchmarks(impls, workloads, args.device, threads=args.threads, budget_s=args.budget,
                         progress=progress, checkpoint=checkpoint)
    progress.close()
    checkpoint(doc)
    print(render(doc))
    counts = {status: sum(r["status"] == status for r in doc["results"]) for status in STATUSES}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    print(f"\n{summary}" + (f"; results written to {args.json}" if args.json else ""))
    return 1 if counts["failed"] else 0


def render(doc: dict) -> str:
    """The document as text: the environment, the measured peak, one row per timed (or failed)
    result, then what was not timed and why, one line per implementation and reason."""
    env = doc["environment"]
    peak = doc["peak_gflops"]
    lines = [f"torch {env['torch']} on {env['gpu'] or env['cpu']} ({env['cores']} cores); "
             f"device {doc['device']}, {doc['threads']} thread{'s' * (doc['threads'] != 1)}; measured fp32 GEMM peak "
             + (f"{peak:.1f} GFLOP/s" if peak else "n/a"), ""]
    timed = [r for r in doc["results"] if r["status"] in ("ok", "failed")]
    rows = [[r["workload"], r["metric"], r["impl"], _seconds(r["median_s"]), _iqr(r),
             _number(r["vs_native"], "{:.2f}x"), _number(r["gflops"], "{:.1f}"),
             _number(r["peak_fraction"], "{:.0%}"), _seconds(r["first_call_s"]), _note(r)]
            for r in timed]
    lines.append(tabulate(rows, headers=["workload", "metric", "impl", "median", "IQR",
                                         f"vs {BASELINE}", "GFLOP/s", "% peak", "first call", "note"],
                          disable_numparse=True))
    not_timed: dict[tuple, list[str]] = {}
    for r in doc["results"]:
        if r["status"] not in ("ok", "failed"):
            names = not_timed.setdefault((r["impl"], r["status"], r["reason"]), [])
            if r["workload"] not in names:
                names.append(r["workload"])
    if not_timed:
        lines += ["", "not timed:"]
        lines += [f"  {impl}: {status.replace('_', ' ')}: {reason} ({', '.join(workloads)})"
                  for (impl, status, reason), workloads in not_timed.items()]
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return units.seconds(value) or "-"


def _iqr(result: dict) -> str:
    if result["iqr_s"] is None or not result["median_s"]:
        return "-"
    return f"{result['iqr_s'] / result['median_s']:.1%}"


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _note(result: dict) -> str:
    if result["status"] != "ok":
        return f"{result['status']}: {result['reason']}"
    notes = [f"solver {name} {value}" for name, value in (result["solver"] or {}).items()
             if name in SOLVER_NOTES and value]
    notes.extend(result["warnings"])
    return "; ".join(notes)
