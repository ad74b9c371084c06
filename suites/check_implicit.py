"""Conformance checks for kind "implicit": an ImplicitRNN against `rnnbench.reference.implicit`.

A candidate is built as `constructor(**cfg.constructor_kwargs())` (torchidl's documented
constructor), moved to float64 and the device, and given each case's parameters through
`load_state_dict`, its names matched to the spec's exactly or by their last components (torchidl
nests them as `recurrent.layer.A`). D's shape says which variant the candidate is: every numeric
check compares it with that variant's reference, and `d-variant` alone reports which.

A failure is diagnosed by recomputing the reference with a known mistake (the straight-through
gradient of the rescale, the solve without the rescale) or by reading the candidate's own fixed
point: with C, D and the head made identities, one step's output is the equilibrium itself, so
its residual can be compared with the solver's tolerance (`residual`).

Like every check module, the functions take (subject, case), return numbers when the candidate
passed and raise `Finding` when it did not; `ROWS` lists them for the catalogue, each row the
keyword arguments of a `rnnbench.suites.checks.Check`.
"""
from __future__ import annotations

import copy
import pickle
import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from rnnbench.impls.registry import one_line
from rnnbench.reference.implicit import (
    PARAM_NAMES, ImplicitConfig, Normal, backward, d_variant_of, forward, gradient_tolerance,
    implicit_init_spec, implicit_param_shapes, output_tolerance, rescale, residual)
from rnnbench.reference.tolerance import Tolerance, tolerance
from rnnbench.suites.check_errors import REJECTIONS, rejection_names
from rnnbench.suites.compare import difference, summary
from rnnbench.suites.results import Finding
from rnnbench.suites.statistics import ALPHA
from rnnbench.suites.subject import call, to_numpy



# --- Cases: data. -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """A configuration, a batch and a sequence length, and how A is drawn (`a_draw`):
    "init"        the spec's init;
    "rescaled"    ||A||_inf = 3, so the rescale is active;
    "slow"        nonnegative A with every row summing to 0.9, nonnegative B and input: every
                  unit is active, Picard contracts by exactly 0.9 and needs ~100 iterations;
    "triangular"  strictly upper triangular, ||A||_inf = 2: the rescale is active, and the
                  equilibrium also exists without it, so a missing rescale is recognisable.
    Same interface as `rnnbench.suites.cases.Case` where the runner looks (kind, batched, quick)."""

    name: str
    config: ImplicitConfig
    batch: int
    steps: int
    a_draw: str = "init"
    quick: bool = False

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def batched(self) -> bool:
        return True

    @property
    def needs(self) -> tuple[str, ...]:
        return ()


SMALL = ImplicitConfig(3, 5, 6, 2)
# Solved to near rounding error, the solver's error drops out and the policy becomes as tight as
# the arithmetic: the numerics themselves are checked sharply.
EXACT = SMALL.replace(tol=1e-12, max_iter=10_000)
CASES = {case.name: case for case in (
    Case("small", SMALL, batch=4, steps=7, quick=True),
    Case("rescaled", SMALL, batch=4, steps=7, a_draw="rescaled", quick=True),
    Case("small-exact", EXACT, batch=4, steps=7, quick=True),
    Case("rescaled-exact", EXACT, batch=4, steps=7, a_draw="rescaled", quick=True),
    Case("slow", SMALL, batch=4, steps=5, a_draw="slow", quick=True),
    Case("triangular", SMALL, batch=3, steps=4, a_draw="triangular", quick=True),
    # One step with n = h = q, so that C, D and the head can be identities (see solver_residual).
    Case("probe", ImplicitConfig(3, 6, 6, 6), batch=5, steps=1, a_draw="slow", quick=True),
    Case("documented-example", ImplicitConfig(1, 128, 64, 1), batch=100, steps=60, quick=True),
)}


def case_params(case: Case, variant: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The case's parameters by spec name: drawn from the spec's init, then A as `case.a_draw` says."""
    spec = implicit_init_spec(case.config)
    params = {}
    for name, shape in implicit_param_shapes(case.config, variant).items():
        dist = spec[name]
        params[name] = (rng.normal(dist.mean, dist.std, shape) if isinstance(dist, Normal)
                        else rng.uniform(dist.low, dist.high, shape))
    a = params["A"]
    if case.a_draw == "slow":
        params["A"] = 0.9 * np.abs(a) / np.abs(a).sum(axis=1, keepdims=True)
        params["B"] = np.abs(params["B"])
    elif case.a_draw == "rescaled":
        params["A"] = 3.0 * a / np.abs(a).sum(axis=1).max()
    elif case.a_draw == "triangular":
        upper = np.triu(a, 1)
        params["A"] = 2.0 * upper / np.abs(upper).sum(axis=1).max()
    return params


