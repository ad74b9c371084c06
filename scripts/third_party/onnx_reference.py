"""ONNX's reference runtime (onnx.reference.ReferenceEvaluator, NumPy) as torch.nn's RNN, LSTM
and GRU: each layer one ONNX node, evaluated by the reference implementation of the operator.

NumPy underneath, so no autograd (`backward` unsupported); its RNN operator knows no Relu
activation ("Unknown activation function 'Relu'"), though ONNX's operator lists it; ONNX's RNN,
LSTM and GRU operators have no dropout between layers and no projection. Half precision does
not get through: NumPy has no bfloat16, and the operator's reference implementation has no
float16 ("KeyError: dtype('float16')").
"""
from onnx.reference import ReferenceEvaluator

from _onnx_layer import OnnxLayers
from rnnbench.impls import Implementation


class ReferenceLayers(OnnxLayers):
    def evaluate(self, model, feeds):
        return ReferenceEvaluator(model).run(None, feeds)


class RNN(ReferenceLayers):
    family = "rnn"


class LSTM(ReferenceLayers):
    family = "lstm"


class GRU(ReferenceLayers):
    family = "gru"


IMPLEMENTATION = Implementation(
    name="onnx-reference", kinds={"rnn": RNN, "lstm": LSTM, "gru": GRU},
    unsupported=frozenset({"backward", "relu", "dropout", "proj_size", "float16", "bfloat16"}),
    description="onnx.reference.ReferenceEvaluator running one RNN/LSTM/GRU node per layer")
