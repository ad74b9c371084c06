"""Brevitas's quantized RNNs (brevitas.nn.QuantRNN, QuantLSTM) with every quantizer switched off,
as torch.nn's RNN and LSTM: the library's own modules, built with the arguments brevitas's own
tests use to disable quantization (tests/brevitas/nn/test_recurrent.py, "quant_disabled":
weight_quant, bias_quant, io_quant, gate_acc_quant = None, and for the LSTM sigmoid_quant,
tanh_quant, cell_state_quant = None too). With them brevitas means to compute torch.nn's
function (its tests compare against torch.nn.RNN/LSTM after `load_state_dict`).

Translation only: QuantLSTM takes the initial state as `forward(input, hx, cx)`, torch.nn as
`forward(input, (h0, c0))`; the LSTM here passes torch's pair on as brevitas's two arguments.
Every other argument and every input reaches brevitas as given (its state rows, unbatched
input, its own init and argument handling stay its own).

Parameters are brevitas's: per gate an input weight, a hidden weight and one bias (torch.nn's
two biases summed, as brevitas's `_load_from_state_dict` does), at
`layers.<layer>.<direction>.[<gate>_]gate_params....`; `param_map` stacks the gates in torch.nn's
order (i, f, g, o) and maps the one bias to bias_ih (bias_hh: none, held at zero).

Declared unsupported: dropout and proj_size (the constructors have no such parameter; their
**kwargs take both and ignore them: `QuantLSTM(3, 5, dropout=0.5, proj_size=2)` builds a plain
LSTM) and packed (forward raises "PackedSequence input currently not supported."). No GRU.
"""
from functools import partial, partialmethod

import brevitas.nn

from rnnbench.impls import Implementation

RNN_QUANT_OFF = dict(weight_quant=None, bias_quant=None, io_quant=None, gate_acc_quant=None)
LSTM_QUANT_OFF = dict(RNN_QUANT_OFF, sigmoid_quant=None, tanh_quant=None, cell_state_quant=None)
LSTM_GATES = ("input", "forget", "cell", "output")  # torch.nn's i, f, g, o
MAX_LAYERS = 8  # param_map keys for this many layers; keys a module lacks are skipped

# brevitas's own constructors, signatures and all, with the quantizers' defaults set to None.
RNN = partial(brevitas.nn.QuantRNN, **RNN_QUANT_OFF)


class LSTM(brevitas.nn.QuantLSTM):
    __init__ = partialmethod(brevitas.nn.QuantLSTM.__init__, **LSTM_QUANT_OFF)

    def forward(self, input, hx=None):
        """torch.nn's (h0, c0) passed on as brevitas's hx, cx."""
        h0, c0 = (None, None) if hx is None else hx
        return super().forward(input, h0, c0)


def _param_map(kind: str) -> dict[str, str]:
    """brevitas's state_dict keys -> torch.nn's names, gates stacked in torch.nn's order."""
    mapping = {}
    gates = LSTM_GATES if kind == "lstm" else ("",)
    for layer in range(MAX_LAYERS):
        for direction in range(2):
            unit = f"layers.{layer}.{direction}."
            suffix = f"_l{layer}" + ("_reverse" if direction else "")
            for role, key in (("weight_ih", "input_weight.weight"),
                              ("weight_hh", "hidden_weight.weight"), ("bias_ih", "bias")):
                for gate in gates:
                    params = f"{gate}_gate_params" if gate else "gate_params"
                    mapping[f"{unit}{params}.{key}"] = role + suffix
    return mapping


IMPLEMENTATION = Implementation(
    name="brevitas-quant-off", kinds={"rnn": RNN, "lstm": LSTM},
    unsupported=frozenset({"dropout", "proj_size", "packed"}),
    param_map={**_param_map("rnn"), **_param_map("lstm")},
    description="brevitas.nn.QuantRNN/QuantLSTM with weight, bias, io, accumulator, activation "
                "and cell-state quantizers None")
