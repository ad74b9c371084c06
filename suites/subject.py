"""The implementation under test, as the checks see it, and its parameters.

`Subject` is one kind of one implementation on one device. Every call into the implementation
goes through `call`, so whatever it raises on a valid input becomes a `Finding` (a failure of the
implementation), never an error of the harness.

Parameters are found by the spec's names in the module's state_dict (as torch.nn's checkpoints
are), set through load_state_dict, and traced to the registered parameters that store them, so
an implementation may keep them fused or nested as long as its state_dict speaks torch.nn.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch

from rnnbench.impls.base import Implementation
from rnnbench.impls.registry import one_line
from rnnbench.reference import Config, init_spec, param_shapes
from rnnbench.suites.layers import blocks
from rnnbench.suites.results import Finding

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32,
                "float16": torch.float16, "bfloat16": torch.bfloat16}


def call(what: str, function, *args, **kwargs):
    """Call into the implementation; an exception it raises becomes a Finding naming `what`."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        raise Finding(f"{what} raised {one_line(exc)}") from exc


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to("cpu", torch.float64).numpy()


@dataclass(frozen=True)
class Subject:
    """One kind of one implementation, run on `device`, with inputs derived from `seed`."""

    impl: Implementation
    kind: str
    device: str = "cpu"
    seed: int = 0

    def construct(self, cfg: Config, **kwargs) -> torch.nn.Module:
        """Call the constructor with torch.nn's arguments for `cfg` (plus `kwargs`)."""
        module = call("the constructor", self.impl.constructor(self.kind),
                      **cfg.constructor_kwargs(), **kwargs)
        if not isinstance(module, torch.nn.Module):
            raise Finding(f"the constructor returned a {type(module).__name__}, "
                          "not a torch.nn.Module")
        return module

    def build(self, cfg: Config, dtype: str, params: dict | None = None,
              train: bool = False) -> torch.nn.Module:
        """A module for `cfg` moved to this device and `dtype` (as users do with `.to()`; the
        dtype/device constructor arguments have a check of their own), holding `params` if given."""
        module = self.construct(cfg)
        module = call("module.to()", module.to, device=self.device, dtype=TORCH_DTYPES[dtype])
        if params is not None:
            load(module, cfg, {name: self.tensor(value, dtype) for name, value in params.items()})
        module.train(train)
        return module

    def tensor(self, array, dtype: str) -> torch.Tensor:
        return torch.tensor(np.asarray(array), dtype=TORCH_DTYPES[dtype], device=self.device)

    def rng(self, *labels: str) -> np.random.Generator:
        """A generator that depends on the seed, this kind and `labels` only."""
        return np.random.default_rng([self.seed, zlib.crc32("/".join((self.kind, *labels)).encode())])


def spec_state(module: torch.nn.Module, cfg: Config) -> dict[str, torch.Tensor]:
    """The module's state_dict entries for the spec's parameter names, in the spec's order.
    Finding(param_names / param_shapes) when they are not there as the spec says."""
    state = call("state_dict()", module.state_dict)
    shapes = param_shapes(cfg)
    missing = [name for name in shapes if name not in state]
    if missing:
        extra = [name for name in state if name not in shapes]
        raise Finding(f"state_dict lacks {_listed(missing)}" + (f"; it has {_listed(extra)}" if extra else ""),
                      _missing_diagnosis(cfg, missing), parameter=missing[0])
    for name, shape in shapes.items():
        got = tuple(state[name].shape)
        if got != shape:
            raise Finding(f"{name} has shape {got}, expected {shape}", "param_shapes", parameter=name)
    return {name: state[name] for name in shapes}


def _missing_diagnosis(cfg: Config, missing: list[str]) -> str:
    """One whole bias block missing (every bias_hh, say) is a single bias; else the names differ."""
    block, shapes = blocks(cfg), param_shapes(cfg)
    gone = {block[name] for name in missing}
    whole = set(missing) == {name for name in shapes if block[name] in gone}
    return "single_bias" if len(gone) == 1 and whole and len(shapes[missing[0]]) == 1 else "param_names"


def spec_parameters(module: torch.nn.Module, cfg: Config) -> dict[str, tuple]:
    """For each spec name, (the registered parameter its state_dict entry is stored in, the
    entry). The entry may be the parameter itself or a slice of a fused one; Finding when it is
    stored in no parameter, as then neither gradients nor optimizers can reach it."""
    owners = list(call("parameters()", lambda: list(module.parameters())))
    found = {}
    for name, entry in spec_state(module, cfg).items():
        owner = next((p for p in owners if _stored_in(entry, p)), None)
        if owner is None:
            raise Finding(f"state_dict's {name} is not stored in any registered parameter "
                          "(gradients and optimizers cannot reach it)", parameter=name)
        found[name] = (owner, entry)
    return found


def entry_grad(owner: torch.Tensor, entry: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """The gradient of a state_dict entry, cut from the gradient of the parameter storing it."""
    laid_out = torch.empty_strided(owner.shape, owner.stride(), dtype=grad.dtype, device=grad.device)
    laid_out.copy_(grad)
    return laid_out.as_strided(entry.shape, entry.stride(), entry.storage_offset() - owner.storage_offset())


def _stored_in(entry: torch.Tensor, owner: torch.Tensor) -> bool:
    """Whether `entry`'s elements lie within `owner`'s in the same storage."""
    if entry.device != owner.device or entry.dtype != owner.dtype:
        return False
    if entry.untyped_storage().data_ptr() != owner.untyped_storage().data_ptr():
        return False
    def span(t):
        return t.storage_offset(), t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    (low, high), (own_low, own_high) = span(entry), span(owner)
    return own_low <= low and high <= own_high


def load(module: torch.nn.Module, cfg: Config, tensors: dict[str, torch.Tensor]) -> None:
    """Set the module's parameters through load_state_dict, and make sure they took."""
    spec_state(module, cfg)
    call("load_state_dict()", module.load_state_dict, tensors, strict=False)
    for name, value in spec_state(module, cfg).items():
        if not torch.equal(value.detach(), tensors[name]):
            raise Finding(f"load_state_dict() did not set {name}", parameter=name)


def params_of(module: torch.nn.Module, cfg: Config) -> dict[str, np.ndarray]:
    """The module's parameters as float64 NumPy arrays, keyed by the spec's names."""
    return {name: to_numpy(value) for name, value in spec_state(module, cfg).items()}


def draw_params(cfg: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Parameters drawn from the spec's init distribution of each."""
    spec = init_spec(cfg)
    return {name: rng.uniform(spec[name].low, spec[name].high, shape)
            for name, shape in param_shapes(cfg).items()}


def _listed(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
