"""torch.nn's six constructors, argument for argument, as mixins that turn them into a Config.

An implementation module writes its module behaviour once, on a cell base and a sequence base
whose `__init__(cfg, device, dtype)` takes a `rnnbench.reference.Config`; `bind` puts these
signatures in front of them, so every implementation accepts exactly torch.nn's arguments.
"""
from __future__ import annotations

from rnnbench.reference import Config


class RNNCell:
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(Config("rnn_cell", input_size, hidden_size, nonlinearity=nonlinearity,
                                bias=bias), device, dtype)


class LSTMCell:
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(Config("lstm_cell", input_size, hidden_size, bias=bias), device, dtype)


class GRUCell:
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(Config("gru_cell", input_size, hidden_size, bias=bias), device, dtype)


class RNN:
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(Config("rnn", input_size, hidden_size, num_layers, nonlinearity=nonlinearity,
                                bias=bias, batch_first=batch_first, dropout=dropout,
                                bidirectional=bidirectional), device, dtype)


class LSTM:
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__(Config("lstm", input_size, hidden_size, num_layers, bias=bias,
                                batch_first=batch_first, dropout=dropout,
                                bidirectional=bidirectional, proj_size=proj_size), device, dtype)


class GRU:
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(Config("gru", input_size, hidden_size, num_layers, bias=bias,
                                batch_first=batch_first, dropout=dropout,
                                bidirectional=bidirectional), device, dtype)


SIGNATURES = {"rnn_cell": RNNCell, "lstm_cell": LSTMCell, "gru_cell": GRUCell,
              "rnn": RNN, "lstm": LSTM, "gru": GRU}


def bind(cell_base: type, sequence_base: type, module_name: str, **attributes) -> dict[str, type]:
    """The six classes, kind -> class: torch.nn's signature in front of `cell_base` (cells) or
    `sequence_base`, named as torch.nn names them, with `attributes` as class attributes. They
    belong to `module_name`, which must bind them under those names (so they pickle)."""
    return {kind: type(signature.__name__,
                       (signature, cell_base if kind.endswith("_cell") else sequence_base),
                       {"__module__": module_name, **attributes})
            for kind, signature in SIGNATURES.items()}
