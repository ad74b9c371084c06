"""The spec's data against what torch.nn actually constructs and returns."""
from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from rnnbench.crosscheck import TORCH_MODULES
from rnnbench.reference import (
    Config, ConfigError, flatten_outputs, forward_flops, init_spec, io_shapes, nest_state,
    param_count, param_shapes, state_names,
)

# (kind, constructor arguments beyond input_size=3, hidden_size=4, valid?, why torch differs).
# The last field names a call torch accepts at construction though the spec refuses it.
VALIDATION = [
    ("rnn", {}, True, None),
    ("rnn", dict(nonlinearity="relu", num_layers=3, bias=False, batch_first=True,
                 bidirectional=True, dropout=0.5), True, None),
    ("rnn", dict(dropout=1.0), True, None),
    ("lstm", dict(proj_size=3, num_layers=2, bidirectional=True), True, None),
    ("gru_cell", dict(bias=False), True, None),
    ("rnn_cell", dict(nonlinearity="relu"), True, None),
    ("rnn", dict(input_size=0), False, None),
    ("gru", dict(hidden_size=0), False, None),
    ("rnn", dict(hidden_size=4.0), False, None),
    ("lstm", dict(num_layers=0), False, None),
    ("gru", dict(num_layers=2.5), False, None),
    ("rnn", dict(nonlinearity="gelu"), False, None),
    ("gru", dict(nonlinearity="relu"), False, None),
    ("rnn", dict(dropout=-0.1), False, None),
    ("rnn", dict(dropout=1.5), False, None),
    ("lstm", dict(dropout="0.5"), False, None),
    ("gru", dict(dropout=True), False, None),
    ("lstm", dict(proj_size=4), False, None),
    ("lstm", dict(proj_size=-1), False, None),
    ("lstm", dict(proj_size=1.5), False, None),
    ("gru", dict(proj_size=1), False, None),
    ("rnn", dict(bias="yes"), False, None),
    ("lstm", dict(batch_first=1), False, None),
    ("lstm_cell", dict(num_layers=2), False, None),
    ("gru_cell", dict(bidirectional=True), False, None),
    ("rnn_cell", dict(batch_first=True), False, None),
    ("gru_cell", dict(dropout=0.1), False, None),
    ("rnn_cell", dict(nonlinearity="gelu"), False, "torch's RNNCell checks it only at forward"),
    ("gru_cell", dict(input_size=0), False, "torch.nn's cells accept zero sizes"),
    ("lstm", dict(bidirectional=1), False, "torch.nn does not check bidirectional's type"),
]


def _torch_constructs(kind: str, kwargs: dict) -> bool:
    arguments = dict(dict(input_size=3, hidden_size=4), **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropout with one layer warns
        try:
            TORCH_MODULES[kind](**arguments)
        except (TypeError, ValueError, RuntimeError):
            return False
    return True


@pytest.mark.parametrize("kind,kwargs,valid,torch_differs", VALIDATION,
                         ids=[f"{v[0]}-{v[1]}" for v in VALIDATION])
def test_config_validates_like_torch(kind, kwargs, valid, torch_differs):
    arguments = dict(dict(input_size=3, hidden_size=4), **kwargs)
    if valid:
        Config(kind, **arguments)
    else:
        with pytest.raises(ConfigError):
            Config(kind, **arguments)
    assert _torch_constructs(kind, kwargs) == (valid or torch_differs is not None)


def test_unknown_kind_is_refused():
    with pytest.raises(ConfigError, match="kind must be one of"):
        Config("transformer", 3, 4)


def _grid() -> list[Config]:
    configs = []
    for kind in TORCH_MODULES:
        cell = kind.endswith("_cell")
        for bias, nonlinearity, layers, bidirectional, batch_first, proj in itertools.product(
                (True, False), ("tanh", "relu") if kind.startswith("rnn") else ("tanh",),
                (1,) if cell else (1, 3), (False,) if cell else (False, True),
                (False,) if cell else (False, True), (0, 2) if kind == "lstm" else (0,)):
            configs.append(Config(kind, 3, 5, num_layers=layers, nonlinearity=nonlinearity,
                                  bias=bias, batch_first=batch_first,
                                  bidirectional=bidirectional, proj_size=proj))
    return configs


GRID = _grid()


def _module(cfg: Config):
    torch.manual_seed(0)
    return TORCH_MODULES[cfg.kind](**cfg.constructor_kwargs(), dtype=torch.float64)


@pytest.mark.parametrize("cfg", GRID, ids=Config.describe)
def test_parameter_names_order_shapes_and_count(cfg):
    module = _module(cfg)
    actual = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
    assert actual == list(param_shapes(cfg).items())
    assert param_count(cfg) == sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("cfg", GRID, ids=Config.describe)
def test_torch_init_lies_within_the_init_spec(cfg):
    spec = init_spec(cfg)
    for name, p in _module(cfg).named_parameters():
        assert spec[name].low <= p.min().item() and p.max().item() <= spec[name].high, name


def test_init_bound_is_tight():
    # With thousands of draws the extremes come within 1% of the bound (a too-wide spec fails).
    cfg = Config("lstm", 64, 64)
    spec = init_spec(cfg)
    for name, p in _module(cfg).named_parameters():
        assert p.abs().max().item() > 0.99 * spec[name].high, name


@pytest.mark.parametrize("batch", [None, 0, 2], ids=["unbatched", "batch0", "batch2"])
@pytest.mark.parametrize("cfg", GRID, ids=Config.describe)
def test_io_shapes_match_torch(cfg, batch):
    steps = 4
    shapes = io_shapes(cfg, batch, steps)
    module = _module(cfg)
    x = torch.zeros(shapes["input"], dtype=torch.float64)
    hx = nest_state(cfg, {n: torch.zeros(shapes[n], dtype=torch.float64) for n in state_names(cfg)})
    for given in (None, hx):  # torch refuses a wrongly shaped state
        outputs = flatten_outputs(cfg, module(x, given))
        assert {name: tuple(t.shape) for name, t in outputs.items()} == \
            {name: shapes[name] for name in outputs}


SINGLE_LAYER = [c for c in GRID if c.num_layers == 1 and not c.bidirectional and not c.proj_size]


@pytest.mark.parametrize("cfg", SINGLE_LAYER, ids=Config.describe)
def test_forward_flops_count_the_gate_matmuls(cfg):
    # DeepBench's Elman count 2*T*B*H*(I+H), once per gate block.
    batch, steps = 2, 1 if cfg.is_cell else 7
    per_block = 2 * steps * batch * cfg.hidden_size
    recurrent = len(cfg.gates) * per_block * cfg.hidden_size
    assert forward_flops(cfg, batch, steps, input_gemm=False) == recurrent
    projection = len(cfg.gates) * per_block * cfg.input_size
    assert forward_flops(cfg, batch, steps) == recurrent + projection
    if not cfg.is_cell:
        assert forward_flops(cfg.replace(bidirectional=True), batch, steps) == \
            2 * forward_flops(cfg, batch, steps)
