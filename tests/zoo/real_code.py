"""Recurrent modules written the way public from-scratch code writes them, each showing one kind
of defect a verdict must explain rightly: what rnnbench should say of each is in
catalogue.py (REAL_CODE).

- `OutputOnlyLSTM`: wraps nn.LSTM and returns the output alone (no state), a common shape for a
  model's encoder.
- `WrongAxisZeroStateGRUCell`: builds its zero state with `input.new_zeros`, but reads the batch
  from the feature axis.
- `ScriptedRNNCell`: derives from torch.jit.ScriptModule, with a @script_method forward.
- `StatelessRNN`: forward(x) only: it always starts from zeros.
- `ShortBiasGRUCell`: bias_hh one gate short (2H rows), so forward crashes on the sum.
- `NoArgumentValidationRNN`: forwards **kwargs to a helper that takes `num_layers` alone, so
  the constructor raises on every other argument of torch.nn's, at its default too: those
  features are not supported, and its (right) function is judged on the rest.
- `QuantizableLSTM`: torch's own float LSTM for quantization (`torch.ao.nn.quantizable.LSTM`),
  its directions named `layer_fw` / `layer_bw`; layers after the first are built for H inputs
  where a bidirectional stack gives them 2H, so the first finding is a parameter's shape.
- `DynamicQuantizedLSTM`: torch's dynamically quantized LSTM, whose state_dict holds its packed
  weights as script objects, no tensors, and whose constructor passes **kwargs on to a base
  without `proj_size`: its function is not checked where it runs, but built with bias=False its
  forward raises ("quantized LSTM requires biases"), whatever its parameters are.
- `ZeroPeepholeLSTMCell`: torch.nn's cell plus peepholes from the cell state into the input,
  forget and output gates, started at zero as many ports start them: another function that
  equals torch.nn's until the peepholes are trained, so they must be varied to be seen.
- `WeightNormLSTM`: nn.LSTM with weight normalisation on its recurrent weights
  (`torch.nn.utils.parametrizations.weight_norm`): state_dict keeps each as two originals (a
  magnitude and a direction) from which forward computes it, so its function is not checked
  either; read as pieces of the weight, the originals made it fail on shapes.
- `LegacyWeightNormLSTM`: the same with the older `torch.nn.utils.weight_norm` hook, whose
  `weight_hh_l0_g` / `weight_hh_l0_v` entries read like a weight and a parameter of its own.
- `RowWeightsRNN`: weights stored (H, I) as torch.nn does, but used as x @ W.
- `ExpandStateRNN`: the omitted state expanded from a (H,) buffer, which breaks on unbatched
  input with one error message per dtype.
- `UnpicklableLSTMCell`: keeps a threading.Lock as an attribute.
- `Bfloat16KeyErrorGRUCell`: looks its gate activations up in a table keyed by dtype that lacks
  bfloat16, and computes float64 in float32.
- `PerGateGRUCell`: one nn.Linear per gate and side, numbered (`fc1` to `fc6`): no rule can
  tell which is which, so its (right) function is not checked, never called wrong.
- `SplitLinearGRUCell`: torch.nn's GRU from four nn.Linear, the update and reset gates stacked
  in one of them in the other order: no map of whole parameters reads it, and its function is
  not checked either.
- `ZeroDivisionRNN`: hidden_size=0 raises ZeroDivisionError while computing the init bound.
- `GateTripletLSTM`: one (U, V, b) per gate named by its letter, in a hand-written loop that
  reads the input batch-first whatever `batch_first` says, sizes the omitted state by
  input_size and keeps 2-D states: its batch-first reading comes first (the batched sequence's
  crash, which needs the input handed batch-first as well as a 2-D state, before the unbatched
  one's, which explains more checks).
- `BatchFirstByDefaultLSTM`: torch.nn's LSTM whose `batch_first` defaults to True, as
  reinforcement-learning libraries' LSTMs do: right whenever the argument is given, another
  module for code that leaves it out.
- `NoBidirectionalGRU`: torch.nn's GRU whose constructor raises NotImplementedError for
  bidirectional=True: a feature it says it lacks, not a wrong function.
- `ColumnBiasLSTM`: one matrix and one (H, 1) bias column per gate and side (`W_ii`, `b_ii`,
  ...), used transposed as x @ W + b.T: each column is read as its bias, so the function is
  checked, and what it gets wrong is what it does with unbatched input (a batch axis added).
- `RightMultipliedRNNCell`: torch.nn's names, stored for x @ W (weight_ih (I, H), weight_hh
  (H, H)), with torch.nn's init and both biases: read transposed, and right.
- `StateFirstRNNCell`: torch.nn's cell behind forward(h, x), the state first, as some tutorials
  write a step.
- `ProjectedZeroStateLSTM`: torch.nn's LSTM whose omitted state makes h hidden_size wide even
  with a projection (a framework port's bug), so a projected LSTM without a state crashes.
- `StateFirstIfogLSTMCell`: one nn.Linear over [h, x], the state's columns first, its rows
  holding the gates in the order i, f, o, g (as ports of Karpathy's LSTMs stack them), and a
  second bias: torch.nn's function stored another way, which only its behaviour can tell.
- `SplitStateLSTMCell`: torch.nn's cell behind forward(input, hx, cx), the state as two
  arguments, as many from-scratch cells take it.
- `OutputAndHiddenRNNCell`: torch.nn's cell that returns (h, h), output and state, as a layer
  returns them and as tutorials' cells often do: the right function behind another return
  convention.
- `ReadoutRNNCell`: a cell with a readout layer, returning (readout(h), h) as the char-RNN
  tutorials' modules do: not the kind's function; its return value is what the finding says,
  not the omitted state's dtype.
- `OutputAndStateLSTMCell`: torch.nn's LSTM cell returning (h, (h, c)), output and state as an
  LSTM layer returns them: the right function behind another return convention.
- `ForgetBiasOutputAndStateLSTMCell`: the same return convention over a TensorFlow port's cell
  that adds 1 to the forget gate in every step: the state is read out of the wrapping and judged.
- `MinCharRNNCell`: min-char-rnn's step in torch: `Wxh`, `Whh`, a column bias `bh`, and the
  readout `Why` (vocab x H, the vocabulary being the input) with `by`, applied by a method of its
  own: Why has weight_ih's shape transposed, and its name says it is the output layer's.
- `PerLayerStateLSTM`: torch.nn's LSTM returning its final state as a list of (h, c) per layer
  and direction, each (batch, hidden), as PyTorch's own benchmark LSTMs (fastrnns) return it.
- `DirectionTuplesLSTM`: torch.nn's LSTM returning, when bidirectional, h_n and c_n each as a
  tuple (forward, backward): two entries of two tensors, as a list of (h, c) per layer would be,
  read the way whose top layer's h ends the output.
- `DirectionStatesGRU`: torch.nn's GRU returning h_n as a tuple of one tensor per layer and
  direction, as scratch bidirectional layers return (forward, backward) states.
- `NoDropoutRNN`: torch.nn's RNN whose constructor raises NotImplementedError for any dropout,
  with one layer too, where torch.nn takes it and drops nothing: a feature it says it lacks.
- `ResetUpdateLinearGRUCell`: torch.nn's GRU cell from four nn.Linear, the reset and update
  gates stacked in the pair named `_rz`, the candidate's in the pair named `_n`: the names say
  which gate's rows are where, so its function is judged.
- `WeightDropRNN`: a weight-dropping wrapper's RNN (AWD-LSTM's WeightDrop, PyTorch-NLP's):
  weight_hh_l{k} kept as weight_hh_l{k}_raw and forward patched onto the instance as a closure
  over it, so a deepcopy still computes with the original's parameters (and pickle refuses it).
- `WrappedWeightDropLSTM`: AWD-LSTM's WeightDrop as its language model applies it: torch.nn's
  LSTM held as `module`, layer 0's `weight_hh_l0` alone kept as `weight_hh_l0_raw` and set back
  (dropped, here at rate 0) before each call: torch.nn's names under a prefix, one of them
  renamed, in every layer and direction.
- `CellLoopLSTM`: a layer written as a loop over nn.LSTMCell, its input read batch-first and
  its state a required (h, c) of (batch, hidden) tensors, no layer axis (as a course's LSTM layer
  writes it): forward raises with torch.nn's state, and runs on a (batch, hidden) one only with
  the input handed batch-first: that reading is the first cause, the state's shape the next.
- `StackStepGRUCell`: torch.nn's GRU cell behind a one-layer stack's step, as seq2seq decoders
  write it: the state a tuple (h,) with a layer axis, (1, batch, hidden), in and out, beside the
  output.
- `LayerAxisLSTMCell`: torch.nn's LSTM cell whose state, (h, c), has a layer axis in and out (as
  speech toolkits' cells keep it), beside the output h.
- `SelfDoubledRNN`: a right Elman RNN whose constructor ends with `self.double()`, as code for
  float64 data writes it, and whose forward reads `x.dim()`, so a PackedSequence raises: asked in
  float32, it would raise on every input alike and seem to take packed input.
- `StatefulLSTMCell`: torch.nn's cell that keeps its state on the module and starts each call
  where the last one ended (as homework models and generators write it): its first call from
  zeros is right, its second is not.
- `BatchFirstOutputRNN`: an Elman RNN that always reads (batch, time, features) and returns its
  output sequence alone, as Keras-style sequence layers do: batch-first reading is its cause
  whatever it returns.
- `LengthsBeforeStateGRU`: torch.nn's GRU behind forward(input, lengths=None, hx=None), as
  padded-batch code writes it: its state goes by name, and code written for torch.nn would pass
  it as the lengths.
- `ListStateGRUCell`: torch.nn's GRU cell behind a Keras-style cell's call, its state a list
  [h] in and out (as code ported from Keras and its world-model agents writes it).
- `ConcatStateLSTMCell`: torch.nn's LSTM cell whose state is one tensor, c and h concatenated
  along the features (as code ported from TensorFlow's state_is_tuple=False keeps it).
- `ExtraNoneLSTM`: torch.nn's LSTM returning (output, (h_n, c_n), None), as speech encoders
  that can also return a per-step value return it without one: read as torch.nn's two, judged.
- `FlatStateLSTM`: torch.nn's LSTM returning (output, h_n, c_n), three values, as models written
  for export return it: read as (output, (h_n, c_n)), and judged.
- `BatchFirstOnlyLSTM`: torch.nn's LSTM whose constructor asserts batch_first (as models
  unrolled for export do): built batch_first=True and handed the input batch-first, its function
  is judged; refusing torch.nn's default fails at drop-in.
- `HiddenFirstLSTM`: torch.nn's LSTM behind a course template's `LSTM(lstm_hidden_dim,
  embedding_size)`, the hidden size first: the names say which size is which, and its function
  is judged on the module asked for; code passing torch.nn's sizes by position would not get it.
"""
from __future__ import annotations

