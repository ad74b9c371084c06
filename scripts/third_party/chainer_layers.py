"""Chainer's recurrent links as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell:
chainer.links.NStepRNNTanh / NStepRNNReLU / NStepLSTM / NStepGRU and their bidirectional
NStepBi* variants (the whole stack, one link), chainer.links.StatelessLSTM for the LSTM cell,
and one step of a one-layer NStepRNN* / NStepGRU for the RNN and GRU cells. Chainer 7.8.1 (the
last release), run on the CPU on numpy arrays, in the dtype the torch tensors have.

What Chainer computes, read from chainer/functions/rnn/n_step_{rnn,lstm,gru}.py and
chainer/links/rnn/{n_step_rnn,lstm,gru}.py (7.8.1):

- The NStep links hold one weight matrix and one bias per gate and side, (hidden, inputs) and
  (hidden,): layer k, direction d is the child link `link[k * directions + d]` with w0..w{2G-1},
  b0..b{2G-1}, the first G on the input, the last G on the state. Their gate order is torch.nn's
  (RNN: w0 input, w1 state; LSTM w0..w3 = i, f, g, o; GRU w0..w2 = r, z, n, with the state's
  bias inside the reset product, n = tanh(W_n x + b_n + r * (W_hn h + b_hn)), and h' = (1 - z) n
  + z h, as torch.nn's). So torch's weight_ih_l{k} is w0..w{G-1} stacked by rows, weight_hh_l{k}
  w{G}..w{2G-1}, bias_ih_l{k} b0..b{G-1}, bias_hh_l{k} b{G}..b{2G-1}; `_reverse` is direction 1.
  The tensors are only split by gate, in torch, so torch's autograd assembles their gradients.
- A link takes a list of sequences, each (length, inputs), any lengths, and returns the final
  state (layers * directions, batch, hidden) (LSTM: h and c) and a list of per-sequence outputs
  (length, directions * hidden). It sorts the sequences by length and transposes them itself.
  So the adapter hands it the batch's sequences one by one (x[:, b], or x[b] when batch_first),
  and stacks the outputs back; a PackedSequence is unpacked and each sequence handed over at its
  own length, then the outputs are packed again in the input's order.
- An omitted state reaches the link as None (the link makes its own zeros; for the LSTM h and c
  each on its own). A given state is passed as given, all its rows: the link's function splits it
  by layer and direction itself.
- dropout is the link's `dropout` (Chainer drops the inputs of every layer but the first, with
  numpy's global generator, and in a bidirectional stack draws a separate mask for each
  direction); it acts while chainer.config.train is on, which is set from the module's training
  flag for each call.
- nonlinearity picks NStepRNNTanh or NStepRNNReLU (and bidirectional the NStepBi* link); the
  adapter raises ValueError, as torch.nn, for another nonlinearity. Chainer's links have no
  bias=False: with bias=False the adapter hands the link zero biases (a zero bias adds nothing).
  No projection (proj_size): NotImplementedError for proj_size > 0 (ValueError below 0, as
  torch.nn).
- Cells: chainer.links.StatelessLSTM computes c', h' = F.lstm(c, upward(x) + lateral(h)): one
  (4 * hidden, inputs) matrix with its bias (`upward`) and one (4 * hidden, hidden) matrix without
  (`lateral`), whose rows interleave the gates unit by unit in F.lstm's order a, i, f, o (row 4u + j
  is gate j of unit u; a is torch's g). So upward.W is torch's weight_ih with its i, f, g, o blocks
  interleaved as g, i, f, o, lateral.W weight_hh likewise, upward.b the interleaved b_ih + b_hh
  (a torch sum, so each of torch's biases gets its gradient); an omitted state is h = c = None
  (StatelessLSTM then leaves out the lateral term and starts c at its zeros). Chainer has no
  stateless Elman cell, and its StatelessGRU is another GRU (the reset gate multiplies h before
  the matrix, U(r * h), and h' = z * h_bar + (1 - z) * h), so the RNN and GRU cells are one step
  of a one-layer NStepRNNTanh / NStepRNNReLU / NStepGRU: each row of the batch a sequence of
  length 1, the state (1, batch, hidden).
- Unbatched input gets a batch axis here (and its state one), removed from the results; so the
  ranks of input and state are checked here, raising as torch.nn does. Every other size (input
  features, batch, the state's rows) reaches Chainer as given, and Chainer's own checks (or their
  absence) stay visible.

The adapter owns torch.nn's parameters; each call builds a fresh link of the same configuration
(constant zero init, so it draws nothing) and sets its parameters' arrays to copies of the torch
tensors. torch <-> Chainer goes through numpy, copied, dtype kept. Constructor arguments Chainer
takes in torch's form (input_size, hidden_size, num_layers, dropout) are passed to Chainer as
given, which builds a link from them at construction (to draw the initial values).

Initial values are Chainer's own: its links' defaults, LeCunNormal for every weight matrix
(N(0, 1 / fan_in), fan_in the matrix's columns) and zero biases; StatelessLSTM's one bias is 0
but 1 on the forget gate (bias_init 0, forget_bias_init 1) and goes to bias_ih, bias_hh holding
zeros. Chainer
draws them from numpy's global generator: it is seeded from torch's for the draw (so
torch.manual_seed fixes them) and put back as it was after it; they are drawn in float64 and cast.

Backward: a torch.autograd.Function runs the link with Chainer's backprop enabled (only when
torch's grad mode is on and something needs a gradient), the input sequences and the given state
as chainer.Variables, and in backward calls chainer.backward on the outputs with torch's output
gradients, handing torch the gradients of the inputs, the state and the link's parameters that it
needs; no double backward.

Declared unsupported: cuda (the CPU path, numpy arrays; Chainer's GPU path needs CuPy), bfloat16
(numpy, through which the tensors cross, has no bfloat16), proj_size (no projection in Chainer's
links).

STATELESS_GRU is chainer.links.StatelessGRU itself as torch.nn.GRUCell (layouts only: W_r, W_z, W
are weight_ih's r, z, n rows, U_r, U_z, U weight_hh's, their biases bias_ih / bias_hh), so that
Chainer's own GRU cell is judged as it is: it computes the textbook GRU, not torch.nn's. It needs
a state (forward(h, x)): optional_state is declared unsupported there.

Install (chainer 7.8.1 is an sdist whose setup.py imports pkg_resources, and its import needs
numpy < 2 and numpy.distutils, which needs setuptools < 74):
    pip install -c /tmp/torch-pin.txt "numpy<2" "setuptools<74"
    pip install --no-build-isolation chainer==7.8.1
(torch 2.13 declares setuptools>=77.0.3: pip warns, and torch imports and runs.)
"""
from __future__ import annotations

