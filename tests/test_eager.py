"""eager against torch.nn in float64: same weights in, same outputs, gradients and errors out."""
import pytest
import scipy.stats
import torch

from rnnbench.impls import load
from rnnbench.reference import Config, init_spec, io_shapes, param_shapes, tolerance

EAGER, NATIVE = load("eager"), load("native")
F64 = torch.float64

# Sizes that keep symmetric setups from hiding a bug: batch, steps, input and hidden all differ,
# and hidden is a multiple of neither the LSTM's 4 nor the GRU's 3 gates.
I, H, BATCH, STEPS = 4, 7, 3, 5

CONFIGS = [
    Config("rnn_cell", I, H),
    Config("rnn_cell", I, H, nonlinearity="relu", bias=False),
    Config("lstm_cell", I, H),
    Config("lstm_cell", I, H, bias=False),
    Config("gru_cell", I, H),
    Config("gru_cell", I, H, bias=False),
    Config("rnn", I, H),
    Config("rnn", I, H, num_layers=2, nonlinearity="relu", bidirectional=True),
    Config("rnn", I, H, bias=False, batch_first=True),
    Config("lstm", I, H, proj_size=3),
    Config("lstm", I, H, num_layers=2, bidirectional=True, proj_size=3, batch_first=True),
    Config("lstm", I, H, num_layers=2, bias=False),
    Config("gru", I, H, num_layers=3, bidirectional=True),
    Config("gru", I, H, bias=False, batch_first=True),
]


def build(impl, cfg, **kwargs):
    return impl.constructor(cfg.kind)(**cfg.constructor_kwargs(), **kwargs)


def pair(cfg):
    """An eager module and a torch.nn module with the same float64 weights."""
    native = build(NATIVE, cfg, dtype=F64)
    eager = build(EAGER, cfg, dtype=F64)
    eager.load_state_dict(native.state_dict())  # strict: the names must be torch.nn's
    return eager, native


def state_names(cfg):
    return ("h0", "c0") if cfg.family == "lstm" else ("h0",)


def as_hx(cfg, states):
    return tuple(states) if cfg.family == "lstm" else states[0]


def flat(result):
    """A forward result (a tensor or nested tuples of tensors) as a flat list."""
    return [t for part in result for t in flat(part)] if isinstance(result, tuple) else [result]


