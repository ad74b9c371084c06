"""dm-sonnet 2's recurrent cores as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell
(dm-sonnet 2.0.2 on tensorflow-cpu 2.21, eager): snt.VanillaRNN, snt.LSTM and snt.GRU, run over
time by `snt.dynamic_unroll` (time-major). A cell kind is one call of the core on a batch.

The adapter owns torch.nn's parameters. A sonnet core creates its tf.Variables on its first call
(`@once`); the adapter builds one core per layer, direction and dtype, calls it once on zeros,
and on every later call replaces the core's weight attributes with TensorFlow copies of torch's
tensors (in sonnet's layout) before running it, so sonnet's own code computes on them and a
tf.GradientTape can watch them. Input and state cross torch <-> TensorFlow through NumPy
(bfloat16 through float32, a cast on both sides, exact).

What sonnet computes (sonnet/src/recurrent.py) and how torch.nn's layout maps onto it:

- VanillaRNN: h' = activation(x @ w_i + h @ w_h + b), `_input_to_hidden.w` (D, H),
  `_hidden_to_hidden.w` (H, H) (two bias-free snt.Linear) and `_b` (H): weight_ih.T, weight_hh.T,
  bias_ih + bias_hh. nonlinearity 'tanh' is sonnet's default activation tf.tanh, 'relu' is
  tf.nn.relu.
- LSTM: `_w_i` (D, 4H), `_w_h` (H, 4H), `b` (4H), gate blocks i, f, g, o as torch's: weight_ih.T,
  weight_hh.T, bias_ih + bias_hh. Sonnet's forget_bias=1.0 is added to b at initialization only
  (not in forward, unlike haiku's LSTM). proj_size is sonnet's projection_size: h' = (o *
  tanh(c)) @ projection, `projection` (H, P) is torch's weight_hr.T, and `_w_h` is then (P, 4H).
- GRU: `_w_i` (D, 3H), `_w_h` (H, 3H), `b` (3H), gate blocks z, r, a, and h' = (1 - z) h + z a,
  a = tanh(x @ w_i_a + (r * h) @ w_h_a + b_a) (haiku's GRU is the same code). Two differences
  from torch.nn's h' = (1 - z) n + z h, n = tanh(W_in x + b_in + r * (W_hn h + b_hn)):
  * z the other way round is a re-parametrisation the weights express exactly: sigmoid(-a) =
    1 - sigmoid(a), so sonnet's z blocks (of w_i, w_h and b) are torch's z blocks negated. Mapped.
  * the reset gate applied before the recurrent matmul (Cho et al. 2014) is another function; no
    parameters express torch's r * (W_hn h + b_hn). Left as sonnet computes it. Sonnet has one
    bias, b = bias_ih + bias_hh per gate (z negated), so b_hn sits outside the reset product.

Biases: sonnet's cores always have them, so bias=False holds them at zero. torch's reverse
direction: sonnet's unrolls have no reverse option; the adapter flips the input in time and the
output back (layout only). num_layers and bidirectional are the adapter's stacking of single-
layer unrolls (`_torch_layout.TorchLayout`), as in haiku_cells.py.

Dtypes: a core is built in the parameters' dtype (sonnet's `dtype=`). Sonnet checks the input's
dtype (TypeError) only in its `@once` initialization, i.e. on the core's first call, which here
is the build on zeros: later calls, as for any sonnet user after the first, reach TensorFlow's
ops with the input and state as given (InvalidArgumentError on a mismatch).

Initial values are sonnet's own, drawn by a core built (in float32) at construction, with
TensorFlow's global seed set from torch's generator first (so torch.manual_seed fixes them):
VanillaRNN and LSTM weights truncated normal with stddev 1/sqrt(fan_in) (LSTM's w_h: 1/sqrt(H or
P); projection 1/sqrt(H)), GRU's Glorot uniform, biases zero but LSTM's forget block 1.0. The
single bias goes to bias_ih, bias_hh holds zeros.

Backward: a torch.autograd.Function runs sonnet under a tf.GradientTape watching the input, the
given state and the weights; backward is `tape.gradient` with torch's output gradients; no double
backward.

Declared unsupported: cuda (tensorflow-cpu; tensors cross through NumPy), dropout (no sonnet core
has dropout between layers), packed (no PackedSequence; dynamic_unroll's sequence_length is not
mapped).
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sonnet as snt  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from _tensorflow import TFCall  # noqa: E402
from _torch_layout import TorchLayout, _check_arguments  # noqa: E402
from rnnbench.impls import Implementation  # noqa: E402

ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
CORES = {"rnn": snt.VanillaRNN, "lstm": snt.LSTM, "gru": snt.GRU}
GRU_ORDER = [1, 0, 2]  # torch's r, z, n <-> sonnet's z, r, a (its own inverse)


def tf_dtype(dtype: torch.dtype):
    return tf.as_dtype(str(dtype).removeprefix("torch."))


def blocks(tensor, order):
    parts = tensor.chunk(len(order))
    return torch.cat([parts[k] for k in order])


def _negate_first(tensor):  # sonnet's GRU blocks z, r, a: its z is torch's z negated
    parts = tensor.chunk(3)
    return torch.cat([-parts[0], *parts[1:]])


class Sonnet:
    """torch.nn's tensors <-> a sonnet core's weights; building, one step, one unroll."""

    @staticmethod
    def build(family, input_size, hidden_size, dtype, nonlinearity="tanh", proj_size=0):
        """A sonnet core in `dtype` whose variables exist (called once on zeros)."""
        options = dict(dtype=tf_dtype(dtype))
        if family == "rnn":
            options["activation"] = tf.nn.relu if nonlinearity == "relu" else tf.tanh
        if family == "lstm" and proj_size:
            options["projection_size"] = proj_size
        core = CORES[family](hidden_size, **options)
        core(tf.zeros([1, input_size], options["dtype"]), core.initial_state(1))
        return core

    @staticmethod
    def torch_values(family, core):
        """torch.nn's tensors from the core's variables."""
        def t(v):
            return torch.from_numpy(v.numpy().copy())
        if family == "rnn":
            w_i, w_h, b = core._input_to_hidden.w, core._hidden_to_hidden.w, core._b
        else:
            w_i, w_h, b = core._w_i, core._w_h, core.b
        w_i, w_h, b = t(w_i).T, t(w_h).T, t(b)
        if family == "gru":
            w_i, w_h, b = (blocks(_negate_first(v), GRU_ORDER) for v in (w_i, w_h, b))
        values = {"weight_ih": w_i, "weight_hh": w_h, "bias_ih": b, "bias_hh": torch.zeros_like(b)}
        if family == "lstm" and core.projection is not None:
            values["weight_hr"] = t(core.projection).T
        return values

    @staticmethod
    def sonnet_values(family, w):
        """The core's weights (in `names` order) from torch's tensors (absent biases: zeros)."""
        w_ih, w_hh = w["weight_ih"], w["weight_hh"]
        zeros = w_ih.new_zeros(w_ih.shape[0])
        b = w.get("bias_ih", zeros) + w.get("bias_hh", zeros)
        if family == "gru":
            w_ih, w_hh, b = (_negate_first(blocks(v, GRU_ORDER)) for v in (w_ih, w_hh, b))
        values = [w_ih.T, w_hh.T, b]
        if "weight_hr" in w:
            values.append(w["weight_hr"].T)
        return values

    @staticmethod
    def assign(family, core, values):
        """Put TensorFlow tensors in place of the core's variables."""
        if family == "rnn":
            core._input_to_hidden.w, core._hidden_to_hidden.w, core._b = values
        elif family == "lstm":
            core._w_i, core._w_h, core.b = values[:3]
            if len(values) > 3:
                core.projection = values[3]
        else:
            core._w_i, core._w_h, core.b = values

    @staticmethod
    def state_in(family, state):
        return snt.LSTMState(*state) if family == "lstm" else state[0]

    @staticmethod
    def state_out(family, state):
        return [state.hidden, state.cell] if family == "lstm" else [state]


