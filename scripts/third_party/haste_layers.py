"""Haste (haste-pytorch-cpu, its CPU TorchScript path) as torch.nn's LSTM and GRU: one haste
layer, run with `torch.func.functional_call` on the adapter's parameters in Haste's layout.

Layouts are Haste's own conversions (`to_native_weights` / `from_native_weights`): kernel
(input, gates * hidden) transposed, LSTM gates i, g, f, o with one bias (torch's two summed),
GRU gates z, r, n with input and recurrent biases. Initial values are Haste's (xavier /
orthogonal / zeros, forget bias 1). Torch's `dropout` goes to Haste's argument of that name
(DropConnect on the recurrent kernel, in training). One layer, one direction, no projection.
"""
import haste_pytorch
import torch

from _torch_layout import TorchLayout
from rnnbench.impls import Implementation

# Haste's gate block k is torch's block HASTE_BLOCK[k] (a swap, so its own inverse).
HASTE_BLOCK = {"lstm": (0, 2, 1, 3), "gru": (1, 0, 2)}
LAYERS = {"lstm": haste_pytorch.LSTM, "gru": haste_pytorch.GRU}


def _reorder(family, tensor):
    blocks = tensor.chunk(len(HASTE_BLOCK[family]), dim=-1)
    return torch.cat([blocks[i] for i in HASTE_BLOCK[family]], dim=-1)


class HasteLayer(TorchLayout):
    def haste(self):
        """The Haste layer (kept out of this module's parameters)."""
        if "_haste" not in self.__dict__:
            self.__dict__["_haste"] = LAYERS[self.family](self.input_size, self.hidden_size,
                                                          dropout=self.dropout)
        return self.__dict__["_haste"]

    def initial(self, layer, direction, shapes):
        values = dict(zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                          (p.detach() for p in self.haste().to_native_weights())))
        return values if self.bias else {k: v for k, v in values.items() if k.startswith("weight")}

    def run(self, x, state, layer):
        w = self.weights(layer, 0)
        zeros = w["weight_ih"].new_zeros(w["weight_ih"].shape[0])
        b_ih, b_hh = w.get("bias_ih", zeros), w.get("bias_hh", zeros)
        values = {"kernel": _reorder(self.family, w["weight_ih"].T),
                  "recurrent_kernel": _reorder(self.family, w["weight_hh"].T)}
        if self.family == "lstm":
            values["bias"] = _reorder(self.family, b_ih + b_hh)
            given = state
        else:
            values.update(bias=_reorder(self.family, b_ih), recurrent_bias=_reorder(self.family, b_hh))
            given = state[0]
        layer_module = self.haste().to(x.dtype).train(self.training)
        output, final = torch.func.functional_call(layer_module, values, (x, given))
        return output, (final if self.family == "lstm" else (final,))


class LSTM(HasteLayer):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(HasteLayer):
    family = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


IMPLEMENTATION = Implementation(
    name="haste", kinds={"lstm": LSTM, "gru": GRU},
    unsupported=frozenset({"num_layers", "bidirectional", "proj_size"}),
    description="haste_pytorch.LSTM / GRU (CPU), one layer")
