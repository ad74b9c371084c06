"""Copies: a module copied (copy.deepcopy, a pickle round trip) or rebuilt from its state_dict
computes what the original does, as checkpoints, `torch.save` and data-parallel replicas need."""
from __future__ import annotations

import copy
import pickle

from rnnbench.suites.check_numerics import observe
from rnnbench.suites.compare import first_mismatch, summary
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run
from rnnbench.suites.subject import call

COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda module: pickle.loads(pickle.dumps(module))}


def check_copy(subject, case, how: str) -> dict:
    """A copy made with `how` (a key of COPIES) computes what the original does."""
    run = Run(subject, case, subject.suite.plain_dtype, how)
    return same_outputs(run, call(how, COPIES[how], run.module), f"the output of a {how} copy")


def check_state_dict(subject, case) -> dict:
    """A fresh module loaded with the original's state_dict() computes what the original does."""
    run = Run(subject, case, subject.suite.plain_dtype, "state-dict")
    fresh = subject.build(run.cfg, run.dtype)
    call("load_state_dict()", fresh.load_state_dict, call("state_dict()", run.module.state_dict))
    return same_outputs(run, fresh, "the output after load_state_dict()")


def same_outputs(run: Run, other, what: str, diagnosis: str | None = None) -> dict:
    """Finding unless `other` gives the run's module's outputs on the run's inputs, within the
    policy tolerance of the dtype."""
    original = observe(run)
    tol = run.tolerance()
    wrong = first_mismatch(run.run(module=other, cfg=run.cfg), original, tol)
    if wrong is not None:
        name, numbers = wrong
        raise Finding(summary(f"{what} ({name})", numbers, "the original's"), diagnosis, **numbers)
    return {}
