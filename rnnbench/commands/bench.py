"""`rnnbench bench`: time implementations side by side on named workloads.

    rnnbench bench [--impl A,B,...] [--kind K] [--preset P | --workload FILE]
                   [--device cpu|cuda] [--threads N] [--budget S] [--timeout S]
                   [--memory-limit GIB] [--json PATH]

Prints one table per workload and metric (median, IQR, the ratio to native with its 95%
interval, GFLOP/s, % of the measured GEMM peak, first call) and writes the rnnbench.bench/2
document with --json (after every workload, marked "interrupted" until the run is complete, so
an interrupted run keeps what it finished and says so; the last write comes after the printing,
so a write that fails loses nothing shown). A ratio whose interval contains 1.0 reads "≈ native
(within noise)"; a result that failed the forward pre-check reads "non-conforming" and is no
speed-up; a busy machine is said on the first line, and then no speed-up is judged ("not
judged: busy machine"), nor one whose samples, or native's, are bimodal. Implementations that
are not built in run, with the rest, in a child process (`rnnbench.benchmarks.isolation`): a
crash, a hang or `sys.exit` there fails that implementation's workload and keeps everything
else. Exit 0 when nothing failed, 1 when any implementation failed on any workload, 2 for a
usage error (a --json that cannot be written, or nothing to measure, among them).
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from tabulate import tabulate

from rnnbench.benchmarks.isolation import DEFAULT_TIMEOUT_S
from rnnbench.benchmarks.machine import busy_lines
from rnnbench.benchmarks.result import BenchResult
from rnnbench.benchmarks.statistics import BIMODAL, BUSY, Ratio
from rnnbench.benchmarks.workloads import MAX_THREADS, load_workloads, preset_names
from rnnbench.errors import UsageError
from rnnbench.printable import printable_data
from rnnbench.progress import StepCounter
from rnnbench.wording import counted
from rnnbench.reference.kinds import KINDS as WORKLOAD_KINDS
from rnnbench.reports import units
from rnnbench.documents import BASELINE, STATUSES, require_writable, write_json

DEFAULT_PRESET = "quick"
# Solver statistics worth a note (the rest stay in the JSON).
SOLVER_NOTES = ("forward_iterations", "backward_iterations", "unconverged")
WITHIN_NOISE = f"≈ {BASELINE} (within noise)"
WIDTH = 100

EXAMPLES = f"""\
examples:
  rnnbench bench --preset quick --json out/bench.json   every registered implementation
  rnnbench bench --impl fused,my_rnn.py:MyRNN --kind rnn --preset goals --threads 1
                                                        yours beside fused and {BASELINE}
  rnnbench bench --workload my_sizes.json --impl eager  your own workload file

