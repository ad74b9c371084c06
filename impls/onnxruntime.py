"""onnxruntime: torch.nn's modules computed by ONNX Runtime's RNN, LSTM and GRU operators — the
inference engine RNN models are most often exported to, as a peer to compare with on CPU.

The modules are `_common`'s (torch.nn's signatures, parameters, init, input checks and errors);
the recurrence runs in ONNX Runtime:

- the whole stack is one ONNX graph: a RNN/LSTM/GRU node per layer (both directions in one node),
  between layers Y (T, D, N, H) reshaped to (T, N, D*H), h_n and c_n concatenated over layers.
  In training mode with dropout between layers, layer after layer instead (a graph per layer
  and direction, torch's dropout between them); cells are sequences of one step;
- torch's parameters are graph inputs, so whatever changes them is seen: LSTM gates reordered
  from torch's i,f,g,o to ONNX's i,o,f,c, GRU gates from r,z,n to z,r,h (`linear_before_reset=1`
  is torch's reset-after form), B = [bias_ih, bias_hh]. The converted copies are kept per set of
  parameters and redone only when one is replaced, gets new storage or is changed in place (its
  version counter: load_state_dict, optimizer steps, anything under torch.no_grad); an in-place
  change through `.data` (`p.data.copy_(...)`) leaves the version counter alone and is not seen;
- a session per graph and thread count, built on first use and kept for the process: batch and
  sequence length are dynamic, so neither a new module nor a new length builds one. Its thread
  count (intra_op_num_threads) is torch.get_num_threads() at the call.

Not supported, and why:
- float64, float16, bfloat16: ONNX Runtime's CPU kernels of these operators are float32 only;
- backward: the operators are inference only; a backward through their output raises;
- proj_size: ONNX's LSTM has no projection;
- batch_first: ONNX's batch-major `layout=1` is refused by ONNX Runtime's CPU kernels, so it
  costs a transposing copy of the input every call (the module accepts it and pays that);
- cuda: only the CPU execution provider is used.
ONNX Runtime aborts the whole process on an empty batch or sequence and raises its own exception
types: the module checks inputs first (torch.nn's exceptions) and computes an empty batch itself.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from rnnbench.impls._common import Backend, State, Weights, module_classes
from rnnbench.impls.base import Implementation
from rnnbench.reference import Config
from rnnbench.reference.config import GATES

OPERATORS = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
# ONNX's gate order in torch's gate names: LSTM i,o,f,c (c is torch's g), GRU z,r,h (h is n).
ONNX_GATES = {"rnn": ("h",), "lstm": ("i", "o", "f", "g"), "gru": ("z", "r", "n")}
GATE_ORDER = {family: [GATES[family].index(gate) for gate in gates]
              for family, gates in ONNX_GATES.items()}
OPSET = 14
# ONNX Runtime loads models up to its own IR version; onnx.helper would write its newest.
IR_VERSION = 8
INSTALL_HINT = "pip install -e '.[onnxruntime]'"


@functools.cache
def runtime():
    """(onnx, onnxruntime), imported on first use; RuntimeError with a one-line reason when
    either is missing."""
    try:
        import onnxruntime
        import onnx
    except ImportError as error:
        raise RuntimeError(f"{error.name} is not installed ({INSTALL_HINT})") from None
    return onnx, onnxruntime


def availability() -> str | None:
    try:
        runtime()
    except RuntimeError as error:
        return str(error)
    return None


@dataclass(frozen=True)
class Graph:
    """One ONNX graph: `num_layers` layers of `family` running `direction` ("forward", "reverse"
    or "bidirectional"); `state` says whether initial states are inputs (else zeros).

    Inputs: `input` (T, N, I); per layer k `W{k}`, `R{k}`, `B{k}` (with bias) and, with a state,
    `h0_{k}` (and `c0_{k}`) of (D, N, H). Outputs: `output` (T, N, D*H), `h_n` (and `c_n`)
    (num_layers * D, N, H).
    """

    family: str
    input_size: int
    hidden_size: int
    num_layers: int
    direction: str
    relu: bool
    bias: bool
    state: bool

    @property
    def directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def finals(self) -> tuple[str, ...]:
        return ("h_n", "c_n") if self.family == "lstm" else ("h_n",)

    def model(self) -> bytes:
        """The serialised ModelProto."""
        onnx, _ = runtime()
        helper, FLOAT, INT64 = onnx.helper, onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
        inputs = [helper.make_tensor_value_info("input", FLOAT,
                                                ["steps", "batch", self.input_size])]
        nodes, x = [], "input"
        for layer in range(self.num_layers):
            operands = self._operands(layer)
            inputs += [helper.make_tensor_value_info(name, FLOAT, shape)
                       for name, shape in operands if name]
            finals = (self.finals if self.num_layers == 1
                      else [f"{name}{layer}" for name in self.finals])
            nodes.append(helper.make_node(OPERATORS[self.family],
                                          [x, *(name for name, _ in operands)],
                                          [f"Y{layer}", *finals], **self._attributes()))
            # Y (T, D, N, H) -> (T, N, D*H): the next layer's input, or the output
            y, x = f"Y{layer}", "output" if layer == self.num_layers - 1 else f"X{layer + 1}"
            if self.directions == 1:
                nodes.append(helper.make_node("Squeeze", [y, "axis_1"], [x]))
            else:
                nodes.append(helper.make_node("Transpose", [y], [f"T{layer}"], perm=[0, 2, 1, 3]))
                nodes.append(helper.make_node("Reshape", [f"T{layer}", "merge_last_two"], [x]))
        if self.num_layers > 1:
            nodes += [helper.make_node("Concat",
                                       [f"{name}{layer}" for layer in range(self.num_layers)],
                                       [name], axis=0) for name in self.finals]
        constant = (helper.make_tensor("axis_1", INT64, [1], [1]) if self.directions == 1
                    else helper.make_tensor("merge_last_two", INT64, [3], [0, 0, -1]))
        width, states = self.directions * self.hidden_size, self.num_layers * self.directions
        outputs = [helper.make_tensor_value_info("output", FLOAT, ["steps", "batch", width]),
                   *(helper.make_tensor_value_info(name, FLOAT, [states, "batch", self.hidden_size])
                     for name in self.finals)]
        graph = helper.make_graph(nodes, f"{self.family}_stack", inputs, outputs, [constant])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  ir_version=IR_VERSION)
        return model.SerializeToString()

    def _operands(self, layer: int) -> list[tuple[str, Optional[list]]]:
        """The operator's inputs after X, in its order (W, R, B, sequence_lens, initial_h,
        initial_c), as (graph input name, shape); ("", None) for one left out."""
        directions, hidden = self.directions, self.hidden_size
        rows = len(GATES[self.family]) * hidden
        width = self.input_size if layer == 0 else directions * hidden
        operands = [(f"W{layer}", [directions, rows, width]),
                    (f"R{layer}", [directions, rows, hidden]),
                    (f"B{layer}", [directions, 2 * rows]) if self.bias else ("", None),
                    ("", None)]  # sequence_lens: every sequence runs its full length
        if self.state:
            operands += [(f"{name}_{layer}", [directions, "batch", hidden])
                         for name in ("h0", "c0")[:len(self.finals)]]
        while not operands[-1][0]:
            operands.pop()
        return operands

    def _attributes(self) -> dict:
        attributes = {"hidden_size": self.hidden_size, "direction": self.direction}
        if self.relu:
            attributes["activations"] = ["Relu"] * self.directions
        if self.family == "gru":
            attributes["linear_before_reset"] = 1  # torch's GRU: the reset gate after R_h h
        return attributes


def build_session(graph: Graph, threads: int):
    """An ONNX Runtime session of `graph` on the CPU with `threads` intra-op threads."""
    _, ort = runtime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Its threads may spin while a run lasts but stop when it returns: left spinning, they took
    # the cores from whatever ran next (torch.nn timed in turn with it ran twice as slow at
    # goals (a) and (b), 2.6x at an LSTM cell), while ONNX Runtime's own times hardly moved.
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.log_severity_level = 4  # its errors come back as exceptions; no second copy on stderr
    return ort.InferenceSession(graph.model(), sess_options=options,
                                providers=["CPUExecutionProvider"])


def onnx_weights(family: str, layer: list[Weights]) -> dict[str, np.ndarray]:
    """One layer's parameters (a Weights per direction) as ONNX's W, R and B (absent without
    bias): directions stacked, gates in ONNX's order."""
    order = GATE_ORDER[family]

    def stacked(position: int) -> Tensor:
        return torch.stack([reorder(weights[position], order) for weights in layer])

    arrays = {"W": stacked(0), "R": stacked(1)}
    if layer[0][2] is not None:
        arrays["B"] = torch.cat([stacked(2), stacked(3)], dim=1)
    return {name: tensor.numpy() for name, tensor in arrays.items()}


