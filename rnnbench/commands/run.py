"""`rnnbench run [--out DIR] [--full]`: the main job, on an embedded default.

Three stages, each writing its results as soon as it is done, so an interrupted run keeps what
finished: the conformance suite on every available built-in implementation
(`conformance-<impl>.json`; the suite's quick case list, the full one with --full), the `quick`
benchmark preset over all of them (`bench.json`, rewritten after every workload and marked
interrupted until the stage is done), and the report over those documents (`report.md`,
`index.html`, `figures/`). A one-screen summary closes the run. Exit 1 when any conformance
check failed or errored (or timed out: an incomplete run) or any benchmark failed, 0 otherwise,
2 when DIR cannot be written (said before any work), is in use by another run, or a file could
not be written (said after the summary, which comes from memory).

Files go to DIR/.incomplete/ and move into DIR only once the run is complete
(`rnnbench.run_folder`): an interrupted run leaves the previous complete one in DIR as it was.
Interrupted (Ctrl-C, SIGTERM), the run stops its conformance children, kills what else it
started (fused's C++ build), and says where its finished part is.

The stages share the machine where they can: conformance runs in child processes, WORKERS at a
time, each implementation's kinds split between two of them (KIND_GROUPS); the implementations'
availability (fused builds its kernels) is found out beside them; the benchmark stage builds its
modules, compares each with the reference and makes every first call (where torch.compile
compiles) while conformance still runs (its first-call times are taken beside it), and waits
for it to finish before it measures the machine and times anything. On a terminal one status
line shows every running stage; in a log a line says where each stage stands at least every
HEARTBEAT_S seconds.
"""
from __future__ import annotations

import math
import sys
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
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
HEARTBEAT_S = 20    # in a log, the longest silence (checked every HEARTBEAT_POLL_S)
HEARTBEAT_POLL_S = 5
STOP_WAIT_S = 30    # interrupted: how long the conformance stages get to write what they have


def add_arguments(parser) -> None:
    parser.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                        help=f"where results and the report go (default {DEFAULT_OUT})")
    parser.add_argument("--full", action="store_true",
                        help="the conformance suite's full case list (the default is its quick "
                             "list: every check, fewer configurations)")


def run(args) -> int:
    from rnnbench.compiler_cache import private_for_this_process
    from rnnbench.run_folder import RunFolder

    started = time.perf_counter()
    out = Path(args.out)
    require_writable(out, "--out", folder=True)
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
    from rnnbench.reports.render import render_report

    progress = StageProgress(sys.stdout)
    writer = StageWriter(folder.staging, progress)
    try:
        docs, skipped, bench = _stages(quick, writer, progress)
        documents = {f"conformance-{name}.json": doc for name, doc in docs.items()}
        results = as_results({**documents, "bench.json": bench})
        progress.print(summary(results, docs, skipped, bench, time.perf_counter() - started))
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


def _stages(quick: bool, writer: StageWriter, progress: StageProgress
            ) -> tuple[dict, dict, dict]:
    """Conformance of every built-in beside the benchmark stage's preparation, then its timing:
    (conformance documents by implementation, unavailable implementations with the reason,
    the bench document). Interrupted, the conformance children stop at once, and what else
    the run started is killed."""
    from rnnbench.child_process import end_descendants
    from rnnbench.impls import BUILTINS, registered

    builtins = {name: registered()[name] for name in BUILTINS}
    stop = threading.Event()
    slots = threading.Semaphore(WORKERS)
    finding_out = ThreadPoolExecutor(max_workers=len(builtins))
    checking = ThreadPoolExecutor(max_workers=len(builtins))
    conformance: dict[str, Future] = {}
    try:
        reasons = {name: finding_out.submit(impl.unavailable_reason) for name, impl in builtins.items()}
        conformance = {name: checking.submit(_conformance_stage, impl, reasons[name], writer,
                                             quick, progress, stop, slots)
                       for name, impl in builtins.items()}
        skipped = {name: reason for name, future in reasons.items() if (reason := future.result())}
        bench = _bench_stage(list(builtins.values()), writer, progress,
                             wait=lambda: _finished(conformance))
        docs = {name: doc for name, doc in _finished(conformance).items() if doc is not None}
    except BaseException:
        stop.set()      # the conformance children stop now; their stages write what they have
        wait_for(conformance.values(), timeout=STOP_WAIT_S)
        end_descendants()   # what else this run started: fused's build, its compilers
        raise
    finally:
        finding_out.shutdown(cancel_futures=True)
        checking.shutdown(cancel_futures=True)
    return docs, skipped, bench


def as_results(documents: dict[str, dict]):
    """The report's `Results` of documents in memory, by file name (what the run wrote, or
    failed to write)."""
    from rnnbench.reports.load import load_document
    from rnnbench.reports.records import Results

    results = Results()
    for name, doc in documents.items():
        results.extend(load_document(name, doc))
    return results


def _finished(stages: dict[str, Future]) -> dict[str, dict | None]:
    """Wait for every stage; their results (a stage's exception is raised here)."""
    return {name: future.result() for name, future in stages.items()}


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
            self.line.print(text)
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


def kind_groups(kinds) -> list[list[str]]:
    """`kinds` split by KIND_GROUPS (the last group takes the kinds in none); no empty group."""
    grouped = [[kind for kind in kinds if kind in group] for group in KIND_GROUPS]
    grouped[-1] += [kind for kind in kinds if not any(kind in group for group in KIND_GROUPS)]
    return [group for group in grouped if group]


