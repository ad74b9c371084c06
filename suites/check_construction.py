"""Construction: torch.nn's parameter names and shapes, the dtype/device arguments honoured,
and invalid arguments rejected as torch.nn rejects them."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rnnbench.impls.registry import one_line
from rnnbench.reference import KINDS, SEQUENCE_KINDS, Config, io_shapes
from rnnbench.suites.check_errors import REJECTIONS, rejection_names
from rnnbench.suites.results import Finding
from rnnbench.suites.subject import TORCH_DTYPES, call, spec_parameters, spec_state


def check_parameters(subject, case) -> dict:
    """state_dict holds exactly torch.nn's names and shapes, stored in parameters of the default dtype."""
    cfg = case.config
    module = subject.construct(cfg)
    stored = spec_parameters(module, cfg)
    extra = [name for name in call("state_dict()", module.state_dict) if name not in stored]
    if extra:
        raise Finding(f"state_dict has entries torch.nn's has not: {', '.join(extra[:4])}",
                      "param_names", parameter=extra[0])
    default = torch.get_default_dtype()
    odd = [name for name, (owner, _) in stored.items() if owner.dtype != default]
    if odd:
        raise Finding(f"{odd[0]} is {stored[odd[0]][0].dtype}, expected the default dtype {default}",
                      parameter=odd[0])
    return {"parameters": len(stored)}


def check_dtype_device(subject, case) -> dict:
    """The constructor's dtype= and device= arguments are honoured."""
    cfg = case.config
    device = torch.device(subject.device)
    module = subject.construct(cfg, dtype=TORCH_DTYPES["float64"], device=device)
    for name, value in spec_state(module, cfg).items():
        if value.dtype != TORCH_DTYPES["float64"] or value.device.type != device.type:
            raise Finding(f"with dtype=torch.float64, device={device.type!r}: {name} is "
                          f"{value.dtype} on {value.device}", parameter=name)
    return {}


@dataclass(frozen=True)
class InvalidArgument:
    """A constructor argument torch.nn refuses. `at_forward`: torch.nn itself only notices when
    the module first runs (RNNCell's nonlinearity), so rejecting it then is accepted too."""

    name: str
    changes: Callable[[Config], dict]
    kinds: tuple[str, ...]
    at_forward: bool = False


INVALID_ARGUMENTS = (
    InvalidArgument("hidden_size=-1", lambda cfg: {"hidden_size": -1}, KINDS),
    # torch.nn's cells accept hidden_size=0 (an empty module); its sequence modules do not.
    InvalidArgument("hidden_size=0", lambda cfg: {"hidden_size": 0}, SEQUENCE_KINDS),
    InvalidArgument("num_layers=0", lambda cfg: {"num_layers": 0}, SEQUENCE_KINDS),
    InvalidArgument("dropout=-0.1", lambda cfg: {"dropout": -0.1}, SEQUENCE_KINDS),
    InvalidArgument("dropout=1.5", lambda cfg: {"dropout": 1.5}, SEQUENCE_KINDS),
    InvalidArgument("nonlinearity='gelu'", lambda cfg: {"nonlinearity": "gelu"}, ("rnn", "rnn_cell"),
                    at_forward=True),
    InvalidArgument("proj_size=-1", lambda cfg: {"proj_size": -1}, ("lstm",)),
    InvalidArgument("proj_size=hidden_size", lambda cfg: {"proj_size": cfg.hidden_size}, ("lstm",)),
)


def check_invalid_arguments(subject, case) -> dict:
    """Arguments torch.nn refuses raise ValueError, TypeError or RuntimeError."""
    cfg = case.config
    constructor = subject.impl.constructor(subject.kind)
    shapes = io_shapes(cfg, case.batch, case.steps)
    problems = []
    tried = [wrong for wrong in INVALID_ARGUMENTS if cfg.kind in wrong.kinds]
    for wrong in tried:
        try:
            module = constructor(**{**cfg.constructor_kwargs(), **wrong.changes(cfg)})
            if wrong.at_forward:
                module(torch.zeros(shapes["input"]))
        except REJECTIONS:
            continue
        except Exception as exc:
            problems.append(f"{wrong.name} raised {one_line(exc)}, expected {rejection_names()}")
            continue
        problems.append(f"{wrong.name} accepted")
    if problems:
        raise Finding(f"{len(problems)} of {len(tried)} invalid arguments not rejected: "
                      + "; ".join(problems))
    return {"tried": len(tried)}
