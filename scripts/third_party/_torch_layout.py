"""What every adapter here shares: torch.nn's constructor, parameters and call convention around a
library that computes one layer (or a whole stack) its own way.

An adapter module owns its parameters in torch.nn's layout and names (`weight_ih_l0`, ...), takes
their initial values from the library where the library has an init (`initial`), and on every
call hands the library its own layout of them (`run`), so gradients, `load_state_dict` and
`.to()` act on torch.nn's parameters as they do for torch.nn. The adapter does layout only: time-
major vs batch-first, a batch axis added to unbatched input, gate order, transposed kernels. It
checks only what it translates itself (the constructor's arguments, which most libraries do not
take in torch's form; the ranks of input and state; the state's layers x directions axis, which
it splits) and raises as torch.nn raises there. Every other size (features, batch) reaches the
library as given, and the adapter computes nothing of its own, so what the library gets wrong
stays wrong.
"""
from __future__ import annotations

import math

import torch
from torch import nn

GATES = {"rnn": 1, "lstm": 4, "gru": 3}


class TorchLayout(nn.Module):
    """torch.nn.RNN/LSTM/GRU's contract over `run(x, state, layer)`, one layer at a time.

    x is time-major (steps, batch, features); state is a tuple of (directions, batch, hidden)
    tensors ((h,) or (h, c)); `run` returns the layer's output (steps, batch, directions *
    hidden) and its final state in the same layout."""

    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.nonlinearity, self.bias, self.batch_first = nonlinearity, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = dropout, bidirectional, proj_size
        self.num_directions = 2 if bidirectional else 1
        rows = GATES[self.family] * hidden_size
        for layer in range(num_layers):
            below = input_size if layer == 0 else hidden_size * self.num_directions
            for direction in range(self.num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {"weight_ih": (rows, below), "weight_hh": (rows, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(rows,), bias_hh=(rows,))
                initial = self.initial(layer, direction, shapes)
                for role, shape in shapes.items():
                    value = initial.get(role)
                    if value is None:  # the library has no init of its own: torch.nn's
                        bound = 1.0 / math.sqrt(hidden_size)
                        value = torch.empty(shape).uniform_(-bound, bound)
                    self.register_parameter(role + suffix, nn.Parameter(
                        torch.as_tensor(value).to(device=device, dtype=dtype or torch.get_default_dtype())))

    def initial(self, layer: int, direction: int, shapes: dict) -> dict:
        """The library's initial values of one layer and direction in torch.nn's layout (a role
        left out gets torch.nn's init)."""
        return {}

    def weights(self, layer: int, direction: int) -> dict[str, torch.Tensor]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        roles = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return {role: getattr(self, role + suffix) for role in roles if hasattr(self, role + suffix)}

    def forward(self, input, hx=None):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2-D (unbatched) or 3-D input, got {input.dim()}-D")
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        states = self.initial_state(hx, x, batched)
        finals = []
        for layer in range(self.num_layers):
            # The top layer gets every row left, so that a state with too many rows reaches
            # the library as it was given.
            last = layer == self.num_layers - 1
            rows = slice(layer * self.num_directions, None if last else (layer + 1) * self.num_directions)
            x, final = self.run(x, tuple(s[rows] for s in states), layer)
            finals.append(final)
        finals = tuple(torch.cat(parts) for parts in zip(*finals))
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        if not batched:
            x, finals = x.squeeze(1), tuple(f.squeeze(1) for f in finals)
        return x, (finals if self.family == "lstm" else finals[0])

    def initial_state(self, hx, x, batched: bool) -> tuple[torch.Tensor, ...]:
        """hx as a tuple of (layers * directions, batch, hidden) tensors; zeros when omitted."""
        if hx is None:
            shape = (self.num_layers * self.num_directions, x.shape[1], self.hidden_size)
            count = 2 if self.family == "lstm" else 1
            return tuple(x.new_zeros(shape) for _ in range(count))
        given = tuple(hx) if self.family == "lstm" else (hx,)
        rows = self.num_layers * self.num_directions
        for state in given:
            if state.dim() != x.dim() - (not batched) or state.shape[0] != rows:
                raise RuntimeError(f"expected a state of {rows} x (batch) x hidden for "
                                   f"{'batched' if batched else 'unbatched'} input, got {tuple(state.shape)}")
        return given if batched else tuple(s.unsqueeze(1) for s in given)

    def run(self, x, state, layer: int):
        raise NotImplementedError


def _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size):
    """Refuse, as torch.nn does, the arguments no layer can be built from."""
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size),
                        ("num_layers", num_layers)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"unknown nonlinearity {nonlinearity!r}")
    if not 0 <= dropout <= 1:
        raise ValueError(f"dropout must be in [0, 1], got {dropout!r}")
    if not 0 <= proj_size < hidden_size:
        raise ValueError(f"proj_size must be in [0, hidden_size), got {proj_size!r}")