import chainer
import chainer.links as L
import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence, pad_sequence

from rnnbench.impls import Implementation

GATES = {"rnn": 1, "lstm": 4, "gru": 3}
ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
# (family, nonlinearity, bidirectional) -> the NStep link.
LINKS = {("rnn", "tanh", False): L.NStepRNNTanh, ("rnn", "relu", False): L.NStepRNNReLU,
         ("rnn", "tanh", True): L.NStepBiRNNTanh, ("rnn", "relu", True): L.NStepBiRNNReLU,
         ("lstm", "tanh", False): L.NStepLSTM, ("lstm", "tanh", True): L.NStepBiLSTM,
         ("gru", "tanh", False): L.NStepGRU, ("gru", "tanh", True): L.NStepBiGRU}
# torch's LSTM gate blocks i, f, g, o taken in F.lstm's order a (= g), i, f, o.
LSTM_ORDER = (2, 0, 1, 3)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy copy of `tensor` in its own dtype (contiguous)."""
    return np.array(tensor.detach().cpu().numpy(), copy=True, order="C")


def to_torch(array) -> torch.Tensor:
    return torch.from_numpy(np.array(array, copy=True))


def numpy_dtype(dtype: torch.dtype):
    return torch.empty((), dtype=dtype).numpy().dtype


def drawn_by_chainer(build):
    """`build()` with numpy's global generator seeded from torch's, put back afterwards; in
    float64, Chainer's default dtype for new parameters."""
    saved = np.random.get_state()
    np.random.seed(int(torch.randint(2 ** 31 - 1, ()).item()))
    try:
        with chainer.using_config("dtype", np.float64):
            return build()
    finally:
        np.random.set_state(saved)


