"""Checks that ask only what every kind's spec record answers (rnnbench.reference.kinds).

A kind registered with `register_kind` is checked on its cases by these: parameter names and
shapes, the init distribution of every parameter, output shapes, the forward (in each of the
kind's dtypes, float64 and float32 by default) against the kind's reference, the gradients w.r.t.
the input, the initial state and every parameter, the input left unmodified, and the wrong inputs
the kind lists rejected. The implicit RNN is checked by these too, with checks of its solver on
top (`check_solver`); torch.nn's six kinds have richer checks of their own (diagnoses, dropout).

The module contract these assume is the one every kind shares: a constructor taking the
config's `constructor_kwargs()`; forward(input) or forward(input, state), the state one tensor
or a tuple in the spec's state order; a tensor, or a tuple in the spec's output order, back;
parameters under the spec's names in state_dict (or under the names of a module nested in
another: what the numeric checks accept and `parameters` reports).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.stats
import torch

from rnnbench.reference import Uniform
from rnnbench.reference.kinds import KindSpec, kind_of, register
from rnnbench.suites import check_errors
from rnnbench.suites.compare import require_gradients_close, require_outputs_close
from rnnbench.suites.kinds import SuiteKind, register_suite_kind, suite_kind
from rnnbench.suites.results import Finding
from rnnbench.suites.statistics import ALPHA
from rnnbench.suites.subject import call, to_numpy

SAMPLES = 1000  # values per parameter for the init test, over as many constructions as needed
INPUT_MEAN = 0.5
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class SpecCase:
    """A configuration of some kind with an input size. `h0`: an initial state is passed.
    `only`: the checks this row is for, by name (parameters, init, shapes, inputs, forward,
    gradients, errors, or a kind's own); empty: every generic one. `adjust`:
    (params, x) -> (params, x), what makes the case what it is from the spec's draws (e.g. a
    recurrent matrix of a given norm); None: the draws as they are."""

    name: str
    config: object
    batch: int
    steps: int = 1
    h0: bool = True
    quick: bool = True
    batched: bool = True
    features: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    adjust: Callable | None = None

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def needs(self) -> tuple[str, ...]:
        return (("initial_state",) if self.h0 else ()) + self.features

    def runs(self, check: str) -> bool:
        """Whether the generic check `check` runs on this row."""
        return not self.only or check in self.only


def register_kind(spec: KindSpec, cases: tuple[SpecCase, ...], dtypes: tuple[str, ...] = DTYPES,
                  diagnose: Callable | None = None, wrong_inputs=()) -> None:
    """Make a new kind known to the spec and give it these checks on `cases`; `dtypes`,
    `diagnose` and `wrong_inputs` as in `suite_record` and `spec_checks`."""
    # The catalogue imports this module (for the built-in kinds' rows): imported here, not above.
    from rnnbench.suites.checks import Check, register_checks

    register(spec)
    register_suite_kind(spec.name, suite_record(dtypes, diagnose))
    register_checks(Check(**row) for row in spec_checks(cases, dtypes, wrong_inputs))


def suite_record(dtypes: tuple[str, ...] = DTYPES, diagnose: Callable | None = None) -> SuiteKind:
    """The suites' record of a kind checked by these checks (see `rnnbench.suites.kinds`)."""
    return SuiteKind(lambda name, cfg, batch, steps: SpecCase(name, cfg, batch, steps, h0=False),
                     check_forward, dtypes, diagnose)