def case_input(case: Case, rng: np.random.Generator) -> np.ndarray:
    x = rng.normal(size=(case.batch, case.steps, case.config.input_size))
    return np.abs(x) if case.a_draw == "slow" else x


# --- A candidate under test. --------------------------------------------------------------------

@dataclass
class Candidate:
    """A constructed float64 model, its spec-name -> state_dict-key map, and its D variant."""

    model: torch.nn.Module
    keys: dict[str, str]
    variant: str
    device: str

    @property
    def nested(self) -> list[str]:
        """Spec names found only as the last components of a key."""
        return [name for name, key in self.keys.items() if key != name]

    def params(self) -> dict[str, np.ndarray]:
        state = call("state_dict()", self.model.state_dict)
        return {name: to_numpy(state[key]) for name, key in self.keys.items()}

    def load(self, params: dict[str, np.ndarray]) -> None:
        state = call("state_dict()", self.model.state_dict)
        for name, key in self.keys.items():
            state[key] = torch.as_tensor(params[name], dtype=state[key].dtype)
        call("load_state_dict()", self.model.load_state_dict, state)

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, dtype=torch.float64, device=self.device)

    def run(self, x: np.ndarray, model: torch.nn.Module | None = None) -> np.ndarray:
        """The output for x of this model (or of `model`, a copy of it), warnings silenced."""
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return to_numpy(call("forward", model or self.model, self.tensor(x)))

    def parameter(self, name: str) -> torch.nn.Parameter:
        return dict(self.model.named_parameters())[self.keys[name]]


def spec_keys(model: torch.nn.Module) -> dict[str, str]:
    """Each spec name's state_dict key: the same name, else the one key ending in "." + name."""
    state_keys = list(call("state_dict()", model.state_dict))
    keys = {}
    for name in PARAM_NAMES:
        matches = [k for k in state_keys if k == name] or [k for k in state_keys if k.endswith("." + name)]
        if len(matches) != 1:
            raise Finding(f"no {'unique ' if matches else ''}parameter {name} among the "
                          f"state_dict keys {', '.join(state_keys)}", "param_names", parameter=name)
        keys[name] = matches[0]
    return keys


def build(subject, cfg: ImplicitConfig) -> Candidate:
    """Construct with the documented keyword arguments, in float64 on the subject's device."""
    model = subject.construct(cfg)
    model = call("module.to()", model.to, device=subject.device, dtype=torch.float64)
    keys = spec_keys(model)
    d_shape = tuple(model.state_dict()[keys["D"]].shape)
    variant = d_variant_of(cfg, d_shape)
    if variant is None:
        raise Finding(f"D has shape {d_shape}, neither variant's "
                      f"({implicit_param_shapes(cfg, 'documented')['D']} documented, "
                      f"{implicit_param_shapes(cfg, 'library')['D']} library)", "param_shapes",
                      parameter="D")
    return Candidate(model, keys, variant, subject.device)


