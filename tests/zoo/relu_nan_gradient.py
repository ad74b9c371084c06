"""The ReLU gradient where the pre-activation is NaN: the float64 reference against torch.nn.

    .venv/bin/python tests/zoo/relu_nan_gradient.py

An Elman cell with relu, no bias, W_ih = [[1]], W_hh = [[2]], x = [[nan]], h0 = [[1]]: the
pre-activation is nan. torch passes the output gradient through there (its relu backward zeroes
it only where the result is <= 0, and nan <= 0 is false); a reference that masks with
`pre > 0` zeroes it. Prints both gradients w.r.t. h0 and whether they agree.
"""
import numpy as np
import torch

from rnnbench.reference import Config
from rnnbench.reference.numerics import backward

cfg = Config("rnn_cell", 1, 1, nonlinearity="relu", bias=False)
params = {"weight_ih": np.array([[1.0]]), "weight_hh": np.array([[2.0]])}
x, h0, grad_out = np.array([[np.nan]]), np.array([[1.0]]), np.array([[1.0]])

reference = backward(cfg, params, x, h0, grad_out)["hx"]

cell = torch.nn.RNNCell(1, 1, bias=False, nonlinearity="relu", dtype=torch.float64)
with torch.no_grad():
    cell.weight_ih.fill_(1.0)
    cell.weight_hh.fill_(2.0)
hx = torch.tensor(h0, requires_grad=True)
cell(torch.tensor(x), hx).backward(torch.tensor(grad_out))

print(f"d h0, reference: {reference.ravel()[0]}")
print(f"d h0, torch:     {hx.grad.numpy().ravel()[0]}")
print("agree" if np.array_equal(reference, hx.grad.numpy(), equal_nan=True) else "DIFFER")
