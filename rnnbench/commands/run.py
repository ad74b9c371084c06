"""`rnnbench run [--out DIR] [--full]`: the main job, on an embedded default.

Three stages, each writing its results as soon as it is done, so an interrupted run keeps what
finished: the conformance suite on every available built-in implementation
(`conformance-<impl>.json`; the suite's quick case list, the full one with --full), the `quick`
benchmark preset over all of them (`bench.json`, rewritten after every workload and marked
interrupted until the stage is done), and the report over those documents (`report.md`,
`index.html`, `figures/`). Where torch sees a CUDA device, the built-ins that do not declare
cuda unsupported are checked and timed on it too (`conformance-<impl>-cuda.json`,
`bench-cuda.json`, after the CPU's timings), and the report shows both devices side by side;
without one, the summary says why the GPU rows were skipped (see `plan`). A one-screen summary
closes the run. Exit 1 when any conformance check failed or errored (or timed out: an
incomplete run) or any benchmark failed, 0 otherwise, 2 when DIR cannot be written (said
before any work), is in use by another run, or a file could not be written (said after the
summary, which comes from memory).

Files go to DIR/.incomplete/ and move into DIR only once the run is complete
(`rnnbench.run_folder`): an interrupted run leaves the previous complete one in DIR as it was.
Interrupted (Ctrl-C, SIGTERM), the run stops its conformance children, kills what else it
started (fused's C++ build), and says where its finished part is.

The stages share the machine where they can: conformance runs in child processes, WORKERS at a
time, compile's kinds split between two of them (KIND_GROUPS), the others one child each; the
implementations' availability (fused builds its kernels) is found out beside them; the
benchmark stage builds its modules, compares each with the reference and makes every first call
(where torch.compile compiles) while conformance still runs (its first-call times are taken
beside it), and waits for it to finish before it measures the machine and times anything. On a
terminal one status line shows every running stage; in a log a line says where each stage
stands at least every HEARTBEAT_S seconds.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
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
# Conformance children at a time: one per four cores this process may use, at least two, at
# most four. Each child is a single busy thread most of the time, and runs torch on its share of
# the cores (child_threads). On the 2-core machines this is sized for that is one child per core:
# two children, the benchmark stage's preparation and fused's build sharing 2 cores with torch's
# default of a thread per core cost each child twice the CPU time (OpenMP threads spinning while
# they wait for a core). A machine with a GPU has many more cores and checks every built-in
# twice (CPU and CUDA). On a 16-core machine with a GPU, the GPU check's conformance runs, all
# at once beside its half-precision runs, kept every CUDA check of compile within its limit;
# eight children at once did not (two of compile's CUDA checks past 60 s).


def conformance_workers(cores: int) -> int:
    """How many conformance children run at once on a machine with `cores` cores."""
    return max(2, min(4, cores // 4))


WORKERS = conformance_workers(len(os.sched_getaffinity(0)))
# The order the conformance children start in (the others between these, in the registry's
# order). compile first, its kinds checked by two children at once, one per group, so that the
# one slow implementation keeps both cores busy from the start: it builds a graph per
# configuration, dtype and grad mode, and with empty caches its gru checks take about as long as
# its rnn and lstm checks together (its cells run eagerly and cost little). Kinds in no group
# join the last. Every other built-in is one child: a child's start (torch's import, the
# calibration) costs about 3 CPU-seconds, as much as a fast implementation's half of the checks.
# fused last: it is available only once its C++ build is done, which runs beside the others'
# checks.
SPLIT = ("compile",)
LAST = ("fused",)
KIND_GROUPS = (("rnn", "lstm"), ("rnn_cell", "lstm_cell", "gru_cell", "gru"))
HEARTBEAT_S = 20    # in a log, the longest silence (checked every HEARTBEAT_POLL_S)
HEARTBEAT_POLL_S = 5
STOP_WAIT_S = 30    # interrupted: how long the conformance stages get to write what they have

EXAMPLES = f"""\
examples:
  rnnbench run                      every built-in's conformance, benchmarks, a report:
                                    {DEFAULT_OUT}/index.html
  rnnbench run --out results/today  the same into another folder
  rnnbench run --full               the conformance suite's full case list

