"""The conformance suite itself: correct implementations pass, every check category can fail
(with the right diagnosis), nothing an implementation does can take a run down, and the CLI
keeps its contract (JSON document, exit codes, one-line usage errors).

`RNNBENCH_SEED_SWEEP=20 pytest tests/test_suites.py -k seed_sweep` runs the full suite on
native under 20 seeds (minutes; not part of the default run).
"""
from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import torch
from torch import nn
from torch.nn import functional as F

from rnnbench.cli import main
from rnnbench.impls import Implementation, load
from rnnbench.reference import KINDS, Uniform, param_shapes
from rnnbench.suites import CATEGORIES, DIAGNOSES, run_checks
from rnnbench.suites.torch_nn import CASES, CONSTRUCTION_CASES, DROPOUT_CASES
from rnnbench.suites.runner import plan, run_item
from rnnbench.suites.check_init import MAX_SAMPLES, SAMPLES
from rnnbench.suites.statistics import (ALPHA, MAX_TESTS, binomial_tail, rate_p_value,
                                        sample_fit)

NATIVE, EAGER = load("native"), load("eager")


def problems(results):
    return [r for r in results if r.outcome != "passed"]


def listing(results) -> str:
    return "\n".join(f"{r.kind} {r.check}: {r.outcome} {r.message} [{r.diagnosis}]" for r in results)


# --- correct implementations pass -------------------------------------------------------------

@pytest.mark.parametrize("impl", [NATIVE, EAGER], ids=["native", "eager"])
def test_correct_implementation_passes_every_check(impl):
    results = run_checks(impl)
    assert len(results) == len(plan(impl)) > 500
    assert not problems(results), listing(problems(results))
    # every category but the implicit model's solver checks applies to torch.nn's kinds
    assert {r.category for r in results} == set(CATEGORIES) - {"solver"}


@pytest.mark.skipif(not os.environ.get("RNNBENCH_SEED_SWEEP"),
                    reason="set RNNBENCH_SEED_SWEEP=N to run the full suite on native under N seeds")
def test_native_passes_under_many_seeds_seed_sweep():
    for seed in range(1, int(os.environ["RNNBENCH_SEED_SWEEP"]) + 1):
        wrong = problems(run_checks(NATIVE, seed=seed))
        assert not wrong, f"seed {seed}:\n{listing(wrong)}"


# --- the catalogue ------------------------------------------------------------------------------

def test_check_ids_are_unique_and_every_kind_has_every_category():
    for kind in KINDS:
        items = plan(Implementation("any", {kind: object}), [kind])
        names = {item.check.name for item in items}
        assert len(names) == len({item.check for item in items})
        ids = [item.id for item in items]
        assert len(ids) == len(set(ids))
        expected = set(CATEGORIES) - {"solver"} - ({"state", "dropout"} if kind.endswith("_cell") else set())
        assert {item.check.category for item in items} == expected


def test_the_implicit_kind_has_its_own_checks_and_solver_category():
    items = plan(Implementation("any", {"implicit": object}), ["implicit"])
    assert {item.check.category for item in items} == {
        "construction", "init", "shapes", "forward", "gradients", "solver", "errors"}


def test_quick_is_a_smaller_list_of_the_same_checks_half_precision_aside():
    full, quick = plan(NATIVE), plan(NATIVE, quick=True)
    assert set(quick) < set(full)
    half = {f"{what}-{dtype}" for what in ("forward", "gradients")
            for dtype in ("bfloat16", "float16")}
    assert {item.check.name for item in quick} == {item.check.name for item in full} - half
    # the parameters' gradients alone (another graph for a compiled implementation): on the
    # deepest case, where a kernel's path for the layers below the top one shows
    deepest = [item.id for item in quick
               if item.kind == "lstm" and item.check.name == "gradients-parameters"]
    assert deepest == ["gradients-parameters/three-layer-square"]


def test_cases_break_symmetry():
    for case in CASES + DROPOUT_CASES:
        cfg = case.config
        sizes = [cfg.hidden_size, case.batch, None if cfg.is_cell or case.steps == 1 else case.steps,
                 cfg.proj_size or None]
        if "square" not in case.name:
            sizes.append(cfg.input_size)
        sizes = [size for size in sizes if size is not None]
        assert len(sizes) == len(set(sizes)), case
        assert len(cfg.gates) == 1 or cfg.hidden_size % len(cfg.gates), case


def test_statistical_false_alarm_rate_per_run_is_below_one_in_a_million():
    tests = sum(len(param_shapes(case.config)) for case in CONSTRUCTION_CASES)
    tests += 2 * sum(0 < case.config.dropout < 1 and case.config.num_layers > 1 for case in DROPOUT_CASES)
    assert tests <= MAX_TESTS
    assert MAX_TESTS * ALPHA < 1e-6


def test_the_init_samples_of_torch_nns_cases_stay_whole_under_the_cap():
    """The smallest parameter sets the number of constructions; every larger one keeps all
    its values from them (their power catches a 1/sqrt(I + H) bound)."""
    for case in CONSTRUCTION_CASES:
        sizes = [math.prod(shape) for shape in param_shapes(case.config).values()]
        assert max(sizes) * math.ceil(SAMPLES / min(sizes)) <= MAX_SAMPLES, case.name


# scipy.stats is the independent yardstick here; the suite's statistical tests use
# scipy.special instead (scipy.stats would add a second to every conformance child's start).
@pytest.mark.parametrize("shift", [0.0, 0.004, 0.01, 0.03])
@pytest.mark.parametrize("n", [10, 1000, 8192])
def test_the_ks_p_value_is_between_the_exact_two_sided_one_and_twice_it(n, shift):
    """Never stricter than the exact test (a correct implementation fails no more often), and
    never more than twice as lenient (the sum of the two one-sided tails)."""
    dist = Uniform(-0.1, 0.1)
    samples = np.random.default_rng(n).uniform(-0.1, 0.1, n) + shift
    exact = scipy.stats.kstest(samples, dist.cdf, method="exact")
    fit = sample_fit(samples, dist)
    assert fit["ks"] == pytest.approx(exact.statistic, rel=1e-12)
    assert exact.pvalue * (1 - 1e-9) <= fit["p_value"] <= min(1.0, 2 * exact.pvalue * (1 + 1e-9))


@pytest.mark.parametrize("events, trials, rate", [
    (520, 1000, 0.5), (600, 1000, 0.5), (300, 1000, 0.25), (2, 1000, 0.25), (0, 10, 0.5),
    (10, 10, 0.5)])
def test_the_binomial_tests_are_the_tails_of_the_binomial_distribution(events, trials, rate):
    upper = scipy.stats.binom.sf(events - 1, trials, rate)
    lower = scipy.stats.binom.cdf(events, trials, rate)
    assert binomial_tail(events, trials, rate) == pytest.approx(upper, rel=1e-9)
    assert rate_p_value(events, trials, rate) == pytest.approx(min(1.0, 2 * min(upper, lower)),
                                                               rel=1e-9)


