"""The onnxruntime implementation: forward equal to torch.nn in float32 across configurations,
sessions built once per configuration and thread count, weights converted again only when a
parameter changed, what it declares unsupported and how it refuses it, and its reason when
ONNX Runtime is not installed."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from rnnbench.impls.onnxruntime import IMPLEMENTATION
from rnnbench.reference import Config, io_shapes, param_shapes, tolerance

REASON = IMPLEMENTATION.unavailable_reason()
needs_onnxruntime = pytest.mark.skipif(REASON is not None, reason=REASON or "")

NATIVE = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU,
          "rnn_cell": torch.nn.RNNCell, "lstm_cell": torch.nn.LSTMCell, "gru_cell": torch.nn.GRUCell}

# (config, batch or None for unbatched, steps, h0 given). Sizes differ from each other so a
# transposed weight or a swapped axis cannot go unnoticed; hidden sizes are multiples of neither
# 3 nor 4 gates.
ROWS = [
    (Config("rnn", 3, 5), 4, 6, True),
    (Config("rnn", 3, 5, num_layers=2, bidirectional=True, nonlinearity="relu"), 2, 5, False),
    (Config("rnn", 4, 7, bias=False, nonlinearity="relu"), None, 6, True),
    (Config("lstm", 3, 5), 4, 6, False),
    (Config("lstm", 4, 7, num_layers=3, bidirectional=True), 3, 5, True),
    (Config("lstm", 3, 5, num_layers=2, bias=False), None, 6, True),
    (Config("gru", 3, 5, num_layers=2), 4, 6, True),
    (Config("gru", 4, 7, bias=False, bidirectional=True), 1, 5, False),
    (Config("gru", 5, 5, bidirectional=True), None, 4, True),
    (Config("lstm", 3, 5, bidirectional=True, batch_first=True), 2, 4, True),  # a copy in torch
    (Config("rnn_cell", 3, 5, nonlinearity="relu"), 4, 1, True),
    (Config("rnn_cell", 3, 5, bias=False), None, 1, False),
    (Config("lstm_cell", 3, 5), None, 1, True),
    (Config("lstm_cell", 4, 7, bias=False), 2, 1, False),
    (Config("gru_cell", 3, 5), 4, 1, True),
    (Config("gru_cell", 3, 5, bias=False), 1, 1, False),
]


def row_id(row):
    cfg, batch, steps, h0 = row
    return f"{cfg.describe()} batch={batch} steps={steps} h0={h0}".replace(" ", "-")


def flatten(structure):
    """Tensors of a (nested) tuple output, in order."""
    if isinstance(structure, torch.Tensor):
        return [structure]
    return [t for part in structure for t in flatten(part)]


def make_inputs(cfg, batch, steps, h0):
    """Input and hx (None when not given) in float32, the input with a nonzero mean."""
    shapes = io_shapes(cfg, batch, steps)
    x = torch.randn(shapes["input"]) + 0.5
    if not h0:
        return x, None
    state = [torch.randn(shapes[name]) for name in (("h0", "c0") if cfg.family == "lstm" else ("h0",))]
    return x, tuple(state) if cfg.family == "lstm" else state[0]


def double(hx):
    return None if hx is None else tuple(s.double() for s in hx) if isinstance(hx, tuple) else hx.double()


def construct(cfg, **kwargs):
    return IMPLEMENTATION.constructor(cfg.kind)(**cfg.constructor_kwargs(), **kwargs)


def assert_matches_native(module, cfg, x, hx, steps):
    """module(x, hx) equals torch.nn in float64 holding module's float32 parameters, within the
    spec's float32 tolerance."""
    native = NATIVE[cfg.kind](**cfg.constructor_kwargs(), dtype=torch.float64)
    native.load_state_dict({name: value.double() for name, value in module.state_dict().items()})
    native.train(module.training)
    with torch.no_grad():
        actual, expected = flatten(module(x, hx)), flatten(native(x.double(), double(hx)))
    tol = tolerance("float32", steps, 1 if cfg.is_cell else cfg.num_layers)
    assert len(actual) == len(expected)
    for index, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == torch.float32
        assert a.shape == e.shape, f"output {index}: shape {tuple(a.shape)}, not {tuple(e.shape)}"
        assert tol.excess(a.double(), e) <= 1, f"output {index} differs beyond {tol}"


