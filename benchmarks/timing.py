"""The timing methodology: how one number per (implementation, workload, metric) is measured.

- Threads are pinned (`pinned_threads`) and the count recorded with every result.
- Every sample is bracketed by a device synchronisation (`torch.cuda.synchronize` on CUDA), so
  asynchronous kernel launches are timed to completion.
- The first call is timed on its own (it includes lazy initialisation and compilation); then a
  warm-up that also chooses how many back-to-back calls make one sample (at least `MIN_SAMPLE_S`
  long, so the timer's own cost stays far below the time measured).
- Implementations are interleaved: each round takes one sample of every candidate, in an order
  rotated per round, so drift (thermal, other processes) hits all of them alike.
- Rounds continue until every candidate has `min_repeats` samples and the time budget is spent
  (or `max_repeats` is reached); the summary is the median and the interquartile range.
- Every sample is kept (`Summary.samples_s`, seconds per call), so intervals and rank tests can
  be computed from the raw data later (`rnnbench.benchmarks.statistics`, `rnnbench compare`).
- Peak memory: the most bytes the call had allocated at once above what was allocated before it.
  CUDA: `max_memory_allocated`. CPU: the allocation and free events torch's profiler records for
  the call (every tensor torch allocates, in whatever thread or compiled kernel), summed in
  order; memory outside torch's allocator (NumPy, a C++ extension's own `malloc`) is not seen.
- The machine's fp32 GEMM peak is measured once per run and thread count: a square matmul grown
  until one call takes `GEMM_TARGET_S`, then timed `GEMM_RUNS` times; the peak is the median of
  those rates, with their IQR as its spread (the best of them would flatter a busy machine). On
  the CPU the multiply is run by the faster of torch's two libraries at that size, MKL
  (`torch.mm`) or oneDNN (torch.nn's LSTM runs on it): MKL runs its AVX2 code on some AVX-512
  CPUs, where oneDNN's measured twice its rate (a 2-core AMD EPYC, Zen 5).
"""
from __future__ import annotations

import math
import os
import statistics
import sys
from collections.abc import Callable, Hashable
from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter

import torch

MIN_SAMPLE_S = 1e-3
WARMUP_S = 0.05
GEMM_TARGET_S = 0.02
GEMM_RUNS = 7
GEMM_MAX_N = {"cpu": 4096, "cuda": 8192}  # 8192: ~1.1 TFLOP, enough to saturate any GPU


@dataclass(frozen=True)
class RepeatPolicy:
    """When to stop taking rounds of samples: enough of them, and the budget spent."""

    min_repeats: int = 7
    max_repeats: int = 100
    budget_s: float = 0.5  # per candidate

    def more(self, rounds: int, elapsed_s: float, candidates: int) -> bool:
        if rounds < self.min_repeats:
            return True
        return rounds < self.max_repeats and elapsed_s < self.budget_s * candidates


@dataclass(frozen=True)
class Summary:
    """Median and interquartile range of per-call times, from `repeats` samples of `number`
    calls each; `samples_s` are the samples themselves (seconds per call, in the order taken)."""

    median_s: float
    iqr_s: float
    repeats: int
    number: int
    samples_s: tuple[float, ...] = ()


def sample_summary(samples: list[float], number: int) -> Summary:
    median, iqr = median_and_iqr(samples)
    return Summary(median, iqr, len(samples), number, tuple(samples))


def median_and_iqr(values: list[float]) -> tuple[float, float]:
    """The median and the interquartile range (0 for a single value)."""
    if len(values) < 2:
        return values[0], 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


