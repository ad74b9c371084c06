"""MindSpore's recurrent layers as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell:
mindspore.nn.RNN / LSTM / GRU (the whole stack, one MindSpore cell) and mindspore.nn.RNNCell /
LSTMCell / GRUCell, run in MindSpore's PyNative mode on the CPU.

MindSpore's modules are torch.nn's in all but a few names: parameters weight_ih_l0, ...,
_reverse (gates i, f, g, o and r, z, n, torch's shapes), state (layers * directions, batch,
hidden), forward(x, hx=None) -> (output, h_n) or (output, (h_n, c_n)); cells forward(x, hx).
So the adapter translates little:

- constructor: torch's bias is MindSpore's has_bias, nonlinearity is RNN's keyword; the rest
  (num_layers, batch_first, dropout, bidirectional) passes as given, and MindSpore validates it.
  MindSpore has no proj_size: proj_size > 0 raises NotImplementedError here (declared).
  device= and dtype= are the adapter's; the MindSpore module gets dtype= as MindSpore's type.
- the adapter owns torch.nn's parameters, registered under MindSpore's names in MindSpore's own
  order (a stack lists every weight_ih, then every weight_hh, bias_ih, bias_hh); each call builds
  a fresh MindSpore module of the same configuration (so each call's graph keeps its own
  values), sets its parameters to copies of the torch ones and hands it the input and state.
  Training mode is handed on (`set_train`; MindSpore's default is inference).
- unbatched input: MindSpore's layers and cells take batched input only, so a batch axis is
  added here (and to the state) and removed from the results; the ranks are checked here as
  torch.nn checks them. Every other size reaches MindSpore as given.
- a PackedSequence is unpacked to a padded batch plus MindSpore's `seq_length`; the output is
  packed again in the input's order.
- torch <-> MindSpore goes through numpy with the dtype kept; bfloat16 crosses as float32 and is
  cast by MindSpore (`astype`) and torch.

Initial values are MindSpore's own (every tensor U(-1/sqrt(H), 1/sqrt(H))), drawn from numpy's
global generator, which is seeded here from torch's (and restored afterwards), so
torch.manual_seed fixes them. Backward: a torch.autograd.Function runs the module under
mindspore.vjp (inputs, given state and every parameter) and hands torch's output gradients to
its vjp function; no double backward. MindSpore 2.10.0 leaves its PyNative executor broken when
the function under vjp raises (every later vjp that indexes a tensor then fails: "Only support
integers, ... but got 0 with type <class 'int'>"), so after such an exception the adapter resets
the executor (`_pynative_executor.clear_res()`) and re-raises it: the refusal is reported, and the
checks after it are not all failed by it.

Declared unsupported: cuda (CPU build), proj_size (MindSpore has none). Needs numpy < 2 (the
2.10.0 wheel's extension fails to import numpy 2's C API).
"""
from __future__ import annotations

import contextlib

import mindspore as ms
import numpy as np
from mindspore.common.api import _pynative_executor
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from rnnbench.impls import Implementation

ms.set_device("CPU")
LAYERS = {"rnn": ms.nn.RNN, "lstm": ms.nn.LSTM, "gru": ms.nn.GRU}
CELLS = {"rnn": ms.nn.RNNCell, "lstm": ms.nn.LSTMCell, "gru": ms.nn.GRUCell}


def ms_dtype(dtype: torch.dtype):
    return getattr(ms, str(dtype).removeprefix("torch."))


def to_ms(tensor: torch.Tensor):
    array = tensor.detach().cpu()
    if array.dtype == torch.bfloat16:
        return ms.Tensor(array.float().numpy().copy()).astype(ms.bfloat16)
    return ms.Tensor(array.numpy().copy())


