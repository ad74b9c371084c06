"""Error inputs: a wrongly shaped input or initial state raises, and is never silently broadcast.

Each row of WRONG_INPUTS turns the valid shapes of a case into wrong ones, and is a check of its
own (`error-<name>`). What must happen is what torch.nn does: raise ValueError, RuntimeError or
TypeError (the type is not pinned further, nor the message). Accepting the input is the
`silent_broadcast` diagnosis.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.impls.registry import one_line
from rnnbench.reference import Config, io_shapes
from rnnbench.reference.numerics import state_names
from rnnbench.suites.cases import Case
from rnnbench.suites.results import Finding
from rnnbench.suites.trial import nest_hx

REJECTIONS = (ValueError, RuntimeError, TypeError)


def rejection_names() -> str:
    return ", ".join(t.__name__ for t in REJECTIONS)


def _resized(shape: tuple, axis: int) -> tuple:
    """`shape` with one more element along `axis`."""
    shape = list(shape)
    shape[axis] += 1
    return tuple(shape)


def _ranks(cfg: Config) -> tuple[int, int]:
    """The (unbatched, batched) rank of the input, as the spec's shapes have it."""
    return len(io_shapes(cfg, None)["input"]), len(io_shapes(cfg, 1)["input"])


def _too_many_axes(cfg: Config, shape: tuple) -> tuple:
    """`shape` grown by leading axes of 2 to one more axis than a batched input has."""
    return (2,) * (_ranks(cfg)[1] + 1 - len(shape)) + shape


def _too_few_axes(cfg: Config, shape: tuple) -> tuple:
    """`shape` cut to one axis fewer than an unbatched input has."""
    return shape[len(shape) - (_ranks(cfg)[0] - 1):]


@dataclass(frozen=True)
class WrongInput:
    """One way to get a shape wrong: `change` maps the valid shapes (input, h0[, c0]) to wrong ones."""

    name: str
    description: str
    change: Callable[[Config, dict], dict]
    applies: Callable[[Case], bool] = lambda case: True


WRONG_INPUTS = (
    WrongInput("input-size", "input with one feature too many",
               lambda cfg, s: {**s, "input": _resized(s["input"], -1)}),
    WrongInput("input-rank-high", "input with an extra axis",
               lambda cfg, s: {**s, "input": _too_many_axes(cfg, s["input"])}),
    WrongInput("input-rank-low", "input with too few axes",
               lambda cfg, s: {**s, "input": _too_few_axes(cfg, s["input"])}),
    WrongInput("h0-batch", "h0 with a batch size other than the input's",
               lambda cfg, s: {**s, "h0": _resized(s["h0"], 0 if cfg.is_cell else 1)},
               applies=lambda case: case.batched),
    WrongInput("h0-size", "h0 with one feature too many",
               lambda cfg, s: {**s, "h0": _resized(s["h0"], -1)}),
    WrongInput("h0-layers", "h0 with one layer too many",
               lambda cfg, s: {**s, "h0": _resized(s["h0"], 0)},
               applies=lambda case: not case.config.is_cell),
    WrongInput("h0-rank-high", "h0 with an extra leading axis",
               lambda cfg, s: {**s, "h0": (2,) + s["h0"]}),
    # (Not for an unbatched cell, whose h0 would become a 0-D scalar.)
    WrongInput("h0-rank-low", "h0 without its first axis",
               lambda cfg, s: {**s, "h0": s["h0"][1:]},
               applies=lambda case: case.batched or not case.config.is_cell),
    WrongInput("c0-size", "c0 with one feature too many",
               lambda cfg, s: {**s, "c0": _resized(s["c0"], -1)},
               applies=lambda case: case.config.family == "lstm"),
)


def check_rejected(subject, case, wrong: WrongInput) -> dict:
    """A wrongly shaped input or initial state raises ValueError, RuntimeError or TypeError."""
    cfg = case.config
    valid = io_shapes(cfg, case.batch, case.steps)
    names = ("input", *state_names(cfg))
    shapes = wrong.change(cfg, {name: valid[name] for name in names})
    rng = subject.rng("errors", wrong.name, case.name)
    tensors = {name: subject.tensor(rng.normal(size=shapes[name]), "float32") for name in names}
    module = subject.build(cfg, "float32")
    shown = ", ".join(f"{name} {tuple(shapes[name])}" for name in names)
    try:
        module(tensors["input"], nest_hx(cfg, {name: tensors[name] for name in names[1:]}))
    except REJECTIONS as exc:
        return {"raised": type(exc).__name__}
    except Exception as exc:
        raise Finding(f"{wrong.description} ({shown}) raised {one_line(exc)}, "
                      f"expected {rejection_names()}") from exc
    raise Finding(f"{wrong.description} ({shown}) was accepted", "silent_broadcast")
