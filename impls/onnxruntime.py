"""onnxruntime: torch.nn's modules running forward through ONNX Runtime's RNN, LSTM and GRU
operators — the inference engine most exported RNN models run on, as a peer to compare with.

The modules are `_common`'s (torch.nn's signatures, parameter names, init, input checks and
exceptions); the whole stack of layers is one ONNX graph, built with `onnx.helper`, one operator
node per layer (both directions in one node), and run by an `onnxruntime.InferenceSession`:

- torch's parameters become the operators' inputs W [D, G*H, I], R [D, G*H, H] and
  B [D, 2*G*H] = [Wb, Rb], gate blocks reordered (LSTM i,o,f,c from torch's i,f,g,o; GRU z,r,h
  from r,z,n, with linear_before_reset=1, which is torch's GRU); they are converted again only
  when a parameter changed (another tensor, or its version counter moved: load_state_dict,
  optimizer steps and in-place updates under no_grad all count; an in-place change through
  `.data` does not, as it leaves the version counter alone);
- a layer's output Y [T, D, N, H] becomes the next layer's input [T, N, D*H] inside the graph;
- batch and sequence length are dynamic, so one session serves every input size. Sessions are
  built on first use per (configuration, thread count) and shared by all modules: the thread
  count is torch.get_num_threads() at call time, as for every other implementation;
- cells run as sequences of one step.

Not supported, and why (declared, so the suite reports them as not supported):
- float64, float16, bfloat16: ONNX Runtime's CPU kernels of these operators are float32 only;
- backward: ONNX Runtime computes no gradients (differentiating an output raises);
- dropout in training and proj_size: the ONNX operators have neither;
- batch_first: ONNX Runtime refuses the operators' batch-major layout (layout=1), so a batch-first
  input is transposed in torch, a copy that is not ONNX Runtime's; it runs, but is not timed;
- cuda: only the CPU execution provider is wired up.
ONNX Runtime raises its own exception types; whatever it raises leaves here as RuntimeError.
"""
from __future__ import annotations

import functools
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from rnnbench.impls._common import Backend, State, Weights, module_classes
from rnnbench.impls.base import Implementation
from rnnbench.reference import Config

try:
    import onnx
    import onnxruntime
    from onnxruntime.capi import onnxruntime_pybind11_state
except ImportError as missing:  # the module stays importable; availability() says why
    onnx = onnxruntime = None
    MISSING = missing.name
    ORT_ERRORS: tuple[type, ...] = ()
else:
    MISSING = None
    # Every exception type ONNX Runtime's binding defines (Fail, InvalidArgument, ...); each
    # derives from Exception directly and their set differs between versions.
    ORT_ERRORS = tuple(value for value in vars(onnxruntime_pybind11_state).values()
                       if isinstance(value, type) and issubclass(value, Exception))