import math
import threading
import warnings
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import weight_norm


class OutputOnlyLSTM(nn.Module):
    """An encoder: the LSTM's output sequence, no state."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                            bidirectional, proj_size, device=device, dtype=dtype)

    def forward(self, x, hx=None):
        output, _ = self.lstm(x, hx)
        return output


class WrongAxisZeroStateGRUCell(nn.GRUCell):
    def forward(self, input, hx=None):
        if hx is None:
            hx = input.new_zeros(input.size(-1), self.hidden_size)  # the feature axis, not batch
        return super().forward(input, hx)


class ScriptedRNNCell(torch.jit.ScriptModule):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"unknown nonlinearity {nonlinearity!r}")
        self.relu = nonlinearity == "relu"
        bound = 1 / math.sqrt(hidden_size)
        kwargs = {"device": device, "dtype": dtype}
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size, **kwargs).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size, **kwargs).uniform_(-bound, bound))
        zeros = torch.zeros(hidden_size, **kwargs)
        self.bias_ih = nn.Parameter(zeros.clone().uniform_(-bound, bound)) if bias else None
        self.bias_hh = nn.Parameter(zeros.clone().uniform_(-bound, bound)) if bias else None

    @torch.jit.script_method
    def forward(self, input: torch.Tensor, hx: Optional[torch.Tensor] = None) -> torch.Tensor:
        if hx is None:
            hx = torch.zeros(input.shape[:-1] + (self.weight_hh.shape[0],), dtype=input.dtype)
        out = input @ self.weight_ih.t() + hx @ self.weight_hh.t()
        if self.bias_ih is not None and self.bias_hh is not None:
            out = out + self.bias_ih + self.bias_hh
        return torch.relu(out) if self.relu else torch.tanh(out)


class StatelessRNN(nn.RNN):
    def forward(self, input):
        return super().forward(input)


class ShortBiasGRUCell(nn.Module):
    """A GRU cell from scratch with torch.nn's names; the hidden bias lacks the n gate's block."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.hidden_size = hidden_size
        bound = 1 / math.sqrt(hidden_size)
        def uniform(*shape):
            return nn.Parameter(torch.empty(*shape, device=device, dtype=dtype).uniform_(-bound, bound))
        self.weight_ih = uniform(3 * hidden_size, input_size)
        self.weight_hh = uniform(3 * hidden_size, hidden_size)
        self.bias_ih = uniform(3 * hidden_size)
        self.bias_hh = uniform(2 * hidden_size)

    def forward(self, input, hx=None):
        if hx is None:
            hx = input.new_zeros(*input.shape[:-1], self.hidden_size)
        gi = input @ self.weight_ih.t() + self.bias_ih
        gh = hx @ self.weight_hh.t() + self.bias_hh
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * hx


