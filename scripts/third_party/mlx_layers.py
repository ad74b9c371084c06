"""Apple's MLX recurrent layers as torch.nn's RNN / LSTM / GRU: mlx.nn.RNN / LSTM / GRU (one
layer, one direction), run by MLX on the CPU (`mlx[cpu]` on Linux).

What MLX computes (mlx/nn/layers/recurrent.py), and how torch.nn's layout maps onto it:

- all three take batch-first input (N, L, D) or unbatched (L, D), an optional initial state of
  (N, H) (LSTM: `hidden` and `cell`, each optional on its own), and return the state of every
  step, (N, L, H) (LSTM: the hidden and the cell states, both (N, L, H)); there is no separate
  final state. `_torch_layout.TorchLayout` makes the input time-major (and gives unbatched
  input a batch axis); the adapter transposes it to batch-first for MLX and the output back,
  drops the state's layers x directions axis of 1, and takes h_n (and c_n) as the last step of
  the returned states, in torch.
- weights: `Wxh` / `Wx` (gates * H, D) and `Whh` / `Wh` (gates * H, H) are torch.nn's
  weight_ih / weight_hh, untransposed, gate blocks in torch.nn's order (LSTM i, f, g, o; GRU
  r, z, n).
- biases: RNN and LSTM have one, `bias` (gates * H), added to the input projection; torch's two
  are summed into it (b_ih + b_hh). GRU has `b` (3H), added to the input projection, and `bhn`
  (H), added to W_hn h inside the reset gate's product, n = tanh(W_in x + b_n + r * (W_hn h +
  bhn)), as torch.nn's b_hn is: b = b_ih + [b_hr, b_hz, 0], bhn = b_hn. These sums are torch
  ops outside the MLX call, so torch's autograd hands each of torch's biases its gradient.
  bias=False is MLX's bias=False.
- nonlinearity: MLX's RNN takes a callable; 'tanh' is its default (mlx.nn.tanh), 'relu' is
  mlx.nn.relu.
- an omitted state (hx=None) reaches MLX as None (MLX then leaves out the recurrent term at the
  first step; GRU keeps r * bhn); a given state is passed as given, whatever its batch size.

Checked here (as torch.nn raises) is only what is translated: the constructor's arguments and
the ranks of input and state and the state's layers x directions axis (TorchLayout). Feature
sizes, dtypes and batch sizes of input and state reach MLX as torch gives them, so MLX's own
broadcasting, type promotion and errors stay visible.

torch <-> MLX goes through numpy with the dtype named explicitly (`mx.array` of a float64 numpy
array is float32 unless told); numpy has no bfloat16, so a bfloat16 tensor crosses as float32
and is cast by MLX (`astype(mx.bfloat16)`) and back by torch, both exact. MLX computes float64
on the CPU (its float64 sigmoid and exp are right to about float32's accuracy only; left as
MLX computes them). A fresh MLX layer is built for every call and its parameters replaced by the
adapter's (`Module.update`), so each call computes only on the values it was given.

Initial values are MLX's own (every tensor U(-1/sqrt(H), 1/sqrt(H)), drawn in float32 by
`mx.random.uniform`), drawn by an MLX layer built at construction with MLX's generator seeded
(`mx.random.seed`) from torch's, so torch.manual_seed fixes them; MLX's single bias goes to
bias_ih and bias_hh holds zeros, except the GRU's b_hn, which is MLX's `bhn`.

Backward: a torch.autograd.Function runs MLX in forward and, in backward, MLX's reverse mode
(`mx.vjp`, which runs the layer again) gives the gradients of the input, the given state and
MLX's parameters for torch's output gradients; no double backward.

Declared unsupported (MLX's layers have none of these): num_layers > 1, bidirectional,
proj_size, dropout (torch.nn's acts between layers), packed (no PackedSequence), cuda (MLX's
Linux CPU build; tensors cross through numpy). The constructor raises NotImplementedError for
the first three; dropout > 0 with one layer is accepted, as torch.nn accepts it (it drops
nothing there).
"""
from __future__ import annotations

import mlx.core as mx
import mlx.nn as mlx_nn
import numpy as np
import torch
from torch.autograd.function import once_differentiable

from _torch_layout import TorchLayout, _check_arguments
from rnnbench.impls import Implementation

LAYERS = {"rnn": mlx_nn.RNN, "lstm": mlx_nn.LSTM, "gru": mlx_nn.GRU}
# MLX's parameter names for torch.nn's weight_ih, weight_hh and the (first) bias.
NAMES = {"rnn": ("Wxh", "Whh", "bias"), "lstm": ("Wx", "Wh", "bias"), "gru": ("Wx", "Wh", "b")}


def to_mlx(tensor: torch.Tensor):
    """An MLX copy of `tensor` in its own dtype."""
    array = tensor.detach().cpu()
    if array.dtype == torch.bfloat16:
        return mx.array(array.float().numpy(), dtype=mx.float32).astype(mx.bfloat16)
    return mx.array(array.numpy(), dtype=getattr(mx, str(array.dtype).removeprefix("torch.")))


