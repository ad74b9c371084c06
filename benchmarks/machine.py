"""Is the machine quiet enough to time on? A check taken before any timing, kept in the results.

Four signals, each judged against the machine's own numbers:

- **Other work** (load): the CPU time every process but this one used during a short window
  (`WINDOW_S`) while this one waited, from the kernel's counters in /proc/stat, as a fraction
  of the machine's capacity. Busy above OTHERS_LIMIT: a quarter of the cores kept busy by
  something else. The 1/5/15-minute load averages are recorded as well but not judged: they
  include rnnbench's own work of the last minutes (`rnnbench run` checks conformance on both
  cores right before it times), which the window leaves out.
- **Steal**: the share of CPU time the hypervisor gave to other guests in the same window.
  Busy above STEAL_LIMIT.
- **The GEMM peak's own spread** over several runs (`timing.gemm_peak`): busy when its IQR is
  more than PEAK_SPREAD_LIMIT of its median, since a matmul that cannot hold its speed for a
  fraction of a second will not let anything else hold its speed either. A quiet shared VM's
  own speed drifts too: on a 2-core AMD EPYC VM with nothing else running, 5 of 20 runs measured
  spreads of 10-16%; such drift moves every implementation alike and cancels in the round-by-
  round ratios (`rnnbench.benchmarks.statistics`), so only a larger spread means busy.
- **The GEMM peak against the best seen** on the same processor (CPU model, or GPU) at the same
  thread count and TF32 setting by earlier runs whose documents are in the same results
  folder (`best_earlier_peak`; each document carries the best it knew forward): busy below
  PEAK_DROP_LIMIT of it, as when every core is shared with other work the whole time.

Where /proc/stat does not exist (not Linux) the window gives nothing and only the peak is
judged; `steal_fraction` is then null. On a busy machine no speed-up is judged
(`rnnbench.benchmarks.statistics`).
"""
from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rnnbench.documents import BENCH_SCHEMAS, read_json
from rnnbench.environment import FUSED_MARCH
from rnnbench.errors import UsageError

WINDOW_S = 0.5
OTHERS_LIMIT = 0.25
STEAL_LIMIT = 0.05
PEAK_SPREAD_LIMIT = 0.20
PEAK_DROP_LIMIT = 0.5
WIDTH = 100
PROC_STAT = "/proc/stat"
CONTENTION_HINT = ("Under contention time on one thread (rnnbench bench --threads 1): torch.nn "
                   "with more threads than free cores collapses, its threads waiting for "
                   "descheduled siblings.")


@dataclass(frozen=True)
class CpuTimes:
    """The machine's cumulative CPU time in clock ticks, from /proc/stat's "cpu" line."""

    busy: int      # user + nice + system + irq + softirq (guest time is inside user)
    steal: int
    total: int     # busy + idle + iowait + steal


def parse_cpu_times(text: str) -> CpuTimes | None:
    """The aggregate "cpu" line of a /proc/stat text; None when it is not there."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            user, nice, system, idle, iowait, irq, softirq, steal = (
                [int(v) for v in fields[1:9]] + [0] * 8)[:8]
            busy = user + nice + system + irq + softirq
            return CpuTimes(busy, steal, busy + idle + iowait + steal)
    return None


def read_proc_stat(path: str = PROC_STAT) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


@dataclass(frozen=True)
class Usage:
    """What happened on the CPUs during the window: the fraction of their capacity that other
    processes used, and the fraction stolen by the hypervisor."""

    others_fraction: float
    steal_fraction: float


def measure_usage(window_s: float = WINDOW_S, read: Callable[[], str | None] = read_proc_stat,
                  sleep: Callable[[float], None] = time.sleep,
                  own_cpu_s: Callable[[], float] = time.process_time,
                  ticks_per_s: float | None = None) -> Usage | None:
    """Sample the CPU counters, wait `window_s`, sample again; None where they cannot be read.
    This process's own CPU time in the window (torch's worker threads may still spin) is
    taken out of the busy time."""
    ticks_per_s = ticks_per_s or os.sysconf("SC_CLK_TCK")
    first_text, own_before = read(), own_cpu_s()
    sleep(window_s)
    second_text, own_after = read(), own_cpu_s()
    if first_text is None or second_text is None:
        return None
    first, second = parse_cpu_times(first_text), parse_cpu_times(second_text)
    if first is None or second is None or second.total <= first.total:
        return None
    total = second.total - first.total
    others = second.busy - first.busy - (own_after - own_before) * ticks_per_s
    return Usage(others_fraction=min(1.0, max(0.0, others / total)),
                 steal_fraction=(second.steal - first.steal) / total)


def load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def machine_check(peak: dict, usage: Usage | None, *, cores: int | None = None,
                  load_avg: list[float] | None = None, best_peak: dict | None = None) -> dict:
    """The document's `machine_check`: the signals, the verdict `busy`, and one reason per
    signal past its limit. `peak` is `timing.gemm_peak`'s result (its samples, median, IQR);
    `best_peak` is `best_earlier_peak`'s."""
    cores = cores or os.cpu_count()
    reasons = []
    if usage is not None:
        if usage.others_fraction > OTHERS_LIMIT:
            reasons.append(f"other processes used {usage.others_fraction:.0%} of {cores} cores")
        if usage.steal_fraction > STEAL_LIMIT:
            reasons.append(f"the hypervisor stole {usage.steal_fraction:.0%} of CPU time")
    median, iqr = peak.get("gflops"), peak.get("iqr_gflops")
    if median and iqr is not None and iqr > PEAK_SPREAD_LIMIT * median:
        reasons.append(f"GEMM peak spread {iqr / median:.0%} (IQR/median, "
                       f"{len(peak.get('samples', []))} runs)")
    best = (best_peak or {}).get("gflops")
    if median and best and median < PEAK_DROP_LIMIT * best:
        reasons.append(f"GEMM peak {median:.3g} GFLOP/s, below {PEAK_DROP_LIMIT:.0%} of the "
                       f"{best:.3g} an earlier run measured here ({best_peak['file']})")
    return {
        "cores": cores,
        "load_avg": load_avg,
        "steal_fraction": None if usage is None else round(usage.steal_fraction, 4),
        "others_fraction": None if usage is None else round(usage.others_fraction, 4),
        "busy": bool(reasons),
        "reasons": reasons,
        "peak_gflops_samples": peak.get("samples", []),
        "peak_gflops_median": median,
        "peak_gflops_iqr": iqr,
        "peak_library": peak.get("library"),
        "best_peak_gflops": max(filter(None, (median, best)), default=None),
    }


