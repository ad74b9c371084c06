"""fused's C++ kernels from several git revisions, timed side by side with torch.nn.

Each revision's `impls/fused_kernels.cpp` is built as its own extension (with fused's flags) and
swapped into the same fused module round by round, interleaved with torch.nn, so that every
version sees the same machine state; medians and interquartile ranges over the rounds. This is
how a kernel change is judged before it lands (a ratio to the previous revision, not to a
number remembered from another day). Kernels that choose between BLAS and oneDNN for their
products over all time steps list the way each timed shape took, per revision.

    .venv/bin/python scripts/fused_versions.py HEAD~1 HEAD --kinds lstm,gru --workloads a,b
    .venv/bin/python scripts/fused_versions.py HEAD~1 HEAD --backward
    ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python scripts/fused_versions.py HEAD --march x86-64-v3

`--march` builds the kernels for another CPU than this one (gcc's -march), e.g. x86-64-v3
(AVX2 and FMA, no AVX-512) on an AVX-512 machine; with ONEDNN_MAX_CPU_ISA=AVX2 torch.nn's
oneDNN keeps to AVX2 too (torch's MKL picks its own code by CPU). That approximates an AVX2
machine, not replaces one: the caches, clock and memory are still this machine's.

Workloads are the goals preset's: (a) T=100 B=32 H=256 on 2 threads, (b) T=50 B=64 H=512 on 2
threads, (c) T=25 B=1 H=128 on 1 thread (forward only). Time on a quiet machine. The kernels of
every revision are called through today's fused.py, so the revisions must share its interface
(`forward` and `backward` with today's arguments).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils import cpp_extension

from rnnbench.impls import fused

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {"a": (100, 32, 256, 2), "b": (50, 64, 512, 2), "c": (25, 1, 128, 1)}
NATIVE = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU}


def build(revision: str, index: int, folder: Path, march: str):
    """The kernels of `revision`, built for `march`, as an extension module; SystemExit if git
    has no such file."""
    shown = subprocess.run(["git", "show", f"{revision}:impls/fused_kernels.cpp"], cwd=ROOT,
                           capture_output=True, text=True)
    if shown.returncode != 0:
        raise SystemExit(f"fused_versions: no impls/fused_kernels.cpp at {revision!r}")
    name = f"v{index}"
    source = folder / f"{name}.cpp"
    source.write_text(shown.stdout)
    build_dir = folder / name
    build_dir.mkdir()
    return cpp_extension.load(name=f"rnnbench_fused_{name}", sources=[str(source)],
                              extra_cflags=fused.compile_flags(march), extra_ldflags=fused.LDFLAGS,
                              build_directory=str(build_dir))


def time_versions(kind: str, workload: str, versions: dict, backward: bool, rounds: int) -> dict:
    """Samples (seconds per call) of torch.nn and of fused with each version's kernels."""
    steps, batch, hidden, threads = WORKLOADS[workload]
    torch.set_num_threads(threads)
    native = NATIVE[kind](hidden, hidden)
    module = fused.IMPLEMENTATION.constructor(kind)(hidden, hidden)
    module.load_state_dict(native.state_dict())
    x = torch.randn(steps, batch, hidden, requires_grad=backward)
    out_grad = torch.randn(steps, batch, hidden)
    calls = 20 if batch == 1 else 1  # a sample long enough to time at batch 1

    def sample(model, kernels) -> float:
        fused._kernels = kernels
        start = time.perf_counter()
        for _ in range(calls):
            if backward:  # as the bench's forward_backward: fresh gradients every call
                model.zero_grad(set_to_none=True)
                x.grad = None
                model(x)[0].backward(out_grad)
            else:
                with torch.no_grad():
                    model(x)
        return (time.perf_counter() - start) / calls

    candidates = {"torch.nn": (native, None), **{v: (module, k) for v, k in versions.items()}}
    for model, kernels in candidates.values():  # warm-up
        sample(model, kernels)
    samples = {label: [] for label in candidates}
    for _ in range(rounds):
        for label, (model, kernels) in candidates.items():
            samples[label].append(sample(model, kernels))
    return samples


def _at_least_two(text: str) -> int:
    rounds = int(text)
    if rounds < 2:
        raise argparse.ArgumentTypeError("needs at least 2 rounds (for a spread)")
    return rounds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="+", help="git revisions, e.g. HEAD~1 HEAD")
    parser.add_argument("--kinds", default="rnn,lstm,gru")
    parser.add_argument("--workloads", default="a,b,c")
    parser.add_argument("--backward", action="store_true", help="time forward+backward")
    parser.add_argument("--rounds", type=_at_least_two, default=21)
    parser.add_argument("--march", default="native",
                        help="the CPU to build the kernels for (gcc -march), e.g. x86-64-v3")
    args = parser.parse_args(argv)
    unknown = set(args.workloads.split(",")) - set(WORKLOADS)
    if unknown or not set(args.kinds.split(",")) <= set(NATIVE):
        raise SystemExit(f"fused_versions: workloads are {', '.join(WORKLOADS)}; kinds "
                         f"{', '.join(NATIVE)}")
    with tempfile.TemporaryDirectory() as folder:
        revisions = list(dict.fromkeys(args.revisions))
        versions = {rev: build(rev, index, Path(folder), args.march)
                    for index, rev in enumerate(revisions)}
        for kind in args.kinds.split(","):
            for workload in args.workloads.split(","):
                if args.backward and workload == "c":
                    continue
                samples = time_versions(kind, workload, versions, args.backward, args.rounds)
                base = statistics.median(samples["torch.nn"])
                cells = []
                for label, values in samples.items():
                    median = statistics.median(values)
                    low, _, high = statistics.quantiles(values, n=4)
                    ratio = "" if label == "torch.nn" else f", {base / median:.2f}x torch.nn"
                    cells.append(f"{label} {median * 1e3:.2f} ms (IQR {(high - low) / median:.0%}"
                                 f"{ratio})")
                metric = "forward+backward" if args.backward else "forward"
                print(f"{kind} {metric} ({workload}): " + "; ".join(cells), flush=True)
        for revision, module in versions.items():
            # Kernels that time their products over all time steps say which way each took.
            if hasattr(module, "product_choices"):
                print(f"{revision}: " + ("; ".join(module.product_choices()) or "no product timed"))
            # And those that time their step products, which way each step product took.
            if hasattr(module, "step_choices"):
                print(f"{revision}, step products: "
                      + ("; ".join(module.step_choices()) or "none timed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
