"""The implicit RNN (kind "implicit") in the suites: its cases, the names of its mistakes, and the
checks of what only a model solving a fixed point per step has (its solver, its rescale).

Its parameters, init, shapes, float64 forward and gradients, wrong inputs and copies are the
generic checks', against `rnnbench.reference.implicit` through the kind's spec record: the
tolerance is the solver's error bound propagated to the outputs (hence float64 only), D's shape
says which variant a module is and the numeric checks compare it with that variant's reference;
`d-variant` alone reports which. Parameters nested under a prefix (torchidl's
`recurrent.layer.A`) are found by the numeric checks and reported by `parameters`.

A failure is diagnosed (`diagnose`) by recomputing the reference with a known mistake (the
straight-through gradient of the rescale, the solve without the rescale) or by reading the
module's own fixed point: with C, D and the head made identities, one step's output is the
equilibrium itself, so its residual can be compared with the solver's tolerance (`residual`).
"""
from __future__ import annotations

import dataclasses
import warnings
from functools import partial

import numpy as np
import torch

from rnnbench.reference.implicit import (
    KIND, ImplicitConfig, backward, forward, gradient_tolerance, output_tolerance, rescale,
    residual)
from rnnbench.reference.kinds import KINDS as SPECS
from rnnbench.reference.tolerance import Tolerance, tolerance
from rnnbench.suites.cases import Case
from rnnbench.suites.check_errors import INPUT_DTYPE, WRONG_INPUT_SHAPES
from rnnbench.suites.compare import difference, summary
from rnnbench.suites.kinds import SuiteKind, register_kind
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run
from rnnbench.suites.subject import call, to_numpy

DTYPES = ("float64",)  # the tolerance is the solver's error bound, which float32 rounding exceeds


# --- Cases: data. -------------------------------------------------------------------------------

def rescaled(params, x):
    """||A||_inf = 3: the rescale is active."""
    a = params["A"]
    return {**params, "A": 3.0 * a / np.abs(a).sum(axis=1).max()}, x


def slow(params, x):
    """Nonnegative A with every row summing to 0.9, nonnegative B and input: every unit is
    active, Picard contracts by exactly 0.9 and needs ~100 iterations."""
    a = np.abs(params["A"])
    return {**params, "A": 0.9 * a / a.sum(axis=1, keepdims=True), "B": np.abs(params["B"])}, np.abs(x)


def triangular(params, x):
    """Strictly upper triangular A, ||A||_inf = 2: the rescale is active, and the equilibrium
    also exists without it, so a missing rescale is recognisable."""
    upper = np.triu(params["A"], 1)
    return {**params, "A": 2.0 * upper / np.abs(upper).sum(axis=1).max()}, x


SMALL = ImplicitConfig(3, 5, 6, 2)
# Solved to near rounding error, the solver's error drops out and the policy becomes as tight as
# the arithmetic: the numerics themselves are checked sharply.
EXACT = SMALL.replace(tol=1e-12, max_iter=10_000)
_case = partial(Case, h0=False, quick=True)  # the model takes no initial state
CASES = {case.name: case for case in (
    _case("small", SMALL, batch=4, steps=7,
          only=("parameters", "shapes", "forward", "gradients", "errors", "copies", "solver")),
    _case("rescaled", SMALL, batch=4, steps=7, adjust=rescaled, only=("forward",)),
    _case("small-exact", EXACT, batch=4, steps=7, only=("forward", "gradients")),
    _case("rescaled-exact", EXACT, batch=4, steps=7, adjust=rescaled, only=("gradients",)),
    _case("slow", SMALL, batch=4, steps=5, adjust=slow, only=("forward", "solver")),
    _case("documented-example", ImplicitConfig(1, 128, 64, 1), batch=100, steps=60,
          only=("init", "solver")),
    # The solver's own checks: none of the generic ones run on these.
    _case("triangular", SMALL, batch=3, steps=4, adjust=triangular, only=("solver",)),
    # One step with n = h = q, so that C, D and the head can be identities (see solver_residual).
    _case("probe", ImplicitConfig(3, 6, 6, 6), batch=5, steps=1, adjust=slow, only=("solver",)),
)}


# --- Diagnoses. ---------------------------------------------------------------------------------

def residual_allowance(tol: float) -> float:
    """The largest residual a solver that met `tol` leaves, plus the residual's own rounding."""
    return tol + tolerance("float64").atol


def solver_residual(subject) -> float:
    """The fixed-point residual of the module's own solution of one equilibrium.

    The probe case runs one step from H_0 = 0 with C = I, D = 0 and the head W = I, b = 0, so
    the output is X_1 itself. Any Picard iterate that met the stopping rule has a residual
    |X - phi(X A~^T + Z)| below tol: the previous iterate's is exactly its last change.
    """
    run = Run(subject, CASES["probe"], "float64", "probe")
    cfg, params = run.cfg, dict(run.params)
    params.update(C=np.eye(cfg.hidden_size), D=np.zeros_like(params["D"]),
                  **{"linear.weight": np.eye(cfg.output_size), "linear.bias": np.zeros(cfg.output_size)})
    run.load(params)
    states = to_numpy(run.call(*run.tensors())["output"])
    a_eff = rescale(run.params["A"], cfg.kappa)[0]
    return residual(a_eff, run.x64[:, 0] @ run.params["B"][:, :cfg.input_size].T, states, cfg.phi)


