"""eager: the recurrence as a plain PyTorch loop over time steps — the readable baseline.

This is the from-scratch exercise done right. It has three layers, each written once:

1. the math of one time step, one function per family (`elman_cell`, `lstm_cell`, `gru_cell`);
2. `scan`, which runs a step function over a sequence, forwards or in reverse;
3. `Stacked`, which runs `num_layers` layers of one or two directions (RNN, LSTM and GRU all use
   it), and `Cell`, which runs a single step (RNNCell, LSTMCell, GRUCell).

Conventions are torch.nn's: `F.linear(x, W, b)` is `x @ W.T + b`; LSTM gates are stacked i, f, g, o
and GRU gates r, z, n, with the GRU reset gate applied after the hidden matmul; two biases per
layer. A recurrent state is always a tuple here, `(h,)` or `(h, c)`, so the loop code is the same
for every family; the modules convert to torch.nn's return structure at the very end.
"""
from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from rnnbench.impls import signatures
from rnnbench.impls.base import Implementation
from rnnbench.reference import Config, io_shapes, param_shapes, param_suffix


# --- 1. The math of one time step. x: (N, I); state: (h,) or (h, c), each (N, ·). -------------

def elman_cell(x, state, weight_ih, weight_hh, bias_ih=None, bias_hh=None, activation=torch.tanh):
    """h' = act(W_ih x + b_ih + W_hh h + b_hh)."""
    (h,) = state
    return (activation(F.linear(x, weight_ih, bias_ih) + F.linear(h, weight_hh, bias_hh)),)


def lstm_cell(x, state, weight_ih, weight_hh, bias_ih=None, bias_hh=None, weight_hr=None):
    """c' = f*c + i*g, h' = o*tanh(c'), projected by W_hr when the LSTM has a proj_size."""
    h, c = state
    gates = F.linear(x, weight_ih, bias_ih) + F.linear(h, weight_hh, bias_hh)
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    if weight_hr is not None:
        h = F.linear(h, weight_hr)
    return h, c


def gru_cell(x, state, weight_ih, weight_hh, bias_ih=None, bias_hh=None):
    """h' = (1-z)*n + z*h with n = tanh(W_in x + b_in + r*(W_hn h + b_hn))."""
    (h,) = state
    x_r, x_z, x_n = F.linear(x, weight_ih, bias_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = F.linear(h, weight_hh, bias_hh).chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)  # the reset gate scales the hidden term *after* its matmul
    return ((1 - z) * n + z * h,)


CELLS = {"rnn": elman_cell, "lstm": lstm_cell, "gru": gru_cell}
ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


# --- 2. One layer, one direction, over time. ---------------------------------------------------

def scan(step, xs, state, reverse=False, lengths=None):
    """Run `step(x_t, state) -> state` over xs (L, N, I); return the outputs (L, N, ·) in time
    order and the final state. The reverse direction starts at the last time step, so its final
    state is the one after time step 0.

    With `lengths` (N,) the sequences are variable-length, padded to L: sequence b has steps
    0..lengths[b]-1 only. At a step outside it its state is kept and its output is zero, so
    its final state is the one after its own last step, and the reverse direction starts there."""
    # unbind gives one view per step; indexing xs[t] instead makes backward quadratic in L.
    inputs = xs.unbind(0)
    outputs = []
    for t in (reversed(range(len(inputs))) if reverse else range(len(inputs))):
        new = step(inputs[t], state)
        if lengths is None:
            state = new
            outputs.append(state[0])
            continue
        live = (lengths > t).unsqueeze(1)  # (N, 1): the sequences that have step t
        state = tuple(torch.where(live, n, s) for n, s in zip(new, state))
        outputs.append(torch.where(live, new[0], torch.zeros_like(new[0])))
    if reverse:
        outputs.reverse()
    return torch.stack(outputs), state


def repack(padded: torch.Tensor, like: PackedSequence) -> PackedSequence:
    """A padded (L, N, ·) output, batch in the caller's order, packed exactly as `like` is (its
    batch_sizes, sorted_indices and unsorted_indices), as torch.nn returns it."""
    order = (like.sorted_indices if like.sorted_indices is not None
             else torch.arange(padded.shape[1], device=padded.device))
    rows = [padded[t, order[:n]] for t, n in enumerate(like.batch_sizes.tolist())]
    return PackedSequence(torch.cat(rows), like.batch_sizes, like.sorted_indices,
                          like.unsorted_indices)


# --- 3. Modules with torch.nn's parameters, constructors and forward contract. ------------------

