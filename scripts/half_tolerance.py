"""How far torch.nn's own half-precision results stray from the float64 reference.

For every row of the general case table (every kind, at the lengths and depths the checks use),
in bfloat16 and float16, over many seeds, torch.nn (the "native" implementation) runs exactly as
the forward and gradient checks run it, and the worst error is printed relative to the tolerance
policy's allowance for that row (1.0 = exactly at the allowance; the checks fail above 1). The
last lines give the worst ratio per dtype and the margin the policy leaves (1 / worst ratio).

    .venv/bin/python scripts/half_tolerance.py --seeds 100 [--device cuda] [--dtype bfloat16]

`--impl NAME` measures another implementation the same way (e.g. eager, to see how much room a
plain loop that rounds every operation to the dtype has).

This measures accuracy, not time: run it anywhere. reference/tolerance.py records its result.
"""
from __future__ import annotations

import argparse
import sys

import torch
from tabulate import tabulate

from rnnbench.impls import load
from rnnbench.suites.catalogue import checks_of
from rnnbench.suites.check_numerics import forward_for_gradients, gradients, observe
from rnnbench.suites.kinds import HALF_DTYPES
from rnnbench.suites.run import Run
from rnnbench.suites.subject import Subject, to_numpy
from rnnbench.suites.torch_nn import CASES


def worst_excess(observed: dict, expected: dict, tol) -> float:
    """The largest error-to-allowance ratio over the named results."""
    return max(tol.excess(observed[name], expected[name]) for name in expected)


def measure(impl, case, dtype: str, seed: int, device: str) -> tuple[float, float]:
    """(forward, gradient) error-to-allowance ratios of `impl` for one case and seed."""
    subject = Subject(impl, case.kind, device, seed)
    run = Run(subject, case, dtype, "forward")
    forward = worst_excess(observe(run), run.expected(), run.tolerance())
    run = Run(subject, case, dtype, "gradients", train=True)
    outputs, leaves, stored = forward_for_gradients(run)
    forward = max(forward, worst_excess({n: to_numpy(t) for n, t in outputs.items()},
                                        run.expected(), run.tolerance()))
    observed, expected, _ = gradients(run, outputs, leaves, stored)
    return forward, worst_excess(observed, expected, run.tolerance(gradient=True))


def judged_gradients(case, dtype: str) -> bool:
    """Whether the catalogue's gradient check in `dtype` runs on `case` (relu's does not in half
    precision; see rnnbench.suites.catalogue)."""
    (check,) = [c for c in checks_of(case.kind) if c.category == "gradients" and c.dtype == dtype]
    return check.applies(case)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="seeds per row (default 100)")
    parser.add_argument("--impl", default="native",
                        help="implementation to measure (default native: torch.nn)")
    parser.add_argument("--kind", action="append",
                        help="measure only this kind (repeatable; default every kind it provides)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--dtype", choices=HALF_DTYPES, action="append",
                        help="measure only this dtype (repeatable; default both)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    torch.set_num_threads(1)  # tiny cases: more threads only add overhead
    impl = load(args.impl, args.kind[0] if args.kind and len(args.kind) == 1 else None)
    rows, worst = [], {}
    for dtype in args.dtype or HALF_DTYPES:
        for case in CASES:
            if case.kind not in (args.kind or impl.kinds):
                continue
            ratios = [measure(impl, case, dtype, seed, args.device) for seed in range(args.seeds)]
            fwd, grad = (max(r[i] for r in ratios) for i in (0, 1))
            steps = 1 if case.config.is_cell else case.steps
            judged = judged_gradients(case, dtype)
            rows.append([dtype, case.kind, case.name, steps, case.config.num_layers,
                         f"{fwd:.3f}", f"{grad:.3f}" + ("" if judged else " (not judged)")])
            previous = worst.get(dtype, (0.0, 0.0))
            worst[dtype] = (max(previous[0], fwd), max(previous[1], grad if judged else 0.0))
            print(*rows[-1], sep="\t", file=sys.stderr, flush=True)  # progress
    print(f"{impl.name} on {args.device}, {args.seeds} seeds per row: worst error / policy allowance")
    print(tabulate(rows, headers=["dtype", "kind", "case", "steps", "layers", "forward",
                                  "gradients"]))
    for dtype, (fwd, grad) in worst.items():
        print(f"{dtype}: worst forward {fwd:.3f} (margin {1 / fwd:.1f}x), "
              f"worst judged gradients {grad:.3f} (margin {1 / grad:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
