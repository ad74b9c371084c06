"""TensorFlow's own tf.keras recurrent layers as torch.nn's RNN / LSTM / GRU and RNNCell /
LSTMCell / GRUCell: tf.keras.layers.SimpleRNN / LSTM / GRU (one per layer and direction) and
SimpleRNNCell / LSTMCell / GRUCell, run by TensorFlow (tensorflow-cpu 2.21; `tf.keras` is Keras
3.15 on its TensorFlow backend, eager). Not keras_torch.py: there Keras computes with torch ops;
here every op is TensorFlow's (the layers' generic `tf.while_loop` path on the CPU: Keras's cuDNN
path needs a GPU and raises NotImplementedError without one, which Keras catches).

The adapter owns torch.nn's parameters and on every call hands TensorFlow copies of them in
Keras's layout through `Layer.stateless_call` (the layer's variables replaced by the given
values); input and state cross torch <-> TensorFlow through NumPy (bfloat16 through float32, a
cast on both sides, exact).

Layouts (keras_torch.py's):
- kernel (input, gates * H) and recurrent_kernel (H, gates * H) are weight_ih and weight_hh
  transposed; gate blocks i, f, c, o (LSTM) as torch's; GRU z, r, h vs torch's r, z, n (a swap).
  Keras's GRU mixes h' = z * h + (1 - z) * hh, torch's h' = (1 - z) * n + z * h: the same z.
- SimpleRNN and LSTM have one bias (torch's two are summed into it, in torch, so autograd gives
  each its gradient); GRU with reset_after=True (Keras's default) has a (2, 3H) bias of input
  and recurrent rows, exactly torch.nn's b_ih and b_hh: reset_after=True is torch's GRU,
  n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
- `RESET_BEFORE` is GRU / GRUCell with reset_after=False, Keras 2's old default and the Cho et al.
  (2014) form: hh = tanh(x W_h + b_h + (r * h) U_h), one (3H) bias (torch's two summed). No
  parameters express torch's r * (W_hn h + b_hn) there: another function, left as Keras computes it.
- nonlinearity is SimpleRNN's activation ('tanh' / 'relu'); bias=False is use_bias=False;
  torch's dropout between layers is Keras's `dropout=` on every layer above the first (Keras
  drops a layer's inputs, one mask per sequence, the same at every step: Keras's choice, left
  visible); the dropout RNG (Keras's SeedGenerator state) is seeded from torch's generator on
  every call, so torch.manual_seed fixes the masks and successive calls draw new ones.
- bidirectional: torch's `_reverse` direction is a second Keras layer with go_backwards=True;
  Keras returns its outputs in processing order (last step first), flipped back here in time.
- time-major vs batch-first, the batch axis of unbatched input and the state's layers x
  directions axis are `_torch_layout.TorchLayout`'s (cells: the batch axis here). Every other
  size and dtype reaches Keras as given (Keras casts a state to the layer's compute dtype).

Initial values are Keras's own (glorot_uniform kernel, orthogonal recurrent kernel, zero bias,
LSTM's unit_forget_bias), drawn in float32 by a Keras layer (or cell) built at construction with
Keras's default initializers (Keras seeds them from Python's `random`, not from torch's
generator); the single bias goes to bias_ih, bias_hh holds zeros (GRU: Keras's two rows). The
layers that compute are built apart, with zero initializers, since their values are replaced:
Keras's own Orthogonal initializer fails to build a bfloat16 layer on TensorFlow's CPU (QR has
no bfloat16 kernel), a Keras defect a user meets at construction, not in the computation.

Backward: a torch.autograd.Function runs the Keras call under a tf.GradientTape watching the
input, the given state and the Keras-layout weights; backward is `tape.gradient` with torch's
output gradients; no double backward.

Declared unsupported: cuda (tensorflow-cpu; tensors cross through NumPy), proj_size (no Keras
layer has a projection), packed (no PackedSequence; Keras's masks are not mapped).
"""
from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "tensorflow"  # tf.keras run by TensorFlow, whatever was set
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from _tensorflow import TFCall  # noqa: E402
from _torch_layout import TorchLayout, _check_arguments  # noqa: E402
from rnnbench.impls import Implementation  # noqa: E402

