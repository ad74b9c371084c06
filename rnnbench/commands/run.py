"""`rnnbench run [--out DIR] [--full]`: the main job, on an embedded default.

Three stages, each writing its results as soon as it is done, so an interrupted run keeps what
finished: the conformance suite on every available built-in implementation
(`DIR/conformance-<impl>.json`; the suite's quick case list, the full one with --full), the
`quick` benchmark preset over all of them (`DIR/bench.json`, rewritten after every workload),
and the report over those files (`DIR/report.md`, `DIR/index.html`). Where torch sees a CUDA
device, the built-ins that do not declare cuda unsupported are checked and timed on it too
(`DIR/conformance-<impl>-cuda.json`, `DIR/bench-cuda.json`, after the CPU's timings), and the
report shows both devices side by side; without one, the summary says why the GPU rows were
skipped (see `plan`). A one-screen summary closes the run. Exit 1 when any conformance check
failed or errored or any benchmark failed, 0 otherwise, 2 when DIR cannot be written (said
before any work).

The stages share the machine where they can: conformance runs in child processes, WORKERS at a
time, each implementation's kinds split between two of them (KIND_GROUPS); the implementations'
availability (fused builds its kernels) is found out beside them; the benchmark stage builds its
modules, compares each with the reference and makes every first call (where torch.compile
compiles) while conformance still runs (its first-call times are taken beside it), and waits
for it to finish before it measures the machine and times anything.
"""
from __future__ import annotations

import dataclasses
import sys
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from rnnbench.benchmarks.result import BenchResult, vs_native
from rnnbench.errors import UsageError
from rnnbench.progress import LiveLine, tally
from rnnbench.documents import BASELINE, OUTCOMES, require_writable, write_json

DEFAULT_OUT = Path("reports") / "latest"     # git-ignored
PRESET = "quick"
HOST = "cpu"     # every run checks and times here
GPU = "cuda"     # and here too, where torch sees a device
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
    stages = plan(builtins)
    progress = StageProgress(sys.stdout)
    stop = threading.Event()
    slots = threading.Semaphore(WORKERS)
    finding_out = ThreadPoolExecutor(max_workers=len(builtins))
    checking = ThreadPoolExecutor(max_workers=sum(map(len, stages.devices.values())))
    try:
        reasons = {name: finding_out.submit(impl.unavailable_reason) for name, impl in builtins.items()}
        conformance = {(impl.name, device): checking.submit(
                           _conformance_stage, impl, device, reasons[impl.name], out,
                           not args.full, progress, stop, slots)
                       for device, planned in stages.devices.items() for impl in planned}
        skipped = {name: reason for name, future in reasons.items() if (reason := future.result())}
        # One device's timings after the other's, each once conformance is done, so that
        # nothing else runs while anything is timed.
        benches = [_bench_stage(planned, device, out, progress, wait=lambda: _finished(conformance))
                   for device, planned in stages.devices.items()]
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
    results = load_inputs([*files, *(path for path, _ in benches)])
    written = render_report(results, out)
    print(summary(results, skipped, written, [doc for _, doc in benches],
                  time.perf_counter() - started, stages.gpu_line))
    failed = (any(c.outcome in ("failed", "error") for c in results.checks)
              or any(s.error for s in results.sources)
              or any(t.status == "failed" for t in results.timings))
    return 1 if failed else 0


@dataclass(frozen=True)
class Plan:
    """What `run` checks and times where: the built-ins per device, in the order the devices
    are timed, and the summary's line on the GPU rows (what runs on which GPU, or why none)."""

    devices: dict[str, list]
    gpu_line: str


def plan(builtins: dict) -> Plan:
    """Every built-in on the CPU, as always; where torch sees a CUDA device, also on it those
    that do not declare cuda unsupported (the others are named in the line)."""
    import torch

    on_host = list(builtins.values())
    if not torch.cuda.is_available():
        build = ("is a CPU build" if torch.version.cuda is None
                 else f"(CUDA {torch.version.cuda}) sees none")
        return Plan({HOST: on_host},
                    f"GPU rows skipped: no CUDA device (torch {torch.__version__} {build})")
    on_gpu = [impl for impl in on_host if GPU not in impl.unsupported]
    line = (f"GPU rows: {', '.join(impl.name for impl in on_gpu)} on {GPU} "
            f"({torch.cuda.get_device_name(0)})")
    declined = [impl.name for impl in on_host if GPU in impl.unsupported]
    if declined:
        line += f"; {', '.join(declined)} declare {GPU} unsupported"
    return Plan({HOST: on_host, GPU: on_gpu}, line)


