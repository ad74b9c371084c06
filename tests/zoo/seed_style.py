"""Recurrent modules written the way tutorials, courses and public from-scratch code write them.

None of them has torch.nn's constructor signature, parameter names or (always) its maths; each
is written in its source's style, as its author would, defects included. What rnnbench should
say about each under torch.nn's contract is data in seed_catalogue.py.

- `VanillaRNNCell`, `LSTMCell`: a tutorial's manual cells. nn.Linear submodules (`W_xh` with a
  bias, `W_hh` without; `W_x` and `W_h` of 4H rows), W_hh orthogonal, a required state.
- `RNNCell`: lucid-style. torch.nn's names and maths, no device/dtype arguments.
- `RNNScratch`: d2l's from-scratch RNN. `W_xh` (inputs, hiddens) used as X @ W_xh, one bias,
  randn * sigma init; forward returns a Python list of the per-step states and the last state.
- `CharRNNCell`: one nn.Linear over the concatenation [x, h] (char-RNN / makemore style).
- `LinearPairRNNCell`: two nn.Linear, both with a bias, named `ih` and `hh`.
- `CustomLSTM`: one (input, 4H) matrix `W`, one (hidden, 4H) matrix `U`, one bias, torch's init
  bound, input read batch-first (a widely copied "LSTM from scratch").
- `TextbookGRUCell`: one nn.Linear per gate (`W_z`, `U_z`, ...), the reset gate applied before
  the hidden matmul and h' = (1 - z) h + z h~ (Cho et al. 2014, as textbooks write it).
"""
from __future__ import annotations

import math

import torch
from torch import nn


class VanillaRNNCell(nn.Module):
    """h_t = tanh(W_xh x_t + W_hh h_{t-1}); W_hh starts orthogonal."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.W_xh = nn.Linear(input_size, hidden_size)
        self.W_hh = nn.Linear(hidden_size, hidden_size, bias=False)
        nn.init.orthogonal_(self.W_hh.weight)  # keeps the recurrence's gradient norm near 1

    def forward(self, x, h_prev):
        return torch.tanh(self.W_xh(x) + self.W_hh(h_prev))


class LSTMCell(nn.Module):
    """An LSTM cell with the four gates computed by one input and one hidden projection."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.W_x = nn.Linear(input_size, 4 * hidden_size)
        self.W_h = nn.Linear(hidden_size, 4 * hidden_size, bias=False)

    def forward(self, x, states):
        h, c = states
        gates = self.W_x(x) + self.W_h(h)
        i, f, g, o = gates.chunk(4, dim=1)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        return h, c


class RNNCell(nn.Module):
    """An Elman cell with torch.nn's parameters and maths, in a framework without dtype/device
    arguments."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh"):
        super().__init__()
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Invalid nonlinearity '{nonlinearity}'. Choose 'tanh' or 'relu'.")
        self.input_size, self.hidden_size = input_size, hidden_size
        self.bias, self.nonlinearity = bias, nonlinearity
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(hidden_size))
            self.bias_hh = nn.Parameter(torch.empty(hidden_size))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        sqrt_k = 1.0 / math.sqrt(hidden_size)
        for parameter in self.parameters():
            nn.init.uniform_(parameter, -sqrt_k, sqrt_k)

    def forward(self, input_, hx=None):
        if input_.dim() not in (1, 2):
            raise ValueError(f"RNNCell expects 1-D or 2-D input, got {input_.dim()}-D")
        batched = input_.dim() == 2
        if not batched:
            input_ = input_.unsqueeze(0)
        if hx is None:
            hx = input_.new_zeros(input_.shape[0], self.hidden_size)
        elif not batched:
            hx = hx.unsqueeze(0)
        if tuple(hx.shape) != (input_.shape[0], self.hidden_size):
            raise ValueError(f"hidden state must have shape ({input_.shape[0]}, "
                             f"{self.hidden_size}), got {tuple(hx.shape)}")
        pre = input_ @ self.weight_ih.T + hx @ self.weight_hh.T
        if self.bias:
            pre = pre + self.bias_ih + self.bias_hh
        h = torch.tanh(pre) if self.nonlinearity == "tanh" else torch.relu(pre)
        return h if batched else h.squeeze(0)


class RNNScratch(nn.Module):
    """The RNN model implemented from scratch: H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h)."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__()
        self.num_inputs, self.num_hiddens, self.sigma = num_inputs, num_hiddens, sigma
        self.W_xh = nn.Parameter(torch.randn(num_inputs, num_hiddens) * sigma)
        self.W_hh = nn.Parameter(torch.randn(num_hiddens, num_hiddens) * sigma)
        self.b_h = nn.Parameter(torch.zeros(num_hiddens))

    def forward(self, inputs, state=None):
        if state is None:
            # Initial state with shape (batch_size, num_hiddens)
            state = torch.zeros((inputs.shape[1], self.num_hiddens), device=inputs.device)
        else:
            state, = state
        outputs = []
        for X in inputs:  # inputs: (num_steps, batch_size, num_inputs)
            state = torch.tanh(torch.matmul(X, self.W_xh) + torch.matmul(state, self.W_hh)
                               + self.b_h)
            outputs.append(state)
        return outputs, state


