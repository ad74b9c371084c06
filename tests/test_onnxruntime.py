"""The onnxruntime implementation against torch.nn, and what is specific to it: sessions built
once per configuration, converted weights that follow the parameters, what ONNX Runtime cannot
do declared and refused with torch's exception types.

Without onnxruntime installed everything is skipped with the reason, except the check that the
implementation then says why it is unavailable.
"""
from __future__ import annotations

import copy
import gc
import pickle
import sys

import pytest
import torch

from rnnbench.impls import onnxruntime as ort_impl
from rnnbench.impls.registry import registered
from rnnbench.reference import Config, io_shapes, param_shapes, tolerance

IMPL = ort_impl.IMPLEMENTATION
NATIVE = {"rnn": torch.nn.RNN, "lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_cell":
          torch.nn.RNNCell, "lstm_cell": torch.nn.LSTMCell, "gru_cell": torch.nn.GRUCell}

# (config, batch or None for unbatched, steps, h0 given). Sizes differ from each other so a
# transposed weight or a swapped axis cannot go unnoticed.
ROWS = [
    (Config("rnn", 3, 5), 4, 6, True),
    (Config("rnn", 3, 5, num_layers=2, bidirectional=True, nonlinearity="relu"), 2, 5, False),
    (Config("rnn", 4, 6, bias=False, nonlinearity="relu"), None, 7, True),
    (Config("lstm", 4, 7, num_layers=3, bidirectional=True), 3, 5, True),
    (Config("lstm", 3, 5, bias=False), None, 6, False),
    (Config("lstm", 3, 5, bidirectional=True), None, 4, True),
    (Config("gru", 3, 5, num_layers=2), 4, 6, True),
    (Config("gru", 4, 6, bias=False, bidirectional=True, num_layers=2), 1, 5, False),
    (Config("gru", 3, 5, bidirectional=True), 0, 4, True),  # an empty batch
    (Config("lstm", 3, 5, num_layers=2), 0, 3, False),
    # batch_first is declared unsupported (a copy each way) but computed right
    (Config("gru", 3, 5, batch_first=True, bidirectional=True), 4, 3, True),
    (Config("rnn_cell", 3, 5, nonlinearity="relu"), 4, 1, True),
    (Config("rnn_cell", 3, 5, bias=False), None, 1, False),
    (Config("lstm_cell", 3, 5), None, 1, True),
    (Config("lstm_cell", 4, 6), 2, 1, False),
    (Config("gru_cell", 3, 5, bias=False), 3, 1, True),
    (Config("gru_cell", 3, 5), None, 1, False),
]


@pytest.fixture
def impl():
    reason = IMPL.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return IMPL


@pytest.fixture
def builds(impl, monkeypatch):
    """A fresh session cache; the list of graphs and thread counts sessions were built for."""
    monkeypatch.setattr(ort_impl.BACKEND, "sessions", {})
    built = []
    build = ort_impl.build_session

    def counted(graph, threads):
        built.append((graph, threads))
        return build(graph, threads)

    monkeypatch.setattr(ort_impl, "build_session", counted)
    return built


def row_id(row):
    cfg, batch, steps, h0 = row
    return f"{cfg.describe()} batch={batch} steps={steps} h0={h0}".replace(" ", "-")


def flatten(structure):
    """Tensors of a (nested) tuple output, in order."""
    if isinstance(structure, torch.Tensor):
        return [structure]
    return [t for part in structure for t in flatten(part)]


def make_inputs(cfg, batch, steps, h0, seed=0):
    """Input and, if `h0`, the initial state as the module takes it (hx), in float32."""
    generator = torch.Generator().manual_seed(seed)
    shapes = io_shapes(cfg, batch, steps)
    x = torch.randn(shapes["input"], generator=generator) + 0.5  # a nonzero mean, as the suite uses
    if not h0:
        return x, None
    state = [torch.randn(shapes[name], generator=generator)
             for name in (("h0", "c0") if cfg.family == "lstm" else ("h0",))]
    return x, tuple(state) if cfg.family == "lstm" else state[0]


def in_float64(hx):
    if hx is None:
        return None
    return tuple(t.double() for t in hx) if isinstance(hx, tuple) else hx.double()