@pytest.mark.parametrize("hx_given", [False, True], ids=["hx-none", "hx-given"])
@pytest.mark.parametrize("batch", [BATCH, None], ids=["batched", "unbatched"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=Config.describe)
def test_forward_and_gradients_match_torch_nn(cfg, batch, hx_given):
    eager, native = pair(cfg)
    gen = torch.Generator().manual_seed(0)
    shapes = io_shapes(cfg, batch, STEPS)
    rand = lambda shape: torch.randn(shape, generator=gen, dtype=F64, requires_grad=True)
    x = rand(shapes["input"])
    states = [rand(shapes[name]) for name in state_names(cfg)] if hx_given else []
    hx = as_hx(cfg, states) if hx_given else None
    inputs = [x, *states]
    before = [t.detach().clone() for t in inputs]

    got, want = flat(eager(x, hx)), flat(native(x, hx))
    assert [t.shape for t in got] == [t.shape for t in want]
    forward_tol = tolerance("float64", STEPS, cfg.num_layers)
    for g, w in zip(got, want):
        assert forward_tol.excess(g.detach(), w.detach()) <= 1
    assert all(torch.equal(t.detach(), b) for t, b in zip(inputs, before)), "inputs modified"

    # Gradients of a random projection of every output, so no output's gradient is all ones.
    projections = [torch.randn(w.shape, generator=gen, dtype=F64) for w in want]
    names = list(param_shapes(cfg))

    def gradients(module, outputs):
        loss = sum((o * p).sum() for o, p in zip(outputs, projections))
        params = dict(module.named_parameters())
        return torch.autograd.grad(loss, inputs + [params[n] for n in names])

    gradient_tol = tolerance("float64", STEPS, cfg.num_layers, gradient=True)
    labels = ["input", *state_names(cfg)][:len(inputs)] + names
    for label, g, w in zip(labels, gradients(eager, got), gradients(native, want)):
        assert gradient_tol.excess(g, w) <= 1, f"gradient of {label}"


@pytest.mark.parametrize("cfg", CONFIGS, ids=Config.describe)
def test_parameters_named_and_shaped_as_the_spec(cfg):
    module = build(EAGER, cfg)
    assert [(n, tuple(p.shape)) for n, p in module.named_parameters()] == list(param_shapes(cfg).items())


@pytest.mark.parametrize("kind", ["rnn_cell", "lstm", "gru"])
def test_init_is_torch_nn_uniform(kind):
    torch.manual_seed(0)
    cfg = Config(kind, 20, 30, **({} if kind.endswith("cell") else {"num_layers": 2}))
    module = build(EAGER, cfg)
    params = dict(module.named_parameters())
    for name, dist in init_spec(cfg).items():
        values = params[name].detach().flatten().numpy()
        assert dist.low <= values.min() and values.max() <= dist.high, name
        # False-alarm rate 1e-6 per parameter; a wrong bound or distribution fails by far.
        assert scipy.stats.kstest(values, dist.cdf).pvalue > 1e-6, name


@pytest.mark.parametrize("cfg", CONFIGS, ids=Config.describe)
def test_device_and_dtype_kwargs_are_honoured(cfg):
    module = build(EAGER, cfg, device="meta", dtype=torch.float16)
    assert {(p.device.type, p.dtype) for p in module.parameters()} == {("meta", torch.float16)}


DROPOUT = Config("gru", I, H, num_layers=3, bidirectional=True, dropout=0.5)


def test_dropout_off_in_eval_mode():
    eager, native = pair(DROPOUT)
    eager.eval(), native.eval()
    x = torch.randn(io_shapes(DROPOUT, BATCH, STEPS)["input"], dtype=F64)
    first = eager(x)[0]
    assert torch.equal(first, eager(x)[0])
    assert tolerance("float64", STEPS, DROPOUT.num_layers).excess(first.detach(), native(x)[0].detach()) <= 1


def test_dropout_one_zeroes_what_upper_layers_see_like_torch_nn():
    cfg = DROPOUT.replace(dropout=1.0)
    eager, native = pair(cfg)
    x = torch.randn(io_shapes(cfg, BATCH, STEPS)["input"], dtype=F64)
    got, want = flat(eager(x)), flat(native(x))
    for g, w in zip(got, want):
        assert tolerance("float64", STEPS, cfg.num_layers).excess(g.detach(), w.detach()) <= 1


def test_no_dropout_after_the_last_layer():
    cfg = Config("rnn", I, H, dropout=0.5)
    eager = build(EAGER, cfg)
    x = torch.randn(io_shapes(cfg, BATCH, STEPS)["input"])
    assert torch.equal(eager.train()(x)[0], eager.eval()(x)[0])


@pytest.mark.parametrize("p", [0.3, 0.7])
def test_dropout_rate_and_scale_in_training(p):
    # A two-layer ReLU RNN whose first layer outputs exactly 1 everywhere, and whose second layer
    # passes its input through: the output is what dropout made of those ones.
    cfg = Config("rnn", 1, 1, num_layers=2, nonlinearity="relu", bias=False, dropout=p)
    eager = build(EAGER, cfg)
    with torch.no_grad():
        for name, param in eager.named_parameters():
            param.fill_(1.0 if name.startswith("weight_ih") else 0.0)
    batch = 20000
    out = eager.train()(torch.ones(io_shapes(cfg, batch, 1)["input"]))[0].flatten()
    dropped = (out == 0).double().mean().item()
    assert abs(dropped - p) < 6 * (p * (1 - p) / batch) ** 0.5  # a 6-sigma band: ~2e-9 false alarms
    torch.testing.assert_close(out[out != 0], torch.full_like(out[out != 0], 1 / (1 - p)))


SEQUENCE, LSTM_PROJ = Config("rnn", I, H, num_layers=2), Config("lstm", I, H, proj_size=3)
CELL, LSTM_CELL = Config("gru_cell", I, H), Config("lstm_cell", I, H)
# (id, config, the tensor whose spec shape is spoiled, how): every one must raise, never broadcast.
ERROR_CASES = [
    ("input-rank-too-high", SEQUENCE, "input", lambda s: (2,) + s),
    ("input-rank-too-low", SEQUENCE, "input", lambda s: s[-1:]),
    ("input-feature-size", SEQUENCE, "input", lambda s: s[:-1] + (s[-1] + 1,)),
    ("h0-layer-count", SEQUENCE, "h0", lambda s: (s[0] + 1,) + s[1:]),
    ("h0-batch-of-one", SEQUENCE, "h0", lambda s: s[:1] + (1,) + s[2:]),
    ("h0-without-batch", SEQUENCE, "h0", lambda s: s[:1] + s[2:]),
    ("lstm-c0-size", LSTM_PROJ, "c0", lambda s: s[:-1] + (s[-1] + 1,)),
    ("lstm-h0-size", LSTM_PROJ, "h0", lambda s: s[:-1] + (s[-1] + 1,)),
    ("cell-input-rank", CELL, "input", lambda s: (2,) + s),
    ("cell-feature-size", CELL, "input", lambda s: s[:-1] + (s[-1] + 1,)),
    ("cell-h0-size", CELL, "h0", lambda s: s[:-1] + (s[-1] + 1,)),
    ("lstm-cell-h0-batch-of-one", LSTM_CELL, "h0", lambda s: (1,) + s[1:]),
]


@pytest.mark.parametrize("impl", [EAGER, NATIVE], ids=lambda impl: impl.name)
@pytest.mark.parametrize("case_id, cfg, spoiled, spoil", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_wrong_shapes_raise(impl, case_id, cfg, spoiled, spoil):
    shapes = io_shapes(cfg, BATCH, STEPS)
    shapes[spoiled] = spoil(shapes[spoiled])
    hx = None if spoiled == "input" else as_hx(cfg, [torch.zeros(shapes[n]) for n in state_names(cfg)])
    with pytest.raises((ValueError, RuntimeError)):
        build(impl, cfg)(torch.zeros(shapes["input"]), hx)
