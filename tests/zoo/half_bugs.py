"""Planted bugs confined to the half-precision path: float32 and float64 are right, so only the
bfloat16/float16 rows of the numeric checks can see them."""
import torch

from _base import GRU, RNN

HALF = (torch.float16, torch.bfloat16)


class GRUFloat16StepInBfloat16(GRU):
    """float16 steps computed in bfloat16 (as code that takes "half" to mean bfloat16 does), the
    result cast back: the float16 module is only as accurate as a bfloat16 one."""

    def step(self, x, state, w):
        if x.dtype != torch.float16:
            return super().step(x, state, w)
        low = lambda t: t.to(torch.bfloat16)  # noqa: E731
        result = super().step(low(x), tuple(map(low, state)), {k: low(v) for k, v in w.items()})
        return tuple(t.to(torch.float16) for t in result)


class RNNHalfTanhApproximated(RNN):
    """In half precision, tanh by its [3/2] Pade approximant x(27 + x^2) / (27 + 9x^2), clamped
    to [-1, 1] (a fast-math shortcut: off by up to about 0.02 near |x| = 1.5)."""

    def activation(self, z):
        if z.dtype not in HALF or self.nonlinearity != "tanh":
            return super().activation(z)
        return (z * (27 + z * z) / (27 + 9 * z * z)).clamp(-1, 1)