def to_torch(tensor) -> torch.Tensor:
    if tensor.dtype == ms.bfloat16:
        return torch.from_numpy(tensor.astype(ms.float32).asnumpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(tensor.asnumpy().copy())


@contextlib.contextmanager
def numpy_seeded():
    """numpy's global generator (MindSpore's init draws from it) seeded from torch's."""
    saved = np.random.get_state()
    np.random.seed(int(torch.randint(2 ** 31 - 1, ()).item()))
    try:
        yield
    finally:
        np.random.set_state(saved)


class _MindSporeCall(torch.autograd.Function):
    """`run(MindSpore inputs, MindSpore params) -> outputs` on copies of the tensors given (the
    first `n_inputs` are inputs, the rest parameter values); backward is mindspore.vjp's."""

    @staticmethod
    def forward(ctx, build, n_inputs, *tensors):
        module = build()
        params = module.trainable_params()
        for param, value in zip(params, tensors[n_inputs:]):
            param.set_data(to_ms(value))
        inputs = [to_ms(t) for t in tensors[:n_inputs]]
        fn = module.__dict__["_run"]
        if any(ctx.needs_input_grad[2:]):
            try:
                outputs, ctx.vjp = ms.vjp(fn, *inputs, weights=params)
            except BaseException:
                _pynative_executor.clear_res()  # else every later vjp fails (see the docstring)
                raise
        else:
            outputs, ctx.vjp = fn(*inputs), None
        ctx.single = not isinstance(outputs, tuple)
        return tuple(to_torch(o) for o in ((outputs,) if ctx.single else outputs))

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        cotangents = [to_ms(g) for g in grads]
        found_inputs, found_params = ctx.vjp(cotangents[0] if ctx.single else tuple(cotangents))
        found = list(found_inputs if isinstance(found_inputs, tuple) else (found_inputs,)) + list(found_params)
        return (None, None, *(to_torch(g) if need else None
                              for g, need in zip(found, ctx.needs_input_grad[2:])))


class _Module(nn.Module):
    family = "rnn"
    sequence = True

    def build(self, dtype):
        module = (LAYERS if self.sequence else CELLS)[self.family](**self._options, dtype=ms_dtype(dtype))
        module.set_train(self.training)
        return module

    def _register(self, options, device, dtype):
        self._options = options
        dtype = dtype or torch.get_default_dtype()
        with numpy_seeded():
            initial = self.build(dtype)
        for param in initial.trainable_params():
            self.register_parameter(param.name, nn.Parameter(to_torch(param).to(device=device, dtype=dtype)))

    def _call(self, inputs, call):
        """`call(module, *MindSpore inputs)` on a fresh module holding this module's parameters."""
        names = [name for name, _ in self.named_parameters()]
        dtype = getattr(self, names[0]).dtype

        def build():
            with numpy_seeded():
                module = self.build(dtype)
            module.__dict__["_run"] = lambda *values: call(module, *values)
            return module

        return _MindSporeCall.apply(build, len(inputs), *inputs, *(getattr(self, n) for n in names))


class Sequence(_Module):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        if proj_size:
            raise NotImplementedError("mindspore.nn.LSTM has no proj_size")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, dropout
        self.bidirectional, self.proj_size, self.nonlinearity = bidirectional, proj_size, nonlinearity
        options = dict(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                       has_bias=bias, batch_first=batch_first, dropout=dropout,
                       bidirectional=bidirectional)
        if self.family == "rnn":
            options["nonlinearity"] = nonlinearity
        self._register(options, device, dtype)

    def forward(self, input, hx=None):
        lstm = self.family == "lstm"
        packed = isinstance(input, PackedSequence)
        lengths = None
        if packed:
            x, lengths = pad_packed_sequence(input, batch_first=self.batch_first)
        else:
            x = input
            if x.dim() not in (2, 3):
                raise ValueError(f"expected 2-D (unbatched) or 3-D input, got {x.dim()}-D")
        batched = x.dim() == 3
        if not batched:
            x = x.unsqueeze(0 if self.batch_first else 1)
        states = () if hx is None else (tuple(hx) if lstm else (hx,))
        for state in states:
            if state.dim() != (3 if batched else 2):
                raise RuntimeError(f"expected a {3 if batched else 2}-D state for "
                                   f"{'batched' if batched else 'unbatched'} input, got {tuple(state.shape)}")
        if not batched:
            states = tuple(s.unsqueeze(1) for s in states)
        seq = None if lengths is None else ms.Tensor(lengths.numpy().astype(np.int32))

        def call(module, x, *given):
            state = None if not given else (tuple(given) if lstm else given[0])
            y, final = module(x, state, seq)
            return (y, *final) if lstm else (y, final)

        y, *finals = self._call((x, *states), call)
        if not batched:
            y, finals = y.squeeze(0 if self.batch_first else 1), [f.squeeze(1) for f in finals]
        if packed:  # packed again in the input's order
            order = input.sorted_indices
            if order is not None:
                y = y.index_select(0 if self.batch_first else 1, order)
            data = pack_padded_sequence(y, lengths if order is None else lengths[order],
                                        batch_first=self.batch_first).data
            y = PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
        return y, (tuple(finals) if lstm else finals[0])


class Cell(_Module):
    sequence = False

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        options = dict(input_size=input_size, hidden_size=hidden_size, has_bias=bias)
        if self.family == "rnn":
            options["nonlinearity"] = nonlinearity
        self._register(options, device, dtype)

    def forward(self, input, hx=None):
        lstm = self.family == "lstm"
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        states = () if hx is None else (tuple(hx) if lstm else (hx,))
        if any(s.dim() != input.dim() for s in states):
            raise RuntimeError(f"expected a {input.dim()}-D state, got {[tuple(s.shape) for s in states]}")
        x = input if batched else input.unsqueeze(0)
        states = states if batched else tuple(s.unsqueeze(0) for s in states)

        def call(module, x, *given):  # hx=None reaches MindSpore as None
            new = module(x, (tuple(given) if lstm else given[0]) if given else None)
            return tuple(new) if lstm else new

        new = self._call((x, *states), call)
        new = new if batched else tuple(s.squeeze(0) for s in new)
        return tuple(new) if lstm else new[0]


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


class MindSporeRNN(Sequence):
    family = "rnn"
    __init__ = _rnn_init


class MindSporeLSTM(Sequence):
    family = "lstm"
    __init__ = _lstm_init


class MindSporeGRU(Sequence):
    family = "gru"
    __init__ = _gru_init


class MindSporeRNNCell(Cell):
    family = "rnn"


class MindSporeLSTMCell(Cell):
    family = "lstm"
    __init__ = _gated_cell_init


class MindSporeGRUCell(Cell):
    family = "gru"
    __init__ = _gated_cell_init


IMPLEMENTATION = Implementation(
    name="mindspore", kinds={"rnn": MindSporeRNN, "lstm": MindSporeLSTM, "gru": MindSporeGRU,
                             "rnn_cell": MindSporeRNNCell, "lstm_cell": MindSporeLSTMCell,
                             "gru_cell": MindSporeGRUCell},
    unsupported=frozenset({"cuda", "proj_size"}),
    description="mindspore.nn.RNN/LSTM/GRU and their cells (CPU, PyNative)")
