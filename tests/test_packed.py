"""Variable-length (PackedSequence) checks: the cases, correct implementations pass, a module
without packed support is reported not supported once, and wrong structures, numbers and
gradients fail."""
from __future__ import annotations

import pytest
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from rnnbench.findings import unsupported_features
from rnnbench.impls import Implementation, load
from rnnbench.reference import SEQUENCE_KINDS
from rnnbench.suites import run_checks
from rnnbench.suites.torch_nn import PACKED_CASES

NATIVE, EAGER = load("native"), load("eager")
PACKED = "packed-*"


def _problems(results):
    return [r for r in results if r.outcome != "passed"]


def _listing(results) -> str:
    return "\n".join(f"{r.kind} {r.check}: {r.outcome} {r.message} [{r.diagnosis}]" for r in results)


def test_packed_cases_have_ragged_lengths_in_both_packings():
    for case in PACKED_CASES:
        assert case.batch == len(case.lengths) and case.steps == max(case.lengths), case
        assert 1 in case.lengths and len(set(case.lengths)) > 1, case
        descending = list(case.lengths) == sorted(case.lengths, reverse=True)
        # enforce_sorted=True needs sorted lengths; the other rows must make the packing sort
        assert descending == case.enforce_sorted, case
    for kind in SEQUENCE_KINDS:
        rows = [case for case in PACKED_CASES if case.kind == kind]
        assert {case.h0 for case in rows} == {True, False}
        assert {case.enforce_sorted for case in rows} == {True, False}
        assert any(case.config.bidirectional and case.config.num_layers > 1 for case in rows)
        assert "packed" in rows[0].needs
    assert any(case.config.proj_size for case in PACKED_CASES)


@pytest.mark.parametrize("impl", [NATIVE, EAGER], ids=["native", "eager"])
def test_native_and_eager_pass_every_packed_check(impl):
    results = run_checks(impl, checks=PACKED)
    assert len(results) == 3 * len(PACKED_CASES)
    assert not _problems(results), _listing(_problems(results))


class RefusesPacked(nn.GRU):
    """Runs plain tensors only, as most hand-written loops do."""

    def forward(self, input, hx=None):
        return super().forward(input.contiguous(), hx)  # AttributeError on a PackedSequence


def test_a_module_that_refuses_packed_input_is_not_supported_once():
    results = run_checks(Implementation("refuses", {"gru": RefusesPacked}), quick=True)
    packed = [r for r in results if r.case.startswith("packed-")]
    assert packed and all(r.outcome == "not_supported" for r in packed)
    assert not _problems([r for r in results if r not in packed])
    features = unsupported_features(results)
    assert list(features) == ["packed"] and "PackedSequence" in features["packed"]["reason"]


def test_packed_declared_unsupported_is_not_supported():
    impl = Implementation("declares", {"gru": nn.GRU}, unsupported=frozenset({"packed"}))
    results = run_checks(impl, checks=PACKED, quick=True)
    assert results and all(r.outcome == "not_supported" and "declares" in r.message
                           for r in results)


class ReturnsPadded(nn.GRU):
    """Unpacks the output and returns it padded."""

    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return pad_packed_sequence(output)[0] if isinstance(output, PackedSequence) else output, h_n


class DropsSortIndices(nn.LSTM):
    """Returns the output without its sorted_indices/unsorted_indices (and h_n in sorted order)."""

    def forward(self, input, hx=None):
        if not isinstance(input, PackedSequence) or input.sorted_indices is None:
            return super().forward(input, hx)
        sorted_input = PackedSequence(input.data, input.batch_sizes)
        if hx is not None:
            hx = tuple(h.index_select(1, input.sorted_indices) for h in hx)
        output, state = super().forward(sorted_input, hx)
        return output, state


class DetachesH0(nn.RNN):
    """On packed input the initial state is cut from the graph."""

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence) and hx is not None:
            hx = hx.detach()
        return super().forward(input, hx)


class DefaultDtypeFinalState(nn.GRU):
    """On packed input h_n comes back in torch's default dtype, whatever the input's."""

    def forward(self, input, hx=None):
        output, h_n = super().forward(input, hx)
        return output, (h_n.float() if isinstance(input, PackedSequence) else h_n)


def test_a_packed_final_state_in_a_coarser_dtype_is_named_lower_precision():
    results = run_checks(Implementation("coarse", {"gru": DefaultDtypeFinalState}),
                         checks="packed-forward/*", quick=True)
    failed = [r for r in results if r.outcome == "failed"]
    assert failed and {r.diagnosis for r in failed} == {"lower_precision"}, _listing(results)
    assert all("h_n has dtype torch.float32, expected torch.float64" in r.message for r in failed)


@pytest.mark.parametrize("module, kind, check, words", [
    (ReturnsPadded, "gru", "packed-forward/", "expected a PackedSequence"),
    (DropsSortIndices, "lstm", "packed-forward/", "sorted_indices"),
    (DetachesH0, "rnn", "packed-gradients/", "the gradient w.r.t. h0"),
], ids=lambda v: getattr(v, "__name__", None))
def test_wrong_packed_behaviour_fails(module, kind, check, words):
    results = run_checks(Implementation("wrong", {kind: module}), checks=PACKED, quick=True)
    failed = [r for r in results if r.outcome == "failed" and r.check.startswith(check)]
    assert failed, _listing(results)
    assert any(words in r.message for r in failed), _listing(failed)