OPERATORS = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
# ONNX's gate blocks, as indices of torch's: LSTM i,o,f,c from i,f,g,o; GRU z,r,h from r,z,n.
GATE_ORDER = {"rnn": (0,), "lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}
# Opset 18: Split's num_outputs and Squeeze's axes input; IR version 8 is the one opset 18 needs.
OPSET, IR_VERSION = 18, 8
STATE_NAMES = {"rnn": ("h0",), "gru": ("h0",), "lstm": ("h0", "c0")}
FINAL_NAMES = {"rnn": ("h_n",), "gru": ("h_n",), "lstm": ("h_n", "c_n")}


def availability() -> str | None:
    if MISSING is not None:
        return (f"needs the {MISSING} package, which is not installed "
                "(pip install 'rnnbench[onnxruntime]')")
    return None


@dataclass(frozen=True)
class Graph:
    """What one ONNX graph computes, and so one session's key (with the thread count):
    `initial_state` whether h0 (and c0) are inputs, `sequence_output` whether the top layer's
    output is (cells need only the final state)."""

    family: str
    input_size: int
    hidden_size: int
    num_layers: int = 1
    directions: int = 1
    relu: bool = False
    bias: bool = True
    initial_state: bool = True
    sequence_output: bool = True

    @property
    def gates(self) -> int:
        return len(GATE_ORDER[self.family])

    def weight_names(self, layer: int) -> tuple[str, ...]:
        """The operator's weight inputs of `layer`: W, R and, with bias, B."""
        return (f"W{layer}", f"R{layer}", f"B{layer}")[:3 if self.bias else 2]


def model(graph: Graph) -> bytes:
    """The serialized ONNX model of `graph`: inputs `input` [T, N, I], h0 (and c0)
    [L*D, N, H] when `initial_state`, every layer's weights; outputs `output` [T, N, D*H] when
    `sequence_output`, and h_n (and c_n) [L*D, N, H]."""
    helper, H, D, L = onnx.helper, graph.hidden_size, graph.directions, graph.num_layers
    rows = graph.gates * H
    states, finals = STATE_NAMES[graph.family], FINAL_NAMES[graph.family]

    def tensor(name, shape):
        return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)

    inputs = [tensor("input", ["steps", "batch", graph.input_size])]
    nodes, constants = [], {}  # constants by name: layers share them
    if graph.initial_state:
        inputs += [tensor(name, [L * D, "batch", H]) for name in states]
        if L > 1:  # each layer's slice of the initial state
            nodes += [helper.make_node("Split", [name], [f"{name}_{k}" for k in range(L)], axis=0,
                                       num_outputs=L) for name in states]
    attributes = {"hidden_size": H, "direction": "bidirectional" if D == 2 else "forward"}
    if graph.relu:
        attributes["activations"] = ["Relu"] * D
    if graph.family == "gru":
        attributes["linear_before_reset"] = 1
    x = "input"
    for layer in range(L):
        width = graph.input_size if layer == 0 else D * H
        weights = graph.weight_names(layer)
        inputs += [tensor(name, shape) for name, shape in
                   zip(weights, ([D, rows, width], [D, rows, H], [D, 2 * rows]))]
        initial = [(name if L == 1 else f"{name}_{layer}") if graph.initial_state else ""
                   for name in states]
        top = layer == L - 1
        y = f"y{layer}" if not top or graph.sequence_output else ""
        outs = [name if L == 1 else f"{name}{layer}" for name in finals]
        nodes.append(helper.make_node(OPERATORS[graph.family],
                                      [x, *weights[:2], weights[2] if graph.bias else "", "",
                                       *initial], [y, *outs], **attributes))
        if y:
            x = "output" if top else f"x{layer + 1}"
            nodes += _directions_side_by_side(y, x, D, constants)
    if L > 1:
        nodes += [helper.make_node("Concat", [f"{name}{k}" for k in range(L)], [name], axis=0)
                  for name in finals]
    outputs = ([tensor("output", ["steps", "batch", D * H])] if graph.sequence_output else [])
    outputs += [tensor(name, [L * D, "batch", H]) for name in finals]
    onnx_graph = helper.make_graph(nodes, f"{graph.family}_stack", inputs, outputs,
                                   list(constants.values()))
    return helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION).SerializeToString()


def _directions_side_by_side(y: str, out: str, directions: int, constants: dict) -> list:
    """Nodes turning an operator's Y [T, D, N, H] into [T, N, D*H] (torch's output layout);
    the constant inputs they need are added to `constants`."""
    helper = onnx.helper
    if directions == 1:  # drop the direction axis: no data moves
        constants["axis_1"] = helper.make_tensor("axis_1", onnx.TensorProto.INT64, [1], [1])
        return [helper.make_node("Squeeze", [y, "axis_1"], [out])]
    constants["keep_t_n"] = helper.make_tensor("keep_t_n", onnx.TensorProto.INT64, [3], [0, 0, -1])
    return [helper.make_node("Transpose", [y], [f"{y}_t"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [f"{y}_t", "keep_t_n"], [out])]


@functools.lru_cache(maxsize=64)
def session(graph: Graph, threads: int):
    """The session of `graph` on `threads` intra-op threads, built on first use (the cost lands
    in a module's first call) and shared by every module of that configuration."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 4  # fatal only: its errors leave here as exceptions anyway
    with _as_runtime_error():
        return onnxruntime.InferenceSession(model(graph), options,
                                            providers=["CPUExecutionProvider"])


@contextmanager
def _as_runtime_error():
    """Re-raise ONNX Runtime's own exception types as RuntimeError (torch.nn's type), one line."""
    try:
        yield
    except ORT_ERRORS as error:
        lines = str(error).strip().splitlines() or [type(error).__name__]
        raise RuntimeError(f"onnxruntime: {lines[0]}") from error


# Converted weights per module, keyed by its first weight tensor (by identity: tensors compare
# elementwise): (the weights converted, as weak references, their data pointers and versions;
# the feeds).
_converted = WeakIdKeyDictionary()


def _stamp(tensors: list[Tensor]) -> tuple:
    return tuple((t.data_ptr(), t._version) for t in tensors)


def weight_feeds(graph: Graph, weights: list[Weights]) -> dict:
    """The operators' weight inputs (name -> array) from torch's per layer and direction
    `weights` (layer-major), converted again only when one of them changed."""
    tensors = [w for layer in weights for w in layer if w is not None]
    cached = _converted.get(tensors[0])
    if cached is not None:
        refs, stamp, feeds = cached
        if (len(refs) == len(tensors) and all(ref() is t for ref, t in zip(refs, tensors))
                and stamp == _stamp(tensors)):
            return feeds
    feeds = {}
    with torch.no_grad():
        for layer in range(graph.num_layers):
            directions = weights[layer * graph.directions:(layer + 1) * graph.directions]
            w_ih, w_hh, b_ih, b_hh = (torch.stack([_onnx_gates(graph, d[k]) for d in directions])
                                      if directions[0][k] is not None else None
                                      for k in range(4))
            b = None if b_ih is None else torch.cat([b_ih, b_hh], dim=-1)
            for name, value in zip(graph.weight_names(layer), (w_ih, w_hh, b)):
                feeds[name] = value.detach().contiguous().numpy()
    _converted[tensors[0]] = ([weakref.ref(t) for t in tensors], _stamp(tensors), feeds)
    return feeds


def _onnx_gates(graph: Graph, weight: Tensor) -> Tensor:
    """A weight or bias with its gate blocks (along dim 0) in ONNX's order."""
    if graph.gates == 1:
        return weight
    blocks = weight.chunk(graph.gates)
    return torch.cat([blocks[k] for k in GATE_ORDER[graph.family]])


