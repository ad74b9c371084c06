"""Checks that ask only what every kind's spec record answers (rnnbench.reference.kinds).

A kind registered with `register_kind` is checked on its cases by these: parameter names and
shapes, the init distribution of every parameter, output shapes, the float64 and float32 forward
against the kind's reference, the gradients w.r.t. the input, the initial state and every
parameter, and the input left unmodified. torch.nn's six kinds and the implicit RNN have richer
checks of their own (diagnoses, dropout, solver behaviour) on top of what these ask.

The module contract these assume is the one every kind shares: a constructor taking the
config's `constructor_kwargs()`; forward(input) or forward(input, state), the state one tensor
or a tuple in the spec's state order; a tensor, or a tuple in the spec's output order, back;
parameters under the spec's names in state_dict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.stats
import torch

from rnnbench.reference import Uniform
from rnnbench.reference.kinds import KindSpec, kind_of, register
from rnnbench.suites.checks import Check, register_checks
from rnnbench.suites.compare import first_mismatch, require_gradients_close, summary
from rnnbench.suites.results import Finding
from rnnbench.suites.statistics import ALPHA
from rnnbench.suites.subject import call, to_numpy

SAMPLES = 1000  # values per parameter for the init test, over as many constructions as needed
INPUT_MEAN = 0.5


@dataclass(frozen=True)
class SpecCase:
    """A configuration of some kind with an input size. `h0`: an initial state is passed."""

    name: str
    config: object
    batch: int
    steps: int = 1
    h0: bool = True
    quick: bool = True
    batched: bool = True
    features: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def needs(self) -> tuple[str, ...]:
        return (("initial_state",) if self.h0 else ()) + self.features


def register_kind(spec: KindSpec, cases: tuple[SpecCase, ...]) -> None:
    """Make a new kind known to the spec and give it these checks on `cases`."""
    register(spec)
    register_checks(spec_checks(cases))


def spec_checks(cases: tuple[SpecCase, ...]) -> tuple[Check, ...]:
    """The spec-driven checks on `cases`, as catalogue rows."""
    rows = [Check("parameters", "construction", check_parameters, cases),
            Check("init", "init", check_init, cases),
            Check("shapes", "shapes", check_shapes, cases),
            Check("inputs", "inputs", check_inputs, cases)]
    for dtype, suffix in (("float64", ""), ("float32", "-float32")):
        rows.append(Check(f"forward{suffix}", "forward", partial(check_forward, dtype=dtype), cases,
                          dtype=dtype))
        rows.append(Check(f"gradients{suffix}", "gradients", partial(check_gradients, dtype=dtype),
                          cases, dtype=dtype, backward=True))
    return tuple(rows)


# --- a run of the module next to its reference ---------------------------------------------------

def draw(dist, rng: np.random.Generator, shape) -> np.ndarray:
    """Values from a spec distribution (uniform or normal)."""
    if isinstance(dist, Uniform):
        return rng.uniform(dist.low, dist.high, shape)
    return rng.normal(dist.mean, dist.std, shape)


class Run:
    """The case's module built in `dtype`, holding parameters drawn from the spec's init, and
    inputs drawn with a nonzero mean; float64 copies of exactly what the module holds."""

    def __init__(self, subject, case: SpecCase, dtype: str, label: str):
        self.subject, self.case, self.dtype = subject, case, dtype
        self.spec = kind_of(case.config)
        cfg = case.config
        rng = subject.rng(label, case.name)
        self.module = call("module.to()", subject.construct(cfg).to, device=subject.device,
                           dtype=getattr(torch, dtype))
        parameters(self.module, self.spec, cfg)  # the spec's names and shapes first
        drawn = {name: subject.tensor(draw(dist, rng, self.spec.param_shapes(cfg)[name]), dtype)
                 for name, dist in self.spec.init_spec(cfg).items()}
        call("load_state_dict()", self.module.load_state_dict, drawn, strict=False)
        self.params = {name: to_numpy(value) for name, value in parameters(self.module, self.spec, cfg).items()}
        if any(not np.array_equal(self.params[n], to_numpy(drawn[n])) for n in drawn):
            raise Finding("load_state_dict() did not set the parameters")
        shapes = self.spec.io_shapes(cfg, case.batch, case.steps)
        self.x = self.rounded(rng.normal(INPUT_MEAN, 1.0, shapes["input"]))
        self.hx = ({name: self.rounded(0.5 * rng.normal(size=shapes[name]))
                    for name in self.spec.state_names(cfg)} if case.h0 else None)

    def rounded(self, array) -> np.ndarray:
        return to_numpy(self.subject.tensor(array, self.dtype))

    def tensors(self):
        x = self.subject.tensor(self.x, self.dtype)
        hx = None if self.hx is None else [self.subject.tensor(v, self.dtype) for v in self.hx.values()]
        return x, hx

    def call(self, x, hx) -> dict[str, torch.Tensor]:
        """forward on these tensors; its outputs by the spec's names, checked for shape."""
        state = None if hx is None else (hx[0] if len(hx) == 1 else tuple(hx))
        result = call("forward", self.module, *((x,) if state is None else (x, state)))
        names = self.spec.output_names(self.case.config)
        values = (result,) if len(names) == 1 else result
        if not isinstance(values, (tuple, list)) or len(values) != len(names) or not all(
                isinstance(v, torch.Tensor) for v in values):
            raise Finding(f"forward returned {type(result).__name__}, expected "
                          + (f"a tuple ({', '.join(names)})" if len(names) > 1 else "a Tensor"))
        shapes = self.spec.io_shapes(self.case.config, self.case.batch, self.case.steps)
        for name, value in zip(names, values):
            if tuple(value.shape) != tuple(shapes[name]):
                raise Finding(f"{name} has shape {tuple(value.shape)}, expected {tuple(shapes[name])}")
        return dict(zip(names, values))

    def tolerance(self, gradient: bool = False):
        return self.spec.tolerance(self.case.config, self.dtype, self.case.steps, gradient)