exit codes: 0 all conform and nothing failed, 1 a check failed or errored or a benchmark failed,
2 a usage error (one line, before any work), 130 interrupted (the last complete run kept)
"""


def add_arguments(parser) -> None:
    parser.epilog = EXAMPLES
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help=f"where results and the report go (default {DEFAULT_OUT})")
    parser.add_argument("--full", action="store_true",
                        help="the conformance suite's full case list (the default is its quick "
                             "list: every check, fewer configurations)")


def run(args) -> int:
    from rnnbench.compiler_cache import private_for_this_process
    from rnnbench.run_folder import RunFolder

    started = time.perf_counter()
    require_writable(args.out, "--out", folder=True)
    out = Path(args.out)
    # The benchmark stage compiles in this process while the conformance children compile in
    # theirs: each in its own copy of the compiler cache (see rnnbench.compiler_cache).
    with RunFolder(out) as folder, private_for_this_process():
        try:
            return _main_job(folder, not args.full, started)
        except KeyboardInterrupt:
            print(f"rnnbench run: what finished is in {folder.staging}, marked interrupted "
                  f"(`rnnbench report {folder.staging}` renders it); {out} keeps the last "
                  "complete run", file=sys.stderr)
            raise


def _main_job(folder, quick: bool, started: float) -> int:
    """The stages, the summary, the report; the files published once all are written."""
    from rnnbench.impls import BUILTINS, registered
    from rnnbench.reports.render import render_report

    builtins = {name: registered()[name] for name in BUILTINS}
    stages = plan(builtins)
    progress = StageProgress(sys.stdout)
    writer = StageWriter(folder.staging, progress)
    try:
        docs, skipped, benches = _stages(stages, quick, writer, progress, history=folder.folder)
        documents = {**{results_file(f"conformance-{name}", device): doc.to_json()
                        for (name, device), doc in docs.items()},
                     **{results_file("bench", device): doc for device, doc in benches.items()}}
        results = as_results(documents)
        progress.print(summary(results, skipped, list(benches.values()),
                               time.perf_counter() - started,
                               [stages.gpu_line, *([quick_list_line()] if quick else [])]))
        # Written after the summary: a full disk costs the files, never what was shown.
        progress.update("report", "writing the report")
        written = render_report(results, folder.staging)
        writer.require_all_written()
        folder.publish()
        progress.print(f"\nreport: {folder.folder / written['index.html'].name}\n"
                       f"        {folder.folder / written['report.md'].name}")
    finally:
        progress.close()
    failed = (any(c.outcome in ("failed", "error") for c in results.checks)
              or any(s.error for s in results.sources)
              or any(t.status == "failed" for t in results.timings))
    return 1 if failed else 0


def _stages(stages: Plan, quick: bool, writer: StageWriter, progress: StageProgress,
            history: Path) -> tuple[dict, dict, dict]:
    """Conformance of every built-in on each planned device beside the benchmark stage's
    preparation, then its timing, one device after the other: (conformance documents by
    implementation and device, unavailable implementations with the reason, the bench documents
    by device). Interrupted, the conformance children stop at once, and what else the run
    started is killed."""
    from rnnbench.child_process import end_descendants

    builtins = {impl.name: impl for impl in stages.devices[HOST]}
    stop = threading.Event()
    finding_out = ThreadPoolExecutor(max_workers=len(builtins))
    # The children, WORKERS at a time, in the order their groups are queued here.
    children = ThreadPoolExecutor(max_workers=WORKERS)
    checking = ThreadPoolExecutor(max_workers=sum(map(len, stages.devices.values())))
    conformance: dict[tuple[str, str], Future] = {}
    try:
        reasons = {name: finding_out.submit(impl.unavailable_reason) for name, impl in builtins.items()}
        for device, planned in stages.devices.items():
            for impl in queue_order(planned):
                groups = kind_groups(impl.kinds, split=impl.name in SPLIT)
                # Each child's progress counter, e.g. "compile 1/2"; its stage removes them.
                counters = [f"{shown(impl.name, device)} {number}/{len(groups)}"
                            for number in range(1, len(groups) + 1)]
                queued = [children.submit(_conformance_group, impl.name, device, kinds, counter,
                                          quick, reasons[impl.name], stop, progress,
                                          first=counter == counters[0])
                          for kinds, counter in zip(groups, counters)]
                conformance[impl.name, device] = checking.submit(
                    _conformance_stage, impl, device, queued, counters, writer, progress)
        skipped = {name: reason for name, future in reasons.items() if (reason := future.result())}
        # One device's timings after the other's, each once conformance is done, so that
        # nothing else runs while anything is timed.
        benches = {device: _bench_stage(planned, device, writer, progress, history,
                                        wait=lambda: _finished(conformance))
                   for device, planned in stages.devices.items()}
        docs = {key: doc for key, doc in _finished(conformance).items() if doc is not None}
    except BaseException:
        stop.set()      # the conformance children stop now; their stages write what they have
        wait_for(conformance.values(), timeout=STOP_WAIT_S)
        end_descendants()   # what else this run started: fused's build, its compilers
        raise
    finally:
        for pool in (finding_out, children, checking):
            pool.shutdown(cancel_futures=True)
    return docs, skipped, benches


def queue_order(impls: list) -> list:
    """The order in which the implementations' conformance children are queued: SPLIT's first,
    LAST's last, the others between them as given."""
    return sorted(impls, key=lambda impl: (impl.name not in SPLIT) + 2 * (impl.name in LAST))


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


