"""Error inputs: a wrongly shaped input or initial state raises, and is never silently broadcast.

Each row of WRONG_INPUTS turns the valid shapes of a case into wrong ones, and is a check of its
own (`error-<name>`). What must happen is what torch.nn does: raise ValueError, RuntimeError or
TypeError (the type is not pinned further, nor the message). Accepting the input is the
`silent_broadcast` diagnosis; the wrong shapes include those that broadcast (a batch of 1, a
state without its batch axis), since those are the ones an implementation accepts by accident.
A rejection counts only when the same module accepts the matching valid input: a module that
raises on everything proves nothing by raising here (`rejects_valid_input`).

The shapes come from the kind's spec record, so every kind's suite record lists the rows that fit
it (`SuiteKind.wrong_inputs`): torch.nn's kinds all of WRONG_INPUTS; others the input rows;
and `INPUT_DTYPE` where a module must refuse an input in a dtype other than its own instead of
casting it (torch.nn's kinds, whose modules raise on one, and the implicit kind).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rnnbench.errors import one_line
from rnnbench.reference import Config
from rnnbench.reference.kinds import kind_of
from rnnbench.suites.cases import Case
from rnnbench.suites.results import Finding

REJECTIONS = (ValueError, RuntimeError, TypeError)


def rejection_names() -> str:
    return ", ".join(t.__name__ for t in REJECTIONS)


def _resized(shape: tuple, axis: int, size: int | None = None) -> tuple:
    """`shape` with one more element along `axis` (or exactly `size` elements)."""
    shape = list(shape)
    shape[axis] = shape[axis] + 1 if size is None else size
    return tuple(shape)


def _batch_axis(cfg: Config) -> int:
    """The batch axis of a batched initial state: 0 for cells, 1 for (layers, batch, H)."""
    return 0 if cfg.is_cell else 1


def _ranks(cfg: Config) -> tuple[int, int]:
    """The (unbatched, batched) rank of the input, as the spec's shapes have it."""
    io_shapes = kind_of(cfg).io_shapes
    return len(io_shapes(cfg, None, 1)["input"]), len(io_shapes(cfg, 1, 1)["input"])


def _too_many_axes(cfg: Config, shape: tuple) -> tuple:
    """`shape` grown by leading axes of 2 to one more axis than a batched input has."""
    return (2,) * (_ranks(cfg)[1] + 1 - len(shape)) + shape


def _too_few_axes(cfg: Config, shape: tuple) -> tuple:
    """`shape` cut to one axis fewer than an unbatched input has."""
    return shape[len(shape) - (_ranks(cfg)[0] - 1):]


@dataclass(frozen=True)
class WrongInput:
    """One way to get an input wrong: `change` maps the valid shapes (input, h0[, c0]) to wrong
    ones; `other_dtype`: the input is in the other of float32 and float64 than the module's (the
    state in the module's); `accepted`: the diagnosis of a module that accepts them."""

    name: str
    description: str
    change: Callable[[Config, dict], dict]
    applies: Callable[[Case], bool] = lambda case: True
    other_dtype: bool = False
    accepted: str = "silent_broadcast"

    @property
    def features(self) -> tuple[str, ...]:
        """A wrong initial state needs one to be passed at all; a wrong input goes with a valid
        state, or alone to a forward that takes none."""
        return () if self.name.startswith("input") else ("initial_state",)


def _has_state(case, name: str) -> bool:
    """Whether the case's kind takes a state called `name` (c0: LSTM kinds)."""
    cfg = case.config
    return name in kind_of(cfg).state_names(cfg)


def _batch_over_one(case: Case) -> bool:
    return case.batched and case.batch > 1


WRONG_INPUT_SHAPES = (
    WrongInput("input-size", "input with one feature too many",
               lambda cfg, s: {**s, "input": _resized(s["input"], -1)}),
    WrongInput("input-rank-high", "input with an extra axis",
               lambda cfg, s: {**s, "input": _too_many_axes(cfg, s["input"])}),
    WrongInput("input-rank-low", "input with too few axes",
               lambda cfg, s: {**s, "input": _too_few_axes(cfg, s["input"])}),
)

