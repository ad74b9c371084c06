"""Run implementations side by side on workloads and produce the `rnnbench.bench/2` document.

Every (implementation, workload, metric) gets exactly one result (a `BenchResult`, written as
its `to_json`) with a status:
"ok" (timed), "unavailable" (the implementation cannot run here: its own reason, or no GPU),
"not_supported" (it lacks the kind or a feature the workload needs, e.g. float64 or backward),
or "failed" (construction, the first call or a timed call raised; the reason says which).
Nothing is dropped, and one implementation's exception never costs the others their results.

Before anything is timed the machine is checked (`rnnbench.benchmarks.machine`), and before a
workload is timed every implementation's forward pass on it is compared with the reference
(`rnnbench.benchmarks.precheck`): a result that does not conform is timed, but its ratio to
the baseline is left out (null), so it never counts as a speed-up. Ratios carry a 95%
interval and a verdict from the raw samples (`rnnbench.benchmarks.statistics`), "not_judged"
on a busy machine.
See `rnnbench.benchmarks.timing` for how the times are taken.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from rnnbench.benchmarks.machine import (best_earlier_peak, load_average, machine_check,
                                         measure_usage)
from rnnbench.benchmarks.statistics import (BIMODAL_GAP, BIMODAL_MIN_SHARE, NOISY_IQR_FRACTION,
                                            is_bimodal, is_noisy, speedup)
from rnnbench.benchmarks.precheck import PRECHECK_BATCH, PRECHECK_STEPS, forward_conformance
from rnnbench.benchmarks.result import BenchResult
from rnnbench.benchmarks.tasks import Task, build_task
from rnnbench.benchmarks.timing import (RepeatPolicy, gemm_peak, measure, measure_interleaved,
                                        peak_memory_bytes, pinned_threads, sample_summary, synchronizer,
                                        warm_up)
from rnnbench.benchmarks.workloads import BACKWARD_METRICS, Workload
from rnnbench.environment import capture
from rnnbench.impls.base import Implementation
from rnnbench.errors import one_line
from rnnbench.documents import BASELINE, BENCH_SCHEMA

MAX_WARNINGS = 3

CONVENTIONS = {
    "median_s": "seconds per call: median over `repeats` samples, each the mean of `number` "
                "back-to-back calls after a warm-up; implementations interleaved round by round",
    "iqr_s": "interquartile range of the samples (seconds per call)",
    "samples_s": "every sample, in the order taken (seconds per call: each the mean of `number` "
                 "calls)",
    "noisy": f"iqr_s > {NOISY_IQR_FRACTION:.0%} of median_s: the median may move that much "
             "between runs",
    "bimodal": f"sorted, two neighbouring samples_s at least {BIMODAL_GAP:g}x apart with at "
               f"least {BIMODAL_MIN_SHARE:.0%} of them (and 2) on each side: some calls ran at "
               "another speed (contention); no verdict on its speed-up",
    "first_call_s": "the metric's first call on a freshly built module (lazy init, compilation); "
                    "metrics run in the workload's order on the same module",
    "forward": "inference: one forward call under torch.no_grad()",
    "forward_backward": "forward, then backward of a fixed random output gradient (or of the "
                        "cross-entropy loss with a classifier head); gradients w.r.t. input and weights",
    "train_step": "forward_backward, gradient clipping when the workload sets clip_norm, SGD step",
    "flops": "matmul FLOPs per call from rnnbench.reference.forward_flops; backward counts as 2x "
             "forward, so forward_backward and train_step count 3x; embeddings and heads not counted",
    "flops_no_input_gemm": "the same without the input projection (DeepBench's convention)",
    "gflops": "flops / median_s / 1e9",
    "peak_fraction": "gflops / the measured fp32 GEMM peak at the same device and threads "
                     "(float32 workloads only)",
    "vs_native": f"{BASELINE}'s median_s / this median_s (> 1 is faster than {BASELINE}); null "
                 f"when this result or {BASELINE}'s does not conform (conforms false)",
    "vs_native_ci": "95% percentile-bootstrap interval of vs_native from both results' samples_s "
                    "(scipy.stats.bootstrap, 2000 resamples of each, seeded)",
    "vs_native_verdict": "faster (interval above 1), slower (below 1), within_noise (it "
                         "contains 1.0: not a speed-up), or not_judged (no claim either way: "
                         "machine_check found the machine busy, or this result's or "
                         f"{BASELINE}'s samples are bimodal)",
    "conforms": "one forward pass on the workload's configuration (batch <= "
                f"{PRECHECK_BATCH}, steps <= {PRECHECK_STEPS}, the workload's dtype; implicit: "
                "float64) matched the float64 reference within the conformance suite's "
                "tolerance: true, false, or null (not checked; conformance_note says why)",
    "threads": "torch's intra-op thread count in effect when the result was timed",
    "tokens_per_s": "batch x steps / median_s",
    "peak_mem_bytes": "the most bytes torch had allocated at once during one call, above what was "
                      "allocated before it (CUDA: max_memory_allocated; CPU: the profiler's "
                      "allocation events)",
    "peak_gflops": "the fp32 GEMM peak: the median of several timed square multiplies, run by "
                   "the faster of torch's libraries at that size (machine_check has every run, "
                   "the IQR and the library)",
    "machine_check": "taken before timing: other processes' share of the CPU time and the "
                     "hypervisor's steal over a short window, the load averages, the GEMM peak's "
                     "spread and the peak against the best an earlier run in the same results "
                     "folder measured on this processor, thread count and TF32 setting "
                     "(best_peak_gflops: the best known, this run's included); busy with one "
                     "reason per signal past its limit",
    "solver": "the implicit solver's iteration counts from the last call (model.last_solver_stats)",
}

Progress = Callable[[int, int, str], None]
# watch(implementation or None, workload or None, phase): what is about to run.
Watch = Callable[[str | None, str | None, str], None]


def run_benchmarks(impls: Iterable[Implementation], workloads: Iterable[Workload], device: str = "cpu",
                   *, threads: int | None = None, budget_s: float | None = None, seed: int = 0,
                   progress: Progress | None = None,
                   checkpoint: Callable[[dict], None] | None = None,
                   wait: Callable[[], None] | None = None, preset: str | None = None,
                   history: str | os.PathLike | None = None,
                   watch: Watch | None = None) -> dict:
    """Time every implementation on every workload; return the rnnbench.bench/2 document.

    `device`, `threads` apply to workloads that do not name their own; `budget_s` overrides the
    workloads' timing budgets; `preset` names where the workloads came from (recorded, as is the
    budget, so that the report can say what was measured and how). `progress(done, total, label)` is called as results come in;
    `checkpoint(document)` after each workload, so an interrupted run keeps what it finished;
    `watch(impl, workload, phase)` before every phase of one implementation's work
    (construction, pre-check, first call, warm-up, each timed sample, the memory call) and of
    the machine's check, so that a caller watching from outside knows who hung or crashed.

    Each workload is prepared (modules built, pre-checked against the reference, first calls
    made) and then timed. With `wait`, every workload is prepared first, then `wait()` is called
    and only then is the machine checked and anything timed: the caller's other work may share
    the machine until `wait` returns (all prepared modules are held in memory meanwhile).
    `history` is a results folder whose earlier bench documents say the best GEMM peak this
    processor reached (`machine.best_earlier_peak`); a peak far below it means a busy machine.
    """
    impls, workloads = list(impls), list(workloads)
    watch = watch or _unwatched
    threads = threads or torch.get_num_threads()
    with pinned_threads(threads):
        environment = capture()
    doc = {
        "schema": BENCH_SCHEMA,
        "environment": environment,
        "device": device,
        "threads": threads,
        "preset": preset,
        "budget_s": budget_s,
        "peak_gflops": None,
        "machine_check": None,
        "peaks": [],
        "conventions": CONVENTIONS,
        "workloads": [w.to_dict() for w in workloads],
        "results": [],
    }
    total = len(impls) * sum(len(w.metrics) for w in workloads)

    def prepared():
        for workload in workloads:
            with pinned_threads(workload.threads or threads):
                yield _prepare(impls, workload, workload.device or device, seed,
                               _counter(progress, len(doc["results"]), total), watch)

    peaks: dict[tuple[str, int], dict] = {}
    preparing = prepared()
    if wait:
        preparing = list(preparing)
        wait()
    # While this process waits and nothing of ours runs; then the peak at the run's settings.
    watch(None, None, "the machine check")
    usage = measure_usage()
    with pinned_threads(threads):
        peak = _peak(peaks, device, threads)
    doc["peak_gflops"] = peak["gflops"] if peak else None
    best = (best_earlier_peak(history, environment, device, threads, (peak or {}).get("tf32"))
            if history else None)
    doc["machine_check"] = machine_check(peak or {}, usage, load_avg=load_average(),
                                         best_peak=best)
    busy = doc["machine_check"]["busy"]
    for ready in preparing:
        workload = ready.workload
        with pinned_threads(workload.threads or threads):
            peak = _peak(peaks, ready.device, workload.threads or threads)
            policy = RepeatPolicy(min_repeats=workload.min_repeats, budget_s=budget_s or workload.budget_s)
            _time(ready, peak and peak["gflops"], policy, busy,
                  _counter(progress, len(doc["results"]), total), watch)
        doc["results"] += [result.to_json() for result in ready.results.values()]
        doc["peaks"] = list(peaks.values())
        if checkpoint:
            checkpoint(doc)
    if progress:
        progress(total, total, "done")
    return doc


def _unwatched(impl: str | None, workload: str | None, phase: str) -> None:
    return None


def _counter(progress: Progress | None, done: int, total: int) -> Callable[[int, str], None]:
    def report(finished: int, label: str) -> None:
        if progress:
            progress(done + finished, total, label)
    return report


def _peak(peaks: dict, device: str, threads: int) -> dict | None:
    """The fp32 GEMM peak at (device, threads), measured the first time it is needed."""
    kind = torch.device(device).type
    if kind == "cuda" and not torch.cuda.is_available():
        return None
    key = (kind, threads if kind == "cpu" else 0)
    if key not in peaks:
        peaks[key] = gemm_peak(device)
    return peaks[key]


@dataclass
class Prepared:
    """A workload ready to be timed: every result (statuses so far), the built tasks, and per
    metric the calls whose first call went through."""

    workload: Workload
    device: str
    results: dict[tuple[str, str], BenchResult]
    tasks: dict[str, Task]
    calls: dict[str, dict[str, Callable[[], object]]] = field(default_factory=dict)


def _prepare(impls: list[Implementation], workload: Workload, device: str, seed: int,
             report: Callable[[int, str], None], watch: Watch) -> Prepared:
    """Build every implementation's module, pre-check it against the reference, and make each
    metric's first call (timed: lazy initialisation and compilation happen there)."""
    ready = Prepared(workload, device, {}, {})
    results = ready.results
    for impl in impls:
        for metric in workload.metrics:
            results[impl.name, metric] = unmeasured(impl.name, workload, device, metric)
        blocked = availability(impl, workload, device)
        if blocked:
            _mark(results, impl.name, workload.metrics, *blocked)
            continue
        try:
            watch(impl.name, workload.name, "construction")
            ready.tasks[impl.name] = build_task(impl, workload, device, seed)
        except Exception as exc:  # a broken constructor is the implementation's result
            _mark(results, impl.name, workload.metrics, "failed", f"construction: {one_line(exc)}")
            for metric in workload.metrics:
                results[impl.name, metric].conformance_note = "not checked: construction failed"
            continue
        report(0, f"{workload.name} pre-check of {impl.name}")
        watch(impl.name, workload.name, "the pre-check")
        conformance = forward_conformance(impl, workload, device, seed)
        for metric in workload.metrics:
            results[impl.name, metric].conforms = conformance.conforms
            results[impl.name, metric].conformance_note = conformance.note or None
    by_name = {impl.name: impl for impl in impls}
    sync = synchronizer(device)
    for metric in workload.metrics:
        report(0, f"{workload.name} {metric} first calls")
        ready.calls[metric] = {}
        for name, task in ready.tasks.items():
            missing = missing_features(by_name[name], workload, device, metric)
            if missing:
                _mark(results, name, [metric], "not_supported", f"does not support {', '.join(missing)}")
                continue
            result = results[name, metric]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    watch(name, workload.name, f"the first call of {metric}")
                    result.first_call_s = measure(task.steps[metric], sync)
                    ready.calls[metric][name] = task.steps[metric]
                except Exception as exc:
                    _mark(results, name, [metric], "failed", f"first call: {one_line(exc)}")
            result.warnings = _first_lines(caught)
    return ready