def prepared(subject, case: Case, cfg: ImplicitConfig | None = None):
    """A candidate (of `cfg`, default the case's) holding the case's parameters; the
    parameters; the case's input. Both are drawn from the subject's seed and the case."""
    candidate = build(subject, cfg or case.config)
    params = case_params(case, candidate.variant, subject.rng("implicit-params", case.name))
    candidate.load(params)
    return candidate, params, case_input(case, subject.rng("implicit-input", case.name))


def residual_allowance(tol: float) -> float:
    """The largest residual a solver that met `tol` leaves, plus the residual's own rounding."""
    return tol + tolerance("float64").atol


def solver_residual(subject) -> float:
    """The fixed-point residual of the candidate's own solution of one equilibrium.

    The probe case runs one step from H_0 = 0 with C = I, D = 0 and the head W = I, b = 0, so
    the output is X_1 itself. Any Picard iterate that met the stopping rule has a residual
    |X - phi(X A~^T + Z)| below tol: the previous iterate's is exactly its last change.
    """
    case = CASES["probe"]
    cfg = case.config
    candidate, params, x = prepared(subject, case)
    params.update(C=np.eye(cfg.hidden_size), D=np.zeros_like(params["D"]),
                  **{"linear.weight": np.eye(cfg.output_size), "linear.bias": np.zeros(cfg.output_size)})
    candidate.load(params)
    states = candidate.run(x)
    a_eff = rescale(params["A"], cfg.kappa)[0]
    return residual(a_eff, x[:, 0] @ params["B"][:, :cfg.input_size].T, states, cfg.phi)


# --- The checks. --------------------------------------------------------------------------------

def check_parameters(subject, case) -> dict:
    """Parameters A, B, C, D, linear.weight, linear.bias with the spec's shapes (either D)."""
    candidate = build(subject, case.config)
    expected = implicit_param_shapes(case.config, candidate.variant)
    state = candidate.model.state_dict()
    for name, key in candidate.keys.items():
        if tuple(state[key].shape) != expected[name]:
            raise Finding(f"{name} has shape {tuple(state[key].shape)}, expected {expected[name]}",
                          "param_shapes", parameter=name)
    if candidate.nested:
        found = ", ".join(candidate.keys[name] for name in candidate.nested)
        raise Finding(f"parameters named {found} instead of {', '.join(candidate.nested)}",
                      "param_names", parameter=candidate.nested[0])
    return {"variant": candidate.variant}


def check_d_variant(subject, case) -> dict:
    """D is the expected variant's: h x p (documented, D U_t) or h x (p+h) (D [U_t, H_{t-1}])."""
    cfg = case.config
    candidate = build(subject, cfg)
    shape = implicit_param_shapes(cfg, candidate.variant)["D"]
    if candidate.variant != cfg.d_variant:
        diagnosis = "implicit_d_library_variant" if candidate.variant == "library" else None
        raise Finding(f"D is {shape}: the {candidate.variant} variant, not the {cfg.d_variant} "
                      f"one (the numeric checks compare with the {candidate.variant} reference)",
                      diagnosis, variant=candidate.variant)
    return {"variant": candidate.variant}


def check_init(subject, case) -> dict:
    """A, B, C, D from N(0, 1/n^2) (randn / n), the head from U(-1/sqrt(h), 1/sqrt(h))."""
    from scipy.stats import kstest

    params = build(subject, case.config).params()
    worst = 1.0
    for name, dist in implicit_init_spec(case.config).items():
        p_value = float(kstest(params[name].ravel(), dist.cdf).pvalue)
        worst = min(worst, p_value)
        if p_value < ALPHA:
            raise Finding(f"{name} is not drawn from {dist} (std {params[name].std():.3g}, "
                          f"KS p-value {p_value:.1e})", parameter=name, p_value=p_value)
    return {"min_p_value": worst}


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