# --- every category can fail: one small wrong module each ---------------------------------------

def run(constructor, kind: str, check: str):
    """Results of one check (all its cases) on a one-kind implementation."""
    impl = Implementation("wrong", {kind: constructor})
    items = [item for item in plan(impl) if item.check.name == check]
    assert items
    return [run_item(impl, item) for item in items]


def failed(results):
    return [r for r in results if r.outcome == "failed"]


def diagnoses(results):
    return {r.diagnosis for r in failed(results)}


class ExtraParameter(nn.RNN):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scale = nn.Parameter(torch.ones(()))


def ignores_dtype(*args, dtype=None, device=None, **kwargs):
    return nn.RNN(*args, **kwargs)


def clamps_dropout(*args, dropout=0.0, **kwargs):
    return nn.GRU(*args, dropout=min(max(dropout, 0.0), 1.0), **kwargs)


class ZeroBiases(nn.LSTM):
    def reset_parameters(self):
        super().reset_parameters()
        for name, value in self.named_parameters():
            if name.startswith("bias"):
                nn.init.zeros_(value)


class BoundOneOverH(nn.GRUCell):
    def reset_parameters(self):
        for value in self.parameters():
            nn.init.uniform_(value, -1 / self.hidden_size, 1 / self.hidden_size)


class SqueezedState(nn.RNN):
    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return output, h_n.squeeze(0)


class SqueezedStateShiftedOutput(nn.RNN):
    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return output + 0.1, h_n.squeeze(0)


class ShallowDeepcopyRNNCell(nn.RNNCell):
    def __deepcopy__(self, memo):
        return self  # a "copy" that is the original, every parameter shared


def test_a_copy_sharing_the_originals_parameters_is_no_copy():
    (result,) = run(ShallowDeepcopyRNNCell, "rnn_cell", "deepcopy")
    assert result.outcome == "failed", result
    assert result.message.startswith("the original's output (h) differs from before"), result
    assert result.message.endswith("once a deep copy of it was given other parameters"), result


class Float32Inside(nn.RNN):
    """Computes in float32 whatever it is given; returns the output so, h_n cast back."""

    def forward(self, input, hx=None):
        inner = copy.deepcopy(self).float()
        output, h_n = nn.RNN.forward(inner, input.float(), None if hx is None else hx.float())
        return output, h_n.to(input.dtype)


def test_outputs_beside_one_in_a_coarser_dtype_are_not_compared_as_if_right():
    results = [r for r in run(Float32Inside, "rnn", "forward") if r.outcome == "failed"]
    assert results and {r.diagnosis for r in results} == {"lower_precision"}, listing(results)


def test_wrong_values_are_not_hidden_behind_a_misshapen_final_state():
    def forward_messages(constructor):
        return {r.message for r in run(constructor, "rnn", "forward")
                if r.case == "single-layer" and r.outcome == "failed"}

    assert forward_messages(SqueezedState) == {"h_n has shape (4, 5), expected (1, 4, 5)"}
    (message,) = forward_messages(SqueezedStateShiftedOutput)
    assert message.startswith("output differs from the reference (max abs 1.0e-01"), message
    assert message.endswith("(and h_n has shape (4, 5), expected (1, 4, 5))"), message


class LinearCell(nn.RNNCell):
    def forward(self, input, hx=None):
        hx = input.new_zeros(input.shape[:-1] + (self.hidden_size,)) if hx is None else hx
        return F.linear(input, self.weight_ih, self.bias_ih) + F.linear(hx, self.weight_hh, self.bias_hh)


class GatesIFOG(nn.LSTMCell):
    def forward(self, input, hx=None):
        h, c = hx if hx is not None else (input.new_zeros(input.shape[:-1] + (self.hidden_size,)),) * 2
        gates = F.linear(input, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        i, f, o, g = gates.chunk(4, dim=-1)  # torch's order is i, f, g, o
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class StuckRecurrentGradient(nn.GRU):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.weight_hh_l0.register_hook(torch.zeros_like)


class IgnoresState(nn.LSTM):
    def forward(self, input, hx=None):
        return super().forward(input)


class DropsOutputAlways(nn.GRU):
    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return F.dropout(output, self.dropout, training=True), h_n


class DropsOutputInTraining(nn.RNN):
    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return F.dropout(output, self.dropout, training=self.training), h_n


class TrimsFeatures(nn.RNN):
    def forward(self, input, hx=None):
        return super().forward(input[..., :self.input_size], hx)


class ClearsInput(nn.GRUCell):
    def forward(self, input, hx=None):
        h = super().forward(input, hx)
        input.zero_()
        return h


class FirstLayerGradientHalved(nn.LSTM):
    """weight_ih_l0's gradient halved when the input needs none (MXNet's float64 CPU kernel
    gets every lower layer's parameter gradients wrong in that call)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.input_needs_grad = True
        self.weight_ih_l0.register_hook(lambda g: g if self.input_needs_grad else g / 2)

    def forward(self, input, hx=None):
        self.input_needs_grad = input.requires_grad
        return super().forward(input, hx)


class FrozenBias(nn.GRU):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.bias:
            self.bias_hh_l0.requires_grad_(False)


@pytest.mark.parametrize("constructor, kind, check, diagnosis", [
    (ExtraParameter, "rnn", "parameters", "param_names"),
    (ignores_dtype, "rnn", "dtype-device", None),
    (clamps_dropout, "gru", "invalid-arguments", None),
    (ZeroBiases, "lstm", "init", "init_wrong_distribution"),
    (BoundOneOverH, "gru_cell", "init", "init_bound_1_over_h"),
    (SqueezedState, "rnn", "shapes", "h_n_no_layer_dim"),
    (LinearCell, "rnn_cell", "forward", "missing_nonlinearity"),
    (GatesIFOG, "lstm_cell", "forward-float32", "lstm_gate_order"),
    (StuckRecurrentGradient, "gru", "gradients", None),
    (FirstLayerGradientHalved, "lstm", "gradients-parameters", None),
    (FrozenBias, "gru", "gradients", None),
    (IgnoresState, "lstm", "state", "h0_ignored"),
    (DropsOutputAlways, "gru", "dropout-eval", "dropout_in_eval"),
    (DropsOutputInTraining, "rnn", "dropout-train", "dropout_after_last_layer"),
    (TrimsFeatures, "rnn", "error-input-size", "silent_broadcast"),
    (ClearsInput, "gru_cell", "inputs", "input_mutated"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_each_category_can_fail(constructor, kind, check, diagnosis):
    results = run(constructor, kind, check)
    assert failed(results), listing(results)
    assert all(r.outcome in ("passed", "failed") for r in results), listing(results)
    if diagnosis:
        assert diagnoses(results) == {diagnosis}, listing(results)


class PartlyZeroBiasGRU(nn.GRU):
    """torch.nn's GRU with b_hh's r and z rows left at zero: the range still looks right."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with torch.no_grad():
            self.bias_hh_l0[:2 * self.hidden_size] = 0


def test_an_init_partly_left_at_zero_is_said_to_be():
    (result,) = [r for r in run(PartlyZeroBiasGRU, "gru", "init") if r.case == "single-layer"]
    assert result.outcome == "failed" and result.numbers["parameter"] == "bias_hh_l0", result
    zeros, of = re.search(r"(\d+) of (\d+) values exactly 0", result.message).groups()
    assert 0.6 < int(zeros) / int(of) < 0.7, result.message  # two of the three gates


def test_arguments_of_a_declared_missing_feature_are_not_held_against_it():
    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    declared = Implementation("d", {"gru": clamps_dropout}, unsupported=frozenset({"dropout"}))
    results = run_checks(declared, checks="invalid-arguments/*")
    assert results and all(r.outcome == "passed" for r in results), listing(results)


class OneBiasLSTMCell(nn.LSTMCell):
    """torch.nn's cell with b_hh dropped: b_ih alone, drawn as the sum of torch.nn's two
    (`summed`), or like one of them."""

    summed = True

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, device, dtype)
        if bias:
            with torch.no_grad():
                if self.summed:
                    self.bias_ih += self.bias_hh
            del self.bias_hh
            self.register_parameter("bias_hh", None)

    def forward(self, input, hx=None):
        if self.bias_ih is None:
            return super().forward(input, hx)
        hx = hx or (input.new_zeros(*input.shape[:-1], self.hidden_size),) * 2
        gates = input @ self.weight_ih.T + self.bias_ih + hx[0] @ self.weight_hh.T
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * hx[1] + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class OneBiasLikeOneOfTwo(OneBiasLSTMCell):
    summed = False