exit codes: 0 nothing failed, 1 an implementation failed on a workload, 2 a usage error (one
line, before any timing)
"""

def add_arguments(parser) -> None:
    from rnnbench.commands.conform import add_memory_limit

    parser.epilog = EXAMPLES
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
    parser.add_argument("--threads", type=int,
                        help=f"torch threads, 1 to {MAX_THREADS} (default: torch's current count)")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="timing budget per implementation, workload and metric "
                             "(default: the workload's own)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="with implementations that are not built in, which run in a child "
                             "process: the longest one phase of their work (a first call, one "
                             f"timed sample) may take, e.g. --timeout 600 for a slow compile "
                             f"(default {DEFAULT_TIMEOUT_S:g})")
    add_memory_limit(parser)
    parser.add_argument("--json", metavar="PATH", help="write the results document here")


def run(args) -> int:
    import torch

    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.isolation import load_targets, needs_isolation, run_isolated
    from rnnbench.commands.conform import memory_limit
    from rnnbench.compiler_cache import private_for_this_process
    from rnnbench.impls.registry import registered_names

    if args.json is not None:
        require_writable(args.json, "--json")
    if args.device not in ("cpu", "cuda"):
        raise UsageError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here")
    validate_threads(args.threads)
    if args.budget is not None and not 0 < args.budget < float("inf"):
        raise UsageError(f"--budget must be positive, got {args.budget}")
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    limit = memory_limit(args)
    if args.kind is not None and args.kind not in WORKLOAD_KINDS:
        raise UsageError(f"unknown kind {args.kind!r}; known kinds: {', '.join(WORKLOAD_KINDS)}")
    workloads = load_workloads(preset=None if args.workload else args.preset or DEFAULT_PRESET,
                               path=args.workload)
    if args.kind:
        workloads = [w for w in workloads if w.kind == args.kind]
        if not workloads:
            raise UsageError(f"no workload of kind {args.kind!r} in {args.workload or args.preset or DEFAULT_PRESET}")
    if args.impl:
        targets = list(dict.fromkeys(t.strip() for t in args.impl.split(",") if t.strip()))
        if not targets:
            raise UsageError("--impl: no target given")
    else:
        targets = registered_names()
    writer = CheckpointWriter(args.json)
    progress = StepCounter(sys.stderr, log_prefix="bench")
    preset = None if args.workload else args.preset or DEFAULT_PRESET
    options = {"threads": args.threads, "budget_s": args.budget, "preset": preset,
               "progress": progress, "checkpoint": writer.checkpoint,
               # earlier runs beside this one say the best GEMM peak this machine reached
               "history": str(Path(args.json).parent) if args.json else None}
    try:
        if needs_isolation(targets):
            # Code that is not ours runs in a child process: nothing it does costs the rest.
            doc = run_isolated(targets, workloads, args.device, kind=args.kind, memory_limit=limit,
                               timeout_s=args.timeout or DEFAULT_TIMEOUT_S, **options)
        else:
            impls = load_targets(targets, args.kind, workloads, args.device)
            with private_for_this_process():     # a bench cut short leaves no half-built library
                doc = run_benchmarks(list(impls.values()), workloads, args.device, **options)
    except KeyboardInterrupt:
        progress.close()
        _show_partial(writer, len(workloads))
        raise
    progress.close()
    print(render(doc))
    results = [BenchResult.from_json(r) for r in doc["results"]]
    counts = {status: sum(r.status == status for r in results) for status in STATUSES}
    summary = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items())
    flags = {"non-conforming": sum(r.conforms is False for r in results),
             "noisy": sum(bool(r.noisy) for r in results),
             "within noise": sum(r.vs_native_verdict == "within_noise"
                                 for r in results if r.impl != BASELINE),
             "not judged": sum(r.vs_native_verdict == "not_judged"
                               for r in results if r.impl != BASELINE)}
    summary += "".join(f", {n} {flag}" for flag, n in flags.items() if n)
    print("\n" + textwrap.fill(summary, WIDTH, subsequent_indent="  ", break_on_hyphens=False),
          flush=True)
    if args.json:
        writer.write(doc, complete=True)     # after the printing: a full disk loses nothing shown
        print(f"results written to {args.json}")
    return 1 if counts["failed"] else 0


def _show_partial(writer: "CheckpointWriter", planned: int) -> None:
    """What an interrupted bench measured before it stopped: its tables, and where the document
    marked interrupted is."""
    if writer.last is None:
        return
    print(render(writer.last), flush=True)
    done = len({result["workload"] for result in writer.last["results"]})
    print(interrupted_after(f"{done} of {counted(planned, 'workload')}",
                            None if writer.failed else writer.path), flush=True)


def interrupted_after(done: str, path: str | None) -> str:
    """The line an interrupted command ends its partial output with: what it finished, and
    where its document, marked interrupted, is (if it wrote one)."""
    where = f"; written to {path}, marked interrupted" if path else ""
    return f"\ninterrupted after {done}{where}"


def validate_threads(threads: int | None) -> None:
    """UsageError unless `threads` is None or 1 to MAX_THREADS."""
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"--threads must be 1 to {MAX_THREADS}, got {threads}")


class CheckpointWriter:
    """Writes the bench document to `path` (if any) after every workload, marked interrupted
    until the run is complete, so that one cut short says so. A write that fails does not stop
    the run: it is said once on stderr, and the final write says it again (exit 2)."""

    def __init__(self, path: str | None):
        self.path = path
        self.failed = False
        self.last: dict | None = None   # the latest document, shown if the run is interrupted

    def checkpoint(self, doc: dict) -> None:
        self.last = doc
        if not self.path:
            return
        try:
            self.write(doc, complete=False)
        except UsageError as exc:
            if not self.failed:
                print(f"warning: {exc}; the results so far are kept in memory", file=sys.stderr)
            self.failed = True

    def write(self, doc: dict, complete: bool) -> None:
        write_json(self.path, {**doc, "interrupted": not complete})


def render(doc: dict) -> str:
    """The document as text: a busy machine's warning first, the environment and the measured
    peak, a table per workload and metric with the notes on its results under it, what was not
    timed and why (one line per implementation and reason). Text that came from the
    implementations (their exceptions, warnings) is shown `printable`."""
    doc = printable_data(doc)
    env = doc["environment"]
    peak, check = doc["peak_gflops"], doc.get("machine_check") or {}
    lines = busy_lines(check, doc["threads"])
    # The CPU's vector extensions decide which kernels it runs (AVX-512 or AVX2 only), unless
    # settings kept the libraries to fewer.
    flags = f"{env['cpu_flags']}; " if env.get("cpu_flags") and not env["gpu"] else ""
    if flags and env.get("isa_limits"):
        flags += f"limited by {env['isa_limits']}; "
    threads = doc["threads"]
    # Wrapped: an AVX-512 CPU's flags or a long model name would run past the width.
    lines.append(textwrap.fill(f"torch {env['torch']} on {env['gpu'] or env['cpu']} ({flags}"
                               f"{env['cores']} cores); device {doc['device']}, {threads} "
                               f"thread{'s' * (threads != 1)}", WIDTH, subsequent_indent="  ",
                               break_on_hyphens=False))
    lines += [_peak_line(peak, check), ""]
    results = [BenchResult.from_json(r) for r in doc["results"]]
    timed = [r for r in results if r.status in ("ok", "failed")]
    busy = check.get("busy") is True
    for (workload, metric), group in _grouped(timed).items():
        rows = [[r.impl, _median(r), _iqr(r), vs_native_cell(r, busy), _number(r.gflops, "{:.1f}"),
                 _number(r.peak_fraction, "{:.0%}"), _seconds(r.first_call_s)]
                for r in group]
        lines += [f"{workload}: {metric}",
                  tabulate(rows, headers=["impl", "median", "IQR", f"vs {BASELINE}", "GFLOP/s",
                                          "% peak", "first call"], disable_numparse=True)]
        notes = dict.fromkeys(note for r in group for note in _notes(r))
        lines += [textwrap.fill(note, WIDTH, initial_indent="  ", subsequent_indent="    ")
                  for note in notes]
        lines.append("")
    not_timed: dict[tuple, list[str]] = {}
    for r in results:
        if r.status not in ("ok", "failed"):
            names = not_timed.setdefault((r.impl, r.status, r.reason), [])
            if r.workload not in names:
                names.append(r.workload)
    if not_timed:
        lines += ["", "not timed:"]
        lines += [textwrap.fill(f"{impl}: {status.replace('_', ' ')}: {reason} "
                                f"({', '.join(workloads)})", WIDTH, initial_indent="  ",
                                subsequent_indent="    ", break_on_hyphens=False)
                  for (impl, status, reason), workloads in not_timed.items()]
    return "\n".join(lines)


def _peak_line(peak: float | None, check: dict) -> str:
    if not peak:
        return "measured fp32 GEMM peak: n/a"
    runs, iqr = len(check.get("peak_gflops_samples") or []), check.get("peak_gflops_iqr")
    library = check.get("peak_library")
    spread = f"median of {runs} runs, IQR {iqr / peak:.0%}" if runs and iqr is not None else ""
    details = ", ".join(filter(None, (library, spread)))
    return f"measured fp32 GEMM peak {peak:.1f} GFLOP/s" + (f" ({details})" if details else "")


def _grouped(results: list[BenchResult]) -> dict[tuple[str, str], list[BenchResult]]:
    groups: dict[tuple[str, str], list[BenchResult]] = {}
    for r in results:
        groups.setdefault((r.workload, r.metric), []).append(r)
    return groups


def vs_native_cell(result: BenchResult, busy: bool = False) -> str:
    """The ratio to the baseline as the table shows it: never a speed-up for a result that does
    not conform, whose interval contains 1.0 or that is not judged (timed on a `busy` machine,
    or bimodal samples)."""
    if result.status != "ok":
        return "-"
    if result.conforms is False:
        return "non-conforming"
    if result.impl == BASELINE:
        return "baseline"
    if result.vs_native is None:
        return "-"
    return ratio_cell(Ratio(result.vs_native, result.vs_native_ci, result.vs_native_verdict,
                            BUSY if busy else BIMODAL))


def ratio_cell(ratio: Ratio) -> str:
    """A speed-up as `bench`'s and `run`'s tables show it: '1.30x (1.20-1.40)', or what stands
    in for it when it is no claim (within noise, not judged, no interval)."""
    if ratio.not_judged:
        return ratio.not_judged_text
    if ratio.within_noise:
        return WITHIN_NOISE
    if ratio.ci:
        return f"{ratio.value:.2f}x ({ratio.ci[0]:.2f}-{ratio.ci[1]:.2f})"
    return f"{ratio.value:.2f}x (no interval)"


def _median(result: BenchResult) -> str:
    return "failed" if result.status == "failed" else _seconds(result.median_s)


def _iqr(result: BenchResult) -> str:
    if result.iqr_s is None or not result.median_s:
        return "-"
    return f"{result.iqr_s / result.median_s:.0%}" + (" noisy" if result.noisy else "")


def _seconds(value: float | None) -> str:
    return units.seconds(value) or "-"


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _notes(result: BenchResult) -> list[str]:
    """One line per thing to know about a result: why it failed or does not conform, why it
    was not checked, the solver's effort, the warnings it raised."""
    impl = result.impl
    if result.status != "ok":
        return [f"{impl}: {result.status}: {result.reason}"]
    notes = []
    if result.bimodal and result.samples_s:
        fast, slow = min(result.samples_s), max(result.samples_s)
        notes.append(f"{impl}: bimodal samples ({_seconds(fast)} to {_seconds(slow)}): some "
                     "calls ran at another speed, its speed-up is not judged")
    if result.conforms is False:
        notes.append(f"{impl}: non-conforming: {result.conformance_note}")
    elif result.conforms is None and result.conformance_note:
        notes.append(f"{impl}: conformance {result.conformance_note}")
    solver = [f"{name} {value}" for name, value in (result.solver or {}).items()
              if name in SOLVER_NOTES and value]
    if solver:
        notes.append(f"{impl}: solver {', '.join(solver)}")
    notes.extend(f"{impl}: warning: {warning}" for warning in result.warnings)
    return notes