class InferenceOnly(torch.autograd.Function):
    """ONNX Runtime's results as outputs of the tensors they were computed from, so autograd sees
    the dependence and differentiating them raises, instead of finding no graph at all."""

    @staticmethod
    def forward(ctx, compute, *inputs):
        return compute()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("onnxruntime: backward is not supported: ONNX Runtime computes no "
                           "gradients")


def run(graph: Graph, x: Tensor, given: Optional[State], weights: list[Weights]):
    """`graph` on x (T, N, I) from `given` (or zeros): its outputs as tensors, in the graph's
    order (output if it has one, then h_n and c_n)."""
    if x.dtype != torch.float32:
        raise NotImplementedError(f"onnxruntime: ONNX Runtime's {OPERATORS[graph.family]} "
                                  f"runs float32 only, got {x.dtype}")
    if x.device.type != "cpu":
        raise NotImplementedError(f"onnxruntime runs on CPU tensors here, got {x.device}")

    def compute() -> tuple[Tensor, ...]:
        feeds = {"input": _array(x), **weight_feeds(graph, weights)}
        if given is not None:
            feeds.update(zip(STATE_NAMES[graph.family], map(_array, given)))
        with _as_runtime_error():
            results = session(graph, torch.get_num_threads()).run(None, feeds)
        return tuple(torch.from_numpy(array) for array in results)

    tensors = [x, *(given or ()), *(w for layer in weights for w in layer if w is not None)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return InferenceOnly.apply(compute, *tensors)
    return compute()


def _array(tensor: Tensor):
    return tensor.detach().contiguous().numpy()


class OnnxRuntimeBackend(Backend):
    """The whole stack of layers as one ONNX graph; a cell as a sequence of one step."""

    def stack(self, cfg: Config, x: Tensor, given: Optional[State], weights: list[Weights],
              training: bool) -> tuple[Tensor, State]:
        if cfg.proj_size > 0:
            raise NotImplementedError("onnxruntime: ONNX's LSTM has no projection (proj_size)")
        if training and cfg.dropout > 0 and cfg.num_layers > 1:
            raise NotImplementedError("onnxruntime: ONNX's operators have no dropout between "
                                      "layers; use eval() or dropout=0")
        graph = Graph(cfg.family, cfg.input_size, cfg.hidden_size, cfg.num_layers,
                      cfg.num_directions, cfg.nonlinearity == "relu", cfg.bias, given is not None)
        output, *finals = run(graph, x, given, weights)
        return output, tuple(finals)

    def cell(self, family: str, x: Tensor, state: Optional[State], weights: Weights,
             relu: bool) -> State:
        w_ih, w_hh = weights[:2]
        graph = Graph(family, w_ih.shape[1], w_hh.shape[1], relu=relu, bias=weights[2] is not None,
                      initial_state=state is not None, sequence_output=False)
        given = None if state is None else tuple(s.unsqueeze(0) for s in state)
        return tuple(final.squeeze(0) for final in run(graph, x.unsqueeze(0), given, [weights]))


KINDS = module_classes(OnnxRuntimeBackend(), __name__)
globals().update({cls.__name__: cls for cls in KINDS.values()})  # so instances pickle

IMPLEMENTATION = Implementation(
    name="onnxruntime",
    kinds=KINDS,
    description="ONNX Runtime's RNN/LSTM/GRU operators, one graph per layer stack (inference)",
    unsupported=frozenset({"float64", "float16", "bfloat16", "cuda", "backward", "dropout",
                           "proj_size", "batch_first"}),
    availability=availability,
)
