"""`rnnbench spec KIND ...`: the spec of one configuration, as a page to implement from.

Every kind's page comes from its record in the kind registry (`rnnbench.reference.kinds`): the
parameters (names in registration order, shapes, init distribution), the parameter count, the
input, state and output shapes for the given batch and sequence length (batched and, where the
kind has that form, unbatched), the forward FLOPs and the tolerances a conforming
implementation is held to. A kind's options are the fields of its configuration type. The
families the spec knows say more: torch.nn's kinds their gate order, the implicit kind its
equations, the solver's stopping rule and error bound, and the FLOPs per solver iteration.
`--json` prints the page as data.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from rnnbench.errors import UsageError
from rnnbench.reference import Config, ImplicitConfig
from rnnbench.reference import implicit as implicit_spec
from rnnbench.reference.kinds import KINDS, KindSpec

TORCH_NAMES = {"rnn_cell": "RNNCell", "lstm_cell": "LSTMCell", "gru_cell": "GRUCell",
               "rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
DEFAULT_BATCH = 3
DEFAULT_STEPS = 5
WIDTH = 100
# The dtypes whose tolerances the page lists; the policy knows more.
SHOWN_DTYPES = ("float64", "float32", "bfloat16")
# The options that set a configuration's fields (beyond --input-size and --hidden-size); each
# sets the field of its name, but for those in FIELDS.
CONFIG_OPTIONS = ("input_size", "hidden_size", "num_layers", "nonlinearity", "no_bias",
                  "batch_first", "bidirectional", "proj_size", "dropout", "implicit_size",
                  "output_size", "phi", "kappa", "tol", "max_iter", "d_variant")
FIELDS = {"no_bias": "bias"}     # --no-bias sets bias=False
DESCRIPTION = "print the spec of one configuration: parameters, init, shapes, FLOPs, tolerances"
EXAMPLES = """\
examples:
  rnnbench spec lstm --input-size 5 --hidden-size 7 --num-layers 2 --bidirectional --steps 6
  rnnbench spec gru_cell --input-size 6 --hidden-size 2 --batch 9
  rnnbench spec rnn --input-size 3 --hidden-size 4 --nonlinearity relu --no-bias
  rnnbench spec implicit --input-size 4 --hidden-size 32 --implicit-size 16 --output-size 1

