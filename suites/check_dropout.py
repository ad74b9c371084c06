"""Dropout: only between layers, only in training, at rate p, survivors scaled by 1/(1-p).

dropout-eval: in eval mode a module with dropout equals the reference (which never drops) and
two calls agree. If it differs while the same module built with dropout=0 is right, dropout is
active in eval mode.

dropout-train reads the dropout mask off directly. Layer 0 gets parameters from the spec's
distributions; layer 1 is made memoryless and elementwise: W_hh = 0, the identity as the input
weights of the gate that carries the input (Elman h, LSTM g, GRU n), bias BETA on it, and every
other gate pinned open or shut by a bias of +-PIN (LSTM i = o = 1, f = 0; GRU z = 0). Layer 1's
output at each step and unit is then phi(u + BETA) with u = mask * scale * y0, where y0 is layer
0's output (computed by the reference; layer 0 is not affected by dropout) and phi is tanh
(LSTM: tanh(tanh)). Inverting phi gives every unit's ratio u / y0: 0 where dropped, the scale
where kept. So:
- a ratio that is neither 0 nor one common value: not an elementwise dropout of layer 0's output;
- kept units not at exactly 1/(1-p): `dropout_wrong_scale`;
- a dropped fraction inconsistent with p (binomial test at `statistics.ALPHA`):
  `dropout_wrong_scale`, or with p = 0 any unit dropped: `changes_in_training`;
- an output of exactly 0 (phi(BETA + u) is never 0): dropout after the last layer,
  `dropout_after_last_layer`; a one-layer module must not drop at all;
- layer 0's final state other than the reference's: dropout reaches the first layer itself (its
  recurrence, its input or the state it returns), `dropout_reaches_first_layer`;
- nothing dropped and nothing rescaled with p > 0: `dropout_not_applied`;
- a unit's decision repeating across time steps more often than independent masks allow
  (binomial test): one mask per sequence, `dropout_mask_per_sequence`.
"""
from __future__ import annotations

import numpy as np

from rnnbench.findings import EVAL_MODE_ALREADY
from rnnbench.reference import Config, param_shapes
from rnnbench.suites.cases import Case
from rnnbench.suites.check_numerics import compare_forward, observe
from rnnbench.suites.compare import agree
from rnnbench.suites.diagnoses import diagnose, dropout_in_eval
from rnnbench.suites.layers import (HIDDEN_BIAS, INPUT_BIAS, INPUT_WEIGHT, blocks, lower_layers,
                                    time_major)
from rnnbench.suites.results import Finding
from rnnbench.suites.run import Run
from rnnbench.suites.statistics import ALPHA, binomial_tail, rate_p_value
from rnnbench.suites.subject import draw_params

BETA = 0.5
PIN = 30.0  # sigmoid(30) = 1 - 1e-13
# What each gate does in the memoryless layer: carry the input, or be pinned open (1) or shut (0).
GATE_ROLES = {"h": "carry", "g": "carry", "n": "carry", "i": "open", "o": "open", "f": "shut",
              "z": "shut", "r": "shut"}
LEVELS = {"carry": BETA, "open": PIN, "shut": -PIN}  # the input bias of each role
# phi^-1 per family: recover u + BETA from the memoryless layer's output.
INVERSE = {"rnn": np.arctanh, "gru": np.arctanh, "lstm": lambda y: np.arctanh(np.arctanh(y))}
# Ratios are compared with this relative tolerance; 0, 1 and 1/(1-p) are far apart.
RATIO_TOL = 1e-2
# Units where layer 0's output is this close to 0 carry no information about the mask.
MIN_SIGNAL = 0.05


def has_dropout(case: Case) -> bool:
    return case.config.dropout > 0


def check_eval(subject, case) -> dict:
    """In eval mode dropout is off: the module equals the reference, call after call."""
    run = Run(subject, case, "float32", "dropout-eval")
    first = observe(run)
    if not _same(first, run.run()):
        raise Finding("two calls in eval mode give different outputs",
                      "dropout_in_eval" if dropout_in_eval(run) else diagnose(run, first))
    try:
        return compare_forward(run, first)
    except Finding as finding:
        finding.diagnosis = "dropout_in_eval" if dropout_in_eval(run) else finding.diagnosis
        raise


