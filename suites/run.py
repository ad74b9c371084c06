"""One configured run of the implementation next to the reference, for a case of any kind.

A `Run` builds a module of the case's configuration, finds its parameters (`Subject.layout`:
the variant it implements, where its spec parameters sit), gives it parameters drawn from the
spec's init distributions (or given ones), draws inputs with a nonzero mean, and feeds the
float64 reference exactly the values the module holds (rounded to its dtype), so only the
computation differs. What forward returns is validated against the kind's contract (its
structure through the kind's `flatten_result`, the spec's shapes, the input's dtype and device)
and keyed by the spec's output names ("output", "h_n", "c_n"; cells "h", "c").
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from rnnbench.reference.kinds import kind_of
from rnnbench.suites.results import Finding
from rnnbench.suites.subject import (Subject, call, draw_params, load, nest_state, own_dtype,
                                     params_of, spec_parameters, to_numpy)

# Inputs ~ N(INPUT_MEAN, 1): a nonzero mean keeps a missing bias or a sign error from averaging out.
INPUT_MEAN = 0.5
STATE_SCALE = 0.5
_UNSET = object()


def policy_dtype(dtype: str, device: str) -> str:
    """The tolerance policy's name for computing in `dtype` on `device`: float32 on a GPU may use
    TF32 matmuls (cuDNN allows them by default), which the policy knows as "tf32"."""
    if dtype == "float32" and device.startswith("cuda") and (
            torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32):
        return "tf32"
    return dtype


def draw_inputs(case, cfg, rng: np.random.Generator) -> tuple[np.ndarray, dict | None]:
    """An input of the case's size with a nonzero mean, and an initial state if the case passes
    one, for configuration `cfg` (the case's, or the variant a module turned out to be)."""
    spec = kind_of(cfg)
    shapes = spec.io_shapes(cfg, case.batch, case.steps)
    x = rng.normal(INPUT_MEAN, 1.0, shapes["input"])
    hx = ({name: STATE_SCALE * rng.normal(size=shapes[name]) for name in spec.state_names(cfg)}
          if case.h0 else None)
    return x, hx


def draw_case(case, cfg, rng: np.random.Generator) -> tuple[dict, np.ndarray, dict | None]:
    """Float64 parameters of `cfg` drawn from the spec's init, then `draw_inputs`; the
    parameters and input as the case's `adjust` makes them."""
    params = draw_params(cfg, rng)
    x, hx = draw_inputs(case, cfg, rng)
    if case.adjust is not None:
        params, x = case.adjust(params, x)
    return params, x, hx


class Run:
    """The case's module built in `dtype` next to the reference.

    `params="spec"` draws parameters from the spec's distributions (the case's `adjust` applied)
    and loads them; a dict of arrays keyed by spec name is loaded as given. `cfg` is the
    configuration of the variant the module is; `x64`, `hx64` and `params` are float64 copies of
    exactly what the module gets; `tensors()` makes the tensors.
    """

    def __init__(self, subject: Subject, case, dtype: str, label: str, *, cfg=None,
                 params: str | dict = "spec", train: bool = False):
        self.subject, self.case, self.dtype = subject, case, dtype
        rng = subject.rng(label, case.name)
        module = subject.build(cfg or case.config, dtype)
        try:
            self.cfg, self.pmap = subject.layout(module, cfg or case.config)
            unmatched = None
        except Finding as finding:
            unmatched = finding
        if unmatched is not None:  # outside the handler, so a crash is not chained to it
            # A forward that raises with the module's own values fails whatever they are: a
            # finding of the function, not a reason it was not checked.
            if (unmatched.numbers.get("parameters_matched") is False
                    or unmatched.numbers.get("parameters_readable") is False):
                crash = self._crash_with_own(module, cfg or case.config,
                                             *draw_inputs(case, cfg or case.config, rng))
                if crash is not None:
                    crash.message += (" (with its own parameters, which could not be matched to "
                                      f"{subject.suite.contract})")
                    raise crash
            raise unmatched
        self.spec = kind_of(self.cfg)
        if isinstance(params, str):
            drawn, x, hx = draw_case(case, self.cfg, rng)
        else:
            drawn, (x, hx) = params, draw_inputs(case, self.cfg, rng)
        self.module = module
        try:
            self.load(drawn)
            misshapen = None
        except Finding as finding:
            misshapen = finding
        if misshapen is not None:  # outside the handler, so the crash is not chained to it
            # A module that cannot hold the spec's parameters is run with its own: when forward
            # raises, that is what the finding says first, the misshapen parameter behind it.
            crash = (self._crash_with_own(module, self.cfg, x, hx)
                     if misshapen.diagnosis == "param_shapes" else None)
            if crash is not None:
                misshapen.message = f"{crash.message} (its own parameters: {misshapen.message})"
                misshapen.numbers.update(crash.numbers)
                # raising with its own parameters is the function's finding, whatever the map
                misshapen.numbers.pop("parameters_matched", None)
            raise misshapen
        module.train(train)
        # Rounded to the module's dtype once, so the reference sees exactly what the module sees.
        self.x64 = self.rounded(x)
        self.hx64 = None if hx is None else {name: self.rounded(v) for name, v in hx.items()}

    def load(self, params: dict[str, np.ndarray]) -> None:
        """Set the module's parameters (by spec name); `params` then holds what it holds."""
        load(self.module, self.cfg, self.pmap,
             {name: self.subject.tensor(value, self.dtype) for name, value in params.items()})
        self.params = params_of(self.module, self.cfg, self.pmap)

    def _crash_with_own(self, module, cfg, x, hx) -> Finding | None:
        """What forward raises on input `x` (and state `hx`, float64 arrays) given in the dtype
        the module's own values are in; None when it runs."""
        dtype = own_dtype(module)
        states = None if hx is None else {n: self.subject.tensor(v, dtype) for n, v in hx.items()}
        try:
            self.subject_call(self.subject.tensor(x, dtype), states, module, cfg)
        except Finding as crash:
            return crash
        return None

    def rounded(self, array: np.ndarray) -> np.ndarray:
        """`array` rounded to the module's dtype, as float64."""
        return to_numpy(self.subject.tensor(array, self.dtype))

    def tensors(self, x64: np.ndarray | None = None,
                hx64=_UNSET) -> tuple[torch.Tensor, dict | None]:
        """Fresh tensors of the input and initial state, the run's or those given (None when
        omitted), in the run's dtype: every call gets its own, so an implementation that writes
        to its input cannot change later calls."""
        x64 = self.x64 if x64 is None else x64
        hx64 = self.hx64 if hx64 is _UNSET else hx64
        hx = None if hx64 is None else {
            name: self.subject.tensor(value, self.dtype) for name, value in hx64.items()}
        return self.subject.tensor(x64, self.dtype), hx

    @property
    def steps(self) -> int:
        return self.case.steps if self.spec.steps_matter else 1

    def tolerance(self, gradient: bool = False, grad_out: dict | None = None):
        """The outputs' tolerance, or the gradients' (one, or one per name where the kind's
        tolerance depends on the run's values)."""
        if self.spec.run_tolerance is not None:
            return _scaled(self.spec.run_tolerance(self.cfg, self.dtype, self.params, self.x64,
                                                   self.hx64, grad_out if gradient else None),
                           self.case.tolerance_scale)
        return self.tolerance_as(policy_dtype(self.dtype, self.subject.device), gradient)

    def tolerance_as(self, dtype: str, gradient: bool = False):
        """The policy's tolerance for this run's length and depth, as if computed in `dtype`
        (times the case's `tolerance_scale`)."""
        return _scaled(self.spec.tolerance(self.cfg, dtype, self.case.steps, gradient),
                       self.case.tolerance_scale)

    def call(self, x=None, hx=_UNSET, module=None, cfg=None) -> dict[str, torch.Tensor]:
        """Run a module (default: this run's, on its inputs; pass `cfg` with another module);
        tensors keyed by output name, validated against the contract."""
        fresh_x, fresh_hx = self.tensors()
        x = fresh_x if x is None else x
        hx = fresh_hx if hx is _UNSET else hx
        module, cfg = (self.module, self.cfg) if module is None else (module, cfg)
        return self.unpack(cfg, x, self.subject_call(x, hx, module, cfg))

    def subject_call(self, x, hx=None, module=None, cfg=None):
        """A module (default: this run's) on `x` (and `hx`), its return value as is, unchecked."""
        module, cfg = (self.module, self.cfg) if module is None else (module, cfg)
        state = nest_state(cfg, hx)
        return call("forward", module, *((x,) if state is None else (x, state)))

    def run(self, x=None, hx=_UNSET, module=None, cfg=None) -> dict[str, np.ndarray]:
        """`call`, in float64 NumPy."""
        return {name: to_numpy(t) for name, t in self.call(x, hx, module, cfg).items()}

    def expected(self, cfg=None, params: dict | None = None, x=None, hx=_UNSET) -> dict:
        """The reference's outputs, by default for this run's config, parameters and inputs."""
        cfg = cfg or self.cfg
        return kind_of(cfg).forward(cfg, self.params if params is None else params,
                                    self.x64 if x is None else x,
                                    self.hx64 if hx is _UNSET else hx)

    def parameter(self, name: str) -> torch.nn.Parameter:
        """The registered parameter storing spec parameter `name`."""
        return spec_parameters(self.module, self.cfg, self.pmap)[name][0][0]

    def unpack(self, cfg, x: torch.Tensor, result) -> dict[str, torch.Tensor]:
        """forward's return value for input `x` as tensors keyed by output name; Finding when
        its structure, shapes, dtype or device differ from the contract's."""
        suite, spec = self.subject.suite, kind_of(cfg)
        flatten = suite.flatten_result or flatten_result
        tensors = flatten(cfg, result)
        batch, steps = (suite.sizes_of(cfg, x) if suite.sizes_of
                        else (self.case.batch, self.case.steps))
        shapes = spec.io_shapes(cfg, batch, steps)
        found = {name: self._misshapen(cfg, name, value, x, shapes[name], batch, steps)
                 for name, value in tensors.items()}
        problems = [problem for problem in found.values() if problem is not None]
        if problems:
            # Only beside misshapen outputs are the others comparable: beside one in a coarser
            # dtype, they may be computed in it too.
            if all(tuple(tensors[name].shape) != tuple(shapes[name])
                   for name, problem in found.items() if problem is not None):
                problems[0].conforming = {name: tensors[name] for name, problem in found.items()
                                          if problem is None}
            raise problems[0]
        return tensors

    def _misshapen(self, cfg, name: str, value: torch.Tensor, x: torch.Tensor, shape,
                   batch, steps) -> Finding | None:
        """What is wrong with output `name` of a forward on `x`: its shape, dtype or device."""
        suite = self.subject.suite
        if tuple(value.shape) != tuple(shape):
            diagnosis = (suite.shape_diagnosis(cfg, batch, steps, name, tuple(value.shape))
                         if suite.shape_diagnosis else None)
            return Finding(f"{name} has shape {tuple(value.shape)}, expected {tuple(shape)}",
                           diagnosis)
        if value.dtype != x.dtype:
            return Finding(f"{name} has dtype {value.dtype}, expected {x.dtype} (the input's)",
                           "lower_precision" if coarser(value.dtype, x.dtype) else None)
        if value.device != x.device:
            return Finding(f"{name} is on {value.device}, expected {x.device} (the input's)")
        return None


def _scaled(tolerance, scale: float):
    """A Tolerance (or a dict of them, by name) with atol and rtol times `scale`."""
    if scale == 1.0:
        return tolerance
    if isinstance(tolerance, dict):
        return {name: _scaled(tol, scale) for name, tol in tolerance.items()}
    return dataclasses.replace(tolerance, atol=tolerance.atol * scale,
                               rtol=tolerance.rtol * scale)


def coarser(dtype: torch.dtype, than: torch.dtype) -> bool:
    """Whether floating `dtype` holds fewer digits than floating `than`."""
    return (dtype.is_floating_point and than.is_floating_point
            and torch.finfo(dtype).eps > torch.finfo(than).eps)


def flatten_result(cfg, result) -> dict[str, torch.Tensor]:
    """The plain contract: a tensor for a kind with one output, else a tuple of tensors in the
    spec's output order; Finding when forward returned anything else."""
    names = kind_of(cfg).output_names(cfg)
    values = (result,) if len(names) == 1 else result
    if not isinstance(values, (tuple, list)) or len(values) != len(names) or not all(
            isinstance(v, torch.Tensor) for v in values):
        raise Finding(f"forward returned {describe_structure(result)}, expected "
                      + (f"a tuple ({', '.join(names)})" if len(names) > 1 else "a Tensor"))
    return dict(zip(names, values))


def steps_listed(result) -> bool:
    """Whether a layer's return value holds its output sequence as a list of step tensors, where
    torch.nn's holds one tensor: `(outputs, state)` with `outputs` a list."""
    return (isinstance(result, (tuple, list)) and len(result) == 2
            and isinstance(result[0], (tuple, list)) and len(result[0]) > 0
            and all(isinstance(step, torch.Tensor) for step in result[0]))


def extra_values(result) -> bool:
    """Whether a layer's return value has Nones after torch.nn's two values, (output, state,
    None), as a module that can also return attention weights or a loss returns it without
    them."""
    return (isinstance(result, (tuple, list)) and len(result) > 2
            and all(item is None for item in result[2:]))


def past_extra_values(cfg, result):
    """A layer's return value as torch.nn's two values, where Nones follow them
    (`extra_values`: the output-structure check says so); anything else as it is."""
    return tuple(result[:2]) if not cfg.is_cell and extra_values(result) else result


def state_flat(result) -> bool:
    """Whether an LSTM layer's return value is (output, h_n, c_n), the output (a tensor, or a
    PackedSequence) beside two state tensors, where torch.nn's nests the state: (output, (h_n,
    c_n))."""
    return (isinstance(result, (tuple, list)) and len(result) == 3
            and all(isinstance(part, torch.Tensor) for part in result[1:]))


def listed_state(cfg, state, batched: bool, ends: tuple | None = None):
    """A layer's final state listed with one entry per layer and direction, where torch.nn's is
    one tensor (h_n; an LSTM's (h_n, c_n)): `[h_0, h_1]`, an LSTM's `[(h_0, c_0), (h_1, c_1)]`
    or `([h_0, h_1], [c_0, c_1])`, as torch.nn's, each entry stacked (or concatenated where it
    keeps a leading axis of one). An LSTM's two entries of two tensors read either way: the way
    whose top layer's h is where the output ends (`ends`: its first and last steps, the reverse
    direction ending at the first). None where the state is no such list (another number of
    entries: a list of steps; entries of different shapes), or cannot be told."""
    units = cfg.num_layers * cfg.num_directions

    def tensors(value, count: int) -> bool:
        return (isinstance(value, (tuple, list)) and len(value) == count
                and all(isinstance(item, torch.Tensor) for item in value))

    def stacked(entries):
        joined = torch.cat if entries[0].dim() == (3 if batched else 2) else torch.stack
        try:
            return joined(list(entries))
        except RuntimeError:
            return None
    if cfg.family != "lstm":
        return stacked(state) if tensors(state, units) else None
    listed = isinstance(state, (tuple, list))
    readings = []
    if listed and len(state) == units and all(tensors(unit, 2) for unit in state):
        readings.append(list(zip(*state)))  # (h, c) per unit
    if listed and len(state) == 2 and all(tensors(part, units) for part in state):
        readings.append(list(state))  # the units' h, then their c
    if len(readings) == 2:
        readings = [parts for parts in readings if ends and _ends_output(cfg, parts[0], *ends)]
    if len(readings) != 1:
        return None
    parts = [stacked(part) for part in readings[0]]
    return None if any(part is None for part in parts) else tuple(parts)


def _ends_output(cfg, h_units, first: torch.Tensor, last: torch.Tensor) -> bool:
    """Whether the top layer's h among `h_units` is, in each direction, the output where that
    direction ends: the forward half of its `last` step, the reverse half of its `first`."""
    width = last.shape[-1] // cfg.num_directions
    top = (cfg.num_layers - 1) * cfg.num_directions
    for direction, step in enumerate((last, first)[:cfg.num_directions]):
        want, h = step[..., direction * width:(direction + 1) * width], h_units[top + direction]
        if h.numel() != want.numel() or not torch.equal(h.reshape(want.shape), want):
            return False
    return True


def listed_final_state(cfg, result):
    """`listed_state` of a layer's return value (output, state); None for any other."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2
            and isinstance(result[0], torch.Tensor)):
        return None
    output = result[0]
    steps = output.transpose(0, 1) if cfg.batch_first and output.dim() == 3 else output
    return listed_state(cfg, result[1], batched=output.dim() == 3, ends=(steps[0], steps[-1]))


def describe_structure(value) -> str:
    """What a return value is, in words: "a Tensor", "a tuple (Tensor, list (Tensor))"."""
    if isinstance(value, torch.Tensor):
        return "a Tensor"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe_structure(v).removeprefix("a ") for v in value)
        return f"a {type(value).__name__} ({inner})"
    return f"a {type(value).__name__}"