keras = tf.keras
if keras.backend.backend() != "tensorflow":  # keras imported earlier with another backend
    raise ImportError(f"tf.keras runs on {keras.backend.backend()!r}, not TensorFlow")

LAYERS = {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
CELLS = {"rnn": keras.layers.SimpleRNNCell, "lstm": keras.layers.LSTMCell,
         "gru": keras.layers.GRUCell}
# Keras's gate block k is torch's block KERAS_BLOCK[k] (a swap, so its own inverse).
KERAS_BLOCK = {"rnn": (0,), "lstm": (0, 1, 2, 3), "gru": (1, 0, 2)}
ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
# The layers that compute are built with zeros (their values are replaced on every call): Keras's
# default Orthogonal initializer cannot build a bfloat16 layer on TensorFlow's CPU (its QR has no
# bfloat16 kernel: InvalidArgumentError), which would hide what the layer computes.
_ZEROS = dict(kernel_initializer="zeros", recurrent_initializer="zeros", bias_initializer="zeros")
CONSTANT = {"rnn": _ZEROS, "lstm": dict(_ZEROS, unit_forget_bias=False), "gru": _ZEROS}


def _reorder(family, tensor, dim=0):
    blocks = tensor.chunk(len(KERAS_BLOCK[family]), dim=dim)
    return torch.cat([blocks[i] for i in KERAS_BLOCK[family]], dim=dim)


def keras_values(family, w, two_biases):
    """Keras's trainable values (kernel, recurrent_kernel[, bias]) from torch's tensors."""
    values = [_reorder(family, w["weight_ih"]).T, _reorder(family, w["weight_hh"]).T]
    if "bias_ih" in w:
        if two_biases:
            values.append(torch.stack([_reorder(family, w["bias_ih"]),
                                       _reorder(family, w["bias_hh"])]))
        else:
            values.append(_reorder(family, w["bias_ih"] + w["bias_hh"]))
    return values


def torch_values(family, variables, two_biases):
    """torch's tensors from a Keras layer's or cell's trainable variables."""
    variables = [torch.from_numpy(v.numpy().copy()) for v in variables]
    values = {"weight_ih": _reorder(family, variables[0].T),
              "weight_hh": _reorder(family, variables[1].T)}
    if len(variables) > 2:
        bias = variables[2]
        if two_biases:
            values.update(bias_ih=_reorder(family, bias[0]), bias_hh=_reorder(family, bias[1]))
        else:
            values.update(bias_ih=_reorder(family, bias), bias_hh=torch.zeros_like(bias))
    return values


def _seeded(layer):
    """The layer's non-trainable values, the dropout SeedGenerator states drawn from torch's."""
    values = []
    for v in layer.non_trainable_variables:
        if "seed_generator" in v.path:
            seed = int(torch.randint(2 ** 31 - 1, ()).item())
            values.append(tf.constant([seed, 0], dtype=v.dtype))
        else:
            values.append(v.value)
    return values


class KerasSequence(TorchLayout):
    """torch.nn's RNN / LSTM / GRU: one tf.keras layer per layer and direction."""

    reset_after = True

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size)
        if proj_size:
            raise NotImplementedError("tf.keras's layers have no projection: proj_size is not supported")
        self.__dict__["_keras"] = {}
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    @property
    def two_biases(self):
        return self.family == "gru" and self.reset_after

    def keras_layer(self, layer: int, direction: int, dtype: torch.dtype, constant=True):
        """The Keras layer for `layer` and `direction` computing in `dtype`, built once with
        zeros (`constant`: its values are replaced on every call), or a fresh one with Keras's
        own initializers."""
        key = (layer, direction, str(dtype).removeprefix("torch."))
        cache = self.__dict__["_keras"]
        if key not in cache or not constant:
            options = dict(return_sequences=True, return_state=True, use_bias=self.bias,
                           dropout=self.dropout if layer else 0.0, dtype=key[2],
                           go_backwards=bool(direction))
            if self.family == "rnn":
                options["activation"] = self.nonlinearity
            if self.family == "gru":
                options["reset_after"] = self.reset_after
            if constant:
                options.update(CONSTANT[self.family])
            built = LAYERS[self.family](self.hidden_size, **options)
            below = self.input_size if layer == 0 else self.hidden_size * self.num_directions
            built.build((None, None, below))
            if not constant:
                return built
            cache[key] = built
        return cache[key]

    def initial(self, layer, direction, shapes):
        built = self.keras_layer(layer, direction, torch.float32, constant=False)
        return torch_values(self.family, built.trainable_variables, self.two_biases)

    def run(self, x, state, layer):
        outputs, finals = [], []
        for direction in range(self.num_directions):
            w = self.weights(layer, direction)
            built = self.keras_layer(layer, direction, w["weight_ih"].dtype)
            count, training = len(state), self.training

            def fn(inputs, built=built, count=count, training=training):
                xs, states, values = inputs[0], inputs[1:1 + count], inputs[1 + count:]
                result, _ = built.stateless_call(values, _seeded(built), xs,
                                                 initial_state=list(states), training=training)
                return result

            sequence, *final = TFCall.apply(
                fn, x.transpose(0, 1), *(s[direction] for s in state),
                *keras_values(self.family, w, self.two_biases))
            sequence = sequence.transpose(0, 1)
            if direction:  # Keras's go_backwards output is in processing order
                sequence = sequence.flip(0)
            outputs.append(sequence)
            finals.append(final)
        return torch.cat(outputs, -1), tuple(torch.stack(parts) for parts in zip(*finals))


