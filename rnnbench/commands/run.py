"""`rnnbench run [--out DIR] [--quick-conformance]`: the main job, on an embedded default.

Three stages, each writing its results as soon as it is done, so an interrupted run keeps what
finished: the conformance suite on every available built-in implementation
(`DIR/conformance-<impl>.json`), the `quick` benchmark preset over all of them (`DIR/bench.json`,
rewritten after every workload), and the report over those files (`DIR/report.md`,
`DIR/index.html`). A one-screen summary closes the run. Exit 1 when any conformance check failed
or errored or any benchmark failed, 0 otherwise.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from tabulate import tabulate

from rnnbench.errors import UsageError
from rnnbench.progress import StepCounter, tally
from rnnbench.results import BASELINE, CONFORMANCE_SCHEMA, OUTCOMES, write_json

DEFAULT_OUT = Path("reports") / "latest"     # git-ignored
PRESET = "quick"


def add_arguments(parser) -> None:
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help=f"where results and the report go (default {DEFAULT_OUT})")
    parser.add_argument("--quick-conformance", action="store_true",
                        help="the conformance suite's quick case list (seconds, not a minute)")


def run(args) -> int:
    from rnnbench.impls import BUILTINS, registered

    started = time.perf_counter()
    out = Path(args.out)
    impls = registered()
    builtins = {name: impls[name] for name in BUILTINS}
    skipped = {name: reason for name, impl in builtins.items()
               if (reason := impl.unavailable_reason())}
    # A live counter on a terminal; logs (CI) get the stage lines only.
    progress = StepCounter(sys.stdout)
    files = [_conformance_stage(name, out, args.quick_conformance, progress)
             for name in builtins if name not in skipped]
    files.append(_bench_stage(list(builtins.values()), out, progress))
    print("report ...", flush=True)
    from rnnbench.reports.load import load_inputs
    from rnnbench.reports.render import render_report
    results = load_inputs(files)
    written = render_report(results, out)
    print(summary(results, skipped, written, time.perf_counter() - started))
    failed = (any(c.outcome in ("failed", "error") for c in results.checks)
              or any(s.error for s in results.sources)
              or any(t.status == "failed" for t in results.timings))
    return 1 if failed else 0


def _conformance_stage(name: str, out: Path, quick: bool, progress: StepCounter) -> Path:
    from rnnbench.environment import capture
    from rnnbench.suites import conform

    if not progress.live:     # a terminal gets a live counter instead
        print(f"conformance {name} ...", flush=True)
    started = time.perf_counter()
    try:
        doc = conform(name, quick=quick, progress=lambda result, done, total:
                      progress(done, total, f"{name} {result.check}"))
    except UsageError as exc:
        # A built-in that cannot even be checked must not cost the other stages their results:
        # the document says so ("error"), the report shows it and the run exits 1.
        doc = {"schema": CONFORMANCE_SCHEMA, "target": name, "environment": capture(),
               "summary": {}, "results": [], "error": str(exc)}
    path = out / f"conformance-{name}.json"
    write_json(path, doc)
    if doc.get("interrupted"):      # conform() catches Ctrl-C to keep its results; stop here
        raise KeyboardInterrupt
    progress.close()
    said = f"could not run: {doc['error']}" if "error" in doc else tally(doc.get("summary", {}))
    print(f"conformance {name}: {said or 'no checks ran'} "
          f"({time.perf_counter() - started:.1f} s)", flush=True)
    return path


def _bench_stage(impls: list, out: Path, progress: StepCounter) -> Path:
    from rnnbench.benchmarks.runner import run_benchmarks
    from rnnbench.benchmarks.workloads import load_workloads

    path = out / "bench.json"
    workloads = load_workloads(preset=PRESET)
    print(f"benchmarks: preset {PRESET}, {len(workloads)} workloads x {len(impls)} "
          "implementations ...", flush=True)
    started = time.perf_counter()
    doc = run_benchmarks(impls, workloads, progress=progress,
                         checkpoint=lambda partial: write_json(path, partial))
    write_json(path, doc)
    progress.close()
    print(f"benchmarks done ({time.perf_counter() - started:.1f} s)", flush=True)
    return path


def summary(results, skipped: dict[str, str], written: dict, seconds: float) -> str:
    """The closing screen: conformance verdicts, speed-ups over native, where the report is."""
    from rnnbench.reports import analysis

    lines = [f"\nrnnbench run: done in {seconds:.0f} s"]
    counts = analysis.outcome_counts(results.checks, lambda c: (c.impl,))
    rows = []
    for source in (s for s in results.sources if s.format == "conformance"):
        n = counts.get((source.target,))
        verdict = (f"could not run: {source.error}" if source.error else
                   "no checks ran" if n is None else
                   "DOES NOT CONFORM" if n["failed"] + n["error"] else "conforms")
        rows.append([source.target, *(n[o] if n else 0 for o in OUTCOMES), verdict])
    rows += [[name, *("" for _ in OUTCOMES), f"skipped: {reason}"] for name, reason in skipped.items()]
    headers = ["conformance", *(o.replace("_", " ") for o in OUTCOMES), "verdict"]
    lines += ["", tabulate(rows, headers)]
    lines += ["", _speedup_table(results.timings)]
    failed = [t for t in results.timings if t.status == "failed"]
    for t in failed[:5]:
        lines.append(f"benchmark failed: {t.impl} {t.workload} {t.metric}: {t.reason}")
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more failed benchmarks (see the report)")
    lines += ["", f"report: {written['index.html']}", f"        {written['report.md']}"]
    return "\n".join(lines)


def _speedup_table(timings) -> str:
    """Per implementation and metric: the geometric mean speed-up over native across workloads."""
    from rnnbench.reports import analysis

    table = analysis.speedups(timings)
    metrics = list(dict.fromkeys(t.metric for t in timings))
    impls = list(dict.fromkeys(t.impl for t in timings))
    cells = {}
    for t in timings:
        speedup = analysis.speedup_of(table, t)
        if speedup is not None:
            cells.setdefault((t.impl, t.metric), []).append(speedup)
    rows = []
    for impl in impls:
        row = [impl]
        for metric in metrics:
            values = cells.get((impl, metric))
            row.append(f"{math.exp(sum(map(math.log, values)) / len(values)):.2f}x "
                       f"({len(values)})" if values else "")
        row.append(sum(t.status == "ok" for t in timings if t.impl == impl))
        row.append(sum(t.status != "ok" for t in timings if t.impl == impl))
        rows.append(row)
    headers = ["implementation", *metrics, "timed", "not timed"]
    return (f"benchmarks ({PRESET}): speed-up over {BASELINE}, geometric mean over "
            f"workloads (count)\n{tabulate(rows, headers)}")
