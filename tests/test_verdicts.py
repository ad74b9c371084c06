"""The verdict model: two levels (the reference's function, a drop-in replacement), where a
missing feature comes from, incomplete runs, the exit code `--require` picks, and the command
that reruns a finding."""
from __future__ import annotations

import json
from functools import partial

import pytest

from rnnbench.cli import main
from rnnbench.suites.results import CheckResult, ConformanceRun, judge, summary_phrase
from rnnbench.suites.text import rerun_command

ZOO = "tests/zoo"


def result(check: str, outcome: str, category: str = "forward", **numbers) -> CheckResult:
    return CheckResult(check=check, category=category, kind="rnn", case=check.split("/")[1],
                       outcome=outcome, numbers=numbers)


def states(results, interrupted=False) -> dict[str, str]:
    return {level: v.state for level, v in judge(results, interrupted).items()}


def test_a_names_only_failure_keeps_the_numerics_level():
    results = [result("forward/a", "passed"), result("parameters/a", "failed", "construction")]
    assert states(results) == {"numerics": "conforms", "drop-in": "does not conform"}


def test_a_numeric_failure_fails_both_levels():
    results = [result("forward/a", "failed"), result("parameters/a", "passed", "construction")]
    assert states(results) == {"numerics": "does not conform", "drop-in": "does not conform"}


def test_parameters_no_rule_can_match_leave_the_function_not_checked_never_wrong():
    unmatched = [result("forward/a", "failed", parameters_matched=False),
                 result("shapes/a", "failed", "shapes", parameters_matched=False)]
    verdicts = judge(unmatched)
    assert states(unmatched) == {"numerics": "not checked", "drop-in": "does not conform"}
    assert "--param-map" in verdicts["numerics"].reasons[0]
    assert summary_phrase(verdicts) == "not a drop-in, function not checked"
    for selection in ({}, {"checks": "forward"}):
        assert ConformanceRun("t", results=unmatched, require="numerics",
                              **selection).exit_code == 1
    # A failure where the parameters could be read stands; passes there prove nothing of the
    # checks that could not run, nor does a check that did not finish.
    assert states(unmatched + [result("forward/b", "failed")])["numerics"] == "does not conform"
    for other in (result("forward/b", "passed"),
                  result("forward/b", "error", message="the process timed out", incomplete=True)):
        assert states(unmatched + [other])["numerics"] == "not checked"


def test_a_constructor_that_needs_more_than_torch_gives_leaves_the_function_not_checked():
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    class TaggedRNN(nn.RNN):
        def __init__(self, input_size, hidden_size, tag):
            super().__init__(input_size, hidden_size)

    results = run_checks(Implementation("tagged", {"rnn": TaggedRNN}), kinds=["rnn"],
                         checks="forward/single-layer,parameters/single-layer")
    verdicts = judge(results)
    assert states(results) == {"numerics": "not checked", "drop-in": "does not conform"}
    assert "needs arguments torch.nn's does not give" in verdicts["numerics"].reasons[0]
    assert "requires `tag`" in verdicts["drop-in"].reasons[0]


def test_parameters_of_its_own_are_judged_by_what_they_change():
    import torch
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    class Offsets(nn.GRUCell):
        """An unused parameter, and a shift of the output started at zero."""

        def __init__(self, input_size, hidden_size, bias=True):
            super().__init__(input_size, hidden_size, bias)
            self.unused = nn.Parameter(torch.ones(hidden_size))
            self.shift = nn.Parameter(torch.zeros(hidden_size))

        def forward(self, input, hx=None):
            return super().forward(input, hx) + self.shift

    class BufferWeights(nn.GRUCell):
        """torch.nn's weights held as buffers, an inference engine's way: no parameters at all."""

        def __init__(self, input_size, hidden_size, bias=True):
            super().__init__(input_size, hidden_size, bias)
            for name, value in list(self._parameters.items()):
                del self._parameters[name]
                self.register_buffer(name, value.detach())

    [shifted] = run_checks(Implementation("o", {"gru_cell": Offsets}), checks="forward/batched")
    assert shifted.diagnosis == "other_parameters" and "depends on shift, which" in shifted.message
    [buffers] = run_checks(Implementation("b", {"gru_cell": BufferWeights},
                                          unsupported=frozenset({"backward"})),
                           checks="forward/batched")
    assert buffers.outcome == "passed", buffers.message