def reorder(parameter: Tensor, order: list[int]) -> Tensor:
    """A copy of `parameter` (gates stacked along dim 0) with its gates in `order`."""
    gates = parameter.detach().unflatten(0, (len(order), -1))
    return gates[order].flatten(0, 1).contiguous()


class ConvertedWeights:
    """ONNX-ordered copies of parameters, per set of parameters (keyed by their ids), redone
    when one of them got new storage or was changed in place (its version counter moved). An
    entry goes when any of its parameters is freed, so a new one with the same id never finds
    stale copies."""

    def __init__(self):
        # key -> (weak references, which keep the callbacks alive; stamps; arrays)
        self._entries: dict[tuple, tuple] = {}

    def get(self, key: tuple, parameters: list[Tensor], convert: Callable[[], dict]) -> dict:
        stamps = [(p._version, p.data_ptr()) for p in parameters]
        entry = self._entries.get(key)
        if entry is not None and entry[1] == stamps:
            return entry[2]
        forget = functools.partial(self._forget, key)
        refs = [weakref.ref(p, forget) for p in parameters]
        arrays = convert()
        self._entries[key] = (refs, stamps, arrays)
        return arrays

    def _forget(self, key: tuple, _dead) -> None:
        self._entries.pop(key, None)


class InferenceOnly(torch.autograd.Function):
    """Runs ONNX Runtime as a function of `inputs`, so a backward through its results raises
    instead of failing as if nothing required a gradient."""

    @staticmethod
    def forward(ctx, run, *inputs):
        return run()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("onnxruntime does not support backward: ONNX Runtime's RNN, LSTM and "
                           "GRU operators are inference only")