def _time(ready: Prepared, peak: float | None, policy: RepeatPolicy, busy: bool,
          report: Callable[[int, str], None], watch: Watch) -> None:
    """Warm-up, interleaved timing, memory and solver statistics, metric by metric; then the
    ratios to the baseline (not judged when the machine is `busy`)."""
    impls = len({name for name, _ in ready.results})
    for index, metric in enumerate(ready.workload.metrics):
        report(index * impls, f"{ready.workload.name} {metric}")
        _time_metric(ready, metric, peak, policy, watch)
    _ratios(ready.results, busy)
    report(len(ready.workload.metrics) * impls, f"{ready.workload.name} done")


def _time_metric(ready: Prepared, metric: str, peak: float | None, policy: RepeatPolicy,
                 watch: Watch) -> None:
    sync = synchronizer(ready.device)
    workload = ready.workload.name
    pinned = torch.get_num_threads()
    results, calls, numbers = ready.results, {}, {}
    for name, call in ready.calls[metric].items():
        result = results[name, metric]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                watch(name, workload, f"the warm-up of {metric}")
                numbers[name] = warm_up(call, sync, min_sample_s=ready.workload.min_sample_s)
                calls[name] = call
            except Exception as exc:
                _mark(results, name, [metric], "failed", f"warm-up: {one_line(exc)}")
        result.warnings = _first_lines(caught, result.warnings)
    with warnings.catch_warnings():
        # Recorded from the first call and warm-up; repeating them would flood the output.
        warnings.simplefilter("ignore")
        samples, errors = measure_interleaved(calls, numbers, sync, policy,
                                              before=lambda name: watch(name, workload,
                                                                        f"timing {metric}"))
        # The count in effect while timed: an implementation may have changed torch's.
        used = torch.get_num_threads()
        for name in calls:
            if name in errors:
                _mark(results, name, [metric], "failed", f"timed call: {one_line(errors[name])}")
                continue
            try:
                watch(name, workload, f"the memory call of {metric}")
                memory = peak_memory_bytes(calls[name], ready.device)
            except Exception as exc:
                _mark(results, name, [metric], "failed", f"memory call: {one_line(exc)}")
                continue
            _record(results[name, metric], ready.workload,
                    sample_summary(samples[name], numbers[name]), peak, memory,
                    ready.tasks[name].solver_stats(), used)
            if used != pinned:
                results[name, metric].warnings.append(
                    f"torch's thread count changed from {pinned} to {used} while timed")
    torch.set_num_threads(pinned)


