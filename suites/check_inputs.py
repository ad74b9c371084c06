"""Inputs: forward leaves the tensors it is given unmodified."""
from __future__ import annotations

import torch

from rnnbench.suites.results import Finding
from rnnbench.suites.trial import Trial


def check_inputs_unchanged(subject, case) -> dict:
    """forward does not modify its input or initial state."""
    trial = Trial(subject, case, "float32", "inputs")
    x, hx = trial.tensors()
    given = {"input": x, **(hx or {})}
    before = {name: tensor.clone() for name, tensor in given.items()}
    trial.call(x, hx)
    changed = [name for name, tensor in given.items() if not torch.equal(tensor, before[name])]
    if changed:
        raise Finding(f"forward modified its {', '.join(changed)}", "input_mutated")
    return {}