exit codes: 0 the page was printed, 2 a usage error (one line)
"""


def add_arguments(parser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = EXAMPLES
    parser.add_argument("kind", metavar="KIND",
                        help=f"one of {', '.join(KINDS)}, or a kind a registered package adds, "
                             "e.g. lstm")
    parser.add_argument("--input-size", type=_positive_int, required=True, metavar="I",
                        help="features per time step, e.g. --input-size 64")
    parser.add_argument("--hidden-size", type=_positive_int, required=True, metavar="H",
                        help="features of the hidden state, e.g. --hidden-size 128")
    parser.add_argument("--batch", type=_positive_int, default=DEFAULT_BATCH, metavar="N",
                        help=f"batch size for the shapes and FLOPs (default {DEFAULT_BATCH}), "
                             "e.g. --batch 32")
    parser.add_argument("--steps", type=_positive_int, default=None, metavar="T",
                        help=f"sequence length, sequence kinds (default {DEFAULT_STEPS}), "
                             "e.g. --steps 100")
    parser.add_argument("--json", action="store_true",
                        help="print the page as JSON (parameters, shapes, FLOPs, tolerances), "
                             "e.g. `spec gru --input-size 3 --hidden-size 4 --json`")
    torch_nn = parser.add_argument_group("torch.nn kinds (rnn, lstm, gru and their cells)")
    torch_nn.add_argument("--num-layers", type=_positive_int, metavar="L",
                          help="stacked layers (default 1), e.g. --num-layers 2")
    torch_nn.add_argument("--nonlinearity", choices=("tanh", "relu"),
                          help="the Elman kinds' activation (default tanh), "
                               "e.g. --nonlinearity relu")
    torch_nn.add_argument("--no-bias", action="store_true", default=None,
                          help="no bias vectors (bias=False), e.g. --no-bias")
    torch_nn.add_argument("--batch-first", action="store_true", default=None,
                          help="input and output as (N, T, ...), e.g. --batch-first")
    torch_nn.add_argument("--bidirectional", action="store_true", default=None,
                          help="a reverse direction per layer, e.g. --bidirectional")
    torch_nn.add_argument("--proj-size", type=_natural_int, metavar="P",
                          help="LSTM only: project h to P features (default 0: none), "
                               "e.g. --proj-size 4")
    torch_nn.add_argument("--dropout", type=_probability, metavar="p",
                          help="dropout between layers in training (default 0), "
                               "e.g. --dropout 0.25")
    implicit = parser.add_argument_group("implicit kind (the ImplicitRNN)")
    implicit.add_argument("--implicit-size", type=_positive_int, metavar="n",
                          help="required: size of the equilibrium state X, "
                               "e.g. --implicit-size 16")
    implicit.add_argument("--output-size", type=_positive_int, metavar="Q",
                          help="required: outputs of the linear head, e.g. --output-size 1")
    implicit.add_argument("--phi", choices=implicit_spec.PHIS,
                          help="activation (default relu), e.g. --phi tanh")
    implicit.add_argument("--kappa", type=_fraction, metavar="K",
                          help="well-posedness bound on ||A||_inf, in (0, 1) (default 0.99), "
                               "e.g. --kappa 0.95")
    implicit.add_argument("--tol", type=_positive_float, metavar="TOL",
                          help="solver tolerance on the max-abs change (default 3e-6), "
                               "e.g. --tol 1e-8")
    implicit.add_argument("--max-iter", type=_positive_int, metavar="M",
                          help="solver iteration cap (default 300), e.g. --max-iter 500")
    implicit.add_argument("--d-variant", choices=implicit_spec.D_VARIANTS,
                          help="documented: H_t uses D U_t; library: D [U_t, H_{t-1}] "
                               "(default documented), e.g. --d-variant library")


def run(args) -> int:
    spec = _kind(args.kind)
    cfg = _config(spec, args)
    if not spec.steps_matter and args.steps is not None:
        raise UsageError(f"{spec.name} takes one step; --steps applies to sequence kinds")
    steps = 1 if not spec.steps_matter else DEFAULT_STEPS if args.steps is None else args.steps
    if args.json:
        print(json.dumps(page(spec, cfg, args.batch, steps), indent=2))
    else:
        print(render(spec, cfg, args.batch, steps))
    return 0


def _kind(name: str) -> KindSpec:
    """The record of a kind: the spec's own, or one a registered package adds on import."""
    if name not in KINDS:
        from rnnbench.impls import registered

        registered()    # imports the `rnnbench.impls` entry points, which may register kinds
    if name not in KINDS:
        raise UsageError(f"kind must be one of {', '.join(KINDS)}, got {name!r}")
    return KINDS[name]


# --- argument types: a wrong value is argparse's one-line error ---------------------------------

