"""Which kernels torch.nn (the `native` implementation) launches on each workload of a preset.

On CUDA the names of cuDNN's kernels show which RNN algorithm it picked for the workload
(docs/gpu.md lists the classes PyTorch chooses between, and the rule it chooses by), so the
class recorded next to a GPU timing is read off the run, not only inferred from the rule:

    python scripts/cudnn_kernels.py --preset goals --device cuda [--top 4]

Per workload and metric, one call after a warm-up call is profiled (torch.profiler) and the
kernels that took the most time are printed, each with how often it ran in that call. On the
CPU the operators are listed instead (the GPU check's rehearsal runs it there).
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from rnnbench.benchmarks.tasks import build_task
from rnnbench.benchmarks.workloads import load_workloads
from rnnbench.errors import UsageError
from rnnbench.impls import load

NAME_WIDTH = 76     # kernel names are long C++ templates; the lines fit in 100 columns


def busiest(step, device: str, top: int) -> list[tuple[str, int, float]]:
    """(name, calls, microseconds) of the `top` kernels (CPU: operators) of one call of `step`,
    by their own time, after one warm-up call (cuDNN's plan, the allocator)."""
    on_gpu = device == "cuda"
    step()
    if on_gpu:
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as profiled:
        step()
        if on_gpu:
            torch.cuda.synchronize()
    kind = DeviceType.CUDA if on_gpu else DeviceType.CPU
    events = [(e.key, e.count, e.self_device_time_total if on_gpu else e.self_cpu_time_total)
              for e in profiled.key_averages() if e.device_type == kind]
    return sorted((e for e in events if e[2] > 0), key=lambda e: -e[2])[:top]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="a benchmark preset, e.g. goals")
    source.add_argument("--workload", metavar="FILE", help="a workload file")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--top", type=int, default=4, help="kernels per call (default 4)")
    args = parser.parse_args(argv)
    if args.device not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available here")
    try:
        workloads = load_workloads(preset=args.preset, path=args.workload)
    except UsageError as exc:
        parser.error(str(exc))
    native = load("native")
    for workload in workloads:
        task = build_task(native, workload, args.device)
        for metric in workload.metrics:
            print(f"{workload.name}: {metric} on {args.device}")
            for name, calls, micros in busiest(task.steps[metric], args.device, args.top):
                shown = name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 3] + "..."
                print(f"  {calls:4d}x {shown:<{NAME_WIDTH}} {micros:8.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