def spec_checks(cases: tuple[SpecCase, ...], dtypes: tuple[str, ...] = DTYPES,
                wrong_inputs=()) -> tuple[dict, ...]:
    """The spec-driven checks on `cases`, as catalogue rows (keyword arguments of a
    `rnnbench.suites.checks.Check`): forward and gradients in each of `dtypes`, the checks of one
    run in the last of them, an `error-<name>` row for each of `wrong_inputs`
    (`check_errors.WrongInput`). A check no case runs on has no row."""
    plain = dtypes[-1]

    def row(name, category, function, check=None, **options):
        table = tuple(case for case in cases if case.runs(check or name))
        if not table:
            return []
        return [dict(name=name, category=category, function=function, table=table, **options)]

    rows = [*row("parameters", "construction", check_parameters),
            *row("init", "init", check_init),
            *row("shapes", "shapes", partial(check_shapes, dtype=plain), dtype=plain),
            *row("inputs", "inputs", partial(check_inputs, dtype=plain), dtype=plain)]
    for dtype in dtypes:
        suffix = "" if dtype == "float64" else f"-{dtype}"
        rows += row(f"forward{suffix}", "forward", partial(check_forward, dtype=dtype), "forward",
                    dtype=dtype)
        rows += row(f"gradients{suffix}", "gradients", partial(check_gradients, dtype=dtype),
                    "gradients", dtype=dtype, backward=True)
    for wrong in wrong_inputs:
        rows += row(f"error-{wrong.name}", "errors",
                    partial(check_errors.check_rejected, wrong=wrong, dtype=plain), "errors",
                    applies=wrong.applies, features=wrong.features, dtype=plain)
    return tuple(rows)


# --- a run of the module next to its reference ---------------------------------------------------

def draw(dist, rng: np.random.Generator, shape) -> np.ndarray:
    """Values from a spec distribution (uniform or normal)."""
    if isinstance(dist, Uniform):
        return rng.uniform(dist.low, dist.high, shape)
    return rng.normal(dist.mean, dist.std, shape)


def draw_case(case: SpecCase, cfg, rng: np.random.Generator) -> tuple[dict, np.ndarray, dict | None]:
    """Float64 parameters of `cfg` (the case's, or the variant a module turned out to be) drawn
    from the spec's init, an input with a nonzero mean, and an initial state if the case passes
    one; the parameters and input as the case's `adjust` makes them."""
    spec = kind_of(cfg)
    params = {name: draw(dist, rng, spec.param_shapes(cfg)[name])
              for name, dist in spec.init_spec(cfg).items()}
    shapes = spec.io_shapes(cfg, case.batch, case.steps)
    x = rng.normal(INPUT_MEAN, 1.0, shapes["input"])
    hx = ({name: 0.5 * rng.normal(size=shapes[name]) for name in spec.state_names(cfg)}
          if case.h0 else None)
    if case.adjust is not None:
        params, x = case.adjust(params, x)
    return params, x, hx