def _first_lines(caught, earlier: list[str] = ()) -> list[str]:
    """The distinct first lines of the warnings caught (after `earlier` ones), at most MAX_WARNINGS."""
    lines = dict.fromkeys([*earlier, *(str(w.message).splitlines()[0] for w in caught)])
    return list(lines)[:MAX_WARNINGS]


def _record(result: BenchResult, workload: Workload, summary, peak: float | None,
            memory: int | None, solver: dict | None, threads: int) -> None:
    """Fill in a timed result: the samples' summary and the numbers derived from it."""
    result.status = "ok"
    result.threads = threads
    result.median_s, result.iqr_s = summary.median_s, summary.iqr_s
    result.samples_s = list(summary.samples_s)
    result.noisy = is_noisy(summary.median_s, summary.iqr_s)
    result.bimodal = is_bimodal(summary.samples_s)
    result.repeats, result.number = summary.repeats, summary.number
    if result.flops is not None:
        result.gflops = result.flops / summary.median_s / 1e9
    if result.flops_no_input_gemm is not None:
        result.gflops_no_input_gemm = result.flops_no_input_gemm / summary.median_s / 1e9
    result.peak_gflops = peak
    fp32 = workload.dtype == "float32"
    result.peak_fraction = (result.gflops / peak if result.gflops is not None and peak and fp32
                            else None)
    result.tokens_per_s = workload.tokens / summary.median_s
    result.peak_mem_bytes = memory
    result.solver = solver


