"""`rnnbench run [--out DIR] [--full]`: the main job, on an embedded default.

Three stages, each writing its results as soon as it is done, so an interrupted run keeps what
finished: the conformance suite on every available built-in implementation
(`DIR/conformance-<impl>.json`; the suite's quick case list, the full one with --full), the
`quick` benchmark preset over all of them (`DIR/bench.json`, rewritten after every workload),
and the report over those files (`DIR/report.md`, `DIR/index.html`). A one-screen summary closes
the run. Exit 1 when any conformance check failed or errored or any benchmark failed, 0
otherwise, 2 when DIR cannot be written (said before any work).

The stages share the machine where they can: conformance runs in child processes, WORKERS at a
time, each implementation's kinds split between two of them (KIND_GROUPS); the implementations'
availability (fused builds its kernels) is found out beside them; the benchmark stage builds its
modules, compares each with the reference and makes every first call (where torch.compile
compiles) while conformance still runs (its first-call times are taken beside it), and waits
for it to finish before it measures the machine and times anything.
"""
from __future__ import annotations

import math
import sys
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tabulate import tabulate

from rnnbench.benchmarks.result import BenchResult, vs_native
from rnnbench.errors import UsageError
from rnnbench.progress import LiveLine, tally
from rnnbench.documents import BASELINE, CONFORMANCE_SCHEMA, OUTCOMES, require_writable, write_json

DEFAULT_OUT = Path("reports") / "latest"     # git-ignored
PRESET = "quick"
WIDTH = 100     # the summary fits in this many columns
# Conformance children at a time: one per core of the 2-core machines this is sized for; each
# child is a single busy thread most of the time.
WORKERS = 2
# An implementation's kinds are checked by two children at once, one per group, so that one slow
# implementation keeps both cores busy: compile builds a graph per configuration, dtype and grad
# mode, and with empty caches its gru checks take about as long as its rnn and lstm checks
# together (its cells run eagerly and cost little). Kinds in no group join the last.
KIND_GROUPS = (("rnn", "lstm"), ("rnn_cell", "lstm_cell", "gru_cell", "gru"))

EXAMPLES = f"""\
examples:
  rnnbench run                      every built-in's conformance, benchmarks, a report:
                                    {DEFAULT_OUT}/index.html
  rnnbench run --out results/today  the same into another folder
  rnnbench run --full               the conformance suite's full case list

exit codes: 0 all conform and nothing failed, 1 a check failed or errored or a benchmark failed,
2 a usage error (one line, before any work)
"""

def add_arguments(parser) -> None:
    parser.epilog = EXAMPLES
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help=f"where results and the report go (default {DEFAULT_OUT})")
    parser.add_argument("--full", action="store_true",
                        help="the conformance suite's full case list (the default is its quick "
                             "list: every check, fewer configurations)")


def run(args) -> int:
    from rnnbench.impls import BUILTINS, registered

    started = time.perf_counter()
    out = Path(args.out)
    require_writable(out, "--out", folder=True)
    impls = registered()
    builtins = {name: impls[name] for name in BUILTINS}
    progress = StageProgress(sys.stdout)
    stop = threading.Event()
    slots = threading.Semaphore(WORKERS)
    finding_out = ThreadPoolExecutor(max_workers=len(builtins))
    checking = ThreadPoolExecutor(max_workers=len(builtins))
    try:
        reasons = {name: finding_out.submit(impl.unavailable_reason) for name, impl in builtins.items()}
        conformance = {name: checking.submit(_conformance_stage, impl, reasons[name], out,
                                             not args.full, progress, stop, slots)
                       for name, impl in builtins.items()}
        skipped = {name: reason for name, future in reasons.items() if (reason := future.result())}
        bench = _bench_stage(list(builtins.values()), out, progress,
                             wait=lambda: _finished(conformance))
        files = [path for path in _finished(conformance).values() if path is not None]
    except BaseException:
        stop.set()      # the conformance children stop after their current check
        raise
    finally:
        finding_out.shutdown(cancel_futures=True)
        checking.shutdown(cancel_futures=True)
    progress.print("report ...")
    from rnnbench.reports.load import load_inputs
    from rnnbench.reports.render import render_report
    results = load_inputs([*files, bench[0]])
    written = render_report(results, out)
    print(summary(results, skipped, written, bench[1], time.perf_counter() - started))
    failed = (any(c.outcome in ("failed", "error") for c in results.checks)
              or any(s.error for s in results.sources)
              or any(t.status == "failed" for t in results.timings))
    return 1 if failed else 0


def _finished(stages: dict[str, Future]) -> dict[str, Path | None]:
    """Wait for every stage; their results (a stage's exception is raised here)."""
    return {name: future.result() for name, future in stages.items()}


