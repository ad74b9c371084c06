"""The half-precision rows: bfloat16 and float16 forward and gradient checks against the float64
reference, their tolerance, and what an implementation without half support gets."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnbench.impls import Implementation, load
from rnnbench.reference import tolerance
from rnnbench.suites import run_checks
from rnnbench.suites.catalogue import checks_of
from rnnbench.suites.kinds import HALF_DTYPES
from rnnbench.suites.torch_nn import CASES

NATIVE = load("native")
HALF_ROWS = "*-bfloat16/*,*-float16/*"


def _listing(results) -> str:
    return "\n".join(f"{r.kind} {r.check}: {r.outcome} {r.message} [{r.diagnosis}]" for r in results)


def _numeric(dtype: str, kind: str) -> dict[str, object]:
    return {check.category: check for check in checks_of(kind)
            if check.dtype == dtype and check.category in ("forward", "gradients")}


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_every_case_has_half_forward_and_every_smooth_case_half_gradients(dtype):
    judged, not_judged = [], []
    for kind in {case.kind for case in CASES}:
        checks = _numeric(dtype, kind)
        assert set(checks) == {"forward", "gradients"}
        assert checks["forward"].cases() == [c for c in CASES if c.kind == kind]
        judged += checks["gradients"].cases()
        not_judged += [c for c in CASES if c.kind == kind and c not in judged]
    # relu's kink, and the rows whose point is the forward alone (saturated)
    assert not_judged and all(c.config.nonlinearity == "relu" or not c.runs("gradients")
                              for c in not_judged)
    assert {c.kind for c in judged} == {c.kind for c in CASES}


def test_half_allowances_keep_the_ratio_of_the_dtypes_epsilons():
    ratio = torch.finfo(torch.bfloat16).eps / torch.finfo(torch.float16).eps
    assert tolerance("bfloat16").atol / tolerance("float16").atol == pytest.approx(ratio)
    assert tolerance("float16", 16, 1).atol == pytest.approx(4 * tolerance("float16").atol)


def test_native_passes_the_half_rows():
    results = run_checks(NATIVE, checks=HALF_ROWS)
    assert {r.check.split("/")[0] for r in results} == {
        f"{what}-{dtype}" for what in ("forward", "gradients") for dtype in HALF_DTYPES}
    assert all(r.outcome == "passed" for r in results), _listing(results)


def test_half_declared_unsupported_is_not_supported_never_failed():
    impl = Implementation("no-float16", {"lstm": nn.LSTM}, unsupported=frozenset({"float16"}))
    results = run_checks(impl, checks=HALF_ROWS)
    by_dtype = {dtype: [r for r in results if r.check.split("/")[0].endswith(f"-{dtype}")]
                for dtype in HALF_DTYPES}
    assert by_dtype["float16"] and all(
        r.outcome == "not_supported" and "needs float16" in r.message for r in by_dtype["float16"])
    assert by_dtype["bfloat16"] and all(r.outcome == "passed" for r in by_dtype["bfloat16"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_native_passes_the_half_rows_on_cuda():
    results = run_checks(NATIVE, device="cuda", checks=HALF_ROWS)
    assert all(r.outcome == "passed" for r in results), _listing(results)


def test_half_precision_is_checked_by_the_full_case_list_not_the_quick_one():
    for kind in ("rnn", "gru_cell"):
        half = [check for check in checks_of(kind) if check.name.endswith(("-bfloat16", "-float16"))]
        assert len(half) == 4
        for check in half:
            assert check.cases(quick=True) == []
            assert len(check.cases()) > 1


class NoBfloat16(nn.GRU):
    """Fails in bfloat16 whatever the state, as a library whose init has no bfloat16 kernel."""

    def forward(self, input, hx=None):
        if input.dtype == torch.bfloat16:
            raise NotImplementedError("'geqrf_cpu' not implemented for 'BFloat16'")
        return super().forward(input, hx)


def test_a_dtype_that_fails_whatever_the_state_is_not_blamed_on_the_zero_state():
    impl = Implementation("no-bfloat16", {"gru": NoBfloat16})
    results = run_checks(impl, checks="forward-bfloat16/*")
    omitted = [r for r in results if "h0-omitted" in r.check]
    assert omitted and all(r.outcome == "failed" for r in omitted)
    assert all(r.diagnosis != "zero_state_default_dtype" for r in omitted), _listing(omitted)


class Float64ZeroState(nn.RNN):
    """Makes the omitted state in float64 (numpy's np.zeros does), so every input dtype answers
    in float64 when the state is omitted."""

    def forward(self, input, hx=None):
        if hx is not None:
            return super().forward(input, hx)
        output, h_n = super().forward(input)
        return output.double(), h_n.double()


def test_a_zero_state_of_a_fixed_other_dtype_is_one_cause_in_every_dtype():
    impl = Implementation("float64-zeros", {"rnn": Float64ZeroState})
    results = run_checks(impl, checks="forward-float32/h0-omitted,forward-float16/h0-omitted")
    assert len(results) == 2 and all(r.outcome == "failed" for r in results)
    assert {r.diagnosis for r in results} == {"h0_none_unhandled"}, _listing(results)


class BatchFromSecondAxis(nn.RNN):
    """A hand-written loop whose omitted state takes the batch from the input's second axis: for
    unbatched (L, I) input it is (I, H), and broadcasting makes the output (L, I, H)."""

    def forward(self, input, hx=None):
        h = input.new_zeros(input.size(1), self.hidden_size) if hx is None else hx[0]
        outputs = []
        for x_t in input:
            h = torch.tanh(x_t @ self.weight_ih_l0.T + self.bias_ih_l0
                           + h @ self.weight_hh_l0.T + self.bias_hh_l0)
            outputs.append(h)
        return torch.stack(outputs), h[None]


def test_a_misshapen_zero_state_in_the_inputs_dtype_is_not_blamed_on_the_default_dtype():
    impl = Implementation("second-axis", {"rnn": BatchFromSecondAxis})
    results = run_checks(impl, checks="forward/unbatched-h0-omitted,forward-float32/unbatched-h0-omitted")
    assert len(results) == 2 and all(r.outcome == "failed" for r in results), _listing(results)
    assert {r.diagnosis for r in results} == {"h0_none_unhandled"}, _listing(results)