def test_one_bias_for_two_is_judged_as_their_sum_at_init():
    assert not failed(run(OneBiasLSTMCell, "lstm_cell", "init"))
    [wrong] = failed(run(OneBiasLikeOneOfTwo, "lstm_cell", "init"))
    assert wrong.diagnosis == "single_bias"
    assert "(the sum of its and bias_hh's, which the module lacks)" in wrong.message
    assert not failed(run(OneBiasLikeOneOfTwo, "lstm_cell", "forward"))


def test_gradient_failure_names_the_parameter():
    results = failed(run(StuckRecurrentGradient, "gru", "gradients"))
    assert {r.numbers["parameter"] for r in results} == {"weight_hh_l0"}
    assert all(r.message.startswith("the gradient w.r.t. weight_hh_l0 differs") for r in results)


@pytest.mark.parametrize("seed", [26, 53, 70, 100, 103])
def test_torch_nn_passes_the_saturated_rows_where_cancellation_meets_large_terms(seed):
    # on these seeds a pre-activation cancels to about 1 from terms in the thousands: float32
    # rounds it by 1e-4, which the unscaled tolerance (2.4e-5) refused torch.nn itself
    results = run_checks(load("native"), seed=seed, checks="forward*/saturated")
    assert results and all(r.outcome == "passed" for r in results), [
        (r.kind, r.check, r.message) for r in results if r.outcome != "passed"]


class DetachedRNNCell(nn.RNNCell):
    """torch.nn's values with no autograd history, as a cell computed in NumPy returns them."""

    def forward(self, input, hx=None):
        return super().forward(input, hx).detach()


class DetachedFinalStateRNN(nn.RNN):
    """torch.nn's RNN whose final state is detached, as truncated backpropagation code does."""

    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return output, h_n.detach()


def test_outputs_without_autograd_history_are_named_so():
    results = failed(run(DetachedRNNCell, "rnn_cell", "gradients"))
    assert results and all(r.message.startswith("the outputs carry no autograd history")
                           for r in results)
    results = failed(run(DetachedFinalStateRNN, "rnn", "gradients"))
    assert results and all(r.message.startswith("h_n carries no autograd history (detached")
                           for r in results)


class ReverseReadsForwards(nn.RNN):
    """One bidirectional layer whose reverse direction reads the sequence forwards: its half of
    the output comes from running the module again on the time-flipped input."""

    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        if not self.bidirectional or self.num_layers > 1:
            return output, h_n
        time = 1 if self.batch_first and input.dim() == 3 else 0
        flipped, flipped_h_n = super().forward(input.flip(time), hx)
        half = self.hidden_size
        return (torch.cat([output[..., :half], flipped.flip(time)[..., half:]], dim=-1),
                torch.stack([h_n[0], flipped_h_n[1]]))


def test_a_failure_says_where_it_diverges_and_why():
    results = [r for r in failed(run(ReverseReadsForwards, "rnn", "forward"))
               if r.case == "unbatched-bidirectional-batch-first"]
    assert results
    (result,) = results
    assert result.diagnosis == "reverse_not_reversed"
    case = next(c for c in CASES if c.name == result.case)
    # the reverse direction first goes wrong at the first step it processes: the last one
    assert result.numbers == {**result.numbers, "layer": 0, "direction": "reverse",
                              "timestep": case.steps - 1}
    assert result.numbers["max_abs"] > result.numbers["tol"]


def test_features_declared_unsupported_are_not_supported_not_failed():
    impl = Implementation("no-bidirectional", {"gru": nn.GRU},
                          unsupported=frozenset({"bidirectional", "float64"}))
    results = run_checks(impl, quick=True)
    skipped = [r for r in results if r.outcome == "not_supported"]
    assert not problems([r for r in results if r.outcome != "not_supported"])
    assert any(r.case == "two-layer-bidirectional" for r in skipped)
    assert any(r.check.startswith("forward/") and r.case == "single-layer" for r in skipped)
    assert all("declares it unsupported" in r.message for r in skipped)


# --- isolation: nothing an implementation does takes the run down --------------------------------

MISBEHAVING = textwrap.dedent("""
    import os, signal, sys, time
    import torch
    from rnnbench.impls import Implementation

    def in_one_gradient_check(base, act):
        class Module(base):
            def forward(self, input, hx=None):
                # the float64 gradient check of cells' "batched" and sequences' "three-layer-square"
                if (input.dtype == torch.float64 and input.requires_grad
                        and tuple(input.shape) in ((4, 3), (4, 2, 5))):
                    act()
                return super().forward(input, hx)
        return Module

    class CrashesAlways(torch.nn.GRUCell):
        def forward(self, input, hx=None):
            if input.dim() == 2 and input.shape[0] == 4:
                os.kill(os.getpid(), signal.SIGSEGV)
            os._exit(5)

    IMPLEMENTATION = Implementation("misbehaving", kinds={
        "rnn_cell": in_one_gradient_check(torch.nn.RNNCell, lambda: sys.exit(3)),
        "gru_cell": CrashesAlways,
        "rnn": in_one_gradient_check(torch.nn.RNN, lambda: time.sleep(600)),
    }, unsupported=frozenset({"no_bias"}))
""")