def as_results(documents: dict[str, dict]):
    """The report's `Results` of documents in memory, by file name (what the run wrote, or
    failed to write)."""
    from rnnbench.reports.load import load_document
    from rnnbench.reports.records import Results

    results = Results()
    for name, doc in documents.items():
        results.extend(load_document(name, doc))
    return results


def _finished(stages: dict) -> dict:
    """Wait for every stage; their results (a stage's exception is raised here)."""
    return {key: future.result() for key, future in stages.items()}


class StageWriter:
    """Writes a stage's document into the staging folder. A write that fails (a full disk)
    does not stop the run: it is said once, and `require_all_written` fails the run at the end
    (after the summary), so the folder never publishes a run with a document missing."""

    def __init__(self, folder: Path, progress: "StageProgress"):
        self.folder, self.progress = folder, progress
        self.failure: str | None = None

    def write(self, name: str, doc: dict) -> None:
        try:
            write_json(self.folder / name, doc)
        except UsageError as exc:
            if self.failure is None:
                self.progress.print(f"warning: {exc}; the run goes on, its results in memory")
            self.failure = self.failure or str(exc)

    def require_all_written(self) -> None:
        if self.failure:
            raise UsageError(self.failure)


class StageProgress:
    """Progress of stages running at once: on a terminal one line with every running stage's
    counter; everywhere the lines that stay (a stage started or finished); in a log, every
    running stage's counter whenever HEARTBEAT_S seconds have passed without a line."""

    def __init__(self, stream):
        self.line = LiveLine(stream)
        self.lock = threading.Lock()
        self.running: dict[str, str] = {}
        self.started = self.last_line = time.monotonic()
        self.closed = threading.Event()
        if not self.line.live:
            threading.Thread(target=self._heartbeat, daemon=True).start()

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
            # A line of words is wrapped to WIDTH; a block (the summary's tables) is
            # printed as it was laid out.
            self.line.print(text if "\n" in text else "\n".join(_fill(text)))
            self.last_line = time.monotonic()

    def counter(self, stage: str):
        """A `progress(done, total, label)` callback drawing this stage's counter, after its
        name: "compile 1/2 [12/336] gradients/single-layer"."""
        return lambda done, total, label: self.update(stage, f"{stage} [{done}/{total}] {label}")

    def close(self) -> None:
        """No more heartbeats."""
        self.closed.set()

    def _heartbeat(self) -> None:
        while not self.closed.wait(HEARTBEAT_POLL_S):
            with self.lock:
                quiet = time.monotonic() - self.last_line >= HEARTBEAT_S
                stages = " | ".join(self.running.values()) or "working"
            if quiet:
                elapsed = int(time.monotonic() - self.started)
                self.print(textwrap.shorten(f"[{elapsed // 60}:{elapsed % 60:02d}] {stages}",
                                            WIDTH, placeholder=" ..."))


