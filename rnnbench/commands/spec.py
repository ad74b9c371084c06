"""`rnnbench spec KIND ...`: the spec of one configuration, as a page to implement from.

Prints the parameters (names in torch.nn's order, shapes, init distribution), the parameter
count, the gate order, the input, state and output shapes for the given batch and sequence
length (batched and unbatched), the forward FLOPs and the tolerances a conforming implementation
is held to.
"""
from __future__ import annotations

import math
from dataclasses import fields

from tabulate import tabulate

from rnnbench.errors import UsageError
from rnnbench.reference import (
    Config, ConfigError, KINDS, forward_flops, init_spec, io_shapes, param_count, param_shapes,
    tolerance,
)

TORCH_NAMES = {"rnn_cell": "RNNCell", "lstm_cell": "LSTMCell", "gru_cell": "GRUCell",
               "rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
DEFAULT_BATCH = 3
DEFAULT_STEPS = 5
# The dtypes whose tolerances the page lists; the policy knows more.
SHOWN_DTYPES = ("float64", "float32", "bfloat16")


def add_arguments(parser) -> None:
    parser.add_argument("kind", help=f"one of {', '.join(KINDS)}")
    parser.add_argument("--input-size", type=int, required=True, metavar="I")
    parser.add_argument("--hidden-size", type=int, required=True, metavar="H")
    parser.add_argument("--num-layers", type=int, default=1)
    parser.add_argument("--nonlinearity", default="tanh", help="tanh or relu (Elman kinds)")
    parser.add_argument("--no-bias", action="store_true", help="bias=False")
    parser.add_argument("--batch-first", action="store_true")
    parser.add_argument("--bidirectional", action="store_true")
    parser.add_argument("--proj-size", type=int, default=0, help="LSTM projection size")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, metavar="N",
                        help=f"batch size for the shapes and FLOPs (default {DEFAULT_BATCH})")
    parser.add_argument("--steps", type=int, default=None, metavar="T",
                        help=f"sequence length, sequence kinds only (default {DEFAULT_STEPS})")


def run(args) -> int:
    cfg = _config(args)
    if args.batch < 0:
        raise UsageError(f"--batch must be >= 0, got {args.batch}")
    if cfg.is_cell and args.steps is not None:
        raise UsageError(f"{cfg.kind} takes one step; --steps applies to sequence kinds")
    steps = 1 if cfg.is_cell else (DEFAULT_STEPS if args.steps is None else args.steps)
    if steps < 1:
        raise UsageError(f"--steps must be at least 1, got {steps}")
    print(render(cfg, args.batch, steps))
    return 0


def _config(args) -> Config:
    options = dict(num_layers=args.num_layers, nonlinearity=args.nonlinearity,
                   bias=not args.no_bias, batch_first=args.batch_first, dropout=args.dropout,
                   bidirectional=args.bidirectional, proj_size=args.proj_size)
    # Pass only what differs from Config's defaults, so Config judges what the user asked for.
    defaults = {f.name: f.default for f in fields(Config)}
    options = {k: v for k, v in options.items() if v != defaults[k]}
    try:
        return Config(args.kind, args.input_size, args.hidden_size, **options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def render(cfg: Config, batch: int, steps: int) -> str:
    """The spec page of `cfg` for a batch of `batch` sequences of `steps` steps."""
    title = cfg.describe()
    sections = [title, "=" * len(title), f"torch.nn.{TORCH_NAMES[cfg.kind]}({_kwargs(cfg)})", "",
                _parameters(cfg), "", _gates(cfg), "",
                _shapes(cfg, batch, steps), "", _flops(cfg, batch, steps), "",
                _tolerances(cfg, steps)]
    if cfg.dropout:
        sections += ["", f"dropout {cfg.dropout} applies between layers in training mode only; "
                         "eval-mode forward (the reference) never drops."]
    sections += ["", "Equations and conventions: python -m pydoc rnnbench.reference.numerics"]
    return "\n".join(sections)


def _kwargs(cfg: Config) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in cfg.constructor_kwargs().items())


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
