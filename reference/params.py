"""Parameter names, shapes and init distributions, in torch.nn's names and order.

Names: `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}` and, for a projected
LSTM, `weight_hr_l{k}`; the reverse direction adds the suffix `_reverse`. Cells drop the layer
suffix. Gate blocks are stacked along the first axis in the order of `Config.gates`.

Every torch.nn recurrent parameter, projections included, is initialised from
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). Named textbook variants that differ (and that the
suite diagnoses): bound 1/H instead of 1/sqrt(H), orthogonal W_hh, zero biases, randn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from rnnbench.reference.config import Config


@dataclass(frozen=True)
class Uniform:
    """The continuous uniform distribution on [low, high]."""

    low: float
    high: float

    def cdf(self, x):
        """Cumulative distribution function, elementwise on a NumPy array or a float."""
        import numpy as np

        return np.clip((np.asarray(x, dtype=float) - self.low) / (self.high - self.low), 0.0, 1.0)

    @property
    def std(self) -> float:
        return (self.high - self.low) / math.sqrt(12.0)

    def __str__(self) -> str:
        return f"U({self.low:.6g}, {self.high:.6g})"


@dataclass(frozen=True)
class UniformSum:
    """The distribution of the sum of two independent uniforms: torch.nn's b_ih + b_hh, to which
    a module holding one bias in their place is compared."""

    first: Uniform
    second: Uniform

    @property
    def low(self) -> float:
        return self.first.low + self.second.low

    @property
    def high(self) -> float:
        return self.first.high + self.second.high

    def cdf(self, x):
        """P(first + second <= x): the mean over `first` of `second`'s CDF at x - first, in
        closed form (the integral of a clipped ramp)."""
        import numpy as np

        a, b = self.first.low, self.first.high
        c, w = self.second.low, self.second.high - self.second.low

        def ramp_integral(u):
            u = np.asarray(u, dtype=float)
            return np.where(u <= 0, 0.0, np.where(u <= w, u * u / (2 * w), u - w / 2))

        x = np.asarray(x, dtype=float)
        return np.clip((ramp_integral(x - c - a) - ramp_integral(x - c - b)) / (b - a), 0.0, 1.0)

    def __str__(self) -> str:
        return f"{self.first} + {self.second}"


def param_shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in the order torch.nn registers them."""
    rows = len(cfg.gates) * cfg.hidden_size
    if cfg.is_cell:
        shapes = {"weight_ih": (rows, cfg.input_size), "weight_hh": (rows, cfg.hidden_size)}
        if cfg.bias:
            shapes.update(bias_ih=(rows,), bias_hh=(rows,))
        return shapes
    shapes: dict[str, tuple[int, ...]] = {}
    for layer in range(cfg.num_layers):
        for direction in range(cfg.num_directions):
            suffix = param_suffix(layer, direction)
            shapes[f"weight_ih{suffix}"] = (rows, cfg.layer_input_size(layer))
            shapes[f"weight_hh{suffix}"] = (rows, cfg.output_size)
            if cfg.bias:
                shapes[f"bias_ih{suffix}"] = (rows,)
                shapes[f"bias_hh{suffix}"] = (rows,)
            if cfg.proj_size:
                shapes[f"weight_hr{suffix}"] = (cfg.proj_size, cfg.hidden_size)
    return shapes


def param_suffix(layer: int, direction: int) -> str:
    """torch.nn's name suffix for one layer and direction (0 forward, 1 reverse)."""
    return f"_l{layer}" + ("_reverse" if direction else "")


def init_spec(cfg: Config) -> dict[str, Uniform]:
    """The distribution every parameter must be drawn from at construction."""
    bound = 1.0 / math.sqrt(cfg.hidden_size)
    return {name: Uniform(-bound, bound) for name in param_shapes(cfg)}


def param_count(cfg: Config) -> int:
    """Total number of scalar parameters."""
    return sum(math.prod(shape) for shape in param_shapes(cfg).values())
