"""Taking a stacked module apart: one layer or one direction as a module of its own, parameter
names by block, and the canonical time-major layout.

Used to locate a divergence (run one layer of the implementation on its own), to build the
reference with a named mistake (run each direction by hand), and by the dropout check. All names
come from the spec: a parameter's *block* is its name without torch's layer/direction suffix
("weight_ih", "bias_hh", ...), as `param_shapes` of a one-layer config gives it.
"""
from __future__ import annotations

import numpy as np

from rnnbench.reference import Config, io_shapes, param_shapes, param_suffix

# torch's block names in the order the spec lists a cell's parameters: W_ih, W_hh, b_ih, b_hh.
INPUT_WEIGHT, HIDDEN_WEIGHT, INPUT_BIAS, HIDDEN_BIAS = param_shapes(Config("rnn_cell", 1, 1))


def layer_config(cfg: Config, layer: int, directions: int | None = None) -> Config:
    """Layer `layer` of `cfg` as a one-layer, time-major module (both directions, or one)."""
    bidirectional = cfg.bidirectional if directions is None else directions == 2
    return cfg.replace(input_size=cfg.layer_input_size(layer), num_layers=1, dropout=0.0,
                       batch_first=False, bidirectional=bidirectional)


def layer_params(cfg: Config, params: dict, layer: int, directions=None) -> dict:
    """The parameters of one layer (all directions, or those in `directions`, in that order),
    renamed for `layer_config` of it."""
    directions = tuple(range(cfg.num_directions)) if directions is None else tuple(directions)
    one = layer_config(cfg, layer, len(directions))
    renamed = {}
    for new, old in enumerate(directions):
        new_suffix = param_suffix(0, new)
        for name in param_shapes(one):
            if name.endswith(new_suffix):
                renamed[name] = params[name.removesuffix(new_suffix) + param_suffix(layer, old)]
    return renamed


def lower_layers(cfg: Config, params: dict, layers: int) -> tuple[Config, dict]:
    """The first `layers` layers of `cfg` as a module of their own, with their parameters."""
    lower = cfg.replace(num_layers=layers)
    return lower, {name: params[name] for name in param_shapes(lower)}


def blocks(cfg: Config) -> dict[str, str]:
    """Parameter name -> block: its name without the layer/direction suffix (cells: the name)."""
    if cfg.is_cell:
        return {name: name for name in param_shapes(cfg)}
    one = param_shapes(cfg.replace(num_layers=1, bidirectional=False))
    base = [name.removesuffix(param_suffix(0, 0)) for name in one]
    return {block + param_suffix(layer, direction): block
            for layer in range(cfg.num_layers) for direction in range(cfg.num_directions)
            for block in base}


def gate_stacked(cfg: Config, value: np.ndarray) -> bool:
    """Whether a parameter stacks one block per gate along its first axis (W_ih, W_hh, biases)."""
    return value.shape[0] == len(cfg.gates) * cfg.hidden_size


def is_batched(cfg: Config, x) -> bool:
    """Whether an input (or a sequence output) has the batch axis, by the spec's batched rank."""
    return np.ndim(x) == len(io_shapes(cfg, 1)["input"])


def time_major(cfg: Config, x: np.ndarray) -> np.ndarray:
    """A sequence input or output as (L, N, F): unbatched gets N = 1, batch_first is undone."""
    if not is_batched(cfg, x):
        return x[:, None]
    return x.swapaxes(0, 1) if cfg.batch_first else x


def user_layout(cfg: Config, batched: bool, seq: np.ndarray) -> np.ndarray:
    """The inverse of `time_major`."""
    if not batched:
        return seq[:, 0]
    return seq.swapaxes(0, 1) if cfg.batch_first else seq


def batched_states(states: np.ndarray, batched: bool) -> np.ndarray:
    """States (layers * D, [N,] H) with the batch axis present."""
    return states if batched else states[:, None]