def test_parameters_of_its_own_that_move_the_output_as_built_are_one_finding_in_every_check():
    import torch
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    class Peephole(nn.GRUCell):
        """A term from the state beyond torch.nn's, started away from zero."""

        def __init__(self, input_size, hidden_size, bias=True):
            super().__init__(input_size, hidden_size, bias)
            self.peephole = nn.Parameter(torch.full((hidden_size,), 0.5))

        def forward(self, input, hx=None):
            out = super().forward(input, hx)
            return out + self.peephole * torch.tanh(out)

    results = run_checks(Implementation("p", {"gru_cell": Peephole}),
                         checks="forward/batched,gradients/batched")
    assert [r.check for r in results] == ["forward/batched", "gradients/batched"]
    for result in results:
        assert result.diagnosis == "other_parameters", result.message
        assert "with it at zero it is the reference's" in result.message


def test_gradients_behind_a_forward_right_to_float32_only_are_still_compared():
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    class RoundedInputCell(nn.RNNCell):
        """Reads its input rounded to float32, and cut from the graph: no input gradient."""

        def __init__(self, *args, detach=True, **kwargs):
            super().__init__(*args, **kwargs)
            self.detach = detach

        def forward(self, input, hx=None):
            rounded = input.float().to(input.dtype)
            return super().forward(rounded.detach() if self.detach else rounded, hx)

    def gradients(**options):
        [result] = run_checks(Implementation("r", {"rnn_cell": partial(RoundedInputCell, **options)}),
                              checks="gradients/batched")
        return result

    cut = gradients()
    assert cut.outcome == "failed" and cut.diagnosis != "lower_precision"
    assert "input" in cut.message
    assert gradients(detach=False).diagnosis == "lower_precision"


def test_a_constructor_refusing_a_feature_lacks_it_where_it_refuses_and_is_judged_elsewhere():
    import torch
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    def stacked(refusal, square_too=False):
        class Stacked(nn.RNN):
            def __init__(self, input_size, hidden_size, num_layers=1, **kwargs):
                if num_layers > 1 and (square_too or input_size != hidden_size):
                    raise refusal("stacked layers are not implemented")
                super().__init__(input_size, hidden_size, num_layers, **kwargs)

            def forward(self, input, hx=None):  # a residual from the second layer on
                output, h_n = super().forward(input, hx)
                return (output + input if self.num_layers > 1 else output), h_n
        return Stacked

    def judged(constructor):
        [result] = run_checks(Implementation("s", {"rnn": constructor}),
                              checks="forward/three-layer-square")
        return result

    refused = judged(stacked(NotImplementedError, square_too=True))
    assert refused.outcome == "not_supported" and refused.numbers["sources"] == {
        "num_layers": "observed"}
    assert "asked for num_layers=2, the constructor raised NotImplementedError" in refused.message
    # research code's refusal: an assert on the argument
    class OneLayer(nn.RNN):
        def __init__(self, input_size, hidden_size, num_layers=1, **kwargs):
            assert num_layers == 1, "one layer only"
            super().__init__(input_size, hidden_size, num_layers, **kwargs)

    class BrokenInvariant(nn.RNN):  # every layer built for the input's size: a bug its assert finds
        def __init__(self, input_size, hidden_size, num_layers=1, **kwargs):
            sizes = [input_size] * num_layers
            assert all(size == (input_size if n == 0 else hidden_size) for n, size in enumerate(sizes))
            super().__init__(input_size, hidden_size, num_layers, **kwargs)

    class OneLayerOnly(nn.RNN):  # deployment code's: a ValueError raised on a line naming it
        def __init__(self, input_size, hidden_size, num_layers=1, **kwargs):
            super().__init__(input_size, hidden_size, num_layers, **kwargs)
            if self.num_layers != 1:
                raise ValueError("OneLayerOnly only supports num_layers=1")

    class ViewOfLayers(nn.RNN):  # a torch operation failing on a line that names num_layers
        def __init__(self, input_size, hidden_size, num_layers=1, **kwargs):
            super().__init__(input_size, hidden_size, num_layers, **kwargs)
            self.start = torch.ones(hidden_size).view(num_layers, hidden_size)

    asserted = judged(OneLayer)
    assert asserted.outcome == "not_supported" and "raised AssertionError" in asserted.message
    said = judged(OneLayerOnly)
    assert said.outcome == "not_supported" and "raised ValueError" in said.message
    assert judged(ViewOfLayers).outcome == "failed"  # a bug, not a refusal
    assert judged(BrokenInvariant).outcome == "passed"  # square: the invariant holds, and it runs
    [crash] = run_checks(Implementation("b", {"rnn": BrokenInvariant}),
                         checks="forward/two-layer-bidirectional")
    assert crash.outcome == "failed" and "AssertionError" in crash.message
    # refused at the probe's sizes, built at the case's: judged, and its residual found
    assert judged(stacked(NotImplementedError)).outcome == "failed"
    # any other exception, or one raised on a line that names no argument, is a crash
    crash = judged(stacked(ValueError, square_too=True))
    assert crash.outcome == "failed" and "ValueError" in crash.message


