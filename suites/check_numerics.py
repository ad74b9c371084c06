"""Forward outputs and gradients against the float64 reference, for every kind.

Parameters are drawn from the spec's init distributions and loaded into the module; the
reference gets exactly the values the module holds (rounded to its dtype) and the same inputs,
so the only difference left is the arithmetic. The tolerance is the spec's for the dtype, the
number of steps and the depth (`rnnbench.reference.tolerance`; a kind whose tolerance depends on
the run, such as an iterative solve's error bound, gives its own). In float64 it is tight enough
that any real mistake fails; in float32, bfloat16 and float16 it is the policy's.

A module's own trainable parameters that no spec parameter is read from (a peephole, a norm's
gain) are set to other values once the outputs match: a function that depends on them is another
function, even where their initial values (a peephole at zero) hide it.

A failure says which output (or gradient) differs and by how much, and through the kind's hooks
where the forward pass first diverges (`SuiteKind.locate`) and which mistake explains it
(`SuiteKind.diagnose`, `SuiteKind.diagnose_gradients`).
"""
from __future__ import annotations

import numpy as np
import torch

from rnnbench.impls.adapt import unwrapped
from rnnbench.suites.compare import (precision_reached, require_gradients_close,
                                     require_outputs_close)
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run
from rnnbench.suites.subject import call, params_of, spec_grad, spec_parameters, to_numpy
from rnnbench.wording import listed


def check_forward(subject, case, dtype: str, again: bool = True) -> dict:
    """Outputs and final states equal the reference's within the policy tolerance, whatever
    values the module's parameters outside the spec's hold; with the state omitted, on a second
    call too (`again`: `require_same_again`)."""
    run = Run(subject, case, dtype, "forward")
    try:
        observed = observe(run)
    except Finding as misshapen:
        require_conforming_close(run, misshapen)
        raise
    try:
        numbers = compare_forward(run, observed)
    except Finding as wrong:
        raise _other_parameters_at_zero(run, wrong) or wrong from None
    if again and run.hx64 is None:
        require_same_again(run)
        require_none_as_omitted(run)
    require_no_other_parameters(run)
    return numbers


def require_same_again(run: Run) -> None:
    """A second call with the state omitted answers as the first did, in eval mode and, where
    nothing may drop, in training mode (where truncated backpropagation keeps its state):
    forward carries nothing from one call to the next (a stateful module starts the second
    where the first ended; one that changed its own parameters is said so). A first call that
    is wrong in training mode is the training checks' to judge."""
    modes = (False, True) if not getattr(run.cfg, "dropout", 0.0) else (False,)
    was_training = run.module.training
    try:
        for training in modes:
            run.module.train(training)
            if training:
                try:
                    compare_forward(run, observe(run))
                except Finding:
                    return
            compare_forward(run, observe(run))
    except Finding as again:
        now = params_of(run.module, run.cfg, run.pmap)
        changed = [name for name, value in run.params.items()
                   if not np.array_equal(now[name], value)]
        if changed:
            again.message += f" (on a second call, after the first changed {listed(changed)})"
            raise
        mode = " in training mode" if run.module.training else ""
        raise Finding(f"a second call with the state omitted{mode} differs from the reference "
                      f"where the first agreed: {again.message}", "state_kept_between_calls",
                      **again.numbers) from None
    finally:
        run.module.train(was_training)


def require_none_as_omitted(run: Run) -> None:
    """forward(input, None) answers as forward(input) does: torch.nn documents hx=None as the
    state omitted, and code that carries the state from call to call starts from `hidden =
    None` (a forward whose default is another sentinel, `hx=False`, crashes on it). Judged
    beside a call without the state made then: a module that the calls before changed (one
    that breaks in eval mode after training) fails both alike, which None does not explain. A
    forward that takes no state at all (or a kind without one) is not asked."""
    if not run.subject.takes_state or not run.spec.state_names(run.cfg):
        return
    x = run.tensors()[0]
    try:
        observed = {name: to_numpy(t) for name, t in
                    run.unpack(run.cfg, x, call("forward", run.module, x, None)).items()}
        compare_forward(run, observed)
    except Finding as with_none:
        try:
            compare_forward(run, observe(run))
        except Finding:
            return  # omitted, the state fails now too
        raise Finding(f"forward(input, None) fails where forward(input) agrees: "
                      f"{with_none.message}", "h0_none_unhandled", **with_none.numbers) from None


def require_conforming_close(run: Run, misshapen: Finding) -> None:
    """The well-formed outputs of a forward whose final state alone is misshapen (h_n without
    its layer axis) equal the reference's; else that is the finding, diagnosed as a forward's
    is, the misshapen part behind it: wrong values are not hidden behind a wrong shape. (A
    misshapen part whose diagnosis explains the values too, batch_first ignored, is the finding
    as it is.)"""
    first = run.spec.output_names(run.cfg)[0]
    if misshapen.diagnosis not in (None, "h_n_no_layer_dim") or first not in misshapen.conforming:
        return
    observed = {name: to_numpy(value) for name, value in misshapen.conforming.items()}
    try:
        compare_forward(run, observed)
    except Finding as wrong:
        wrong.message = f"{wrong.message} (and {misshapen.message})"
        raise wrong from None