def _ratios(results: dict[tuple[str, str], BenchResult], busy: bool) -> None:
    """vs_native, its interval and verdict, for every result with a speed-up over the
    baseline's result on the same metric."""
    for (_, metric), result in results.items():
        base = results.get((BASELINE, metric))
        ratio = speedup([(base, result)], busy=busy) if base is not None else None
        if ratio is not None:
            result.vs_native, result.vs_native_ci, result.vs_native_verdict = (
                ratio.value, ratio.ci, ratio.verdict)


def unmeasured(impl: str, workload: Workload, device: str, metric: str) -> BenchResult:
    """A result of implementation `impl` not measured yet: its labels, and the FLOPs its
    workload and metric count."""
    return BenchResult(
        impl=impl, kind=workload.kind, workload=workload.name,
        device=torch.device(device).type, dtype=workload.dtype,
        threads=torch.get_num_threads(), batch=workload.batch, steps=workload.steps,
        metric=metric, conformance_note="not checked: not timed",
        flops=workload.flops(metric), flops_no_input_gemm=workload.flops(metric, input_gemm=False))


def _mark(results: dict[tuple[str, str], BenchResult], name: str, metrics, status: str,
          reason: str) -> None:
    for metric in metrics:
        results[name, metric].status = status
        results[name, metric].reason = reason