class Recurrent(nn.Module):
    """Parameters named and shaped as the spec says, torch.nn's init, and input/state checks."""

    def __init__(self, config: Config, device=None, dtype=None):
        super().__init__()
        self.config = config
        for name, value in config.constructor_kwargs().items():  # torch.nn's attributes
            setattr(self, name, value)
        for name, shape in param_shapes(config).items():
            self.register_parameter(name, nn.Parameter(torch.empty(shape, device=device, dtype=dtype)))
        self.cell = CELLS[config.family]
        if config.family == "rnn":
            self.cell = partial(elman_cell, activation=ACTIVATIONS[config.nonlinearity])
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch.nn's init: every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.config.hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -bound, bound)

    def extra_repr(self) -> str:
        return self.config.describe()

    def check_input(self, input: torch.Tensor, unbatched_rank: int) -> bool:
        """Raise like torch.nn on a wrong rank or feature size; return whether input is batched."""
        if input.dim() not in (unbatched_rank, unbatched_rank + 1):
            raise ValueError(f"{type(self).__name__}: expected input to be {unbatched_rank}D or "
                             f"{unbatched_rank + 1}D, got {input.dim()}D")
        if input.shape[-1] != self.config.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]}, "
                               f"expected {self.config.input_size}")
        return input.dim() > unbatched_rank

    def initial_state(self, hx, shapes: dict, like: torch.Tensor) -> tuple:
        """hx as a tuple (h0,) or (h0, c0) of the spec's shapes; zeros where hx is None."""
        names = ("h0", "c0") if self.config.family == "lstm" else ("h0",)
        if hx is None:
            return tuple(like.new_zeros(shapes[name]) for name in names)
        given = tuple(hx) if self.config.family == "lstm" else (hx,)
        if len(given) != len(names):
            raise ValueError(f"hx must be a tuple ({', '.join(names)}), got {len(given)} tensors")
        for name, tensor in zip(names, given):
            if tuple(tensor.shape) != shapes[name]:  # never broadcast a wrongly shaped state
                raise RuntimeError(f"expected {name} of shape {shapes[name]}, got {tuple(tensor.shape)}")
        return given

    def finish(self, state: tuple):
        """torch.nn's return structure: h, or (h, c) for LSTM kinds."""
        return state if self.config.family == "lstm" else state[0]


class Cell(Recurrent):
    """One time step: input (N, I) or unbatched (I,)."""

    def forward(self, input, hx=None):
        batched = self.check_input(input, unbatched_rank=1)
        batch = input.shape[0] if batched else None
        state = self.initial_state(hx, io_shapes(self.config, batch), input)
        if not batched:  # compute with a batch of one, then drop that axis again
            input, state = input.unsqueeze(0), tuple(s.unsqueeze(0) for s in state)
        # A cell's parameter names (weight_ih, bias_hh, ...) are its step function's arguments.
        state = self.cell(input, state, **dict(self.named_parameters()))
        return self.finish(state if batched else tuple(s.squeeze(0) for s in state))


class Stacked(Recurrent):
    """num_layers layers of one or two directions; input (L, N, I), (N, L, I) if batch_first, or
    unbatched (L, I), or variable-length sequences as a PackedSequence (output packed alike).
    Each layer reads the previous layer's output, both directions concatenated; dropout sits
    between layers, in training only."""

    def forward(self, input, hx=None):
        cfg = self.config
        packed, lengths = (input, None) if isinstance(input, PackedSequence) else (None, None)
        if packed is not None:  # padded (L, N, I) in the caller's batch order, and the lengths
            input, lengths = pad_packed_sequence(packed)
            lengths = lengths.to(input.device)
        batched = self.check_input(input, unbatched_rank=2)
        xs = input if batched else input.unsqueeze(1)  # (L, N, I), or (N, L, I) if batch_first
        if batched and cfg.batch_first and lengths is None:
            xs = xs.transpose(0, 1)
        steps, batch = xs.shape[0], (xs.shape[1] if batched else None)
        state = self.initial_state(hx, io_shapes(cfg, batch, steps), input)
        if not batched:
            state = tuple(s.unsqueeze(1) for s in state)

        finals = []  # final state of every layer and direction, layer-major as in h_n
        for layer in range(cfg.num_layers):
            if layer > 0:
                xs = F.dropout(xs, cfg.dropout, self.training)
            outputs = []
            for direction in range(cfg.num_directions):
                index = layer * cfg.num_directions + direction
                initial = tuple(s[index] for s in state)
                output, final = (self.layer(xs, initial, layer, direction) if lengths is None else
                                 scan(partial(self.cell, **self.weights(layer, direction)), xs,
                                      initial, direction == 1, lengths))
                outputs.append(output)
                finals.append(final)
            xs = torch.cat(outputs, dim=-1)

        h_n = tuple(torch.stack(parts) for parts in zip(*finals))  # (h_n,) or (h_n, c_n)
        if packed is not None:
            return repack(xs, packed), self.finish(h_n)
        if not batched:
            return xs.squeeze(1), self.finish(tuple(s.squeeze(1) for s in h_n))
        return (xs.transpose(0, 1) if cfg.batch_first else xs), self.finish(h_n)

    def layer(self, xs, state: tuple, layer: int, direction: int):
        """Run one layer in one direction over xs (L, N, I) from `state`; return its outputs
        (L, N, ·) in time order and its final state. Subclasses override this to compute a
        layer differently (e.g. with a fused kernel) and keep the rest of the module."""
        step = partial(self.cell, **self.weights(layer, direction))
        return scan(step, xs, state, reverse=direction == 1)

    def weights(self, layer: int, direction: int) -> dict:
        """The parameters of one layer and direction, named as the cell functions' arguments."""
        # Every name ends in exactly one suffix ("_l1", "_l1_reverse"), so endswith selects one group.
        suffix = param_suffix(layer, direction)
        return {name.removesuffix(suffix): parameter for name, parameter in self.named_parameters()
                if name.endswith(suffix)}


# torch.nn's constructors, argument for argument, on the two modules above.
KINDS = signatures.bind(Cell, Stacked, __name__)
# Bound under the names torch.nn gives them, so instances pickle (and a search finds them).
RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU = KINDS.values()

IMPLEMENTATION = Implementation(
    name="eager",
    kinds=KINDS,
    description="a plain PyTorch loop over time steps, written for clarity",
)