def require_no_other_parameters(run: Run) -> None:
    """The outputs still match with every trainable parameter outside the spec's set to normal
    draws; Finding(other_parameters) naming those that move them (each varied alone) when they
    do not. Their values are restored either way."""
    others = other_parameters(run)
    if not others:
        return
    finding = _varied(run, others)
    if finding is None:
        return
    movers = [name for name in others if _varied(run, {name: others[name]}) is not None]
    movers = movers or list(others)  # only together: all of them
    raise Finding(f"the output depends on {listed(movers)}, which the spec's function has no place "
                  f"for: set to other values, {finding.message}", "other_parameters",
                  parameter=movers[0])


def _other_parameters_at_zero(run: Run, wrong: Finding) -> Finding | None:
    """Finding(other_parameters) where the outputs are wrong as built and right with every
    trainable parameter outside the spec's at zero (biases kept though bias=False, at their
    own init): those parameters are the cause, not the function they take part in."""
    others = other_parameters(run)
    if not others or _varied(run, others, zero=True) is not None:
        return None
    return Finding(f"the output depends on {listed(list(others))}, which the spec's function has "
                   f"no place for: with {'it' if len(others) == 1 else 'them'} at zero it is the "
                   f"reference's; as built, "
                   f"{wrong.message}", "other_parameters", parameter=next(iter(others)))


def other_parameters(run: Run) -> dict[str, torch.nn.Parameter]:
    """The module's trainable parameters that share no storage with a state_dict entry a spec
    parameter is read from, by name."""
    module = unwrapped(run.module)
    state = call("state_dict()", module.state_dict)
    read = {state[key].untyped_storage().data_ptr() for key in run.pmap.keys()}
    named = call("named_parameters()", lambda: list(module.named_parameters()))
    return {name: p for name, p in named
            if p.requires_grad and p.untyped_storage().data_ptr() not in read}


def _varied(run: Run, parameters: dict[str, torch.nn.Parameter], zero: bool = False
            ) -> Finding | None:
    """The forward's finding with `parameters` set to normal draws, or to zero (None if it
    matches then)."""
    rng = run.subject.rng("other-parameters", run.case.name, *parameters)
    kept = {name: p.detach().clone() for name, p in parameters.items()}
    try:
        with torch.no_grad():
            for p in parameters.values():
                p.copy_(torch.zeros_like(p) if zero else
                        torch.as_tensor(rng.normal(size=tuple(p.shape)), dtype=p.dtype))
        compare_forward(run, observe(run))
    except Finding as finding:
        return finding
    finally:
        with torch.no_grad():
            for name, p in parameters.items():
                p.copy_(kept[name])
    return None


def check_gradients(subject, case, dtype: str, inputs: bool = True) -> dict:
    """Gradients w.r.t. the input, the initial state (when given) and every parameter equal the
    reference's BPTT gradients for a random output gradient; without `inputs`, the parameters'
    alone, with the input and state not requiring gradients, as in a model's first layer (a
    backward may take another path then)."""
    # Training mode: cuDNN computes RNN gradients only there; these cases have no dropout.
    run = Run(subject, case, dtype, "gradients", train=True)
    outputs, leaves, stored = forward_for_gradients(run, inputs)
    forward = {name: to_numpy(t) for name, t in outputs.items()}
    try:
        compare_forward(run, forward)
        imprecise = None
    except Finding as finding:
        if finding.diagnosis != "lower_precision":
            raise _other_parameters_at_zero(run, finding) or finding from None
        # Right to a coarser dtype's accuracy: the gradients are still compared, to that
        # accuracy, so wrong ones are the finding rather than hidden behind the imprecision.
        imprecise = finding
    observed, expected, grad_out = gradients(run, outputs, leaves, stored)
    tol = (run.tolerance(gradient=True, grad_out=grad_out) if imprecise is None
           else run.tolerance_as(precision_reached(run, forward, run.expected()), gradient=True))
    try:
        numbers = require_gradients_close(observed, expected, tol)
    except Finding as finding:
        diagnose = subject.suite.diagnose_gradients
        if diagnose and not finding.diagnosis:
            finding.diagnosis = diagnose(run, observed, expected, grad_out)
        raise
    if imprecise is not None:
        raise imprecise
    return numbers


