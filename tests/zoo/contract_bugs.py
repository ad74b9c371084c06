"""Planted bugs in the construction contract: names, shapes, arguments, dtype."""
import torch
from torch import nn

from _base import GRU, LSTM, RNN


class OneBasedNames(RNN):
    def parameter_name(self, role, layer, direction):
        return super().parameter_name(role, layer + 1, direction)  # R torch: weight_ih_l1 first


class RowVectorBiases(GRU):
    def parameter_shapes(self, layer):
        shapes = super().parameter_shapes(layer)
        return {role: (1,) + shape if role.startswith("bias") else shape
                for role, shape in shapes.items()}


class BiasHHMissing(RNN):
    def parameter_shapes(self, layer):
        shapes = super().parameter_shapes(layer)
        shapes.pop("bias_hh", None)
        return shapes


class BiasFlagIgnored(LSTM):
    def parameter_shapes(self, layer):
        shapes = super().parameter_shapes(layer)
        rows = shapes["weight_ih"][0]
        return {**shapes, "bias_ih": (rows,), "bias_hh": (rows,)}


class DtypeIgnored(RNN):
    def new_parameter(self, shape, device, dtype):
        return nn.Parameter(torch.empty(shape, device=device))


class InvalidArgumentsAccepted(GRU):
    def check_options(self):
        pass


class StackingIgnored(GRU):
    def _setup(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
               batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
               dtype=None):
        # num_layers and bidirectional taken, then dropped: one layer, one direction always
        super()._setup(input_size, hidden_size, 1, nonlinearity, bias, batch_first, dropout,
                       False, proj_size, device=device, dtype=dtype)