@needs_onnxruntime
@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_forward_matches_torch_nn_in_float32(row):
    cfg, batch, steps, h0 = row
    torch.manual_seed(0)
    module = construct(cfg)
    assert [name for name, _ in module.named_parameters()] == list(param_shapes(cfg))
    x, hx = make_inputs(cfg, batch, steps, h0)
    assert_matches_native(module, cfg, x, hx, steps)


@needs_onnxruntime
def test_parameters_are_initialised_like_torch_nn():
    module = construct(Config("gru", 3, 16, num_layers=2, bidirectional=True))
    bound = 1 / 16 ** 0.5
    for name, parameter in module.named_parameters():
        assert parameter.dtype == torch.float32
        assert -bound <= parameter.min() and parameter.max() <= bound, name
        assert parameter.max() - parameter.min() > bound, name  # spread over the range, not constant


@needs_onnxruntime
def test_one_session_per_configuration_and_thread_count():
    from rnnbench.impls.onnxruntime import session

    cfg = Config("lstm", 6, 9, num_layers=2, bidirectional=True)
    first, second = construct(cfg), construct(cfg)
    threads = torch.get_num_threads()
    with torch.no_grad():
        first(torch.randn(5, 3, 6))
        built = session.cache_info().misses
        second(torch.randn(5, 3, 6))  # another module of the same configuration
        first(torch.randn(11, 3, 6))  # another sequence length
        first(torch.randn(4, 7, 6))  # another batch size
        first(torch.randn(4, 6))  # unbatched
        assert session.cache_info().misses == built
        torch.set_num_threads(1 if threads > 1 else 2)
        try:
            first(torch.randn(5, 3, 6))
            assert session.cache_info().misses == built + 1  # a session per thread count
        finally:
            torch.set_num_threads(threads)


@needs_onnxruntime
def test_sessions_run_on_torch_thread_count():
    from rnnbench.impls.onnxruntime import Graph, session

    for threads in (1, 2):
        options = session(Graph("gru", 3, 5), threads).get_session_options()
        assert options.intra_op_num_threads == threads


@needs_onnxruntime
def test_weights_are_converted_only_when_a_parameter_changed(monkeypatch):
    from rnnbench.impls import onnxruntime

    conversions = []
    convert = onnxruntime._onnx_gates
    monkeypatch.setattr(onnxruntime, "_onnx_gates",
                        lambda graph, weight: conversions.append(1) or convert(graph, weight))
    cfg = Config("gru", 3, 5)
    module = construct(cfg)
    x = torch.randn(4, 2, 3)
    with torch.no_grad():
        module(x)
        converted = len(conversions)
        assert converted > 0
        module(x)
        module(x, torch.zeros(1, 2, 5))
        assert len(conversions) == converted
        module.bias_hh_l0.add_(1.0)
        module(x)
    assert len(conversions) == 2 * converted


@needs_onnxruntime
def test_load_state_dict_is_seen():
    cfg = Config("lstm", 3, 5, num_layers=2)
    module = construct(cfg)
    x = torch.randn(6, 2, 3)
    with torch.no_grad():
        before = module(x)[0]
    module.load_state_dict(NATIVE["lstm"](3, 5, num_layers=2).state_dict())
    with torch.no_grad():
        assert not torch.equal(module(x)[0], before)
    assert_matches_native(module, cfg, x, None, 6)


@needs_onnxruntime
def test_optimizer_step_is_seen():
    # No backward here: gradients set by hand, then a plain SGD step updates in place.
    cfg = Config("gru", 3, 5, bidirectional=True)
    module = construct(cfg)
    x = torch.randn(6, 2, 3)
    with torch.no_grad():
        before = module(x)[0]
    for parameter in module.parameters():
        parameter.grad = torch.randn_like(parameter)
    torch.optim.SGD(module.parameters(), lr=0.1).step()
    with torch.no_grad():
        assert not torch.equal(module(x)[0], before)
    assert_matches_native(module, cfg, x, None, 6)


@needs_onnxruntime
def test_a_replaced_parameter_is_seen():
    cfg = Config("rnn", 3, 5)
    module = construct(cfg)
    x = torch.randn(6, 2, 3)
    with torch.no_grad():
        module(x)
    module.weight_hh_l0 = torch.nn.Parameter(torch.zeros(5, 5))
    assert_matches_native(module, cfg, x, None, 6)


