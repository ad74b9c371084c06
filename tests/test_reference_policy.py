import math

import pytest

from rnnbench.reference import Config, forward_flops, tolerance
from rnnbench.reference.tolerance import dtypes


def test_elman_flops_match_the_textbook_formula():
    steps, batch, inp, hidden = 100, 32, 256, 128
    cfg = Config("rnn", inp, hidden)
    assert forward_flops(cfg, batch, steps) == 2 * steps * batch * hidden * (inp + hidden)
    assert forward_flops(cfg, batch, steps, input_gemm=False) == 2 * steps * batch * hidden * hidden


def test_gated_flops_scale_with_gate_count_layers_and_directions():
    base = forward_flops(Config("rnn", 8, 8), 4, 10)
    assert forward_flops(Config("gru", 8, 8), 4, 10) == 3 * base
    assert forward_flops(Config("lstm", 8, 8), 4, 10) == 4 * base
    two_layer = Config("rnn", 8, 8, num_layers=2, bidirectional=True)
    # layer 1 reads both directions of layer 0: input width 16
    assert forward_flops(two_layer, 4, 10) == 2 * base + 2 * (2 * 10 * 4 * 8 * (16 + 8))


def test_lstm_projection_flops_are_counted():
    cfg = Config("lstm", 6, 10, proj_size=4)
    per_step = 40 * 6 + 40 * 4 + 4 * 10
    assert forward_flops(cfg, 3, 5) == 2 * 3 * 5 * per_step


def test_unbatched_cell_counts_one_step_of_one_sample():
    assert forward_flops(Config("gru_cell", 3, 5), None) == 2 * 15 * (3 + 5)


def test_tolerance_orders_dtypes_by_precision():
    allowances = [tolerance(d).atol for d in ("float64", "float32", "float16", "bfloat16")]
    assert allowances == sorted(allowances)


def test_tolerance_grows_with_steps_and_depth_like_a_random_walk():
    one = tolerance("float32", 1, 1).atol
    assert tolerance("float32", 100, 1).atol == pytest.approx(10 * one)
    assert tolerance("float32", 25, 4).atol == pytest.approx(10 * one)
    assert tolerance("float32", 1, 1, gradient=True).atol > one


def test_tolerance_excess_is_error_over_allowance():
    tol = tolerance("float64")
    assert tol.excess([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert tol.excess([1.0 + 3 * tol.atol], [1.0]) == pytest.approx(3 / (1 + 1), rel=1e-6)
    assert tol.excess([], []) == 0.0


def test_unknown_dtype_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="float32"):
        tolerance("int8")
    assert "float64" in dtypes()


def test_tolerances_are_finite_positive():
    for dtype in dtypes():
        assert 0 < tolerance(dtype, 1000, 8, gradient=True).atol < math.inf
