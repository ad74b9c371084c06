"""`rnnbench spec KIND ...`: the spec of one configuration, as a page to implement from.

For torch.nn's kinds: the parameters (names in torch.nn's order, shapes, init distribution), the
parameter count, the gate order, the input, state and output shapes for the given batch and
sequence length (batched and unbatched), the forward FLOPs and the tolerances a conforming
implementation is held to. For the implicit kind: its equations, parameters and init, shapes,
the solver's stopping rule and error bound, and the FLOPs per step and per solver iteration.
"""
from __future__ import annotations

import argparse
import math
import textwrap

from tabulate import tabulate

from rnnbench.errors import UsageError
from rnnbench.reference import (
    Config, ConfigError, ImplicitConfig, KINDS, forward_flops, implicit_init_spec,
    implicit_param_shapes, init_spec, io_shapes, param_count, param_shapes, tolerance,
)
from rnnbench.reference import implicit as implicit_spec

IMPLICIT = implicit_spec.KIND
ALL_KINDS = KINDS + (IMPLICIT,)
TORCH_NAMES = {"rnn_cell": "RNNCell", "lstm_cell": "LSTMCell", "gru_cell": "GRUCell",
               "rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
DEFAULT_BATCH = 3
DEFAULT_STEPS = 5
WIDTH = 100
# The dtypes whose tolerances the page lists; the policy knows more.
SHOWN_DTYPES = ("float64", "float32", "bfloat16")
# Options of one family of kinds, by their Config / ImplicitConfig field names.
TORCH_OPTIONS = ("num_layers", "nonlinearity", "no_bias", "batch_first", "bidirectional",
                 "proj_size", "dropout")
IMPLICIT_OPTIONS = ("implicit_size", "output_size", "phi", "kappa", "tol", "max_iter",
                    "d_variant")
DESCRIPTION = "print the spec of one configuration: parameters, init, shapes, FLOPs, tolerances"
EXAMPLES = """\
examples:
  rnnbench spec lstm --input-size 5 --hidden-size 7 --num-layers 2 --bidirectional --steps 6
  rnnbench spec gru_cell --input-size 6 --hidden-size 2 --batch 9
  rnnbench spec rnn --input-size 3 --hidden-size 4 --nonlinearity relu --no-bias
  rnnbench spec implicit --input-size 4 --hidden-size 32 --implicit-size 16 --output-size 1
"""


def add_arguments(parser) -> None:
    parser.description = DESCRIPTION
    parser.epilog = EXAMPLES
    parser.add_argument("kind", metavar="KIND",
                        help=f"one of {', '.join(ALL_KINDS)}, e.g. lstm")
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
    if args.kind not in ALL_KINDS:
        raise UsageError(f"kind must be one of {', '.join(ALL_KINDS)}, got {args.kind!r}")
    implicit = args.kind == IMPLICIT
    foreign = IMPLICIT_OPTIONS if not implicit else TORCH_OPTIONS
    given = [name for name in foreign if getattr(args, name) is not None]
    if given:
        family = "the implicit kind" if not implicit else "torch.nn's kinds"
        raise UsageError(f"{_flag(given[0])} applies to {family}, not {args.kind}")
    if implicit:
        cfg = _implicit_config(args)
        steps = DEFAULT_STEPS if args.steps is None else args.steps
        print(render_implicit(cfg, args.batch, steps))
        return 0
    cfg = _config(args)
    if cfg.is_cell and args.steps is not None:
        raise UsageError(f"{cfg.kind} takes one step; --steps applies to sequence kinds")
    steps = 1 if cfg.is_cell else (DEFAULT_STEPS if args.steps is None else args.steps)
    print(render(cfg, args.batch, steps))
    return 0


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

def _config(args) -> Config:
    options = dict(num_layers=args.num_layers, nonlinearity=args.nonlinearity,
                   bias=None if args.no_bias is None else False, batch_first=args.batch_first,
                   dropout=args.dropout, bidirectional=args.bidirectional,
                   proj_size=args.proj_size)
    # Pass only what was given, so Config judges what the user asked for.
    options = {k: v for k, v in options.items() if v is not None}
    try:
        return Config(args.kind, args.input_size, args.hidden_size, **options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _implicit_config(args) -> ImplicitConfig:
    missing = [name for name in ("implicit_size", "output_size") if getattr(args, name) is None]
    if missing:
        raise UsageError(f"the implicit kind needs {' and '.join(map(_flag, missing))}")
    options = {name: getattr(args, name) for name in ("phi", "kappa", "tol", "max_iter",
                                                      "d_variant")
               if getattr(args, name) is not None}
    try:
        return ImplicitConfig(args.input_size, args.hidden_size, args.implicit_size,
                              args.output_size, **options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


# --- the torch.nn kinds' page -------------------------------------------------------------------

def render(cfg: Config, batch: int, steps: int) -> str:
    """The spec page of `cfg` for a batch of `batch` sequences of `steps` steps."""
    title = cfg.describe()
    sections = [title, "=" * len(title), _call(f"torch.nn.{TORCH_NAMES[cfg.kind]}",
                                               cfg.constructor_kwargs()), "",
                _parameters(cfg), "", _gates(cfg), "",
                _shapes(cfg, batch, steps), "", _flops(cfg, batch, steps), "",
                _tolerances(cfg, steps)]
    if cfg.dropout:
        sections += ["", textwrap.fill(f"dropout {cfg.dropout} applies between layers in "
                                       "training mode only; eval-mode forward (the reference) "
                                       "never drops.", WIDTH)]
    sections += ["", "Equations and conventions: python -m pydoc rnnbench.reference.numerics"]
    return "\n".join(sections)


def _call(name: str, kwargs: dict) -> str:
    """`name(k=v, ...)` wrapped to WIDTH columns."""
    text = f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    return textwrap.fill(text, WIDTH, subsequent_indent=" " * (len(name) + 1),
                         break_on_hyphens=False)


def _parameters(cfg: Config) -> str:
    init = init_spec(cfg)
    rows = [[name, str(shape), math.prod(shape), str(init[name])]
            for name, shape in param_shapes(cfg).items()]
    bound = f"1/sqrt({cfg.hidden_size})"
    table = tabulate(rows, headers=["parameter", "shape", "count", "init"], disable_numparse=True)
    return (f"Parameters, in torch.nn's registration order (init U(-{bound}, {bound}) for all):\n"
            f"{table}\ntotal parameters: {param_count(cfg)}")


def _gates(cfg: Config) -> str:
    if len(cfg.gates) == 1:
        return "Gates: one block (the Elman update); weight rows = hidden_size."
    return (f"Gates, stacked along each weight's first axis in this order: {', '.join(cfg.gates)} "
            f"({cfg.hidden_size} rows each).")


def _shapes(cfg: Config, batch: int, steps: int) -> str:
    batched, unbatched = io_shapes(cfg, batch, steps), io_shapes(cfg, None, steps)
    rows = [[name, str(batched[name]), str(unbatched[name])] for name in batched]
    layout = "(N, T, ...)" if cfg.batch_first else "(T, N, ...)"
    note = "" if cfg.is_cell else f"; batched sequences are {layout}, states are never batch-first"
    where = f"N={batch}" if cfg.is_cell else f"N={batch}, T={steps}"
    return (f"Shapes ({where}{note}):\n"
            + tabulate(rows, headers=["tensor", "batched", "unbatched"], disable_numparse=True))


def _flops(cfg: Config, batch: int, steps: int) -> str:
    total = forward_flops(cfg, batch, steps)
    recurrent = forward_flops(cfg, batch, steps, input_gemm=False)
    return (f"Forward FLOPs (matmuls, multiply-add = 2; N={batch}" +
            ("" if cfg.is_cell else f", T={steps}") + f"): {total:,}\n"
            f"  without the input projection (DeepBench's convention): {recurrent:,}")


def _tolerances(cfg: Config, steps: int) -> str:
    rows = [[dtype, str(tolerance(dtype, steps, cfg.num_layers)),
             str(tolerance(dtype, steps, cfg.num_layers, gradient=True))]
            for dtype in SHOWN_DTYPES]
    return ("Tolerances against the float64 reference (|actual - expected| <= atol + rtol * "
            "|expected|):\n" + tabulate(rows, headers=["dtype", "outputs", "gradients"],
                                        disable_numparse=True))


# --- the implicit kind's page ------------------------------------------------------------------

def render_implicit(cfg: ImplicitConfig, batch: int, steps: int) -> str:
    """The spec page of an ImplicitRNN configuration for `batch` sequences of `steps` steps."""
    title = cfg.describe()
    p, h, n, q = cfg.input_size, cfg.hidden_size, cfg.implicit_size, cfg.output_size
    init = implicit_init_spec(cfg)
    shapes = implicit_param_shapes(cfg)
    rows = [[name, str(shape), math.prod(shape), str(init[name])] for name, shape in shapes.items()]
    d_update = "U_t D^T" if cfg.d_variant == "documented" else "[U_t, H_{t-1}] D^T"
    step_error = cfg.tol / (1 - cfg.kappa)
    base = implicit_spec.forward_flops(cfg, batch, steps, 0)
    per_iteration = implicit_spec.forward_flops(cfg, batch, steps, 1) - base
    return "\n".join([
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
        f"D is {shapes['D'][0]} x {shapes['D'][1]}):",
        tabulate(rows, headers=["parameter", "shape", "count", "init"], disable_numparse=True),
        f"total parameters: {sum(math.prod(s) for s in shapes.values())}",
        "",
        f"Shapes (N={batch}, T={steps}; input batch-first, there is no unbatched form):",
        tabulate([["input", str((batch, steps, p))], ["output", str((batch, q))]],
                 headers=["tensor", "shape"], disable_numparse=True),
        "",
        textwrap.fill(f"Solver, the stopping rule an implementation must honour in forward and "
                      f"backward solves: Picard iteration from X = 0, stopping when the max-abs "
                      f"change over the whole batch is below tol = {cfg.tol:g}, after at most "
                      f"max_iter = {cfg.max_iter} iterations (then with a warning). Its iterate "
                      f"is within tol / (1 - kappa) = {step_error:.3g} of the fixed point in "
                      "every entry.", WIDTH),
        "",
        f"Forward FLOPs (matmuls, multiply-add = 2; N={batch}, T={steps}): {base:,} "
        "without the solver,",
        f"  plus {per_iteration:,} per Picard iteration (X A~^T; the count comes from a run)",
        "",
        textwrap.fill("Tolerances: the float64 rounding policy plus the solver's error bound "
                      "carried to the outputs and gradients, computed per case "
                      "(rnnbench.reference.implicit.output_tolerance, gradient_tolerance); "
                      "implicit models are checked in float64.", WIDTH),
        "",
        "Equations and conventions: python -m pydoc rnnbench.reference.implicit",
    ])