def kind_groups(kinds, split: bool = True) -> list[list[str]]:
    """`kinds` split by KIND_GROUPS (the last group takes the kinds in none), or all in one
    group unless `split`; no empty group."""
    if not split:
        return [list(kinds)]
    grouped = [[kind for kind in kinds if kind in group] for group in KIND_GROUPS]
    grouped[-1] += [kind for kind in kinds if not any(kind in group for group in KIND_GROUPS)]
    return [group for group in grouped if group]


def _conformance_stage(impl, device: str, groups: list[Future], counters: list[str],
                       writer: StageWriter, progress: StageProgress):
    """The `ConformanceRun` of one built-in on `device` from its kind groups' documents (None
    when it is unavailable), written as `conformance-<impl>.json` (`-cuda` on the GPU); the
    groups' progress `counters` are done then."""
    from rnnbench.reference.kinds import KINDS
    from rnnbench.suites.results import ConformanceRun, summary_phrase

    name, label = impl.name, shown(impl.name, device)
    docs = [future.result() for future in groups]
    if any(doc is None for doc in docs):
        return None
    doc = ConformanceRun.merged(docs, list(KINDS))
    writer.write(results_file(f"conformance-{name}", device), doc.to_json())
    if doc.interrupted:
        raise KeyboardInterrupt
    said = f"could not run: {doc.error}" if doc.error else tally(doc.summary)
    if not doc.error and summary_phrase(doc.verdicts) == "INCOMPLETE":
        said += "; incomplete: checks timed out or were cut"
    for counter in counters:
        progress.done(counter)
    progress.print(f"conformance {label}: {said or 'no checks ran'} ({doc.duration_s:.1f} s)")
    return doc


def child_threads() -> int:
    """Torch's threads in each conformance child: this process's share of them for each of
    the WORKERS children at work."""
    import torch

    return max(1, torch.get_num_threads() // WORKERS)


def _conformance_group(name: str, device: str, kinds: list[str], counter_name: str,
                       quick: bool, reason: Future, stop: threading.Event,
                       progress: StageProgress, *, first: bool = True):
    """One child's `ConformanceRun`: `kinds` of `name` on `device`, counting on the progress
    counter `counter_name` ("compile 1/2"), the implementation's `first` group announcing it;
    None when `name` is unavailable (`reason`)."""
    from rnnbench.environment import capture
    from rnnbench.suites import ConformanceRun, conform

    label = shown(name, device)
    counter = progress.counter(counter_name)

    def report(result, done: int, total: int) -> None:
        counter(done, total, f"{label} {result.check}")

    if reason.result():
        return None
    unchecked = ConformanceRun(target=name, device=device, environment=capture(), kinds=kinds,
                               quick=quick)
    if stop.is_set():
        return dataclasses.replace(unchecked, interrupted=True)
    if not progress.live and first:    # a terminal gets a live counter instead
        progress.print(f"conformance {label} ...")
    try:
        # No run budget: the built-ins are ours, and compile's first run builds its graphs
        # for minutes; a budget bounds implementations that misbehave. `stop` ends the
        # child at once, and conform() returns what it has, marked interrupted.
        return conform(name, kinds=kinds, device=device, quick=quick, progress=report,
                       budget_s=None, stop=stop, threads=child_threads())
    except UsageError as exc:
        # A built-in that cannot even be checked must not cost the other stages their
        # results: the document says so (`error`), the report shows it and the run exits 1.
        return dataclasses.replace(unchecked, error=str(exc))


def _bench_stage(impls: list, device: str, writer: StageWriter, progress: StageProgress,
                 history: Path, wait) -> dict:
    """The quick preset over `impls` on `device`, written as `bench.json` (`bench-cuda.json`)
    after every workload, marked interrupted until done; `wait()` is called once the modules
    are built, checked and called once, before anything is timed. `history`: the folder of the
    last complete run, whose bench documents say the best GEMM peak this machine reached."""
    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.workloads import load_workloads

    name = results_file("bench", device)
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
                         checkpoint=lambda partial: writer.write(
                             name, {**partial, "interrupted": True}),
                         wait=waiting, history=history)
    doc = {**doc, "interrupted": False}
    writer.write(name, doc)
    progress.done("bench")
    progress.print(f"benchmarks{where} done ({time.perf_counter() - started:.1f} s)")
    return doc


