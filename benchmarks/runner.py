"""Run implementations side by side on workloads and produce the `rnnbench.bench/1` document.

Every (implementation, workload, metric) gets exactly one result with a status:
"ok" (timed), "unavailable" (the implementation cannot run here: its own reason, or no GPU),
"not_supported" (it lacks the kind or a feature the workload needs, e.g. float64 or backward),
or "failed" (construction, the first call or a timed call raised; the reason says which).
Nothing is dropped, and one implementation's exception never costs the others their results.
See `rnnbench.benchmarks.timing` for how the times are taken.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable

import torch

from rnnbench.benchmarks.tasks import build_task
from rnnbench.benchmarks.timing import (RepeatPolicy, gemm_peak, measure, measure_interleaved,
                                        peak_memory_bytes, pinned_threads, summarize, synchronizer,
                                        warm_up)
from rnnbench.benchmarks.workloads import BACKWARD_METRICS, Workload
from rnnbench.environment import capture
from rnnbench.impls.base import Implementation
from rnnbench.impls.registry import one_line
from rnnbench.results import BASELINE, BENCH_SCHEMA

MAX_WARNINGS = 3

CONVENTIONS = {
    "median_s": "seconds per call: median over `repeats` samples, each the mean of `number` "
                "back-to-back calls after a warm-up; implementations interleaved round by round",
    "iqr_s": "interquartile range of the samples (seconds per call)",
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
    "vs_native": f"{BASELINE}'s median_s / this median_s (> 1 is faster than {BASELINE})",
    "tokens_per_s": "batch x steps / median_s",
    "peak_mem_bytes": "CUDA: max_memory_allocated above the memory in use before one call; "
                      "CPU: growth of the resident set's high-water mark during one call (estimate)",
    "solver": "the implicit solver's iteration counts from the last call (model.last_solver_stats)",
}

Progress = Callable[[int, int, str], None]


def run_benchmarks(impls: Iterable[Implementation], workloads: Iterable[Workload], device: str = "cpu",
                   *, threads: int | None = None, budget_s: float | None = None, seed: int = 0,
                   progress: Progress | None = None,
                   checkpoint: Callable[[dict], None] | None = None) -> dict:
    """Time every implementation on every workload; return the rnnbench.bench/1 document.

    `device`, `threads` apply to workloads that do not name their own; `budget_s` overrides the
    workloads' timing budgets. `progress(done, total, label)` is called as results come in;
    `checkpoint(document)` after each workload, so an interrupted run keeps what it finished.
    """
    impls, workloads = list(impls), list(workloads)
    threads = threads or torch.get_num_threads()
    peaks: dict[tuple[str, int], dict] = {}
    doc = {
        "schema": BENCH_SCHEMA,
        "environment": capture(),
        "device": device,
        "threads": threads,
        "peak_gflops": None,
        "peaks": [],
        "conventions": CONVENTIONS,
        "workloads": [w.to_dict() for w in workloads],
        "results": [],
    }
    with pinned_threads(threads):
        doc["peak_gflops"] = _peak(peaks, device, threads)
    total = len(impls) * sum(len(w.metrics) for w in workloads)
    for workload in workloads:
        where = workload.device or device
        with pinned_threads(workload.threads or threads):
            peak = _peak(peaks, where, workload.threads or threads)
            policy = RepeatPolicy(min_repeats=workload.min_repeats, budget_s=budget_s or workload.budget_s)
            for result in _run_workload(impls, workload, where, peak, policy, seed,
                                        _counter(progress, len(doc["results"]), total)):
                doc["results"].append(result)
        doc["peaks"] = list(peaks.values())
        if checkpoint:
            checkpoint(doc)
    if progress:
        progress(total, total, "done")
    return doc


def _counter(progress: Progress | None, done: int, total: int) -> Callable[[int, str], None]:
    def report(finished: int, label: str) -> None:
        if progress:
            progress(done + finished, total, label)
    return report


def _peak(peaks: dict, device: str, threads: int) -> float | None:
    """The fp32 GEMM peak at (device, threads), measured the first time it is needed."""
    kind = torch.device(device).type
    if kind == "cuda" and not torch.cuda.is_available():
        return None
    key = (kind, threads if kind == "cpu" else 0)
    if key not in peaks:
        peaks[key] = gemm_peak(device)
    return peaks[key]["gflops"]


def _run_workload(impls: list[Implementation], workload: Workload, device: str, peak: float | None,
                  policy: RepeatPolicy, seed: int, report: Callable[[int, str], None]) -> list[dict]:
    results: dict[tuple[str, str], dict] = {}
    tasks = {}
    for impl in impls:
        for metric in workload.metrics:
            results[impl.name, metric] = _result(impl, workload, device, metric)
        verdict = availability(impl, workload, device)
        if verdict:
            _mark(results, impl.name, workload.metrics, *verdict)
            continue
        try:
            tasks[impl.name] = build_task(impl, workload, device, seed)
        except Exception as exc:  # a broken constructor is the implementation's result
            _mark(results, impl.name, workload.metrics, "failed", f"construction: {one_line(exc)}")
    by_name = {impl.name: impl for impl in impls}
    for index, metric in enumerate(workload.metrics):
        report(index * len(impls), f"{workload.name} {metric}")
        runnable = {}
        for name, task in tasks.items():
            missing = missing_features(by_name[name], workload, device, metric)
            if missing:
                _mark(results, name, [metric], "not_supported", f"does not support {', '.join(missing)}")
            else:
                runnable[name] = task
        _time_metric(runnable, workload, device, metric, peak, policy, results)
    _ratios(results)
    report(len(workload.metrics) * len(impls), f"{workload.name} done")
    return list(results.values())


def _time_metric(tasks: dict, workload: Workload, device: str, metric: str, peak: float | None,
                 policy: RepeatPolicy, results: dict) -> None:
    """First call, warm-up, interleaved timing, memory and solver statistics for one metric."""
    sync = synchronizer(device)
    calls, numbers = {}, {}
    for name, task in tasks.items():
        call = task.steps[metric]
        result = results[name, metric]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result["first_call_s"] = measure(call, sync)
                numbers[name] = warm_up(call, sync)
            calls[name] = call
        except Exception as exc:
            _mark(results, name, [metric], "failed", f"first call: {one_line(exc)}")
        result["warnings"] = sorted({str(w.message).splitlines()[0] for w in caught})[:MAX_WARNINGS]
    with warnings.catch_warnings():
        # Recorded from the first call and warm-up above; repeating them would flood the output.
        warnings.simplefilter("ignore")
        samples, errors = measure_interleaved(calls, numbers, sync, policy)
        for name in calls:
            if name in errors:
                _mark(results, name, [metric], "failed", f"timed call: {one_line(errors[name])}")
                continue
            try:
                memory = peak_memory_bytes(calls[name], device)
            except Exception as exc:
                _mark(results, name, [metric], "failed", f"memory call: {one_line(exc)}")
                continue
            results[name, metric].update(_numbers(workload, metric, summarize(samples[name], numbers[name]),
                                                  peak, memory, tasks[name].solver_stats()))


def _numbers(workload: Workload, metric: str, summary, peak: float | None, memory: int | None,
             solver: dict | None) -> dict:
    flops = workload.flops(metric)
    flops_recurrent = workload.flops(metric, input_gemm=False)
    gflops = flops / summary.median_s / 1e9 if flops is not None else None
    fp32 = workload.dtype == "float32"
    return {
        "status": "ok",
        "median_s": summary.median_s,
        "iqr_s": summary.iqr_s,
        "repeats": summary.repeats,
        "number": summary.number,
        "flops": flops,
        "flops_no_input_gemm": flops_recurrent,
        "gflops": gflops,
        "gflops_no_input_gemm": (flops_recurrent / summary.median_s / 1e9
                                 if flops_recurrent is not None else None),
        "peak_gflops": peak,
        "peak_fraction": gflops / peak if gflops is not None and peak and fp32 else None,
        "tokens_per_s": workload.tokens / summary.median_s,
        "peak_mem_bytes": memory,
        "solver": solver,
    }


def _ratios(results: dict) -> None:
    for (name, metric), result in results.items():
        base = results.get((BASELINE, metric))
        if result["status"] == "ok" and base and base["status"] == "ok":
            result["vs_native"] = base["median_s"] / result["median_s"]


def _result(impl: Implementation, workload: Workload, device: str, metric: str) -> dict:
    """A result with every field present; timing fields stay None unless the status is ok."""
    return {
        "impl": impl.name, "kind": workload.kind, "workload": workload.name,
        "device": torch.device(device).type, "dtype": workload.dtype,
        "threads": torch.get_num_threads(), "batch": workload.batch, "steps": workload.steps,
        "metric": metric, "status": None, "reason": None,
        "median_s": None, "iqr_s": None, "repeats": 0, "number": None, "first_call_s": None,
        "flops": workload.flops(metric), "flops_no_input_gemm": workload.flops(metric, input_gemm=False),
        "gflops": None, "gflops_no_input_gemm": None, "peak_gflops": None, "peak_fraction": None,
        "vs_native": None, "tokens_per_s": None, "peak_mem_bytes": None, "solver": None,
        "warnings": [],
    }


def _mark(results: dict, name: str, metrics, status: str, reason: str) -> None:
    for metric in metrics:
        results[name, metric].update(status=status, reason=reason)


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
           "backward": metric in BACKWARD_METRICS}
    return impl.missing_features(workload.config, **how)


def skip_reason(impl: Implementation, workload: Workload, device: str, metric: str) -> str | None:
    """Why `metric` of `workload` cannot be timed for `impl` on `device`, or None (for the asv and
    pytest-benchmark suites, which skip such combinations with this reason)."""
    if metric not in workload.metrics:
        return f"workload {workload.name} does not time {metric}"
    verdict = availability(impl, workload, device)
    if verdict:
        return f"{impl.name}: {verdict[0]}: {verdict[1]}"
    missing = missing_features(impl, workload, device, metric)
    return f"{impl.name} does not support {', '.join(missing)}" if missing else None
