"""Forward outputs and gradients against the float64 reference.

Parameters are drawn from the spec's init distributions and loaded into the module; the
reference gets exactly the values the module holds (rounded to its dtype) and the same inputs,
so the only difference left is the arithmetic. The tolerance is the spec's policy for the dtype,
the number of steps and the depth (`rnnbench.reference.tolerance`). In float64 it is tight
enough that any real mistake fails; in float32, bfloat16 and float16 it is the policy's.

A failure says which output (or gradient) differs and by how much, where the forward pass first
diverges (`divergence.locate`) and, where recognisable, which mistake explains it
(`diagnoses.diagnose`).
"""
from __future__ import annotations

import numpy as np
import torch

from rnnbench import reference
from rnnbench.reference.numerics import nest_outputs, state_grad_names
from rnnbench.suites.compare import (SAMPLE_VALUES, require_gradients_close,
                                     require_outputs_close)
from rnnbench.suites.diagnoses import diagnose
from rnnbench.suites.divergence import locate
from rnnbench.suites.layers import time_major
from rnnbench.suites.results import Finding
from rnnbench.suites.subject import call, spec_grad, spec_parameters, to_numpy
from rnnbench.suites.trial import Trial, nest_hx


def check_forward(subject, case, dtype: str) -> dict:
    """Outputs and final states equal the reference's within the policy tolerance."""
    trial = Trial(subject, case, dtype, "forward")
    observed = observe(trial)
    return compare_forward(trial, observed)


def check_gradients(subject, case, dtype: str) -> dict:
    """Gradients w.r.t. the input, the initial state (when given) and every parameter equal the
    reference's BPTT gradients for a random output gradient."""
    # Training mode: cuDNN computes RNN gradients only there; these cases have no dropout.
    trial = Trial(subject, case, dtype, "gradients", train=True)
    outputs, leaves, stored = forward_for_gradients(trial)
    compare_forward(trial, {name: to_numpy(t) for name, t in outputs.items()})
    observed, expected = gradients(trial, outputs, leaves, stored)
    return require_gradients_close(observed, expected, trial.tolerance(gradient=True))


def forward_for_gradients(trial: Trial) -> tuple[dict, dict, dict]:
    """The trial's forward outputs (tensors), computed from leaves that require grad: the
    outputs, the leaves keyed as reference.backward keys their gradients, and where each spec
    parameter is stored (`spec_parameters`)."""
    stored = spec_parameters(trial.module, trial.cfg, trial.pmap)
    x, hx = trial.tensors()
    leaves = {"input": x, **dict(zip(state_grad_names(trial.cfg), (hx or {}).values()))}
    for leaf in leaves.values():
        leaf.requires_grad_(True)
    return observe_tensors(trial, x, hx), leaves, stored


def gradients(trial: Trial, outputs: dict, leaves: dict, stored: dict) -> tuple[dict, dict]:
    """(the implementation's gradients, the reference's) for a random output gradient, in
    float64, keyed alike. The output gradient is rounded to the trial's dtype first, so both
    sides differentiate the same function of the outputs."""
    rng = trial.subject.rng("gradients-out", trial.case.name)
    grad_out = {name: trial.rounded(rng.normal(size=tuple(t.shape))) for name, t in outputs.items()}
    observed = _backward(trial, outputs, grad_out, leaves, stored)
    expected = reference.backward(trial.cfg, trial.params, trial.x64, nest_hx(trial.cfg, trial.hx64),
                                  nest_outputs(trial.cfg, grad_out))
    return observed, {name: expected[name] for name in observed}


def _backward(trial: Trial, outputs: dict, grad_out: dict, leaves: dict, stored: dict) -> dict:
    """The implementation's gradients of sum(outputs * grad_out) w.r.t. the leaves and every
    spec parameter (cut from the registered parameter storing it), in float64."""
    owners = list({id(owner): owner for parts in stored.values() for owner, _, _ in parts}.values())
    wrt = [*leaves.values(), *owners]
    try:
        grads = call("backward", torch.autograd.grad, list(outputs.values()), wrt,
                     [trial.subject.tensor(grad_out[name], trial.dtype) for name in outputs],
                     allow_unused=True)
    except Finding as finding:  # autograd refuses when forward wrote to its input
        pristine = [trial.x64, *(trial.hx64 or {}).values()]
        if any(not np.array_equal(to_numpy(leaf), value) for leaf, value in zip(leaves.values(), pristine)):
            finding.diagnosis = "input_mutated"
        raise
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads)]  # unused: zero
    observed = dict(zip(leaves, grads))
    by_owner = {id(owner): grad for owner, grad in zip(owners, grads[len(leaves):])}
    observed.update((name, spec_grad(parts, by_owner)) for name, parts in stored.items())
    return {name: to_numpy(grad) for name, grad in observed.items()}


def observe(trial: Trial) -> dict:
    """The trial's outputs in float64; a forward that raises or returns the wrong structure
    becomes a Finding with the diagnosis its failure points to."""
    return {name: to_numpy(t) for name, t in observe_tensors(trial).items()}


def observe_tensors(trial: Trial, x=None, hx=None) -> dict:
    """`observe` as tensors, optionally for given input tensors."""
    try:
        return trial.call() if x is None else trial.call(x, hx)
    except Finding as finding:
        finding.diagnosis = finding.diagnosis or diagnose(trial, None)
        raise


def compare_forward(trial: Trial, observed: dict) -> dict:
    """Compare with the reference; Finding with numbers, divergence and diagnosis if it differs."""
    expected = trial.expected()
    tol = trial.tolerance()

    def explain(name: str, numbers: dict) -> str | None:
        numbers.update(locate(trial, observed, expected, tol))
        if name == "output" and numbers.get("timestep") is not None:
            numbers.update(_at_divergence(trial, observed, expected, numbers))
        return diagnose(trial, observed)

    return require_outputs_close(observed, expected, tol, explain)


def _at_divergence(trial: Trial, observed: dict, expected: dict, numbers: dict) -> dict:
    """The output's values at the first diverging timestep (first sequence of the batch, the
    diverging direction's features), for the finding's sample."""
    cfg, t = trial.cfg, numbers["timestep"]
    width = cfg.output_size
    d = 1 if numbers.get("direction") == "reverse" else 0
    def row(output):
        seq = time_major(cfg, np.asarray(output))
        return seq[t, 0, d * width:(d + 1) * width]
    batch_first = cfg.batch_first and trial.case.batched
    at = [t] if not trial.case.batched else ([0, t] if batch_first else [t, 0])
    return {"at": at, "expected": row(expected["output"])[:SAMPLE_VALUES].tolist(),
            "actual": row(observed["output"])[:SAMPLE_VALUES].tolist()}