def check_forward(subject, case) -> dict:
    """The output equals the variant's float64 reference within the solver's error bound."""
    candidate, params, x = prepared(subject, case)
    given = x.copy()
    actual = candidate.run(given)
    if not np.array_equal(given, x):
        raise Finding("forward modified its input", "input_mutated")
    numbers = difference(actual, forward(case.config, params, x).output,
                         output_tolerance(case.config, params, x))
    if not numbers["excess"] <= 1.0:
        raise Finding(summary("the output", numbers), _forward_diagnosis(subject, case, params, x, actual),
                      **numbers)
    return {"variant": candidate.variant, **numbers}


def _forward_diagnosis(subject, case, params, x, actual) -> str | None:
    """The solve without the rescale, where the case allows it; else the solver's residual."""
    if case.a_draw == "triangular":
        unscaled = forward(case.config, params, x, well_posed=False).output
        if output_tolerance(case.config, params, x).excess(actual, unscaled) <= 1.0:
            return "implicit_not_well_posed"
    return _solver_diagnosis(subject)


def _solver_diagnosis(subject) -> str | None:
    """implicit_solver_early_stop when the candidate's own fixed point misses its tolerance."""
    try:
        stops_early = solver_residual(subject) > residual_allowance(CASES["probe"].config.tol)
    except Finding:  # the probe itself failed: the finding at hand stands undiagnosed
        return None
    return "implicit_solver_early_stop" if stops_early else None