def zero_init(build, dtype: torch.dtype):
    """`build()` in `dtype`, drawing nothing (its values are replaced before use)."""
    with chainer.using_config("dtype", numpy_dtype(dtype)):
        return build()


class _ChainerCall(torch.autograd.Function):
    """`call(arrays, params) -> Chainer outputs`: `arrays` the numpy copies of the leading
    `n_inputs` tensors (made chainer.Variables by `call`), `params` the link's Parameters, set here
    to copies of the tensors after them. Backward is chainer.backward."""

    @staticmethod
    def forward(ctx, call, params, n_inputs, training, grad_enabled, *tensors):
        arrays = [to_numpy(t) for t in tensors]
        for param, value in zip(params, arrays[n_inputs:]):
            param.array = value
            param.cleargrad()
        needs = ctx.needs_input_grad[5:]
        grad = grad_enabled and any(needs)
        inputs = [chainer.Variable(a, requires_grad=grad and need)
                  for a, need in zip(arrays[:n_inputs], needs)]
        with chainer.using_config("train", training), chainer.using_config("enable_backprop", grad):
            outputs = call(inputs)
        ctx.chainer = (inputs, list(params), outputs) if grad else None
        return tuple(to_torch(o.array) for o in outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        inputs, params, outputs = ctx.chainer
        chainer.backward(list(outputs), [chainer.Variable(to_numpy(g)) for g in grads])
        found = [v.grad for v in inputs] + [p.grad for p in params]
        needs = ctx.needs_input_grad[5:]
        return (None, None, None, None, None,
                *(to_torch(g) if need and g is not None else None for g, need in zip(found, needs)))


def run_chainer(module: nn.Module, params: list, values: list[torch.Tensor],
                inputs: list[torch.Tensor], call):
    """Run `call` on Chainer copies of `inputs` with the link's `params` set to `values`."""
    return _ChainerCall.apply(call, params, len(inputs), module.training, torch.is_grad_enabled(),
                              *inputs, *values)


class _NStepParams(nn.Module):
    """torch.nn's weight_ih / weight_hh / bias_ih / bias_hh (suffix per layer and direction) over
    an NStep link's per-gate w{j} / b{j}."""

    family = "rnn"

    def nstep_link(self, in_size: int, n_layers: int, dropout, initial: bool, dtype=None):
        cls = LINKS.get((self.family, self.nonlinearity, bool(self.bidirectional)))
        if cls is None:
            raise ValueError(f"unknown nonlinearity {self.nonlinearity!r}")
        if initial:
            return drawn_by_chainer(lambda: cls(n_layers, in_size, self.hidden_size, dropout))
        return zero_init(lambda: cls(n_layers, in_size, self.hidden_size, dropout, initialW=0,
                                     initial_bias=0), dtype)

    def register_from(self, link, suffixes: list[str], device, dtype):
        """torch.nn's parameters, from each child link's per-gate arrays (one per suffix)."""
        G = GATES[self.family]
        dtype = dtype or torch.get_default_dtype()
        for child, suffix in zip(link, suffixes):
            w = [to_torch(getattr(child, f"w{j}").array) for j in range(2 * G)]
            b = [to_torch(getattr(child, f"b{j}").array) for j in range(2 * G)]
            values = {"weight_ih": torch.cat(w[:G]), "weight_hh": torch.cat(w[G:]),
                      "bias_ih": torch.cat(b[:G]), "bias_hh": torch.cat(b[G:])}
            for role in ROLES:
                if role.startswith("bias") and not self.bias:
                    continue
                self.register_parameter(role + suffix, nn.Parameter(
                    values[role].to(device=device, dtype=dtype)))

    def link_values(self, link, suffixes: list[str]):
        """The link's Parameters in order, and torch tensors for them (torch's split by gate; zeros
        for a bias=False module's biases)."""
        G = GATES[self.family]
        params, values = [], []
        for child, suffix in zip(link, suffixes):
            w_ih, w_hh = getattr(self, "weight_ih" + suffix), getattr(self, "weight_hh" + suffix)
            ws = [*w_ih.chunk(G), *w_hh.chunk(G)]
            if self.bias:
                bs = [*getattr(self, "bias_ih" + suffix).chunk(G),
                      *getattr(self, "bias_hh" + suffix).chunk(G)]
            else:
                bs = [w_ih.new_zeros(self.hidden_size) for _ in range(2 * G)]
            for j in range(2 * G):
                params += [getattr(child, f"w{j}"), getattr(child, f"b{j}")]
                values += [ws[j], bs[j]]
        return params, values


class Sequence(_NStepParams):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        if proj_size < 0:
            raise ValueError(f"proj_size should be a non-negative integer, got {proj_size!r}")
        if proj_size:
            raise NotImplementedError("Chainer's NStep links have no projection: proj_size is not supported")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.nonlinearity, self.bias, self.batch_first = nonlinearity, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = dropout, bidirectional, proj_size
        initial = self.nstep_link(input_size, num_layers, dropout, initial=True)
        self.register_from(initial, self.suffixes(), device, dtype)

    def suffixes(self) -> list[str]:
        directions = 2 if self.bidirectional else 1
        return [f"_l{k}" + ("_reverse" if d else "")
                for k in range(self.num_layers) for d in range(directions)]

    def forward(self, input, hx=None):
        lstm = self.family == "lstm"
        packed = isinstance(input, PackedSequence)
        batch_axis = 0 if self.batch_first else 1
        if packed:
            x, lengths = pad_packed_sequence(input, batch_first=self.batch_first)
        else:
            x, lengths = input, None
            if x.dim() not in (2, 3):
                raise ValueError(f"expected 2-D (unbatched) or 3-D input, got {x.dim()}-D")
        batched = x.dim() == 3
        if not batched:
            x = x.unsqueeze(batch_axis)
        states = () if hx is None else (tuple(hx) if lstm else (hx,))
        for state in states:
            if state.dim() != (3 if batched else 2):
                raise RuntimeError(f"expected a {3 if batched else 2}-D state for "
                                   f"{'batched' if batched else 'unbatched'} input, got {tuple(state.shape)}")
        if not batched:
            states = tuple(s.unsqueeze(1) for s in states)
        # The link takes the batch as a list of sequences, each (length, features).
        sequences = list(x.unbind(batch_axis))
        if lengths is not None:
            sequences = [s[:n] for s, n in zip(sequences, lengths.tolist())]
        suffixes = self.suffixes()
        dtype = next((p.dtype for p in self.parameters()), x.dtype)  # (Chainer takes 0 layers)
        link = self.nstep_link(self.input_size, self.num_layers, self.dropout, initial=False,
                               dtype=dtype)
        params, values = self.link_values(link, suffixes)
        n_seq, given = len(sequences), len(states)

        def call(inputs):
            xs, hs = inputs[:n_seq], list(inputs[n_seq:])
            if lstm:
                h0 = hs[0] if given else None
                c0 = hs[1] if given else None
                hy, cy, ys = link(h0, c0, xs)
                return [hy, cy, *ys]
            hy, ys = link(hs[0] if given else None, xs)
            return [hy, *ys]

        outputs = run_chainer(self, params, values, [*sequences, *states], call)
        finals, ys = outputs[:2 if lstm else 1], outputs[2 if lstm else 1:]
        if packed:  # packed again in the input's order
            order = input.sorted_indices
            order = range(len(ys)) if order is None else order.tolist()
            padded = pad_sequence([ys[i] for i in order], batch_first=self.batch_first)
            data = pack_padded_sequence(padded, lengths[list(order)],
                                        batch_first=self.batch_first).data
            y = PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices)
        else:
            y = torch.stack(ys, batch_axis)
        if not batched:
            y, finals = y.squeeze(batch_axis), tuple(f.squeeze(1) for f in finals)
        return y, (tuple(finals) if lstm else finals[0])