def _make_rnn(input_size, hidden_size, num_layers=1):
    return nn.RNN(input_size, hidden_size, num_layers)


class NoArgumentValidationRNN(nn.Module):
    def __init__(self, input_size, hidden_size, **kwargs):
        super().__init__()
        self.rnn = _make_rnn(input_size, hidden_size, **kwargs)

    def forward(self, x, hx=None):
        return self.rnn(x, hx)


QuantizableLSTM = torch.ao.nn.quantizable.LSTM
DynamicQuantizedLSTM = torch.ao.nn.quantized.dynamic.LSTM


class ZeroPeepholeLSTMCell(nn.LSTMCell):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.w_ci, self.w_cf, self.w_co = (
            nn.Parameter(torch.zeros(hidden_size, device=device, dtype=dtype)) for _ in range(3))

    def forward(self, input, hx=None):
        batched = input.dim() == 2
        x = input if batched else input[None]
        if hx is None:
            h = c = x.new_zeros(x.shape[0], self.hidden_size)
        else:
            h, c = (s if batched else s[None] for s in hx)
        gates = x @ self.weight_ih.T + h @ self.weight_hh.T
        if self.bias:
            gates = gates + self.bias_ih + self.bias_hh
        i, f, g, o = gates.chunk(4, dim=1)
        i = torch.sigmoid(i + self.w_ci * c)
        f = torch.sigmoid(f + self.w_cf * c)
        c = f * c + i * torch.tanh(g)
        h = torch.sigmoid(o + self.w_co * c) * torch.tanh(c)
        return (h, c) if batched else (h[0], c[0])


