"""Variable-length sequences: what a sequence kind computes on torch.nn's packed input.

A batch of sequences of different lengths (torch's `PackedSequence`) is, by definition, each
sequence run on its own: sequence b reads its first `lengths[b]` steps and nothing else. So

- its h_n (and c_n) is the forward direction's state after its own last step,
  t = lengths[b] - 1, not after the longest sequence's;
- the reverse direction starts at its own last step and ends at t = 0;
- it has no outputs beyond its length (in the padded layout they are zeros, as
  `pad_packed_sequence` fills them).

The functions here say exactly that: they run `numerics.forward` / `numerics.backward` on each
sequence alone (batch 1, sliced to its length) and assemble the results. The layout is
time-major and padded: input (T, N, I) with T = max(lengths); states in the original batch
order (torch.nn reorders them itself when the packing sorted the batch). `cfg.batch_first` does
not matter: a packed sequence has no batch axis to put first.
"""
from __future__ import annotations

import numpy as np

from rnnbench.reference import numerics
from rnnbench.reference.config import Config


def validate_lengths(lengths, steps: int, batch: int) -> tuple[int, ...]:
    """`lengths` as a tuple of ints, one per sequence, each in 1..steps; ValueError otherwise."""
    lengths = tuple(int(n) for n in np.asarray(lengths).reshape(-1))
    if len(lengths) != batch:
        raise ValueError(f"lengths has {len(lengths)} entries, expected one per sequence ({batch})")
    if any(n < 1 or n > steps for n in lengths):
        raise ValueError(f"lengths {lengths} must each be between 1 and the {steps} steps")
    return lengths


def forward_packed(cfg: Config, params: dict, x, lengths, hx=None) -> dict[str, np.ndarray]:
    """Run a sequence kind on variable-length sequences in float64.

    `x` is time-major and padded, (T, N, input_size); `lengths` has N entries, each in 1..T;
    `hx` is None (zeros), h0, or (h0, c0) for the LSTM, each (layers * D, N, H). Returns
    {"output": (T, N, D * H_out) with zeros beyond each length, "h_n": ..., ["c_n": ...]}.
    """
    cfg, x, lengths, states = _prepare(cfg, x, lengths, hx)
    output = np.zeros((x.shape[0], x.shape[1], cfg.num_directions * cfg.output_size))
    finals = {name: [] for name in numerics.output_names(cfg)[1:]}
    for b, n in enumerate(lengths):
        result = numerics.flatten_outputs(cfg, numerics.forward(
            cfg, params, x[:n, b:b + 1], _one(cfg, states, b)))
        output[:n, b] = result["output"][:, 0]
        for name in finals:
            finals[name].append(result[name])
    return {"output": output, **{name: np.concatenate(parts, axis=1)
                                 for name, parts in finals.items()}}


def backward_packed(cfg: Config, params: dict, x, lengths, hx, grad_out: dict) -> dict[str, np.ndarray]:
    """Gradients of sum(forward_packed(...)[k] * grad_out[k]) over the outputs k.

    `grad_out` is keyed like forward_packed's result; a missing key means zeros, and the
    output's gradient beyond each length is ignored (those outputs do not exist). Returns
    {"input": (T, N, I), zeros beyond each length; "h0" (and "c0"): the initial state's
    gradients (with hx None: w.r.t. the zero state); every parameter name: summed over the
    sequences}.
    """
    cfg, x, lengths, states = _prepare(cfg, x, lengths, hx)
    names = numerics.output_names(cfg)
    d_input = np.zeros_like(x)
    d_states = {name: np.zeros_like(s) for name, s in zip(numerics.state_names(cfg), states)}
    d_params: dict[str, np.ndarray] = {}
    for b, n in enumerate(lengths):
        piece = {name: _grad_slice(grad_out.get(name), name, b, n, x, states, cfg)
                 for name in names}
        grads = numerics.backward(cfg, params, x[:n, b:b + 1], _one(cfg, states, b),
                                  numerics.nest_outputs(cfg, piece))
        d_input[:n, b] = grads.pop("input")[:, 0]
        for name, key in zip(numerics.state_names(cfg), numerics.state_grad_names(cfg)):
            d_states[name][:, b] = grads.pop(key)[:, 0]
        for name, g in grads.items():
            d_params[name] = d_params.get(name, 0.0) + g
    return {"input": d_input, **d_states, **d_params}


def _prepare(cfg: Config, x, lengths, hx):
    """Validated arguments: a time-major config, x (T, N, I), lengths, initial states."""
    if not isinstance(cfg, Config) or cfg.is_cell:
        raise ValueError("packed sequences need a sequence kind (rnn, lstm, gru)")
    cfg = cfg.replace(batch_first=False)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"x must be padded and time-major (T, N, I), got shape {x.shape}")
    lengths = validate_lengths(lengths, x.shape[0], x.shape[1])
    if hx is None:
        parts = (None,) * len(numerics.state_names(cfg))
    else:
        parts = tuple(hx) if cfg.family == "lstm" else (hx,)
    shape = (cfg.num_layers * cfg.num_directions, x.shape[1])
    states = tuple(np.zeros(shape + (width,)) if s is None else np.asarray(s, dtype=np.float64)
                   for s, width in zip(parts, _state_widths(cfg)))
    return cfg, x, lengths, states


def _state_widths(cfg: Config) -> tuple[int, ...]:
    return (cfg.output_size, cfg.hidden_size) if cfg.family == "lstm" else (cfg.output_size,)


def _one(cfg: Config, states: tuple, b: int):
    """Sequence b's initial state, batch 1, as numerics.forward takes it."""
    parts = tuple(s[:, b:b + 1] for s in states)
    return parts if cfg.family == "lstm" else parts[0]


def _grad_slice(grad, name: str, b: int, n: int, x, states, cfg: Config) -> np.ndarray:
    """Sequence b's part of one output's gradient (zeros when not given)."""
    if name == "output":
        shape = (x.shape[0], x.shape[1], cfg.num_directions * cfg.output_size)
        g = np.zeros(shape) if grad is None else np.asarray(grad, dtype=np.float64)
        return g[:n, b:b + 1]
    width = cfg.hidden_size if name == "c_n" else cfg.output_size
    shape = (cfg.num_layers * cfg.num_directions, x.shape[1], width)
    g = np.zeros(shape) if grad is None else np.asarray(grad, dtype=np.float64)
    return g[:, b:b + 1]