def results_file(stem: str, device: str) -> str:
    """A stage's file name: the CPU's keep their names of old, other devices' carry the device
    (conformance-native.json, conformance-native-cuda.json)."""
    return f"{stem}.json" if device == HOST else f"{stem}-{device}.json"


def shown(name: str, device: str) -> str:
    """How progress and the summary name an implementation on a device: bare on the CPU."""
    return name if device == HOST else f"{name} ({device})"


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


def _conformance_stage(impl, device: str, reason: Future, out: Path, quick: bool,
                       progress: StageProgress, stop: threading.Event,
                       slots: threading.Semaphore) -> Path | None:
    """The conformance document of one built-in on `device`, its kind groups checked at once,
    written to DIR; None when it is unavailable."""
    name, label = impl.name, shown(impl.name, device)
    if reason.result():
        return None
    started = time.perf_counter()
    if not progress.live:     # a terminal gets a live counter instead
        progress.print(f"conformance {label} ...")
    groups = kind_groups(impl.kinds)
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        docs = list(pool.map(lambda numbered: _conformance_group(
            name, device, numbered[1], quick,
            progress.counter(f"{label} {numbered[0] + 1}/{len(groups)}"), stop, slots),
            enumerate(groups)))
    from rnnbench.reference.kinds import KINDS
    from rnnbench.suites.results import ConformanceRun

    doc = ConformanceRun.merged(docs, list(KINDS))
    path = out / results_file(f"conformance-{name}", device)
    write_json(path, doc.to_json())
    if doc.interrupted:
        raise KeyboardInterrupt
    said = f"could not run: {doc.error}" if doc.error else tally(doc.summary)
    for number in range(len(groups)):
        progress.done(f"{label} {number + 1}/{len(groups)}")
    progress.print(f"conformance {label}: {said or 'no checks ran'} "
                   f"({time.perf_counter() - started:.1f} s)")
    return path


def _conformance_group(name: str, device: str, kinds: list[str], quick: bool, counter,
                       stop: threading.Event, slots: threading.Semaphore):
    """One child's `ConformanceRun`: `kinds` of `name` on `device`, once a slot is free."""
    from rnnbench.environment import capture
    from rnnbench.suites import ConformanceRun, conform

    def report(result, done: int, total: int) -> None:
        if stop.is_set():     # conform() keeps what it has and returns, marked interrupted
            raise KeyboardInterrupt
        counter(done, total, f"{shown(name, device)} {result.check}")

    unchecked = ConformanceRun(target=name, device=device, environment=capture(), kinds=kinds,
                               quick=quick)
    with slots:
        if stop.is_set():
            return dataclasses.replace(unchecked, interrupted=True)
        try:
            # No run budget: the built-ins are ours, and compile's first run builds its graphs
            # for minutes; a budget bounds implementations that misbehave.
            return conform(name, kinds=kinds, device=device, quick=quick, progress=report,
                           budget_s=None)
        except UsageError as exc:
            # A built-in that cannot even be checked must not cost the other stages their
            # results: the document says so (`error`), the report shows it and the run exits 1.
            return dataclasses.replace(unchecked, error=str(exc))


def _bench_stage(impls: list, device: str, out: Path, progress: StageProgress,
                 wait) -> tuple[Path, dict]:
    """The quick preset over `impls` on `device`; `wait()` is called once the modules are
    built, checked and called once, before anything is timed."""
    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.workloads import load_workloads

    path = out / results_file("bench", device)
    workloads = load_workloads(preset=PRESET)
    where = "" if device == HOST else f" on {device}"
    progress.print(f"benchmarks{where}: preset {PRESET}, {len(workloads)} workloads x "
                   f"{len(impls)} implementations ...")
    started = time.perf_counter()

    def waiting() -> None:
        progress.update("bench", "benchmarks: waiting for conformance to finish")
        wait()

    doc = run_benchmarks(impls, workloads, device=device, preset=PRESET,
                         progress=progress.counter("bench"),
                         checkpoint=lambda partial: write_json(path, partial), wait=waiting,
                         history=out)
    write_json(path, doc)
    progress.done("bench")
    progress.print(f"benchmarks{where} done ({time.perf_counter() - started:.1f} s)")
    return path, doc


