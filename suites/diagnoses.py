"""Named diagnoses: the mistakes from-scratch RNN authors make, by stable id, and how a wrong
output is traced back to one of them.

`DIAGNOSES` maps each id to the sentence a user reads. The ids are a public contract (results
JSON, planted-bug tests), so they never change meaning.

`diagnose` explains a forward pass that differs from the reference (or raised). It first asks
the implementation two more questions (probes): does it work when the zero initial state is
passed explicitly (then h0=None is not handled), and does it give the right answer when the
input is handed over time-major (then batch_first is ignored). Then it recomputes the reference
with each named mistake (`rnnbench.suites.variants`) and names the one the implementation
reproduces. Last, final states that contradict the module's own outputs are named. Other
checks name their findings themselves (init, dropout, error inputs, parameter names).
"""
from __future__ import annotations

import numpy as np

from rnnbench.reference import io_shapes
from rnnbench.reference.numerics import state_names
from rnnbench.suites import variants
from rnnbench.suites.compare import agree, excess
from rnnbench.suites.layers import is_batched, time_major
from rnnbench.suites.results import Finding

DIAGNOSES: dict[str, str] = {
    "h0_none_unhandled": "h0=None not handled (crash, or initial state not zeros)",
    "h0_ignored": "the given initial state is ignored",
    "h_n_no_layer_dim": "h_n has no layer dimension",
    "h_n_layout": "h_n layers/directions in the wrong order",
    "weight_transposed": "W used transposed (W^T instead of W)",
    "missing_nonlinearity": "nonlinearity missing (no tanh)",
    "wrong_nonlinearity": "tanh and relu confused",
    "init_bound_1_over_h": "init bound uses 1/H instead of 1/sqrt(H)",
    "init_wrong_distribution": "parameters not drawn from U(-1/sqrt(H), 1/sqrt(H)) "
                               "(randn, zeros, orthogonal, ...)",
    "time_reversed": "sequence processed in the wrong time order",
    "reverse_not_reversed": "reverse direction not reversed in time",
    "reverse_h_n_wrong_end": "h_n of the reverse direction taken at the wrong end",
    "batch_first_ignored": "batch_first ignored",
    "dropout_in_eval": "dropout active in eval mode",
    "dropout_after_last_layer": "dropout applied after the last layer",
    "dropout_wrong_scale": "dropout not scaled by 1/(1-p) (or wrong rate)",
    "lstm_gate_order": "LSTM gates not in torch's i,f,g,o order",
    "gru_gate_order": "GRU gates not in torch's r,z,n order",
    "gru_cho_reset": "Cho-2014 GRU: reset gate applied before the hidden matmul",
    "gru_swapped_z": "GRU update uses z and 1-z swapped",
    "single_bias": "one bias instead of two (bias_hh missing or ignored)",
    "bias_ignored": "biases not used",
    "input_mutated": "the implementation modified its input",
    "silent_broadcast": "a wrongly shaped input was silently accepted",
    "param_names": "parameter names differ from the spec's (torch.nn's for its kinds)",
    "param_shapes": "parameter shapes differ from torch.nn's",
    "output_h_n_mismatch": "h_n does not match the last output step",
    "layer_input_wrong": "upper layers fed the wrong input (e.g. the raw input, or one direction only)",
    # The implicit kind's.
    "implicit_d_library_variant": "D multiplies [U_t, H_{t-1}] (torchidl's code), not U_t as documented",
    "implicit_solver_early_stop": "the fixed-point solver stops before its tolerance is met",
    "implicit_not_well_posed": "A is not rescaled to ||A||_inf <= kappa before the solve",
    "implicit_param_mutated": "the well-posedness rescale changes the stored parameter A",
    "implicit_rescale_straight_through": "the gradient of A skips the rescale (straight-through)",
    "implicit_no_convergence_warning": "a solve that hits its iteration cap gives no warning",
    "implicit_shared_solver_state": "solver settings are shared between models (class attributes)",
}