INPUT_DTYPE = WrongInput("input-dtype", "input in another dtype than the module's",
                         lambda cfg, s: s, other_dtype=True, accepted="input_dtype_accepted")
OTHER_DTYPE = {"float32": "float64", "float64": "float32"}

WRONG_INPUTS = (
    *WRONG_INPUT_SHAPES,
    WrongInput("h0-batch", "h0 with a batch size other than the input's",
               lambda cfg, s: {**s, "h0": _resized(s["h0"], _batch_axis(cfg))},
               applies=lambda case: case.batched),
    WrongInput("h0-batch-1", "h0 with a batch of 1 (broadcastable) for a larger batch",
               lambda cfg, s: {**s, "h0": _resized(s["h0"], _batch_axis(cfg), 1)},
               applies=_batch_over_one),
    WrongInput("h0-no-batch-axis", "h0 without its batch axis for batched input",
               lambda cfg, s: {**s, "h0": s["h0"][:1] + s["h0"][2:]},
               applies=lambda case: case.batched and not case.config.is_cell),
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
               applies=lambda case: _has_state(case, "c0")),
    WrongInput("c0-batch", "c0 with a batch size other than the input's",
               lambda cfg, s: {**s, "c0": _resized(s["c0"], _batch_axis(cfg))},
               applies=lambda case: case.batched and _has_state(case, "c0")),
    WrongInput("c0-batch-1", "c0 with a batch of 1 (broadcastable) for a larger batch",
               lambda cfg, s: {**s, "c0": _resized(s["c0"], _batch_axis(cfg), 1)},
               applies=lambda case: _has_state(case, "c0") and _batch_over_one(case)),
)


def check_rejected(subject, case, wrong: WrongInput, dtype: str = "float32") -> dict:
    """A wrongly shaped input or initial state (or one in the wrong dtype) raises ValueError,
    RuntimeError or TypeError, where the same module, built in `dtype`, accepts the valid ones."""
    cfg = case.config
    spec = kind_of(cfg)
    valid = spec.io_shapes(cfg, case.batch, case.steps)
    state_names = spec.state_names(cfg)
    names = ("input", *state_names) if subject.takes_state else ("input",)
    shapes = wrong.change(cfg, {name: valid[name] for name in ("input", *state_names)})
    rng = subject.rng("errors", wrong.name, case.name)
    module = subject.build(cfg, dtype)

    def run(shapes: dict, input_dtype: str = dtype):
        # The state as every kind takes it (torch.nn's included): one tensor, or a tuple in the
        # spec's order; in the module's dtype, so that only the input's can be wrong.
        x, *states = (subject.tensor(rng.normal(size=shapes[name]),
                                     input_dtype if name == "input" else dtype) for name in names)
        if not states:
            return module(x)
        return module(x, states[0] if len(states) == 1 else tuple(states))

    try:
        run(valid)
    except Exception as exc:
        raise Finding(f"the valid input ({_shown(names, valid)}) raised {one_line(exc)} as well, "
                      "so rejecting the wrong one proves nothing", "rejects_valid_input") from exc
    try:
        run(shapes, OTHER_DTYPE[dtype] if wrong.other_dtype else dtype)
    except REJECTIONS as exc:
        return {"raised": type(exc).__name__}
    except Exception as exc:
        raise Finding(f"{wrong.description} ({_shown(names, shapes)}) raised {one_line(exc)}, "
                      f"expected {rejection_names()}", "wrong_exception_type") from exc
    raise Finding(f"{wrong.description} ({_shown(names, shapes)}) was accepted", wrong.accepted)


def _shown(names, shapes) -> str:
    return ", ".join(f"{name} {tuple(shapes[name])}" for name in names)
