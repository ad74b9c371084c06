"""onnxruntime: each layer and direction through ONNX Runtime's RNN, LSTM and GRU operators — what
many RNN models are deployed with, as a peer to compare against.

The module side is torch.nn's contract (`_common`: parameters named, shaped and initialised as
torch.nn's, the input and state checks, layers, directions and dropout between layers in
torch); the recurrence of one layer and direction is one ONNX node run by an InferenceSession:

- ONNX's layouts: W (1, gates * hidden, input), R (1, gates * hidden, hidden), B = [Wb, Rb];
  gate blocks reordered from torch's (LSTM i,f,g,o -> ONNX i,o,f,c; GRU r,z,n -> z,r,h, with
  linear_before_reset=1, which is torch's GRU); Y (steps, 1, batch, hidden);
- weights are graph inputs, so load_state_dict or an optimizer step is seen at the next call;
  they are reordered only when a parameter changed (its version counter moved);
- one session per (family, hidden size, direction, nonlinearity, thread count), built on first
  use and reused: batch, length and input size are dynamic, so a new one never rebuilds. The
  thread count is torch's at call time, like every implementation's; threads do not spin
  between calls, so they leave the cores to whatever runs next.

Not supported, because ONNX Runtime's CPU kernels do not do it: float64 and half precision
(float32 kernels only), backward (inference only), proj_size (no projection in ONNX's LSTM),
batch_first (ORT refuses ONNX's batch-major layout=1, and transposing would add a copy per call).
"""
from __future__ import annotations

import functools
import weakref
from typing import Optional

import torch

from rnnbench.impls._common import Backend, State, Weights, module_classes, zero_state
from rnnbench.impls.base import Implementation

OP = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
# For each ONNX gate block, the index of torch's block it is.
ONNX_ORDER = {"rnn": (0,), "lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}


def availability() -> str | None:
    try:
        import onnx  # noqa: F401  (builds the graphs)
        import onnxruntime  # noqa: F401
    except ImportError as error:
        return f"onnxruntime is not installed ({error}); pip install 'rnnbench[onnxruntime]'"
    return None


@functools.lru_cache(maxsize=None)
def session(family: str, hidden: int, reverse: bool, relu: bool, threads: int):
    """The InferenceSession of one layer and direction: every tensor a graph input."""
    import onnxruntime
    from onnx import TensorProto, helper

    names = ["X", "W", "R", "B", "", "initial_h"] + (["initial_c"] if family == "lstm" else [])
    outputs = ["Y", "Y_h"] + (["Y_c"] if family == "lstm" else [])
    attributes = {"hidden_size": hidden, "direction": "reverse" if reverse else "forward"}
    if family == "rnn":
        attributes["activations"] = ["Relu" if relu else "Tanh"]
    if family == "gru":
        attributes["linear_before_reset"] = 1
    node = helper.make_node(OP[family], names, outputs, **attributes)
    graph = helper.make_graph(
        [node], "layer", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names if n],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors surface as exceptions, not log lines
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def onnx_blocks(family: str, tensor: torch.Tensor) -> torch.Tensor:
    """torch's stacked gate blocks (rows, or entries of a bias) in ONNX's gate order."""
    blocks = tensor.chunk(len(ONNX_ORDER[family]), dim=0)
    return torch.cat([blocks[i] for i in ONNX_ORDER[family]], dim=0)


class OnnxRuntimeBackend(Backend):
    """One ONNX node per layer and direction; weights converted when they change."""

    def __init__(self):
        # id(the layer's input weight) -> (a weak reference to it, its version key, W, R, B);
        # an entry goes when its weight does.
        self._converted: dict[int, tuple] = {}

    def _weights(self, family: str, weights: Weights):
        """W, R, B as ONNX wants them, converted again only when a parameter changed."""
        w_ih, w_hh, b_ih, b_hh, _ = weights
        present = [t for t in (w_ih, w_hh, b_ih, b_hh) if t is not None]
        key = tuple((id(t), t._version, t.data_ptr()) for t in present)
        cached = self._converted.get(id(w_ih))
        if cached is not None and cached[0]() is w_ih and cached[1] == key:
            return cached[2]
        with torch.no_grad():
            bias = (torch.cat([onnx_blocks(family, b_ih), onnx_blocks(family, b_hh)])
                    if b_ih is not None else w_ih.new_zeros(2 * w_ih.shape[0]))
            arrays = (onnx_blocks(family, w_ih)[None].contiguous().numpy(),
                      onnx_blocks(family, w_hh)[None].contiguous().numpy(),
                      bias[None].contiguous().numpy())
        if id(w_ih) not in self._converted:
            weakref.finalize(w_ih, self._converted.pop, id(w_ih), None)
        self._converted[id(w_ih)] = (weakref.ref(w_ih), key, arrays)
        return arrays

    def layer(self, family: str, x, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool):
        if x.dtype != torch.float32 or x.device.type != "cpu":
            raise TypeError(f"onnxruntime runs float32 on the CPU only, got {x.dtype} on {x.device}")
        state = zero_state(family, x, weights) if state is None else state
        w, r, b = self._weights(family, weights)
        hidden = w.shape[1] // len(ONNX_ORDER[family])
        feeds = {"X": x.detach().contiguous().numpy(), "W": w, "R": r, "B": b,
                 "initial_h": state[0].detach()[None].contiguous().numpy()}
        if family == "lstm":
            feeds["initial_c"] = state[1].detach()[None].contiguous().numpy()
        run = session(family, hidden, reverse, relu, torch.get_num_threads()).run
        outputs = [torch.from_numpy(array) for array in run(None, feeds)]
        return outputs[0][:, 0], tuple(final[0] for final in outputs[1:])


KINDS = module_classes(OnnxRuntimeBackend(), __name__)
globals().update({cls.__name__: cls for cls in KINDS.values()})  # so instances pickle

IMPLEMENTATION = Implementation(
    name="onnxruntime",
    kinds=KINDS,
    description="ONNX Runtime's RNN/LSTM/GRU operators per layer and direction (CPU, float32, "
                "inference); sessions built once and reused",
    unsupported=frozenset({"float64", "float16", "bfloat16", "backward", "proj_size",
                           "batch_first", "cuda"}),
    availability=availability,
)