class Run:
    """The case's module built in `dtype`, holding parameters drawn from the spec's init, and
    inputs drawn with a nonzero mean (`draw_case`); float64 copies of exactly what the module
    holds. `config` is the configuration of the variant the module is (`KindSpec.config_of`),
    `keys` each spec parameter's state_dict key."""

    def __init__(self, subject, case: SpecCase, dtype: str, label: str):
        self.subject, self.case, self.dtype = subject, case, dtype
        self.spec = kind_of(case.config)
        self.module = call("module.to()", subject.construct(case.config).to, device=subject.device,
                           dtype=getattr(torch, dtype))
        self.config, self.keys = layout(self.module, self.spec, case.config)  # names, shapes first
        params, x, hx = draw_case(case, self.config, subject.rng(label, case.name))
        self.load(params)
        self.x = self.rounded(x)
        self.hx = None if hx is None else {name: self.rounded(v) for name, v in hx.items()}

    def rounded(self, array) -> np.ndarray:
        return to_numpy(self.subject.tensor(array, self.dtype))

    def load(self, params: dict[str, np.ndarray]) -> None:
        """Set the module's parameters (by spec name) through load_state_dict; `params` then
        holds what the module holds."""
        given = {self.keys[name]: self.subject.tensor(value, self.dtype)
                 for name, value in params.items()}
        call("load_state_dict()", self.module.load_state_dict, given, strict=False)
        state = call("state_dict()", self.module.state_dict)
        self.params = {name: to_numpy(state[key]) for name, key in self.keys.items()}
        if any(not np.array_equal(self.params[n], to_numpy(given[self.keys[n]])) for n in params):
            raise Finding("load_state_dict() did not set the parameters")

    def tensors(self):
        x = self.subject.tensor(self.x, self.dtype)
        hx = None if self.hx is None else [self.subject.tensor(v, self.dtype) for v in self.hx.values()]
        return x, hx

    def call(self, x, hx) -> dict[str, torch.Tensor]:
        """forward on these tensors; its outputs by the spec's names, checked for shape."""
        state = None if hx is None else (hx[0] if len(hx) == 1 else tuple(hx))
        result = call("forward", self.module, *((x,) if state is None else (x, state)))
        names = self.spec.output_names(self.config)
        values = (result,) if len(names) == 1 else result
        if not isinstance(values, (tuple, list)) or len(values) != len(names) or not all(
                isinstance(v, torch.Tensor) for v in values):
            raise Finding(f"forward returned {type(result).__name__}, expected "
                          + (f"a tuple ({', '.join(names)})" if len(names) > 1 else "a Tensor"))
        shapes = self.spec.io_shapes(self.config, self.case.batch, self.case.steps)
        for name, value in zip(names, values):
            if tuple(value.shape) != tuple(shapes[name]):
                raise Finding(f"{name} has shape {tuple(value.shape)}, expected {tuple(shapes[name])}")
        return dict(zip(names, values))

    def parameter(self, name: str) -> torch.nn.Parameter:
        """The registered parameter holding spec parameter `name`."""
        found = dict(call("named_parameters()", lambda: list(
            self.module.named_parameters(remove_duplicate=False))))
        return found[self.keys[name]]

    def tolerance(self, grad_out: dict | None = None):
        """The outputs' tolerance (grad_out None), else the gradients': one, or one per name."""
        if self.spec.run_tolerance is not None:
            return self.spec.run_tolerance(self.config, self.dtype, self.params, self.x, self.hx,
                                           grad_out)
        return self.spec.tolerance(self.config, self.dtype, self.case.steps, grad_out is not None)

    def diagnosis(self, observed: dict, expected: dict, grad_out: dict | None = None) -> str | None:
        """The kind's name for the mistake a failed comparison shows, if its record has one."""
        diagnose = suite_kind(self.case.kind).diagnose
        return None if diagnose is None else diagnose(self.subject, self, observed, expected, grad_out)


def layout(module, spec: KindSpec, cfg) -> tuple[object, dict[str, str]]:
    """The configuration of the variant the module is, and each spec parameter's state_dict key:
    the name itself, else the one key ending in "." + name (a module nested in another).
    Finding(param_names) for a name it lacks, Finding(param_shapes) for a wrong shape."""
    state = call("state_dict()", module.state_dict)
    keys, missing = {}, []
    for name in spec.param_shapes(cfg):
        matches = ([key for key in state if key == name]
                   or [key for key in state if key.endswith("." + name)])
        if len(matches) == 1:
            keys[name] = matches[0]
        else:
            missing.append(name)
    if missing:
        raise Finding(f"state_dict lacks {', '.join(missing)}; it has {', '.join(state)}",
                      "param_names", parameter=missing[0])
    if spec.config_of is not None:
        cfg = spec.config_of(cfg, {name: tuple(state[key].shape) for name, key in keys.items()})
    for name, shape in spec.param_shapes(cfg).items():
        if tuple(state[keys[name]].shape) != tuple(shape):
            raise Finding(f"{name} has shape {tuple(state[keys[name]].shape)}, expected {tuple(shape)}",
                          "param_shapes", parameter=name)
    return cfg, keys


# --- the checks -------------------------------------------------------------------------------

def check_parameters(subject, case: SpecCase) -> dict:
    """state_dict holds the spec's names and shapes (of either variant, where the kind has
    variants), under those names, and nothing else."""
    spec = kind_of(case.config)
    module = subject.construct(case.config)
    _, keys = layout(module, spec, case.config)
    nested = [name for name, key in keys.items() if key != name]
    if nested:
        raise Finding(f"parameters named {', '.join(keys[name] for name in nested)} instead of "
                      f"{', '.join(nested)}", "param_names", parameter=nested[0])
    extra = [key for key in call("state_dict()", module.state_dict) if key not in keys]
    if extra:
        raise Finding(f"state_dict has entries the spec has not: {', '.join(extra[:4])}",
                      "param_names", parameter=extra[0])
    return {"parameters": len(keys)}


