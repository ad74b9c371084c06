"""The from-scratch exercise's Elman RNN, as its approach describes it, and one version per pitfall
the exercise itself lists.

The exercise asks for an "interview-friendly" class that is not a torch.nn.Module: constructor
`(input_size, hidden_size)`, four tensors created with requires_grad (`W_ih` (hidden, input),
`W_hh`, `b_ih`, `b_hh`) drawn from U(-k, k) with k = 1/sqrt(hidden_size), and
`__call__(x, h0=None)` taking a time-major (seq_len, batch, input) sequence and an h0 of shape
(1, batch, hidden), returning (output (seq_len, batch, hidden), h_n (1, batch, hidden)). It
assumes valid inputs and validates nothing.

`ExerciseRNN.__call__` follows the approach step by step; each step a student could get wrong is a
one-line method, so that every pitfall below is a subclass that writes exactly that line the
student's way and nothing else (see seed_catalogue.py for what rnnbench should say about each).
"""
from __future__ import annotations

import math

import torch


class ExerciseRNN:
    """A minimal Elman RNN: h_t = tanh(x_t @ W_ih.T + b_ih + h_{t-1} @ W_hh.T + b_hh)."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        self.input_size = input_size
        self.hidden_size = hidden_size
        k = 1.0 / math.sqrt(hidden_size)
        self.W_ih = self.init_weight((hidden_size, input_size), k)
        self.W_hh = self.init_weight((hidden_size, hidden_size), k)
        self.b_ih = self.init_weight((hidden_size,), k)
        self.b_hh = self.init_weight((hidden_size,), k)

    def init_weight(self, shape, k: float) -> torch.Tensor:
        return torch.empty(shape).uniform_(-k, k).requires_grad_(True)

    def __call__(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        seq_len, batch, _ = x.shape
        h = self.initial_hidden(h0, batch, x)
        outputs = []
        for t in self.time_steps(seq_len):
            h = self.cell(x[t], h)
            outputs.append(h)
        output = torch.stack(outputs, dim=0)
        return output, self.final_hidden(h)

    def initial_hidden(self, h0, batch: int, x: torch.Tensor) -> torch.Tensor:
        if h0 is None:
            h0 = torch.zeros(1, batch, self.hidden_size, dtype=x.dtype, device=x.device)
        return h0.squeeze(0)

    def time_steps(self, seq_len: int):
        return range(seq_len)

    def cell(self, x_t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x_t @ self.W_ih.T + self.b_ih + h @ self.W_hh.T + self.b_hh)

    def final_hidden(self, h: torch.Tensor) -> torch.Tensor:
        return h.unsqueeze(0)


class ExerciseH0NoneUnhandled(ExerciseRNN):
    """Pitfall: forgetting to handle h0=None."""

    def initial_hidden(self, h0, batch, x):
        return h0.squeeze(0)


class ExerciseWrongDims(ExerciseRNN):
    """Pitfall: wrong matrix dimensions. The square W_hh is used untransposed, so it still runs."""

    def cell(self, x_t, h):
        return torch.tanh(x_t @ self.W_ih.T + self.b_ih + h @ self.W_hh + self.b_hh)


class ExerciseNoUnsqueeze(ExerciseRNN):
    """Pitfall: h_n returned as (batch, hidden), without the leading dimension of 1."""

    def final_hidden(self, h):
        return h


class ExerciseNoTanh(ExerciseRNN):
    """Pitfall: no tanh, the recurrence left linear."""

    def cell(self, x_t, h):
        return x_t @ self.W_ih.T + self.b_ih + h @ self.W_hh.T + self.b_hh


class ExerciseRandnInit(ExerciseRNN):
    """Pitfall: weights from torch.randn instead of U(-k, k)."""

    def init_weight(self, shape, k):
        return torch.randn(shape, requires_grad=True)


class ExerciseTimeReversed(ExerciseRNN):
    """Pitfall: the sequence processed from the last step to the first (outputs appended in the
    order they were computed, so output[-1] is still h_n)."""

    def time_steps(self, seq_len):
        return reversed(range(seq_len))
