"""Jittor's recurrent layers as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell:
jittor.nn.RNN / LSTM / GRU (the whole stack, one jittor module) and jittor.nn.RNNCell / LSTMCell /
GRUCell, run by jittor on the CPU.

Jittor ports torch.nn's API: its modules take torch.nn's arguments (less device= and dtype=),
hold torch.nn's parameter names and shapes (weight_ih_l0, ..., _reverse, weight_hr_l0; gates
i, f, g, o and r, z, n) and are called as torch.nn's are (forward(input, hx=None) -> (output,
h_n) or (output, (h_n, c_n)); the cells return h or (h, c)). So the adapter translates tensors
and nothing else:

- the adapter owns torch.nn's parameters, registered under jittor's names in jittor's own
  state_dict order (jittor lists `_reverse` right after each tensor, and weight_hr before the
  biases); each call builds a fresh jittor module of the same configuration, sets every
  parameter to a jittor copy of the torch one, hands jittor the input and state as they are
  given (no axis added or moved: batch_first, unbatched input and the state's shape are jittor's
  business) and converts the results back. A fresh module per call keeps each call's graph to
  itself.
- torch <-> jittor goes through numpy with the dtype named explicitly (jittor would otherwise
  turn float64 arrays into float32, its `auto_convert_64_to_32`); numpy has no bfloat16, so a
  bfloat16 tensor crosses as float32 and is cast back by jittor (`Var.bfloat16()`) and torch, both
  exact.
- device= and dtype= are the adapter's: jittor's modules have neither (its parameters are
  always float32); the parameters are made in torch and copied into jittor at each call.
- training mode is handed on (`Module.train()` / `eval()`).

Initial values are jittor's own (every tensor U(-1/sqrt(H), 1/sqrt(H))), drawn by a jittor
module built at construction with jittor's generator seeded (`jt.set_seed`) from torch's, so
torch.manual_seed fixes them; jittor's constructor gets torch.nn's arguments as given and
validates what it validates.

Backward: a torch.autograd.Function runs jittor with gradients on and, in backward, asks
jittor's reverse mode (`jt.grad`) for the gradients of the input, the given state and the
parameters of sum_k <output_k, grad_output_k> (the product and the sum are jittor ops on
jittor's outputs); no double backward.

Declared unsupported: cuda (jittor runs here in its CPU mode and the tensors cross through
numpy), packed (jittor has no PackedSequence). Jittor is imported with `nvcc_path=""` (else,
on a machine with CUDA headers but no driver, it builds its CUDA core and fails) and
`use_mkl=0` (else it downloads oneDNN) unless the environment sets them.
"""
from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable

os.environ.setdefault("nvcc_path", "")  # CPU mode: the CUDA core would not build here
os.environ.setdefault("use_mkl", "0")  # else jittor downloads oneDNN on first import
import jittor as jt  # noqa: E402  (after torch: jittor's docs import torch first)

from rnnbench.impls import Implementation

LAYERS = {"rnn": jt.nn.RNN, "lstm": jt.nn.LSTM, "gru": jt.nn.GRU}
CELLS = {"rnn": jt.nn.RNNCell, "lstm": jt.nn.LSTMCell, "gru": jt.nn.GRUCell}


def to_jittor(tensor: torch.Tensor):
    array = tensor.detach().cpu()
    if array.dtype == torch.bfloat16:
        return jt.array(np.array(array.float().numpy()), dtype="float32").bfloat16()
    return jt.array(np.array(array.numpy()), dtype=str(array.dtype).removeprefix("torch."))


def to_torch(var) -> torch.Tensor:
    if str(var.dtype) == "bfloat16":
        return torch.from_numpy(np.array(var.float32().numpy())).to(torch.bfloat16)
    return torch.from_numpy(np.array(var.numpy()))


def seed_jittor():
    """Jittor's generator, seeded from torch's."""
    jt.set_seed(int(torch.randint(2 ** 31 - 1, ()).item()))