def _conformance_stage(impl, reason: Future, writer: StageWriter, quick: bool,
                       progress: StageProgress, stop: threading.Event,
                       slots: threading.Semaphore) -> dict | None:
    """The conformance document of one built-in, its kind groups checked at once, written as
    `conformance-<impl>.json`; None when it is unavailable."""
    from rnnbench.suites.text import only_cut

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
    writer.write(f"conformance-{name}.json", doc)
    if doc.get("interrupted"):
        raise KeyboardInterrupt
    said = f"could not run: {doc['error']}" if "error" in doc else tally(doc.get("summary", {}))
    if only_cut(doc):
        said += f"; incomplete: {doc['cut']} timed out or cut"
    for number in range(len(groups)):
        progress.done(f"{name} {number + 1}/{len(groups)}")
    progress.print(f"conformance {name}: {said or 'no checks ran'} "
                   f"({time.perf_counter() - started:.1f} s)")
    return doc


def _conformance_group(name: str, kinds: list[str], quick: bool, counter, stop: threading.Event,
                       slots: threading.Semaphore) -> dict:
    """One child's conformance document: `kinds` of `name`, once a slot is free."""
    from rnnbench.environment import capture
    from rnnbench.suites import conform

    def report(result, done: int, total: int) -> None:
        counter(done, total, result.check)

    unchecked = {"schema": CONFORMANCE_SCHEMA, "target": name, "environment": capture(),
                 "kinds": kinds, "summary": {}, "results": []}
    with slots:
        if stop.is_set():
            return {**unchecked, "interrupted": True}
        try:
            # No run budget: the built-ins are ours, and compile's first run builds its graphs
            # for minutes; a budget bounds implementations that misbehave. `stop` ends the
            # child at once, and conform() returns what it has, marked interrupted.
            return conform(name, kinds=kinds, quick=quick, progress=report, budget_s=None,
                           stop=stop)
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
            "incomplete": any(doc.get("incomplete") for doc in docs),
            "cut": sum(doc.get("cut") or 0 for doc in docs),
            "slowdown": max(doc.get("slowdown") or 1.0 for doc in docs),
            "duration_s": max(doc.get("duration_s", 0.0) for doc in docs),
            "not_supported_features": {feature: reason for doc in docs for feature, reason
                                       in doc.get("not_supported_features", {}).items()},
            "param_map": next((doc["param_map"] for doc in docs if doc.get("param_map")), {}),
            "summary": counts, "results": results}


def _bench_stage(impls: list, writer: StageWriter, progress: StageProgress, wait) -> dict:
    """The quick preset over every built-in, written as `bench.json` after every workload
    (marked interrupted until done); `wait()` is called once the modules are built, checked and
    called once, before anything is timed."""
    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.workloads import load_workloads

    workloads = load_workloads(preset=PRESET)
    progress.print(f"benchmarks: preset {PRESET}, {len(workloads)} workloads x {len(impls)} "
                   "implementations ...")
    started = time.perf_counter()

    def waiting() -> None:
        progress.update("bench", "benchmarks: waiting for conformance to finish")
        wait()

    doc = run_benchmarks(impls, workloads, preset=PRESET, progress=progress.counter("bench"),
                         checkpoint=lambda partial: writer.write(
                             "bench.json", {**partial, "interrupted": True}),
                         wait=waiting)
    doc = {**doc, "interrupted": False}
    writer.write("bench.json", doc)
    progress.done("bench")
    progress.print(f"benchmarks done ({time.perf_counter() - started:.1f} s)")
    return doc


def summary(results, docs: dict[str, dict], skipped: dict[str, str], bench: dict,
            seconds: float) -> str:
    """The closing screen: a busy machine's warning, conformance verdicts (incomplete where
    only checks that timed out or were cut did not pass; `docs` are the conformance documents
    by implementation), speed-ups over native (within noise, noisy and non-conforming said as
    such)."""
    from rnnbench.benchmarks.machine import busy_line
    from rnnbench.reports import analysis
    from rnnbench.suites.text import only_cut

    busy = busy_line(bench.get("machine_check"))
    lines = ([""] + ([textwrap.fill(busy, WIDTH, subsequent_indent="  ")] if busy else [])
             + [f"rnnbench run: done in {seconds:.0f} s"])
    counts = analysis.outcome_counts(results.checks, lambda c: (c.impl,))
    rows = []
    for source in (s for s in results.sources if s.format == "conformance"):
        n = counts.get((source.target,))
        doc = docs.get(source.target, {})
        verdict = (f"could not run: {source.error}" if source.error else
                   "no checks ran" if n is None else
                   f"incomplete ({doc['cut']} cut)" if only_cut(doc) else
                   "DOES NOT CONFORM" if n["failed"] + n["error"] else "conforms")
        rows.append([source.target, *(n[o] if n else 0 for o in OUTCOMES), verdict])
    rows += [[name, *("" for _ in OUTCOMES), "skipped (unavailable)"] for name in skipped]
    headers = ["conformance", *(o.replace("_", " ") for o in OUTCOMES), "verdict"]
    lines += ["", tabulate(rows, headers)]
    lines += [textwrap.fill(f"{name}: {reason}", WIDTH, subsequent_indent="  ")
              for name, reason in skipped.items()]
    lines += ["", speedup_table(bench.get("results", []))]
    failed = [t for t in results.timings if t.status == "failed"]
    for t in failed[:5]:
        lines.append(f"benchmark failed: {t.impl} {t.workload} {t.metric}: {t.reason}")
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more failed benchmarks (see the report)")
    return "\n".join(lines)


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
        lines.append(textwrap.fill("no speed-up for: " + ", ".join(
            f"{impl} ({f'timed, no {BASELINE} result to compare with' if ok else 'not timed'})"
            for impl, ok in timed.items()), WIDTH, subsequent_indent="  "))
    return "\n".join(lines)
