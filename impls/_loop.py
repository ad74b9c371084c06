"""The recurrence as a loop of torch ops, written once for TorchScript and torch.compile.

Both compile these functions (torchscript.py scripts `run_layer`, compile.py traces
`run_list`), so they use only what both accept: type annotations, `List[Tensor]` states ([h] or
[h, c]), no closures.
The speed-relevant choices, measured on CPU against torch.nn:

- `project_input`: the input projection of every step in one GEMM before the loop ("premul"),
  with the biases that are plain additions folded in;
- the hidden weights are passed transposed and contiguous (`w_hh_t`), so each step's GEMM reads
  them row-major; with parameters stored transposed (`_common.transposed_storage`) that is a
  view, not a copy;
- `run_steps` iterates over `unbind` views, not `xs[t]`: indexing inside an autograd loop makes
  backward quadratic in the sequence length.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def project_input(family: str, x: Tensor, w_ih: Tensor, b_ih: Optional[Tensor],
                  b_hh: Optional[Tensor]) -> Tensor:
    """W_ih x_t + b for every step at once; b is b_ih + b_hh except for the GRU, whose b_hh
    sits inside r * (...) and is added in `step`."""
    if b_ih is None or b_hh is None:
        return F.linear(x, w_ih)
    return F.linear(x, w_ih, b_ih if family == "gru" else b_ih + b_hh)


def step(family: str, gx: Tensor, state: List[Tensor], w_hh_t: Tensor, b_hh: Optional[Tensor],
         w_hr_t: Optional[Tensor], relu: bool) -> List[Tensor]:
    """One time step from the projected input gx (B, G); see reference/numerics.py."""
    h = state[0]
    if family == "rnn":
        pre = torch.addmm(gx, h, w_hh_t)
        return [torch.relu(pre) if relu else torch.tanh(pre)]
    if family == "lstm":
        i, f, g, o = torch.addmm(gx, h, w_hh_t).chunk(4, 1)
        c = torch.sigmoid(f) * state[1] + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        if w_hr_t is not None:
            h = torch.mm(h, w_hr_t)
        return [h, c]
    gh = torch.mm(h, w_hh_t) if b_hh is None else torch.addmm(b_hh, h, w_hh_t)
    x_r, x_z, x_n = gx.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)  # the reset gate scales the hidden term after its matmul
    return [n + z * (h - n)]  # (1 - z) * n + z * h


def run_list(family: str, inputs: List[Tensor], state: List[Tensor], w_hh_t: Tensor,
             b_hh: Optional[Tensor], w_hr_t: Optional[Tensor], relu: bool
             ) -> Tuple[List[Tensor], List[Tensor]]:
    """`step` over the steps' projected inputs in the order given; each step's output and the
    final state."""
    outputs: List[Tensor] = []
    for g in inputs:
        state = step(family, g, state, w_hh_t, b_hh, w_hr_t, relu)
        outputs.append(state[0])
    return outputs, state


def run_steps(family: str, gx: Tensor, state: List[Tensor], w_hh_t: Tensor,
              b_hh: Optional[Tensor], w_hr_t: Optional[Tensor], relu: bool,
              reverse: bool) -> Tuple[Tensor, List[Tensor]]:
    """`step` over gx (T, B, G), from t = T-1 down to 0 if `reverse`; the outputs (T, B, P) in
    time order and the final state."""
    inputs = gx.unbind(0)
    if reverse:
        inputs = inputs[::-1]
    outputs, state = run_list(family, inputs, state, w_hh_t, b_hh, w_hr_t, relu)
    if reverse:
        outputs.reverse()
    return torch.stack(outputs), state


def run_layer(family: str, x: Tensor, state: List[Tensor], w_ih: Tensor, w_hh: Tensor,
              b_ih: Optional[Tensor], b_hh: Optional[Tensor], w_hr: Optional[Tensor],
              relu: bool, reverse: bool) -> Tuple[Tensor, List[Tensor]]:
    """One layer and direction over x (T, B, I): premul, then `run_steps`."""
    gx = project_input(family, x, w_ih, b_ih, b_hh)
    w_hr_t = None if w_hr is None else w_hr.t().contiguous()
    return run_steps(family, gx, state, w_hh.t().contiguous(), b_hh if family == "gru" else None,
                     w_hr_t, relu, reverse)
