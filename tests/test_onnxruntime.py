"""The onnxruntime implementation: torch.nn's numbers through ONNX Runtime's operators, sessions
built once and reused, parameters seen when they change, and what it declares unsupported."""
from __future__ import annotations

import pytest
import torch

from rnnbench.impls import load
from rnnbench.impls import onnxruntime as ort_impl
from rnnbench.reference import Config

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (the [onnxruntime] extra)")
IMPL = load("onnxruntime")
TOL = {"atol": 2e-5, "rtol": 2e-5}

CONFIGS = [
    Config("rnn", 3, 5, num_layers=2, bidirectional=True),
    Config("rnn", 3, 5, nonlinearity="relu", bias=False),
    Config("lstm", 4, 7, num_layers=2),
    Config("lstm", 3, 5, bidirectional=True),
    Config("gru", 3, 5, num_layers=2, bidirectional=True),
    Config("gru_cell", 3, 5),
    Config("lstm_cell", 4, 7, bias=False),
]


def pair(cfg: Config):
    """torch.nn's module and onnxruntime's, with the same parameters."""
    torch.manual_seed(0)
    native = load("native").constructor(cfg.kind)(**cfg.constructor_kwargs())
    mine = IMPL.constructor(cfg.kind)(**cfg.constructor_kwargs())
    mine.load_state_dict(native.state_dict())
    return native, mine


def inputs(cfg: Config, batch, steps=6):
    lead = () if batch is None else (batch,)
    return torch.randn(lead + (cfg.input_size,) if cfg.is_cell else (steps, *lead, cfg.input_size))


def assert_close(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, **TOL)
    else:
        for x, y in zip(a, b):
            assert_close(x, y)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda cfg: cfg.describe())
@pytest.mark.parametrize("batch", [4, None], ids=["batched", "unbatched"])
@pytest.mark.parametrize("with_state", [True, False], ids=["h0", "no-h0"])
def test_forward_matches_torch_nn(cfg, batch, with_state):
    native, mine = pair(cfg)
    x = inputs(cfg, batch)
    args = (x,)
    if with_state:
        _, state = (None, native(x)) if cfg.is_cell else native(x)
        args = (x, state)
    with torch.no_grad():
        assert_close(mine(*args), native(*args))


def test_a_session_is_built_once_per_configuration_and_reused_for_new_lengths():
    ort_impl.session.cache_clear()
    cfg = Config("gru", 3, 5, num_layers=2)
    with torch.no_grad():
        for _ in range(2):
            module = IMPL.constructor("gru")(**cfg.constructor_kwargs())
            for steps in (4, 9):
                module(torch.randn(steps, 2, 3))
    assert ort_impl.session.cache_info().currsize == 1  # one hidden size, one direction


def test_a_changed_parameter_is_seen_at_the_next_call():
    native, mine = pair(Config("lstm", 3, 5))
    x = torch.randn(5, 2, 3)
    with torch.no_grad():
        mine(x)
        native.weight_hh_l0.mul_(2.0)
        mine.weight_hh_l0.mul_(2.0)  # an optimizer's in-place step
        assert_close(mine(x), native(x))
        native.load_state_dict({k: v * 0.5 for k, v in native.state_dict().items()})
        mine.load_state_dict(native.state_dict())
        assert_close(mine(x), native(x))


def test_it_declares_what_onnx_runtime_does_not_do():
    assert {"float64", "backward", "proj_size", "batch_first"} <= IMPL.unsupported
    assert "dropout" not in IMPL.unsupported  # dropout sits between layers, in torch


def test_without_onnxruntime_it_is_unavailable_with_a_reason(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_onnxruntime(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    reason = ort_impl.availability()
    assert reason.startswith("onnxruntime is not installed") and "\n" not in reason
