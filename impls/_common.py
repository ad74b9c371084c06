"""torch.nn's modules around a pluggable recurrence, shared by the torchscript, compile, fused,
onnxruntime and triton implementations.

Everything here is the contract, not the speed: the six constructors with torch.nn's signatures,
parameters named, shaped and initialised as the spec says, and the forward contract (batched or
unbatched input, batch_first, hx omitted or given, layers and directions, dropout between layers
in training only, torch.nn's exceptions for wrong inputs, never broadcasting). The recurrence is
a `Backend`'s, one layer and direction at a time (or the whole stack at once where a backend
overrides `stack`): the implementations differ only there.
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rnnbench.impls import signatures
from rnnbench.reference import Config, init_spec, io_shapes, param_shapes, param_suffix
from rnnbench.reference.config import GATES

# One layer and direction's parameters in a fixed order; absent ones (no bias, no projection)
# are None.
WEIGHT_PREFIXES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
Weights = tuple[Optional[Tensor], ...]
State = tuple[Tensor, ...]  # (h,) or, for LSTM kinds, (h, c)


class Backend:
    """The recurrence an implementation brings; inputs are already checked, batched and
    time-major. `state` None means zeros (see `zero_state`)."""

    def new_parameter(self, shape: tuple[int, ...], device, dtype) -> Tensor:
        """Storage for a parameter of `shape` (values come from the init): contiguous here; an
        implementation may choose the layout its kernels read."""
        return torch.empty(shape, device=device, dtype=dtype)

    def layer(self, family: str, x: Tensor, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool) -> tuple[Tensor, State]:
        """Run one layer and direction over x (T, B, I) from `state`; return the output
        (T, B, P) in time order and the final state. `reverse` runs from t = T-1 down to 0."""
        raise NotImplementedError

    def cell(self, family: str, x: Tensor, state: Optional[State], weights: Weights,
             relu: bool) -> State:
        """One time step: x (B, I) and `state` to the next state; here a sequence of one."""
        return self.layer(family, x.unsqueeze(0), state, weights, relu, False)[1]

    def stack(self, config: Config, x: Tensor, state: Optional[State],
              weights: Callable[[int], Weights], relu: bool,
              training: bool) -> tuple[Tensor, State]:
        """All layers and directions over x (T, B, I) from `state` (each (layers * D, B, H)),
        `weights(index)` being those of layer-and-direction `index` (layer-major, as in h_n);
        return the last layer's output (T, B, D * P) and the final states stacked as h_n.
        Here layer after layer through `layer`, with dropout between layers in training; an
        implementation that runs the whole stack at once overrides this."""
        finals = []  # final state of every layer and direction, layer-major as in h_n
        directions = config.num_directions
        for layer in range(config.num_layers):
            if layer > 0 and training and config.dropout > 0:
                x = F.dropout(x, config.dropout, training=True)
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                given = None if state is None else tuple(s[index] for s in state)
                output, final = self.layer(config.family, x, given, weights(index), relu,
                                           direction == 1)
                outputs.append(output)
                finals.append(final)
            x = outputs[0] if directions == 1 else torch.cat(outputs, dim=-1)
        # (h_n,) or (h_n, c_n); one layer and direction needs no copy
        return x, tuple(parts[0].unsqueeze(0) if len(parts) == 1 else torch.stack(parts)
                        for parts in zip(*finals))


def transposed_storage(shape: tuple[int, ...], device=None, dtype=None) -> Tensor:
    """Storage for a parameter of `shape` whose 2-D weights are stored transposed: the parameter
    is a transposed view, so `weight.t()` is contiguous. Every matmul of a recurrence reads its
    weights that way (x @ W^T); BLAS runs that layout up to 1.5x faster at the few rows of a
    time step, and the kernels get it without a copy per call. Whatever changes the parameter,
    even through .data, changes this storage."""
    storage = torch.empty(shape[::-1], device=device, dtype=dtype)
    return storage.t() if len(shape) == 2 else storage


def zero_state(family: str, x: Tensor, weights: Weights) -> State:
    """The zero initial state of one layer and direction for a batch of x (.., B, I): h of the
    output width (weight_hh's columns), c of hidden_size (weight_hh's rows per gate)."""
    w_hh = weights[1]
    batch = x.shape[-2]
    h = torch.zeros((batch, w_hh.shape[1]), dtype=x.dtype, device=x.device)
    if family != "lstm":
        return (h,)
    return h, torch.zeros((batch, w_hh.shape[0] // len(GATES[family])), dtype=x.dtype, device=x.device)


@functools.lru_cache(maxsize=256)
def _shapes(cfg: Config, batch: Optional[int], steps: int) -> dict[str, tuple[int, ...]]:
    # The spec's shapes, cached: asking for them is in every forward's path.
    return io_shapes(cfg, batch, steps)


class Recurrent(nn.Module):
    """Parameters named, shaped and initialised as the spec says; torch.nn's attributes."""

    backend: Backend  # set per implementation by `module_classes`

    def __init__(self, config: Config, device=None, dtype=None):
        super().__init__()
        self.config = config
        for name, value in config.constructor_kwargs().items():  # torch.nn's attributes
            setattr(self, name, value)
        shapes = param_shapes(config)
        for name, shape in shapes.items():
            storage = self.backend.new_parameter(shape, device, dtype)
            self.register_parameter(name, nn.Parameter(storage))
        suffixes = ([""] if config.is_cell else
                    [param_suffix(layer, direction) for layer in range(config.num_layers)
                     for direction in range(config.num_directions)])
        # Per layer and direction (layer-major, as in h_n), the parameter names in Weights order.
        self._weight_names = [tuple(prefix + suffix if prefix + suffix in shapes else None
                                    for prefix in WEIGHT_PREFIXES) for suffix in suffixes]
        self._relu = config.nonlinearity == "relu"
        self._state_names = ("h0", "c0") if config.family == "lstm" else ("h0",)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch.nn's init: every parameter drawn from the spec's distribution."""
        for name, uniform in init_spec(self.config).items():
            nn.init.uniform_(getattr(self, name), uniform.low, uniform.high)

    def extra_repr(self) -> str:
        return self.config.describe()

    def _weights(self, index: int) -> Weights:
        # Looked up on every call, so replaced or reloaded parameters are used; straight from
        # the parameter dict, as nn.Module's attribute lookup costs a microsecond a name.
        parameters = self._parameters
        return tuple(None if name is None else parameters[name] for name in self._weight_names[index])

    def _check_input(self, input: Tensor, dtype_error: type) -> None:
        """Raise like torch.nn when the input's dtype or feature size does not match."""
        dtype = self._parameters[self._weight_names[0][0]].dtype
        if input.dtype != dtype:
            raise dtype_error(f"input dtype ({input.dtype}) does not match weight dtype ({dtype})")
        if input.shape[-1] != self.config.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.config.input_size}, got {input.shape[-1]}")

    def _given_state(self, hx, rank_error: type, ranks: tuple[int, ...], what: str) -> State:
        """hx as a tuple (h0,) or (h0, c0): TypeError if it is neither a tensor nor a pair of
        them as the family needs, `rank_error` (torch.nn's type) if a rank is not in `ranks`."""
        if self.config.family == "lstm":
            if not (isinstance(hx, (tuple, list)) and len(hx) == 2
                    and all(isinstance(t, Tensor) for t in hx)):
                raise TypeError("hx must be a tuple (h0, c0) of tensors or None, got "
                                f"{type(hx).__name__}")
            given = tuple(hx)
        elif isinstance(hx, Tensor):
            given = (hx,)
        else:
            raise TypeError(f"hx must be a Tensor or None, got {type(hx).__name__}")
        for tensor in given:
            if tensor.dim() not in ranks:
                raise rank_error(f"{what}, got a {tensor.dim()}-D hx")
        return given

    def _check_state(self, given: State, input: Tensor, shapes: dict) -> None:
        """A given state against the spec's shapes, the input's dtype and device: a mismatch
        raises RuntimeError, never broadcast, never convert."""
        for name, tensor in zip(self._state_names, given):
            if tuple(tensor.shape) != shapes[name]:
                raise RuntimeError(f"Expected hidden size {shapes[name]}, got {list(tensor.shape)}")
            if tensor.dtype != input.dtype or tensor.device != input.device:
                raise RuntimeError(f"{name} is {tensor.dtype} on {tensor.device}, but the input "
                                   f"is {input.dtype} on {input.device}")