class StageProgress:
    """Progress of stages running at once: on a terminal one line with every running stage's
    counter; everywhere the lines that stay (a stage started or finished)."""

    def __init__(self, stream):
        self.line = LiveLine(stream)
        self.lock = threading.Lock()
        self.running: dict[str, str] = {}

    @property
    def live(self) -> bool:
        return self.line.live

    def update(self, stage: str, text: str) -> None:
        with self.lock:
            self.running[stage] = text
            self.line.show(" | ".join(self.running.values()))

    def done(self, stage: str) -> None:
        """The stage's counter leaves the line."""
        with self.lock:
            self.running.pop(stage, None)
            self.line.show(" | ".join(self.running.values()))

    def print(self, text: str) -> None:
        with self.lock:
            self.line.print("\n".join(_fill(text)))

    def counter(self, stage: str):
        """A `progress(done, total, label)` callback drawing this stage's counter."""
        return lambda done, total, label: self.update(stage, f"[{done}/{total}] {label}")


def kind_groups(kinds) -> list[list[str]]:
    """`kinds` split by KIND_GROUPS (the last group takes the kinds in none); no empty group."""
    grouped = [[kind for kind in kinds if kind in group] for group in KIND_GROUPS]
    grouped[-1] += [kind for kind in kinds if not any(kind in group for group in KIND_GROUPS)]
    return [group for group in grouped if group]


def _conformance_stage(impl, reason: Future, out: Path, quick: bool, progress: StageProgress,
                       stop: threading.Event, slots: threading.Semaphore) -> Path | None:
    """The conformance document of one built-in, its kind groups checked at once, written to
    DIR; None when it is unavailable."""
    name = impl.name
    if reason.result():
        return None
    started = time.perf_counter()
    if not progress.live:     # a terminal gets a live counter instead
        progress.print(f"conformance {name} ...")
    groups = kind_groups(impl.kinds)
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        docs = list(pool.map(lambda numbered: _conformance_group(
            name, numbered[1], quick, progress.counter(f"{name} {numbered[0] + 1}/{len(groups)}"),
            stop, slots), enumerate(groups)))
    doc = merged(docs)
    path = out / f"conformance-{name}.json"
    write_json(path, doc)
    if doc.get("interrupted"):
        raise KeyboardInterrupt
    said = f"could not run: {doc['error']}" if "error" in doc else tally(doc.get("summary", {}))
    for number in range(len(groups)):
        progress.done(f"{name} {number + 1}/{len(groups)}")
    progress.print(f"conformance {name}: {said or 'no checks ran'} "
                   f"({time.perf_counter() - started:.1f} s)")
    return path


def _conformance_group(name: str, kinds: list[str], quick: bool, counter, stop: threading.Event,
                       slots: threading.Semaphore) -> dict:
    """One child's conformance document: `kinds` of `name`, once a slot is free."""
    from rnnbench.environment import capture
    from rnnbench.suites import conform

    def report(result, done: int, total: int) -> None:
        if stop.is_set():     # conform() keeps what it has and returns, marked interrupted
            raise KeyboardInterrupt
        counter(done, total, f"{name} {result.check}")

    unchecked = {"schema": CONFORMANCE_SCHEMA, "target": name, "environment": capture(),
                 "kinds": kinds, "summary": {}, "results": []}
    with slots:
        if stop.is_set():
            return {**unchecked, "interrupted": True}
        try:
            # No run budget: the built-ins are ours, and compile's first run builds its graphs
            # for minutes; a budget bounds implementations that misbehave.
            return conform(name, kinds=kinds, quick=quick, progress=report, budget_s=None)
        except UsageError as exc:
            # A built-in that cannot even be checked must not cost the other stages their
            # results: the document says so ("error"), the report shows it and the run exits 1.
            return {**unchecked, "error": str(exc)}


def merged(docs: list[dict]) -> dict:
    """One implementation's conformance document from its kind groups' documents: the first
    error if any, else the results of all, in the spec's order of kinds, counted again."""
    from rnnbench.impls.registry import KINDS

    failed = next((doc for doc in docs if "error" in doc), None)
    if failed is not None or len(docs) == 1:
        return failed or docs[0]
    results = sorted((r for doc in docs for r in doc["results"]),
                     key=lambda r: list(KINDS).index(r["kind"]) if r.get("kind") in KINDS else len(KINDS))
    counts = {outcome: sum(r.get("outcome") == outcome for r in results) for outcome in OUTCOMES}
    return {**docs[0], "kinds": [kind for doc in docs for kind in doc.get("kinds", [])],
            "interrupted": any(doc.get("interrupted") for doc in docs),
            "duration_s": max(doc.get("duration_s", 0.0) for doc in docs),
            "not_supported_features": {feature: reason for doc in docs for feature, reason
                                       in doc.get("not_supported_features", {}).items()},
            "param_map": next((doc["param_map"] for doc in docs if doc.get("param_map")), {}),
            "summary": counts, "results": results}


def _bench_stage(impls: list, out: Path, progress: StageProgress, wait) -> tuple[Path, dict]:
    """The quick preset over every built-in; `wait()` is called once the modules are built,
    checked and called once, before anything is timed."""
    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.workloads import load_workloads

    path = out / "bench.json"
    workloads = load_workloads(preset=PRESET)
    progress.print(f"benchmarks: preset {PRESET}, {len(workloads)} workloads x {len(impls)} "
                   "implementations ...")
    started = time.perf_counter()

    def waiting() -> None:
        progress.update("bench", "benchmarks: waiting for conformance to finish")
        wait()

    doc = run_benchmarks(impls, workloads, preset=PRESET, progress=progress.counter("bench"),
                         checkpoint=lambda partial: write_json(path, partial), wait=waiting)
    write_json(path, doc)
    progress.done("bench")
    progress.print(f"benchmarks done ({time.perf_counter() - started:.1f} s)")
    return path, doc