def diagnose(trial, observed: dict | None) -> str | None:
    """The diagnosis id of a trial whose outputs (`observed`, None if forward raised) are wrong."""
    tol = trial.tolerance()
    expected = trial.expected()
    for probe in (_h0_none_unhandled, _batch_first_ignored, _training_changes_output):
        found = probe(trial, observed, expected, tol)
        if found:
            return found
    if observed is None:
        return None
    return (variants.match(trial.cfg, trial.params, trial.x64, trial.hx64, observed, expected, tol)
            or final_state_mismatch(trial.cfg, observed, tol))


def final_state_mismatch(cfg, pieces: dict, tol) -> str | None:
    """What is wrong when the top layer's h_n contradicts the module's own output sequence (None
    when it does not): each direction's h_n is its output at the last timestep it processed,
    t = L-1 forward, t = 0 reverse."""
    if cfg.is_cell:
        return None
    seq = time_major(cfg, pieces["output"])
    h_n = pieces["h_n"] if is_batched(cfg, pieces["output"]) else pieces["h_n"][:, None]
    layers, directions, width = cfg.num_layers, cfg.num_directions, cfg.output_size

    def ends_at(index: int, d: int, last: bool) -> bool:
        """Whether h_n[index] is direction d's output at its last (or first) processed step."""
        step = -1 if (d == 0) == last else 0
        return excess(h_n[index], seq[step][..., d * width:(d + 1) * width], tol) <= 1.0

    top = (layers - 1) * directions
    if all(ends_at(top + d, d, last=True) for d in range(directions)):
        return None
    if layers > 1 and directions == 2 and all(ends_at(d * layers + layers - 1, d, last=True)
                                              for d in range(directions)):
        return "h_n_layout"
    if len(seq) > 1:
        if ends_at(top, 0, last=False):
            return "time_reversed"
        if directions == 2 and ends_at(top, 0, last=True) and ends_at(top + 1, 1, last=False):
            return "reverse_h_n_wrong_end"
    return "output_h_n_mismatch"


def _h0_none_unhandled(trial, observed, expected, tol) -> str | None:
    """hx=None fails, but passing zeros explicitly gives the right answer."""
    if trial.hx64 is not None:
        return None
    shapes = io_shapes(trial.cfg, trial.case.batch, trial.case.steps)
    zeros = {name: trial.subject.tensor(np.zeros(shapes[name]), trial.dtype)
             for name in state_names(trial.cfg)}
    try:
        with_zeros = trial.run(hx=zeros)
    except Finding:
        return None
    return "h0_none_unhandled" if agree(with_zeros, expected, tol) else None


def _training_changes_output(trial, observed, expected, tol) -> str | None:
    """A module without dropout that is right in eval mode but wrong in training mode drops
    units with p = 0."""
    if not trial.module.training or trial.cfg.is_cell or trial.cfg.dropout:
        return None
    trial.module.eval()
    try:
        in_eval = trial.run()
    except Finding:
        return None
    finally:
        trial.module.train()
    return "dropout_wrong_scale" if agree(in_eval, expected, tol) else None


def dropout_in_eval(trial) -> bool:
    """Whether the trial's module built with dropout=0 (same parameters) equals the reference in
    eval mode, so that dropout is what makes it wrong."""
    try:
        without = trial.subject.build(trial.cfg.replace(dropout=0.0), trial.dtype, trial.params)
        return agree(trial.run(module=without, cfg=trial.cfg), trial.expected(), trial.tolerance())
    except Finding:
        return False


def _batch_first_ignored(trial, observed, expected, tol) -> str | None:
    """With batch_first=True the module is right when handed the input time-major."""
    cfg = trial.cfg
    if not (cfg.batch_first and is_batched(cfg, trial.x64)):
        return None
    time_major_cfg = cfg.replace(batch_first=False)
    try:
        seen = trial.run(trial.tensors()[0].transpose(0, 1), module=trial.module, cfg=time_major_cfg)
    except Finding:
        return None
    want = {**expected, "output": expected["output"].swapaxes(0, 1)}
    return "batch_first_ignored" if agree(seen, want, tol) else None
