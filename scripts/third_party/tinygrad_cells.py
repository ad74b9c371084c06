"""tinygrad's one recurrent module, tinygrad.nn.LSTMCell (tinygrad 0.14.0), as torch.nn.LSTMCell.
tinygrad has no RNNCell, GRUCell or sequence layers (nothing recurrent in tinygrad.nn but
LSTMCell), so this adapter provides the lstm_cell kind only.

What tinygrad computes (tinygrad/nn/__init__.py): weight_ih (4H, D), weight_hh (4H, H), bias_ih,
bias_hh (4H) in torch.nn's names, shapes and gate order i, f, g, o; gates = x.linear(W_ih.T, b_ih)
+ h.linear(W_hh.T, b_hh); c' = f * c + i * g, h' = o * tanh(c'). With hc=None it starts from
zeros of the input's dtype. The adapter passes no layout change: each call builds a tinygrad
LSTMCell, puts tinygrad copies of torch's four tensors (NumPy; bfloat16 through float32 and
tinygrad's cast, exact) in place of its own, and calls it with the input and (h, c) or None
as given. It adds only a batch axis to unbatched input (and its state), as torch.nn does;
tinygrad's cell needs a batch (it chunks dim 1), so the ranks are checked here.

Device: tinygrad's CPU device needs clang (absent here; it compiles its kernels with it), so
the adapter sets DEV=PYTHON unless DEV is given: tinygrad's own Python interpreter of the same
kernels (slow, exact to the dtype).

Initial values are tinygrad's own: weights U(-1/sqrt(H), 1/sqrt(H)) by tinygrad's generator
(seeded from torch's via Tensor.manual_seed, so torch.manual_seed fixes them), biases zeros
(tinygrad's choice; torch.nn draws them from the same uniform).

Backward: a torch.autograd.Function runs the cell with requires_grad on its inputs and weights;
backward is tinygrad's reverse mode (`Tensor.gradient` of sum(h * dh) + sum(c * dc)); no double
backward.

Declared unsupported: cuda (tensors cross through NumPy).
"""
from __future__ import annotations

import os

os.environ.setdefault("DEV", "PYTHON")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tinygrad import Tensor, dtypes  # noqa: E402
from tinygrad.nn import LSTMCell as TinyLSTMCell  # noqa: E402
from torch import nn  # noqa: E402
from torch.autograd.function import once_differentiable  # noqa: E402

from _torch_layout import _check_arguments  # noqa: E402
from rnnbench.impls import Implementation  # noqa: E402

ROLES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def to_tiny(tensor: torch.Tensor) -> Tensor:
    array = tensor.detach().cpu()
    if array.dtype == torch.bfloat16:
        return Tensor(array.float().numpy()).cast(dtypes.bfloat16)
    return Tensor(np.ascontiguousarray(array.numpy()))


def to_torch(tensor: Tensor) -> torch.Tensor:
    if tensor.dtype == dtypes.bfloat16:
        return torch.from_numpy(tensor.cast(dtypes.float32).numpy().copy()).bfloat16()
    return torch.from_numpy(tensor.numpy().copy())


class _TinyCall(torch.autograd.Function):
    """(h', c') = one call of a tinygrad LSTMCell on tinygrad copies of (x, [h, c], weights)."""

    @staticmethod
    def forward(ctx, roles, has_state, *tensors):
        x, rest = to_tiny(tensors[0]), [to_tiny(t) for t in tensors[1:]]
        state, weights = (rest[:2], rest[2:]) if has_state else (None, rest)
        grad = any(ctx.needs_input_grad[2:])
        leaves = [x, *(state or []), *weights]
        if grad:
            for leaf in leaves:
                leaf.requires_grad = True
        cell = TinyLSTMCell(int(x.shape[1]), int(weights[0].shape[0]) // 4, bias="bias_ih" in roles)
        for role, value in zip(roles, weights):
            setattr(cell, role, value)
        h, c = cell(x, tuple(state) if state else None)
        ctx.tiny = (leaves, h, c) if grad else None
        return to_torch(h), to_torch(c)

    @staticmethod
    @once_differentiable
    def backward(ctx, dh, dc):
        leaves, h, c = ctx.tiny
        total = (h * to_tiny(dh)).sum() + (c * to_tiny(dc)).sum()
        found = total.gradient(*leaves)
        return (None, None, *(to_torch(g) for g in found))


class LSTMCell(nn.Module):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, 1, "tanh", 0.0, 0)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        Tensor.manual_seed(int(torch.randint(2 ** 31 - 1, ()).item()))
        initial = TinyLSTMCell(input_size, hidden_size, bias=bias)
        for role in ROLES if bias else ROLES[:2]:
            self.register_parameter(role, nn.Parameter(to_torch(getattr(initial, role)).to(
                device=device, dtype=dtype or torch.get_default_dtype())))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        state = ()
        if hx is not None:
            state = tuple(hx)
            if any(s.dim() != input.dim() for s in state):
                raise RuntimeError(f"expected a {input.dim()}-D state, got "
                                   f"{[tuple(s.shape) for s in state]}")
            state = state if batched else tuple(s.unsqueeze(0) for s in state)
        roles = tuple(role for role in ROLES if hasattr(self, role))
        h, c = _TinyCall.apply(roles, bool(state), x, *state,
                               *(getattr(self, role) for role in roles))
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


IMPLEMENTATION = Implementation(
    name="tinygrad", kinds={"lstm_cell": LSTMCell}, unsupported=frozenset({"cuda"}),
    description="tinygrad.nn.LSTMCell (tinygrad's PYTHON device here)")