def assert_matches(module, native, cfg, x, hx):
    """module (float32) against `native` (torch.nn with the same weights in float64)."""
    with torch.no_grad():
        actual = flatten(module(x, hx))
        expected = flatten(native(x.double(), in_float64(hx)))
    steps = 1 if cfg.is_cell else x.shape[1 if cfg.batch_first and x.dim() == 3 else 0]
    tol = tolerance("float32", steps, 1 if cfg.is_cell else cfg.num_layers)
    assert len(actual) == len(expected)
    for index, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == torch.float32
        assert a.shape == e.shape, f"output {index}: shape {tuple(a.shape)}, not {tuple(e.shape)}"
        assert tol.excess(a, e) <= 1, f"output {index} differs beyond {tol}"


def pair(impl, cfg, seed=0):
    """The implementation's module and torch.nn's in float64, with the same weights."""
    torch.manual_seed(seed)
    module = impl.constructor(cfg.kind)(**cfg.constructor_kwargs())
    native = NATIVE[cfg.kind](**cfg.constructor_kwargs(), dtype=torch.float64)
    native.load_state_dict({name: p.double() for name, p in module.state_dict().items()})
    return module, native


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_forward_matches_torch_nn(impl, row):
    cfg, batch, steps, h0 = row
    module, native = pair(impl, cfg)
    assert [name for name, _ in module.named_parameters()] == list(param_shapes(cfg))
    x, hx = make_inputs(cfg, batch, steps, h0)
    assert_matches(module, native, cfg, x, hx)