def _solver_diagnosis(subject) -> str | None:
    """implicit_solver_early_stop when the module's own fixed point misses its tolerance."""
    try:
        stops_early = solver_residual(subject) > residual_allowance(CASES["probe"].config.tol)
    except Finding:  # the probe itself failed: the finding at hand stands undiagnosed
        return None
    return "implicit_solver_early_stop" if stops_early else None


def _forward_diagnosis(subject, cfg, params, x, actual) -> str | None:
    """The solve without the rescale, where its equilibria exist (a strictly triangular A
    rescaled); else the solver's residual."""
    a = params["A"]
    if rescale(a, cfg.kappa)[1] < 1.0 and not np.tril(a).any():
        unscaled = forward(cfg, params, x, well_posed=False).output
        if output_tolerance(cfg, params, x).excess(actual, unscaled) <= 1.0:
            return "implicit_not_well_posed"
    return _solver_diagnosis(subject)


def diagnose(run: Run, observed: dict | None, message: str = "") -> str | None:
    """The mistake a forward that differs from the reference shows: a solve without the
    rescale, or one that stops early (none for a forward that raised `message`)."""
    if observed is None:
        return None
    return _forward_diagnosis(run.subject, run.cfg, run.params, run.x64, observed["output"])


def diagnose_gradients(run: Run, observed: dict, expected: dict, grad_out: dict) -> str | None:
    """The mistake wrong gradients show: A alone wrong and equal to the straight-through
    gradient of the rescale; else a solve that stops early."""
    cfg, params, x = run.cfg, run.params, run.x64
    tols = gradient_tolerance(cfg, params, x, grad_out["output"])
    failing = [name for name in expected if not tols[name].excess(observed[name], expected[name]) <= 1.0]
    if failing == ["A"]:
        through = backward(cfg, params, x, grad_out["output"], straight_through=True)["A"]
        if tols["A"].excess(observed["A"], through) <= 1.0:
            return "implicit_rescale_straight_through"
    return _solver_diagnosis(run.subject)



# --- The checks only an implicit model has. -----------------------------------------------------