class Cell(_NStepParams):
    """torch.nn's RNNCell / GRUCell: one step of a one-layer NStep link; LSTMCell:
    chainer.links.StatelessLSTM (see LSTMCell)."""

    bidirectional = False

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        self.register_from(self.nstep_link(input_size, 1, 0.0, initial=True), [""], device, dtype)

    def check(self, input, hx):
        """input made batched, the state as a tuple (empty when omitted), made batched."""
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        states = () if hx is None else (tuple(hx) if self.family == "lstm" else (hx,))
        if any(s.dim() != input.dim() for s in states):
            raise RuntimeError(f"expected a {input.dim()}-D state for {input.dim()}-D input, "
                               f"got {[tuple(s.shape) for s in states]}")
        if input.dim() == 1:
            return input.unsqueeze(0), tuple(s.unsqueeze(0) for s in states)
        return input, states

    def forward(self, input, hx=None):
        x, states = self.check(input, hx)
        link = self.nstep_link(self.input_size, 1, 0.0, initial=False, dtype=self.weight_ih.dtype)
        params, values = self.link_values(link, [""])
        # Each row of the batch is a sequence of one step; the state is (1, batch, hidden).
        rows = list(x.unsqueeze(1).unbind(0))

        def call(inputs):
            xs, hs = inputs[:len(rows)], inputs[len(rows):]
            hy, _ = link(hs[0] if hs else None, xs)
            return [hy]

        (h,) = run_chainer(self, params, values, [*rows, *(s.unsqueeze(0) for s in states)], call)
        h = h.squeeze(0)
        return h if input.dim() == 2 else h.squeeze(0)


