"""torchscript: the loop of _loop.py scripted with torch.jit.

TorchScript is deprecated upstream but still works in torch 2.13. The functions are scripted on
first use, with the deprecation warnings of that one call silenced (nowhere else); where
torch.jit.script is gone or fails, the implementation is unavailable and says why.
"""
from __future__ import annotations

import functools
import warnings
from typing import Optional

from rnnbench.impls import _loop
from rnnbench.impls._common import (Backend, State, Weights, module_classes, transposed_storage,
                                    zero_state)
from rnnbench.impls.base import Implementation


@functools.cache
def _scripted():
    """run_layer scripted; raises whatever torch.jit.script raises."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*torch.jit")
        return torch.jit.script(_loop.run_layer)


def availability() -> str | None:
    try:
        _scripted()
    except Exception as error:  # a missing or broken torch.jit fails in many ways
        return f"torch.jit.script is not usable in this torch: {error}".splitlines()[0]
    return None


class ScriptedBackend(Backend):
    """The scripted layer loop (a cell is a sequence of one step)."""

    new_parameter = staticmethod(transposed_storage)  # _loop reads W^T

    def layer(self, family: str, x, state: Optional[State], weights: Weights, relu: bool,
              reverse: bool):
        state = zero_state(family, x, weights) if state is None else state
        output, final = _scripted()(family, x, list(state), *weights, relu, reverse)
        return output, tuple(final)


KINDS = module_classes(ScriptedBackend(), __name__)
# Bound under the names torch.nn gives them, so instances pickle (and a search finds them).
RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU = KINDS.values()

IMPLEMENTATION = Implementation(
    name="torchscript",
    kinds=KINDS,
    description="the time loop scripted with torch.jit (premul GEMM, unbind, stack)",
    unsupported=frozenset({"packed"}),  # the scripted loop takes padded tensors only
    availability=availability,
)