def best_earlier_peak(folder: str | Path, environment: dict, device: str, threads: int,
                      tf32: bool | None = None) -> dict | None:
    """The best GEMM peak that the bench documents in `folder` (and its subfolders, one level
    down) measured on this processor (`environment`'s CPU model, or GPU for "cuda") at
    `threads`, with TF32 as `tf32` (the peak's own "tf32": None on the CPU) and torch's libraries
    kept to the same vector extensions (`isa_limits`): {"gflops", "file"}; None when none did.
    Other files are passed over."""
    processor = "gpu" if device == "cuda" else "cpu"
    best = None
    for path in sorted([*Path(folder).glob("*.json"), *Path(folder).glob("*/*.json")]):
        doc = _bench_document(path)
        if not (doc and doc.get("device") == device and doc.get("threads") == threads
                and doc["environment"].get(processor) == environment.get(processor)
                and _library_limits(doc["environment"]) == _library_limits(environment)
                and _peak_tf32(doc) == tf32):
            continue
        check = doc["machine_check"]
        for gflops in (check.get("best_peak_gflops"), check.get("peak_gflops_median")):
            if _positive(gflops) and (best is None or gflops > best["gflops"]):
                best = {"gflops": gflops, "file": str(path)}
    return best


def _library_limits(environment: dict) -> list[str]:
    """The settings in `environment`'s isa_limits that can move torch's GEMM peak: all but the
    CPU fused's kernels are built for."""
    return [limit for limit in (environment.get("isa_limits") or "").split()
            if not limit.startswith(f"{FUSED_MARCH}=")]


def _peak_tf32(doc: dict) -> bool | None:
    """Whether the run's GEMM peak allowed TF32: an H100's fp32 peak is 8x higher with it, so
    peaks taken with and without it are not comparable."""
    run = (doc.get("device"), doc.get("threads"))
    peaks = [peak for peak in doc.get("peaks") or []
             if isinstance(peak, dict) and (peak.get("device"), peak.get("threads")) == run]
    return peaks[0].get("tf32") if peaks else None


def _bench_document(path: Path) -> dict | None:
    """The bench document at `path` with an environment and a machine check, or None."""
    if not path.is_file():      # a FIFO or a folder named *.json would block or fail
        return None
    try:
        doc = read_json(path, BENCH_SCHEMAS)
    except UsageError:
        return None
    if isinstance(doc.get("environment"), dict) and isinstance(doc.get("machine_check"), dict):
        return doc
    return None


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def timed_busy(doc: dict) -> bool:
    """Whether a bench document's machine check found the machine busy."""
    return (doc.get("machine_check") or {}).get("busy") is True


def busy_lines(check: dict | None, threads: int | None) -> list[str]:
    """What opens `bench`'s output and `run`'s summary on a busy machine: the reasons, that
    no speed-up is judged, and (timed on several threads) how to time under contention."""
    if not check or not check.get("busy"):
        return []
    lines = ["BUSY MACHINE, speed-ups not judged: " + "; ".join(check["reasons"])]
    if threads is None or threads > 1:
        lines.append(CONTENTION_HINT)
    return [wrapped for line in lines for wrapped in textwrap.wrap(line, WIDTH,
                                                                   subsequent_indent="  ")]
