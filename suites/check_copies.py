"""Copies: a module copied (copy.deepcopy, a pickle round trip) or rebuilt from its state_dict
computes what the original does, as checkpoints, `torch.save` and data-parallel replicas need,
and a copy computes with its own parameters: given others, it answers what the reference does
with them, and the original is unchanged (a forward that still reads the original's, through a
closure patched onto the instance, is no copy)."""
from __future__ import annotations

import copy
import pickle

from rnnbench.suites.check_numerics import observe
from rnnbench.suites.compare import agree, first_mismatch, summary
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run
from rnnbench.suites.subject import call, draw_params, load, params_of

COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda module: pickle.loads(pickle.dumps(module))}
# How each way's copy is called in a finding.
COPY_WORDS = {"deepcopy": "a deep copy", "pickle": "a copy through pickle"}


def check_copy(subject, case, how: str) -> dict:
    """A copy made with `how` (a key of COPIES) computes what the original does, and with
    parameters of its own what the reference computes with them (where the original computes
    the reference's function), leaving the original as it was."""
    run, words = Run(subject, case, subject.suite.plain_dtype, how), COPY_WORDS[how]
    copied = call(how, COPIES[how], run.module)
    same_outputs(run, copied, f"the output of {words}")
    before, tol = run.run(), run.tolerance()
    others = draw_params(run.cfg, subject.rng(how, "others", case.name))
    load(copied, run.cfg, run.pmap, {name: subject.tensor(value, run.dtype)
                                     for name, value in others.items()})
    if agree(before, run.expected(), tol):  # else the numeric checks say what is wrong
        wrong = first_mismatch(run.run(module=copied, cfg=run.cfg),
                               run.expected(params=params_of(copied, run.cfg, run.pmap)), tol)
        if wrong is not None:
            raise Finding(summary(f"the output of {words} given other parameters ({wrong[0]})",
                                  wrong[1]) + ": the copy still computes with the original's",
                          **wrong[1])
    wrong = first_mismatch(run.run(), before, tol)
    if wrong is not None:
        raise Finding(summary(f"the original's output ({wrong[0]})", wrong[1], "before")
                      + f" once {words} of it was given other parameters", **wrong[1])
    return {}


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