@contextmanager
def pinned_threads(threads: int):
    """Run the block with torch's intra-op thread count set to `threads`, then restore it."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def synchronizer(device: str) -> Callable[[], None]:
    """A function that waits for all queued work on `device` (a no-op on CPU)."""
    if torch.device(device).type == "cuda":
        return torch.cuda.synchronize
    return _no_sync


def _no_sync() -> None:
    return None


def measure(fn: Callable[[], object], sync: Callable[[], None], number: int = 1) -> float:
    """Seconds per call over `number` back-to-back calls, bracketed by device syncs."""
    sync()
    start = perf_counter()
    for _ in range(number):
        fn()
    sync()
    return (perf_counter() - start) / number


def warm_up(fn: Callable[[], object], sync: Callable[[], None], *, min_sample_s: float = MIN_SAMPLE_S,
            warmup_s: float = WARMUP_S) -> int:
    """Call `fn` for at least `warmup_s` (and twice at least); return the calls per sample.

    The count comes from the fastest call seen, so one call slowed by the scheduler cannot
    shrink it.
    """
    number, spent, calls, fastest = 1, 0.0, 0, math.inf
    while True:
        per_call = measure(fn, sync, number)
        spent += per_call * number
        calls += number
        fastest = min(fastest, per_call)
        wanted = max(1, math.ceil(min_sample_s / max(fastest, 1e-9)))
        if number >= wanted and spent >= warmup_s and calls >= 2:
            return number
        number = max(number, wanted)


def measure_interleaved(calls: dict[Hashable, Callable[[], object]], numbers: dict[Hashable, int],
                        sync: Callable[[], None], policy: RepeatPolicy,
                        before: Callable[[Hashable], None] | None = None
                        ) -> tuple[dict[Hashable, list[float]], dict[Hashable, Exception]]:
    """Samples of every candidate, one per candidate per round, in a rotating order.

    A candidate that raises stops being timed; its exception is returned and the others go on.
    `before(key)` is called before each sample, outside the time taken.
    """
    samples: dict[Hashable, list[float]] = {key: [] for key in calls}
    errors: dict[Hashable, Exception] = {}
    start, rounds = perf_counter(), 0
    while True:
        live = [key for key in calls if key not in errors]
        if not live or not policy.more(rounds, perf_counter() - start, len(live)):
            return samples, errors
        shift = rounds % len(live)
        for key in live[shift:] + live[:shift]:
            if before:
                before(key)
            try:
                samples[key].append(measure(calls[key], sync, numbers[key]))
            except Exception as exc:  # the implementation's failure is a result, not our crash
                errors[key] = exc
        rounds += 1


def peak_memory_bytes(fn: Callable[[], object], device: str) -> int | None:
    """Memory one call of `fn` allocates at its peak above what was allocated before it; None
    where unknown."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    return cpu_peak_bytes(fn)


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """The highest running total of the bytes torch allocated (positive) and freed (negative)
    during one call of `fn`, from the profiler's memory events in the order they happened."""
    from torch.profiler import ProfilerActivity, profile

    # Quiet: the profiler's C++ side prints a line on start and stop, and warns about blocks
    # freed during the call that were allocated before it (those frees are left out, rightly).
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recorder:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in recorder.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    peak = running = 0
    for _, nbytes in events:
        running += nbytes
        peak = max(peak, running)
    return peak


@contextmanager
def _quiet_stderr():
    """File descriptor 2 sent to /dev/null for the block (output written by C++ code too)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def gemm_peak(device: str = "cpu", dtype: torch.dtype = torch.float32, runs: int = GEMM_RUNS) -> dict:
    """This machine's measured square-GEMM rate at the current thread count.

    The matrix grows (doubling from 256) until one multiply takes GEMM_TARGET_S or reaches the
    device's cap; that multiply is then timed `runs` times, by the fastest library at that size
    ("library": `gemm_libraries`). "gflops" is the median rate, "iqr_gflops" its interquartile
    range, "samples" every rate.
    """
    kind = torch.device(device).type
    sync = synchronizer(device)
    n = 256
    while True:
        a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
        out = torch.empty(n, n, device=device, dtype=dtype)
        torch.mm(a, b, out=out)  # warm-up: library init, first-touch of the output
        # The fastest of three, so one call slowed by another process cannot stop the growth.
        seconds = min(measure(lambda: torch.mm(a, b, out=out), sync) for _ in range(3))
        if seconds >= GEMM_TARGET_S or n >= GEMM_MAX_N[kind]:
            break
        n *= 2
    library, multiply = fastest(gemm_libraries(a, b, out), sync)
    samples = [2 * n**3 / measure(multiply, sync) / 1e9 for _ in range(runs)]
    median, iqr = median_and_iqr(samples)
    return {
        "device": kind,
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "n": n,
        "library": library,
        "gflops": median,
        "iqr_gflops": iqr,
        "samples": samples,
        # On CUDA, fp32 matmuls may run as TF32; the peak is only comparable when this matches.
        "tf32": torch.backends.cuda.matmul.allow_tf32 if kind == "cuda" else None,
    }


def gemm_libraries(a: torch.Tensor, b: torch.Tensor,
                   out: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The ways torch can run a @ b here, by name: `torch.mm` (MKL on x86 CPUs, cuBLAS on
    CUDA), and on the CPU in float32 oneDNN through torch's mkldnn operator where it has one."""
    libraries = {"torch.mm": lambda: torch.mm(a, b, out=out)}
    if a.device.type == "cpu" and a.dtype == torch.float32:
        b_t = b.t().contiguous()  # the operator computes input @ weight^T
        try:
            linear = torch.ops.mkldnn._linear_pointwise
            linear(a, b_t, None, "none", [], "")
        except (AttributeError, RuntimeError):
            return libraries
        libraries["onednn"] = lambda: linear(a, b_t, None, "none", [], "")
    return libraries


def fastest(calls: dict[str, Callable[[], object]], sync: Callable[[], None],
            rounds: int = 3) -> tuple[str, Callable[[], object]]:
    """The name and call of the fastest of `calls`: each timed `rounds` times, round by round,
    the fastest single time wins."""
    best = {name: math.inf for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            best[name] = min(best[name], measure(call, sync))
    name = min(best, key=best.get)
    return name, calls[name]