def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _natural_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _probability(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a probability in [0, 1], got {text}")
    return value


def _fraction(text: str) -> float:
    value = _float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


def _positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0.0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# --- configurations ---------------------------------------------------------------------------

def _config(spec: KindSpec, args):
    """The configuration the options describe, judged by the kind's own configuration type:
    an option the type has no field for, or a field without a default left out, is a
    UsageError; so is what the type refuses."""
    fields = {f.name: f for f in dataclasses.fields(spec.config_type) if f.name != "kind"}
    given = {name: getattr(args, name) for name in CONFIG_OPTIONS
             if getattr(args, name) is not None}
    foreign = [name for name in given if FIELDS.get(name, name) not in fields]
    if foreign:
        field = FIELDS.get(foreign[0], foreign[0])
        takers = [kind.name for kind in KINDS.values()
                  if field in {f.name for f in dataclasses.fields(kind.config_type)}]
        message = (f"{_flag(foreign[0])} applies to the {_listed(takers)} "
                   f"kind{'s' * (len(takers) != 1)}, not {spec.name}")
        if len(message) > WIDTH - len("rnnbench spec: error: "):    # the one line must fit
            message = f"{_flag(foreign[0])} is not an option of the {spec.name} kind"
        raise UsageError(message)
    values = {FIELDS.get(name, name): False if name == "no_bias" else value
              for name, value in given.items()}
    missing = [name for name, f in fields.items() if name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise UsageError(f"the {spec.name} kind needs {_listed([_flag(m) for m in missing])}")
    try:
        return spec.make_config(**values)
    except (ValueError, TypeError) as exc:     # ConfigError is a ValueError
        raise UsageError(str(exc)) from None


def _listed(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))


# --- the page as data (--json) -------------------------------------------------------------------

def page(spec: KindSpec, cfg, batch: int, steps: int) -> dict:
    """What the spec says of `cfg` for `batch` sequences of `steps` steps, from the kind's
    record: its arguments, parameters (shape, count, init), tensors' shapes batched and
    unbatched (None: no unbatched form), FLOPs (None: the spec cannot count them) and
    tolerances; plus what its family adds (torch.nn's gate order, the implicit solver's FLOPs)."""
    init = spec.init_spec(cfg)
    shapes = spec.param_shapes(cfg)
    unbatched = _unbatched(spec, cfg, steps)
    data = {
        "kind": spec.name, "description": cfg.describe(), "arguments": cfg.constructor_kwargs(),
        "batch": batch, "steps": steps if spec.steps_matter else None,
        "parameters": [{"name": name, "shape": list(shape), "count": math.prod(shape),
                        "init": str(init[name])} for name, shape in shapes.items()],
        "total_parameters": sum(math.prod(shape) for shape in shapes.values()),
        "shapes": {name: {"batched": list(shape),
                          "unbatched": list(unbatched[name]) if unbatched else None}
                   for name, shape in spec.io_shapes(cfg, batch, steps).items()},
        "flops": {"forward": spec.flops(cfg, batch, steps, True),
                  "without_input_projection": spec.flops(cfg, batch, steps, False)},
        "tolerances": {dtype: {what: dataclasses.asdict(spec.tolerance(cfg, dtype, steps, grad))
                               for what, grad in (("outputs", False), ("gradients", True))}
                       for dtype in SHOWN_DTYPES},
        "tolerance_depends_on_the_run": spec.run_tolerance is not None,
    }
    family = FAMILIES.get(spec.config_type)
    return {**data, **family.data(cfg, batch, steps)} if family else data


def _unbatched(spec: KindSpec, cfg, steps: int) -> dict | None:
    """The tensors' shapes without a batch axis; None for a kind that has no such form (its
    shapes then keep a batch axis of None)."""
    shapes = spec.io_shapes(cfg, None, steps)
    return None if any(None in shape for shape in shapes.values()) else shapes


# --- the page as text ----------------------------------------------------------------------------

def render(spec: KindSpec, cfg, batch: int, steps: int) -> str:
    """The spec page of `cfg` for `batch` sequences of `steps` steps: its family's page where
    the kind belongs to one (torch.nn's, the implicit RNN's), else the page every kind's
    record gives."""
    family = FAMILIES.get(spec.config_type)
    return "\n".join(family.text(spec, cfg, batch, steps) if family
                     else _record_page(spec, cfg, batch, steps))


def _record_page(spec: KindSpec, cfg, batch: int, steps: int) -> list[str]:
    """The page of a kind known only by its record."""
    title = cfg.describe()
    tolerance_note = ("; plus what the run's values add, computed per case"
                      if spec.run_tolerance is not None else "")
    return [title, "=" * len(title), _call(spec.name, cfg.constructor_kwargs()), "",
            "Parameters, in registration order:", _parameter_table(spec, cfg), "",
            _shapes(spec, cfg, batch, steps, ""), "", _flops(spec, cfg, batch, steps), "",
            _tolerances(spec, cfg, steps, tolerance_note)]


def _call(name: str, kwargs: dict) -> str:
    """`name(k=v, ...)` wrapped to WIDTH columns."""
    text = f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    return textwrap.fill(text, WIDTH, subsequent_indent=" " * (len(name) + 1),
                         break_on_hyphens=False)


def _parameter_table(spec: KindSpec, cfg) -> str:
    """Every parameter's name, shape, count and init, and the total."""
    init = spec.init_spec(cfg)
    shapes = spec.param_shapes(cfg)
    rows = [[name, str(shape), math.prod(shape), str(init[name])] for name, shape in shapes.items()]
    table = tabulate(rows, headers=["parameter", "shape", "count", "init"], disable_numparse=True)
    return f"{table}\ntotal parameters: {sum(math.prod(shape) for shape in shapes.values())}"


def _shapes(spec: KindSpec, cfg, batch: int, steps: int, note: str) -> str:
    """The tensors' shapes batched, and unbatched where the kind has that form; `note` follows
    the sizes in the caption."""
    batched, unbatched = spec.io_shapes(cfg, batch, steps), _unbatched(spec, cfg, steps)
    where = f"N={batch}, T={steps}" if spec.steps_matter else f"N={batch}"
    if unbatched is None:
        rows = [[name, str(shape)] for name, shape in batched.items()]
        headers = ["tensor", "shape"]
    else:
        rows = [[name, str(shape), str(unbatched[name])] for name, shape in batched.items()]
        headers = ["tensor", "batched", "unbatched"]
    return f"Shapes ({where}{note}):\n" + tabulate(rows, headers=headers, disable_numparse=True)


def _flops(spec: KindSpec, cfg, batch: int, steps: int) -> str:
    total = spec.flops(cfg, batch, steps, True)
    where = f"N={batch}" + (f", T={steps}" if spec.steps_matter else "")
    if total is None:
        return f"Forward FLOPs ({where}): not counted by the spec"
    recurrent = spec.flops(cfg, batch, steps, False)
    return (f"Forward FLOPs (matmuls, multiply-add = 2; {where}): {total:,}\n"
            f"  without the input projection (DeepBench's convention): {recurrent:,}")


def _tolerances(spec: KindSpec, cfg, steps: int, note: str = "") -> str:
    rows = [[dtype, str(spec.tolerance(cfg, dtype, steps, False)),
             str(spec.tolerance(cfg, dtype, steps, True))] for dtype in SHOWN_DTYPES]
    return ("Tolerances against the float64 reference (|actual - expected| <= atol + rtol * "
            f"|expected|{note}):\n" + tabulate(rows, headers=["dtype", "outputs", "gradients"],
                                               disable_numparse=True))


# --- torch.nn's kinds ----------------------------------------------------------------------------

def _torch_page(spec: KindSpec, cfg: Config, batch: int, steps: int) -> list[str]:
    title = cfg.describe()
    layout = "(N, T, ...)" if cfg.batch_first else "(T, N, ...)"
    note = "" if cfg.is_cell else f"; batched sequences are {layout}, states are never batch-first"
    bound = f"1/sqrt({cfg.hidden_size})"
    sections = [title, "=" * len(title),
                _call(f"torch.nn.{TORCH_NAMES[cfg.kind]}", cfg.constructor_kwargs()), "",
                f"Parameters, in torch.nn's registration order (init U(-{bound}, {bound}) for "
                f"all):\n{_parameter_table(spec, cfg)}", "", _gates(cfg), "",
                _shapes(spec, cfg, batch, steps, note), "", _flops(spec, cfg, batch, steps), "",
                _tolerances(spec, cfg, steps)]
    if cfg.dropout:
        sections += ["", textwrap.fill(f"dropout {cfg.dropout} applies between layers in "
                                       "training mode only; eval-mode forward (the reference) "
                                       "never drops.", WIDTH)]
    return sections + ["", "Equations and conventions: python -m pydoc rnnbench.reference.numerics"]


def _gates(cfg: Config) -> str:
    if len(cfg.gates) == 1:
        return "Gates: one block (the Elman update); weight rows = hidden_size."
    return (f"Gates, stacked along each weight's first axis in this order: {', '.join(cfg.gates)} "
            f"({cfg.hidden_size} rows each).")


# --- the implicit kind ---------------------------------------------------------------------------

def _implicit_page(spec: KindSpec, cfg: ImplicitConfig, batch: int, steps: int) -> list[str]:
    title = cfg.describe()
    p, h, n, q = cfg.input_size, cfg.hidden_size, cfg.implicit_size, cfg.output_size
    d_shape = spec.param_shapes(cfg)["D"]
    d_update = "U_t D^T" if cfg.d_variant == "documented" else "[U_t, H_{t-1}] D^T"
    step_error = cfg.tol / (1 - cfg.kappa)
    flops = _implicit_flops(cfg, batch, steps)
    return [
        title, "=" * len(title), _call("ImplicitRNN", cfg.constructor_kwargs()), "",
        "Equations (one sample per row; for t = 1..T with H_0 = 0):",
        *(f"  {left:<42}{right}" for left, right in (
            (f"X_t = {cfg.phi}(X_t A~^T + [U_t, H_{{t-1}}] B^T)", "the equilibrium: a fixed point"),
            (f"H_t = X_t C^T + {d_update}", f"the hidden update ({cfg.d_variant} variant)"),
            ("Y   = H_T W^T + b", "the head (linear.weight, linear.bias)"),
            ("A~  = A * min(1, kappa / ||A||_inf)", f"well-posed: kappa = {cfg.kappa:g}, "
                                                    "every forward; A is kept"))),
        "",
        f"Parameters (p={p} inputs, h={h} hidden, n={n} implicit, q={q} outputs; "
        f"D is {d_shape[0]} x {d_shape[1]}):",
        _parameter_table(spec, cfg),
        "",
        _shapes(spec, cfg, batch, steps, "; input batch-first, there is no unbatched form"),
        "",
        textwrap.fill(f"Solver, the stopping rule an implementation must honour in forward and "
                      f"backward solves: Picard iteration from X = 0, stopping when the max-abs "
                      f"change over the whole batch is below tol = {cfg.tol:g}, after at most "
                      f"max_iter = {cfg.max_iter} iterations (then with a warning). Its iterate "
                      f"is within tol / (1 - kappa) = {step_error:.3g} of the fixed point in "
                      "every entry.", WIDTH),
        "",
        f"Forward FLOPs (matmuls, multiply-add = 2; N={batch}, T={steps}): "
        f"{flops['forward_without_solver']:,} without the solver,",
        f"  plus {flops['per_solver_iteration']:,} per Picard iteration (X A~^T; the count comes "
        "from a run)",
        "",
        textwrap.fill("Tolerances: the float64 rounding policy plus the solver's error bound "
                      "carried to the outputs and gradients, computed per case "
                      "(rnnbench.reference.implicit.output_tolerance, gradient_tolerance); "
                      "implicit models are checked in float64.", WIDTH),
        "",
        "Equations and conventions: python -m pydoc rnnbench.reference.implicit",
    ]


def _implicit_flops(cfg: ImplicitConfig, batch: int, steps: int) -> dict[str, int]:
    base = implicit_spec.forward_flops(cfg, batch, steps, 0)
    return {"forward_without_solver": base,
            "per_solver_iteration": implicit_spec.forward_flops(cfg, batch, steps, 1) - base}


@dataclass(frozen=True)
class Family:
    """What a family of kinds (kinds of one configuration type) says beyond its record: its
    page's text, and the data it adds to the page's JSON."""

    text: Callable[[KindSpec, Any, int, int], list[str]]
    data: Callable[[Any, int, int], dict]


FAMILIES = {
    Config: Family(_torch_page, lambda cfg, batch, steps: {"gates": list(cfg.gates)}),
    ImplicitConfig: Family(_implicit_page, lambda cfg, batch, steps: {
        "flops": {"forward": None, **_implicit_flops(cfg, batch, steps)}}),
}
