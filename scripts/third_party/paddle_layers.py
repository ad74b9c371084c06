"""PaddlePaddle's recurrent layers as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell:
paddle.nn.SimpleRNN / LSTM / GRU (the whole stack, one paddle layer) and paddle.nn.SimpleRNNCell /
LSTMCell / GRUCell, run in paddle's dynamic graph on the CPU.

The adapter owns torch.nn's parameters; each call builds a fresh paddle layer of the same
configuration (constant init, so it draws nothing), copies the parameters into it, hands paddle
the input and state through DLPack and converts the results back. A fresh layer per call keeps
each call's graph to itself: paddle reads a parameter at backward time, so values written into a
shared layer after a forward would change that forward's gradients.

Layouts:
- names and shapes are torch.nn's: paddle's cells hold weight_ih / weight_hh / bias_ih / bias_hh
  in torch's shapes and gate order (i, f, g, o; r, z, n), and the stack's state is torch's
  (layers * directions, batch, hidden). Layer k of the stack is `paddle_layer[k].cell` (forward)
  or `.cell_fw` / `.cell_bw` (bidirectional: torch's `_reverse`).
- proj_size: paddle's LSTMCell `weight_ho` (hidden, proj) is torch's weight_hr transposed.
- bidirectional=True is direction='bidirect'; batch_first is time_major=not batch_first;
  nonlinearity is SimpleRNN's activation; bias=False is bias_ih_attr=bias_hh_attr=False;
  dropout and proj_size pass as they are. Paddle validates the arguments it is given (and
  bias=False on the stack fails inside paddle: IndexError in flatten_parameters with two or more
  layers, SIGSEGV in the CPU kernel with one).
- unbatched input gets a batch axis (and its state one) here, removed from the results; so the
  ranks of input and state are checked here (raising as torch.nn does), and the error checks of
  a wrong rank judge the adapter. Every other size reaches paddle as given.
- a PackedSequence is unpacked to a padded batch plus paddle's `sequence_length`, and the
  output is packed again in the input's order.
- float64 layers are built under paddle.set_default_dtype (paddle's RNN stack breaks under
  Layer.to(dtype=...)); the default is restored before the layer runs.

Initial values are paddle's own (every tensor U(-1/sqrt(H), 1/sqrt(H))), drawn by a paddle layer
built at construction with paddle's generator seeded from torch's, so torch.manual_seed fixes
them. Backward: a torch.autograd.Function runs paddle with gradients on and, in backward, asks
paddle.grad for the gradients of the input, the given state and every parameter (paddle's fused
RNN kernel fails with a null tensor when asked for fewer), handing torch those it needs; no
double backward.

Declared unsupported: cuda (CPU build of paddle), float16 and bfloat16 (paddle's CPU build has
no half kernels for these layers: coalesce_tensor / matmul "kernel not registered").
"""
from __future__ import annotations

import contextlib

import paddle
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from rnnbench.impls import Implementation

ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
LAYERS = {"rnn": paddle.nn.SimpleRNN, "lstm": paddle.nn.LSTM, "gru": paddle.nn.GRU}
CELLS = {"rnn": paddle.nn.SimpleRNNCell, "lstm": paddle.nn.LSTMCell, "gru": paddle.nn.GRUCell}


def to_paddle(tensor):
    return paddle.from_dlpack(tensor.detach().contiguous())


def to_torch(tensor):
    return torch.from_dlpack(tensor.detach()).clone()


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """Paddle builds its parameters in its global default dtype."""
    before = paddle.get_default_dtype()
    paddle.set_default_dtype(str(dtype).removeprefix("torch."))
    try:
        yield
    finally:
        paddle.set_default_dtype(before)


def build(family, sequence, options, dtype, constant):
    """A paddle layer (`sequence`) or cell of `family` in `dtype`; `constant` builds it with
    zeros instead of paddle's init (values are copied in afterwards)."""
    options = dict(options)
    if constant:
        for role in ROLES:
            if options.get(role + "_attr") is not False:
                options[role + "_attr"] = paddle.ParamAttr(
                    initializer=paddle.nn.initializer.Constant(0.0))
    with default_dtype(dtype):
        return (LAYERS if sequence else CELLS)[family](**options)


