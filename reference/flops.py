"""Floating-point operation counts of a forward pass (multiply-add = 2 FLOPs).

Counted: the input and hidden matmuls (and LSTM projections). Elementwise gate arithmetic is
left out, as DeepBench and most papers do; for Elman this gives 2*T*B*H*(I+H) per layer-direction.
"""
from __future__ import annotations

from rnnbench.reference.config import Config


def forward_flops(cfg: Config, batch: int | None, steps: int = 1, *, input_gemm: bool = True) -> int:
    """Matmul FLOPs of one forward pass; `input_gemm=False` drops the input projection
    (DeepBench's convention)."""
    batch = batch or 1
    steps = 1 if cfg.is_cell else steps
    rows = len(cfg.gates) * cfg.hidden_size
    total = 0
    for layer in range(1 if cfg.is_cell else cfg.num_layers):
        per_step = rows * cfg.output_size
        if input_gemm:
            per_step += rows * cfg.layer_input_size(layer)
        if cfg.proj_size:
            per_step += cfg.proj_size * cfg.hidden_size
        total += 2 * batch * steps * per_step * (1 if cfg.is_cell else cfg.num_directions)
    return total