@pytest.mark.parametrize("family", ["rnn", "lstm", "gru"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_graphs_are_valid_onnx(impl, family, direction):
    onnx = pytest.importorskip("onnx")
    for layers, bias, state in ((1, True, False), (3, False, True)):
        graph = ort_impl.Graph(family, 3, 5, layers, direction, family == "rnn", bias, state)
        onnx.checker.check_model(onnx.load_from_string(graph.model()), full_check=True)


def test_second_module_and_new_lengths_build_no_session(impl, builds):
    cfg = Config("lstm", 3, 5, num_layers=2, bidirectional=True)
    first, _ = pair(impl, cfg)
    with torch.no_grad():
        first(*make_inputs(cfg, 2, 4, False))
        assert len(builds) == 1
        second, native = pair(impl, cfg, seed=1)
        for batch, steps in ((2, 4), (5, 9), (1, 1), (3, 30)):
            x, _ = make_inputs(cfg, batch, steps, False)
            assert_matches(second, native, cfg, x, None)
    assert len(builds) == 1


def test_a_session_per_configuration_and_thread_count(impl, builds):
    cfg = Config("gru", 3, 5)
    module, _ = pair(impl, cfg)
    x, hx = make_inputs(cfg, 2, 4, True)
    threads = torch.get_num_threads()
    try:
        with torch.no_grad():
            for count in (1, 2, 1):
                torch.set_num_threads(count)
                module(x)
            module(x, hx)  # an initial state is a graph input: another graph
    finally:
        torch.set_num_threads(threads)
    assert [count for _, count in builds] == [1, 2, 1]
    assert [graph.state for graph, _ in builds] == [False, False, True]
    for (graph, count), session in ort_impl.BACKEND.sessions.items():
        assert session.get_session_options().intra_op_num_threads == count


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_load_state_dict_is_seen(impl, kind):
    cfg = Config(kind, 3, 5, bidirectional=True)
    module, _ = pair(impl, cfg)
    x, _ = make_inputs(cfg, 2, 4, False)
    with torch.no_grad():
        module(x)
        other, native = pair(impl, cfg, seed=7)
        module.load_state_dict(other.state_dict())
        assert_matches(module, native, cfg, x, None)


def test_optimizer_step_is_seen_and_unchanged_weights_are_not_converted_again(impl, monkeypatch):
    conversions = []
    convert = ort_impl.onnx_weights
    monkeypatch.setattr(ort_impl, "onnx_weights",
                        lambda *args: conversions.append(args) or convert(*args))
    cfg = Config("lstm", 3, 5, num_layers=2)
    module, native = pair(impl, cfg)
    x, hx = make_inputs(cfg, 2, 4, True)
    with torch.no_grad():
        module(x, hx)
        module(x)
        assert len(conversions) == 2  # once per layer, shared by both calls
    for parameter in module.parameters():
        parameter.grad = torch.randn_like(parameter)
    torch.optim.SGD(module.parameters(), lr=0.5).step()
    native.load_state_dict({name: p.double() for name, p in module.state_dict().items()})
    assert_matches(module, native, cfg, x, hx)
    assert len(conversions) == 4


def test_replaced_parameter_is_seen(impl):
    cfg = Config("gru", 3, 5)
    module, native = pair(impl, cfg)
    x, _ = make_inputs(cfg, 2, 4, False)
    with torch.no_grad():
        module(x)
        module.weight_hh_l0 = torch.nn.Parameter(torch.randn(15, 5))
        native.weight_hh_l0.copy_(module.weight_hh_l0)
    assert_matches(module, native, cfg, x, None)


def test_a_new_module_where_a_freed_one_was_gets_its_own_weights(impl):
    # Converted weights are keyed by the parameters' ids, which a new module's may reuse.
    cfg = Config("rnn", 3, 5)
    x, _ = make_inputs(cfg, 2, 4, False)
    for seed in range(5):
        module, native = pair(impl, cfg, seed)
        assert_matches(module, native, cfg, x, None)
        del module, native


def test_converted_weights_go_with_their_module(impl, monkeypatch):
    monkeypatch.setattr(ort_impl.BACKEND, "weights", ort_impl.ConvertedWeights())
    module = impl.constructor("lstm")(3, 5, num_layers=2)
    with torch.no_grad():
        module(torch.randn(4, 2, 3))
    assert len(ort_impl.BACKEND.weights._entries) == 1
    del module
    gc.collect()
    assert not ort_impl.BACKEND.weights._entries


def test_dropout_between_layers_in_training_only(impl):
    # Constant weights, ReLU: a deterministic output in eval; training drops whole units of the
    # layer-0 output (there a graph per layer, torch's dropout between), so the two differ,
    # while a one-layer module ignores dropout.
    two = impl.constructor("rnn")(4, 4, num_layers=2, nonlinearity="relu", dropout=0.5)
    with pytest.warns(UserWarning, match="dropout"):  # as torch.nn warns
        one = impl.constructor("rnn")(4, 4, nonlinearity="relu", dropout=0.5)
    for module in (two, one):
        for parameter in module.parameters():
            torch.nn.init.constant_(parameter, 0.1)
    x = torch.ones(3, 64, 4)
    with torch.no_grad():
        evaluated = two.eval()(x)[0]
        trained = two.train()(x)[0]
        assert torch.equal(evaluated, two.eval()(x)[0])
        assert not torch.equal(evaluated, trained)
        assert torch.equal(one.train()(x)[0], one.eval()(x)[0])


def test_wrong_inputs_raise_like_torch_nn(impl):
    rnn = impl.constructor("gru")(3, 5, num_layers=2)
    cell = impl.constructor("lstm_cell")(3, 5)
    x = torch.randn(4, 2, 3)
    for call, error in [
        (lambda: rnn(torch.randn(4, 2, 3, 1)), ValueError),        # rank
        (lambda: rnn(torch.randn(4, 2, 4)), RuntimeError),         # input size
        (lambda: rnn(x, torch.zeros(2, 1, 5)), RuntimeError),      # h0 batch 1: never broadcast
        (lambda: rnn(x, torch.zeros(2, 3, 5)), RuntimeError),      # h0 batch
        (lambda: rnn(x, torch.zeros(2, 5)), RuntimeError),         # h0 rank
        (lambda: rnn(x.double()), ValueError),                     # dtype
        (lambda: rnn(torch.randn(0, 2, 3)), RuntimeError),         # no time steps (ORT aborts)
        (lambda: cell(torch.randn(2, 3), torch.zeros(2, 5)), TypeError),  # LSTM state not a pair
        (lambda: cell(torch.randn(2, 3), (torch.zeros(2, 5), torch.zeros(1, 5))), RuntimeError),
    ]:
        with pytest.raises(error):
            call()


def test_onnx_runtime_errors_become_runtime_errors(impl):
    # Past the module's checks (the backend called directly with a state of the wrong batch)
    # ONNX Runtime raises its own type, which must reach the caller as torch's RuntimeError.
    module = impl.constructor("gru")(3, 5)
    weights = module._weights(0)
    with pytest.raises(RuntimeError, match="^onnxruntime: ") as raised:
        ort_impl.BACKEND.layer("gru", torch.randn(4, 3, 3), (torch.zeros(1, 5),), weights, False,
                               False)
    assert type(raised.value) is RuntimeError
    assert "\n" not in str(raised.value)


def test_declared_unsupported_features_are_refused(impl):
    assert impl.unsupported == {"float64", "float16", "bfloat16", "backward", "proj_size",
                                "batch_first", "cuda", "packed"}
    x = torch.randn(4, 2, 3)
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([4, 2]), enforce_sorted=False)
    with pytest.raises(AttributeError):  # no variable-length path: a PackedSequence is no tensor
        impl.constructor("gru")(3, 5)(packed)
    with pytest.raises(RuntimeError, match="float32 only"):
        impl.constructor("rnn")(3, 5, dtype=torch.float64)(x.double())
    with pytest.raises(RuntimeError, match="proj_size"):
        impl.constructor("lstm")(3, 5, proj_size=2)(x)
    output, _ = impl.constructor("lstm")(3, 5)(x)
    assert output.requires_grad  # as torch.nn's, so a backward reaches the refusal below
    with pytest.raises(RuntimeError, match="does not support backward"):
        output.sum().backward()


def test_input_and_state_are_not_modified(impl):
    module = impl.constructor("lstm")(3, 5, bidirectional=True)
    x, h0, c0 = torch.randn(4, 2, 3), torch.randn(2, 2, 5), torch.randn(2, 2, 5)
    copies = [t.clone() for t in (x, h0, c0)]
    module(x, (h0, c0))
    for original, kept in zip((x, h0, c0), copies):
        assert torch.equal(original, kept)


def test_modules_pickle_and_copy(impl):
    module = impl.constructor("lstm")(3, 5)
    x = torch.randn(4, 2, 3)
    with torch.no_grad():
        expected = module(x)[0]
        for clone in (pickle.loads(pickle.dumps(module)), copy.deepcopy(module)):
            assert type(clone) is type(module)
            assert torch.equal(clone(x)[0], expected)


def test_benchmark_builds_its_session_in_the_first_call_only(impl, builds, monkeypatch):
    # rnnbench bench times the first call apart (first_call_s); the timed calls after it must
    # reuse what it built. Each build records how many runs had started before it.
    from rnnbench.benchmarks.harness import run_benchmarks
    from rnnbench.benchmarks.workloads import Workload

    runs = []
    run = ort_impl.OnnxRuntimeBackend.run
    monkeypatch.setattr(ort_impl.OnnxRuntimeBackend, "run",
                        lambda self, *args: runs.append(len(builds)) or run(self, *args))
    workload = Workload("lstm-tiny", Config("lstm", 3, 5), batch=2, steps=4, threads=1,
                        metrics=("forward",), budget_s=0.01, min_repeats=3)
    doc = run_benchmarks([impl], [workload])
    (result,) = [r for r in doc["results"] if r["impl"] == "onnxruntime"]
    assert result["status"] == "ok" and result["first_call_s"] > 0
    assert [threads for _, threads in builds] == [1]
    assert runs[0] == 0 and set(runs[1:]) == {1}  # built during the first run, reused after
    assert len(runs) > 3


def test_registered_as_a_builtin():
    assert registered()["onnxruntime"] is IMPL


@pytest.mark.parametrize("missing", ["onnxruntime", "onnx"])
def test_unavailable_without_onnxruntime_says_why_in_one_line(monkeypatch, missing):
    if missing == "onnx":  # onnxruntime is imported first
        pytest.importorskip("onnxruntime")
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` raise ImportError
    monkeypatch.setattr(ort_impl.BACKEND, "sessions", {})
    ort_impl.runtime.cache_clear()
    try:
        reason = IMPL.unavailable_reason()
        with pytest.raises(RuntimeError, match=f"^{missing} is not installed"):
            IMPL.constructor("rnn")(3, 5)(torch.randn(4, 2, 3))
    finally:
        ort_impl.runtime.cache_clear()
    assert reason == f"{missing} is not installed (pip install -e '.[onnxruntime]')"