class _JittorCall(torch.autograd.Function):
    """`run(jittor tensors) -> jittor outputs` on jittor copies of the tensors given; backward is
    jt.grad of the outputs weighted by torch's output gradients."""

    @staticmethod
    def forward(ctx, run, *tensors):
        values = [to_jittor(t) for t in tensors]
        grad = any(ctx.needs_input_grad[1:])
        if grad:
            outputs = run(values)
        else:
            with jt.no_grad():
                outputs = run(values)
        ctx.jittor = (values, outputs) if grad else None
        return tuple(to_torch(o) for o in outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        values, outputs = ctx.jittor
        needs = ctx.needs_input_grad[1:]
        wanted = [v for v, need in zip(values, needs) if need]
        loss = None
        for output, g in zip(outputs, grads):
            term = (output * to_jittor(g)).sum()
            loss = term if loss is None else loss + term
        found = iter(jt.grad(loss, wanted))
        return (None, *(to_torch(next(found)) if need else None for need in needs))


class _Module(nn.Module):
    """torch.nn's parameters, named as the jittor module `build()` names them."""

    family = "rnn"
    sequence = True

    def build(self):
        return (LAYERS if self.sequence else CELLS)[self.family](**self._options)

    def _register(self, options, device, dtype):
        for name, value in options.items():
            setattr(self, name, value)
        self._options = options
        seed_jittor()
        initial = self.build()
        dtype = dtype or torch.get_default_dtype()
        for name, value in initial.state_dict().items():
            self.register_parameter(name, nn.Parameter(to_torch(value).to(device=device, dtype=dtype)))

    def _call(self, input, hx):
        lstm = self.family == "lstm"
        states = () if hx is None else (tuple(hx) if lstm else (hx,))
        names = [name for name, _ in self.named_parameters()]
        module = self.build()  # its own initial values are replaced below
        module.train() if self.training else module.eval()

        def run(values):
            x, given, params = values[0], values[1:1 + len(states)], values[1 + len(states):]
            for name, value in zip(names, params):
                setattr(module, name, value)
            state = None if not given else (tuple(given) if lstm else given[0])
            result = module(x, state)
            if self.sequence:
                y, final = result
                return [y, *(final if lstm else (final,))]
            return list(result) if lstm else [result]

        return _JittorCall.apply(run, input, *states, *(getattr(self, n) for n in names))


class Sequence(_Module):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        options = dict(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                       bias=bias, batch_first=batch_first, dropout=dropout,
                       bidirectional=bidirectional)
        if self.family == "rnn":
            options["nonlinearity"] = nonlinearity
        if self.family == "lstm":
            options["proj_size"] = proj_size
        self._register(options, device, dtype)

    def forward(self, input, hx=None):
        y, *finals = self._call(input, hx)
        return y, (tuple(finals) if self.family == "lstm" else finals[0])


class Cell(_Module):
    sequence = False

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        options = dict(input_size=input_size, hidden_size=hidden_size, bias=bias)
        if self.family == "rnn":
            options["nonlinearity"] = nonlinearity
        self._register(options, device, dtype)

    def forward(self, input, hx=None):
        new = self._call(input, hx)
        return tuple(new) if self.family == "lstm" else new[0]


def _lstm_init(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
               dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
    Sequence.__init__(self, input_size, hidden_size, num_layers, "tanh", bias, batch_first,
                      dropout, bidirectional, proj_size, device, dtype)


def _gru_init(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
              dropout=0.0, bidirectional=False, device=None, dtype=None):
    Sequence.__init__(self, input_size, hidden_size, num_layers, "tanh", bias, batch_first,
                      dropout, bidirectional, 0, device, dtype)


def _rnn_init(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
              batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
    Sequence.__init__(self, input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                      dropout, bidirectional, 0, device, dtype)


def _gated_cell_init(self, input_size, hidden_size, bias=True, device=None, dtype=None):
    Cell.__init__(self, input_size, hidden_size, bias, "tanh", device, dtype)


class JittorRNN(Sequence):
    family = "rnn"
    __init__ = _rnn_init


class JittorLSTM(Sequence):
    family = "lstm"
    __init__ = _lstm_init


class JittorGRU(Sequence):
    family = "gru"
    __init__ = _gru_init


class JittorRNNCell(Cell):
    family = "rnn"


class JittorLSTMCell(Cell):
    family = "lstm"
    __init__ = _gated_cell_init


class JittorGRUCell(Cell):
    family = "gru"
    __init__ = _gated_cell_init


IMPLEMENTATION = Implementation(
    name="jittor", kinds={"rnn": JittorRNN, "lstm": JittorLSTM, "gru": JittorGRU,
                          "rnn_cell": JittorRNNCell, "lstm_cell": JittorLSTMCell,
                          "gru_cell": JittorGRUCell},
    unsupported=frozenset({"cuda", "packed"}),
    description="jittor.nn.RNN/LSTM/GRU and their cells (CPU)")