class SonnetSequence(TorchLayout):
    """torch.nn's RNN / LSTM / GRU: one sonnet unroll per layer and direction."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size)
        if dropout and num_layers > 1:
            raise NotImplementedError("sonnet's cores have no dropout: dropout between layers "
                                      "is not supported")
        nn.Module.__init__(self)  # TorchLayout's registration, with sonnet's projection
        self.__dict__["_cores"] = {}
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.nonlinearity, self.bias, self.batch_first = nonlinearity, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = dropout, bidirectional, proj_size
        self.num_directions = 2 if bidirectional else 1
        tf.random.set_seed(int(torch.randint(2 ** 31 - 1, ()).item()))
        out = proj_size or hidden_size
        for layer in range(num_layers):
            below = input_size if layer == 0 else out * self.num_directions
            for direction in range(self.num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                initial = Sonnet.torch_values(self.family, Sonnet.build(
                    self.family, below, hidden_size, torch.float32, nonlinearity, proj_size))
                for role in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"):
                    if role in initial and (bias or not role.startswith("bias")):
                        self.register_parameter(role + suffix, nn.Parameter(initial[role].to(
                            device=device, dtype=dtype or torch.get_default_dtype())))

    def weights(self, layer, direction):
        w = super().weights(layer, direction)
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        if hasattr(self, "weight_hr" + suffix):
            w["weight_hr"] = getattr(self, "weight_hr" + suffix)
        return w

    def initial_state(self, hx, x, batched):
        if hx is None and self.proj_size:
            shape = (self.num_layers * self.num_directions, x.shape[1])
            return (x.new_zeros(*shape, self.proj_size), x.new_zeros(*shape, self.hidden_size))
        return super().initial_state(hx, x, batched)

    def core(self, layer, direction, dtype):
        key = (layer, direction, dtype)
        if key not in self._cores:
            out = self.proj_size or self.hidden_size
            below = self.input_size if layer == 0 else out * self.num_directions
            self._cores[key] = Sonnet.build(self.family, below, self.hidden_size, dtype,
                                            self.nonlinearity, self.proj_size)
        return self._cores[key]

    def run(self, x, state, layer):
        outputs, finals = [], []
        for direction in range(self.num_directions):
            w = self.weights(layer, direction)
            core, family, count = self.core(layer, direction, w["weight_ih"].dtype), self.family, len(state)

            def fn(inputs, core=core):
                xs, states, values = inputs[0], inputs[1:1 + count], inputs[1 + count:]
                Sonnet.assign(family, core, values)
                ys, final = snt.dynamic_unroll(core, xs, Sonnet.state_in(family, states))
                return [ys, *Sonnet.state_out(family, final)]

            xs = x.flip(0) if direction else x  # the reverse direction: time flipped around it
            ys, *final = TFCall.apply(fn, xs, *(s[direction] for s in state),
                                       *Sonnet.sonnet_values(family, w))
            outputs.append(ys.flip(0) if direction else ys)
            finals.append(final)
        return torch.cat(outputs, -1), tuple(torch.stack(parts) for parts in zip(*finals))


class SonnetCell(nn.Module):
    """torch.nn's RNNCell / LSTMCell / GRUCell: one call of the sonnet core."""

    family = "rnn"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, 1, nonlinearity, 0.0, 0)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        self.__dict__["_cores"] = {}
        tf.random.set_seed(int(torch.randint(2 ** 31 - 1, ()).item()))
        initial = Sonnet.torch_values(self.family, Sonnet.build(
            self.family, input_size, hidden_size, torch.float32, nonlinearity))
        for role in ROLES if bias else ROLES[:2]:
            self.register_parameter(role, nn.Parameter(initial[role].to(
                device=device, dtype=dtype or torch.get_default_dtype())))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        count = 2 if self.family == "lstm" else 1
        if hx is None:
            state = tuple(x.new_zeros(x.shape[0], self.hidden_size) for _ in range(count))
        else:
            state = tuple(hx) if self.family == "lstm" else (hx,)
            if any(s.dim() != input.dim() for s in state):
                raise RuntimeError(f"expected a {input.dim()}-D state, got "
                                   f"{[tuple(s.shape) for s in state]}")
            state = state if batched else tuple(s.unsqueeze(0) for s in state)
        w = {role: getattr(self, role) for role in ROLES if hasattr(self, role)}
        dtype = w["weight_ih"].dtype
        if dtype not in self._cores:
            self._cores[dtype] = Sonnet.build(self.family, self.input_size, self.hidden_size,
                                              dtype, self.nonlinearity)
        core, family = self._cores[dtype], self.family

        def fn(inputs):
            xs, states, values = inputs[0], inputs[1:1 + count], inputs[1 + count:]
            Sonnet.assign(family, core, values)
            _, new = core(xs, Sonnet.state_in(family, states))
            return Sonnet.state_out(family, new)

        new = TFCall.apply(fn, x, *state, *Sonnet.sonnet_values(family, w))
        new = new if batched else tuple(s.squeeze(0) for s in new)
        return tuple(new) if self.family == "lstm" else new[0]


class RNN(SonnetSequence):
    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class LSTM(SonnetSequence):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(SonnetSequence):
    family = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


class RNNCell(SonnetCell):
    family = "rnn"


class LSTMCell(SonnetCell):
    family = "lstm"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


class GRUCell(SonnetCell):
    family = "gru"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


IMPLEMENTATION = Implementation(
    name="dm-sonnet",
    kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU,
           "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    unsupported=frozenset({"cuda", "dropout", "packed"}),
    description="snt.VanillaRNN / LSTM / GRU, snt.dynamic_unroll over time (TensorFlow, CPU)")
