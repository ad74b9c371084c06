"""The kinds of recurrent module the spec knows, one record each.

A `KindSpec` is everything the spec says about one kind, as functions of its configuration:
the configuration type, the parameters and their init, the tensors' shapes, the float64 forward
and backward, the tolerance, FLOPs and the work one call does. torch.nn's six kinds and the
implicit RNN are registered here; a new kind registers its own (`register`), and the suites,
the benchmarks and the reports find it by its name like any other, without a line of theirs
naming it.

The forward and backward of every kind speak one form: arrays keyed by name. Inputs: `x`, the
initial state as {state name: array} (or None: zeros), the parameters {name: array}; forward
returns {output name: array}; backward takes the output gradients in that form and returns
{"input": ..., state name: ..., parameter name: ...}.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rnnbench.reference import flops as torch_flops
from rnnbench.reference import implicit, numerics
from rnnbench.reference.config import KINDS as TORCH_KINDS
from rnnbench.reference.config import Config
from rnnbench.reference.params import init_spec, param_shapes
from rnnbench.reference.shapes import io_shapes
from rnnbench.reference.tolerance import Tolerance, tolerance


@dataclass(frozen=True)
class KindSpec:
    """One kind of module as the spec describes it (see the module docstring for the forms)."""

    name: str
    config_type: type
    make_config: Callable[..., Any]  # fields -> a validated configuration of this kind
    param_shapes: Callable[[Any], dict[str, tuple[int, ...]]]
    init_spec: Callable[[Any], dict]
    io_shapes: Callable[[Any, int | None, int], dict[str, tuple[int, ...]]]
    output_names: Callable[[Any], tuple[str, ...]]
    state_names: Callable[[Any], tuple[str, ...]]
    forward: Callable[..., dict]
    backward: Callable[..., dict]
    tolerance: Callable[[Any, str, int, bool], Tolerance]
    # Matmul FLOPs of one forward (None where the spec cannot count them, e.g. an iterative
    # solve's), with or without the input projection.
    flops: Callable[[Any, int, int, bool], int | None]
    # The sequence elements one call processes.
    tokens: Callable[[Any, int, int], int]
    # The configuration features a config needs of an implementation (rnnbench.impls.base).
    features: Callable[[Any], dict[str, bool]]
    steps_matter: bool = True  # False for kinds that take one step (cells)
    # Where the tolerance depends on the run's values (an iterative solve's error bound):
    # (cfg, dtype, params, x, hx, grad_out) -> the outputs' Tolerance (grad_out None), or
    # {gradient name: Tolerance}. None: `tolerance` alone.
    run_tolerance: Callable[..., Any] | None = None
    # Where a kind has variants its parameter shapes tell apart: (cfg, {name: shape}) -> the
    # configuration of the variant a module with those shapes implements. None: none.
    config_of: Callable[[Any, dict], Any] | None = None


KINDS: dict[str, KindSpec] = {}


def register(spec: KindSpec) -> KindSpec:
    """Make a kind known by its name; a second kind of the same name replaces the first."""
    KINDS[spec.name] = spec
    return spec


def kind_of(cfg) -> KindSpec:
    """The record of a configuration's kind; KeyError naming the known ones."""
    try:
        return KINDS[cfg.kind]
    except KeyError:
        raise KeyError(f"unknown kind {cfg.kind!r} (known: {', '.join(KINDS)})") from None