def quick_list_line() -> str:
    """What the quick case list leaves out (the cases of native's full plan it lacks), for the
    summary."""
    from rnnbench.impls import load
    from rnnbench.suites.runner import plan

    quick, full = (plan(load(BASELINE), None, quick) for quick in (True, False))
    kept = {(item.kind, item.describe()["case"]) for item in quick}
    left = sorted({item.describe()["case"] for item in full
                   if (item.kind, item.describe()["case"]) not in kept})
    return (f"quick case list: {len(quick)} of {len(full)} checks of {BASELINE}'s kinds; left "
            f"out: the cases {', '.join(left)} (rnnbench run --full checks them)")


def summary(results, skipped: dict[str, str], benches: list[dict], seconds: float,
            notes: list[str]) -> str:
    """The closing screen: a busy machine's warning, conformance verdicts per implementation
    and device (incomplete where checks timed out or were cut), what happened to the GPU rows,
    speed-ups over native per device (within noise, noisy and non-conforming said as such;
    none judged from a busy machine). `benches`: the bench documents, one per device; `notes`:
    lines said under the conformance table (the GPU rows, what the quick list leaves out)."""
    from rnnbench.benchmarks.machine import busy_lines, timed_busy
    from rnnbench.reports import analysis
    from rnnbench.suites.results import judge, summary_phrase

    busy = [line for bench in benches
            for line in busy_lines(bench.get("machine_check") or {}, bench.get("threads"))]
    lines = ["", *dict.fromkeys(busy), f"rnnbench run: done in {seconds:.0f} s"]
    counts = analysis.outcome_counts(results.checks, lambda c: (c.impl, c.device or HOST))
    # xfail and xpass only where some run has them: the table stays within WIDTH columns.
    outcomes = [o for o in OUTCOMES if o not in ("xfail", "xpass")
                or any(n[o] for n in counts.values())]
    rows = []
    reasons = {}    # said under the table, where a long reason has room
    for source in (s for s in results.sources if s.format == "conformance"):
        device = str(source.settings.get("device") or HOST)
        n = counts.get((source.target, device))
        checks = [c for c in results.checks if c.source is source]
        verdict = ("could not run" if source.error else "no checks ran" if n is None else
                   summary_phrase(judge(checks, source.interrupted)))
        rows.append([shown(source.target, device), *(n[o] if n else 0 for o in outcomes),
                     verdict])
        if source.error:
            reasons[shown(source.target, device)] = f"could not run: {source.error}"
    rows += [[name, *("" for _ in outcomes), "skipped (unavailable)"] for name in skipped]
    headers = ["conformance", *(o.replace("_", " ") for o in outcomes), "verdict"]
    lines += ["", tabulate(rows, headers)]
    for name, reason in {**reasons, **skipped}.items():
        lines += _fill(f"{name}: {reason}")
    for note in filter(None, notes):
        lines += _fill(note)
    for bench in benches:
        lines += ["", speedup_table(bench.get("results", []), bench.get("device", HOST),
                                    timed_busy(bench))]
    failed = [t for t in results.timings if t.status == "failed"]
    for t in failed[:5]:
        lines += _fill(f"benchmark failed: {shown(t.impl, t.device)} {t.workload} {t.metric}: "
                       f"{t.reason}")
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more failed benchmarks (see the report)")
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
