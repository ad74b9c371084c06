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
- Peak memory: CUDA `max_memory_allocated` above what was allocated before the call; on CPU the
  growth of the resident set's high-water mark (Linux /proc, reset through clear_refs) — an
  estimate, since allocators keep freed memory around.
- The machine's fp32 GEMM peak is measured once per run and thread count: a square matmul grown
  until one call takes `GEMM_TARGET_S`, best of a few.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable
from contextlib import contextmanager
from dataclasses import dataclass
from time import perf_counter

import torch

MIN_SAMPLE_S = 1e-3
WARMUP_S = 0.05
GEMM_TARGET_S = 0.02
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
    """Median and interquartile range of per-call times, from `repeats` samples of `number` calls."""

    median_s: float
    iqr_s: float
    repeats: int
    number: int


def summarize(samples: list[float], number: int) -> Summary:
    if len(samples) < 2:
        return Summary(samples[0], 0.0, len(samples), number)
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Summary(statistics.median(samples), q3 - q1, len(samples), number)


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
                        sync: Callable[[], None], policy: RepeatPolicy
                        ) -> tuple[dict[Hashable, list[float]], dict[Hashable, Exception]]:
    """Samples of every candidate, one per candidate per round, in a rotating order.

    A candidate that raises stops being timed; its exception is returned and the others go on.
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
            try:
                samples[key].append(measure(calls[key], sync, numbers[key]))
            except Exception as exc:  # the implementation's failure is a result, not our crash
                errors[key] = exc
        rounds += 1


def peak_memory_bytes(fn: Callable[[], object], device: str) -> int | None:
    """Memory one call of `fn` needs above what was in use before it; None where unknown."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    if not _reset_rss_peak():
        return None
    before = _proc_status_kib("VmRSS")
    fn()
    return max(0, _proc_status_kib("VmHWM") - before) * 1024


def _reset_rss_peak() -> bool:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def gemm_peak(device: str = "cpu", dtype: torch.dtype = torch.float32, repeats: int = 10) -> dict:
    """This machine's measured square-GEMM rate at the current thread count.

    The matrix grows (doubling from 256) until one multiply takes GEMM_TARGET_S or reaches the
    device's cap; the peak is the best of `repeats` timings at that size.
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
    best = min(measure(lambda: torch.mm(a, b, out=out), sync) for _ in range(repeats))
    return {
        "device": kind,
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "n": n,
        "gflops": 2 * n**3 / best / 1e9,
        # On CUDA, fp32 matmuls may run as TF32; the peak is only comparable when this matches.
        "tf32": torch.backends.cuda.matmul.allow_tf32 if kind == "cuda" else None,
    }