class WeightNormLSTM(nn.LSTM):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self._flat_weights_names:
            if name.startswith("weight_hh"):
                weight_norm(self, name)


class LegacyWeightNormLSTM(nn.LSTM):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with warnings.catch_warnings():  # the hook is deprecated for the parametrization
            warnings.simplefilter("ignore")
            for name in self._flat_weights_names:
                if name.startswith("weight_hh"):
                    torch.nn.utils.weight_norm(self, name)


class RowWeightsRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = 1 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))

    def forward(self, x, h=None):
        if h is None:
            h = x.new_zeros(1, x.size(1), self.weight_hh_l0.size(0))
        state, outputs = h[0], []
        for x_t in x:
            state = torch.tanh(x_t @ self.weight_ih_l0 + self.bias_ih_l0
                               + state @ self.weight_hh_l0 + self.bias_hh_l0)
            outputs.append(state)
        return torch.stack(outputs), state.unsqueeze(0)


class ExpandStateRNN(nn.RNN):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("h_init", torch.zeros(self.hidden_size), persistent=False)

    def forward(self, input, hx=None):
        if hx is None:
            batch = input.size(0 if self.batch_first else 1)
            hx = self.h_init.to(input.dtype).expand(
                self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        return super().forward(input, hx)


class UnpicklableLSTMCell(nn.LSTMCell):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()  # guards a cache shared between threads


class Bfloat16KeyErrorGRUCell(nn.GRUCell):
    """Gate activations looked up by dtype (bfloat16 missing); float64 computed in float32."""

    SIGMOID = {torch.float32: torch.sigmoid, torch.float64: torch.sigmoid,
               torch.float16: torch.sigmoid}

    def forward(self, input, hx=None):
        sigmoid = self.SIGMOID[input.dtype]
        if hx is None:
            hx = input.new_zeros(*input.shape[:-1], self.hidden_size)
        compute = torch.float32 if input.dtype == torch.float64 else input.dtype
        x, h = input.to(compute), hx.to(compute)
        b_ih, b_hh = (None if b is None else b.to(compute) for b in (self.bias_ih, self.bias_hh))
        gi = nn.functional.linear(x, self.weight_ih.to(compute), b_ih)
        gh = nn.functional.linear(h, self.weight_hh.to(compute), b_hh)
        i_r, i_z, i_n = gi.chunk(3, -1)
        h_r, h_z, h_n = gh.chunk(3, -1)
        r, z = sigmoid(i_r + h_r), sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return ((1 - z) * n + z * h).to(input.dtype)


class PerGateGRUCell(nn.Module):
    """torch.nn's GRU maths with one nn.Linear per gate and side, numbered."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.fc1, self.fc3, self.fc5 = (nn.Linear(input_size, hidden_size) for _ in range(3))
        self.fc2, self.fc4, self.fc6 = (nn.Linear(hidden_size, hidden_size) for _ in range(3))

    def forward(self, x, h):
        r = torch.sigmoid(self.fc1(x) + self.fc2(h))
        z = torch.sigmoid(self.fc3(x) + self.fc4(h))
        n = torch.tanh(self.fc5(x) + r * self.fc6(h))
        return (1 - z) * n + z * h


class SplitLinearGRUCell(nn.Module):
    """torch.nn's GRU maths: x2h and h2h give (z, r), x2c and h2c the candidate."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.x2h = nn.Linear(input_size, 2 * hidden_size, bias=bias)
        self.h2h = nn.Linear(hidden_size, 2 * hidden_size, bias=bias)
        self.x2c = nn.Linear(input_size, hidden_size, bias=bias)
        self.h2c = nn.Linear(hidden_size, hidden_size, bias=bias)
        bound = 1 / math.sqrt(hidden_size)
        with torch.no_grad():
            for weight in self.parameters():
                weight.uniform_(-bound, bound)

    def forward(self, input, hx=None):
        if hx is None:
            hx = input.new_zeros(input.size(0), self.hidden_size)
        z, r = torch.sigmoid(self.x2h(input) + self.h2h(hx)).chunk(2, -1)
        candidate = torch.tanh(self.x2c(input) + r * self.h2c(hx))
        return z * hx + (1 - z) * candidate


class ZeroDivisionRNN(nn.RNN):
    def __init__(self, input_size, hidden_size, *args, **kwargs):
        1 / hidden_size  # the init bound, computed before any check
        super().__init__(input_size, hidden_size, *args, **kwargs)


class BatchOfOneAndReversedRNN(nn.RNN):
    """Two defects, as a search meets them: a batch of one is refused (its axis squeezed away),
    and every sequence is processed from its last step."""

    def forward(self, input, hx=None):
        if input.dim() == 3 and input.size(0 if self.batch_first else 1) == 1:
            raise ValueError("expected a batch of sequences, got one sequence")
        time = 1 if self.batch_first and input.dim() == 3 else 0
        return super().forward(input.flip(time), hx)


class GateTripletLSTM(nn.Module):
    """h @ V + x @ U + b per gate (f, i, o, and c for the candidate), the blog-tutorial way."""

    def __init__(self, input_size, hidden_size, batch_first=False):
        super().__init__()
        for gate in "fioc":
            setattr(self, f"U_{gate}", nn.Parameter(torch.empty(input_size, hidden_size)))
            setattr(self, f"V_{gate}", nn.Parameter(torch.empty(hidden_size, hidden_size)))
            setattr(self, f"b_{gate}", nn.Parameter(torch.empty(hidden_size)))
        self.input_size, self.hidden_size, self.batch_first = input_size, hidden_size, batch_first
        bound = 1 / math.sqrt(hidden_size)
        with torch.no_grad():
            for weight in self.parameters():
                weight.uniform_(-bound, bound)

    def gate(self, name, x, h):
        return x @ getattr(self, f"U_{name}") + h @ getattr(self, f"V_{name}") + getattr(
            self, f"b_{name}")

    def forward(self, x, init_states=None):
        batch, steps, _ = x.shape  # batch-first, batch_first or not
        if init_states is None:
            h, c = torch.zeros(batch, self.input_size), torch.zeros(batch, self.input_size)
        else:
            h, c = init_states
        outputs = []
        for t in range(steps):
            x_t = x[:, t, :]
            f, i, o = (torch.sigmoid(self.gate(name, x_t, h)) for name in "fio")
            c = f * c + i * torch.tanh(self.gate("c", x_t, h))
            h = o * torch.tanh(c)
            outputs.append(h.unsqueeze(0))
        output = torch.cat(outputs)
        if self.batch_first:
            output = output.permute(1, 0, 2).contiguous()
        return output, (h, c)


class BatchFirstByDefaultLSTM(nn.LSTM):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=True,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class NoBidirectionalGRU(nn.GRU):
    def __init__(self, *args, **kwargs):
        if kwargs.get("bidirectional"):
            raise NotImplementedError("bidirectional GRUs are not supported yet")
        super().__init__(*args, **kwargs)


class ColumnBiasLSTM(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        bound = 1 / math.sqrt(hidden_size)
        for gate in "ifgo":
            for side, width in (("i", input_size), ("h", hidden_size)):
                setattr(self, f"W_{side}{gate}", nn.Parameter(
                    torch.empty(width, hidden_size).uniform_(-bound, bound)))
                setattr(self, f"b_{side}{gate}", nn.Parameter(
                    torch.empty(hidden_size, 1).uniform_(-bound, bound)))

    def gate(self, name, x, h):
        return (x @ getattr(self, f"W_i{name}") + getattr(self, f"b_i{name}").T
                + h @ getattr(self, f"W_h{name}") + getattr(self, f"b_h{name}").T)

    def forward(self, x, state=None):
        h, c = state if state is not None else (x.new_zeros(1, x.shape[1], self.hidden_size),) * 2
        h, c = h[0], c[0]
        outputs = []
        for x_t in x:
            i, f = torch.sigmoid(self.gate("i", x_t, h)), torch.sigmoid(self.gate("f", x_t, h))
            g, o = torch.tanh(self.gate("g", x_t, h)), torch.sigmoid(self.gate("o", x_t, h))
            c = f * c + i * g
            h = o * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs), (h[None], c[None])


class RightMultipliedRNNCell(nn.Module):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh"):
        super().__init__()
        self.hidden_size, self.nonlinearity = hidden_size, nonlinearity
        bound = 1 / math.sqrt(hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(input_size, hidden_size).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
            self.bias_hh = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        else:
            self.bias_ih = self.bias_hh = None

    def forward(self, input, hx=None):
        if hx is None:
            hx = input.new_zeros(*input.shape[:-1], self.hidden_size)
        pre = input @ self.weight_ih + hx @ self.weight_hh
        if self.bias_ih is not None:
            pre = pre + self.bias_ih + self.bias_hh
        return torch.tanh(pre) if self.nonlinearity == "tanh" else torch.relu(pre)


class ProjectedZeroStateLSTM(nn.LSTM):
    def forward(self, input, hx=None):
        if hx is None and self.proj_size and input.dim() == 3:
            layers = self.num_layers * (2 if self.bidirectional else 1)
            zeros = input.new_zeros(layers, input.shape[0 if self.batch_first else 1],
                                    self.hidden_size)
            hx = (zeros, zeros)
        return super().forward(input, hx)


class StateFirstRNNCell(nn.RNNCell):
    def forward(self, h, x):
        return super().forward(x, h)


class StateFirstIfogLSTMCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.linear = nn.Linear(hidden_size + input_size, 4 * hidden_size)
        self.b_h = nn.Parameter(torch.empty(4 * hidden_size))
        bound = 1 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x, state):
        h, c = state
        i, f, o, g = (self.linear(torch.cat([h, x], -1)) + self.b_h).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class SplitStateLSTMCell(nn.LSTMCell):
    def forward(self, input, hx, cx):
        return super().forward(input, (hx, cx))


class OutputAndHiddenRNNCell(nn.RNNCell):
    def forward(self, input, hx=None):
        hidden = super().forward(input, hx)
        return hidden, hidden  # as a layer returns (output, state)


class ReadoutRNNCell(nn.RNNCell):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, nonlinearity, device, dtype)
        self.readout = nn.Linear(hidden_size, hidden_size, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        hidden = super().forward(input, hx)
        return self.readout(hidden), hidden


class OutputAndStateLSTMCell(nn.LSTMCell):
    def forward(self, input, hx=None):
        hidden, cell = super().forward(input, hx)
        return hidden, (hidden, cell)  # as nn.LSTM returns (output, (h_n, c_n))


class ForgetBiasOutputAndStateLSTMCell(nn.LSTMCell):
    def forward(self, input, hx=None):
        if hx is None:
            hx = (input.new_zeros(*input.shape[:-1], self.hidden_size),) * 2
        gates = input @ self.weight_ih.T + hx[0] @ self.weight_hh.T
        if self.bias:
            gates = gates + self.bias_ih + self.bias_hh
        i, f, g, o = gates.chunk(4, -1)
        cell = torch.sigmoid(f + 1.0) * hx[1] + torch.sigmoid(i) * torch.tanh(g)
        hidden = torch.sigmoid(o) * torch.tanh(cell)
        return hidden, (hidden, cell)


class NoDropoutRNN(nn.RNN):
    def __init__(self, *args, dropout=0.0, **kwargs):
        if dropout:
            raise NotImplementedError("dropout is not implemented")
        super().__init__(*args, **kwargs)


class ResetUpdateLinearGRUCell(nn.Module):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.hidden_size = hidden_size
        options = dict(bias=bias, device=device, dtype=dtype)
        self.input_rz = nn.Linear(input_size, 2 * hidden_size, **options)
        self.hidden_rz = nn.Linear(hidden_size, 2 * hidden_size, **options)
        self.input_n = nn.Linear(input_size, hidden_size, **options)
        self.hidden_n = nn.Linear(hidden_size, hidden_size, **options)
        bound = 1 / math.sqrt(hidden_size)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.uniform_(-bound, bound)

    def forward(self, input, hx=None):
        if hx is None:
            hx = input.new_zeros(*input.shape[:-1], self.hidden_size)
        r, z = torch.sigmoid(self.input_rz(input) + self.hidden_rz(hx)).chunk(2, -1)
        n = torch.tanh(self.input_n(input) + r * self.hidden_n(hx))
        return (1 - z) * n + z * hx


class WeightDropRNN(nn.RNN):
    def __init__(self, *args, weight_dropout=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        names = [f"weight_hh_l{layer}" for layer in range(self.num_layers)]
        for name in names:
            raw = self._parameters.pop(name)
            self.register_parameter(name + "_raw", raw)
        plain_forward = self.forward

        def forward(*args, **kwargs):
            for name in names:
                raw = getattr(self, name + "_raw")
                setattr(self, name, nn.functional.dropout(raw, weight_dropout, self.training))
            return plain_forward(*args, **kwargs)

        self.forward = forward  # the instance's own forward, closing over `self`


class WrappedWeightDropLSTM(nn.Module):
    def __init__(self, *args, weights=("weight_hh_l0",), weight_dropout=0.0, **kwargs):
        super().__init__()
        self.module = nn.LSTM(*args, **kwargs)
        self.weights, self.weight_dropout = weights, weight_dropout
        for name in weights:
            raw = self.module._parameters.pop(name)
            self.module.register_parameter(name + "_raw", nn.Parameter(raw.data))

    def _setweights(self):
        for name in self.weights:
            raw = getattr(self.module, name + "_raw")
            weight = nn.functional.dropout(raw, self.weight_dropout, self.training)
            # a plain tensor: the Parameter itself, which rate 0 hands back, would be registered
            # under torch.nn's name
            setattr(self.module, name, weight.view_as(weight))

    def forward(self, input, hx=None):
        self._setweights()
        return self.module(input, hx)


class MinCharRNNCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        vocab_size = input_size
        self.Wxh = nn.Parameter(torch.randn(hidden_size, input_size) * 0.01)
        self.Whh = nn.Parameter(torch.randn(hidden_size, hidden_size) * 0.01)
        self.Why = nn.Parameter(torch.randn(vocab_size, hidden_size) * 0.01)
        self.bh = nn.Parameter(torch.zeros(hidden_size, 1))
        self.by = nn.Parameter(torch.zeros(vocab_size, 1))

    def forward(self, x, h):
        return torch.tanh(x @ self.Wxh.T + h @ self.Whh.T + self.bh[:, 0])

    def logits(self, h):
        return h @ self.Why.T + self.by[:, 0]


class PerLayerStateLSTM(nn.LSTM):
    def forward(self, input, hx=None):
        output, (h_n, c_n) = super().forward(input, hx)
        return output, [(h, c) for h, c in zip(h_n, c_n)]


class DirectionStatesGRU(nn.GRU):
    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return output, tuple(h_n[unit:unit + 1] for unit in range(h_n.shape[0]))


class DirectionTuplesLSTM(nn.LSTM):
    def forward(self, input, hx=None):
        output, (h_n, c_n) = super().forward(input, hx)
        if self.bidirectional:
            return output, (tuple(h_n.unbind(0)), tuple(c_n.unbind(0)))
        return output, (h_n, c_n)


class CellLoopLSTM(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, input, state):
        outputs = []
        for x in input.unbind(1):
            state = self.cell(x, state)
            outputs.append(state[0])
        return torch.stack(outputs, dim=1), state


class StackStepGRUCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.layers = nn.ModuleList([nn.GRUCell(input_size, hidden_size)])

    def forward(self, input_feed, hidden):
        h_1 = []
        for i, layer in enumerate(self.layers):
            input_feed = layer(input_feed, hidden[0][i])
            h_1.append(input_feed)
        return input_feed, (torch.stack(h_1),)


class LayerAxisLSTMCell(nn.LSTMCell):
    def forward(self, input, hx=None):
        if hx is None:
            zeros = input.new_zeros(1, input.shape[0], self.hidden_size)
            hx = (zeros, zeros)
        h, c = super().forward(input, (hx[0][0], hx[1][0]))
        return h, (h.unsqueeze(0), c.unsqueeze(0))


class SelfDoubledRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = hidden_size ** -0.5
        self.W_ih = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))
        self.W_hh = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        self.b_ih = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.b_hh = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.hidden_size = hidden_size
        self.double()

    def forward(self, x, hx=None):
        if x.dim() == 2:
            out, h_n = self.forward(x.unsqueeze(1), None if hx is None else hx.unsqueeze(1))
            return out.squeeze(1), h_n.squeeze(1)
        h = x.new_zeros(x.shape[1], self.hidden_size) if hx is None else hx[0]
        outputs = []
        for step in x:
            h = torch.tanh(F.linear(step, self.W_ih, self.b_ih) + F.linear(h, self.W_hh, self.b_hh))
            outputs.append(h)
        return torch.stack(outputs), h.unsqueeze(0)


class StatefulLSTMCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.lstm = nn.LSTMCell(input_size, hidden_size)
        self.hidden_size = hidden_size
        self.h = self.c = None

    def forward(self, x):
        if self.h is None:
            self.h = self.c = x.new_zeros(*x.shape[:-1], self.hidden_size)
        self.h, self.c = self.lstm(x, (self.h, self.c))
        return self.h, self.c


class BatchFirstOutputRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = hidden_size ** -0.5
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.hidden_size = hidden_size

    def forward(self, x, hx=None):
        h = x.new_zeros(x.size(0), self.hidden_size) if hx is None else hx[0]
        outputs = []
        for t in range(x.size(1)):
            h = torch.tanh(F.linear(x[:, t], self.weight_ih_l0, self.bias_ih_l0)
                           + F.linear(h, self.weight_hh_l0, self.bias_hh_l0))
            outputs.append(h)
        return torch.stack(outputs, 1)


class LengthsBeforeStateGRU(nn.GRU):
    def forward(self, input, lengths=None, hx=None):
        if lengths is not None:
            input = nn.utils.rnn.pack_padded_sequence(input, lengths, enforce_sorted=False)
        return super().forward(input, hx)


class FlatStateLSTM(nn.LSTM):
    def forward(self, input, hx=None):
        output, (h_n, c_n) = super().forward(input, hx)
        return output, h_n, c_n


class ListStateGRUCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, inputs, states):
        h = self.cell(inputs, states[0])
        return h, [h]


class ConcatStateLSTMCell(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, inputs, state):
        c, h = state.chunk(2, dim=-1)
        h, c = self.cell(inputs, (h, c))
        return h, torch.cat([c, h], dim=-1)


class ExtraNoneLSTM(nn.LSTM):
    def forward(self, input, hx=None):
        output, state = super().forward(input, hx)
        return output, state, None


class HiddenFirstLSTM(nn.LSTM):
    def __init__(self, lstm_hidden_dim, embedding_size):
        super().__init__(embedding_size, lstm_hidden_dim)


class BatchFirstOnlyLSTM(nn.LSTM):
    def __init__(self, input_size, hidden_size, batch_first=False, **kwargs):
        assert batch_first, "only batch_first=True is supported"
        super().__init__(input_size, hidden_size, batch_first=batch_first, **kwargs)
