"""One torch.nn layer as one ONNX RNN / LSTM / GRU node: the graph, and torch's weights in ONNX's
layout. Shared by the ONNX reference runtime's and ONNX Runtime's adapters, which differ only
in what runs the graph.

ONNX's conventions: W (directions, gates * hidden, input), R (directions, gates * hidden,
hidden), B (directions, 2 * gates * hidden) = [Wb, Rb]; LSTM gates i, o, f, c (torch i, f, g,
o); GRU gates z, r, h (torch r, z, n) with linear_before_reset=1, torch's GRU; Y (steps,
directions, batch, hidden), Y_h and Y_c (directions, batch, hidden).
"""
from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from _torch_layout import TorchLayout

OP = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
# For each ONNX gate block, the index of torch's block it comes from.
TORCH_BLOCK = {"rnn": (0,), "lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}
ELEMENT = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float64"): TensorProto.DOUBLE}


def layer_model(family: str, hidden: int, directions: int, nonlinearity: str,
                dtype: np.dtype) -> onnx.ModelProto:
    """A graph of one node whose every tensor (weights and state too) is a graph input."""
    element = ELEMENT[np.dtype(dtype)]
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h"] + (["initial_c"] if family == "lstm" else [])
    outputs = ["Y", "Y_h"] + (["Y_c"] if family == "lstm" else [])
    attributes = {"hidden_size": hidden,
                  "direction": "bidirectional" if directions == 2 else "forward"}
    if family == "rnn":
        attributes["activations"] = [nonlinearity.capitalize()] * directions
    if family == "gru":
        attributes["linear_before_reset"] = 1
    node = helper.make_node(OP[family], [n if n != "sequence_lens" else "" for n in names],
                            outputs, **attributes)
    inputs = [helper.make_tensor_value_info(n, element, None) for n in names if n != "sequence_lens"]
    graph = helper.make_graph([node], "layer", inputs,
                              [helper.make_tensor_value_info(n, element, None) for n in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def onnx_blocks(family: str, tensor: torch.Tensor) -> torch.Tensor:
    """torch's stacked gate blocks (rows) in ONNX's gate order."""
    blocks = tensor.chunk(len(TORCH_BLOCK[family]), dim=0)
    return torch.cat([blocks[i] for i in TORCH_BLOCK[family]], dim=0)


class OnnxLayers(TorchLayout):
    """Runs each layer as one ONNX node through `self.evaluate(model, feeds) -> outputs`."""

    def evaluate(self, model, feeds: dict) -> list[np.ndarray]:
        raise NotImplementedError

    def run(self, x, state, layer):
        dtype = x.detach().numpy().dtype
        w = [self.weights(layer, d) for d in range(self.num_directions)]
        rows = 2 * len(TORCH_BLOCK[self.family]) * self.hidden_size

        def stacked(make):
            return np.stack([make(wd).detach().numpy() for wd in w]).astype(dtype)

        feeds = {
            "X": x.detach().numpy(),
            "W": stacked(lambda wd: onnx_blocks(self.family, wd["weight_ih"])),
            "R": stacked(lambda wd: onnx_blocks(self.family, wd["weight_hh"])),
            "B": (stacked(lambda wd: torch.cat([onnx_blocks(self.family, wd["bias_ih"]),
                                                onnx_blocks(self.family, wd["bias_hh"])]))
                  if self.bias else np.zeros((self.num_directions, rows), dtype)),
            "initial_h": state[0].detach().numpy(),
        }
        if self.family == "lstm":
            feeds["initial_c"] = state[1].detach().numpy()
        model = layer_model(self.family, self.hidden_size, self.num_directions, self.nonlinearity,
                            dtype)
        y, *finals = self.evaluate(model, feeds)
        steps, _, batch, hidden = y.shape
        output = torch.from_numpy(np.ascontiguousarray(
            y.transpose(0, 2, 1, 3).reshape(steps, batch, -1)))
        return output, tuple(torch.from_numpy(np.ascontiguousarray(f)) for f in finals)