class CharRNNCell(nn.Module):
    """h_t = tanh(W [x_t, h_{t-1}] + b): one linear layer over the concatenated input and state."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.xh_to_h = nn.Linear(input_size + hidden_size, hidden_size)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        return torch.tanh(self.xh_to_h(xh))


class LinearPairRNNCell(nn.Module):
    """h_t = tanh(ih(x_t) + hh(h_{t-1})), each projection an nn.Linear with its own bias."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.ih, self.hh = nn.Linear(input_size, hidden_size), nn.Linear(hidden_size, hidden_size)

    def forward(self, x, state):
        return torch.tanh(self.ih(x) + self.hh(state))


class CustomLSTM(nn.Module):
    """A batch-first LSTM layer: all four gates from x_t @ W + h_{t-1} @ U + bias."""

    def __init__(self, input_sz, hidden_sz):
        super().__init__()
        self.input_sz, self.hidden_size = input_sz, hidden_sz
        self.W = nn.Parameter(torch.Tensor(input_sz, hidden_sz * 4))
        self.U = nn.Parameter(torch.Tensor(hidden_sz, hidden_sz * 4))
        self.bias = nn.Parameter(torch.Tensor(hidden_sz * 4))
        self.init_weights()

    def init_weights(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            weight.data.uniform_(-stdv, stdv)

    def forward(self, x, init_states=None):
        """x: (batch, sequence, feature)."""
        bs, seq_sz, _ = x.size()
        hidden_seq = []
        if init_states is None:
            h_t, c_t = (torch.zeros(bs, self.hidden_size).to(x.device),
                        torch.zeros(bs, self.hidden_size).to(x.device))
        else:
            h_t, c_t = init_states
        HS = self.hidden_size
        for t in range(seq_sz):
            x_t = x[:, t, :]
            gates = x_t @ self.W + h_t @ self.U + self.bias
            i_t, f_t, g_t, o_t = (torch.sigmoid(gates[:, :HS]), torch.sigmoid(gates[:, HS:HS * 2]),
                                  torch.tanh(gates[:, HS * 2:HS * 3]), torch.sigmoid(gates[:, HS * 3:]))
            c_t = f_t * c_t + i_t * g_t
            h_t = o_t * torch.tanh(c_t)
            hidden_seq.append(h_t.unsqueeze(0))
        hidden_seq = torch.cat(hidden_seq, dim=0)
        hidden_seq = hidden_seq.transpose(0, 1).contiguous()  # (sequence, batch, feature) -> batch first
        return hidden_seq, (h_t, c_t)


class TextbookGRUCell(nn.Module):
    """z = sigma(W_z x + U_z h), r = sigma(W_r x + U_r h), h~ = tanh(W_h x + U_h (r * h)),
    h' = (1 - z) h + z h~."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.W_z = nn.Linear(input_size, hidden_size)
        self.U_z = nn.Linear(hidden_size, hidden_size, bias=False)
        self.W_r = nn.Linear(input_size, hidden_size)
        self.U_r = nn.Linear(hidden_size, hidden_size, bias=False)
        self.W_h = nn.Linear(input_size, hidden_size)
        self.U_h = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        z = torch.sigmoid(self.W_z(x) + self.U_z(h))
        r = torch.sigmoid(self.W_r(x) + self.U_r(h))
        h_tilde = torch.tanh(self.W_h(x) + self.U_h(r * h))
        return (1 - z) * h + z * h_tilde
