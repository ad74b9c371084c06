"""A kind rnnbench has never heard of, added in this one file: a diagonal linear recurrence
h_t = a * h_{t-1} + W x_t, its NumPy reference, and two implementations. Registering its spec
record and its cases is all it takes for the conformance checks, a benchmark workload and the
report to run on it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from rnnbench.benchmarks.harness import run_benchmarks
from rnnbench.cli import main
from rnnbench.benchmarks.workloads import workload_from_dict
from rnnbench.documents import write_json
from rnnbench.impls import Implementation
from rnnbench.reference import Uniform, tolerance
from rnnbench.reference.kinds import KindSpec
from rnnbench.reports.load import load_inputs
from rnnbench.reports.render import render_report
from rnnbench.suites import Case, SuiteKind, register_kind, run_checks
from rnnbench.suites.check_errors import INPUT_DTYPE, WRONG_INPUT_SHAPES


@dataclass(frozen=True)
class DiagConfig:
    kind: str = field(default="diag", kw_only=True)
    input_size: int
    hidden_size: int

    def constructor_kwargs(self) -> dict:
        return {"input_size": self.input_size, "hidden_size": self.hidden_size}

    def describe(self) -> str:
        return f"diag({self.input_size}->{self.hidden_size})"


def shapes(cfg, batch, steps):
    state = (batch, cfg.hidden_size)
    return {"input": (steps, batch, cfg.input_size), "output": (steps,) + state, "h_n": state,
            "h0": state}


def forward(cfg, params, x, hx):
    h = np.zeros(shapes(cfg, x.shape[1], x.shape[0])["h0"]) if hx is None else hx["h0"]
    outputs = []
    for x_t in x:
        h = params["a"] * h + x_t @ params["weight"].T
        outputs.append(h)
    return {"output": np.stack(outputs), "h_n": h}


def backward(cfg, params, x, hx, grad_out):
    h0 = np.zeros(shapes(cfg, x.shape[1], x.shape[0])["h0"]) if hx is None else hx["h0"]
    states = [h0, *forward(cfg, params, x, hx)["output"]]
    d_h = grad_out["h_n"].copy()
    grads = {"a": np.zeros_like(params["a"]), "weight": np.zeros_like(params["weight"]),
             "input": np.zeros_like(x)}
    for t in reversed(range(len(x))):
        d_h = d_h + grad_out["output"][t]
        grads["a"] += (d_h * states[t]).sum(axis=0)
        grads["weight"] += d_h.T @ x[t]
        grads["input"][t] = d_h @ params["weight"]
        d_h = d_h * params["a"]
    grads["h0"] = d_h
    return grads


def init(cfg):
    bound = 1 / math.sqrt(cfg.hidden_size)
    return {"a": Uniform(-bound, bound), "weight": Uniform(-bound, bound)}


DIAG = KindSpec(
    name="diag", config_type=DiagConfig, make_config=DiagConfig,
    param_shapes=lambda cfg: {"a": (cfg.hidden_size,), "weight": (cfg.hidden_size, cfg.input_size)},
    init_spec=init, io_shapes=shapes, output_names=lambda cfg: ("output", "h_n"),
    state_names=lambda cfg: ("h0",), forward=forward, backward=backward,
    tolerance=lambda cfg, dtype, steps, gradient=False: tolerance(dtype, steps, gradient=gradient),
    flops=lambda cfg, batch, steps, input_gemm=True: 2 * batch * steps * cfg.hidden_size * cfg.input_size,
    tokens=lambda cfg, batch, steps: batch * steps, features=lambda cfg: {})
register_kind(DIAG, SuiteKind(
    cases=(Case("small", DiagConfig(3, 5), batch=4, steps=6, quick=True),
           Case("no-state", DiagConfig(2, 7), batch=3, steps=4, h0=False, quick=True)),
    wrong_inputs=(*WRONG_INPUT_SHAPES, INPUT_DTYPE)))


class DiagRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = 1 / math.sqrt(hidden_size)
        self.a = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.weight = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))

    def forward(self, x, h=None):
        if x.dim() != 3 or x.dtype != self.a.dtype:
            raise ValueError(f"expected a 3-D {self.a.dtype} input, got {x.dim()}-D {x.dtype}")
        h = x.new_zeros(x.shape[1], self.a.shape[0]) if h is None else h
        outputs = []
        for x_t in x:
            h = self.a * h + x_t @ self.weight.T
            outputs.append(h)
        return torch.stack(outputs), h


class DiagForgetsA(DiagRNN):
    def forward(self, x, h=None):
        return super().forward(x, None)  # the given state ignored


class DiagConvertsInput(DiagRNN):
    def forward(self, x, h=None):
        return super().forward(x.to(self.a.dtype), h)  # any dtype silently converted


def test_the_generic_checks_run_on_a_new_kind_and_pass_a_right_implementation():
    results = run_checks(Implementation("diag-right", {"diag": DiagRNN}))
    assert {r.check.split("/")[0] for r in results} >= {
        "parameters", "init", "forward", "gradients", "error-input-size", "error-input-dtype"}
    assert all(r.outcome == "passed" for r in results), [(r.check, r.message) for r in results]


def test_the_generic_checks_fail_a_wrong_implementation_of_the_new_kind():
    results = run_checks(Implementation("diag-wrong", {"diag": DiagForgetsA}))
    failed = {r.check for r in results if r.outcome == "failed"}
    assert "forward/small" in failed and "forward/no-state" not in failed


def test_the_error_checks_of_the_new_kind_name_an_input_dtype_converted():
    results = run_checks(Implementation("diag-converts", {"diag": DiagConvertsInput}))
    failed = {(r.check, r.diagnosis) for r in results if r.outcome != "passed"}
    assert failed == {("error-input-dtype/small", "input_dtype_accepted"),
                      ("error-input-dtype/no-state", "input_dtype_accepted")}


def test_a_benchmark_workload_and_the_report_run_on_the_new_kind(tmp_path):
    workload = workload_from_dict({"name": "diag-small", "config": {"kind": "diag", "input_size": 8,
                                   "hidden_size": 16}, "batch": 4, "steps": 5, "budget_s": 0.01,
                                   "min_repeats": 3})
    assert workload.flops("forward") == 2 * 4 * 5 * 16 * 8
    doc = run_benchmarks([Implementation("diag-right", {"diag": DiagRNN})], [workload], threads=1)
    (result,) = [r for r in doc["results"] if r["metric"] == "forward"]
    assert result["status"] == "ok" and result["median_s"] > 0 and result["gflops"] > 0
    write_json(tmp_path / "bench.json", doc)
    written = render_report(load_inputs([tmp_path / "bench.json"]), tmp_path / "report")
    assert "diag-small" in (tmp_path / "report" / "report.md").read_text()
    assert written


def test_spec_prints_the_new_kinds_page_from_its_record(capsys):
    assert main(["spec", "diag", "--input-size", "3", "--hidden-size", "5", "--batch", "2",
                 "--steps", "4"]) == 0
    page = capsys.readouterr().out
    lines = page.splitlines()
    assert lines[0] == "diag(3->5)" and "diag(input_size=3, hidden_size=5)" in page
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines if len(line.split()) > 1}
    bound = Uniform(-1 / math.sqrt(5), 1 / math.sqrt(5))
    assert rows["a"].startswith("(5,)") and str(bound) in rows["a"]
    assert rows["weight"].startswith("(5, 3)") and str(bound) in rows["weight"]
    assert "total parameters: 20" in page
    assert rows["input"] == "(4, 2, 3)" and rows["output"] == "(4, 2, 5)"
    assert rows["h0"] == "(2, 5)" and rows["h_n"] == "(2, 5)"
    assert f"{2 * 2 * 4 * 5 * 3:,}" in page
    assert str(tolerance("float32", 4)) in rows["float32"]
    assert max(map(len, lines)) <= 100


def test_spec_refuses_an_option_the_new_kinds_configuration_lacks(capsys):
    assert main(["spec", "diag", "--input-size", "3", "--hidden-size", "5",
                 "--num-layers", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--num-layers" in err and "diag" in err
