"""The float64 reference against torch.nn: a randomized sweep of configurations.

Every case draws a configuration (kind, sizes, every constructor option), a batched or unbatched
input, an initial state or none, parameters and an output gradient; runs the reference's
`forward` and `backward` and torch.nn's module with autograd, all in float64; and records the
max abs difference of every output and every gradient. This module imports torch, which is why
it lives outside `rnnbench.reference`.

    python -m rnnbench.crosscheck --configs 300 --seed 0

prints the worst error per kind for the forward pass and every gradient, and exits 1 if any
exceeds MAX_ABS_ERROR.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass

import numpy as np
import torch
from tabulate import tabulate

from rnnbench.impls.native import IMPLEMENTATION as NATIVE
from rnnbench.reference import (
    KINDS, Config, backward, flatten_outputs, forward, init_spec, io_shapes, nest_outputs,
    nest_state, output_names, param_shapes, state_grad_names, state_names,
)

# The agreement the reference is held to: both sides compute in float64 and differ only
# in summation order, so anything above this is a bug, not rounding.
MAX_ABS_ERROR = 1e-10

# kind -> torch.nn's module: the "native" implementation is torch.nn itself.
TORCH_MODULES = dict(NATIVE.kinds)


@dataclass(frozen=True)
class SweepCase:
    """One configuration and call; `seed` draws its parameters and inputs."""

    config: Config
    batch: int | None
    steps: int
    hx_given: bool
    seed: int

    def describe(self) -> str:
        batch = "unbatched" if self.batch is None else f"batch={self.batch}"
        steps = "" if self.config.is_cell else f" steps={self.steps}"
        hx = "hx given" if self.hx_given else "hx=None"
        return f"{self.config.describe()} {batch}{steps} {hx} seed={self.seed}"


@dataclass(frozen=True)
class Comparison:
    """The max abs error of every output ("forward <name>") and gradient ("grad <key>")."""

    case: SweepCase
    errors: dict[str, float]

    @property
    def worst(self) -> float:
        return max(self.errors.values())


def random_cases(count: int, seed: int = 0) -> list[SweepCase]:
    """`count` cases cycling through the kinds, with every option drawn at random."""
    rng = np.random.default_rng(seed)
    return [_random_case(KINDS[k % len(KINDS)], rng) for k in range(count)]


def _random_case(kind: str, rng: np.random.Generator) -> SweepCase:
    options = {}
    family = kind.removesuffix("_cell")
    if family == "rnn":
        options["nonlinearity"] = str(rng.choice(["tanh", "relu"]))
    options["bias"] = bool(rng.random() < 0.75)
    hidden_size = int(rng.integers(1, 6))
    if not kind.endswith("_cell"):
        options.update(num_layers=int(rng.integers(1, 4)), batch_first=bool(rng.random() < 0.5),
                       bidirectional=bool(rng.random() < 0.5))
        # Dropout must not change anything: forward is eval semantics.
        if options["num_layers"] > 1 and rng.random() < 0.25:
            options["dropout"] = 0.5
        if family == "lstm" and hidden_size > 1 and rng.random() < 0.5:
            options["proj_size"] = int(rng.integers(1, hidden_size))
    config = Config(kind, int(rng.integers(1, 5)), hidden_size, **options)
    batch = [None, 0, 1, 2, 3][int(rng.choice(5, p=[0.3, 0.05, 0.2, 0.25, 0.2]))]
    return SweepCase(config, batch, int(rng.integers(1, 6)), bool(rng.random() < 0.5),
                     int(rng.integers(2**31)))


def case_arguments(case: SweepCase):
    """(params, x, hx, grad_out) for the case, drawn from its seed: parameters from the init
    distribution, everything else standard normal."""
    rng = np.random.default_rng(case.seed)
    cfg = case.config
    shapes = io_shapes(cfg, case.batch, case.steps)
    params = {name: rng.uniform(dist.low, dist.high, param_shapes(cfg)[name])
              for name, dist in init_spec(cfg).items()}
    x = rng.standard_normal(shapes["input"])
    hx = nest_state(cfg, {name: rng.standard_normal(shapes[name]) for name in state_names(cfg)}) \
        if case.hx_given else None
    grad_out = nest_outputs(cfg, {name: rng.standard_normal(shapes[name])
                                  for name in output_names(cfg)})
    return params, x, hx, grad_out


def compare_with_torch(case: SweepCase) -> Comparison:
    """Run the case through the reference and torch.nn and measure every difference."""
    cfg = case.config
    params, x, hx, grad_out = case_arguments(case)
    ours = flatten_outputs(cfg, forward(cfg, params, x, hx))
    our_grads = backward(cfg, params, x, hx, grad_out)
    outputs, grads = torch_results(cfg, params, x, hx, grad_out)
    errors = {f"forward {name}": _max_abs(ours[name], outputs[name]) for name in output_names(cfg)}
    errors.update({f"grad {key}": _max_abs(our_grads.get(key), grads[key]) for key in grads})
    return Comparison(case, errors)


def torch_results(cfg: Config, params: dict, x, hx, grad_out):
    """torch.nn's float64 answer to the reference's `forward` and `backward` with the same
    arguments: (outputs keyed by `output_names`, gradients keyed like `backward`'s result)."""
    outputs, grads = _torch_run(cfg, params, x, hx, grad_out)
    if hx is None:
        # torch has no gradient for an omitted state; the zero state given explicitly has one,
        # shaped like the final state.
        final = [outputs[name] for name in output_names(cfg)[-len(state_names(cfg)):]]
        zeros = nest_state(cfg, dict(zip(state_names(cfg), map(np.zeros_like, final))))
        _, with_state = _torch_run(cfg, params, x, zeros, grad_out)
        grads.update({key: with_state[key] for key in state_grad_names(cfg)})
    return outputs, grads


def _torch_run(cfg: Config, params: dict, x, hx, grad_out):
    module = TORCH_MODULES[cfg.kind](**cfg.constructor_kwargs(), dtype=torch.float64).eval()
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            parameter.copy_(torch.as_tensor(params[name]))
    leaves = {"input": torch.tensor(x, dtype=torch.float64, requires_grad=True)}
    if hx is not None:
        states = hx if cfg.family == "lstm" else (hx,)
        leaves.update({key: torch.tensor(s, dtype=torch.float64, requires_grad=True)
                       for key, s in zip(state_grad_names(cfg), states)})
        hx = nest_state(cfg, dict(zip(state_names(cfg),
                                      [leaves[key] for key in state_grad_names(cfg)])))
    outputs = flatten_outputs(cfg, module(leaves["input"], hx))
    weights = flatten_outputs(cfg, grad_out)
    sum(torch.sum(outputs[name] * torch.as_tensor(weights[name])) for name in outputs).backward()
    tensors = {**leaves, **dict(module.named_parameters())}
    # An empty batch may leave a tensor without a gradient; its gradient is zero.
    grads = {key: np.zeros(tuple(t.shape)) if t.grad is None else t.grad.numpy()
             for key, t in tensors.items()}
    return {name: value.detach().numpy() for name, value in outputs.items()}, grads


def _max_abs(ours, theirs) -> float:
    """Max abs difference; infinite when a result is missing, shaped differently or NaN."""
    if ours is None or np.shape(ours) != np.shape(theirs):
        return math.inf
    error = float(np.max(np.abs(np.asarray(ours) - theirs), initial=0.0))
    return error if not math.isnan(error) else math.inf


def sweep(count: int = 300, seed: int = 0) -> list[Comparison]:
    """Compare the reference with torch.nn on `count` random cases."""
    return [compare_with_torch(case) for case in random_cases(count, seed)]


def column(quantity: str) -> str:
    """The table column of a quantity: parameter gradients grouped by block, layers folded."""
    return re.sub(r"_l\d+(_reverse)?$", "", quantity)


def worst_per_kind(comparisons: list[Comparison]) -> dict[str, dict[str, tuple[float, SweepCase]]]:
    """kind -> column -> (worst error, the case that produced it)."""
    table: dict[str, dict[str, tuple[float, SweepCase]]] = {}
    for comparison in comparisons:
        row = table.setdefault(comparison.case.config.kind, {})
        for quantity, error in comparison.errors.items():
            key = column(quantity)
            if key not in row or error > row[key][0]:
                row[key] = (error, comparison.case)
    return table


def render(comparisons: list[Comparison]) -> str:
    """The worst error per kind (forward: all outputs together) and the worst case of each kind."""
    worst = worst_per_kind(comparisons)
    # Input and state gradients first, then the parameter blocks in the order they appear.
    first = ["grad input", "grad hx", "grad h0", "grad c0"]
    present = {c for row in worst.values() for c in row}
    grad_columns = [c for c in first if c in present] + list(dict.fromkeys(
        c for row in worst.values() for c in row if c.startswith("grad ") and c not in first))
    rows = []
    for kind, row in worst.items():
        count = sum(c.case.config.kind == kind for c in comparisons)
        forward_error = max(error for c, (error, _) in row.items() if c.startswith("forward "))
        rows.append([kind, count, f"{forward_error:.1e}"]
                    + [f"{row[c][0]:.1e}" if c in row else "-" for c in grad_columns])
    headers = ["kind", "configs", "forward"] + [c.replace("grad ", "d ") for c in grad_columns]
    lines = [tabulate(rows, headers=headers, disable_numparse=True), "", "worst case per kind:"]
    for kind, row in worst.items():
        quantity, (error, case) = max(row.items(), key=lambda item: item[1][0])
        lines.append(f"  {kind}: {error:.1e} in {quantity}: {case.describe()}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnbench.crosscheck",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=300, help="number of random cases")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case generator")
    args = parser.parse_args(argv)
    if args.configs < 1:
        parser.error("--configs must be at least 1")
    comparisons = sweep(args.configs, args.seed)
    print(render(comparisons))
    worst = max(c.worst for c in comparisons)
    verdict = "agrees" if worst <= MAX_ABS_ERROR else "DISAGREES"
    print(f"\nreference {verdict} with torch.nn {torch.__version__} in float64: "
          f"worst max abs error {worst:.1e} over {len(comparisons)} configs "
          f"(bound {MAX_ABS_ERROR:.0e})")
    return 0 if worst <= MAX_ABS_ERROR else 1


if __name__ == "__main__":
    sys.exit(main())
