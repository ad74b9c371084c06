"""Where an implementation's outputs first part from the reference: layer, direction, timestep.

The lowest layer whose final state (h_n, c_n) differs is the layer where things go wrong (a
wrong lower layer spoils every layer above it). That layer is then run on its own, as a
one-layer module of the implementation fed the *reference's* input for it, and its outputs
are scanned in each direction's processing order (the reverse direction starts at the last
timestep) for the first timestep outside the tolerance. Timesteps are indices into the sequence.
"""
from __future__ import annotations

import numpy as np

from rnnbench.reference import Config
from rnnbench.suites.compare import excess
from rnnbench.suites.layers import (batched_states, is_batched, layer_config, layer_params,
                                    lower_layers, time_major)
from rnnbench.suites.results import Finding

DIRECTIONS = ("forward", "reverse")


def locate(run, observed: dict, expected: dict, tol) -> dict:
    """numbers {"layer", "direction", "timestep"} for a sequence module's mismatch ({} for
    cells); "timestep" is None when only the final states differ."""
    cfg: Config = run.cfg
    if cfg.is_cell:
        return {}
    diverged = [(layer, d) for layer in range(cfg.num_layers) for d in range(cfg.num_directions)
                if _state_excess(cfg, observed, expected, tol, layer, d) > 1.0]
    layer = min(diverged)[0] if diverged else cfg.num_layers - 1
    try:
        seen, want = _layer_outputs(run, observed, expected, layer)
    except Finding:  # the layer cannot be run on its own: say which layer, no more
        return {"layer": layer}
    found = []
    for d in range(cfg.num_directions):
        width = cfg.output_size
        per_step = excess(seen[..., d * width:(d + 1) * width], want[..., d * width:(d + 1) * width],
                          tol, axis=(1, 2))
        order = range(len(per_step) - 1, -1, -1) if d else range(len(per_step))
        position = next((i for i, t in enumerate(order) if per_step[t] > 1.0), None)
        if position is not None:
            found.append((position, d, order[position]))
    if found:
        _, d, timestep = min(found)
        return {"layer": layer, "direction": DIRECTIONS[d], "timestep": timestep}
    d = min(d for level, d in diverged if level == layer) if diverged else 0
    return {"layer": layer, "direction": DIRECTIONS[d], "timestep": None}


def describe(numbers: dict) -> str | None:
    """"layer 0, reverse direction, timestep 0" from `locate`'s numbers (None if it found none)."""
    parts = []
    if "layer" in numbers:
        parts.append(f"layer {numbers['layer']}")
    if numbers.get("direction"):
        parts.append(f"{numbers['direction']} direction")
    if "timestep" in numbers:
        parts.append("final state only" if numbers["timestep"] is None
                     else f"timestep {numbers['timestep']}")
    return ", ".join(parts) or None


def _state_excess(cfg: Config, observed: dict, expected: dict, tol, layer: int, d: int) -> float:
    index = layer * cfg.num_directions + d
    return max((excess(observed[name][index], expected[name][index], tol)
                for name in expected if name != "output" and name in observed), default=0.0)


def _layer_outputs(run, observed: dict, expected: dict, layer: int):
    """The implementation's and the reference's outputs (L, N, D*H) of one layer, run alone
    on the reference's input for that layer (the module's own outputs for a one-layer module)."""
    cfg = run.cfg
    if cfg.num_layers == 1:
        return time_major(cfg, observed["output"]), time_major(cfg, expected["output"])
    batched = is_batched(cfg, run.x64)
    inputs = time_major(cfg, run.x64)
    if layer > 0:
        lower, params = lower_layers(cfg, run.params, layer)
        hx = None if run.hx64 is None else {
            name: value[:layer * cfg.num_directions] for name, value in run.hx64.items()}
        inputs = time_major(cfg, run.expected(lower, params, run.x64, hx)["output"])
    one, params = layer_config(cfg, layer), layer_params(cfg, run.params, layer)
    rows = slice(layer * cfg.num_directions, (layer + 1) * cfg.num_directions)
    hx = None if run.hx64 is None else {
        name: batched_states(value, batched)[rows] for name, value in run.hx64.items()}
    module = run.subject.build(one, run.dtype, params)
    tensors = {name: run.subject.tensor(value, run.dtype) for name, value in (hx or {}).items()}
    seen = run.run(run.subject.tensor(inputs, run.dtype), tensors or None, module, one)
    want = run.expected(one, params, inputs, hx)
    return np.asarray(seen["output"]), want["output"]
