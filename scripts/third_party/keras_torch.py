"""Keras 3 on its torch backend (KERAS_BACKEND=torch) as torch.nn's RNN, LSTM and GRU: each layer
a keras.layers.SimpleRNN / LSTM / GRU, run with `stateless_call` on the adapter's parameters.

Layouts: Keras's kernel is (input, gates * hidden), torch's weight_ih its transpose; LSTM gates
are i, f, c, o in both; GRU gates are z, r, h in Keras, r, z, n in torch (reset_after=True is
torch's GRU); SimpleRNN and LSTM have one bias (torch's two are summed into it), GRU a (2, 3H)
bias of input and recurrent rows. Initial values are Keras's own (glorot / orthogonal / zeros,
unit forget bias). Torch's dropout between layers is Keras's `dropout=` on every layer above the
first (Keras drops a layer's inputs). No bidirectional (here), no projection.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import torch  # noqa: E402

from _torch_layout import TorchLayout  # noqa: E402
from rnnbench.impls import Implementation  # noqa: E402

LAYERS = {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
# Keras's gate block k is torch's block KERAS_BLOCK[k] (a swap, so its own inverse).
KERAS_BLOCK = {"rnn": (0,), "lstm": (0, 1, 2, 3), "gru": (1, 0, 2)}


def _reorder(family, tensor, dim=0):
    blocks = tensor.chunk(len(KERAS_BLOCK[family]), dim=dim)
    return torch.cat([blocks[i] for i in KERAS_BLOCK[family]], dim=dim)


class KerasLayers(TorchLayout):
    def keras_layer(self, layer: int, dtype: torch.dtype):
        """The Keras layer for `layer` computing in `dtype`, built once."""
        cache = self.__dict__.setdefault("_keras", {})
        key = (layer, str(dtype).removeprefix("torch."))
        if key not in cache:
            options = dict(return_sequences=True, return_state=True, use_bias=self.bias,
                           dropout=self.dropout if layer else 0.0, dtype=key[1])
            if self.family == "rnn":
                options["activation"] = self.nonlinearity
            built = LAYERS[self.family](self.hidden_size, **options)
            below = self.input_size if layer == 0 else self.hidden_size
            built.build((None, None, below))
            cache[key] = built
        return cache[key]

    def initial(self, layer, direction, shapes):
        variables = [torch.as_tensor(v.numpy()) for v in
                     self.keras_layer(layer, torch.get_default_dtype()).trainable_variables]
        values = {"weight_ih": _reorder(self.family, variables[0].T),
                  "weight_hh": _reorder(self.family, variables[1].T)}
        if self.bias:
            bias = variables[2]
            if self.family == "gru":
                values.update(bias_ih=_reorder(self.family, bias[0]), bias_hh=_reorder(self.family, bias[1]))
            else:
                values.update(bias_ih=_reorder(self.family, bias), bias_hh=torch.zeros_like(bias))
        return values

    def keras_values(self, w):
        values = [_reorder(self.family, w["weight_ih"]).T, _reorder(self.family, w["weight_hh"]).T]
        if self.bias:
            if self.family == "gru":
                values.append(torch.stack([_reorder(self.family, w["bias_ih"]),
                                           _reorder(self.family, w["bias_hh"])]))
            else:
                values.append(_reorder(self.family, w["bias_ih"] + w["bias_hh"]))
        return values

    def run(self, x, state, layer):
        w = self.weights(layer, 0)
        keras_layer = self.keras_layer(layer, w["weight_ih"].dtype)
        outputs, _ = keras_layer.stateless_call(
            self.keras_values(w), [v.value for v in keras_layer.non_trainable_variables],
            x.transpose(0, 1), initial_state=[s.squeeze(0) for s in state], training=self.training)
        sequence, *finals = outputs
        return sequence.transpose(0, 1), tuple(f.unsqueeze(0) for f in finals)


class RNN(KerasLayers):
    family = "rnn"


class LSTM(KerasLayers):
    family = "lstm"


class GRU(KerasLayers):
    family = "gru"


IMPLEMENTATION = Implementation(
    name="keras-torch", kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU},
    unsupported=frozenset({"bidirectional", "proj_size"}),
    description="keras.layers.SimpleRNN/LSTM/GRU on the torch backend, one per layer")