class KerasCell(nn.Module):
    """torch.nn's RNNCell / LSTMCell / GRUCell: one call of the tf.keras cell."""

    family = "rnn"
    reset_after = True

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, 1, nonlinearity, 0.0, 0)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        self.__dict__["_keras"] = {}
        initial = torch_values(self.family, self.keras_cell(torch.float32, constant=False)
                               .trainable_variables, self.two_biases)
        for role in ROLES if bias else ROLES[:2]:
            self.register_parameter(role, nn.Parameter(initial[role].to(
                device=device, dtype=dtype or torch.get_default_dtype())))

    @property
    def two_biases(self):
        return self.family == "gru" and self.reset_after

    def keras_cell(self, dtype: torch.dtype, constant=True):
        """As KerasSequence.keras_layer, for the cell."""
        key = str(dtype).removeprefix("torch.")
        cache = self.__dict__["_keras"]
        if key not in cache or not constant:
            options = dict(use_bias=self.bias, dtype=key)
            if self.family == "rnn":
                options["activation"] = self.nonlinearity
            if self.family == "gru":
                options["reset_after"] = self.reset_after
            if constant:
                options.update(CONSTANT[self.family])
            built = CELLS[self.family](self.hidden_size, **options)
            built.build((None, self.input_size))
            if not constant:
                return built
            cache[key] = built
        return cache[key]

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
        built = self.keras_cell(w["weight_ih"].dtype)

        def fn(inputs):
            xs, states, values = inputs[0], inputs[1:1 + count], inputs[1 + count:]
            (_, new), _ = built.stateless_call(values, _seeded(built), xs, list(states),
                                               training=self.training)
            return list(new) if isinstance(new, (list, tuple)) else [new]

        new = TFCall.apply(fn, x, *state, *keras_values(self.family, w, self.two_biases))
        new = new if batched else tuple(s.squeeze(0) for s in new)
        return tuple(new) if self.family == "lstm" else new[0]


class RNN(KerasSequence):
    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class LSTM(KerasSequence):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(KerasSequence):
    family = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


class RNNCell(KerasCell):
    family = "rnn"


class LSTMCell(KerasCell):
    family = "lstm"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


class GRUCell(KerasCell):
    family = "gru"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


class GRUResetBefore(GRU):
    reset_after = False


class GRUCellResetBefore(GRUCell):
    reset_after = False


UNSUPPORTED = frozenset({"cuda", "proj_size", "packed"})

IMPLEMENTATION = Implementation(
    name="tf-keras",
    kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU,
           "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    unsupported=UNSUPPORTED,
    description="tf.keras.layers.SimpleRNN/LSTM/GRU and their cells, run by TensorFlow (CPU)")

# tf.keras's GRU with reset_after=False (Keras 2's old default): the Cho et al. GRU, not torch's.
RESET_BEFORE = Implementation(
    name="tf-keras-reset-before", kinds={"gru": GRUResetBefore, "gru_cell": GRUCellResetBefore},
    unsupported=UNSUPPORTED,
    description="tf.keras.layers.GRU / GRUCell with reset_after=False, run by TensorFlow (CPU)")