def check_train(subject, case) -> dict:
    """In training, dropout hits only the inputs of upper layers, at rate p, scaled by 1/(1-p)."""
    cfg = case.config
    drawn = draw_params(cfg, subject.rng("dropout-params", case.name))
    run = Run(subject, case, "float32", "dropout-train", params={**drawn, **_memoryless(cfg)})
    if _lacks(run, cfg, INPUT_BIAS) and not _lacks(run, cfg, HIDDEN_BIAS):
        # a module with the recurrent bias alone (held at zero, the input one pins nothing)
        run = Run(subject, case, "float32", "dropout-train",
                  params={**drawn, **_memoryless(cfg, HIDDEN_BIAS)})
    try:  # in eval mode first: dropout can only be judged on a module that is otherwise right
        compare_forward(run, observe(run))
    except Finding as finding:
        finding.message = EVAL_MODE_ALREADY + finding.message
        finding.diagnosis = "dropout_in_eval" if dropout_in_eval(run) else finding.diagnosis
        raise
    run.module.train()
    observed = observe(run)
    zeros = int(np.count_nonzero(observed["output"] == 0.0))
    if cfg.num_layers == 1:  # no layer boundary: training must change nothing
        try:
            return compare_forward(run, observed)
        except Finding as finding:
            finding.diagnosis = "dropout_after_last_layer" if zeros else "dropout_with_one_layer"
            raise
    if zeros:
        raise Finding(f"{zeros} outputs are exactly 0 in training (layer 1 never outputs 0 here)",
                      "dropout_after_last_layer")
    require_first_layer_state(run, observed)
    lower, lower_params = lower_layers(cfg, run.params, 1)
    y0 = time_major(cfg, run.expected(lower, lower_params)["output"])
    y = time_major(cfg, observed["output"])
    informative = np.abs(y0) > MIN_SIGNAL
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(informative, (INVERSE[cfg.family](y) - BETA) / y0, np.nan)
    numbers = _judge_ratios(cfg.dropout, ratio[informative])
    numbers.update(_judge_time_variation(cfg.dropout, ratio))
    return numbers


def require_first_layer_state(run: Run, observed: dict) -> None:
    """Dropout between layers never reaches the first layer itself: its final state (h_n, and
    an LSTM's c_n, of layer 0 in each direction) is the reference's in training too. A module
    that drops the h it carries to the next step, the layer's input, or the h_n it returns
    differs there, even where p = 1 hides it from the output above."""
    cfg = run.cfg
    expected, tol = run.expected(), run.tolerance()
    for name in run.spec.output_names(cfg)[1:]:
        if name not in observed:
            continue
        got, want = observed[name][:cfg.num_directions], expected[name][:cfg.num_directions]
        if not agree({name: got}, {name: want}, tol):
            raise Finding(f"in training, layer 0's {name} differs from the reference (max abs "
                          f"{float(np.max(np.abs(got - want))):.1e}), which dropout between "
                          "layers does not reach", "dropout_reaches_first_layer")


def _same(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[name], b[name]) for name in a)


def _memoryless(cfg: Config, bias: str = INPUT_BIAS) -> dict:
    """Parameters that make every layer above the first memoryless and elementwise, the gates'
    levels on `bias`. On the recurrent bias a GRU's reset gate is pinned open: b_hn sits inside
    r * (W_hn h + b_hn), and W_hn is zero there, so r carries nothing else."""
    hidden = cfg.hidden_size
    roles = [("open" if bias == HIDDEN_BIAS and gate == "r" else GATE_ROLES[gate])
             for gate in cfg.gates]
    values = {INPUT_WEIGHT: np.concatenate([np.eye(hidden) * (role == "carry") for role in roles]),
              bias: np.concatenate([np.full(hidden, LEVELS[role]) for role in roles])}
    block = blocks(cfg)
    return {name: values.get(block[name], np.zeros(shape))
            for name, shape in param_shapes(cfg).items() if name in _upper_layers(cfg)}