class OnnxRuntimeBackend(Backend):
    """The recurrence as ONNX Runtime sessions, one per graph and thread count."""

    def __init__(self):
        self.sessions: dict[tuple[Graph, int], object] = {}
        self.weights = ConvertedWeights()

    def stack(self, config: Config, x: Tensor, state: Optional[State],
              weights: Callable[[int], Weights], relu: bool, training: bool):
        if training and config.dropout > 0 and config.num_layers > 1:
            # Dropout acts between layers: torch's, between one graph per layer and direction.
            return super().stack(config, x, state, weights, relu, training)
        graph = Graph(config.family, config.input_size, config.hidden_size, config.num_layers,
                      "bidirectional" if config.bidirectional else "forward", relu, config.bias,
                      state is not None)
        count = config.num_layers * config.num_directions
        return self.run(graph, x, state, [weights(index) for index in range(count)])

    def layer(self, family: str, x: Tensor, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool):
        w_hh = weights[1]
        graph = Graph(family, x.shape[-1], w_hh.shape[1], 1, "reverse" if reverse else "forward",
                      relu, weights[2] is not None, state is not None)
        given = None if state is None else tuple(s.unsqueeze(0) for s in state)
        output, finals = self.run(graph, x, given, [weights])
        return output, tuple(final[0] for final in finals)

    def run(self, graph: Graph, x: Tensor, state: Optional[State], weights: list[Weights]):
        """`graph` over x (T, N, I) from `state` (each (num_layers * D, N, H)) with `weights`
        (one Weights per layer and direction, layer-major): (output, final states)."""
        check_runnable(x, weights)
        parameters = [w for layer in weights for w in layer if w is not None]
        inputs = (x, *(state or ()), *parameters)
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
            output, *finals = InferenceOnly.apply(
                lambda: self._run(graph, x, state, weights, parameters), *inputs)
            return output, tuple(finals)
        output, *finals = self._run(graph, x, state, weights, parameters)
        return output, tuple(finals)

    def _run(self, graph: Graph, x: Tensor, state: Optional[State], weights: list[Weights],
             parameters: list[Tensor]) -> tuple[Tensor, ...]:
        steps, batch = x.shape[:2]
        hidden, directions = graph.hidden_size, graph.directions
        if batch == 0:  # ONNX Runtime aborts the process on an empty batch
            return (x.new_zeros(steps, 0, directions * hidden),
                    *(x.new_zeros(graph.num_layers * directions, 0, hidden) for _ in graph.finals))
        feeds = {"input": x.detach().contiguous().numpy()}
        key = (graph.family, directions, *map(id, parameters))
        feeds.update(self.weights.get(key, parameters, lambda: self._convert(graph, weights)))
        for layer in range(graph.num_layers if state is not None else 0):
            part = slice(layer * directions, (layer + 1) * directions)
            for name, tensor in zip(("h0", "c0"), state):
                feeds[f"{name}_{layer}"] = tensor[part].detach().contiguous().numpy()
        threads = torch.get_num_threads()
        session = self.sessions.get((graph, threads))
        if session is None:
            session = self.sessions[graph, threads] = build_session(graph, threads)
        try:
            results = session.run(None, feeds)
        except Exception as error:  # ONNX Runtime's own types; torch.nn raises RuntimeError
            lines = str(error).strip().splitlines() or [type(error).__name__]
            raise RuntimeError(f"onnxruntime: {lines[0]}") from error
        return tuple(torch.from_numpy(array) for array in results)

    @staticmethod
    def _convert(graph: Graph, weights: list[Weights]) -> dict[str, np.ndarray]:
        feeds = {}
        directions = graph.directions
        for layer in range(graph.num_layers):
            directed = weights[layer * directions:(layer + 1) * directions]
            arrays = onnx_weights(graph.family, directed)
            feeds.update({f"{name}{layer}": array for name, array in arrays.items()})
        return feeds


