"""Known answers: numbers any implementation, in any language, can reproduce without a RNG.

The setup is the same for every row: every weight and bias is 1, every input element is 1
(input_size 10), the initial state is zero, and the batch holds one sequence. Every element of
the named result then takes the same value. With 10 inputs and two unit biases every gate's
pre-activation at the first step is a = 10 + 1 + 1 = 12, which gives the closed forms below.

The float64 values were read off torch.nn 2.13 in float64 and agree with the closed forms.
`float32` holds what torch 2.13's CPU float32 modules return: note that the widely quoted GRU
answer 6.1989e-06 is a float32 artefact (the sigmoid's 1 - z = 6.14e-06 is below float32's
resolution near 1), and that the float32 LSTM cell and sequence module differ in the last digit
(0.7615868 vs 0.7615869). An implementation is judged against the float64 value with the
tolerance policy of the dtype it computes in.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnnbench.reference.config import Config
from rnnbench.reference.params import param_shapes
from rnnbench.reference.shapes import io_shapes

INPUT_SIZE = 10
HIDDEN_SIZE = 3


@dataclass(frozen=True)
class KnownAnswer:
    """One all-ones setup and the value every element of each named result takes."""

    name: str
    config: Config
    steps: int
    formula: str
    expected: dict[str, float]  # result name (as io_shapes keys it) -> float64 value
    float32: dict[str, float]  # the same results from torch 2.13's CPU float32 module

    def arguments(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(params, x): all weights and biases 1, the batched input all ones; hx is None."""
        params = {name: np.ones(shape) for name, shape in param_shapes(self.config).items()}
        return params, np.ones(io_shapes(self.config, 1, self.steps)["input"])


def _config(kind: str, **options) -> Config:
    return Config(kind, INPUT_SIZE, HIDDEN_SIZE, **options)


KNOWN_ANSWERS = (
    KnownAnswer("rnn_cell", _config("rnn_cell"), 1, "h = tanh(12)",
                {"h": 0.9999999999244973}, {"h": 1.0}),
    KnownAnswer("rnn-relu-two-steps", _config("rnn", nonlinearity="relu"), 2,
                "h_1 = 12, h_2 = relu(10 + 3 * 12 + 2) = 48",
                {"h_n": 48.0}, {"h_n": 48.0}),
    KnownAnswer("lstm_cell", _config("lstm_cell"), 1,
                "c = sigmoid(12) * tanh(12), h = sigmoid(12) * tanh(c)",
                {"h": 0.7615868961646821, "c": 0.9999938557498955},
                {"h": 0.7615868449211121, "c": 0.9999938011169434}),
    KnownAnswer("lstm", _config("lstm"), 1,
                "c = sigmoid(12) * tanh(12), h = sigmoid(12) * tanh(c)",
                {"h_n": 0.7615868961646821, "c_n": 0.9999938557498955},
                {"h_n": 0.7615869045257568, "c_n": 0.9999938607215881}),
    KnownAnswer("gru_cell", _config("gru_cell"), 1,
                "z = sigmoid(12), h = (1 - z) * tanh(11 + sigmoid(12))",
                {"h": 6.144174601763197e-06}, {"h": 6.198883056640625e-06}),
    KnownAnswer("gru", _config("gru"), 1,
                "z = sigmoid(12), h = (1 - z) * tanh(11 + sigmoid(12))",
                {"h_n": 6.144174601763197e-06}, {"h_n": 6.198883056640625e-06}),
)