def summary(results, skipped: dict[str, str], written: dict, bench: dict, seconds: float) -> str:
    """The closing screen: a busy machine's warning, conformance verdicts, speed-ups over
    native (within noise, noisy and non-conforming said as such), where the report is."""
    from rnnbench.benchmarks.machine import busy_line
    from rnnbench.reports import analysis

    busy = busy_line(bench.get("machine_check"))
    lines = [""] + (_fill(busy) if busy else []) + [f"rnnbench run: done in {seconds:.0f} s"]
    counts = analysis.outcome_counts(results.checks, lambda c: (c.impl,))
    rows = []
    reasons = {}    # said under the table, where a long reason has room
    for source in (s for s in results.sources if s.format == "conformance"):
        n = counts.get((source.target,))
        verdict = ("could not run" if source.error else "no checks ran" if n is None else
                   "DOES NOT CONFORM" if n["failed"] + n["error"] else "conforms")
        rows.append([source.target, *(n[o] if n else 0 for o in OUTCOMES), verdict])
        if source.error:
            reasons[source.target] = f"could not run: {source.error}"
    rows += [[name, *("" for _ in OUTCOMES), "skipped (unavailable)"] for name in skipped]
    headers = ["conformance", *(o.replace("_", " ") for o in OUTCOMES), "verdict"]
    lines += ["", tabulate(rows, headers)]
    for name, reason in {**reasons, **skipped}.items():
        lines += _fill(f"{name}: {reason}")
    lines += ["", speedup_table(bench.get("results", []))]
    failed = [t for t in results.timings if t.status == "failed"]
    for t in failed[:5]:
        lines += _fill(f"benchmark failed: {t.impl} {t.workload} {t.metric}: {t.reason}")
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more failed benchmarks (see the report)")
    lines += ["", f"report: {written['index.html']}", f"        {written['report.md']}"]
    return "\n".join(lines)


def _fill(text: str) -> list[str]:
    """A line of the summary wrapped to WIDTH, its continuation indented."""
    return textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def speedup_table(results: list[dict]) -> str:
    """Per implementation and metric: the geometric mean over workloads of native's median /
    its median, with the 95% interval of that mean from the raw samples. Results that do not
    conform, or whose baseline does not, are not counted; a mean whose interval contains 1.0
    reads "≈ native (within noise)". `results`: the bench document's."""
    from rnnbench.benchmarks.noise import ratio_interval, verdict
    from rnnbench.commands.bench import WITHIN_NOISE

    results = [BenchResult.from_json(r) for r in results]
    baseline = {(r.workload, r.metric): r for r in results
                if r.impl == BASELINE and r.status == "ok"}
    groups: dict[tuple[str, str], list[tuple[float, BenchResult, BenchResult]]] = {}
    excluded: dict[tuple[str, str], int] = {}
    for r in results:
        base = baseline.get((r.workload, r.metric))
        if r.impl == BASELINE or r.status != "ok" or base is None:
            continue
        key = (r.impl, r.metric)
        ratio = vs_native(r, base)
        if r.conforms is False or base.conforms is False:
            excluded[key] = excluded.get(key, 0) + 1
        elif ratio is not None:
            groups.setdefault(key, []).append((ratio, base, r))
    rows = []
    for key in dict.fromkeys([*groups, *excluded]):
        found = groups.get(key, [])
        ratios = [ratio for ratio, _, _ in found]
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        samples = [(base.samples_s, r.samples_s) for _, base, r in found]
        interval = ratio_interval(samples) if all(a and b for a, b in samples) else None
        if mean is None:
            cell = "-"
        elif verdict(interval) == "within_noise":
            cell = WITHIN_NOISE
        else:
            cell = f"{mean:.2f}x " + (f"({interval[0]:.2f}-{interval[1]:.2f})" if interval
                                      else "(no interval)")
        rows.append([*key, cell, len(found), sum(bool(r.noisy) for _, _, r in found) or "",
                     excluded.get(key, "")])
    headers = ["implementation", "metric", f"vs {BASELINE}", "workloads", "noisy",
               "non-conforming"]
    lines = [f"benchmarks ({PRESET}): speed-up over {BASELINE}, geometric mean over conforming "
             "workloads (95% interval)", tabulate(rows, headers, disable_numparse=True)]
    compared = {impl for impl, _ in [*groups, *excluded]} | {BASELINE}
    timed: dict[str, bool] = {}
    for r in results:
        if r.impl not in compared:
            timed[r.impl] = timed.get(r.impl, False) or r.status == "ok"
    if timed:
        lines += _fill("no speed-up for: " + ", ".join(
            f"{impl} ({f'timed, no {BASELINE} result to compare with' if ok else 'not timed'})"
            for impl, ok in timed.items()))
    return "\n".join(lines)