def interleave(blocks: torch.Tensor) -> torch.Tensor:
    """torch's i, f, g, o blocks (4 * H, ...) as F.lstm's rows: unit by unit, a (= g), i, f, o."""
    parts = blocks.chunk(4)
    return torch.stack([parts[k] for k in LSTM_ORDER], 1).reshape(blocks.shape)


def deinterleave(rows: torch.Tensor) -> torch.Tensor:
    """F.lstm's interleaved rows as torch's i, f, g, o blocks."""
    H = rows.shape[0] // 4
    gates = rows.reshape(H, 4, *rows.shape[1:]).unbind(1)  # a, i, f, o
    return torch.cat([gates[1], gates[2], gates[0], gates[3]])


class LSTMCell(Cell):
    """chainer.links.StatelessLSTM: upward (4H x inputs, with bias), lateral (4H x H, no bias)."""

    family = "lstm"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        nn.Module.__init__(self)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = "tanh"
        link = drawn_by_chainer(lambda: L.StatelessLSTM(input_size, hidden_size))
        upward_b = deinterleave(to_torch(link.upward.b.array))
        values = {"weight_ih": deinterleave(to_torch(link.upward.W.array)),
                  "weight_hh": deinterleave(to_torch(link.lateral.W.array)),
                  "bias_ih": upward_b, "bias_hh": torch.zeros_like(upward_b)}
        dtype = dtype or torch.get_default_dtype()
        for role in ROLES:
            if role.startswith("bias") and not bias:
                continue
            self.register_parameter(role, nn.Parameter(values[role].to(device=device, dtype=dtype)))

    def forward(self, input, hx=None):
        x, states = self.check(input, hx)
        link = zero_init(lambda: L.StatelessLSTM(self.input_size, self.hidden_size, lateral_init=0,
                                                 upward_init=0, bias_init=0, forget_bias_init=0),
                         self.weight_ih.dtype)
        if self.bias:
            b = self.bias_ih + self.bias_hh
        else:
            b = self.weight_ih.new_zeros(4 * self.hidden_size)
        params = [link.upward.W, link.upward.b, link.lateral.W]
        values = [interleave(self.weight_ih), interleave(b), interleave(self.weight_hh)]

        def call(inputs):
            if len(inputs) == 3:  # x, h, c
                c, h = link(inputs[2], inputs[1], inputs[0])
            else:  # an omitted state: StatelessLSTM's own handling of None
                c, h = link(None, None, inputs[0])
            return [h, c]

        h, c = run_chainer(self, params, values, [x, *states], call)
        if input.dim() == 1:
            h, c = h.squeeze(0), c.squeeze(0)
        return h, c