def cells(layer, sequence, num_layers, num_directions):
    """(torch suffix, paddle cell) for every layer and direction."""
    if not sequence:
        return [("", layer)]
    found = []
    for k in range(num_layers):
        for direction in range(num_directions):
            sub = layer[k]
            if num_directions == 2:
                cell = sub.cell_fw if direction == 0 else sub.cell_bw
            else:
                cell = sub.cell
            found.append((f"_l{k}" + ("_reverse" if direction else ""), cell))
    return found


def cell_params(cell):
    """torch role -> the cell's paddle parameter, in torch's layout but for weight_hr (paddle
    stores its transpose, `weight_ho`)."""
    params = {role: getattr(cell, role) for role in ROLES}
    if getattr(cell, "proj_size", 0):
        params["weight_hr"] = cell.weight_ho
    return params


class _PaddleCall(torch.autograd.Function):
    """Runs `run(paddle inputs) -> paddle outputs` with the paddle parameters `params` set to
    the torch tensors given after the inputs; backward is paddle.grad."""

    @staticmethod
    def forward(ctx, run, params, n_inputs, *tensors):
        inputs = [to_paddle(t) for t in tensors[:n_inputs]]
        with paddle.no_grad():
            for param, value in zip(params, tensors[n_inputs:]):
                param.set_value(to_paddle(value))
        grad = any(ctx.needs_input_grad[3:])
        with contextlib.nullcontext() if grad else paddle.no_grad():
            for tensor in inputs:
                tensor.stop_gradient = not grad
            outputs = run(inputs)
        ctx.paddle = (inputs, list(params), outputs) if grad else None
        ctx.n_inputs = n_inputs
        return tuple(to_torch(o) for o in outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        inputs, params, outputs = ctx.paddle
        leaves = inputs + [p for p in params if not p.stop_gradient]
        found = paddle.grad(outputs, leaves, [to_paddle(g) for g in grads], allow_unused=True)
        found = dict(zip(map(id, leaves), found))
        result = []
        for leaf in inputs + list(params):
            g = found.get(id(leaf))
            result.append(None if g is None else to_torch(g))
        return (None, None, None, *result)


class Sequence(nn.Module):
    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.nonlinearity, self.bias, self.batch_first = nonlinearity, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = dropout, bidirectional, proj_size
        self.num_directions = 2 if bidirectional else 1
        options = dict(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                       direction="bidirect" if bidirectional else "forward",
                       time_major=not batch_first, dropout=dropout)
        if self.family == "rnn":
            options["activation"] = nonlinearity
        if self.family == "lstm":
            options["proj_size"] = proj_size
        if not bias:
            options.update(bias_ih_attr=False, bias_hh_attr=False)
        self._options = options
        paddle.seed(int(torch.randint(2 ** 31 - 1, ()).item()))
        dtype = dtype or torch.get_default_dtype()
        initial = build(self.family, True, options, dtype, constant=False)
        for suffix, cell in cells(initial, True, num_layers, self.num_directions):
            for role, param in cell_params(cell).items():
                if role.startswith("bias") and not bias:
                    continue
                value = to_torch(param)
                value = value.T if role == "weight_hr" else value
                self.register_parameter(role + suffix,
                                        nn.Parameter(value.to(device=device, dtype=dtype)))

    def forward(self, input, hx=None):
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
        count = 2 if self.family == "lstm" else 1
        states = () if hx is None else (tuple(hx) if self.family == "lstm" else (hx,))
        for state in states:
            if state.dim() != (3 if batched else 2):
                raise RuntimeError(f"expected a {3 if batched else 2}-D state for "
                                   f"{'batched' if batched else 'unbatched'} input, "
                                   f"got {tuple(state.shape)}")
        if not batched:
            states = tuple(s.unsqueeze(1) for s in states)

        layer = build(self.family, True, self._options, self.weight_ih_l0.dtype, constant=True)
        if self.training:
            layer.train()
        else:
            layer.eval()
        params, values = [], []
        for suffix, cell in cells(layer, True, self.num_layers, self.num_directions):
            for role, param in cell_params(cell).items():
                if hasattr(self, role + suffix):
                    value = getattr(self, role + suffix)
                    params.append(param)
                    values.append(value.T if role == "weight_hr" else value)

        def run(inputs):
            x, given = inputs[0], inputs[1:]
            length = None if lengths is None else paddle.to_tensor(lengths.numpy(), dtype="int32")
            y, final = layer(x, (tuple(given) if count == 2 else given[0]) if given else None, length)
            return [y, *(final if count == 2 else (final,))]

        y, *finals = _PaddleCall.apply(run, params, 1 + len(states), x, *states, *values)
        if not batched:
            y, finals = y.squeeze(0 if self.batch_first else 1), [f.squeeze(1) for f in finals]
        if packed:
            order = input.sorted_indices
            if order is not None:
                y = y.index_select(0 if self.batch_first else 1, order)
            data = pack_padded_sequence(y, lengths if order is None else lengths[order],
                                        batch_first=self.batch_first).data
            y = PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
        return y, (tuple(finals) if count == 2 else finals[0])


class Cell(nn.Module):
    family = "rnn"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        options = dict(input_size=input_size, hidden_size=hidden_size)
        if self.family == "rnn":
            options["activation"] = nonlinearity
        if not bias:
            options.update(bias_ih_attr=False, bias_hh_attr=False)
        self._options = options
        paddle.seed(int(torch.randint(2 ** 31 - 1, ()).item()))
        dtype = dtype or torch.get_default_dtype()
        initial = build(self.family, False, options, dtype, constant=False)
        for role, param in cell_params(initial).items():
            if role.startswith("bias") and not bias:
                continue
            self.register_parameter(role, nn.Parameter(
                to_torch(param).to(device=device, dtype=dtype)))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        count = 2 if self.family == "lstm" else 1
        states = () if hx is None else (tuple(hx) if self.family == "lstm" else (hx,))
        if any(s.dim() != input.dim() for s in states):
            raise RuntimeError(f"expected a {input.dim()}-D state, "
                               f"got {[tuple(s.shape) for s in states]}")
        if not batched:
            states = tuple(s.unsqueeze(0) for s in states)
        cell = build(self.family, False, self._options, self.weight_ih.dtype, constant=True)
        params = [p for role, p in cell_params(cell).items() if hasattr(self, role)]
        values = [getattr(self, role) for role in cell_params(cell) if hasattr(self, role)]

        def run(inputs):
            x, given = inputs[0], inputs[1:]
            _, new = cell(x, (tuple(given) if count == 2 else given[0]) if given else None)
            return list(new) if count == 2 else [new]

        new = _PaddleCall.apply(run, params, 1 + len(states), x, *states, *values)
        new = new if batched else tuple(s.squeeze(0) for s in new)
        return tuple(new) if count == 2 else new[0]


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


class PaddleRNN(Sequence):
    family = "rnn"
    __init__ = _rnn_init


class PaddleLSTM(Sequence):
    family = "lstm"
    __init__ = _lstm_init


class PaddleGRU(Sequence):
    family = "gru"
    __init__ = _gru_init


class PaddleRNNCell(Cell):
    family = "rnn"


class PaddleLSTMCell(Cell):
    family = "lstm"
    __init__ = _gated_cell_init


class PaddleGRUCell(Cell):
    family = "gru"
    __init__ = _gated_cell_init


IMPLEMENTATION = Implementation(
    name="paddle", kinds={"rnn": PaddleRNN, "lstm": PaddleLSTM, "gru": PaddleGRU,
                          "rnn_cell": PaddleRNNCell, "lstm_cell": PaddleLSTMCell,
                          "gru_cell": PaddleGRUCell},
    unsupported=frozenset({"cuda", "float16", "bfloat16"}),
    description="paddle.nn.SimpleRNN/LSTM/GRU and their cells (CPU, dynamic graph)")