def config_from_dict(data: dict):
    """The configuration a JSON object describes, by its "kind"; ValueError with a reason."""
    if not isinstance(data, dict) or "kind" not in data:
        raise ValueError("config must be an object with a 'kind'")
    spec = KINDS.get(data["kind"])
    if spec is None:
        raise ValueError(f"unknown kind {data['kind']!r} (known: {', '.join(KINDS)})")
    known = {f.name for f in dataclasses.fields(spec.config_type)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{spec.name} config has no field {', '.join(map(repr, unknown))}")
    return spec.make_config(**{k: v for k, v in data.items() if k != "kind"})


# --- torch.nn's six kinds ----------------------------------------------------------------------

def _torch_forward(cfg: Config, params: dict, x, hx: dict | None) -> dict:
    state = None if hx is None else numerics.nest_state(cfg, hx)
    return numerics.flatten_outputs(cfg, numerics.forward(cfg, params, x, state))


def _torch_backward(cfg: Config, params: dict, x, hx: dict | None, grad_out: dict) -> dict:
    state = None if hx is None else numerics.nest_state(cfg, hx)
    grads = numerics.backward(cfg, params, x, state, numerics.nest_outputs(cfg, grad_out))
    if "hx" in grads:  # the Elman and GRU kinds' one state is h0
        grads["h0"] = grads.pop("hx")
    return grads


def _torch_tolerance(cfg: Config, dtype: str, steps: int, gradient: bool = False) -> Tolerance:
    return tolerance(dtype, 1 if cfg.is_cell else steps, cfg.num_layers, gradient=gradient)


def _torch_features(cfg: Config) -> dict[str, bool]:
    return {"num_layers": cfg.num_layers > 1, "bidirectional": cfg.bidirectional,
            "batch_first": cfg.batch_first, "proj_size": cfg.proj_size > 0,
            "no_bias": not cfg.bias, "relu": cfg.nonlinearity == "relu",
            # dropout acts between layers only: a one-layer module must just not drop
            "dropout": cfg.dropout > 0 and cfg.num_layers > 1}


for _kind in TORCH_KINDS:
    register(KindSpec(
        name=_kind, config_type=Config, make_config=functools.partial(Config, _kind),
        param_shapes=param_shapes, init_spec=init_spec,
        io_shapes=io_shapes, output_names=numerics.output_names, state_names=numerics.state_names,
        forward=_torch_forward, backward=_torch_backward, tolerance=_torch_tolerance,
        flops=lambda cfg, batch, steps, input_gemm=True: torch_flops.forward_flops(
            cfg, batch, steps, input_gemm=input_gemm),
        tokens=lambda cfg, batch, steps: (batch or 1) * (1 if cfg.is_cell else steps),
        features=_torch_features, steps_matter=not _kind.endswith("_cell")))


# --- the implicit RNN --------------------------------------------------------------------------

def _implicit_io_shapes(cfg: implicit.ImplicitConfig, batch: int | None, steps: int) -> dict:
    # batch-first input, no state, the head's output for the last step
    return {"input": (batch, steps, cfg.input_size), "output": (batch, cfg.output_size)}


def _implicit_run_tolerance(cfg: implicit.ImplicitConfig, dtype: str, params: dict, x, hx,
                            grad_out: dict | None = None):
    # the solver's error bound propagated to the outputs, or to each gradient
    if grad_out is None:
        return implicit.output_tolerance(cfg, params, x, dtype)
    return implicit.gradient_tolerance(cfg, params, x, grad_out["output"], dtype)


def _implicit_config_of(cfg: implicit.ImplicitConfig, shapes: dict) -> implicit.ImplicitConfig:
    # D's shape says which variant a module is (documented or library)
    variant = implicit.d_variant_of(cfg, shapes.get("D", ()))
    return cfg if variant is None else cfg.replace(d_variant=variant)


register(KindSpec(
    name=implicit.KIND, config_type=implicit.ImplicitConfig, make_config=implicit.ImplicitConfig,
    param_shapes=implicit.implicit_param_shapes, init_spec=implicit.implicit_init_spec,
    io_shapes=_implicit_io_shapes, output_names=lambda cfg: ("output",),
    state_names=lambda cfg: (),
    forward=lambda cfg, params, x, hx=None: {"output": implicit.forward(cfg, params, x).output},
    backward=lambda cfg, params, x, hx, grad_out: implicit.backward(cfg, params, x, grad_out["output"]),
    tolerance=lambda cfg, dtype, steps, gradient=False: tolerance(dtype, steps, gradient=gradient),
    flops=lambda cfg, batch, steps, input_gemm=True: None,  # the solve's iterations vary
    tokens=lambda cfg, batch, steps: batch * steps, features=lambda cfg: {},
    run_tolerance=_implicit_run_tolerance, config_of=_implicit_config_of))
