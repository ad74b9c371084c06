"""Shapes: forward returns torch.nn's structure, every tensor of the spec's shape (`io_shapes`)
in the input's dtype and on its device, and final states that agree with the output sequence."""
from __future__ import annotations

from rnnbench.suites.check_numerics import observe
from rnnbench.suites.diagnoses import diagnose, final_state_mismatch
from rnnbench.suites.results import Finding
from rnnbench.suites.trial import Trial


def check_shapes(subject, case) -> dict:
    """Return structure, shapes, dtype and device as torch.nn's; h_n matches the output's ends."""
    trial = Trial(subject, case, "float32", "shapes")
    observed = observe(trial)
    if final_state_mismatch(trial.cfg, observed, trial.tolerance()):
        raise Finding("the top layer's h_n is not its output at the last step each direction "
                      "processed", diagnose(trial, observed))
    return {}
