"""Correct, written differently: parameters live in one submodule per (layer, direction), the
input projection of a whole sequence is one matmul, and the reverse direction flips its input.

The storage is not torch.nn's (`blocks.3.weight_ih`), so state_dict hooks and attribute lookup
translate to torch.nn's names (`weight_ih_l1_reverse`): the contract is the state_dict's names.
"""
import torch
from torch import nn

import _base
from rnnbench.impls import Implementation


class Layered:
    """Mixin: per-(layer, direction) parameter blocks, premultiplied inputs, flipped reverse."""

    def build(self, device, dtype):
        self.blocks = nn.ModuleList()
        self._torch_names = {}  # "blocks.3.weight_ih" -> "weight_ih_l1_reverse"
        for layer in range(self.num_layers):
            for direction in range(self.num_directions):
                block = nn.Module()
                for role, shape in self.parameter_shapes(layer).items():
                    block.register_parameter(role, self.new_parameter(shape, device, dtype))
                    local = f"blocks.{len(self.blocks)}.{role}"
                    self._torch_names[local] = self.parameter_name(role, layer, direction)
                self.blocks.append(block)
        self.register_state_dict_post_hook(_to_torch_names)
        self.register_load_state_dict_pre_hook(_from_torch_names)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            local = {t: l for l, t in self.__dict__.get("_torch_names", {}).items()}.get(name)
            if local is None:
                raise
            return self.get_parameter(local)

    def weights(self, layer, direction):
        block = self.blocks[layer * self.num_directions + direction]
        return dict(block.named_parameters())

    def run_direction(self, x, state, layer, direction):
        w = self.weights(layer, direction)
        reverse = direction == 1
        projected = self.linear(x.flip(0) if reverse else x, w["weight_ih"], w.get("bias_ih"))
        outputs = []
        for gx in projected.unbind(0):
            state = self.step(gx, state, w)
            outputs.append(state[0])
        output = torch.stack(outputs)
        return (output.flip(0) if reverse else output), state

    def input_part(self, projected, w):
        return projected  # run_direction projected the whole sequence already


def _to_torch_names(module, state_dict, prefix, local_metadata):
    for local, name in module._torch_names.items():
        state_dict[prefix + name] = state_dict.pop(prefix + local)


def _from_torch_names(module, state_dict, prefix, *args):
    for local, name in module._torch_names.items():
        if prefix + name in state_dict:
            state_dict[prefix + local] = state_dict.pop(prefix + name)


class RNN(Layered, _base.RNN): pass
class LSTM(Layered, _base.LSTM): pass
class GRU(Layered, _base.GRU): pass
class RNNCell(Layered, _base.RNNCell): pass
class LSTMCell(Layered, _base.LSTMCell): pass
class GRUCell(Layered, _base.GRUCell): pass


IMPLEMENTATION = Implementation(
    name="zoo-layered",
    kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU,
           "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    description="correct: per-(layer, direction) parameter blocks exposed under torch.nn's "
                "state_dict names, premultiplied inputs, reverse direction by flipping")