class StatelessGRUCell(nn.Module):
    """chainer.links.StatelessGRU as it is, judged as torch.nn.GRUCell (STATELESS_GRU below): six
    Linear links with biases, W_r, W_z, W on x and U_r, U_z, U on h, computing
    r = sigmoid(W_r x + U_r h), z = sigmoid(W_z x + U_z h), h_bar = tanh(W x + U (r * h)),
    h' = z * h_bar + (1 - z) * h. torch's weight_ih is W_r, W_z, W stacked by rows, weight_hh
    U_r, U_z, U, bias_ih and bias_hh their biases; layouts only, so Chainer's GRU is what is
    judged."""

    LINKS = (("W_r", "U_r"), ("W_z", "U_z"), ("W", "U"))

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        link = drawn_by_chainer(lambda: L.StatelessGRU(input_size, hidden_size))
        dtype = dtype or torch.get_default_dtype()
        for role, side, attr in (("weight_ih", 0, "W"), ("weight_hh", 1, "W"),
                                 ("bias_ih", 0, "b"), ("bias_hh", 1, "b")):
            if role.startswith("bias") and not bias:
                continue
            value = torch.cat([to_torch(getattr(getattr(link, pair[side]), attr).array)
                               for pair in self.LINKS])
            self.register_parameter(role, nn.Parameter(value.to(device=device, dtype=dtype)))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        if hx is None:
            raise NotImplementedError("chainer.links.StatelessGRU needs a state: forward(h, x)")
        if hx.dim() != input.dim():
            raise RuntimeError(f"expected a {input.dim()}-D state, got {tuple(hx.shape)}")
        x, h = (input, hx) if input.dim() == 2 else (input.unsqueeze(0), hx.unsqueeze(0))
        link = zero_init(lambda: L.StatelessGRU(self.input_size, self.hidden_size, init=0,
                                                inner_init=0, bias_init=0), self.weight_ih.dtype)
        params, values = [], []
        for role, side, attr in (("weight_ih", 0, "W"), ("weight_hh", 1, "W"),
                                 ("bias_ih", 0, "b"), ("bias_hh", 1, "b")):
            value = getattr(self, role) if self.bias or attr == "W" else \
                self.weight_ih.new_zeros(3 * self.hidden_size)
            for pair, part in zip(self.LINKS, value.chunk(3)):
                params.append(getattr(getattr(link, pair[side]), attr))
                values.append(part)

        def call(inputs):
            return [link(inputs[1], inputs[0])]

        (h,) = run_chainer(self, params, values, [x, h], call)
        return h if input.dim() == 2 else h.squeeze(0)


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


def _gru_cell_init(self, input_size, hidden_size, bias=True, device=None, dtype=None):
    Cell.__init__(self, input_size, hidden_size, bias, "tanh", device, dtype)


class RNN(Sequence):
    family = "rnn"
    __init__ = _rnn_init


class LSTM(Sequence):
    family = "lstm"
    __init__ = _lstm_init


class GRU(Sequence):
    family = "gru"
    __init__ = _gru_init


class RNNCell(Cell):
    family = "rnn"


class GRUCell(Cell):
    family = "gru"
    __init__ = _gru_cell_init


IMPLEMENTATION = Implementation(
    name="chainer", kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU, "rnn_cell": RNNCell,
                           "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    unsupported=frozenset({"cuda", "bfloat16", "proj_size"}),
    description="chainer.links.NStep(Bi)RNNTanh/ReLU, NStep(Bi)LSTM, NStep(Bi)GRU, StatelessLSTM "
                "(Chainer 7.8.1, CPU, numpy)")

# Chainer's own GRU cell, which computes another GRU than torch.nn's (see StatelessGRUCell).
STATELESS_GRU = Implementation(
    name="chainer-stateless-gru", kinds={"gru_cell": StatelessGRUCell},
    unsupported=frozenset({"cuda", "bfloat16", "optional_state"}),
    description="chainer.links.StatelessGRU as it is (Chainer 7.8.1, CPU, numpy)")
