"""ONNX Runtime's CPU RNN, LSTM and GRU kernels as torch.nn's RNN, LSTM and GRU: each layer one
ONNX node run by an InferenceSession (one session per graph, cached).

Inference only (`backward` unsupported); its CPU kernels exist for float only (`float64`,
`float16` and `bfloat16` unsupported); no dropout between layers, no projection.
"""
from functools import lru_cache

import onnxruntime

from _onnx_layer import OnnxLayers
from rnnbench.impls import Implementation


@lru_cache(maxsize=None)
def _session(serialized: bytes) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])


class RuntimeLayers(OnnxLayers):
    def evaluate(self, model, feeds):
        return _session(model.SerializeToString()).run(None, feeds)


class RNN(RuntimeLayers):
    family = "rnn"


class LSTM(RuntimeLayers):
    family = "lstm"


class GRU(RuntimeLayers):
    family = "gru"


IMPLEMENTATION = Implementation(
    name="onnxruntime-ops", kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU},
    unsupported=frozenset({"backward", "float64", "float16", "bfloat16", "dropout", "proj_size"}),
    description="onnxruntime CPU kernels running one RNN/LSTM/GRU node per layer")