def forward_for_gradients(run: Run, inputs: bool = True) -> tuple[dict, dict, dict]:
    """The run's forward outputs (tensors), computed from leaves that require grad (with
    `inputs`, the input and the given state; none without): the outputs, the leaves keyed as the
    kind's backward keys their gradients, and where each spec parameter is stored
    (`spec_parameters`)."""
    stored = spec_parameters(run.module, run.cfg, run.pmap)
    x, hx = run.tensors()
    leaves = {"input": x, **(hx or {})} if inputs else {}
    for leaf in leaves.values():
        leaf.requires_grad_(True)
    return observe_tensors(run, x, hx), leaves, stored


def gradients(run: Run, outputs: dict, leaves: dict, stored: dict) -> tuple[dict, dict, dict]:
    """(the implementation's gradients, the reference's, the output gradient) for a random
    output gradient, in float64, keyed alike. The output gradient is rounded to the run's dtype
    first, so both sides differentiate the same function of the outputs."""
    rng = run.subject.rng("gradients-out", run.case.name)
    grad_out = {name: run.rounded(rng.normal(size=tuple(t.shape))) for name, t in outputs.items()}
    observed = backward(run, outputs, grad_out, leaves, stored)
    # An output the module does not return (its final state) contributes nothing.
    shapes = run.spec.io_shapes(run.cfg, run.case.batch, run.case.steps)
    every = {name: grad_out.get(name, np.zeros(shapes[name]))
             for name in run.spec.output_names(run.cfg)}
    expected = run.spec.backward(run.cfg, run.params, run.x64, run.hx64, every)
    return observed, {name: expected[name] for name in observed}, grad_out


def backward(run: Run, outputs: dict, grad_out: dict, leaves: dict, stored: dict) -> dict:
    """The implementation's gradients of sum(outputs * grad_out) w.r.t. the leaves and every
    spec parameter (cut from the registered parameter storing it), in float64."""
    frozen = [(name, piece.key) for name, parts in stored.items() for owner, _, piece in parts
              if not owner.requires_grad]
    if frozen:  # autograd refuses the whole call for one: say which
        name, key = frozen[0]
        held = "" if key == name else f" (holding {name})"
        raise Finding(f"{key}{held} does not require grad: frozen where torch.nn trains it",
                      parameter=name)
    if not any(t.requires_grad for t in outputs.values()):
        raise Finding("the outputs carry no autograd history (computed outside torch's autograd, "
                      "in NumPy say, or detached): no gradient reaches the input or the "
                      "parameters (declare backward unsupported where it has none)")
    detached = [name for name, t in outputs.items() if not t.requires_grad]
    if detached:  # autograd refuses the whole call for one: say which
        raise Finding(f"{listed(detached)} carr{'ies' if len(detached) == 1 else 'y'} no autograd "
                      "history (detached, or computed under no_grad) where the other outputs "
                      "have one: no gradient flows back through "
                      f"{'it' if len(detached) == 1 else 'them'}")
    owners = list({id(owner): owner for parts in stored.values() for owner, _, _ in parts}.values())
    wrt = [*leaves.values(), *owners]
    try:
        grads = call("backward", torch.autograd.grad, list(outputs.values()), wrt,
                     [run.subject.tensor(grad_out[name], run.dtype) for name in outputs],
                     allow_unused=True)
    except Finding as finding:  # autograd refuses when forward wrote to its input
        pristine = [run.x64, *(run.hx64 or {}).values()]
        if any(not np.array_equal(to_numpy(leaf), value) for leaf, value in zip(leaves.values(), pristine)):
            finding.diagnosis = "input_mutated"
        raise
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(wrt, grads)]  # unused: zero
    observed = dict(zip(leaves, grads))
    by_owner = {id(owner): grad for owner, grad in zip(owners, grads[len(leaves):])}
    observed.update((name, spec_grad(parts, by_owner)) for name, parts in stored.items())
    return {name: to_numpy(grad) for name, grad in observed.items()}


def observe(run: Run) -> dict:
    """The run's outputs in float64; a forward that raises or returns the wrong structure
    becomes a Finding with the diagnosis its failure points to."""
    return {name: to_numpy(t) for name, t in observe_tensors(run).items()}


def observe_tensors(run: Run, x=None, hx=None) -> dict:
    """`observe` as tensors, optionally for given input tensors."""
    try:
        return run.call() if x is None else run.call(x, hx)
    except Finding as finding:
        diagnose = run.subject.suite.diagnose
        finding.diagnosis = finding.diagnosis or (diagnose(run, None, finding.message)
                                                  if diagnose else None)
        raise


def compare_forward(run: Run, observed: dict) -> dict:
    """Compare with the reference; Finding with numbers, divergence and diagnosis if it differs."""
    expected = run.expected()
    suite = run.subject.suite

    def explain(name: str, numbers: dict) -> str | None:
        if suite.locate:
            numbers.update(suite.locate(run, observed, expected, name, numbers))
        return suite.diagnose(run, observed) if suite.diagnose else None

    return require_outputs_close(observed, expected, run.tolerance(), explain)
