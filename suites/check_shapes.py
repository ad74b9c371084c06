"""Shapes: forward returns the kind's structure, every tensor of the spec's shape in the input's
dtype and on its device, and outputs that agree with each other (the kind's `final_state`: for
the torch.nn family, final states that are the output sequence's ends)."""
from __future__ import annotations

from rnnbench.suites.check_numerics import observe, require_conforming_close
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run


def check_shapes(subject, case) -> dict:
    """Return structure, shapes, dtype and device as the contract's; outputs consistent. Where
    only a final state is misshapen, the well-formed outputs' values come first
    (`require_conforming_close`): a state shaped by a wrong reading of the input is named by
    that reading."""
    run = Run(subject, case, subject.suite.plain_dtype, "shapes")
    try:
        observed = observe(run)
    except Finding as misshapen:
        require_conforming_close(run, misshapen)
        raise
    final_state = subject.suite.final_state
    if final_state and final_state(run.cfg, observed, run.tolerance()):
        diagnose = subject.suite.diagnose
        raise Finding("the top layer's h_n is not its output at the last step each direction "
                      "processed", diagnose(run, observed) if diagnose else None)
    return {}