class Cell(Recurrent):
    """One time step: input (N, I) or unbatched (I,); returns h, or (h, c) for LSTMCell."""

    def forward(self, input: Tensor, hx=None):
        rank = input.dim()
        if rank != 2 and rank != 1:
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {rank}D "
                             "instead")
        state = None if hx is None else self._given_state(
            hx, ValueError, (1, 2), f"{type(self).__name__}: Expected hidden to be 1D or 2D")
        self._check_input(input, RuntimeError)
        batched = rank == 2
        if state is not None:
            batch = input.shape[0] if batched else None
            self._check_state(state, input, _shapes(self.config, batch, 1))
            if not batched:
                state = tuple(s.unsqueeze(0) for s in state)
        if not batched:  # compute with a batch of one, then drop that axis again
            input = input.unsqueeze(0)
        state = self.backend.cell(self.config.family, input, state, self._weights(0), self._relu)
        if not batched:
            state = tuple(s.squeeze(0) for s in state)
        return state if len(state) == 2 else state[0]


class Stacked(Recurrent):
    """num_layers layers of one or two directions over input (L, N, I), (N, L, I) with
    batch_first, or unbatched (L, I); returns (output, h_n), or (output, (h_n, c_n)) for LSTM.
    Each layer reads the previous one's output, directions concatenated; dropout sits between
    layers, in training only."""

    def __init__(self, config: Config, device=None, dtype=None):
        if config.dropout > 0 and config.num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={config.dropout} and num_layers=1", stacklevel=3)
        super().__init__(config, device, dtype)

    def forward(self, input: Tensor, hx=None):
        cfg = self.config
        rank = input.dim()
        if rank != 3 and rank != 2:
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {rank}D "
                             "tensor instead")
        batched = rank == 3
        given = None if hx is None else self._given_state(
            hx, RuntimeError, (rank,), f"For {'batched 3' if batched else 'unbatched 2'}-D input, "
                                       f"hx should also be {rank}-D")
        self._check_input(input, ValueError)
        x = input if batched else input.unsqueeze(1)
        if batched and cfg.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[:2]
        if steps == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        if given is not None:
            self._check_state(given, input, _shapes(cfg, batch if batched else None, steps))
            if not batched:
                given = tuple(s.unsqueeze(1) for s in given)

        x, h_n = self.backend.stack(cfg, x, given, self._weights, self._relu, self.training)
        if batched:
            output = x.transpose(0, 1) if cfg.batch_first else x
        else:
            output, h_n = x.squeeze(1), tuple(s.squeeze(1) for s in h_n)
        return output, (h_n if len(h_n) == 2 else h_n[0])


def module_classes(backend: Backend, module_name: str) -> dict[str, type]:
    """The six classes, kind -> class, running on `backend`. They are named as torch.nn names
    them and belong to `module_name`, which must bind them under those names (so they pickle)."""
    return signatures.bind(Cell, Stacked, module_name, backend=backend)