def _gradients(subject, case):
    """The candidate's gradients (spec names and "input") for a random output gradient, and the
    reference's, the parameters and the input."""
    candidate, params, x = prepared(subject, case)
    grad_out = subject.rng("implicit-grad-out", case.name).normal(size=(case.batch, case.config.output_size))
    inputs = candidate.tensor(x).requires_grad_(True)
    wrt = {name: candidate.parameter(name) for name in PARAM_NAMES} | {"input": inputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = call("forward", candidate.model, inputs)
        grads = call("backward", torch.autograd.grad, output, list(wrt.values()),
                     candidate.tensor(grad_out), allow_unused=True)
    missing = [name for name, grad in zip(wrt, grads) if grad is None]
    if missing:
        raise Finding(f"no gradient reaches {', '.join(missing)}", parameter=missing[0])
    actual = {name: to_numpy(grad) for name, grad in zip(wrt, grads)}
    return actual, backward(case.config, params, x, grad_out), params, x, grad_out


def check_gradients(subject, case) -> dict:
    """Gradients w.r.t. the input and every parameter equal the reference's implicit
    differentiation (the rescale differentiated too) within the gradient policy."""
    cfg = case.config
    actual, expected, params, x, grad_out = _gradients(subject, case)
    tols = gradient_tolerance(cfg, params, x, grad_out)
    compared = {name: difference(actual[name], expected[name], tols[name]) for name in expected}
    failing = [name for name in expected if not compared[name]["excess"] <= 1.0]
    if not failing:
        closest = max(compared, key=lambda name: compared[name]["excess"])
        return {"parameter": closest, **compared[closest]}
    name = failing[0]
    diagnosis = None
    if failing == ["A"]:
        through = backward(cfg, params, x, grad_out, straight_through=True)["A"]
        if tols["A"].excess(actual["A"], through) <= 1.0:
            diagnosis = "implicit_rescale_straight_through"
    diagnosis = diagnosis or _solver_diagnosis(subject)
    raise Finding(summary(f"the gradient w.r.t. {name}", compared[name]), diagnosis,
                  parameter=name, **compared[name])


def check_residual(subject, case) -> dict:
    """The candidate's own fixed point meets its tolerance: residual <= tol."""
    tol = case.config.tol
    measured = solver_residual(subject)
    if not measured <= residual_allowance(tol):
        raise Finding(f"the solver's fixed point has residual {measured:.2e} > tol {tol:.1e}",
                      "implicit_solver_early_stop", residual=measured, tol=tol)
    return {"residual": measured, "tol": tol}


def check_well_posed(subject, case) -> dict:
    """With ||A||_inf > kappa the solve uses A rescaled to kappa, and the stored A is unchanged
    by forward and backward."""
    candidate, params, x = prepared(subject, case)
    before = candidate.parameter("A").detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = call("forward", candidate.model, candidate.tensor(x))
        call("backward", output.sum().backward)
    if not torch.equal(before, candidate.parameter("A").detach()):
        raise Finding("the stored A changed in forward and backward", "implicit_param_mutated",
                      parameter="A")
    expected = forward(case.config, params, x)
    actual = to_numpy(output)
    numbers = difference(actual, expected.output, output_tolerance(case.config, params, x))
    if not numbers["excess"] <= 1.0:
        norm = np.abs(params["A"]).sum(axis=1).max()
        raise Finding(summary(f"with ||A||_inf = {norm:.2g} the output", numbers, "the rescaled "
                      "model's"), _forward_diagnosis(subject, case, params, x, actual), **numbers)
    return {"scale": float(expected.scale), **numbers}


def check_non_convergence(subject, case) -> dict:
    """With max_iter=1 the solve warns (a RuntimeWarning) and still returns finite outputs."""
    cfg = case.config.replace(max_iter=1)
    candidate, _, x = prepared(subject, case, cfg)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        output = call("forward with max_iter=1", candidate.model, candidate.tensor(x))
    shape = (case.batch, cfg.output_size)
    if tuple(output.shape) != shape or not torch.isfinite(output).all():
        raise Finding(f"after a capped solve the output is {tuple(output.shape)}, finite: "
                      f"{bool(torch.isfinite(output).all())}; expected finite values of shape {shape}")
    categories = [w.category for w in caught if issubclass(w.category, RuntimeWarning)]
    if not categories:
        # Silent, and as converged as an uncapped solve: the cap never reached the solver.
        _, params, _ = prepared(subject, case, cfg)
        converged = forward(case.config, params, x).output
        numbers = difference(to_numpy(output), converged, output_tolerance(case.config, params, x))
        if numbers["excess"] <= 1.0:
            raise Finding("with max_iter=1 the output is the fully converged one and no warning "
                          "came: the constructor ignored the cap", "implicit_solver_settings_ignored")
        raise Finding("max_iter=1 left the solve unconverged without a RuntimeWarning",
                      "implicit_no_convergence_warning")
    return {"warning": categories[0].__name__}


def check_batch_invariance(subject, case) -> dict:
    """Each sample run alone gives its output in the batch, within twice the solver bound (the
    batch-wide stopping rule may stop at other iterates)."""
    candidate, params, x = prepared(subject, case)
    together = candidate.run(x)
    alone = np.concatenate([candidate.run(x[i:i + 1]) for i in range(case.batch)])
    bound = output_tolerance(case.config, params, x)
    numbers = difference(alone, together, Tolerance(2 * bound.atol, bound.rtol))
    if not numbers["excess"] <= 1.0:
        raise Finding(summary("an output computed one sample at a time", numbers, "the batch's"),
                      _solver_diagnosis(subject), **numbers)
    return numbers


def _same(first: np.ndarray, second: np.ndarray, what: str, diagnosis: str | None = None) -> dict:
    numbers = difference(second, first, tolerance("float64"))
    if not numbers["excess"] <= 1.0:
        raise Finding(summary(what, numbers, "the original's"), diagnosis, **numbers)
    return numbers


def check_state_dict(subject, case) -> dict:
    """A fresh model loaded with state_dict() computes what the original does."""
    original, _, x = prepared(subject, case)
    fresh = build(subject, case.config).model
    call("load_state_dict()", fresh.load_state_dict, original.model.state_dict())
    return _same(original.run(x), original.run(x, fresh), "the output after load_state_dict()")


COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda model: pickle.loads(pickle.dumps(model))}


