"""Correct, written differently: every step is computed in float64 and cast back at the end.

The caller sees torch.nn's dtypes; mixed dtypes are still refused, as torch.nn refuses them,
rather than silently absorbed by the upcast.
"""
import torch

import _base
from rnnbench.impls import Implementation


def _cast(value, dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    return None if value is None else tuple(_cast(v, dtype) for v in value)


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    return [] if value is None else [t for v in value for t in _tensors(v)]


class Float64Inside:
    """Mixin: upcast input, state and weights to float64; downcast the results."""

    def forward(self, input, hx=None):
        dtype = next(self.parameters()).dtype
        for tensor in [input, *_tensors(hx)]:
            if isinstance(tensor, torch.Tensor) and tensor.dtype != dtype:
                raise RuntimeError(f"expected {dtype} tensors like the parameters, got {tensor.dtype}")
        return _cast(super().forward(_cast(input, torch.float64), _cast(hx, torch.float64)), dtype)

    def weights(self, layer, direction):
        return {role: p.to(torch.float64) for role, p in super().weights(layer, direction).items()}


class RNN(Float64Inside, _base.RNN): pass
class LSTM(Float64Inside, _base.LSTM): pass
class GRU(Float64Inside, _base.GRU): pass
class RNNCell(Float64Inside, _base.RNNCell): pass
class LSTMCell(Float64Inside, _base.LSTMCell): pass
class GRUCell(Float64Inside, _base.GRUCell): pass


IMPLEMENTATION = Implementation(
    name="zoo-float64-inside",
    kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU,
           "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    description="correct: computes in float64 internally, returns the caller's dtype")