def test_a_constructor_refusing_batch_first_false_is_judged_built_batch_first():
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks
    from rnnbench.suites.results import judge

    class BatchFirstOnly(nn.GRU):  # deployment code's: `assert batch_first`
        def __init__(self, input_size, hidden_size, batch_first=False, **kwargs):
            assert batch_first, "only batch_first=True"
            super().__init__(input_size, hidden_size, batch_first=batch_first, **kwargs)

    class ReversedBatchFirstOnly(BatchFirstOnly):
        def forward(self, input, hx=None):
            output, h_n = super().forward(input, hx)
            return output.flip(1 if output.dim() == 3 else 0), h_n

    def verdicts(constructor):
        results = run_checks(Implementation("b", {"gru": constructor}), quick=True)
        return judge(results), results

    right, results = verdicts(BatchFirstOnly)
    assert right["numerics"].state == "conforms", [r.message for r in results
                                                   if r.outcome == "failed"]
    assert right["drop-in"].state == "does not conform"
    failed = [r.diagnosis for r in results if r.outcome == "failed"
              and not r.check.startswith("pickle")]  # a class defined here pickles by no name
    assert failed == ["changed_default"]
    wrong, _ = verdicts(ReversedBatchFirstOnly)
    assert wrong["numerics"].state == "does not conform"

    class TimeMajorInside(nn.GRU):  # asserts batch_first, then builds time-major all the same
        def __init__(self, input_size, hidden_size, batch_first=False, **kwargs):
            assert batch_first, "only batch_first=True"
            super().__init__(input_size, hidden_size, **kwargs)

    ignored, results = verdicts(TimeMajorInside)
    assert ignored["numerics"].state == "does not conform"
    forward = [r for r in results if r.outcome == "failed" and r.check.startswith("forward/")]
    assert forward and {r.diagnosis for r in forward} == {"batch_first_ignored"}


def test_a_crash_with_a_state_is_not_read_as_batch_first_where_half_precision_blurs_the_two():
    from torch import nn

    from rnnbench.impls import Implementation
    from rnnbench.suites.runner import run_checks

    class StackRefusesState(nn.LSTM):
        def forward(self, input, hx=None):
            if hx is not None and self.num_layers > 1:
                raise IndexError("index out of range")
            return super().forward(input, hx)

    [crash] = run_checks(Implementation("s", {"lstm": StackRefusesState}),
                         checks="forward-bfloat16/no-bias")
    assert crash.outcome == "failed" and "IndexError" in crash.message
    assert crash.diagnosis is None


@pytest.mark.parametrize("source, drop_in", [("declared", "conforms"),
                                             ("signature", "does not conform"),
                                             ("observed", "does not conform")])
def test_only_a_declared_feature_is_excused_from_the_drop_in_level(source, drop_in):
    results = [result("forward/a", "passed"),
               result("forward/b", "not_supported", features={"unbatched": "it raised"},
                      sources={"unbatched": source})]
    verdicts = judge(results)
    assert verdicts["numerics"].state == "conforms" and verdicts["drop-in"].state == drop_in
    if drop_in != "conforms":
        assert any("unbatched" in reason and source in reason
                   for reason in verdicts["drop-in"].reasons)


def test_checks_cut_short_make_a_run_incomplete_not_failed():
    results = [result("forward/a", "passed"),
               result("forward/b", "error", message="the process timed out", incomplete=True)]
    assert states(results) == {"numerics": "incomplete", "drop-in": "incomplete"}
    crashed = [result("forward/a", "passed"), result("forward/b", "error")]
    assert states(crashed) == {"numerics": "does not conform", "drop-in": "does not conform"}
    assert states([result("forward/a", "passed")], interrupted=True)["numerics"] == "incomplete"


