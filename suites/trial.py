"""One configured run of the implementation next to the reference, and the validation of
what forward returns.

A `Trial` builds a module from a case's config, gives it parameters drawn from the spec's init
distributions (or keeps its own), draws inputs with a nonzero mean, and feeds the float64
reference exactly the values the module holds (rounded to its dtype), so only the computation
differs. Results are dicts keyed by the spec's output names ("output", "h_n", "c_n"; cells
"h", "c"), checked on the way against torch.nn's return structure and the spec's shapes.
"""
from __future__ import annotations

import numpy as np
import torch

from rnnbench import reference
from rnnbench.reference import Config, io_shapes, tolerance
from rnnbench.reference.numerics import flatten_outputs, nest_state, output_names, state_names
from rnnbench.suites.cases import Case
from rnnbench.suites.layers import is_batched
from rnnbench.suites.results import Finding
from rnnbench.suites.subject import Subject, call, draw_params, params_of, to_numpy

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


def nest_hx(cfg: Config, named: dict | None):
    """hx as forward takes it (None, h0, or (h0, c0)) from arrays or tensors keyed by state name."""
    return None if named is None else nest_state(cfg, named)


class Trial:
    """One configured run of the implementation next to the reference.

    `params="spec"` draws parameters from the spec's distributions and loads them, a dict of
    arrays is loaded as given, and `params=None` keeps the module's own. `x64`, `hx64` and
    `params` are float64 copies of exactly what the module gets; `tensors()` makes the tensors.
    """

    def __init__(self, subject: Subject, case: Case, dtype: str, label: str, *,
                 cfg: Config | None = None, params: str | dict | None = "spec", train: bool = False):
        self.subject, self.case, self.dtype = subject, case, dtype
        self.cfg = cfg or case.config
        rng = subject.rng(label, case.name)
        loaded = draw_params(self.cfg, rng) if isinstance(params, str) else params
        self.module = subject.build(self.cfg, dtype, loaded, train)
        self.pmap = subject.param_map(self.module, self.cfg)
        self.params = None if loaded is None else params_of(self.module, self.cfg, self.pmap)
        shapes = io_shapes(self.cfg, case.batch, case.steps)
        # Rounded to the module's dtype once, so the reference sees exactly what the module sees.
        self.x64 = self.rounded(rng.normal(INPUT_MEAN, 1.0, shapes["input"]))
        self.hx64 = ({name: self.rounded(STATE_SCALE * rng.normal(size=shapes[name]))
                      for name in state_names(self.cfg)} if case.h0 else None)

    def rounded(self, array: np.ndarray) -> np.ndarray:
        """`array` rounded to the module's dtype, as float64."""
        return to_numpy(self.subject.tensor(array, self.dtype))

    def tensors(self) -> tuple[torch.Tensor, dict | None]:
        """Fresh tensors of the input and initial state (None when the case omits it): every call
        gets its own, so an implementation that writes to its input cannot change later calls."""
        hx = None if self.hx64 is None else {
            name: self.subject.tensor(value, self.dtype) for name, value in self.hx64.items()}
        return self.subject.tensor(self.x64, self.dtype), hx

    @property
    def steps(self) -> int:
        return 1 if self.cfg.is_cell else self.case.steps

    def tolerance(self, gradient: bool = False):
        return self.tolerance_as(policy_dtype(self.dtype, self.subject.device), gradient)

    def tolerance_as(self, dtype: str, gradient: bool = False):
        """The policy's tolerance for this trial's length and depth, as if computed in `dtype`."""
        return tolerance(dtype, self.steps, self.cfg.num_layers, gradient=gradient)

    def call(self, x=None, hx=_UNSET, module=None, cfg: Config | None = None) -> dict[str, torch.Tensor]:
        """Run a module (default: this trial's, on its inputs; pass `cfg` with another module);
        tensors keyed by output name, validated against the spec's shapes, dtype and device."""
        fresh_x, fresh_hx = self.tensors()
        x = fresh_x if x is None else x
        hx = fresh_hx if hx is _UNSET else hx
        module, cfg = (self.module, self.cfg) if module is None else (module, cfg)
        result = call("forward", module, *((x,) if hx is None else (x, nest_hx(cfg, hx))))
        return unpack(cfg, x, result)

    def subject_call(self, x, hx=None):
        """This trial's module on `x` (and `hx`), its return value as is, unchecked."""
        return call("forward", self.module, *((x,) if hx is None else (x, nest_hx(self.cfg, hx))))

    def run(self, x=None, hx=_UNSET, module=None, cfg: Config | None = None) -> dict[str, np.ndarray]:
        """`call`, in float64 NumPy."""
        return {name: to_numpy(t) for name, t in self.call(x, hx, module, cfg).items()}

    def expected(self, cfg: Config | None = None, params: dict | None = None, x=None,
                 hx=_UNSET) -> dict[str, np.ndarray]:
        """The reference's outputs, by default for this trial's config, parameters and inputs."""
        cfg = cfg or self.cfg
        x = self.x64 if x is None else x
        hx = self.hx64 if hx is _UNSET else hx
        result = reference.forward(cfg, self.params if params is None else params, x, nest_hx(cfg, hx))
        return flatten_outputs(cfg, result)


