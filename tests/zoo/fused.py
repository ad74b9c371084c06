"""Correct, written differently: one fused matmul [x, h] @ [W_ih, W_hh]^T + (b_ih + b_hh) per step.

GRU fuses the r and z gates only: its candidate needs W_hn h on its own (the reset gate scales it).
"""
import torch

import _base
from rnnbench.impls import Implementation


def _fused(x, h, w, rows=slice(None)):
    """[x, h] @ [W_ih; W_hh]^T over the given gate rows, plus both biases once summed."""
    weight = torch.cat([w["weight_ih"][rows], w["weight_hh"][rows]], dim=1)
    out = torch.cat([x, h], dim=-1) @ weight.T
    return out + (w["bias_ih"][rows] + w["bias_hh"][rows]) if "bias_ih" in w else out


class FusedElman:
    def step(self, x, state, w):
        return (self.activation(_fused(x, state[0], w)),)


class FusedLSTM:
    def step(self, x, state, w):
        h, c = state
        i, f, g, o = _fused(x, h, w).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return self.project(torch.sigmoid(o) * torch.tanh(c), w), c


class FusedGRU:
    def step(self, x, state, w):
        (h,) = state
        size = self.hidden_size
        r, z = torch.sigmoid(_fused(x, h, w, slice(0, 2 * size))).chunk(2, dim=-1)
        n_rows = slice(2 * size, 3 * size)
        x_n = self.linear(x, w["weight_ih"][n_rows], w["bias_ih"][n_rows] if "bias_ih" in w else None)
        h_n = self.linear(h, w["weight_hh"][n_rows], w["bias_hh"][n_rows] if "bias_hh" in w else None)
        n = torch.tanh(x_n + r * h_n)
        return (n + z * (h - n),)


class RNN(FusedElman, _base.RNN): pass
class LSTM(FusedLSTM, _base.LSTM): pass
class GRU(FusedGRU, _base.GRU): pass
class RNNCell(FusedElman, _base.RNNCell): pass
class LSTMCell(FusedLSTM, _base.LSTMCell): pass
class GRUCell(FusedGRU, _base.GRUCell): pass


IMPLEMENTATION = Implementation(
    name="zoo-fused",
    kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU,
           "rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    description="correct: fused [x, h] @ W^T per step, biases summed once")