def to_torch(array) -> torch.Tensor:
    """A torch copy of an MLX array in its own dtype."""
    if array.dtype == mx.bfloat16:
        return torch.from_numpy(np.array(array.astype(mx.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.array(array))


def seed_mlx():
    """MLX's generator, seeded from torch's."""
    mx.random.seed(int(torch.randint(2 ** 31 - 1, ()).item()))


class _MLXCall(torch.autograd.Function):
    """`fun(MLX arrays) -> MLX arrays` on MLX copies of the tensors given; backward is mx.vjp
    of `fun` with torch's output gradients as cotangents."""

    @staticmethod
    def forward(ctx, fun, *tensors):
        arrays = [to_mlx(t) for t in tensors]
        outputs = fun(*arrays)
        mx.eval(outputs)
        ctx.mlx = (fun, arrays) if any(ctx.needs_input_grad[1:]) else None
        return tuple(to_torch(o) for o in outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        fun, arrays = ctx.mlx
        _, vjps = mx.vjp(fun, arrays, [to_mlx(g) for g in grads])
        needs = ctx.needs_input_grad[1:]
        return (None, *(to_torch(v) if need else None for v, need in zip(vjps, needs)))


class MLXLayer(TorchLayout):
    """torch.nn's RNN / LSTM / GRU over one MLX layer of `family`."""

    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        # torch.nn's refusals first, so an invalid argument raises as torch.nn does. dropout
        # acts between layers only, so with the one layer MLX has it changes nothing and is
        # accepted, as torch.nn accepts it.
        _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size)
        if num_layers > 1:
            raise NotImplementedError("mlx.nn layers have one layer: num_layers > 1 is not supported")
        if bidirectional:
            raise NotImplementedError("mlx.nn layers have one direction: bidirectional is not supported")
        if proj_size:
            raise NotImplementedError("mlx.nn.LSTM has no projection: proj_size is not supported")
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def build(self, input_size: int):
        """An MLX layer of this configuration (it draws MLX's initial values)."""
        options = dict(bias=self.bias)
        if self.family == "rnn":
            options["nonlinearity"] = mlx_nn.relu if self.nonlinearity == "relu" else None
        return LAYERS[self.family](input_size, self.hidden_size, **options)

    def initial(self, layer, direction, shapes):
        seed_mlx()
        built = self.build(shapes["weight_ih"][1])
        w_ih, w_hh, b = NAMES[self.family]
        values = {"weight_ih": to_torch(getattr(built, w_ih)),
                  "weight_hh": to_torch(getattr(built, w_hh))}
        if self.bias:
            first = to_torch(getattr(built, b))
            hidden = torch.zeros_like(first)
            if self.family == "gru":
                hidden[2 * self.hidden_size:] = to_torch(built.bhn)
            values.update(bias_ih=first, bias_hh=hidden)
        return values

    def mlx_values(self, w: dict) -> dict[str, torch.Tensor]:
        """MLX's parameters, by MLX's names, from torch.nn's (torch ops, so differentiable)."""
        w_ih, w_hh, b = NAMES[self.family]
        values = {w_ih: w["weight_ih"], w_hh: w["weight_hh"]}
        if self.bias:
            if self.family == "gru":
                rz = 2 * self.hidden_size
                values[b] = w["bias_ih"] + torch.cat(
                    [w["bias_hh"][:rz], w["bias_hh"].new_zeros(self.hidden_size)])
                values["bhn"] = w["bias_hh"][rz:]
            else:
                values[b] = w["bias_ih"] + w["bias_hh"]
        return values

    def initial_state(self, hx, x, batched):
        # An omitted state stays omitted: MLX's own handling of None is what is judged.
        return () if hx is None else super().initial_state(hx, x, batched)

    def run(self, x, state, layer):
        values = self.mlx_values(self.weights(layer, 0))
        names = list(values)
        module = self.build(self.input_size)  # its initial values are replaced in `fun`
        given = len(state)

        def fun(x, *rest):
            states, params = rest[:given], rest[given:]
            module.update(dict(zip(names, params)))
            # Only the state's layers x directions axis is dropped; its other axes are MLX's.
            out = module(x, *(s[0] for s in states))
            return list(out) if self.family == "lstm" else [out]

        # MLX is batch-first: time-major (L, N, D) in, (N, L, H) back.
        steps = _MLXCall.apply(fun, x.transpose(0, 1), *state, *values.values())
        output = steps[0].transpose(0, 1)
        # MLX returns every step's state; torch's final state is the last step's.
        return output, tuple(s[:, -1].unsqueeze(0) for s in steps)


class RNN(MLXLayer):
    family = "rnn"


class LSTM(MLXLayer):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(MLXLayer):
    family = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


IMPLEMENTATION = Implementation(
    name="mlx", kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU},
    unsupported=frozenset({"num_layers", "bidirectional", "proj_size", "dropout", "packed",
                           "cuda"}),
    description="mlx.nn.RNN / LSTM / GRU (CPU), one layer, one direction")