def test_nothing_that_ran_at_a_level_is_not_checked_never_conforms():
    skipped = [result("forward/a", "not_supported", features={"float64": "declared"},
                      sources={"float64": "declared"})]
    assert states(skipped)["numerics"] == "not checked"


@pytest.mark.parametrize("require, outcome, code", [
    ("drop-in", "failed", 1), ("numerics", "failed", 0), ("drop-in", "passed", 0)])
def test_the_required_level_sets_the_exit_code(require, outcome, code):
    doc = ConformanceRun("t", results=[result("forward/a", "passed"),
                                       result("parameters/a", outcome, "construction")],
                         require=require)
    assert doc.exit_code == code
    cut = ConformanceRun("t", results=[result("forward/a", "error", incomplete=True)])
    assert cut.exit_code == 3


def test_the_verdict_travels_in_the_json_document():
    doc = ConformanceRun("t", results=[result("forward/a", "passed"),
                                       result("parameters/a", "failed", "construction")],
                         require="numerics")
    data = doc.to_json()
    assert data["verdict"]["numerics"]["state"] == "conforms"
    assert data["verdict"]["drop-in"]["state"] == "does not conform"
    again = ConformanceRun.from_json(json.loads(json.dumps(data)))
    assert again.require == "numerics" and again.verdicts == doc.verdicts


def test_the_rerun_command_keeps_how_the_run_was_asked_for():
    doc = ConformanceRun("m.py:M", seed=3, case='{"config":{}}', device="cuda",
                         options={"param_map": {"W": "weight_ih_l0"}, "unsupported": ["packed"],
                                  "known_failures_file": "k.txt", "timeout": 5.0},
                         require="numerics")
    command = rerun_command(doc, result("forward/given", "failed"))
    assert command == ("rnnbench conform m.py:M --kind rnn --case '{\"config\":{}}' --check "
                       "forward/given --device cuda --seed 3 --param-map W=weight_ih_l0 "
                       "--unsupported packed --known-failures k.txt --timeout 5 --require "
                       "numerics --verbose")


def test_the_rerun_command_is_not_printed_when_this_run_is_it():
    doc = ConformanceRun("m.py:M", checks="forward/a")
    assert rerun_command(doc, result("forward/a", "failed")) is None
    assert rerun_command(doc, result("forward/b", "failed")) is not None


def test_unknown_unsupported_features_are_a_usage_error(capsys):
    assert main(["conform", "native", "--unsupported", "unbatched,sideways", "--kind", "rnn",
                 "--check", "parameters/single-layer"]) == 2
    assert "sideways" in capsys.readouterr().err


def test_a_mistyped_pattern_among_several_is_a_usage_error_naming_it(capsys):
    assert main(["conform", "native", "--kind", "rnn",
                 "--check", "parameters/single-layer,forwrd/single-layer"]) == 2
    err = capsys.readouterr().err
    assert "--check forwrd/single-layer: no check matches" in err, err
    # spaces after the commas and a trailing comma are no patterns
    assert main(["conform", "native", "--kind", "rnn",
                 "--check", "parameters/single-layer, forward/single-layer,"]) == 0


def test_a_fuzz_search_keeps_distinct_failures_apart_each_with_its_smallest_case():
    from rnnbench.impls import load
    from rnnbench.suites import run_checks
    from rnnbench.suites.catalogue import suite_kind
    from rnnbench.suites.check_numerics import check_forward
    from rnnbench.suites.fuzz import case_from_json
    from rnnbench.suites.results import Finding
    from rnnbench.suites.subject import Subject

    impl = load(f"{ZOO}/real_code.py:BatchOfOneAndReversedRNN", "rnn")
    (found,) = run_checks(impl, fuzz=40)
    assert found.outcome == "failed" and found.message.startswith("drawn cases fail in 2 ways")
    causes = set()
    for text in found.numbers["cases"]:
        case = case_from_json(text)
        with pytest.raises(Finding) as caught:
            check_forward(Subject(impl, "rnn", suite=suite_kind("rnn")), case, "float64")
        causes.add(caught.value.diagnosis or "raised")
        assert case.batch in (None, 1) or case.steps >= 2  # each as small as its cause allows
    assert causes == {"time_reversed", "raised"}
    assert found.numbers["case"] == found.numbers["cases"][0]