def parameters(module, spec: KindSpec, cfg) -> dict[str, torch.Tensor]:
    """The module's state_dict entries for the spec's names; Finding when they are not there."""
    state = call("state_dict()", module.state_dict)
    expected = spec.param_shapes(cfg)
    missing = [name for name in expected if name not in state]
    if missing:
        raise Finding(f"state_dict lacks {', '.join(missing)}; it has {', '.join(state)}",
                      "param_names", parameter=missing[0])
    for name, shape in expected.items():
        if tuple(state[name].shape) != tuple(shape):
            raise Finding(f"{name} has shape {tuple(state[name].shape)}, expected {tuple(shape)}",
                          "param_shapes", parameter=name)
    return {name: state[name] for name in expected}


# --- the checks -------------------------------------------------------------------------------

def check_parameters(subject, case: SpecCase) -> dict:
    """state_dict holds the spec's names and shapes, and nothing else."""
    spec, cfg = kind_of(case.config), case.config
    module = subject.construct(cfg)
    found = parameters(module, spec, cfg)
    extra = [key for key in call("state_dict()", module.state_dict) if key not in found]
    if extra:
        raise Finding(f"state_dict has entries the spec has not: {', '.join(extra[:4])}",
                      "param_names", parameter=extra[0])
    return {"parameters": len(found)}


def check_init(subject, case: SpecCase) -> dict:
    """Every parameter drawn from its spec distribution: within a uniform's bounds, and a
    Kolmogorov-Smirnov test at `statistics.ALPHA`."""
    spec, cfg = kind_of(case.config), case.config
    dists = spec.init_spec(cfg)
    constructions = math.ceil(SAMPLES / min(math.prod(s) or 1 for s in spec.param_shapes(cfg).values()))
    drawn = {name: [] for name in dists}
    for _ in range(constructions):
        for name, value in parameters(subject.construct(cfg), spec, cfg).items():
            drawn[name].append(to_numpy(value).ravel())
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


def check_shapes(subject, case: SpecCase) -> dict:
    """forward returns the spec's outputs in the spec's shapes."""
    run = Run(subject, case, "float32", "shapes")
    run.call(*run.tensors())
    return {}


def check_inputs(subject, case: SpecCase) -> dict:
    """forward leaves its input and initial state unmodified."""
    run = Run(subject, case, "float32", "inputs")
    x, hx = run.tensors()
    before = [t.clone() for t in [x, *(hx or [])]]
    run.call(x, hx)
    if any(not torch.equal(a, b) for a, b in zip([x, *(hx or [])], before)):
        raise Finding("forward modified its input", "input_mutated")
    return {}


def check_forward(subject, case: SpecCase, dtype: str) -> dict:
    """The outputs equal the kind's reference within the tolerance policy."""
    run = Run(subject, case, dtype, "forward")
    observed = {name: to_numpy(t) for name, t in run.call(*run.tensors()).items()}
    expected = run.spec.forward(case.config, run.params, run.x, run.hx)
    tol = run.tolerance()
    wrong = first_mismatch(observed, expected, tol)
    if wrong:
        name, numbers = wrong
        raise Finding(summary(name, numbers), **numbers)
    return {"tol": tol.atol}


def check_gradients(subject, case: SpecCase, dtype: str) -> dict:
    """Gradients w.r.t. the input, the initial state and every parameter equal the reference's
    for a random output gradient."""
    run = Run(subject, case, dtype, "gradients")
    x, hx = run.tensors()
    leaves = {"input": x, **dict(zip(run.spec.state_names(case.config), hx or []))}
    for leaf in leaves.values():
        leaf.requires_grad_(True)
    outputs = run.call(x, hx)
    rng = subject.rng("gradients-out", case.name)
    grad_out = {name: rng.normal(size=tuple(t.shape)) for name, t in outputs.items()}
    params = dict(call("named_parameters()", lambda: dict(run.module.named_parameters())))
    wrt = {**leaves, **{name: params[name] for name in run.params}}
    grads = call("backward", torch.autograd.grad, list(outputs.values()), list(wrt.values()),
                 [subject.tensor(grad_out[name], dtype) for name in outputs], allow_unused=True)
    observed = {name: np.zeros(tuple(t.shape)) if g is None else to_numpy(g)
                for (name, t), g in zip(wrt.items(), grads)}
    expected = run.spec.backward(case.config, run.params, run.x, run.hx, grad_out)
    return require_gradients_close(observed, expected, run.tolerance(gradient=True))
