"""Intel's OpenVINO runtime (CPU plugin) as torch.nn's RNN / LSTM / GRU and RNNCell / LSTMCell /
GRUCell: each layer (each cell step) one ONNX RNN / LSTM / GRU node, read by OpenVINO's ONNX
frontend (`Core.read_model`), compiled for "CPU" (`Core.compile_model`) and run. Written against
openvino 2026.4.1 (onnx 1.23 builds the graphs).

As a user deploys it: the weights are constants of the graph (as they are in an exported model;
with the weights as graph inputs instead, the CPU plugin leaves its fused RNN node and runs a
TensorIterator of smaller ops), every shape is static (the CPU plugin refuses inputs of dynamic
rank), and `compile_model` gets no configuration. A compiled model is cached per graph (its
configuration, dtypes and the weights' values, so a changed parameter compiles anew) and input
shapes.

Precision: the CPU plugin's default INFERENCE_PRECISION_HINT is bfloat16 on a CPU with
avx512_bf16 or AMX (`Core().get_property("CPU", "INFERENCE_PRECISION_HINT")`; on the AMD EPYC
Zen 5 this was written on: bf16), and it is not overridden here: a float32 model's RNNSeq node
then runs in bf16 (the compiled model's runtime graph says runtimePrecision bf16; errors against
torch of about 3e-3 where f32 gives 1e-7; every output value is a bfloat16 value, and an LSTM's
given c0 is read in bf16 while the c it carries between steps is not, so a sequence run in two
halves differs from the whole). Inputs and outputs stay float32. (OpenVINO documents f32 as
the default on CPUs without bf16; not checked here.) float16 models run the same way (f16 inputs and outputs, bf16 inside).

Layouts (`_onnx_layer`, shared with the ONNX Runtime adapter): W (directions, gates * hidden,
input), R (directions, gates * hidden, hidden), B (directions, 2 * gates * hidden) = [b_ih, b_hh],
LSTM gates reordered from torch's i, f, g, o to ONNX's i, o, f, c, GRU gates from r, z, n to z, r,
h with linear_before_reset=1 (torch's GRU); both directions of a layer in one node; Y (steps,
directions, batch, hidden) back to torch's (steps, batch, directions * hidden) (`TorchLayout`:
time-major, batch axis for unbatched input, layers x directions axis of the state). bias=False
leaves ONNX's optional B out (OpenVINO's zeros). An omitted state is torch's zeros, given as the
initial state. Each tensor keeps its own dtype (weights the parameters', X and the state theirs),
so mixed dtypes reach OpenVINO's frontend as given. A cell is a sequence of one step: X (1, batch,
input), Y_h (and Y_c) its new state.

Seen with 2026.4.1 and left as OpenVINO does it: a bidirectional node given more input features
than W has columns (batch > 1) runs and returns wrong values instead of raising (torch.nn raises);
a forward-only one raises, but oneDNN's "could not create reorder primitive", not a size error.

Initial values are torch.nn's (OpenVINO has no init of its own), so the `init` and
`invalid-arguments` checks judge the adapter, not OpenVINO.

Declared unsupported:
- backward: an inference runtime; the outputs are new tensors with no autograd history;
- float64: the CPU plugin has no f64 kernels: an f64 graph gets Convert nodes to f32 around
  the RNNSeq node (then bf16 by default, as above) and f64 outputs back, so a float64 call
  returns float64 computed in bfloat16 (errors of 3e-3 to 6e-3);
- bfloat16: numpy, through which the tensors cross, has no bfloat16, and ONNX's RNN operators
  take float16, float and double only;
- dropout: ONNX's operators have no dropout between layers (a module built with it raises
  NotImplementedError in training mode with more than one layer; in eval mode it is inert, as
  in torch.nn);
- proj_size: ONNX's LSTM has no projection (the constructor raises NotImplementedError);
- packed: PackedSequence is not translated here (ONNX's sequence_lens exists, but is not wired);
- cuda: the CPU plugin; tensors cross through numpy.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import openvino as ov
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from _onnx_layer import OP, onnx_blocks
from _torch_layout import GATES, TorchLayout, _check_arguments
from rnnbench.impls import Implementation

CORE = ov.Core()
ELEMENT = {np.dtype("float16"): TensorProto.FLOAT16, np.dtype("float32"): TensorProto.FLOAT,
           np.dtype("float64"): TensorProto.DOUBLE}


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def graph(family: str, hidden: int, directions: int, nonlinearity: str,
          weights: dict[str, np.ndarray], feeds: dict[str, np.ndarray]) -> bytes:
    """One ONNX node over `feeds` (graph inputs, each in its own dtype), `weights` (W, R and
    perhaps B) as constants, serialized."""
    attributes = {"hidden_size": hidden,
                  "direction": "bidirectional" if directions == 2 else "forward"}
    if family == "rnn":
        attributes["activations"] = [nonlinearity.capitalize()] * directions
    if family == "gru":
        attributes["linear_before_reset"] = 1
    inputs = ["X", "W", "R", "B" if "B" in weights else "", "", "initial_h"]
    if family == "lstm":
        inputs.append("initial_c")
    outputs = ["Y", "Y_h"] + (["Y_c"] if family == "lstm" else [])
    node = helper.make_node(OP[family], inputs, outputs, **attributes)
    out_type = ELEMENT.get(feeds["X"].dtype, TensorProto.UNDEFINED)
    model = helper.make_model(
        helper.make_graph(
            [node], "layer",
            [helper.make_tensor_value_info(n, ELEMENT.get(a.dtype, TensorProto.UNDEFINED), a.shape)
             for n, a in feeds.items()],
            [helper.make_tensor_value_info(n, out_type, None) for n in outputs],
            [numpy_helper.from_array(a, n) for n, a in weights.items()]),
        opset_imports=[helper.make_opsetid("", 14)])
    return model.SerializeToString()


@lru_cache(maxsize=64)
def compiled(serialized: bytes, shapes: tuple) -> ov.CompiledModel:
    """The ONNX graph read by OpenVINO, its inputs' shapes fixed, compiled for the CPU with
    OpenVINO's defaults."""
    model = CORE.read_model(serialized, b"")
    model.reshape({name: list(shape) for name, shape in shapes})
    return CORE.compile_model(model, "CPU")