def availability(impl: Implementation, workload: Workload, device: str) -> tuple[str, str] | None:
    """("unavailable", reason) or ("not_supported", reason) when `impl` cannot run `workload` on
    `device` at all; None when it can be built (metrics may still need missing features)."""
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        return "unavailable", "no CUDA device here"
    reason = impl.unavailable_reason()
    if reason:
        return "unavailable", reason
    if workload.kind not in impl.kinds:
        return "not_supported", (f"provides no {workload.kind!r} "
                                 f"(it provides {', '.join(impl.kinds) or 'nothing'})")
    return None


def missing_features(impl: Implementation, workload: Workload, device: str, metric: str) -> list[str]:
    """The features running `metric` of `workload` on `device` needs that `impl` lacks."""
    how = {"dtype": workload.dtype, "device": torch.device(device).type,
           "backward": metric in BACKWARD_METRICS, "extra": ("packed",) if workload.packed else ()}
    return impl.missing_features(workload.config, **how)


def skip_reason(impl: Implementation, workload: Workload, device: str, metric: str) -> str | None:
    """Why `metric` of `workload` cannot be timed for `impl` on `device`, or None (for the asv and
    pytest-benchmark suites, which skip such combinations with this reason)."""
    if metric not in workload.metrics:
        return f"workload {workload.name} does not time {metric}"
    blocked = availability(impl, workload, device)
    if blocked:
        return f"{impl.name}: {blocked[0]}: {blocked[1]}"
    missing = missing_features(impl, workload, device, metric)
    return f"{impl.name} does not support {', '.join(missing)}" if missing else None