def test_exit_crash_segfault_and_hang_become_errors_and_the_run_finishes(tmp_path, monkeypatch):
    from rnnbench.suites import conform, isolation

    monkeypatch.setattr(isolation, "CRASH_LIMIT", 2)
    monkeypatch.setattr(isolation, "native_seconds", dict)  # every check's limit: timeout_s,
    monkeypatch.setattr(isolation, "reference_calibration_s", lambda: None)    # unscaled
    (tmp_path / "misbehaving.py").write_text(MISBEHAVING)
    target = f"{tmp_path / 'misbehaving.py'}:IMPLEMENTATION"
    doc = conform(target, quick=True, timeout_s=10)
    results = doc.results
    assert [r.check for r in results] == [item.id for item in plan(load(target), quick=True)]
    errors = {(r.kind, r.check): r.message for r in results if r.outcome == "error"}
    # sys.exit is caught in the child; a hang is cut off and the kind goes on in a fresh child
    assert "called sys.exit(3)" in errors.pop(("rnn_cell", "gradients/batched"))
    assert "timed out after 10 s" in errors.pop(("rnn", "gradients/three-layer-square"))
    # the hang: not judged, so incomplete rather than failed
    assert [r.check for r in results if r.numbers.get("incomplete")] == [
        "gradients/three-layer-square"]
    # the gru_cell crashes on its first two forward calls, and is given up after them
    assert "killed by SIGSEGV" in errors.pop(("gru_cell", "shapes/batched"))
    assert "exited with status 5" in errors.pop(("gru_cell", "shapes/h0-omitted"))
    assert errors and all(kind == "gru_cell" and "not run" in message
                          for (kind, _), message in errors.items())
    # what it declares unsupported is still reported so, given up or not
    assert {r.outcome for r in results if r.case == "no-bias"} == {"not_supported"}
    # classes defined inside a function cannot be pickled (nor saved with torch.save)
    unpicklable = [r for r in results if r.check.startswith("pickle/") and r.kind != "gru_cell"]
    assert [(r.kind, r.outcome) for r in unpicklable] == [("rnn_cell", "failed"), ("rnn", "failed")]
    assert all("Can't pickle local object" in r.message for r in unpicklable)
    rest = [r for r in results if r.outcome != "error" and r not in unpicklable]
    # (the rnn reads input.dtype, which a PackedSequence has not: packed input not supported)
    assert rest and all(r.outcome == "passed" or (r.outcome == "not_supported" and list(
        r.numbers["features"]) in (["packed"], ["no_bias"])) for r in rest)
    assert doc.summary["error"] == len(errors) + 4


# --- the command ----------------------------------------------------------------------------------

