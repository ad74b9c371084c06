"""Inputs: forward leaves the tensors it is given unmodified."""
from __future__ import annotations

import torch

from rnnbench.suites.check_numerics import observe_tensors
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run


def check_inputs_unchanged(subject, case) -> dict:
    """forward does not modify its input or initial state."""
    run = Run(subject, case, subject.suite.plain_dtype, "inputs")
    x, hx = run.tensors()
    given = {"input": x, **(hx or {})}
    before = {name: tensor.clone() for name, tensor in given.items()}
    observe_tensors(run, x, hx)
    changed = [name for name, tensor in given.items() if not torch.equal(tensor, before[name])]
    if changed:
        raise Finding(f"forward modified its {', '.join(changed)}", "input_mutated")
    return {}