def check_runnable(x: Tensor, weights: list[Weights]) -> None:
    """NotImplementedError (a RuntimeError, as torch raises for a kernel it lacks) for what ONNX
    Runtime's operators cannot run: a dtype other than float32, a device other than the CPU, an
    LSTM projection."""
    if x.dtype != torch.float32:
        raise NotImplementedError(f"onnxruntime runs float32 only, got {x.dtype}")
    if x.device.type != "cpu":
        raise NotImplementedError(f"onnxruntime runs on the CPU only, got {x.device}")
    if weights[0][4] is not None:
        raise NotImplementedError("onnxruntime does not support proj_size: ONNX's LSTM has no "
                                  "projection")


BACKEND = OnnxRuntimeBackend()
KINDS = module_classes(BACKEND, __name__)
# Bound under the names torch.nn gives them, so instances pickle (and a search finds them).
RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU = KINDS.values()

IMPLEMENTATION = Implementation(
    name="onnxruntime",
    kinds=KINDS,
    description="ONNX Runtime's RNN/LSTM/GRU operators (CPU, float32, inference): the whole "
                "stack one graph, a session per configuration and thread count",
    unsupported=frozenset({"float64", "float16", "bfloat16", "backward", "proj_size",
                           "batch_first", "cuda", "packed"}),
    availability=availability,
)