def _output(model: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    """The output for x of `model`, warnings silenced."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_numpy(call("forward", model, x))


def _float64(subject, cfg: ImplicitConfig) -> torch.nn.Module:
    return call("module.to()", subject.construct(cfg).to, device=subject.device, dtype=torch.float64)


def check_d_variant(subject, case) -> dict:
    """D is the expected variant's: h x p (documented, D U_t) or h x (p+h) (D [U_t, H_{t-1}])."""
    run = Run(subject, case, "float64", "d-variant")
    variant, expected = run.cfg.d_variant, case.config.d_variant
    if variant != expected:
        shape = run.spec.param_shapes(run.cfg)["D"]
        diagnosis = "implicit_d_library_variant" if variant == "library" else None
        raise Finding(f"D is {shape}: the {variant} variant, not the {expected} one (the numeric "
                      f"checks compare with the {variant} reference)", diagnosis, variant=variant)
    return {"variant": variant}


def check_documented_example(subject, case) -> dict:
    """The documented example as written (default dtype, the constructor's own parameters)
    returns (batch, output_dim)."""
    cfg = case.config
    model = call("module.to()", subject.construct(cfg).to, subject.device)
    x = torch.randn(case.batch, case.steps, cfg.input_size, device=subject.device)
    output = call("forward", model, x)
    expected = (case.batch, cfg.output_size)
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != expected:
        got = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise Finding(f"output is {got}, expected a tensor of shape {expected}")
    return {}


def check_residual(subject, case) -> dict:
    """The module's own fixed point meets its tolerance: residual <= tol."""
    tol = case.config.tol
    measured = solver_residual(subject)
    if not measured <= residual_allowance(tol):
        raise Finding(f"the solver's fixed point has residual {measured:.2e} > tol {tol:.1e}",
                      "implicit_solver_early_stop", residual=measured, tol=tol)
    return {"residual": measured, "tol": tol}


def check_well_posed(subject, case) -> dict:
    """With ||A||_inf > kappa the solve uses A rescaled to kappa, and the stored A is unchanged
    by forward and backward."""
    run = Run(subject, case, "float64", "well-posed")
    before = run.parameter("A").detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = call("forward", run.module, run.tensors()[0])
        call("backward", output.sum().backward)
    if not torch.equal(before, run.parameter("A").detach()):
        raise Finding("the stored A changed in forward and backward", "implicit_param_mutated",
                      parameter="A")
    cfg, params, x = run.cfg, run.params, run.x64
    expected = forward(cfg, params, x)
    actual = to_numpy(output)
    numbers = difference(actual, expected.output, output_tolerance(cfg, params, x))
    if not numbers["excess"] <= 1.0:
        norm = np.abs(params["A"]).sum(axis=1).max()
        raise Finding(summary(f"with ||A||_inf = {norm:.2g} the output", numbers, "the rescaled "
                      "model's"), _forward_diagnosis(subject, cfg, params, x, actual), **numbers)
    return {"scale": float(expected.scale), **numbers}


def check_non_convergence(subject, case) -> dict:
    """With max_iter=1 the solve warns (a RuntimeWarning) and still returns finite outputs."""
    run = Run(subject, dataclasses.replace(case, config=case.config.replace(max_iter=1)),
              "float64", "non-convergence")
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        output = call("forward with max_iter=1", run.module, run.tensors()[0])
    shape = (case.batch, case.config.output_size)
    if tuple(output.shape) != shape or not torch.isfinite(output).all():
        raise Finding(f"after a capped solve the output is {tuple(output.shape)}, finite: "
                      f"{bool(torch.isfinite(output).all())}; expected finite values of shape {shape}")
    categories = [w.category for w in caught if issubclass(w.category, RuntimeWarning)]
    if not categories:
        # Silent, and as converged as an uncapped solve: the cap never reached the solver.
        cfg = run.cfg.replace(max_iter=case.config.max_iter)
        converged = forward(cfg, run.params, run.x64).output
        numbers = difference(to_numpy(output), converged, output_tolerance(cfg, run.params, run.x64))
        if numbers["excess"] <= 1.0:
            raise Finding("with max_iter=1 the output is the fully converged one and no warning "
                          "came: the constructor ignored the cap", "implicit_solver_settings_ignored")
        raise Finding("max_iter=1 left the solve unconverged without a RuntimeWarning",
                      "implicit_no_convergence_warning")
    return {"warning": categories[0].__name__}


def check_batch_invariance(subject, case) -> dict:
    """Each sample run alone gives its output in the batch, within twice the solver bound (the
    batch-wide stopping rule may stop at other iterates)."""
    run = Run(subject, case, "float64", "batch-invariance")
    x = run.tensors()[0]
    together = _output(run.module, x)
    alone = np.concatenate([_output(run.module, x[i:i + 1]) for i in range(case.batch)])
    bound = output_tolerance(run.cfg, run.params, run.x64)
    numbers = difference(alone, together, Tolerance(2 * bound.atol, bound.rtol))
    if not numbers["excess"] <= 1.0:
        raise Finding(summary("an output computed one sample at a time", numbers, "the batch's"),
                      _solver_diagnosis(subject), **numbers)
    return numbers


def check_independent_instances(subject, case) -> dict:
    """Building a second model with other solver settings leaves the first one's alone."""
    run = Run(subject, case, "float64", "independent-instances")
    before = run.run()
    _float64(subject, case.config.replace(tol=0.1, max_iter=2))
    numbers = difference(run.run()["output"], before["output"], tolerance("float64"))
    if not numbers["excess"] <= 1.0:
        raise Finding(summary("after a second model (tol=0.1, max_iter=2) was built, the first "
                              "one's output", numbers, "the original's"),
                      "implicit_shared_solver_state", **numbers)
    return numbers


# --- The registration: the cases, the solver's checks (fields of a Check), the hooks. ------------

def _table(*names: str) -> tuple[Case, ...]:
    return tuple(CASES[name] for name in names)


SOLVER_CHECKS = (
    dict(name="d-variant", category="construction", function=check_d_variant,
         table=_table("small"), dtype="float64", group="solver"),
    dict(name="documented-example", category="shapes", function=check_documented_example,
         table=_table("documented-example"), group="solver"),
    dict(name="residual", category="solver", function=check_residual, table=_table("probe"),
         dtype="float64", group="solver"),
    dict(name="well-posed", category="solver", function=check_well_posed,
         table=_table("triangular"), dtype="float64", backward=True, group="solver"),
    dict(name="non-convergence", category="solver", function=check_non_convergence,
         table=_table("slow"), dtype="float64", group="solver"),
    dict(name="batch-invariance", category="solver", function=check_batch_invariance,
         table=_table("slow"), dtype="float64", group="solver"),
    dict(name="independent-instances", category="construction", function=check_independent_instances,
         table=_table("slow"), dtype="float64", group="solver"),
)

register_kind(SPECS[KIND], SuiteKind(
    cases=tuple(CASES.values()), dtypes=DTYPES, wrong_inputs=(*WRONG_INPUT_SHAPES, INPUT_DTYPE),
    extra_checks=SOLVER_CHECKS, diagnose=diagnose, diagnose_gradients=diagnose_gradients))