def check_init(subject, case: SpecCase) -> dict:
    """Every parameter drawn from its spec distribution: within a uniform's bounds, and a
    Kolmogorov-Smirnov test at `statistics.ALPHA`."""
    spec = kind_of(case.config)
    module = subject.construct(case.config)
    cfg, keys = layout(module, spec, case.config)
    dists = spec.init_spec(cfg)
    constructions = math.ceil(SAMPLES / min(math.prod(s) or 1 for s in spec.param_shapes(cfg).values()))
    drawn = {name: [] for name in dists}
    for construction in range(constructions):
        if construction:
            module = subject.construct(case.config)
        state = call("state_dict()", module.state_dict)
        for name in dists:
            drawn[name].append(to_numpy(state[keys[name]]).ravel())
    worst = 1.0
    for name, dist in dists.items():
        samples = np.concatenate(drawn[name])
        outside = (isinstance(dist, Uniform)
                   and bool(np.any((samples < dist.low) | (samples > dist.high))))
        p_value = float(scipy.stats.kstest(samples, dist.cdf).pvalue)
        worst = min(worst, p_value)
        if outside or p_value < ALPHA:
            raise Finding(f"{name} is not drawn from {dist} (values in [{samples.min():.3g}, "
                          f"{samples.max():.3g}], KS p-value {p_value:.1e})",
                          "init_wrong_distribution", parameter=name)
    return {"constructions": constructions, "worst_p_value": worst}


def check_shapes(subject, case: SpecCase, dtype: str) -> dict:
    """forward returns the spec's outputs in the spec's shapes."""
    run = Run(subject, case, dtype, "shapes")
    run.call(*run.tensors())
    return {}


def check_inputs(subject, case: SpecCase, dtype: str) -> dict:
    """forward leaves its input and initial state unmodified."""
    run = Run(subject, case, dtype, "inputs")
    _call_unmodified(run)
    return {}


def _call_unmodified(run: Run) -> dict[str, torch.Tensor]:
    """run.call on the run's tensors; Finding(input_mutated) when it modified them."""
    x, hx = run.tensors()
    before = [t.clone() for t in [x, *(hx or [])]]
    outputs = run.call(x, hx)
    if any(not torch.equal(a, b) for a, b in zip([x, *(hx or [])], before)):
        raise Finding("forward modified its input", "input_mutated")
    return outputs


def check_forward(subject, case: SpecCase, dtype: str) -> dict:
    """The outputs equal the kind's reference within the tolerance policy, and the input is
    left unmodified."""
    run = Run(subject, case, dtype, "forward")
    observed = {name: to_numpy(t) for name, t in _call_unmodified(run).items()}
    expected = run.spec.forward(run.config, run.params, run.x, run.hx)
    return require_outputs_close(observed, expected, run.tolerance(),
                                 lambda name, numbers: run.diagnosis(observed, expected))


def check_gradients(subject, case: SpecCase, dtype: str) -> dict:
    """Gradients w.r.t. the input, the initial state and every parameter equal the reference's
    for a random output gradient."""
    run = Run(subject, case, dtype, "gradients")
    x, hx = run.tensors()
    leaves = {"input": x, **dict(zip(run.spec.state_names(run.config), hx or []))}
    for leaf in leaves.values():
        leaf.requires_grad_(True)
    outputs = run.call(x, hx)
    rng = subject.rng("gradients-out", case.name)
    grad_out = {name: rng.normal(size=tuple(t.shape)) for name, t in outputs.items()}
    wrt = {**leaves, **{name: run.parameter(name) for name in run.params}}
    grads = call("backward", torch.autograd.grad, list(outputs.values()), list(wrt.values()),
                 [subject.tensor(grad_out[name], dtype) for name in outputs], allow_unused=True)
    observed = {name: np.zeros(tuple(t.shape)) if g is None else to_numpy(g)
                for (name, t), g in zip(wrt.items(), grads)}
    expected = run.spec.backward(run.config, run.params, run.x, run.hx, grad_out)
    try:
        return require_gradients_close(observed, expected, run.tolerance(grad_out))
    except Finding as finding:
        finding.diagnosis = finding.diagnosis or run.diagnosis(observed, expected, grad_out)
        raise
