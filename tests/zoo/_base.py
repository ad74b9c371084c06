"""The zoo's clean starting point: a compact torch.nn-conforming recurrent module of every kind.

Written from scratch (independently of the built-in `eager`), as a careful author would: a Python
loop over time steps, one class per kind with torch.nn's constructor signature, torch.nn's
parameter names and return structure. The work is split into small hooks — parameter naming,
shapes and init, the cell math of each family, the time order, the layer stack and its dropout,
the initial state, the assembly of h_n — so that every planted bug in the zoo is a subclass that
overrides exactly one of them (see catalogue.py).
"""
from __future__ import annotations

import math
import warnings

import torch
from torch import nn
from torch.nn import functional as F


class Recurrent(nn.Module):
    """One recurrent module; subclasses fix the family, the gate order and torch.nn's signature.

    Internally a batch is always a time-major sequence (steps, batch, features) and a state is
    a tuple of (layers * directions, batch, width) tensors — (h,) or, for LSTM, (h, c). A cell
    is a one-layer, one-direction module run for one step.
    """

    family = "rnn"
    cell = False
    gate_order: tuple[str, ...] = ("h",)

    def _setup(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
               batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
               dtype=None):
        nn.Module.__init__(self)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.nonlinearity, self.bias, self.batch_first = nonlinearity, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = dropout, bidirectional, proj_size
        self.check_options()
        self.build(device, dtype)
        self.reset_parameters()

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    # -- construction ---------------------------------------------------------------------------

    def check_options(self) -> None:
        """Refuse with ValueError what torch.nn refuses at construction."""
        for name in ("input_size", "hidden_size", "num_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {self.nonlinearity!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) \
                or not 0 <= self.dropout <= 1:
            raise ValueError(f"dropout must be a probability in [0, 1], got {self.dropout!r}")
        if not isinstance(self.proj_size, int) or not 0 <= self.proj_size < self.hidden_size:
            raise ValueError(f"proj_size must be in [0, hidden_size), got {self.proj_size!r}")
        if self.dropout and self.num_layers == 1:
            warnings.warn("dropout acts between layers only: it has no effect with one layer",
                          stacklevel=3)

    def parameter_shapes(self, layer: int) -> dict[str, tuple[int, ...]]:
        """Shape of each parameter role of one layer (any direction), in torch.nn's order."""
        rows = len(self.gate_order) * self.hidden_size
        width = self.proj_size or self.hidden_size
        below = self.input_size if layer == 0 else width * self.num_directions
        shapes = {"weight_ih": (rows, below), "weight_hh": (rows, width)}
        if self.bias:
            shapes.update(bias_ih=(rows,), bias_hh=(rows,))
        if self.proj_size:
            shapes["weight_hr"] = (self.proj_size, self.hidden_size)
        return shapes

    def parameter_name(self, role: str, layer: int, direction: int) -> str:
        if self.cell:
            return role
        return f"{role}_l{layer}" + ("_reverse" if direction else "")

    def new_parameter(self, shape, device, dtype) -> nn.Parameter:
        return nn.Parameter(torch.empty(shape, device=device, dtype=dtype))

    def build(self, device, dtype) -> None:
        """Register every parameter under torch.nn's name, layer-major then direction."""
        for layer in range(self.num_layers):
            for direction in range(self.num_directions):
                for role, shape in self.parameter_shapes(layer).items():
                    self.register_parameter(self.parameter_name(role, layer, direction),
                                            self.new_parameter(shape, device, dtype))

    def weights(self, layer: int, direction: int) -> dict[str, torch.Tensor]:
        """The parameters of one layer and direction, by role."""
        return {role: getattr(self, self.parameter_name(role, layer, direction))
                for role in self.parameter_shapes(layer)}

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for name, parameter in self.named_parameters():
                self.init_parameter(name, parameter)

    def init_parameter(self, name: str, parameter: torch.Tensor) -> None:
        """torch.nn's init: every parameter from U(-1/sqrt(H), 1/sqrt(H))."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        parameter.uniform_(-bound, bound)

    # -- forward --------------------------------------------------------------------------------

    def forward(self, input, hx=None):
        x, batched = self.to_steps(input)
        states = self.initial_state(hx, x, batched)
        output, finals = self.run_layers(x, states)
        return self.package(output, finals, batched)

    def to_steps(self, input: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """The input as a (steps, batch, features) sequence, and whether it came batched."""
        rank = 2 if self.cell else 3
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a tensor, got {type(input).__name__}")
        if input.dim() not in (rank - 1, rank):
            raise ValueError(f"expected a {rank - 1}-D (unbatched) or {rank}-D input, "
                             f"got {input.dim()}-D")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has {input.shape[-1]} features, expected {self.input_size}")
        batched = input.dim() == rank
        if self.cell:
            return (input if batched else input.unsqueeze(0)).unsqueeze(0), batched
        return (self.time_major(input) if batched else self.add_batch(input)), batched

    def time_major(self, x: torch.Tensor) -> torch.Tensor:
        """Swap batch-first to time-major and back (its own inverse)."""
        return x.transpose(0, 1) if self.batch_first else x

    def add_batch(self, sequence: torch.Tensor) -> torch.Tensor:
        """An unbatched (steps, features) sequence as a batch of one."""
        return sequence.unsqueeze(1)

    def state_shapes(self, batch: int) -> tuple[tuple[int, ...], ...]:
        lead = (self.num_layers * self.num_directions, batch)
        h = lead + (self.proj_size or self.hidden_size,)
        return (h, lead + (self.hidden_size,)) if self.family == "lstm" else (h,)

    def initial_state(self, hx, x: torch.Tensor, batched: bool) -> tuple[torch.Tensor, ...]:
        """hx in the internal layout, checked against the expected shapes; zeros when omitted."""
        shapes = self.state_shapes(x.shape[1])
        if hx is None:
            return self.zero_state(shapes, x)
        if self.family == "lstm":
            if not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                raise TypeError("an LSTM's hx must be a tuple (h0, c0)")
            given = tuple(hx)
        else:
            given = (hx,)
        states = []
        for state, shape in zip(given, shapes):
            if not isinstance(state, torch.Tensor):
                raise TypeError(f"hx must hold tensors, got {type(state).__name__}")
            state = state if batched else state.unsqueeze(-2)
            state = state.unsqueeze(0) if self.cell else state
            self.check_state(state, shape)
            states.append(state)
        return tuple(states)

    def zero_state(self, shapes, like: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(like.new_zeros(shape) for shape in shapes)

    def check_state(self, state: torch.Tensor, shape: tuple[int, ...]) -> None:
        # Exact shapes only: a state that merely broadcasts is a caller's mistake to report.
        if tuple(state.shape) != shape:
            raise RuntimeError(f"expected a state of shape {shape} (internal layout), "
                               f"got {tuple(state.shape)}")

    def run_layers(self, x, states):
        """Run the stack; returns the top layer's output and the final state of each
        (layer, direction), layer-major."""
        finals, below = [], x
        for layer in range(self.num_layers):
            inputs = self.layer_input(layer, x, below)
            outputs = []
            for direction in range(self.num_directions):
                start = tuple(s[layer * self.num_directions + direction] for s in states)
                output, final = self.run_direction(inputs, start, layer, direction)
                outputs.append(output)
                finals.append(final)
            below = torch.cat(outputs, dim=-1)
        return self.final_output(below), finals

    def layer_input(self, layer: int, raw: torch.Tensor, below: torch.Tensor) -> torch.Tensor:
        """Layer 0 reads the sequence; each layer above reads the one below, through dropout."""
        return raw if layer == 0 else self.drop(below)

    def drop(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.dropout, self.training)

    def final_output(self, output: torch.Tensor) -> torch.Tensor:
        return output

    def run_direction(self, x, state, layer: int, direction: int):
        """Scan one direction of one layer; outputs stay aligned with the input's time steps."""
        weights = self.weights(layer, direction)
        steps = x.unbind(0)
        outputs = [None] * len(steps)
        for t in self.time_order(len(steps), reverse=direction == 1):
            state = self.step(steps[t], state, weights)
            outputs[t] = state[0]
        return torch.stack(outputs), state

    def time_order(self, steps: int, reverse: bool):
        return range(steps - 1, -1, -1) if reverse else range(steps)

    def stack_finals(self, finals) -> tuple[torch.Tensor, ...]:
        """h_n (and c_n) from the per-(layer, direction) final states, layer-major."""
        return tuple(torch.stack(parts) for parts in zip(*finals))

    def package(self, output, finals, batched: bool):
        """torch.nn's return structure: a cell's new state, or (output, h_n | (h_n, c_n))."""
        states = self.stack_finals(finals)
        if self.cell:
            states = tuple(s[0] if batched else s[0, 0] for s in states)
            return states if self.family == "lstm" else states[0]
        if batched:
            output = self.time_major(output)
        else:
            output, states = output[:, 0], tuple(s[:, 0] for s in states)
        return output, (states if self.family == "lstm" else states[0])

    # -- the cell math shared by the families ---------------------------------------------------

    def linear(self, x, weight, bias):
        return x @ weight.T if bias is None else x @ weight.T + bias

    def input_part(self, x, w):
        return self.linear(x, w["weight_ih"], w.get("bias_ih"))

    def hidden_part(self, h, w):
        return self.linear(h, w["weight_hh"], w.get("bias_hh"))

    def split(self, gates: torch.Tensor) -> dict[str, torch.Tensor]:
        """The stacked gate pre-activations as one block per gate name."""
        return dict(zip(self.gate_order, gates.chunk(len(self.gate_order), dim=-1)))

    def step(self, x, state, w):
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"


class ElmanMath:
    """h' = act(W_ih x + b_ih + W_hh h + b_hh)."""

    def activation(self, z):
        return torch.tanh(z) if self.nonlinearity == "tanh" else torch.relu(z)

    def step(self, x, state, w):
        (h,) = state
        return (self.activation(self.input_part(x, w) + self.hidden_part(h, w)),)


class LSTMMath:
    """torch.nn's LSTM: gates i, f, g, o; an optional projection h = W_hr (o * tanh(c))."""

    family, gate_order = "lstm", ("i", "f", "g", "o")

    def step(self, x, state, w):
        h, c = state
        g = self.split(self.input_part(x, w) + self.hidden_part(h, w))
        c = torch.sigmoid(g["f"]) * c + torch.sigmoid(g["i"]) * torch.tanh(g["g"])
        h = torch.sigmoid(g["o"]) * torch.tanh(c)
        return self.project(h, w), c

    def project(self, h, w):
        return h @ w["weight_hr"].T if "weight_hr" in w else h


class GRUMath:
    """torch.nn's GRU: gates r, z, n; the reset gate multiplies (W_hn h + b_hn)."""

    family, gate_order = "gru", ("r", "z", "n")

    def step(self, x, state, w):
        (h,) = state
        gx, gh = self.split(self.input_part(x, w)), self.split(self.hidden_part(h, w))
        r = torch.sigmoid(gx["r"] + gh["r"])
        z = torch.sigmoid(gx["z"] + gh["z"])
        return (self.blend(z, self.candidate(gx["n"], gh["n"], r, h, w), h),)

    def candidate(self, x_n, h_n, r, h, w):
        return torch.tanh(x_n + r * h_n)

    def blend(self, z, n, h):
        return (1 - z) * n + z * h


class RNN(ElmanMath, Recurrent):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        self._setup(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                    dropout, bidirectional, device=device, dtype=dtype)


class LSTM(LSTMMath, Recurrent):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        self._setup(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                    bidirectional, proj_size, device=device, dtype=dtype)


class GRU(GRUMath, Recurrent):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        self._setup(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                    bidirectional, device=device, dtype=dtype)


class RNNCell(ElmanMath, Recurrent):
    cell = True

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        self._setup(input_size, hidden_size, nonlinearity=nonlinearity, bias=bias,
                    device=device, dtype=dtype)


class LSTMCell(LSTMMath, Recurrent):
    cell = True

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        self._setup(input_size, hidden_size, bias=bias, device=device, dtype=dtype)


class GRUCell(GRUMath, Recurrent):
    cell = True

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        self._setup(input_size, hidden_size, bias=bias, device=device, dtype=dtype)


KINDS = {"rnn": RNN, "lstm": LSTM, "gru": GRU,
         "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell}
