"""numpy-ml (numpy_ml.neural_nets.layers, pure numpy) as torch.nn's RNN and LSTM: each layer one
numpy-ml `RNNCell` / `LSTMCell`, stepped over time on numpy copies of the adapter's parameters.
numpy-ml's own `RNN` / `LSTM` layers are not used: in 0.1.2 neither can be built (LayerBase sets
`self.gradients`, a read-only property there, and `_init_params` passes the cells an `n_in` they
do not take).

Layouts: RNNCell computes A @ Waa + ba.T + X @ Wax + bx.T, so Wax is torch's weight_ih
transposed, Waa weight_hh transposed, bx bias_ih and ba bias_hh as (hidden, 1) columns.
LSTMCell multiplies [A_prev, X] by one (hidden + input, hidden) matrix per gate, rows of the
state first; its gates Wu, Wf, Wc, Wo (update, forget, candidate, output) are torch's blocks
i, f, g, o, and it has one (1, hidden) bias per gate (torch's two are summed into it). Without a
bias the cells get zeros. nonlinearity is the RNNCell's act_fn ("Tanh" / "ReLU"). A cell keeps
its state in `derived_variables["A"]` (and "C"), starts from its own zeros when that is empty, and
is emptied with `flush_gradients`: a given hx is put there, an omitted one leaves the library's
zeros. Outputs come back in the dtype numpy computed them in. Initial values are numpy-ml's own
(glorot uniform with the activation's gain, drawn from numpy's global generator; zero biases).
Layers are stacked as torch.nn stacks them; numpy-ml has no dropout between them, no reverse
direction and no projection. Declared unsupported: backward (numpy, no autograd), cuda,
bfloat16 (no numpy dtype), dropout, bidirectional, proj_size.

numpy-ml 0.1.2 does not import on Python >= 3.10 (`from collections import Hashable` in
numpy_ml.utils); the alias it needs is restored before the import, nothing else is patched.
"""
import collections
import collections.abc
import warnings

import numpy as np
import torch

from _torch_layout import TorchLayout
from rnnbench.impls import Implementation

if not hasattr(collections, "Hashable"):
    collections.Hashable = collections.abc.Hashable
with warnings.catch_warnings():  # numpy_ml.rl_models warns that gym is missing
    warnings.simplefilter("ignore")
    from numpy_ml.neural_nets.layers import LSTMCell, RNNCell

# torch's LSTM gate block k is numpy-ml's gate LSTM_GATES[k].
LSTM_GATES = ("u", "f", "c", "o")


class NumpyMLCells(TorchLayout):
    def cell(self, layer: int):
        """The numpy-ml cell of `layer`, initialized by the library on its first forward."""
        cells = self.__dict__.setdefault("_cells", {})
        if layer not in cells:
            if self.family == "rnn":
                built = RNNCell(self.hidden_size, act_fn={"tanh": "Tanh", "relu": "ReLU"}[self.nonlinearity])
            else:
                built = LSTMCell(self.hidden_size)
            below = self.input_size if layer == 0 else self.hidden_size
            built.forward(np.zeros((1, below)))
            built.flush_gradients()
            cells[layer] = built
        return cells[layer]

    def initial(self, layer, direction, shapes):
        p, H = self.cell(layer).parameters, self.hidden_size
        if self.family == "rnn":
            values = {"weight_ih": p["Wax"].T, "weight_hh": p["Waa"].T,
                      "bias_ih": p["bx"].ravel(), "bias_hh": p["ba"].ravel()}
        else:
            W = [p["W" + g] for g in LSTM_GATES]
            values = {"weight_ih": np.concatenate([w[H:].T for w in W]),
                      "weight_hh": np.concatenate([w[:H].T for w in W]),
                      "bias_ih": np.concatenate([p["b" + g].ravel() for g in LSTM_GATES]),
                      "bias_hh": np.zeros(4 * H)}
        values = {k: torch.as_tensor(np.ascontiguousarray(v)) for k, v in values.items()}
        return values if self.bias else {k: v for k, v in values.items() if k.startswith("weight")}

    def library_parameters(self, layer: int) -> dict:
        w = {k: v.detach().cpu().numpy() for k, v in self.weights(layer, 0).items()}
        zeros = np.zeros(w["weight_ih"].shape[0], dtype=w["weight_ih"].dtype)
        b_ih, b_hh = w.get("bias_ih", zeros), w.get("bias_hh", zeros)
        if self.family == "rnn":
            return {"Wax": w["weight_ih"].T, "Waa": w["weight_hh"].T,
                    "bx": b_ih[:, None], "ba": b_hh[:, None]}
        H, blocks = self.hidden_size, np.split(np.arange(4 * self.hidden_size), 4)
        params = {}
        for gate, rows in zip(LSTM_GATES, blocks):
            params["W" + gate] = np.concatenate([w["weight_hh"][rows].T, w["weight_ih"][rows].T])
            params["b" + gate] = (b_ih + b_hh)[rows][None, :]
        return params

    def initial_state(self, hx, x, batched):
        # An omitted state stays omitted: the cell starts from its own zeros.
        return () if hx is None else super().initial_state(hx, x, batched)

    def run(self, x, state, layer):
        cell = self.cell(layer)
        cell.flush_gradients()
        cell.parameters.update(self.library_parameters(layer))
        for name, value in zip("AC", state):
            cell.derived_variables[name].append(value.squeeze(0).detach().cpu().numpy())
        steps = [cell.forward(xt) for xt in x.detach().cpu().numpy()]
        if self.family == "rnn":
            outputs, finals = steps, (steps[-1],)
        else:
            outputs, finals = [a for a, _ in steps], steps[-1]
        return (torch.from_numpy(np.stack(outputs)),
                tuple(torch.from_numpy(np.asarray(f))[None] for f in finals))


class RNN(NumpyMLCells):
    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class LSTM(NumpyMLCells):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


IMPLEMENTATION = Implementation(
    name="numpy-ml", kinds={"rnn": RNN, "lstm": LSTM},
    unsupported=frozenset({"backward", "cuda", "bfloat16", "dropout", "bidirectional", "proj_size"}),
    description="numpy_ml.neural_nets.layers.RNNCell / LSTMCell (numpy), one per layer")