@needs_onnxruntime
def test_wrong_inputs_raise_like_torch_nn():
    rnn = construct(Config("gru", 3, 5, num_layers=2))
    cell = construct(Config("lstm_cell", 3, 5))
    x = torch.randn(4, 2, 3)
    for call, error in [
        (lambda: rnn(torch.randn(4, 2, 3, 1)), ValueError),        # rank
        (lambda: rnn(torch.randn(4, 2, 4)), RuntimeError),         # input size
        (lambda: rnn(x, torch.zeros(2, 1, 5)), RuntimeError),      # h0 batch: never broadcast
        (lambda: rnn(x, torch.zeros(2, 5)), RuntimeError),         # h0 rank
        (lambda: rnn(x.double()), ValueError),                     # dtype
        (lambda: rnn(torch.randn(0, 2, 3)), RuntimeError),         # no time steps
        (lambda: cell(torch.randn(2, 3), torch.zeros(2, 5)), TypeError),  # LSTM state not a pair
        (lambda: cell(torch.randn(2, 3), (torch.zeros(2, 5), torch.zeros(1, 5))), RuntimeError),
    ]:
        with pytest.raises(error):
            call()


@needs_onnxruntime
def test_onnxruntime_errors_leave_as_runtime_error():
    # Past the module's checks (here: a weight of the wrong width), ONNX Runtime raises its own
    # exception type; it must leave as torch.nn's RuntimeError, in one line.
    from rnnbench.impls.onnxruntime import Graph, run

    weights = (torch.zeros(5, 4), torch.zeros(5, 5), None, None, None)
    with pytest.raises(RuntimeError, match=r"^onnxruntime: [^\n]*$"):
        run(Graph("rnn", 3, 5, bias=False, initial_state=False), torch.zeros(2, 1, 3), None,
            [weights])


@needs_onnxruntime
def test_declares_what_onnx_runtime_does_not_do():
    assert IMPLEMENTATION.unsupported == {"float64", "float16", "bfloat16", "cuda", "backward",
                                          "dropout", "proj_size", "batch_first"}
    assert set(IMPLEMENTATION.kinds) == set(NATIVE)


@needs_onnxruntime
def test_refuses_what_onnx_runtime_does_not_do():
    x = torch.randn(4, 2, 3)
    with pytest.raises(RuntimeError, match="float32 only"):
        construct(Config("gru", 3, 5), dtype=torch.float64)(x.double())
    with pytest.raises(RuntimeError, match="proj_size"):
        construct(Config("lstm", 3, 5, proj_size=2))(x)
    dropout = construct(Config("rnn", 3, 5, num_layers=2, dropout=0.5))
    with pytest.raises(RuntimeError, match="dropout"):
        dropout(x)
    dropout.eval()
    assert_matches_native(dropout, dropout.config, x, None, 4)  # no dropout in eval: it runs
    out, _ = construct(Config("lstm", 3, 5))(x)
    assert out.requires_grad  # autograd sees what the output depends on ...
    with pytest.raises(RuntimeError, match="backward is not supported"):
        out.sum().backward()  # ... and differentiating it says why it cannot


@needs_onnxruntime
def test_input_and_state_are_not_modified():
    module = construct(Config("lstm", 3, 5, bidirectional=True))
    x, h0, c0 = torch.randn(4, 2, 3), torch.randn(2, 2, 5), torch.randn(2, 2, 5)
    copies = [t.clone() for t in (x, h0, c0)]
    with torch.no_grad():
        module(x, (h0, c0))
    for original, copy in zip((x, h0, c0), copies):
        assert torch.equal(original, copy)


def test_without_onnxruntime_it_is_registered_but_unavailable_with_a_one_line_reason():
    # A fresh interpreter in which importing onnxruntime fails, as when it is not installed.
    probe = ("import sys; sys.modules['onnxruntime'] = None\n"
             "from rnnbench.impls import load\n"
             "print(load('onnxruntime').unavailable_reason())")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    reason = result.stdout.strip()
    assert "\n" not in reason and "onnxruntime" in reason
    assert "pip install 'rnnbench[onnxruntime]'" in reason