def _lacks(run: Run, cfg: Config, bias: str) -> bool:
    """Whether the module holds no `bias` block in the layers above the first (the checks hold
    it at zero)."""
    block, upper = blocks(cfg), _upper_layers(cfg)
    return any(block[name] == bias for name in run.pmap.missing if name in upper)


def _upper_layers(cfg: Config) -> set[str]:
    """The spec's parameters of the layers above the first."""
    return set(param_shapes(cfg)) - set(param_shapes(cfg.replace(num_layers=1)))


def _judge_time_variation(p: float, ratio: np.ndarray) -> dict:
    """torch.nn draws a fresh mask at every time step. Each unit's decisions at consecutive
    steps (where both are informative) agree with probability p^2 + (1-p)^2 when independent;
    a mask drawn once per sequence and reused (variational dropout) agrees every time. One-sided
    binomial test at `statistics.ALPHA`."""
    if not 0.0 < p < 1.0:
        return {}
    dropped = np.abs(ratio) < RATIO_TOL  # (steps, batch, units); NaN compares False
    both = ~np.isnan(ratio[1:]) & ~np.isnan(ratio[:-1])
    pairs = int(both.sum())
    same = int((dropped[1:] == dropped[:-1])[both].sum())
    agree_rate = p * p + (1.0 - p) ** 2
    numbers = {"step_pairs": pairs, "same_decision": same}
    if pairs == 0:
        return numbers
    numbers["time_p_value"] = binomial_tail(same, pairs, agree_rate)
    if numbers["time_p_value"] < ALPHA:
        raise Finding(f"a unit's dropout decision repeats across time steps {same} times in "
                      f"{pairs} (independent masks repeat it at rate {agree_rate:.2f})",
                      "dropout_mask_per_sequence", **numbers)
    return numbers


def _judge_ratios(p: float, ratio: np.ndarray) -> dict:
    """The mask as ratios u / y0 must be 0 or 1/(1-p), dropped at rate p."""
    numbers = {"p": p, "samples": int(ratio.size)}
    if not np.all(np.isfinite(ratio)):
        raise Finding("in training, upper layers see inputs no dropout of layer 0's output gives",
                      **numbers)
    dropped = np.abs(ratio) < RATIO_TOL
    kept = ratio[~dropped]
    scale = 1.0 / (1.0 - p) if p < 1 else None
    numbers["dropped"] = float(dropped.mean())
    if p > 0 and not dropped.any() and kept.size and np.all(np.abs(kept - 1.0) <= RATIO_TOL):
        raise Finding(f"with p = {p} no unit was dropped and none rescaled in training",
                      "dropout_not_applied", **numbers)
    if kept.size:
        common = float(np.median(kept))
        if np.any(np.abs(kept - common) > RATIO_TOL * abs(common)):
            raise Finding("upper layers do not see layer 0's output times a 0-or-constant mask "
                          f"(ratios from {kept.min():.3g} to {kept.max():.3g})", **numbers)
        numbers["scale"] = common
        if scale is None or abs(common - scale) > RATIO_TOL * scale:
            expected = "no unit kept" if scale is None else f"1/(1-p) = {scale:.3g}"
            raise Finding(f"kept units scaled by {common:.3g}, expected {expected}",
                          "dropout_wrong_scale", **numbers)
    if p == 0.0 and dropped.any():
        raise Finding(f"dropped {numbers['dropped']:.3f} of units with p = 0",
                      "changes_in_training", **numbers)
    if p in (0.0, 1.0):  # nothing random to test
        return numbers
    numbers["p_value"] = rate_p_value(int(dropped.sum()), int(ratio.size), p)
    if numbers["p_value"] < ALPHA:
        raise Finding(f"dropped {numbers['dropped']:.3f} of units, expected p = {p} "
                      f"(binomial p-value {numbers['p_value']:.1e})", "dropout_wrong_scale", **numbers)
    return numbers
