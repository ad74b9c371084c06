"""State carry-over: a sequence run in two halves, the first half's final state passed as the
second half's initial state, gives the same outputs and final state as the sequence run whole.
(Bidirectional modules are excluded: their reverse direction reads the future.)"""
from __future__ import annotations

import numpy as np

from rnnbench.reference.numerics import output_names, state_names
from rnnbench.suites.cases import Case
from rnnbench.suites.check_numerics import observe
from rnnbench.suites.compare import agree, first_mismatch, summary
from rnnbench.suites.diagnoses import diagnose, final_state_mismatch
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run
from rnnbench.suites.subject import to_numpy


def applies(case: Case) -> bool:
    cfg = case.config
    return not cfg.is_cell and not cfg.bidirectional and case.steps >= 2


def check_state(subject, case) -> dict:
    """Two halves with the state carried over equal the whole sequence."""
    run = Run(subject, case, "float32", "state")
    cfg = run.cfg
    whole = observe(run)
    axis = 1 if cfg.batch_first and case.batched else 0
    first_x, second_x = run.tensors()[0].tensor_split([case.steps // 2], dim=axis)
    first = run.call(first_x)
    carried = dict(zip(state_names(cfg), (first[name] for name in output_names(cfg)[1:])))
    second = run.run(second_x, carried)
    joined = {**second, "output": np.concatenate([to_numpy(first["output"]), second["output"]], axis)}
    tol = run.tolerance()
    wrong = first_mismatch(joined, whole, tol)
    if wrong is None:
        return {}
    name, numbers = wrong
    ignored = agree(run.run(second_x, None), second, tol)
    if ignored:
        diagnosis = "h0_ignored"
    elif not agree(whole, run.expected(), tol):  # the whole sequence is wrong already
        diagnosis = diagnose(run, whole)
    else:
        diagnosis = final_state_mismatch(cfg, whole, tol)
    raise Finding(summary(f"{name} of the two halves", numbers, "the whole sequence's"),
                  diagnosis, **numbers)
