"""native: torch.nn itself — the behaviour every other implementation is held to.

On CPU torch.nn dispatches to its own kernels (oneDNN for LSTM), on a GPU to cuDNN.
"""
from torch import nn

from rnnbench.impls.base import Implementation

IMPLEMENTATION = Implementation(
    name="native",
    kinds={"rnn_cell": nn.RNNCell, "lstm_cell": nn.LSTMCell, "gru_cell": nn.GRUCell,
           "rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU},
    description="torch.nn itself (oneDNN on CPU, cuDNN on GPU)",
)
