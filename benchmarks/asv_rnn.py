"""asv benchmarks: every registered implementation x the quick preset's workloads x device.

One class per metric, parametrised over (implementation, workload, device), in the spirit of
scipy's XPBenchmark: a combination that cannot run (implementation unavailable, kind or feature
not supported) raises asv's SkipNotImplemented in `setup` with the reason, so every
implementation stays in the grid. A metric's workloads are those of the preset that declare it.
The device axis is "cpu", plus "cuda" on machines that have one (asv keeps results per machine).
Threads are pinned in `setup`: RNNBENCH_THREADS when the environment sets it
(`RNNBENCH_THREADS=1 asv run ...`; anything but a positive integer stops the suite at import),
else the workload's own count, else all cores. Every benchmark's asv version is
"rnnbench <version>; suite <hash of this file and the preset's>": asv compares results of one
version only (a workload whose sizes change starts a new history), and
`rnnbench report` reads rnnbench's version there.

    time_<metric>       seconds per call (asv's own warm-up, repeats and statistics; under
                        --quick there is no warm-up, so the first call is the one timed)
    peakmem_<metric>    peak resident memory of the benchmark process (first call included)
    track_gflops        achieved GFLOP/s (rnnbench's timing: warm-up, median of samples)
    track_first_call_s  the metric's first call on a freshly built module (compile time)

Every combination runs in its own process (asv.conf.json pins launch_method to forkserver, so
torch is imported once); the grid size is what bounds an `asv run --quick`.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
# Imported here, once, by asv's forkserver instead of in every benchmark process: optimizers
# (train_step) and torch.compile import it, and that takes seconds.
import torch._dynamo  # noqa: F401

try:
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:  # asv_runner is only present under asv; plain imports still work
    SkipNotImplemented = NotImplementedError

import rnnbench
from rnnbench.benchmarks.harness import skip_reason
from rnnbench.benchmarks.tasks import build_task
from rnnbench.benchmarks.timing import (RepeatPolicy, measure, measure_interleaved, sample_summary,
                                        synchronizer, warm_up)
from rnnbench.benchmarks.workloads import load_workloads, preset_path
from rnnbench.impls import registered

PRESET = "quick"
# A CPU-only machine has no CUDA column at all rather than one that is skipped throughout: it
# halves the number of benchmark processes, and asv keeps each machine's results apart anyway.
DEVICES = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
IMPLS = registered()
WORKLOADS = {w.name: w for w in load_workloads(PRESET)}
TRACK_POLICY = RepeatPolicy(min_repeats=5, budget_s=0.2)
THREADS_VARIABLE = "RNNBENCH_THREADS"
SUITE_VERSION = (f"rnnbench {rnnbench.__version__}; suite "
                 + hashlib.sha256(Path(__file__).read_bytes() + preset_path(PRESET).read_bytes())
                 .hexdigest()[:12])


def threads_setting(environ=os.environ) -> int | None:
    """RNNBENCH_THREADS as a thread count, None when unset; ValueError (one line) for anything
    but a positive integer, so a mistyped setting stops the suite when asv imports it."""
    text = environ.get(THREADS_VARIABLE)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"{THREADS_VARIABLE} must be a positive integer, got {text!r}")
    return int(text)


THREADS = threads_setting()


def _grid(metric: str) -> tuple[list, list, list]:
    return list(IMPLS), [name for name, w in WORKLOADS.items() if metric in w.metrics], list(DEVICES)


class _Metric:
    """The shared setup and track_* methods; subclasses name the metric, its grid and the
    time_/peakmem_ methods (asv reports them under these names)."""

    metric = ""
    param_names = ("impl", "workload", "device")
    version = SUITE_VERSION
    timeout = 600
    # time_* samples: enough to be stable without spending minutes per combination.
    number = 0
    repeat = (3, 10, 10.0)

    def setup(self, impl, workload, device):
        self.impl, self.workload, self.device = IMPLS[impl], WORKLOADS[workload], device
        reason = skip_reason(self.impl, self.workload, device, self.metric)
        if reason:
            raise SkipNotImplemented(reason)
        torch.set_num_threads(THREADS or self.workload.threads or os.cpu_count())
        self.sync = synchronizer(device)
        # Built, never called: each benchmark runs in its own process, so track_first_call_s
        # times a true first call (compilation included); asv's warm-up keeps it out of time_*.
        self.step = build_task(self.impl, self.workload, device).steps[self.metric]
        self.call = lambda: (self.step(), self.sync())

    def track_gflops(self, impl, workload, device):
        flops = self.workload.flops(self.metric)
        if flops is None:
            raise SkipNotImplemented(f"no FLOP count for kind {self.workload.kind!r}")
        number = warm_up(self.call, self.sync, min_sample_s=self.workload.min_sample_s)
        samples, errors = measure_interleaved({0: self.call}, {0: number}, self.sync, TRACK_POLICY)
        if errors:
            raise errors[0]
        return flops / sample_summary(samples[0], number).median_s / 1e9

    track_gflops.unit = "GFLOP/s"

    def track_first_call_s(self, impl, workload, device):
        return measure(self.step, self.sync)

    track_first_call_s.unit = "seconds"


class Forward(_Metric):
    metric = "forward"
    params = _grid(metric)

    def time_forward(self, impl, workload, device):
        self.call()

    def peakmem_forward(self, impl, workload, device):
        self.call()


class ForwardBackward(_Metric):
    metric = "forward_backward"
    params = _grid(metric)

    def time_forward_backward(self, impl, workload, device):
        self.call()

    def peakmem_forward_backward(self, impl, workload, device):
        self.call()


class TrainStep(_Metric):
    metric = "train_step"
    params = _grid(metric)

    def time_train_step(self, impl, workload, device):
        self.call()

    def peakmem_train_step(self, impl, workload, device):
        self.call()
