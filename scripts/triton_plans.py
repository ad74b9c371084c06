"""Where the Triton kernel's time goes: its recurrence timed against cuDNN over batch sizes and
rows per program, at one hidden size and sequence length.

    python scripts/triton_plans.py --device cuda [--steps 100 --hidden 256]

The forward kernel runs one program per BLOCK_B batch rows, each doing every step's whole
(BLOCK_B, H) x (H, H) product itself, since programs cannot wait for each other between steps.
So a batch of 32 occupies 2 of an H100's 132 multiprocessors: if a step's time follows the rows
per program and not the batch, that, not the arithmetic, is what it is behind cuDNN by. Per
batch size, one line: cuDNN's forward time (torch.nn.RNN, the input projection included), then
the kernel's recurrence alone at each plan's rows per program, with the programs launched.
Medians of --repeats calls after two warm-up calls. Runs on the CPU too (TRITON_INTERPRET=1:
slow, for a rehearsal of the script with small sizes).
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch

from rnnbench.impls import triton as kernels


def median_seconds(call, repeats: int, device: str) -> float:
    """The median wall time of `call` over `repeats` calls, after two warm-up calls."""
    times = []
    for i in range(repeats + 2):
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batches", default="8,32,128,512", help="comma-separated batch sizes")
    parser.add_argument("--rows", default="16,8", help="rows per program to time besides the "
                                                       "default plan's")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    if kernels.availability():
        print(f"triton_plans: {kernels.availability()}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    steps, hidden, device = args.steps, args.hidden, args.device
    reference = torch.nn.RNN(hidden, hidden, device=device)
    print(f"forward, T={steps}, H={hidden}, float32, TF32 "
          f"{'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}; median of {args.repeats}")
    with torch.no_grad():
        for batch in map(int, args.batches.split(",")):
            x = torch.randn(steps, batch, hidden, device=device)
            h0 = torch.zeros(batch, hidden, device=device)
            xw = torch.randn(steps, batch, hidden, device=device)
            cudnn = median_seconds(lambda: reference(x), args.repeats, device)
            line = [f"B={batch:<4} torch.nn {cudnn * 1e6:8.0f} µs"]
            default = kernels.choose_plan(batch, hidden, torch.float32)
            rows = dict.fromkeys([default.block_b, *map(int, args.rows.split(","))])
            for block_b in rows:
                how = dataclasses.replace(default, block_b=block_b)
                seconds = median_seconds(lambda: kernels.ElmanRecurrence.apply(
                    xw, h0, reference.weight_hh_l0, False, False, how), args.repeats, device)
                programs = -(-batch // block_b)
                line.append(f"{block_b:>2} rows x {programs:>3} programs {seconds * 1e6:8.0f} µs")
            print(" | ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
