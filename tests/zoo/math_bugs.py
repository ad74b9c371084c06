"""Planted bugs in the cell math: each overrides one hook of one family."""
import torch

from _base import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell


class TransposedWhh(RNN):
    def hidden_part(self, h, w):
        return self.linear(h, w["weight_hh"].T, w.get("bias_hh"))


class TransposedWeights(RNN):
    def linear(self, x, weight, bias):
        return x @ weight if bias is None else x @ weight + bias  # runs only when I == H


class NoTanhCell(RNNCell):
    def activation(self, z):
        return z


class NonlinearitySwapped(RNN):
    def activation(self, z):
        return torch.relu(z) if self.nonlinearity == "tanh" else torch.tanh(z)


class LSTMGatesIFOG(LSTM):
    gate_order = ("i", "f", "o", "g")


class LSTMCellGatesIGFO(LSTMCell):
    gate_order = ("i", "g", "f", "o")


class LSTMForgetBias(LSTM):
    def split(self, gates):
        blocks = super().split(gates)
        return {**blocks, "f": blocks["f"] + 1.0}  # TensorFlow's forget_bias, kept in a port


class LSTMCellStateClipped(LSTM):
    def step(self, x, state, w):
        h, c = state
        g = self.split(self.input_part(x, w) + self.hidden_part(h, w))
        c = torch.sigmoid(g["f"]) * c + torch.sigmoid(g["i"]) * torch.tanh(g["g"])
        c = c.clamp(-3.0, 3.0)  # ELMo's memory-cell clip, kept in a port
        return self.project(torch.sigmoid(g["o"]) * torch.tanh(c), w), c


class LSTMTensorFlowPort(LSTM):
    def split(self, gates):
        i, j, f, o = gates.chunk(4, dim=-1)  # TensorFlow's blocks: j is the candidate
        return {"i": i, "g": j, "f": f + 1.0, "o": o}


class GRUGatesZRN(GRU):
    gate_order = ("z", "r", "n")


class GRUCho(GRU):
    def candidate(self, x_n, h_n, r, h, w):
        rows = slice(2 * self.hidden_size, 3 * self.hidden_size)
        bias = w["bias_hh"][rows] if "bias_hh" in w else None
        return torch.tanh(x_n + self.linear(r * h, w["weight_hh"][rows], bias))


class GRUCellSwappedZ(GRUCell):
    def blend(self, z, n, h):
        return z * n + (1 - z) * h


class GRUCellResetOutsideBias(GRUCell):
    def candidate(self, x_n, h_n, r, h, w):
        b_hn = w["bias_hh"][2 * self.hidden_size:] if "bias_hh" in w else 0
        return torch.tanh(x_n + r * (h_n - b_hn) + b_hn)  # r scales W_hn h but not b_hn


class LSTMSingleBias(LSTM):
    def hidden_part(self, h, w):
        return self.linear(h, w["weight_hh"], None)  # bias_hh registered but never used


class GRUBiasesIgnored(GRU):
    def linear(self, x, weight, bias):
        return x @ weight.T


class LSTMGatesSplitBySize(LSTM):
    def split(self, gates):
        # lucid 2.x: chunks of size 4 instead of 4 chunks (right only when hidden_size == 4)
        return dict(zip(self.gate_order, gates.split(len(self.gate_order), dim=-1)))


class LSTMStepsInBfloat16(LSTM):
    """Every step computed in bfloat16 and cast back, whatever the module's dtype (as inference
    runtimes run float32 models on CPUs with bfloat16 arithmetic)."""

    def step(self, x, state, w):
        low = lambda t: t.to(torch.bfloat16)  # noqa: E731
        result = super().step(low(x), tuple(map(low, state)), {k: low(v) for k, v in w.items()})
        return tuple(t.to(x.dtype) for t in result)


class TanhFromExp(RNNCell):
    def activation(self, z):
        if self.nonlinearity != "tanh":
            return super().activation(z)
        return (torch.exp(z) - torch.exp(-z)) / (torch.exp(z) + torch.exp(-z))  # overflows


class LSTMCellHardSigmoid(LSTMCell):
    def step(self, x, state, w):
        h, c = state
        g = self.split(self.input_part(x, w) + self.hidden_part(h, w))
        gate = lambda a: (0.2 * a + 0.5).clamp(0, 1)  # noqa: E731  (Keras 2's hard_sigmoid)
        c = gate(g["f"]) * c + gate(g["i"]) * torch.tanh(g["g"])
        return self.project(gate(g["o"]) * torch.tanh(c), w), c