def check_copy(subject, case, how: str) -> dict:
    """A copy (copy.deepcopy, or a pickle round trip) computes what the original does."""
    original, _, x = prepared(subject, case)
    duplicate = call(how, COPIES[how], original.model)
    return _same(original.run(x), original.run(x, duplicate), f"the output of a {how} copy")


def check_independent_instances(subject, case) -> dict:
    """Building a second model with other solver settings leaves the first one's alone."""
    first, _, x = prepared(subject, case)
    before = first.run(x)
    build(subject, case.config.replace(tol=0.1, max_iter=2))
    return _same(before, first.run(x), "after a second model (tol=0.1, max_iter=2) was built, "
                 "the first one's output", "implicit_shared_solver_state")


@dataclass(frozen=True)
class WrongInput:
    """A wrong input made from a correct one, and what is wrong with it."""

    name: str
    description: str
    change: object  # torch.Tensor -> torch.Tensor


WRONG_INPUTS = (
    WrongInput("input-size", "input with one feature too many", lambda x: torch.cat([x, x[..., :1]], -1)),
    WrongInput("input-rank-high", "input with an extra axis", lambda x: x[None]),
    WrongInput("input-rank-low", "input without its batch axis", lambda x: x[0]),
    WrongInput("input-dtype", "float32 input to a float64 model", lambda x: x.float()),
)


def check_rejected(subject, case, wrong: WrongInput) -> dict:
    """A wrong input raises ValueError, RuntimeError or TypeError, and is never accepted."""
    candidate, _, x = prepared(subject, case)
    bad = wrong.change(candidate.tensor(x))
    shown = f"{wrong.description} ({tuple(bad.shape)}, {bad.dtype})"
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            candidate.model(bad)
    except REJECTIONS as exc:
        return {"raised": type(exc).__name__}
    except Exception as exc:
        raise Finding(f"{shown} raised {one_line(exc)}, expected {rejection_names()}") from exc
    raise Finding(f"{shown} was accepted", "silent_broadcast")


# --- The catalogue rows: keyword arguments of rnnbench.suites.checks.Check. ----------------------

def _table(*names: str) -> tuple[Case, ...]:
    return tuple(CASES[name] for name in names)


ROWS = (
    dict(name="parameters", category="construction", function=check_parameters, table=_table("small")),
    dict(name="d-variant", category="construction", function=check_d_variant, table=_table("small")),
    dict(name="init", category="init", function=check_init, table=_table("documented-example")),
    dict(name="shapes", category="shapes", function=check_documented_example,
         table=_table("documented-example")),
    dict(name="forward", category="forward", function=check_forward,
         table=_table("small", "rescaled", "slow", "small-exact"), dtype="float64"),
    dict(name="gradients", category="gradients", function=check_gradients,
         table=_table("small", "small-exact", "rescaled-exact"), dtype="float64", backward=True),
    dict(name="residual", category="solver", function=check_residual, table=_table("probe"),
         dtype="float64"),
    dict(name="well-posed", category="solver", function=check_well_posed,
         table=_table("triangular"), dtype="float64", backward=True),
    dict(name="non-convergence", category="solver", function=check_non_convergence,
         table=_table("slow"), dtype="float64"),
    dict(name="batch-invariance", category="solver", function=check_batch_invariance,
         table=_table("slow"), dtype="float64"),
    dict(name="state-dict", category="construction", function=check_state_dict,
         table=_table("small"), dtype="float64"),
    *(dict(name=how, category="construction", function=partial(check_copy, how=how),
           table=_table("small"), dtype="float64") for how in COPIES),
    dict(name="independent-instances", category="construction", function=check_independent_instances,
         table=_table("slow"), dtype="float64"),
    *(dict(name=f"error-{wrong.name}", category="errors", function=partial(check_rejected, wrong=wrong),
           table=_table("small"), dtype="float64") for wrong in WRONG_INPUTS),
)
