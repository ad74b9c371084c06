"""The float64 reference: against torch.nn, against finite differences, known answers, hygiene."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import rnnbench.reference
from rnnbench import crosscheck
from rnnbench.crosscheck import MAX_ABS_ERROR, compare_with_torch, random_cases, sweep
from rnnbench.reference import (
    KINDS, Config, backward, flatten_outputs, forward, init_spec, io_shapes, nest_outputs,
    nest_state, numerics, output_names, param_shapes, state_grad_names, state_names, tolerance,
)
from rnnbench.reference.known_answers import KNOWN_ANSWERS

SWEEP_CONFIGS = 300


@pytest.fixture(scope="module")
def comparisons():
    return sweep(SWEEP_CONFIGS, seed=0)


def test_sweep_agrees_with_torch(comparisons):
    bad = [f"{c.case.describe()}: " + ", ".join(f"{q} {e:.1e}" for q, e in c.errors.items()
                                                if e > MAX_ABS_ERROR)
           for c in comparisons if c.worst > MAX_ABS_ERROR]
    assert not bad, "\n".join(bad)


def test_sweep_compares_forward_and_every_gradient(comparisons):
    for c in comparisons:
        cfg = c.case.config
        expected = {f"forward {name}" for name in output_names(cfg)}
        expected |= {f"grad {key}" for key in ("input", *state_grad_names(cfg), *param_shapes(cfg))}
        assert set(c.errors) == expected, c.case.describe()


# Every option the sweep must exercise, for every kind it applies to.
COVERAGE = {
    "unbatched": lambda c: c.batch is None,
    "batched": lambda c: c.batch,
    "empty batch": lambda c: c.batch == 0,
    "hx given": lambda c: c.hx_given,
    "hx omitted": lambda c: not c.hx_given,
    "no bias": lambda c: not c.config.bias,
    "relu": lambda c: c.config.nonlinearity == "relu",
    "multi-layer": lambda c: c.config.num_layers > 1,
    "batch_first": lambda c: c.config.batch_first and c.batch,
    "batch_first unbatched": lambda c: c.config.batch_first and c.batch is None,
    "bidirectional": lambda c: c.config.bidirectional,
    "bidirectional multi-layer": lambda c: c.config.bidirectional and c.config.num_layers > 1,
    "dropout (eval)": lambda c: c.config.dropout > 0,
    "proj_size": lambda c: c.config.proj_size,
    "proj_size bidirectional": lambda c: c.config.proj_size and c.config.bidirectional,
    "several steps": lambda c: c.steps > 2,
}
SEQUENCE_ONLY = {"multi-layer", "batch_first", "batch_first unbatched", "bidirectional",
                 "bidirectional multi-layer", "dropout (eval)", "several steps"}


def _applies(option: str, kind: str) -> bool:
    if option == "relu":
        return kind.startswith("rnn")
    if option.startswith("proj_size"):
        return kind == "lstm"
    return option not in SEQUENCE_ONLY or not kind.endswith("_cell")


@pytest.mark.parametrize("kind", KINDS)
def test_sweep_covers_every_option(kind):
    cases = [c for c in random_cases(SWEEP_CONFIGS, seed=0) if c.config.kind == kind]
    missing = [option for option, covered in COVERAGE.items()
               if _applies(option, kind) and not any(covered(c) for c in cases)]
    assert not missing


def _swap_z(gates):
    def swapped(cfg, p, gi, gh, state):
        (h_new,), cache = gates(cfg, p, gi, gh, state)
        h, r, z, n, _ = cache
        return (z * n + (1 - z) * h,), cache
    return swapped


# Bugs planted in the reference that the sweep must expose: (name, attribute, replacement).
PLANTED_BUGS = [
    ("reverse direction not reversed",
     "_scan", lambda scan: lambda cfg, p, xs, state, reverse: scan(cfg, p, xs, state, False)),
    ("sigmoid replaced by tanh", "_sigmoid", lambda _: np.tanh),
    ("NaN from the gates", "_sigmoid", lambda _: lambda a: a * np.nan),
    ("GRU update gate swapped", "_FAMILIES",
     lambda families: dict(families, gru=(_swap_z(families["gru"][0]), families["gru"][1]))),
    ("hidden-weight gradient dropped", "_step_back",
     lambda step_back: lambda cfg, p, cache, d_state, grads: step_back(
         cfg, p, cache, d_state, dict(grads, weight_hh=np.zeros_like(grads["weight_hh"])))),
]


@pytest.mark.parametrize("name,attribute,replace", PLANTED_BUGS, ids=[b[0] for b in PLANTED_BUGS])
def test_sweep_catches_planted_bug(monkeypatch, name, attribute, replace):
    monkeypatch.setattr(numerics, attribute, replace(getattr(numerics, attribute)))
    cases = [c for c in random_cases(36, seed=1) if c.batch != 0]
    assert max(compare_with_torch(c).worst for c in cases) > MAX_ABS_ERROR


# Finite differences: small cases, every kind and the options that change the gradient's path.
FD_CASES = [
    (Config("rnn_cell", 2, 3), 2, 1),
    (Config("rnn_cell", 2, 3, nonlinearity="relu", bias=False), None, 1),
    (Config("lstm_cell", 2, 3), 2, 1),
    (Config("gru_cell", 2, 3), None, 1),
    (Config("rnn", 2, 3, num_layers=2, bidirectional=True, batch_first=True), 2, 3),
    (Config("rnn", 2, 3, nonlinearity="relu"), None, 4),
    (Config("lstm", 2, 3, num_layers=2, bidirectional=True), 2, 3),
    (Config("lstm", 2, 3, proj_size=2, bias=False, batch_first=True), 2, 3),
    (Config("gru", 2, 3, num_layers=2, bidirectional=True), None, 3),
    (Config("gru", 2, 3, batch_first=True, bias=False), 2, 3),
]
FD_STEP = 1e-6
# Central differences err by O(step^2) (truncation) plus O(eps / step) (rounding): ~1e-10 here.
FD_ATOL = 1e-8
FD_RTOL = 1e-6


# Entries differentiated per tensor, drawn at random: every tensor is covered, the cost bounded.
FD_ENTRIES = 8


def _fd_gradient(loss, value: np.ndarray, indices) -> np.ndarray:
    """Central differences of `loss` w.r.t. `value` (changed in place, then restored)."""
    grad = []
    for index in indices:
        saved = value[index]
        value[index] = saved + FD_STEP
        up = loss()
        value[index] = saved - FD_STEP
        down = loss()
        value[index] = saved
        grad.append((up - down) / (2 * FD_STEP))
    return np.array(grad)


@pytest.mark.parametrize("cfg,batch,steps", FD_CASES, ids=[c[0].describe() for c in FD_CASES])
def test_backward_matches_central_differences(cfg, batch, steps):
    rng = np.random.default_rng(7)
    shapes = io_shapes(cfg, batch, steps)
    params = {name: rng.uniform(d.low, d.high, param_shapes(cfg)[name])
              for name, d in init_spec(cfg).items()}
    x = rng.standard_normal(shapes["input"])
    states = {name: rng.standard_normal(shapes[name]) for name in state_names(cfg)}
    weights = {name: rng.standard_normal(shapes[name]) for name in output_names(cfg)}

    def loss():
        outputs = flatten_outputs(cfg, forward(cfg, params, x, nest_state(cfg, states)))
        return sum(float(np.sum(outputs[n] * weights[n])) for n in outputs)

    analytic = backward(cfg, params, x, nest_state(cfg, states), nest_outputs(cfg, weights))
    wrt = {"input": x, **dict(zip(state_grad_names(cfg), states.values())), **params}
    for key, value in wrt.items():
        flat = rng.permutation(value.size)[:FD_ENTRIES]
        indices = [np.unravel_index(k, value.shape) for k in flat]
        numeric = _fd_gradient(loss, value, indices)
        np.testing.assert_allclose([analytic[key][i] for i in indices], numeric,
                                   atol=FD_ATOL, rtol=FD_RTOL, err_msg=key)


@pytest.mark.parametrize("answer", KNOWN_ANSWERS, ids=[a.name for a in KNOWN_ANSWERS])
def test_known_answer_reference(answer):
    params, x = answer.arguments()
    outputs = flatten_outputs(answer.config, forward(answer.config, params, x))
    tol = tolerance("float64", answer.steps)
    for name, value in answer.expected.items():
        assert tol.excess(outputs[name], np.full(outputs[name].shape, value)) <= 1.0, name


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("answer", KNOWN_ANSWERS, ids=[a.name for a in KNOWN_ANSWERS])
def test_known_answer_from_torch(answer, dtype):
    cfg = answer.config
    module = crosscheck.TORCH_MODULES[cfg.kind](**cfg.constructor_kwargs(), dtype=dtype)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.fill_(1.0)
    params, x = answer.arguments()
    outputs = flatten_outputs(cfg, module(torch.as_tensor(x, dtype=dtype)))
    expected = answer.expected if dtype == torch.float64 else answer.float32
    for name, value in expected.items():
        got = outputs[name].detach().to(torch.float64).numpy()
        np.testing.assert_allclose(got, value, rtol=1e-6 if dtype == torch.float32 else 1e-14,
                                   atol=0, err_msg=name)


# Calls the reference must refuse: (description, cfg, batch, steps, what to change).
LSTM = Config("lstm", 3, 4, num_layers=2)
BAD_CALLS = [
    ("input rank", LSTM, lambda p, x, hx: (p, x[None], hx), "3D"),
    ("input size", LSTM, lambda p, x, hx: (p, x[..., :2], hx), "input has shape"),
    ("empty sequence", LSTM, lambda p, x, hx: (p, x[:0], hx), "sequence length"),
    ("h0 shape", LSTM, lambda p, x, hx: (p, x, (hx[0][:1], hx[1])), r"hx\[0\]"),
    ("hx not a pair", LSTM, lambda p, x, hx: (p, x, hx[0]), "tuple of 2"),
    ("missing parameter", LSTM, lambda p, x, hx: ({k: v for k, v in p.items()
                                                   if k != "bias_hh_l1"}, x, hx), "bias_hh_l1"),
    ("parameter shape", LSTM, lambda p, x, hx: (dict(p, weight_ih_l0=p["weight_ih_l0"].T), x, hx),
     "weight_ih_l0"),
    ("cell input rank", Config("gru_cell", 3, 4), lambda p, x, hx: (p, x[None, None], hx),
     "1D or 2D"),
]


@pytest.mark.parametrize("name,cfg,spoil,message", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_call_raises_value_error(name, cfg, spoil, message):
    shapes = io_shapes(cfg, 2, 3)
    params = {n: np.zeros(s) for n, s in param_shapes(cfg).items()}
    hx = nest_state(cfg, {n: np.zeros(shapes[n]) for n in state_names(cfg)})
    p, x, hx = spoil(params, np.zeros(shapes["input"]), hx)
    with pytest.raises(ValueError, match=message):
        forward(cfg, p, x, hx)


@pytest.mark.parametrize("grad_out,message", [
    (lambda out, h_n, c_n: (out[:, :1], (h_n, c_n)), r"grad_out\[0\]"),
    (lambda out, h_n, c_n: (out, (h_n, c_n[:1])), r"grad_out\[1\]\[1\]"),
    (lambda out, h_n, c_n: (out, h_n), "tuple of 2"),
], ids=["output", "c_n", "state not a pair"])
def test_backward_checks_grad_out(grad_out, message):
    shapes = io_shapes(LSTM, 2, 3)
    params = {n: np.zeros(s) for n, s in param_shapes(LSTM).items()}
    spoiled = grad_out(*(np.zeros(shapes[n]) for n in output_names(LSTM)))
    with pytest.raises(ValueError, match=message):
        backward(LSTM, params, np.zeros(shapes["input"]), None, spoiled)


def test_reference_leaves_its_arguments_unchanged():
    case = random_cases(6, seed=3)[4]  # an lstm case
    params, x, hx, grad_out = crosscheck.case_arguments(case)
    before = [a.copy() for a in (x, *params.values())]
    backward(case.config, params, x, hx, grad_out)
    assert all(np.array_equal(a, b) for a, b in zip(before, (x, *params.values())))


REFERENCE_DIR = Path(rnnbench.reference.__file__).parent


def test_importing_the_reference_does_not_import_torch():
    modules = [f"rnnbench.reference.{p.stem}" for p in REFERENCE_DIR.glob("*.py")]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(REFERENCE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_reference_sources_never_import_torch(path):
    assert not {m for m in _imported_modules(path) if m.split(".")[0] == "torch"}


def test_relu_passes_the_gradient_through_a_nan_pre_activation_as_torch_does():
    cfg = Config("rnn_cell", 1, 1, nonlinearity="relu", bias=False)
    params = {"weight_ih": np.array([[1.0]]), "weight_hh": np.array([[2.0]])}
    grads = backward(cfg, params, np.array([[np.nan]]), np.array([[1.0]]), np.array([[1.0]]))
    cell = torch.nn.RNNCell(1, 1, nonlinearity="relu", bias=False, dtype=torch.float64)
    with torch.no_grad():
        cell.weight_ih.fill_(1.0)
        cell.weight_hh.fill_(2.0)
    h0 = torch.ones(1, 1, dtype=torch.float64, requires_grad=True)
    cell(torch.full((1, 1), float("nan"), dtype=torch.float64), h0).sum().backward()
    assert grads["hx"][0, 0] == h0.grad.item() == 2.0