def batch_and_steps(cfg: Config, x) -> tuple[int | None, int]:
    """The batch size (None if unbatched) and number of steps of an input for `cfg`."""
    batched = is_batched(cfg, x)
    if cfg.is_cell:
        return (x.shape[0] if batched else None), 1
    time_axis = 1 if batched and cfg.batch_first else 0
    return (x.shape[1 - time_axis] if batched else None), x.shape[time_axis]


def unpack(cfg: Config, x: torch.Tensor, result) -> dict[str, torch.Tensor]:
    """forward's return value for input `x` as tensors keyed by output name; Finding when its
    structure, shapes, dtype or device differ from torch.nn's."""
    tensors = _flatten(cfg, result)
    if tensors is None:
        stepwise = (not cfg.is_cell and isinstance(result, (tuple, list)) and result
                    and isinstance(result[0], (tuple, list))
                    and all(isinstance(t, torch.Tensor) for t in result[0]))
        raise Finding(f"forward returned {_structure(result)}, expected {_expected_structure(cfg)}",
                      "output_not_stacked" if stepwise else None)
    batch, steps = batch_and_steps(cfg, x)
    shapes = io_shapes(cfg, batch, steps)
    for name, value in tensors.items():
        if tuple(value.shape) != shapes[name]:
            raise Finding(f"{name} has shape {tuple(value.shape)}, expected {shapes[name]}",
                          _shape_diagnosis(cfg, batch, steps, name, tuple(value.shape)))
        if value.dtype != x.dtype:
            raise Finding(f"{name} has dtype {value.dtype}, expected {x.dtype} (the input's)")
        if value.device != x.device:
            raise Finding(f"{name} is on {value.device}, expected {x.device} (the input's)")
    return tensors


def _flatten(cfg: Config, result) -> dict[str, torch.Tensor] | None:
    """torch.nn's return structure as a dict keyed by output name; None if it is not that."""
    def pair(value):
        return isinstance(value, (tuple, list)) and len(value) == 2
    lstm = cfg.family == "lstm"
    if cfg.is_cell:
        parts = (tuple(result) if pair(result) else None) if lstm else (result,)
    elif not pair(result):
        parts = None
    elif lstm:
        parts = (result[0], *result[1]) if pair(result[1]) else None
    else:
        parts = tuple(result)
    if parts is None or not all(isinstance(part, torch.Tensor) for part in parts):
        return None
    return dict(zip(output_names(cfg), parts))


def _structure(value) -> str:
    if isinstance(value, torch.Tensor):
        return "a Tensor"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(_structure(v).removeprefix("a ") for v in value)
        return f"a {type(value).__name__} ({inner})"
    return f"a {type(value).__name__}"


def _expected_structure(cfg: Config) -> str:
    names = output_names(cfg)
    if cfg.is_cell:
        return f"a tuple ({', '.join(names)})" if len(names) > 1 else "a Tensor"
    state = f"({', '.join(names[1:])})" if len(names) > 2 else names[1]
    return f"a tuple ({names[0]}, {state})"


def _shape_diagnosis(cfg: Config, batch, steps, name: str, got: tuple) -> str | None:
    """Name the mistakes a wrong output shape gives away."""
    want = io_shapes(cfg, batch, steps)[name]
    if name in ("h_n", "c_n") and len(got) == len(want) - 1:
        return "h_n_no_layer_dim"
    if cfg.batch_first and batch is not None and batch != steps:
        # A module that ignores batch_first reads (N, L, I) as N steps of a batch of L.
        if got == io_shapes(cfg.replace(batch_first=False), steps, batch)[name]:
            return "batch_first_ignored"
    return None