def summary(results, skipped: dict[str, str], written: dict, benches: list[dict],
            seconds: float, gpu_line: str) -> str:
    """The closing screen: a busy machine's warning, conformance verdicts per implementation
    and device, what happened to the GPU rows, speed-ups over native per device (within noise,
    noisy and non-conforming said as such; none judged from a busy machine), where the report
    is. `benches`: the bench documents, one per device."""
    from rnnbench.benchmarks.machine import busy_lines
    from rnnbench.reports import analysis
    from rnnbench.suites.results import judge, summary_phrase

    busy = [line for bench in benches
            for line in busy_lines(bench.get("machine_check") or {}, bench.get("threads"))]
    lines = ["", *dict.fromkeys(busy), f"rnnbench run: done in {seconds:.0f} s"]
    counts = analysis.outcome_counts(results.checks, lambda c: (c.impl, c.device or HOST))
    rows = []
    reasons = {}    # said under the table, where a long reason has room
    for source in (s for s in results.sources if s.format == "conformance"):
        device = str(source.settings.get("device") or HOST)
        n = counts.get((source.target, device))
        checks = [c for c in results.checks if c.source is source]
        verdict = ("could not run" if source.error else "no checks ran" if n is None else
                   summary_phrase(judge(checks, source.interrupted)))
        rows.append([shown(source.target, device), *(n[o] if n else 0 for o in OUTCOMES),
                     verdict])
        if source.error:
            reasons[shown(source.target, device)] = f"could not run: {source.error}"
    rows += [[name, *("" for _ in OUTCOMES), "skipped (unavailable)"] for name in skipped]
    headers = ["conformance", *(o.replace("_", " ") for o in OUTCOMES), "verdict"]
    lines += ["", tabulate(rows, headers)]
    for name, reason in {**reasons, **skipped}.items():
        lines += _fill(f"{name}: {reason}")
    if gpu_line:
        lines += _fill(gpu_line)
    for bench in benches:
        busy = (bench.get("machine_check") or {}).get("busy") is True
        lines += ["", speedup_table(bench.get("results", []), bench.get("device", HOST), busy)]
    failed = [t for t in results.timings if t.status == "failed"]
    for t in failed[:5]:
        lines += _fill(f"benchmark failed: {shown(t.impl, t.device)} {t.workload} {t.metric}: "
                       f"{t.reason}")
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more failed benchmarks (see the report)")
    lines += ["", f"report: {written['index.html']}", f"        {written['report.md']}"]
    return "\n".join(lines)


def _fill(text: str) -> list[str]:
    """A line of the summary wrapped to WIDTH, its continuation indented."""
    return textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def speedup_table(results: list[dict], device: str = HOST, busy: bool = False) -> str:
    """Per implementation and metric: the geometric mean over workloads of native's median /
    its median, with the 95% interval of that mean from the raw samples
    (`rnnbench.benchmarks.statistics.speedup`, as the report's). Results that do not conform,
    or whose baseline does not, are not counted; a mean whose interval contains 1.0 reads
    "≈ native (within noise)", and none is judged when the machine was `busy`. `results`: the
    bench document's, timed on `device` (named in the heading unless it is the CPU)."""
    from rnnbench.benchmarks.statistics import speedup
    from rnnbench.commands.bench import ratio_cell

    results = [BenchResult.from_json(r) for r in results]
    baseline = {(r.workload, r.metric): r for r in results
                if r.impl == BASELINE and r.status == "ok"}
    groups: dict[tuple[str, str], list[tuple[BenchResult, BenchResult]]] = {}
    excluded: dict[tuple[str, str], int] = {}
    for r in results:
        base = baseline.get((r.workload, r.metric))
        if r.impl == BASELINE or r.status != "ok" or base is None:
            continue
        key = (r.impl, r.metric)
        if r.conforms is False or base.conforms is False:
            excluded[key] = excluded.get(key, 0) + 1
        elif vs_native(r, base) is not None:
            groups.setdefault(key, []).append((base, r))
    rows = []
    for key in dict.fromkeys([*groups, *excluded]):
        found = groups.get(key, [])
        ratio = speedup(found, busy=busy)
        rows.append([*key, "-" if ratio is None else ratio_cell(ratio), len(found),
                     sum(bool(r.noisy) for _, r in found) or "", excluded.get(key, "")])
    headers = ["implementation", "metric", f"vs {BASELINE}", "workloads", "noisy",
               "non-conforming"]
    where = "" if device == HOST else f" on {device}"
    lines = [textwrap.fill(f"benchmarks ({PRESET}{where}): speed-up over {BASELINE}, geometric "
                           "mean over conforming workloads (95% interval)", WIDTH),
             tabulate(rows, headers, disable_numparse=True)]
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
