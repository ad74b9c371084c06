"""The zoo (tests/zoo): every planted bug is caught and, where the catalogue names one, gets the
right diagnosis; every correct implementation passes every check.

The catalogue runs in this process (`run_checks`, the quick plan): the same checks `conform`
runs in a child, without a fresh torch import per row. Two rows go through the real command.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rnnbench.findings import DIAGNOSES, group_failures, unsupported_features
from rnnbench.impls import load
from rnnbench.reference import SEQUENCE_KINDS
from rnnbench.suites import run_checks

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "zoo"


@functools.cache
def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"zoo_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # zoo files import their neighbour _base
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


catalogue = _import(ZOO / "catalogue.py")
BASE = _import(ZOO / "_base.py")


def _resolve(target: str):
    path, _, attr = target.rpartition(":")
    return getattr(_import(ROOT / path), attr)


def _checked(target: str, kind: str | None = None):
    """(checks run, the failed or errored ones) for a catalogue target."""
    results = run_checks(load(str(ROOT / target), kind), kinds=[kind] if kind else None, quick=True)
    return results, [r for r in results if r.outcome in ("failed", "error")]


def _listing(results) -> str:
    return "\n".join(f"  {r.outcome} {r.kind} {r.check}: {r.message} [{r.diagnosis}]"
                     for r in results)


@pytest.mark.parametrize("row", catalogue.CORRECT, ids=lambda row: row.target.rpartition("/")[2])
def test_correct_implementation_passes(row):
    results, problems = _checked(row.target)
    assert any(r.outcome == "passed" for r in results)
    assert not problems, f"false failures of {row.target}:\n{_listing(problems)}"


@pytest.mark.parametrize("row", catalogue.PLANTED + catalogue.BLIND_SPOTS,
                         ids=lambda row: row.target.rpartition(":")[2])
def test_planted_bug_is_caught_and_diagnosed(row):
    _, problems = _checked(row.target, row.kind)
    assert problems, f"{row.target} ({row.description}) passed every check"
    if row.diagnosis is not None:
        found = {r.diagnosis for r in problems}
        assert row.diagnosis in found, (f"{row.target} ({row.description}): expected diagnosis "
                                        f"{row.diagnosis!r}, got {sorted(map(str, found))}:\n"
                                        f"{_listing(problems)}")


@pytest.mark.parametrize("row", catalogue.HALF_PLANTED, ids=lambda row: row.target.rpartition(":")[2])
def test_half_precision_bug_is_caught_by_the_half_rows_only(row):
    impl = load(str(ROOT / row.target), row.kind)
    results = run_checks(impl, kinds=[row.kind], checks=catalogue.HALF_CHECKS)
    problems = [r for r in results if r.outcome in ("failed", "error")]
    assert problems, f"{row.target} ({row.description}) passed every half-precision check"
    if row.diagnosis is not None:
        assert row.diagnosis in {r.diagnosis for r in problems}, _listing(problems)
    wider = run_checks(impl, kinds=[row.kind],
                       checks="forward/*,gradients/*,forward-float32/*,gradients-float32/*")
    assert all(r.outcome == "passed" for r in wider), _listing(wider)


def test_mistakes_a_zero_state_cannot_tell_apart_are_told_apart_from_a_random_one():
    # From h = 0 the Cho GRU's reset and a b_hn outside it give the same h'; each is named
    # on the rows that omit the state too.
    from rnnbench.impls import Implementation

    class GRUCellCho(BASE.GRUCell):
        candidate = _resolve(f"{catalogue.ZOO}/math_bugs.py:GRUCho").candidate

    outside = _resolve(f"{catalogue.ZOO}/math_bugs.py:GRUCellResetOutsideBias")
    for cell, diagnosis in ((GRUCellCho, "gru_cho_reset"), (outside, "gru_bhn_outside_reset")):
        results = run_checks(Implementation("t", {"gru_cell": cell}), kinds=["gru_cell"],
                             checks="forward/h0-omitted,forward/unbatched-h0-omitted")
        assert {r.diagnosis for r in results} == {diagnosis}, _listing(results)


@pytest.mark.parametrize("family", ["RNN", "LSTM", "GRU"])
def test_dropout_is_judged_on_a_module_whose_only_bias_is_the_recurrent_one(family):
    # bias_ih held at zero: the memoryless upper layer's gate levels go on bias_hh
    from rnnbench.impls import Implementation

    class RecurrentBiasOnly(getattr(BASE, family)):
        def parameter_shapes(self, layer):
            shapes = super().parameter_shapes(layer)
            shapes.pop("bias_ih", None)
            return shapes

    kind = family.lower()
    results = run_checks(Implementation("t", {kind: RecurrentBiasOnly}), kinds=[kind],
                         checks="dropout-train/*")
    assert results and all(r.outcome == "passed" for r in results), _listing(results)


def test_a_batch_of_one_that_crashes_where_two_run_right_is_named():
    import torch
    from torch import nn

    from rnnbench.impls import Implementation

    class GatesSqueezedGRUCell(nn.GRUCell):  # as scratch cells write it: .squeeze() the gates
        def forward(self, input, hx=None):
            hx = input.new_zeros(input.shape[0], self.hidden_size) if hx is None else hx
            i_r, i_z, i_n = (input @ self.weight_ih.T + self.bias_ih).squeeze().chunk(3, 1)
            h_r, h_z, h_n = (hx @ self.weight_hh.T + self.bias_hh).squeeze().chunk(3, 1)
            r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
            return (1 - z) * torch.tanh(i_n + r * h_n) + z * hx

    results = run_checks(Implementation("t", {"gru_cell": GatesSqueezedGRUCell}),
                         kinds=["gru_cell"], checks="forward/batch-of-one,forward/batched")
    assert [(r.outcome, r.diagnosis) for r in results] == [
        ("passed", None), ("failed", "batch_of_one_broken")], _listing(results)


def test_a_list_of_steps_where_the_final_state_belongs_is_not_read_as_one():
    from torch import nn

    from rnnbench.impls import Implementation

    class StepsAsStateRNN(nn.RNN):  # every step's h where h_n belongs: no final state
        def forward(self, input, hx=None):
            out, _ = super().forward(input, hx)
            return out, list(out.unbind(0))

    [steps] = run_checks(Implementation("t", {"rnn": StepsAsStateRNN}), kinds=["rnn"],
                         checks="forward/single-layer")
    assert steps.outcome == "failed" and steps.message.startswith("forward returned a tuple")


def test_a_wrong_function_is_its_mistake_in_half_precision_too_not_imprecision():
    # A coarser dtype's tolerance covers the Cho GRU's difference in float16; the mistake that
    # explains it within float16's own is the diagnosis.
    results = run_checks(load(str(ROOT / f"{catalogue.ZOO}/math_bugs.py:GRUCho"), "gru"),
                         kinds=["gru"], checks="forward-float16/*")
    diagnoses = {r.diagnosis for r in results if r.outcome == "failed"}
    assert "gru_cho_reset" in diagnoses and "lower_precision" not in diagnoses, _listing(results)


def test_a_wrong_function_within_bfloat16_s_tolerance_is_not_called_imprecise():
    # bfloat16's tolerance covers a hard sigmoid; its outputs are no bfloat16 values
    results = run_checks(load(str(ROOT / f"{catalogue.ZOO}/math_bugs.py:LSTMCellHardSigmoid"),
                              "lstm_cell"), kinds=["lstm_cell"], quick=True)
    failed = [r for r in results if r.outcome == "failed"]
    assert failed and "lower_precision" not in {r.diagnosis for r in failed}, _listing(failed)


# Cell kinds: the command's exit codes at the smallest plan (each call starts two processes).
CELL_BUG = next(row for row in catalogue.PLANTED if row.kind.endswith("_cell"))


@pytest.mark.parametrize("target, kind, exit_code", [
    (catalogue.CORRECT[0].target, CELL_BUG.kind, 0),
    (CELL_BUG.target, CELL_BUG.kind, 1),
])
def test_cli_exit_code(target, kind, exit_code, tmp_path):
    out = tmp_path / "conformance.json"
    command = [sys.executable, "-m", "rnnbench.cli", "conform", target, "--kind", kind, "--quick",
               "--json", str(out)]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert finished.returncode == exit_code, finished.stdout[-2000:] + finished.stderr[-2000:]
    summary = json.loads(out.read_text())["summary"]
    assert (summary["failed"] + summary["error"] > 0) == (exit_code == 1)


def test_catalogue_plants_enough_bugs_with_named_diagnoses():
    planted = catalogue.PLANTED
    assert len(planted) >= 25 and len(catalogue.CORRECT) >= 3
    assert sum(row.diagnosis is not None for row in planted) >= 20
    assert {row.diagnosis for row in planted} - {None} <= set(DIAGNOSES)
    assert len({row.target for row in planted}) == len(planted)


@pytest.mark.parametrize("row", catalogue.PLANTED + catalogue.HALF_PLANTED,
                         ids=lambda row: row.target.rpartition(":")[2])
def test_planted_bug_overrides_exactly_one_hook_of_the_base(row):
    bug = _resolve(row.target)
    (parent,) = bug.__bases__
    assert parent.__name__ == BASE.KINDS[row.kind].__name__
    overridden = [name for name in vars(bug) if not name.startswith("__")]
    assert len(overridden) == 1, overridden
    assert any(overridden[0] in vars(cls) for cls in inspect.getmro(parent))


# --- code written the way courses, tutorials and public repositories write it ----------------

seeds = _import(ZOO / "seed_catalogue.py")
# What the rows' argument tables call "moved with .to()" is the factory_kwargs feature.
FEATURE_NAMES = {"moved with .to()": "factory_kwargs"}


@pytest.mark.parametrize("row", seeds.SEEDS, ids=lambda row: row.target.rpartition(":")[2])
def test_seed_style_code_gets_the_verdict_a_person_expects(row):
    results = list(run_checks(load(str(ROOT / row.target), row.kind),
                          kinds=[row.kind], quick=True))
    problems = [r for r in results if r.outcome in ("failed", "error")]
    found = {r.diagnosis for r in problems}
    assert set(row.findings) <= found, _listing(problems)
    features = {FEATURE_NAMES.get(f, f) for f in row.not_supported.values()}
    features |= {"optional_state"} if row.state_required else set()
    # a hand-written sequence loop takes padded tensors: a PackedSequence is refused (once)
    features |= {"packed"} if row.kind in SEQUENCE_KINDS else set()
    skipped = set(unsupported_features(results))
    # nothing is skipped that the row does not expect; what every kind's quick cases need is
    assert skipped <= features, f"unexpected not supported: {skipped - features}"
    assert {"unbatched", "optional_state"} & features <= skipped
    assert not any(r.outcome == "error" for r in results), _listing(problems)


def test_the_correct_exercise_rnn_runs_forward_and_gradients_and_they_pass():
    row = next(r for r in seeds.SEEDS if r.target.endswith(":ExerciseRNN"))
    results = list(run_checks(load(str(ROOT / row.target), row.kind),
                          kinds=[row.kind]))
    numeric = [r for r in results if r.category in ("forward", "gradients")]
    assert sum(r.outcome == "passed" for r in numeric) >= 8
    assert all(r.outcome in ("passed", "not_supported") for r in numeric), _listing(numeric)
    found = {group.cause for group in group_failures(results)}
    assert "param_names" in found and "silent_broadcast" in found


def test_the_lucid_style_cell_conforms_where_supported():
    results = run_checks(load(f"{ROOT}/{ZOO.relative_to(ROOT)}/seed_style.py:RNNCell", "rnn_cell"))
    assert all(r.outcome in ("passed", "not_supported") for r in results), _listing(results)
    assert {r.message for r in results if r.outcome == "not_supported"} == {
        "needs factory_kwargs: the constructor takes no `device` or `dtype`: modules are built, "
        "then moved with .to()"}


@pytest.mark.parametrize("row", catalogue.REAL_CODE, ids=lambda row: row.target.rpartition(":")[2])
def test_defects_of_real_code_get_the_first_finding_and_verdict_a_person_expects(row):
    from rnnbench.findings import cause_of
    from rnnbench.suites.results import judge, undeclared_features

    results = run_checks(load(str(ROOT / row.target), row.kind), kinds=[row.kind],
                         quick=row.quick)
    groups = group_failures(results)
    first = groups[0].cause if groups else ""
    assert first.startswith(row.first), _listing([g.example for g in groups])
    verdicts = judge(results)
    assert (verdicts["numerics"].state, verdicts["drop-in"].state) == (row.numerics, row.drop_in)
    sources = {feature: why.rsplit("(", 1)[1].rstrip(")")
               for feature, why in undeclared_features(results).items()}
    assert sources == row.undeclared
    assert not [r for r in results if r.outcome == "error"], "every check ran to a verdict"
    assert all(cause_of(g.example) == g.cause for g in groups)


def test_a_stack_whose_omitted_state_is_carried_up_the_layers_fails_the_forward_check():
    results = run_checks(load(str(ROOT / f"{catalogue.ZOO}/state_bugs.py:LayerStateCarriedUp"), "gru"),
                         kinds=["gru"], checks="forward/two-layer-bidirectional-h0-omitted")
    assert [r.outcome for r in results] == ["failed"], _listing(results)
    assert results[0].numbers["layer"] == 1, results[0].numbers  # the first layer is right


def test_a_cell_returning_more_than_h_is_judged_on_that_alone():
    results = run_checks(load(str(ROOT / f"{catalogue.REAL}:ReadoutRNNCell"), "rnn_cell"),
                         kinds=["rnn_cell"], quick=True)
    causes = [group.cause for group in group_failures(results)]
    assert causes[0].startswith("forward returned a tuple (Tensor, Tensor)"), causes
    assert "zero_state_default_dtype" not in causes and "wrapped_output" not in causes, causes


def test_a_copy_whose_forward_reads_the_original_is_no_copy():
    results = run_checks(load(str(ROOT / f"{catalogue.REAL}:WeightDropRNN"), "rnn"),
                         kinds=["rnn"], checks="deepcopy/*")
    (deepcopy,) = results
    assert deepcopy.outcome == "failed", deepcopy
    assert deepcopy.message.endswith("the copy still computes with the original's"), deepcopy


def test_a_refused_argument_is_a_missing_feature_where_no_other_check_asked_for_it_first(
        monkeypatch):
    from rnnbench.suites import features

    # what earlier tests asked of this module is forgotten, as in a process of its own
    monkeypatch.setattr(features, "_PROBED", {})
    monkeypatch.setattr(features, "_BUILT", {})
    results = run_checks(load(str(ROOT / f"{catalogue.REAL}:NoDropoutRNN"), "rnn"),
                         kinds=["rnn"], checks="dropout-*/dropout-single-layer")
    assert results and {r.outcome for r in results} == {"not_supported"}, _listing(results)