def run_node(family, hidden, directions, nonlinearity, w: list[dict], x, state):
    """One ONNX node on numpy copies: w per direction in torch's roles, x (steps, batch, input),
    state (h,) or (h, c) each (directions, batch, hidden). Returns torch tensors Y, Y_h(, Y_c)."""
    weights = {
        "W": np.stack([to_numpy(onnx_blocks(family, wd["weight_ih"])) for wd in w]),
        "R": np.stack([to_numpy(onnx_blocks(family, wd["weight_hh"])) for wd in w]),
    }
    if "bias_ih" in w[0]:
        weights["B"] = np.stack([to_numpy(torch.cat([onnx_blocks(family, wd["bias_ih"]),
                                                     onnx_blocks(family, wd["bias_hh"])]))
                                 for wd in w])
    feeds = {"X": to_numpy(x), "initial_h": to_numpy(state[0])}
    if family == "lstm":
        feeds["initial_c"] = to_numpy(state[1])
    model = compiled(graph(family, hidden, directions, nonlinearity, weights, feeds),
                     tuple((n, a.shape) for n, a in feeds.items()))
    result = model(feeds)
    return [torch.from_numpy(np.array(result[o])) for o in model.outputs]


class OpenVINOLayers(TorchLayout):
    family = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        _check_arguments(input_size, hidden_size, num_layers, nonlinearity, dropout, proj_size)
        if proj_size:
            raise NotImplementedError("ONNX's LSTM has no projection: proj_size is not supported")
        super().__init__(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)

    def forward(self, input, hx=None):
        if self.training and self.dropout > 0 and self.num_layers > 1:
            raise NotImplementedError("OpenVINO's RNN operators have no dropout between layers")
        return super().forward(input, hx)

    def run(self, x, state, layer):
        w = [self.weights(layer, d) for d in range(self.num_directions)]
        y, *finals = run_node(self.family, self.hidden_size, self.num_directions,
                              self.nonlinearity, w, x, state)
        steps, _, batch, _ = y.shape
        return y.transpose(1, 2).reshape(steps, batch, -1), tuple(finals)


class RNN(OpenVINOLayers):
    family = "rnn"


class LSTM(OpenVINOLayers):
    family = "lstm"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(OpenVINOLayers):
    family = "gru"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


class OpenVINOCell(nn.Module):
    """torch.nn's cell over one step of the ONNX node."""

    family = "rnn"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__()
        _check_arguments(input_size, hidden_size, 1, nonlinearity, 0.0, 0)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.nonlinearity = nonlinearity
        rows = GATES[self.family] * hidden_size
        shapes = {"weight_ih": (rows, input_size), "weight_hh": (rows, hidden_size)}
        if bias:
            shapes.update(bias_ih=(rows,), bias_hh=(rows,))
        bound = 1.0 / math.sqrt(hidden_size)  # torch.nn's init: OpenVINO has none
        for role, shape in shapes.items():
            self.register_parameter(role, nn.Parameter(torch.empty(shape).uniform_(-bound, bound).to(
                device=device, dtype=dtype or torch.get_default_dtype())))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"expected 1-D (unbatched) or 2-D input, got {input.dim()}-D")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        count = 2 if self.family == "lstm" else 1
        if hx is None:
            states = tuple(x.new_zeros(x.shape[0], self.hidden_size) for _ in range(count))
        else:
            states = tuple(hx) if count == 2 else (hx,)
            if any(s.dim() != input.dim() for s in states):
                raise RuntimeError(f"expected a {input.dim()}-D state, "
                                   f"got {[tuple(s.shape) for s in states]}")
            if not batched:
                states = tuple(s.unsqueeze(0) for s in states)
        w = {role: p for role, p in self.named_parameters()}
        _, *new = run_node(self.family, self.hidden_size, 1, self.nonlinearity, [w],
                           x.unsqueeze(0), tuple(s.unsqueeze(0) for s in states))
        new = [s[0] if batched else s[0, 0] for s in new]
        return tuple(new) if count == 2 else new[0]


class RNNCell(OpenVINOCell):
    family = "rnn"


class LSTMCell(OpenVINOCell):
    family = "lstm"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


class GRUCell(OpenVINOCell):
    family = "gru"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, "tanh", device, dtype)


IMPLEMENTATION = Implementation(
    name="openvino", kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU, "rnn_cell": RNNCell,
                            "lstm_cell": LSTMCell, "gru_cell": GRUCell},
    unsupported=frozenset({"backward", "float64", "bfloat16", "dropout", "proj_size", "packed",
                           "cuda"}),
    description="OpenVINO CPU plugin running one ONNX RNN/LSTM/GRU node per layer (cells: one "
                "step), weights as constants, default precision hint")
