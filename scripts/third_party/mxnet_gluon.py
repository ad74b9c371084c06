"""Apache MXNet's Gluon recurrent layers as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell /
GRUCell: mxnet.gluon.rnn.RNN / LSTM / GRU (the whole stack, one fused `RNN` operator) and
mxnet.gluon.rnn.RNNCell / LSTMCell / GRUCell, run imperatively (NDArray, not hybridized) on the
CPU.

What MXNet computes, read from gluon/rnn/rnn_layer.py and rnn_cell.py (1.9.1): the same
equations as torch.nn in the same gate order (LSTM i, f, c, o is torch's i, f, g, o; GRU r, z, n
with the hidden bias inside the reset product, r * (W_hn h + b_hn), as torch's), every layer
with two biases, parameters in torch's shapes ((gates * hidden, inputs), (gates * hidden,
hidden or proj), (proj, hidden) for the projection), state (layers * directions, batch,
hidden), dropout on the outputs of every layer but the last. So the adapter translates names,
arguments and call conventions, and no values:

- names: torch's weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, weight_hr_l{k} are
  MXNet's l{k}_i2h_weight, l{k}_h2h_weight, l{k}_i2h_bias, l{k}_h2h_bias, l{k}_h2r_weight
  (`_reverse` is r{k}_...); a cell's are i2h_weight, h2h_weight, i2h_bias, h2h_bias. Shapes and
  gate order are the same, so the tensors are copied as they are.
- constructor: batch_first is layout='NTC' (else 'TNC'), nonlinearity is RNN's activation
  (whose own default is 'relu': the adapter always passes torch's), proj_size is LSTM's
  projection_size (0 is None), dtype is MXNet's dtype by name; hidden_size, num_layers,
  dropout, bidirectional and input_size pass as given, and MXNet validates them (mostly only
  when the layer first runs). MXNet has no bias=False: bias=False raises NotImplementedError here
  (declared `no_bias`).
- the adapter owns torch.nn's parameters; each call builds a fresh MXNet block of the same
  configuration (zero init, so it draws nothing), sets every parameter to a copy of the torch
  one, and hands it the input and state. A fresh block per call keeps each call's graph to
  itself: MXNet's autograd reads the parameter arrays at backward time.
- state: MXNet's layers return their final state only when a state is given, so hx=None is
  replaced by the block's own `begin_state` (zeros, as MXNet does for a missing state). A cell
  takes and returns a list of states ([h] or [h, c]); the cell's separate output (equal to h) is
  dropped.
- unbatched input: MXNet's layers and cells take batched input only, so a batch axis is added
  here (and to the state) and removed from the results; the ranks of input and state are checked
  here as torch.nn checks them. Every other size reaches MXNet as given.
- a PackedSequence is unpacked to a padded batch plus the layer's `sequence_length` (the block is
  built with use_sequence_length=True); the output is packed again in the input's order.
- training mode is handed on: the block runs under mx.autograd.record(train_mode=...) or
  train_mode() / predict_mode(), which is what switches the operator's dropout on and off
  (MXNet's float32 CPU path, oneDNN's RNN, then drops nothing; that is MXNet's to answer for).
- torch <-> MXNet goes through numpy with the dtype named explicitly on both sides.

Initial values are MXNet's own: `Block.initialize()` with its default initializer (weights
U(-0.07, 0.07), `mx.init.Uniform()`; biases 'zeros', the layers' and cells' default), drawn
with MXNet's generator seeded (`mx.random.seed`) from torch's, so torch.manual_seed fixes them.
Backward: a torch.autograd.Function runs the block under mx.autograd.record (only when torch's
grad mode is on and something needs a gradient) with gradients requested for exactly the
tensors torch needs them for (attach_grad on the input and given state, grad_req 'write' or
'null' on each parameter), and in backward calls mx.autograd.backward with torch's output
gradients as head gradients; no double backward.

Declared unsupported: cuda (CPU build), no_bias (Gluon's layers and cells always have both
biases), proj_size (the CPU operator computes the projection only outside autograd and in
predict mode; recording or training mode raise "No training support for LSTM with projection
on CPU currently", and torch's modules are built in training mode; projection_size is still
passed on, so a proj_size given anyway reaches MXNet), packed (the CPU operator has no variable
lengths: in float64 use_sequence_length raises "RNN use_sequence_length option is only
available for cuDNN version >= 7.2", in float32 the lengths are ignored and every sequence runs
over the padding; a PackedSequence given anyway is still handed on as described above),
float16 (MXNet's CPU build: "FP16 gemm on cpu not implemented", "float16 fully connected layer
is currently only supported by CuDNN"), bfloat16 (numpy, through which the tensors cross, has
no bfloat16, and Gluon's layers refuse dtype='bfloat16': "data type 'bfloat16' not understood").
Needs numpy < 1.24 (MXNet 1.9.1 uses the removed alias np.bool on import).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

import mxnet as mx
from mxnet.gluon import rnn as gluon_rnn

from rnnbench.impls import Implementation

LAYERS = {"rnn": gluon_rnn.RNN, "lstm": gluon_rnn.LSTM, "gru": gluon_rnn.GRU}
CELLS = {"rnn": gluon_rnn.RNNCell, "lstm": gluon_rnn.LSTMCell, "gru": gluon_rnn.GRUCell}
# torch.nn's role -> MXNet's parameter name (after its l{k}_ / r{k}_ prefix in a layer).
ROLES = {"weight_ih": "i2h_weight", "weight_hh": "h2h_weight", "bias_ih": "i2h_bias",
         "bias_hh": "h2h_bias", "weight_hr": "h2r_weight"}
CTX = mx.cpu()


def to_mx(tensor: torch.Tensor):
    array = tensor.detach().cpu().numpy()
    return mx.nd.array(array, ctx=CTX, dtype=array.dtype)


def to_torch(array) -> torch.Tensor:
    # asnumpy() waits for MXNet's asynchronous engine, so an operator's error is raised here.
    value = array.asnumpy()
    return torch.from_numpy(np.array(value, dtype=value.dtype))


def seed_mxnet():
    """MXNet's generator, seeded from torch's."""
    mx.random.seed(int(torch.randint(2 ** 31 - 1, ()).item()))


def mx_params(block, sequence: bool) -> dict:
    """torch.nn's parameter name -> the block's Gluon Parameter."""
    if not sequence:
        return {role: getattr(block, name) for role, name in ROLES.items() if hasattr(block, name)}
    found = {}
    for layer in range(block._num_layers):
        for direction, side in enumerate("lr"[:block._dir]):
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            for role, name in ROLES.items():
                key = f"{side}{layer}_{name}"
                if key in block._reg_params:
                    found[role + suffix] = block._reg_params[key]
    return found


class _MXNetCall(torch.autograd.Function):
    """`run(MXNet inputs) -> MXNet outputs` on MXNet copies of the inputs, with the Gluon
    Parameters `params` set to copies of the torch tensors after them; backward is MXNet's."""

    @staticmethod
    def forward(ctx, run, params, n_inputs, training, grad_enabled, *tensors):
        inputs = [to_mx(t) for t in tensors[:n_inputs]]
        for param, value in zip(params, tensors[n_inputs:]):
            param.set_data(to_mx(value))
        # needs_input_grad holds under torch.no_grad too; MXNet records only when torch would.
        needs = ctx.needs_input_grad[5:]
        grad = grad_enabled and any(needs)
        if grad:
            # MXNet is asked for exactly the gradients torch needs: which ones are requested
            # changes the path MXNet's kernels take, so asking for more would judge another one.
            for array, need in zip(inputs, needs):
                if need:
                    array.attach_grad()
            for param, need in zip(params, needs[n_inputs:]):
                param.grad_req = "write" if need else "null"
            with mx.autograd.record(train_mode=training):
                outputs = run(inputs)
        else:
            with mx.autograd.train_mode() if training else mx.autograd.predict_mode():
                outputs = run(inputs)
        ctx.mxnet = (inputs, list(params), outputs, training) if grad else None
        return tuple(to_torch(o) for o in outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        inputs, params, outputs, training = ctx.mxnet
        mx.autograd.backward(outputs, head_grads=[to_mx(g) for g in grads], retain_graph=True,
                             train_mode=training)
        needs = ctx.needs_input_grad[5:]
        found = [a.grad for a in inputs] + [p.grad(CTX) if p.grad_req != "null" else None
                                            for p in params]
        return (None, None, None, None, None,
                *(to_torch(g) if need else None for g, need in zip(found, needs)))


class _Module(nn.Module):
    """torch.nn's parameters, named and ordered as torch.nn names them."""

    family = "rnn"
    sequence = True

    def build(self, dtype: torch.dtype, init, **extra):
        options = dict(self._options, dtype=str(dtype).removeprefix("torch."), **extra)
        if self.sequence:
            block = LAYERS[self.family](**options)
        else:
            dtype = options.pop("dtype")
            block = CELLS[self.family](**options)
            block.cast(dtype)
        block.initialize(init=init, ctx=CTX)
        return block

    def _register(self, options, device, dtype):
        self._options = options
        dtype = dtype or torch.get_default_dtype()
        seed_mxnet()
        # MXNet's CPU build draws float32 and float64 only; other dtypes take float32's values.
        drawn = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        initial = self.build(drawn, mx.init.Uniform())  # Block.initialize()'s default
        for name, param in mx_params(initial, self.sequence).items():
            self.register_parameter(name, nn.Parameter(
                to_torch(param.data(CTX)).to(device=device, dtype=dtype)))

    def _call(self, inputs, run, **extra):
        names = [name for name, _ in self.named_parameters()]
        dtype = getattr(self, names[0]).dtype
        block = self.build(dtype, mx.init.Zero(), **extra)
        params = mx_params(block, self.sequence)
        return _MXNetCall.apply(lambda values: run(block, values), [params[n] for n in names],
                                len(inputs), self.training, torch.is_grad_enabled(), *inputs,
                                *(getattr(self, n) for n in names))


class Sequence(_Module):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        if not bias:
            raise NotImplementedError("mxnet.gluon.rnn layers have no bias=False")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, dropout
        self.bidirectional, self.proj_size, self.nonlinearity = bidirectional, proj_size, nonlinearity
        options = dict(hidden_size=hidden_size, num_layers=num_layers,
                       layout="NTC" if batch_first else "TNC", dropout=dropout,
                       bidirectional=bidirectional, input_size=input_size)
        if self.family == "rnn":
            options["activation"] = nonlinearity
        if self.family == "lstm":
            options["projection_size"] = proj_size or None
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
        batch_axis = 0 if self.batch_first else 1
        if not batched:
            x = x.unsqueeze(batch_axis)
        states = () if hx is None else (tuple(hx) if lstm else (hx,))
        for state in states:
            if state.dim() != (3 if batched else 2):
                raise RuntimeError(f"expected a {3 if batched else 2}-D state for "
                                   f"{'batched' if batched else 'unbatched'} input, got {tuple(state.shape)}")
        if not batched:
            states = tuple(s.unsqueeze(1) for s in states)

        def run(block, values):
            x, given = values[0], list(values[1:])
            if not given:  # MXNet returns the final state only beside a given one
                given = block.begin_state(x.shape[batch_axis], ctx=CTX, dtype=x.dtype)
            if lengths is None:
                y, final = block(x, given)
            else:
                y, final = block(x, given, sequence_length=mx.nd.array(
                    lengths.numpy(), ctx=CTX, dtype=np.int32))
            return [y, *final]

        extra = {} if lengths is None else {"use_sequence_length": True}
        y, *finals = self._call((x, *states), run, **extra)
        if not batched:
            y, finals = y.squeeze(batch_axis), [f.squeeze(1) for f in finals]
        if packed:  # packed again in the input's order
            order = input.sorted_indices
            if order is not None:
                y = y.index_select(batch_axis, order)
            data = pack_padded_sequence(y, lengths if order is None else lengths[order],
                                        batch_first=self.batch_first).data
            y = PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
        return y, (tuple(finals) if lstm else finals[0])


class Cell(_Module):
    sequence = False

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        if not bias:
            raise NotImplementedError("mxnet.gluon.rnn cells have no bias=False")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        options = dict(hidden_size=hidden_size, input_size=input_size)
        if self.family == "rnn":
            options["activation"] = nonlinearity
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

        def run(block, values):
            x, given = values[0], list(values[1:])
            if not given:  # a cell has no default state: MXNet's own zeros
                given = block.begin_state(x.shape[0], ctx=CTX, dtype=x.dtype)
            _, new = block(x, given)
            return list(new)

        new = self._call((x, *states), run)
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


class MXNetRNN(Sequence):
    family = "rnn"
    __init__ = _rnn_init


class MXNetLSTM(Sequence):
    family = "lstm"
    __init__ = _lstm_init


class MXNetGRU(Sequence):
    family = "gru"
    __init__ = _gru_init


class MXNetRNNCell(Cell):
    family = "rnn"


class MXNetLSTMCell(Cell):
    family = "lstm"
    __init__ = _gated_cell_init


class MXNetGRUCell(Cell):
    family = "gru"
    __init__ = _gated_cell_init


IMPLEMENTATION = Implementation(
    name="mxnet", kinds={"rnn": MXNetRNN, "lstm": MXNetLSTM, "gru": MXNetGRU,
                         "rnn_cell": MXNetRNNCell, "lstm_cell": MXNetLSTMCell,
                         "gru_cell": MXNetGRUCell},
    unsupported=frozenset({"cuda", "no_bias", "proj_size", "packed", "float16", "bfloat16"}),
    description="mxnet.gluon.rnn.RNN/LSTM/GRU and their cells (MXNet 1.9, CPU, imperative)")