def test_cli_writes_the_json_document_and_exits_0(tmp_path, capsys):
    path = tmp_path / "out" / "native.json"
    assert main(["conform", "native", "--quick", "--kind", "gru", "lstm_cell", "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["schema"] == "rnnbench.conformance/1" and doc["target"] == "native"
    assert doc["kinds"] == ["lstm_cell", "gru"]
    assert set(doc["summary"]) == {"passed", "failed", "not_supported", "error", "xfail", "xpass"}
    assert doc["summary"]["passed"] == len(doc["results"]) == len(plan(NATIVE, ["gru", "lstm_cell"], True))
    assert doc["environment"]["torch"] == torch.__version__
    for result in doc["results"]:
        assert set(result) == {"check", "category", "kind", "case", "outcome", "message",
                               "diagnosis", "numbers", "duration_s"}
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("PASSED: native")


def test_cli_reports_a_failure_with_its_diagnosis_and_exits_1(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn
        from torch.nn import functional as F

        class MyCell(nn.RNNCell):
            def forward(self, input, hx=None):
                hx = input.new_zeros(input.shape[:-1] + (self.hidden_size,)) if hx is None else hx
                return torch.tanh(F.linear(input, self.weight_ih, self.bias_ih)
                                  + F.linear(hx, self.weight_hh.T, self.bias_hh))
    """))
    code = main(["conform", f"{tmp_path / 'mine.py'}:MyCell", "--kind", "rnn_cell", "--quick"])
    out = capsys.readouterr().out
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "Findings, most fundamental first:"
    assert lines[1].startswith(f" 1. {DIAGNOSES['weight_transposed']} [weight_transposed]: ")
    assert lines[2].startswith("    e.g. forward/batched: h differs from the reference")
    assert "--kind rnn_cell --check forward/batched --verbose" in out
    last = out.rstrip().split("\n\n")[-1]        # the verdict comes last: levels, then the line
    assert last.startswith("Verdict (") and "\nFAILED: " in last


@pytest.mark.parametrize("argv, words", [
    (["conform", "no-such-impl"], "unknown implementation 'no-such-impl'"),
    (["conform", "native", "--kind", "lstmcell"], "unknown kind 'lstmcell'"),
    (["conform", "rnnbench/cli.py"], "name the object to load"),
    (["conform", "native", "--timeout", "0"], "--timeout must be a positive number"),
    (["conform", "native", "--device", "tpu"], "unknown device 'tpu'"),
])
def test_cli_usage_errors_are_one_line_and_exit_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_cuda_without_cuda_is_a_usage_error(capsys):
    assert main(["conform", "native", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "CUDA is not available" in err and len(err.splitlines()) == 1


def test_cli_json_path_that_cannot_be_written_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["conform", "native", "--json", str(tmp_path / "file" / "out.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


# --- pytest --pyargs rnnbench.suites --impl TARGET ------------------------------------------------

def pytest_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--pyargs", "rnnbench.suites", *args],
                          capture_output=True, text=True, timeout=600)


def test_pytest_entry_makes_each_check_a_test():
    done = pytest_run("--impl", "eager", "--impl-kind", "gru_cell", "--impl-quick")
    expected = len(plan(EAGER, ["gru_cell"], quick=True))
    assert done.returncode == 0, done.stdout[-2000:]
    assert f"{expected} passed" in done.stdout


def test_pytest_entry_without_impl_does_nothing():
    done = pytest_run()
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout[-2000:]


# --- the case tables, the harness and the run's bounds -------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_every_batched_unbatched_and_state_given_omitted_combination(kind):
    rows = {(case.batched, case.h0) for case in CASES if case.kind == kind}
    assert rows == {(True, True), (True, False), (False, True), (False, False)}
    quick = {(case.batched, case.h0) for case in CASES if case.kind == kind and case.quick}
    assert len(quick) >= 3


def test_construction_checks_run_on_single_layer_unidirectional_rows():
    for kind in ("rnn", "lstm", "gru"):
        assert any(case.kind == kind and case.config.num_layers == 1
                   and not case.config.bidirectional for case in CONSTRUCTION_CASES)


def test_a_folder_named_rnnbench_in_the_working_directory_shadows_nothing(tmp_path):
    (tmp_path / "rnnbench").mkdir()
    (tmp_path / "rnnbench" / "__init__.py").write_text("raise ImportError('the wrong rnnbench')\n")
    command = Path(sys.executable).with_name("rnnbench")  # the console script, as users run it
    done = subprocess.run([str(command), "conform", "native", "--kind", "rnn_cell", "--quick"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "PASSED: native" in done.stdout


HANGS_LATER = textwrap.dedent("""
    import time
    import torch

    class HangsAfterTwentyCalls(torch.nn.RNN):
        calls = 0

        def forward(self, input, hx=None):
            type(self).calls += 1
            if type(self).calls > 20:
                time.sleep(3600)
            return super().forward(input, hx)
""")


def test_an_implementation_that_hangs_after_a_while_costs_a_bounded_time(tmp_path, monkeypatch):
    from rnnbench.suites import conform, isolation

    monkeypatch.setattr(isolation, "LOST_BUDGET_S", 6.0)
    monkeypatch.setattr(isolation, "native_seconds", dict)  # every check's limit: timeout_s,
    monkeypatch.setattr(isolation, "reference_calibration_s", lambda: None)    # unscaled
    (tmp_path / "hangs.py").write_text(HANGS_LATER)
    doc = conform(f"{tmp_path / 'hangs.py'}:HangsAfterTwentyCalls", kinds=["rnn"], quick=True,
                  timeout_s=3)
    errors = [r for r in doc.results if r.outcome == "error"]
    timed_out = [r for r in errors if "timed out" in r.message]
    assert 2 <= len(timed_out) <= 3
    assert any("hung or crashed" in r.message for r in errors)
    assert doc.duration_s < 120


SLOW_FIRST_CALL = textwrap.dedent("""
    import time
    import torch

    class SlowFirstCall(torch.nn.GRUCell):
        # A cell that spends a while on its process's first call, as torch.compile builds.
        calls = 0

        def forward(self, input, hx=None):
            type(self).calls += 1
            time.sleep(4 if type(self).calls == 1 else 0)
            return super().forward(input, hx)
""")


def test_a_childs_first_check_may_take_longer_than_the_others(tmp_path, monkeypatch):
    from rnnbench.suites import conform, isolation

    monkeypatch.setattr(isolation, "native_seconds", dict)  # every check's limit: timeout_s,
    monkeypatch.setattr(isolation, "reference_calibration_s", lambda: None)    # unscaled
    (tmp_path / "slow.py").write_text(SLOW_FIRST_CALL)

    def outcomes(first_check_s):
        monkeypatch.setattr(isolation, "FIRST_CHECK_S", first_check_s)
        doc = conform(f"{tmp_path / 'slow.py'}:SlowFirstCall", kinds=["gru_cell"], quick=True,
                      timeout_s=2, checks="shapes/*")
        return [r.outcome for r in doc.results], doc.results[0].message

    shapes_cases = sum(case.quick and case.runs("shapes") for case in CASES
                       if case.kind == "gru_cell")
    assert outcomes(10.0) == (["passed"] * shapes_cases, "")
    # Without the allowance every fresh child's first check times out, and the kind is given up.
    assert outcomes(0.0) == (["error"] * shapes_cases, "the process timed out after 2 s")


def test_the_run_budget_stops_a_run_and_says_so(tmp_path):
    from rnnbench.suites import conform

    # correct but slow, so that the budget ends the run on a fast machine too
    (tmp_path / "slow.py").write_text(textwrap.dedent("""
        import time
        import torch

        class SlowLSTM(torch.nn.LSTM):
            def forward(self, *args, **kwargs):
                time.sleep(0.05)
                return super().forward(*args, **kwargs)
    """))
    doc = conform(f"{tmp_path / 'slow.py'}:SlowLSTM", kinds=["lstm"], budget_s=4.0)
    outcomes = {r.outcome for r in doc.results}
    assert "passed" in outcomes and "error" in outcomes
    assert any("budget of 4 s is spent" in r.message for r in doc.results)


def test_messages_keep_the_chained_cause_and_drop_object_addresses():
    from rnnbench.errors import one_line

    try:
        try:
            {}["key"]
        except KeyError as cause:
            raise RuntimeError(f"step failed in {object()}") from cause
    except RuntimeError as exc:
        text = one_line(exc)
    assert text == "RuntimeError: step failed in <object object> (caused by KeyError: 'key')"
    # a framework's message that opens with a rule of dashes says its first words instead
    assert one_line(TypeError("-" * 40 + "\n- Unsupported dtype: BFloat16\n")) == \
        "TypeError: - Unsupported dtype: BFloat16"
    # one that holds a library's traceback, or TorchScript's, says its last line, the reason
    assert one_line(RuntimeError("The following operation failed in the TorchScript interpreter."
                                 "\nTraceback of TorchScript (most recent call last):\n  File "
                                 "\"<string>\", line 3\nRuntimeError: batch sizes differ")) == \
        "RuntimeError: batch sizes differ"
    assert one_line(RuntimeError("Traceback (most recent call last):\n  File \"rnn-inl.h\", "
                                 "line 873\nRuntimeError: No training support on CPU")) == \
        "RuntimeError: No training support on CPU"


def test_a_scripted_forward_raises_at_its_own_line_not_in_torch(tmp_path):
    from rnnbench.errors import raised_at

    source = tmp_path / "scripted_cell.py"
    source.write_text("import torch\n\n\n"
                      "class Cell(torch.jit.ScriptModule):\n"
                      "    @torch.jit.script_method\n"
                      "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
                      "        return x.chunk(4, 1)[0]\n")
    spec = importlib.util.spec_from_file_location("scripted_cell", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(RuntimeError) as raised:
        module.Cell()(torch.zeros(3))
    assert raised_at(raised.value) == "scripted_cell.py:7"


def test_findings_come_by_check_then_by_the_case_they_are_first_met_on():
    from rnnbench.findings import group_failures
    from rnnbench.suites.results import CheckResult

    def failed(check, case, message):
        return CheckResult(f"{check}/{case}", check, "lstm", case, "failed", message)

    results = [failed("parameters", "single-layer", "names differ"),
               failed("shapes", "single-layer", "forward raised on batched input"),
               *(failed("shapes", case, "forward raised on unbatched input")
                 for case in ("unbatched", "unbatched-h0-omitted", "unbatched-batch-first"))]
    assert [group.cause for group in group_failures(results)] == [
        "forward raised on batched input", "forward raised on unbatched input", "names differ"]


def test_what_a_module_computes_on_batched_input_comes_before_its_unbatched_failures():
    from rnnbench.findings import group_failures
    from rnnbench.suites.results import CheckResult

    def failed(check, case, message):
        return CheckResult(f"{check}/{case}", check, "lstm", case, "failed", message)

    results = [failed("shapes", "unbatched", "forward raised IndexError"),
               failed("forward", "batched", "h differs"),
               failed("forward", "unbatched", "h differs"),
               failed("parameters", "single-layer", "names differ")]
    assert [group.cause for group in group_failures(results)] == [
        "h differs", "forward raised IndexError", "names differ"]


def test_one_failure_in_several_dtypes_is_one_finding_whatever_torch_calls_the_dtype():
    from rnnbench.findings import group_failures
    from rnnbench.suites.results import CheckResult

    results = [CheckResult(f"forward{suffix}/h0-omitted", "forward", "gru", "h0-omitted", "failed",
                           f"forward raised RuntimeError: expected scalar type {name}")
               for suffix, name in (("", "Double"), ("-bfloat16", "c10::BFloat16"),
                                    ("-float16", "c10::Half"), ("-float32", "CPUFloatType"),
                                    ("-bfloat16", "CPUBFloat16Type"))]
    assert len(group_failures(results)) == 1


def test_fuzzing_finds_a_bug_outside_the_case_tables_and_prints_a_rerun(tmp_path, capsys):
    (tmp_path / "deep.py").write_text(textwrap.dedent("""
        import torch

        class ThirdLayerReversed(torch.nn.RNN):
            # a bug only a module of three layers or more has: its output reversed in time
            def forward(self, input, hx=None):
                output, h_n = super().forward(input, hx)
                return (output.flip(0) if self.num_layers >= 3 else output), h_n
    """))
    target = f"{tmp_path / 'deep.py'}:ThirdLayerReversed"
    assert main(["conform", target, "--kind", "rnn", "--fuzz", "40"]) == 1
    out = capsys.readouterr().out
    rerun = out.split("Rerun the first finding alone, with its inputs and numbers:\n", 1)[1]
    words = shlex.split(rerun.split("\n\n", 1)[0].replace(" \\\n", " "))
    case = words[words.index("--case") + 1]
    assert '"num_layers":3' in case and words[-1] == "--verbose"
    assert main(["conform", target, "--kind", "rnn", "--case", case]) == 1


def test_a_drawn_case_that_kills_the_process_is_named_so_it_can_be_rerun(tmp_path):
    from rnnbench.suites import conform
    from rnnbench.suites.fuzz import case_from_json
    from rnnbench.suites.text import rerun_command

    (tmp_path / "crash.py").write_text(textwrap.dedent("""
        import os, signal, sys, torch

        class CrashesStacked(torch.nn.GRU):
            def forward(self, input, hx=None):
                sys.stderr.write(".")  # output without a newline before the announcement
                if self.num_layers > 1:
                    os.kill(os.getpid(), signal.SIGSEGV)
                return super().forward(input, hx)
    """))
    doc = conform(f"{tmp_path / 'crash.py'}:CrashesStacked", kinds=["gru"], fuzz=20)
    [result] = doc.results
    assert result.outcome == "error" and "SIGSEGV" in result.message
    assert case_from_json(result.numbers["case"]).config.num_layers > 1
    assert f"--case {shlex.quote(result.numbers['case'])}" in rerun_command(doc, result)


def test_drawn_cases_a_module_refuses_count_against_it_as_drop_in():
    from rnnbench.suites.results import judge

    class NoBidirectional(nn.GRU):
        def __init__(self, *args, **kwargs):
            if kwargs.get("bidirectional"):
                raise NotImplementedError("bidirectional GRUs are not supported")
            super().__init__(*args, **kwargs)

    results = run_checks(Implementation("n", {"gru": NoBidirectional}), fuzz=30)
    assert [r.outcome for r in results] == ["passed"]
    assert "bidirectional" in results[0].numbers["skipped"]
    verdicts = judge(results)
    assert (verdicts["numerics"].state, verdicts["drop-in"].state) == (
        "conforms", "does not conform")


def test_fuzzing_a_correct_implementation_finds_nothing():
    results = run_checks(EAGER, kinds=["gru", "lstm_cell"], fuzz=8)
    assert [r.outcome for r in results] == ["passed", "passed"]
    assert all(r.numbers["examples"] >= 1 for r in results)


def test_fuzzing_an_implementation_without_a_backward_checks_its_forward():
    class ForwardOnly(nn.RNN):
        def forward(self, input, hx=None):  # wrong from two layers on, and no gradients
            with torch.no_grad():
                output, h_n = super().forward(input, hx)
            return (output * 2 if self.num_layers > 1 else output), h_n

    impl = Implementation("forward-only", {"rnn": ForwardOnly}, unsupported=frozenset({"backward"}))
    [result] = run_checks(impl, kinds=["rnn"], fuzz=30)
    assert result.outcome == "failed" and '"num_layers":2' in result.numbers["case"]


def test_known_failures_report_xfail_xpass_and_stale_entries(tmp_path, capsys):
    (tmp_path / "known.txt").write_text("# known bugs\nforward/batched  # tracked upstream\n"
                                        "gradients/*\ngru/nothing/*  # matches no check\n")
    target = "tests/zoo/math_bugs.py:NoTanhCell"
    code = main(["conform", target, "--kind", "rnn_cell", "--check", "forward/*,gradients/*",
                 "--known-failures", str(tmp_path / "known.txt"), "--json", str(tmp_path / "o.json")])
    doc = json.loads((tmp_path / "o.json").read_text())
    outcomes = {r["check"]: r["outcome"] for r in doc["results"]}
    assert outcomes["forward/batched"] == "xfail" and outcomes["forward/unbatched"] == "failed"
    assert all(o == "xfail" for check, o in outcomes.items() if check.startswith("gradients/"))
    assert doc["stale_known_failures"] == ["gru/nothing/*"]
    assert code == 1  # forward/unbatched is not listed
    assert "known failure 'gru/nothing/*' matches no check" in capsys.readouterr().out


def test_a_known_failure_that_passes_is_an_xpass_and_fails_nothing():
    impl = Implementation("native-listed", {"gru_cell": nn.GRUCell},
                          known_failures={"forward/batched": "thought broken"})
    results = run_checks(impl, checks="forward/*")
    outcomes = {r.check: r.outcome for r in results}
    assert outcomes["forward/batched"] == "xpass" and outcomes["forward/unbatched"] == "passed"


def test_a_checks_limit_is_the_timeout_or_a_multiple_of_natives_time_whichever_is_larger(monkeypatch):
    from rnnbench.suites import isolation

    monkeypatch.setattr(isolation, "native_seconds", lambda: {"gradients": 0.5, "shapes": 0.001})
    run = isolation._Run({"fuzz": None, "known_failures": {}}, 10.0, None, None)
    run.items = [{"kind": "rnn", "check": "gradients/single-layer"},
                 {"kind": "rnn", "check": "shapes/single-layer"},
                 {"kind": "rnn", "check": "state/single-layer"}]
    assert run.limit_s(0) == isolation.CHECK_SLOWDOWN * 0.5
    assert run.limit_s(1) == 10.0    # native's time x CHECK_SLOWDOWN is below the timeout
    assert run.limit_s(2) == 10.0    # a check native has no time for


def test_conform_bounds_a_users_implementation_by_the_budget_and_a_built_in_by_none():
    from rnnbench.commands.conform import default_budget
    from rnnbench.suites.isolation import DEFAULT_BUDGET_S

    assert default_budget("compile") is None
    assert default_budget("my_rnn.py:MyRNN") == DEFAULT_BUDGET_S


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru", "rnn_cell", "lstm_cell", "gru_cell"])
def test_every_feature_a_row_asks_for_is_asked_for_alone_in_a_row_too(kind, quick):
    # a module that takes bidirectional but not num_layers is otherwise never run bidirectional
    from rnnbench.impls.adapt import ARGUMENT_FEATURES
    from rnnbench.impls.base import required_features
    from rnnbench.suites.cases import PackedCase
    from rnnbench.suites.kinds import suite_record

    asked = set(ARGUMENT_FEATURES.values()) | {"unbatched", "packed"}
    rows = [case for case in suite_record(kind).cases if case.quick or not quick]
    needs = [set(required_features(case.config, batched=case.batched, extra=case.needs + (
        ("packed",) if isinstance(case, PackedCase) else ()))) & asked for case in rows]
    alone = {next(iter(features)) for features in needs if len(features) == 1}
    assert set().union(*needs) - alone == set()


class UnbatchedKeptBatchAxisGRUCell(nn.GRUCell):
    """Unbatched input given a batch axis that is never taken off: h (1, H) for input (I,)."""

    def forward(self, input, hx=None):
        if input.dim() == 1:
            input, hx = input[None], None if hx is None else hx[None]
        return super().forward(input, hx)


class BatchMajorFinalStateRNN(nn.RNN):
    """torch.nn's RNN returning h_n as (batch, 1, hidden): it takes torch.nn's state rightly."""

    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return output, h_n.transpose(0, 1)


def test_a_misshapen_result_is_not_read_as_a_state_taken_in_another_layout():
    unbatched = [r for r in failed(run(UnbatchedKeptBatchAxisGRUCell, "gru_cell", "shapes"))
                 if r.case.startswith("unbatched")]
    assert unbatched and {r.diagnosis for r in unbatched} == {None}, [r.message for r in unbatched]
    shapes = failed(run(BatchMajorFinalStateRNN, "rnn", "shapes"))
    assert shapes and "h0_no_layer_dim" not in {r.diagnosis for r in shapes}


class ForgetFirstBatchFirstLSTM(nn.Module):
    """A tutorial's LSTM: one matrix over [x, h] holding the gates f, i, g, o, x @ W's way, its
    input read (batch, time, features) always, its state its own."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.W = nn.Parameter(torch.randn(input_size + hidden_size, 4 * hidden_size) * 0.3)
        self.b = nn.Parameter(torch.randn(4 * hidden_size) * 0.3)

    def forward(self, x, init_states=None):
        h = c = x.new_zeros(x.shape[0], self.hidden_size)
        outputs = []
        for x_t in x.unbind(1):
            f, i, g, o = (torch.cat([x_t, h], 1) @ self.W + self.b).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs, 1), (h, c)


def test_a_batch_first_module_s_gate_order_is_read_from_its_batch_first_output():
    # Asked time-major, no gate order gives the reference's outputs; handed its input
    # batch-first, f, i, g, o does: the parameters are read so, and the reading is named.
    [parameters] = run(ForgetFirstBatchFirstLSTM, "lstm", "parameters")[:1]
    assert "row blocks 2, 1, 3, 4" in parameters.message, parameters.message
    assert "always_batch_first" in diagnoses(run(ForgetFirstBatchFirstLSTM, "lstm", "forward"))


class NoSuperInitRNN(nn.Module):
    """A tutorial's RNN whose __init__ forgets super().__init__()."""

    def __init__(self, input_size, hidden_size):
        self.hidden_size = hidden_size  # nn.Module's __setattr__ runs, its state never made

    def forward(self, input, hx=None):
        return input, hx


def test_a_module_whose_nn_module_init_never_ran_is_told_so():
    [result] = failed(run(NoSuperInitRNN, "rnn", "shapes"))[:1]
    assert "nn.Module.__init__ never ran (no super().__init__() call)" in result.message


class BatchFirstLastStateLSTM(nn.LSTM):
    """torch.nn's LSTM that always reads batch-first and returns each state without its layer
    axis, as a sequence model's encoder returns it."""

    def __init__(self, input_size, hidden_size):
        super().__init__(input_size, hidden_size, batch_first=True)

    def forward(self, input):
        output, (h_n, c_n) = super().forward(input)
        return output, (h_n[0], c_n[0])


def test_a_state_shaped_by_batch_first_reading_is_named_by_that_reading_first():
    # (steps, hidden) where (1, batch, hidden) is due: the steps were read as the batch; the
    # missing layer axis is the smaller matter.
    shapes = failed(run(BatchFirstLastStateLSTM, "lstm", "shapes"))
    assert shapes and {r.diagnosis for r in shapes if not r.case.startswith("unbatched")} == {
        "always_batch_first"}, [(r.case, r.message) for r in shapes]


class StackStepPairGRUCell(nn.Module):
    """A decoder step over a one-step nn.GRU: the state (1, batch, hidden) in, and out beside h."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, bias=bias)

    def forward(self, input, hidden=None):
        out, hidden = self.gru(input.unsqueeze(0), hidden)
        return out[0], hidden


def test_a_cells_state_returned_with_a_layer_axis_beside_h_is_read_as_that_state():
    batched = [r for r in failed(run(StackStepPairGRUCell, "gru_cell", "shapes"))
               if not r.case.startswith("unbatched")]  # a state (1, H) there is a batch of one
    assert len(batched) == 4 and {r.diagnosis for r in batched} == {"cell_state_layer_axis"}, [
        r.message for r in batched]


class FirstItemStateGRUCell(nn.GRUCell):
    """torch.nn's GRU cell reading its state as `hx[0]`, returning h beside a state shaped as
    `returned` makes it from h."""

    returned = staticmethod(lambda h: [h])

    def forward(self, input, hx=None):
        h = super().forward(input, hx[0])
        return h, self.returned(h)


class FirstItemLayerAxisGRUCell(FirstItemStateGRUCell):
    returned = staticmethod(lambda h: h[None])


class ListStateTanhGRUCell(FirstItemStateGRUCell):
    """A list-state cell whose function is not torch.nn's either: its h is squashed again."""

    def forward(self, input, hx=None):
        h, state = super().forward(input, hx)
        return torch.tanh(h), state


def given_state(results):
    """The failed results of the cases that pass a state (those that omit it crash on None)."""
    return [r for r in failed(results) if "h0-omitted" not in r.case]


def test_a_state_read_as_its_first_item_is_named_by_what_the_cell_returns():
    # [h][0] and (1, batch, hidden)[0] are both h: the state it returns tells the two apart.
    for cell, named in ((FirstItemStateGRUCell, "state_in_list"),
                        (FirstItemLayerAxisGRUCell, "cell_state_layer_axis")):
        results = given_state(run(cell, "gru_cell", "shapes"))
        assert len(results) == 4 and {r.diagnosis for r in results} == {named}, (cell, [
            r.message for r in results])


def test_a_state_layout_no_call_runs_on_by_accident_is_named_though_the_function_differs():
    # The list in the tensor's place is the first cause; what else is wrong comes after it.
    results = given_state(run(ListStateTanhGRUCell, "gru_cell", "shapes"))
    assert results and {r.diagnosis for r in results} == {"state_in_list"}


class FinalStateOnlyRNN(nn.RNN):
    """A course's RNN layer: the state (batch, hidden) without its layer axis, and the final
    state alone returned (the output sequence dropped)."""

    def forward(self, input, h):
        return super().forward(input, h[None])[1][0]


def test_a_state_layout_is_named_where_forward_runs_on_it_though_its_outputs_differ():
    results = given_state(run(FinalStateOnlyRNN, "rnn", "shapes"))
    batched = [r for r in results if r.case == "single-layer"]
    assert batched and batched[0].diagnosis == "h0_no_layer_dim", [
        (r.case, r.diagnosis, r.message) for r in results]


class ConcatStateAnyOrderLSTMCell(nn.LSTMCell):
    """torch.nn's LSTM cell taking its state as one tensor, (h, c) concatenated in `order`."""

    order = "hc"

    def forward(self, input, hx=None):
        first, second = hx.chunk(2, dim=-1)
        h, c = (first, second) if self.order == "hc" else (second, first)
        return super().forward(input, (h, c))


class ConcatStateCellFirstLSTMCell(ConcatStateAnyOrderLSTMCell):
    order = "ch"


def test_an_lstm_state_concatenated_either_way_round_is_named():
    for cell in (ConcatStateAnyOrderLSTMCell, ConcatStateCellFirstLSTMCell):
        results = given_state(run(cell, "lstm_cell", "shapes"))
        assert len(results) == 4 and {r.diagnosis for r in results} == {"state_concatenated"}, cell


class AlwaysRaisingGRUCell(nn.GRUCell):
    def forward(self, input, hx=None):
        raise RuntimeError("not implemented yet")


def test_a_forward_that_raises_on_every_state_gets_no_state_layout():
    assert diagnoses(run(AlwaysRaisingGRUCell, "gru_cell", "shapes")) == {None}


class StatefulInTrainingGRU(nn.GRU):
    """torch.nn's GRU that, in training mode, starts a call without a state where the last ended."""

    def forward(self, input, hx=None):
        kept = getattr(self, "kept", None)
        if hx is None and self.training and kept is not None and kept.shape[1:] == (
                input.shape[1], self.hidden_size) and input.dim() == 3:
            hx = kept
        output, h_n = super().forward(input, hx)
        if self.training:
            self.kept = h_n.detach()
        return output, h_n


def test_a_module_that_keeps_its_state_in_training_mode_alone_is_caught():
    results = failed(run(StatefulInTrainingGRU, "gru", "forward"))
    assert results and {r.diagnosis for r in results} == {"state_kept_between_calls"}
    assert "in training mode" in results[0].message


class InPlaceStateRNN(nn.RNN):
    """torch.nn's one-layer RNN written as a loop that stores each step's h into hx in place: an
    h0 that requires a gradient refuses that at any batch size."""

    def forward(self, input, hx=None):
        hx = input.new_zeros(1, input.shape[1], self.hidden_size) if hx is None else hx
        outputs = []
        for x in input:
            hx[0] = torch.tanh(F.linear(x, self.weight_ih_l0, self.bias_ih_l0)
                               + F.linear(hx[0], self.weight_hh_l0, self.bias_hh_l0))
            outputs.append(hx[0].clone())
        return torch.stack(outputs), hx


def test_a_crash_at_every_batch_size_is_not_named_a_batch_of_one_broken():
    results = run(InPlaceStateRNN, "rnn", "gradients")
    single = {r.case: r for r in results}
    assert single["batch-of-one"].outcome == single["single-layer"].outcome == "failed"
    assert "batch_of_one_broken" not in diagnoses(results)


class CellFirstLSTMCell(nn.LSTMCell):
    def forward(self, input, hx=None):
        h, c = super().forward(input, hx)
        return c, h


class CellFirstLSTM(nn.LSTM):
    def forward(self, input, hx=None):
        output, (h_n, c_n) = super().forward(input, hx)
        return output, (c_n, h_n)


class HOnlyLSTMCell(nn.LSTMCell):
    """torch.nn's LSTM cell returning h alone, and wrong: its h squashed again."""

    def forward(self, input, hx=None):
        return torch.tanh(super().forward(input, hx)[0])


def test_an_lstm_cell_returning_h_alone_is_diagnosed_without_its_c():
    results = run(HOnlyLSTMCell, "lstm_cell", "forward")
    assert failed(results) and not [r for r in results if r.outcome == "error"]


def test_an_lstm_state_returned_as_c_then_h_is_named():
    for module, kind in ((CellFirstLSTMCell, "lstm_cell"), (CellFirstLSTM, "lstm")):
        # (Where h is projected the two differ in shape, and a misshapen h_n alone does not
        # say that c_n is h_n: an unprojected h_n has c_n's shape too.)
        results = [r for r in failed(run(module, kind, "forward"))
                   if not r.case.startswith("projection")]
        assert results and {r.diagnosis for r in results} == {"lstm_state_swapped"}, kind


class FalseSentinelRNN(nn.RNN):
    """torch.nn's RNN whose forward marks the omitted state with False, so hx=None crashes."""

    def forward(self, input, hx=False):
        return super().forward(input) if hx is False else super().forward(input, hx.clone())


class LearntStartOnNoneGRU(nn.GRU):
    """torch.nn's GRU that starts from a state of its own when given None (a learnt h0 would)."""

    def forward(self, input, hx=False):
        if hx is None:
            hx = torch.ones(self.num_layers, *input.shape[1:-1], self.hidden_size,
                            dtype=input.dtype)
        return super().forward(input) if hx is False else super().forward(input, hx)


def test_an_explicit_none_state_is_the_state_omitted():
    for module, kind in ((FalseSentinelRNN, "rnn"), (LearntStartOnNoneGRU, "gru")):
        results = failed(run(module, kind, "forward"))
        omitted = [item.case.name for item in plan(Implementation("wrong", {kind: module}))
                   if item.check.name == "forward" and not item.case.h0]
        assert sorted(r.case for r in results) == sorted(omitted), kind
        assert {r.diagnosis for r in results} == {"h0_none_unhandled"}, kind
        assert all("forward(input, None)" in r.message for r in results), kind
